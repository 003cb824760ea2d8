"""Mass and inertia parity between MuJoCo and PyBullet, link by link, for one URDF robot.

Links are matched by name: a MuJoCo body is named after its URDF link. A URDF link MuJoCo has no
body for (a fixed-joint link MuJoCo fused into its parent) is reported as ``merged``, with no MuJoCo
values. Inertias are compared as principal moments, each engine's sorted ascending (MuJoCo's
``body_inertia`` and PyBullet's ``localInertiaDiagonal`` are both principal, on axes each engine
chose); the CoM is compared in the link frame.

MuJoCo's model is the reference both engines share: :class:`~lab.sim.pybullet_engine.PybulletEngine`
gives PyBullet MuJoCo's values where a link differs by more than :data:`PARITY_TOLERANCE`.
"""

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

PARITY_TOLERANCE = 0.01  # relative difference of a link's mass or inertia above which the engines disagree


class LinkInertia(NamedTuple):
    """One link's inertial: ``mass`` [kg]; ``diag`` (3,) principal moments [kg·m²]; ``pos`` (3,) CoM in
    the link frame [m]; ``quat`` (4,) w, x, y, z of the principal axes in the link frame."""

    mass: float
    diag: tuple
    pos: tuple
    quat: tuple


@dataclass(frozen=True)
class LinkParity:
    """One link in both engines. ``rel_diff``: |PyBullet - MuJoCo| / the larger of the two masses;
    ``inertia_rel_diff``: the same over the principal moments (the largest of the three, relative to the
    largest moment); ``com_diff``: distance between the two CoMs in the link frame [m]. A ``merged`` link
    has no MuJoCo values (None) and zero differences."""

    link: str
    mujoco_mass: float | None
    pybullet_mass: float
    rel_diff: float
    inertia_rel_diff: float
    mujoco_inertia: tuple | None  # (3,) [kg·m²], ascending
    pybullet_inertia: tuple  # (3,) [kg·m²], ascending
    com_diff: float  # [m]
    merged: bool = False

    @property
    def disagrees(self) -> bool:
        """Mass or inertia differ by more than :data:`PARITY_TOLERANCE`."""
        return not self.merged and max(self.rel_diff, self.inertia_rel_diff) > PARITY_TOLERANCE

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("mujoco_inertia", "pybullet_inertia"):
            if d[k] is not None:
                d[k] = [_r(v, 9) for v in d[k]]
        for k in ("mujoco_mass", "pybullet_mass", "rel_diff", "inertia_rel_diff", "com_diff"):
            if d[k] is not None:
                d[k] = _r(d[k], 6)
        d["disagrees"] = self.disagrees
        return d


def _r(v: float, nd: int) -> float | None:
    return round(float(v), nd) if math.isfinite(v) else None


def mujoco_links(robot) -> dict:
    """Every MuJoCo body of ``robot`` but the world as :class:`LinkInertia`, by body (= URDF link) name."""
    m = robot.model
    return {
        m.body(b).name: LinkInertia(
            float(m.body_mass[b]),
            tuple(map(float, m.body_inertia[b])),
            tuple(map(float, m.body_ipos[b])),
            tuple(map(float, m.body_iquat[b])),
        )
        for b in range(1, m.nbody)
    }


def _rel(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else 0.0


def parity_rows(mujoco: dict, pybullet: dict) -> list[LinkParity]:
    """One :class:`LinkParity` per PyBullet link (in PyBullet's order), from two ``name -> LinkInertia``
    tables (:func:`mujoco_links` and ``PybulletEngine.link_inertias()``)."""
    rows = []
    for name, p in pybullet.items():
        pi = tuple(sorted(p.diag))
        m = mujoco.get(name)
        if m is None:
            rows.append(LinkParity(name, None, p.mass, 0.0, 0.0, None, pi, 0.0, merged=True))
            continue
        mi = tuple(sorted(m.diag))
        scale = max(*mi, *pi)
        inertia_diff = max(abs(a - b) for a, b in zip(mi, pi)) / scale if scale > 0 else 0.0
        com = float(np.linalg.norm(np.subtract(m.pos, p.pos)))
        rows.append(LinkParity(name, m.mass, p.mass, _rel(m.mass, p.mass), inertia_diff, mi, pi, com))
    return rows


def parity_table(robot, pb_engine) -> list[LinkParity]:
    """The per-link comparison of ``robot`` in MuJoCo against ``pb_engine`` (a PybulletEngine) as it is now."""
    return parity_rows(mujoco_links(robot), pb_engine.link_inertias())


def parity_summary(rows: list[LinkParity]) -> dict:
    """How many links were compared, how many disagree, and the largest mass/inertia difference."""
    compared = [r for r in rows if not r.merged]
    worst = max((max(r.rel_diff, r.inertia_rel_diff) for r in compared), default=0.0)
    return {
        "links": len(compared),
        "merged": [r.link for r in rows if r.merged],
        "disagree": [r.link for r in rows if r.disagrees],
        "max_diff": round(worst, 6),
    }
