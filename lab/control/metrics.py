"""Metrics of one instant: the seed's five numbers plus centre of mass, centre of pressure,
support state and contact margin. Computed from the :class:`~lab.sim.engine.Engine` interface,
so every engine gets the same definitions."""

import math
from dataclasses import dataclass, fields

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
        d = {}
        for k in _FIELDS:
            v = getattr(self, k)
            if isinstance(v, float):
                v = round(v, 6)
            elif isinstance(v, tuple):
                v = [round(float(x), 6) for x in v]
            d[k] = v
        return d


def convex_hull(points) -> list:
    """Counter-clockwise hull of 2-D points (k, 2) by Andrew's monotone chain, as a list of (x, y)."""
    if isinstance(points, np.ndarray):
        points = points.tolist()
    pts = sorted(set(map(tuple, points)))
    if len(pts) <= 2:
        return pts

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
    return lower[:-1] + upper[:-1]


def support_margin(hull, p) -> float:
    """Signed distance [m] from ``p`` (x, y) to the hull's boundary: positive inside."""
    px, py = float(p[0]), float(p[1])
    n = len(hull)
    if n == 0:
        return float("nan")
    if n == 1:
        return -math.hypot(px - hull[0][0], py - hull[0][1])
    best, inside = math.inf, n > 2
    for i in range(n if n > 2 else 1):
        ax, ay = hull[i]
        bx, by = hull[(i + 1) % n]
        abx, aby = bx - ax, by - ay
        t = ((px - ax) * abx + (py - ay) * aby) / max(abx * abx + aby * aby, 1e-12)
        t = min(1.0, max(0.0, t))
        best = min(best, math.hypot(px - ax - t * abx, py - ay - t * aby))
        if abx * (py - ay) - aby * (px - ax) < 0:
            inside = False
    return best if inside else -best


def contact_support(contacts) -> tuple:
    """``(cop, hull, support)`` of foot contacts (:class:`~lab.sim.engine.Contact`): the centre of pressure
    (x, y) [m] weighted by the normal forces (None without contact or force), the support polygon (the
    counter-clockwise hull of the contact points, a list of (x, y) [m]) and none|left|right|double."""
    if not contacts:
        return None, [], "none"
    sides, pts = set(), []  # plain floats: a handful of points, where numpy's per-call cost dominates
    total = cx = cy = 0.0
    for c in contacts:
        x, y, _ = c.pos.tolist()
        sides.add(c.side)
        pts.append((x, y))
        total += c.fz
        cx += c.fz * x
        cy += c.fz * y
    support = "double" if len(sides) == 2 else ("left" if 0 in sides else "right")
    cop = (cx / total, cy / total) if total > 1e-6 else None
    return cop, convex_hull(pts), support


_FIELDS = [f.name for f in fields(Metrics)]


def measure(engine: Engine, q_target: np.ndarray, x0: float, enabled: bool = True, **extra) -> Metrics:
    """One metrics sample of ``engine``; ``x0`` is the root x at reset [m]."""
    pos, _ = engine.base_pose()
    tq = engine.torso_quat().tolist()
    q, _ = engine.joint_state()
    com = engine.com().tolist()
    contacts = engine.foot_contacts()
    cop, hull, support = contact_support(contacts)
    margin = support_margin(hull, com) if contacts else None
    return Metrics(
        sim_time=engine.time,
        pelvis_z=float(pos[2]),
        forward_x=float(pos[0] - x0),
        pitch_deg=quat_pitch_deg(tq),
        roll_deg=quat_roll_deg(tq),
        max_joint_err=float(np.abs(q_target - q).max()),
        com=tuple(com),
        cop=cop,
        support=support,
        margin=margin,
        **extra,
    )
