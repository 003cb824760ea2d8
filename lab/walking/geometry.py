"""Gait geometry measured from the model (never copied from a spec sheet).

The foot is the body the robot config names as a foot; its *ankle frame* is that body's origin
(for Q1 the ankle-roll axis). Foot length and width are the extent of the foot's collision
geometry (every collision geom's bounding box, in the foot frame); heel and toe offsets are
measured from the ankle along the foot's x axis. Heights are measured at the nominal standing
pose (``Robot.init_qpos``), where the lowest collision point is 0.5 mm above the floor.
"""

from dataclasses import dataclass

import mujoco
import numpy as np

from lab.errors import LabError
from lab.robots.model import Robot, side_of

SIDES = ("left", "right")


SCALAR_FIELDS = (  # the scalar lengths of a GaitGeometry [m], in the order reports list them
    "foot_length",
    "foot_width",
    "heel_offset",
    "toe_offset",
    "sole_depth",
    "balance_x",
    "ankle_spacing",
    "pelvis_height",
    "pelvis_height_straight",
    "leg_length",
    "thigh",
    "shank",
    "com_height",
)


@dataclass(frozen=True)
class Leg:
    """One leg's six hinge joints, hip to ankle, as actuator indices into ``Robot.joint_names``.

    ``hip_pitch``, ``knee`` and ``ankle_pitch`` index into ``act`` (0..5); ``knee_sign`` is +1 when
    a positive knee angle bends the knee (from the joint range).
    """

    side: int  # 0 left, 1 right
    foot_body: int
    act: tuple  # (6,) actuator indices, hip -> ankle
    dof: tuple  # (6,) MuJoCo dof addresses
    qadr: tuple  # (6,) MuJoCo qpos addresses
    lo: tuple  # (6,) joint lower limits [rad]
    hi: tuple  # (6,) joint upper limits [rad]
    hip_pitch: int
    knee: int
    ankle_pitch: int
    knee_sign: float


@dataclass(frozen=True)
class GaitGeometry:
    """Lengths [m] of the robot that a gait is planned with; ``*_xy``/``*_xyz`` are world vectors."""

    foot_length: float
    foot_width: float
    heel_offset: float  # heel behind the ankle, positive [m]
    toe_offset: float  # toe ahead of the ankle [m]
    sole_depth: float  # ankle above the sole [m]
    balance_x: float  # the foot's balance point (sole centre) ahead of the ankle [m]
    ankle_spacing: float  # lateral distance between the two ankles at the standing pose [m]
    pelvis_height: float  # root height at the nominal standing pose [m]
    pelvis_height_straight: float  # root height with straight legs [m]
    leg_length: float  # hip-pitch axis to ankle, straight leg [m]
    thigh: float  # hip-pitch axis to knee axis [m]
    shank: float  # knee axis to ankle [m]
    com_height: float  # whole-body CoM height at the standing pose [m]
    com_offset: tuple  # CoM minus root position at the standing pose (x, y, z) [m]
    ankle_xyz: tuple  # ((x, y, z) left, (x, y, z) right) ankle positions at the standing pose [m]
    sole_corners: tuple  # ((x, y, z), ...) sole corners in the ankle frame [m]: heel/toe x left/right y
    legs: tuple  # (Leg left, Leg right)

    def to_dict(self) -> dict:
        out = {}
        for k in SCALAR_FIELDS:
            out[f"{k}_m"] = round(float(getattr(self, k)), 6)
        out["com_offset_m"] = [round(float(v), 6) for v in self.com_offset]
        out["ankle_xyz_m"] = [[round(float(v), 6) for v in p] for p in self.ankle_xyz]
        return out


def _subtree(m: mujoco.MjModel, body: int) -> list:
    out = []
    for b in range(m.nbody):
        p = b
        while p > 0:
            if p == body:
                out.append(b)
                break
            p = int(m.body_parentid[p])
    return out


