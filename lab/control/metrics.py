"""Metrics of one instant: the seed's five numbers plus centre of mass, centre of pressure,
support state and contact margin. Computed from the :class:`~lab.sim.engine.Engine` interface,
so every engine gets the same definitions."""

from dataclasses import asdict, dataclass

import numpy as np

from lab.sim.engine import Engine, quat_pitch_deg, quat_roll_deg

SUPPORT = ("none", "left", "right", "double")


@dataclass(frozen=True)
class Metrics:
    sim_time: float  # [s]
    pelvis_z: float  # root height [m]
    forward_x: float  # root x since reset [m]
    pitch_deg: float  # torso pitch, + leans forward [deg]
    roll_deg: float  # torso roll [deg]
    max_joint_err: float  # max |target - actual| over actuated joints [rad]
    com: tuple  # (x, y, z) [m]
    cop: tuple | None  # (x, y) [m], None without contact
    support: str  # none | left | right | double
    margin: float | None  # distance of the CoM ground projection inside the support polygon [m]; < 0 outside
    pelvis_z_target: float | None = None  # [m], in modes that track a height
    push: bool = False  # a push is being applied

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 6)
            elif isinstance(v, tuple):
                d[k] = [round(float(x), 6) for x in v]
        return d


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise hull of 2-D points (k, 2) by Andrew's monotone chain."""
    pts = sorted(set(map(tuple, np.round(points, 6))))
    if len(pts) <= 2:
        return np.array(pts)

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def support_margin(hull: np.ndarray, p: np.ndarray) -> float:
    """Signed distance [m] from ``p`` (2,) to the hull's boundary: positive inside."""
    if len(hull) == 0:
        return float("nan")
    if len(hull) == 1:
        return -float(np.linalg.norm(p - hull[0]))
    dists, inside = [], True
    n = len(hull)
    for i in range(n if n > 2 else 1):
        a, b = hull[i], hull[(i + 1) % n]
        ab = b - a
        t = np.clip(np.dot(p - a, ab) / max(np.dot(ab, ab), 1e-12), 0, 1)
        dists.append(np.linalg.norm(p - (a + t * ab)))
        if n > 2 and ab[0] * (p[1] - a[1]) - ab[1] * (p[0] - a[0]) < 0:
            inside = False
    if n <= 2:
        inside = False
    d = float(min(dists))
    return d if inside else -d


def measure(engine: Engine, q_target: np.ndarray, x0: float, enabled: bool = True, **extra) -> Metrics:
    """One metrics sample of ``engine``; ``x0`` is the root x at reset [m]."""
    pos, _ = engine.base_pose()
    tq = engine.torso_quat()
    q, _ = engine.joint_state()
    com = engine.com()
    contacts = engine.foot_contacts()
    cop, margin, support = None, None, "none"
    if contacts:
        sides = {c.side for c in contacts}
        support = "double" if len(sides) == 2 else ("left" if 0 in sides else "right")
        f = np.array([c.fz for c in contacts])
        xy = np.array([c.pos[:2] for c in contacts])
        if f.sum() > 1e-6:
            cop = tuple((xy * f[:, None]).sum(0) / f.sum())
        margin = support_margin(convex_hull(xy), com[:2])
    return Metrics(
        sim_time=engine.time,
        pelvis_z=float(pos[2]),
        forward_x=float(pos[0] - x0),
        pitch_deg=quat_pitch_deg(tq),
        roll_deg=quat_roll_deg(tq),
        max_joint_err=float(np.max(np.abs(q_target - q))),
        com=tuple(float(v) for v in com),
        cop=cop,
        support=support,
        margin=margin,
        **extra,
    )