def find_legs(robot: Robot) -> tuple:
    """(left, right) :class:`Leg`: the hinge joints between the root and each foot body."""
    m = robot.model
    feet = {}
    for b in robot.foot_bodies:
        side = side_of(m.body(b).name)
        if side is None:
            continue
        depth = len(_chain(m, b))
        if side not in feet or depth > feet[side][1]:
            feet[side] = (b, depth)
    if set(feet) != {0, 1}:
        raise LabError(
            "walking needs a left and a right foot body",
            f"foot bodies found: {[m.body(b).name for b in robot.foot_bodies]} (config foot_bodies pattern)",
        )
    dof_to_act = {int(d): i for i, d in enumerate(robot.dadr)}
    legs = []
    for side in (0, 1):
        body = feet[side][0]
        joints = [j for j in _chain(m, body) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        if len(joints) != 6 or any(int(m.jnt_dofadr[j]) not in dof_to_act for j in joints):
            raise LabError(
                f"the {SIDES[side]} leg has {len(joints)} actuated hinge joints between the root and the foot; walking needs 6",
                "hip pitch/roll/yaw, knee, ankle pitch/roll, each driven by one motor",
            )
        names = [m.joint(j).name for j in joints]

        def find(key, names=names, side=side):
            hits = [i for i, n in enumerate(names) if key in n]
            if len(hits) != 1:
                raise LabError(
                    f"cannot tell the {SIDES[side]} leg's {key} joint from the names {names}",
                    "name the leg joints *hip_pitch*, *knee*, *ankle_pitch*",
                )
            return hits[0]

        kp = find("knee")
        lo = [float(m.jnt_range[j, 0]) if m.jnt_limited[j] else -np.pi for j in joints]
        hi = [float(m.jnt_range[j, 1]) if m.jnt_limited[j] else np.pi for j in joints]
        legs.append(
            Leg(
                side=side,
                foot_body=body,
                act=tuple(dof_to_act[int(m.jnt_dofadr[j])] for j in joints),
                dof=tuple(int(m.jnt_dofadr[j]) for j in joints),
                qadr=tuple(int(m.jnt_qposadr[j]) for j in joints),
                lo=tuple(lo),
                hi=tuple(hi),
                hip_pitch=find("hip_pitch"),
                knee=kp,
                ankle_pitch=find("ankle_pitch"),
                knee_sign=1.0 if hi[kp] >= -lo[kp] else -1.0,
            )
        )
    return tuple(legs)


def _chain(m: mujoco.MjModel, body: int) -> list:
    """Joint ids from the root down to ``body`` (root first)."""
    out = []
    b = body
    while b > 0:
        start, n = int(m.body_jntadr[b]), int(m.body_jntnum[b])
        out = list(range(start, start + n)) + out if n > 0 else out
        b = int(m.body_parentid[b])
    return out


def _foot_points(m, d, foot: int) -> np.ndarray:
    """Corners of every collision geom's bounding box in the foot subtree, in the foot frame (k, 3)."""
    pts = []
    R_f, p_f = d.xmat[foot].reshape(3, 3), d.xpos[foot]
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    bodies = set(_subtree(m, foot))
    for g in range(m.ngeom):
        if m.geom_bodyid[g] not in bodies or not (m.geom_contype[g] or m.geom_conaffinity[g]):
            continue
        c, h = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
        local = c + signs * h  # (8, 3) in the geom frame
        world = d.geom_xpos[g] + local @ d.geom_xmat[g].reshape(3, 3).T
        pts.append((world - p_f) @ R_f)
    if not pts:
        raise LabError(f"foot body '{m.body(foot).name}' has no collision geometry", "give the foot collision geoms")
    return np.concatenate(pts)


def _pose_data(robot: Robot, qpos: np.ndarray) -> mujoco.MjData:
    d = mujoco.MjData(robot.model)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(robot.model, d)
    mujoco.mj_comPos(robot.model, d)
    return d


def measure_geometry(robot: Robot) -> GaitGeometry:
    """Measure the gait geometry of ``robot`` from its compiled model."""
    m = robot.model
    legs = find_legs(robot)
    d = _pose_data(robot, robot.init_qpos)
    pts = [_foot_points(m, d, leg.foot_body) for leg in legs]
    p = pts[0]
    heel, toe = -float(p[:, 0].min()), float(p[:, 0].max())
    width = float(p[:, 1].max() - p[:, 1].min())
    sole = -float(p[:, 2].min())
    y_mid = 0.5 * float(p[:, 1].max() + p[:, 1].min())
    corners = tuple((x, y_mid + s * width / 2, -sole) for x in (-heel, toe) for s in (1.0, -1.0))
    ankles = tuple(tuple(float(v) for v in d.xpos[leg.foot_body]) for leg in legs)
    spacing = float(abs(ankles[0][1] - ankles[1][1]))
    root = robot.root_body
    com = d.subtree_com[root].copy()
    pelvis = d.xpos[root].copy()

    # straight legs: every leg joint at zero (clipped into its range), root raised to touch the floor
    q = robot.init_qpos.copy()
    for leg in legs:
        for a, lo, hi in zip(leg.qadr, leg.lo, leg.hi):
            q[a] = np.clip(0.0, lo, hi)
    ds = _pose_data(robot, q)
    lowest = min(
        float((ds.xpos[leg.foot_body] + pp @ ds.xmat[leg.foot_body].reshape(3, 3).T)[:, 2].min())
        for leg, pp in zip(legs, pts)
    )
    straight = float(q[2] - lowest + 0.0005)  # same 0.5 mm clearance as the standing pose
    jid = [int(m.dof_jntid[legs[0].dof[i]]) for i in (legs[0].hip_pitch, legs[0].knee)]
    hip_p, knee_p = ds.xanchor[jid[0]].copy(), ds.xanchor[jid[1]].copy()
    ankle_p = ds.xpos[legs[0].foot_body].copy()
    return GaitGeometry(
        foot_length=heel + toe,
        foot_width=width,
        heel_offset=heel,
        toe_offset=toe,
        sole_depth=sole,
        balance_x=0.5 * (toe - heel),
        ankle_spacing=spacing,
        pelvis_height=float(pelvis[2]),
        pelvis_height_straight=straight,
        leg_length=float(np.linalg.norm(ankle_p - hip_p)),
        thigh=float(np.linalg.norm(knee_p - hip_p)),
        shank=float(np.linalg.norm(ankle_p - knee_p)),
        com_height=float(com[2]),
        com_offset=tuple(float(v) for v in com - pelvis),
        ankle_xyz=ankles,
        sole_corners=corners,
        legs=legs,
    )
