"""A family of synthetic humanoids (URDF and MJCF) the lab must make stand out of the box.

Each :class:`HumanoidSpec` is one robot: the built-in Q1's layout (pelvis root, legs, waist, torso, head, arms)
scaled in size and mass, plus the features that break public robots in practice: heavy upper bodies, 3-DoF
waists, very light wrist and finger links, mimic joints, a single-pitch ankle, soles not flat at q=0, mesh
feet, MJCF with no actuators, motors without ctrlrange or position servos, and URDF efforts left at 0.

Frames: x forward, y left, z up; every joint frame is its child link's frame (URDF) or body frame (MJCF).
Joint axes: pitch = y, roll = x, yaw = z. At q=0 the legs are straight and the soles flat (unless
``toe_down_deg``); the feet are the only geoms that reach the floor.

``python -m lab.robots.family OUT_DIR`` writes the whole family and prints the paths.
"""

import math
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError

G = 9.81  # [m/s^2]
# Q1 proportions at scale 1 [m]
HIP_Y, HIP_Z = 0.0905, -0.005  # hip joints from the pelvis origin: ankles 181 mm apart
THIGH, SHANK = 0.20, 0.20  # hip -> knee -> ankle: leg 0.40 m
FOOT = (0.145, 0.046, 0.025)  # foot box length, width, thickness
FOOT_X = 0.0225  # foot box centre ahead of the ankle
SOLE = 0.035  # ankle height above the sole
PELVIS = (0.10, 0.16, 0.08)
WAIST_Z = 0.04  # waist joints above the pelvis origin
TORSO = (0.10, 0.17, 0.18)  # its centre 0.10 above the waist joints
SHOULDER = (0.0, 0.115, 0.17)  # shoulder pitch joints in the torso frame
SHOULDER_OUT = 0.025  # shoulder roll joint outboard of the pitch joint
UPPER_ARM, FOREARM = 0.12, 0.13
HAND = (0.06, 0.025, 0.07)
PHALANX = (0.008, 0.008, 0.02)
JAW = (0.02, 0.006, 0.04)

FORMATS = ("urdf", "mjcf")
WAIST_DOFS = (0, 1, 3)
ANKLE_STYLES = ("pitch_roll", "single")
ACTUATORS = ("none", "motor", "motor_frcrange", "position")


@dataclass(frozen=True)
class HumanoidSpec:
    """One synthetic humanoid. Lengths scale with ``scale`` (1.0 = the built-in Q1), masses with ``mass`` [kg]."""

    name: str
    fmt: str  # "urdf" | "mjcf"
    scale: float  # 1.0: pelvis 0.44 m above the floor with straight legs, leg 0.40 m, foot 145 x 46 mm
    mass: float  # total mass [kg]
    upper_mass_frac: float = 0.55  # fraction of the mass in pelvis + torso + head + arms
    waist_dof: int = 1  # 0 (torso fixed), 1 (yaw) or 3 (yaw, roll, pitch)
    wrists: bool = False  # 2-DoF wrists (roll, pitch) with links of 0.1 % of the total mass each
    fingers: int = 0  # fingers per hand, 3 hinges each, links of 5-15 g
    mimic: bool = False  # URDF only: a 2-jaw gripper per hand, the second jaw a <mimic> of the first
    ankle_style: str = "pitch_roll"  # or "single": one *_ankle_joint (pitch), foot body *_ankle_link
    toe_down_deg: float = 0.0  # [deg] the foot box is mounted pitched toe-down by this at q=0
    foot_mesh: bool = False  # foot collision and visual: a binary STL box with chamfered bottom edges
    actuators: str = "none"  # MJCF only: "none" | "motor" | "motor_frcrange" | "position"
    efforts: bool = True  # URDF: <limit effort> given; False writes effort="0" ("not given")

    def __post_init__(self):
        for field, value, allowed in (
            ("fmt", self.fmt, FORMATS),
            ("waist_dof", self.waist_dof, WAIST_DOFS),
            ("ankle_style", self.ankle_style, ANKLE_STYLES),
            ("actuators", self.actuators, ACTUATORS),
        ):
            if value not in allowed:
                raise LabError(f"spec {self.name}: {field} {value!r} is not one of {', '.join(map(str, allowed))}")
        if not (self.scale > 0 and self.mass > 0 and 0 < self.upper_mass_frac < 1 and self.fingers >= 0):
            raise LabError(
                f"spec {self.name}: expected scale > 0, mass > 0, 0 < upper_mass_frac < 1, fingers >= 0; "
                f"got {self.scale}, {self.mass}, {self.upper_mass_frac}, {self.fingers}"
            )
        if self.mimic and (self.fmt != "urdf" or self.fingers):
            raise LabError(f"spec {self.name}: mimic grippers need fmt 'urdf' and fingers 0", "drop mimic or fingers")
        if self.fmt == "urdf" and self.actuators != "none":
            raise LabError(f"spec {self.name}: actuators {self.actuators!r} need fmt 'mjcf'", "URDF has no actuators")

    @property
    def leg_length(self) -> float:
        """Hip to ankle with straight legs [m]."""
        return (THIGH + SHANK) * self.scale

    @property
    def pelvis_height(self) -> float:
        """Pelvis origin above flat soles with straight legs [m]."""
        return (-HIP_Z + THIGH + SHANK + SOLE) * self.scale

    @property
    def leg_torque(self) -> float:
        """Hip pitch and knee torque limit [N·m]: 2.5 x body weight x half a leg."""
        return 2.5 * self.mass * G * self.leg_length / 2


FAMILY = {
    s.name: s
    for s in (
        HumanoidSpec("tiny", "urdf", 0.5, 5.0, waist_dof=0),
        HumanoidSpec("small", "urdf", 0.75, 12.0, fingers=2),
        HumanoidSpec("mid_waist3", "urdf", 1.2, 33.0, upper_mass_frac=0.65, waist_dof=3, wrists=True),
        HumanoidSpec("heavy", "urdf", 1.6, 67.0, wrists=True, fingers=4),
        HumanoidSpec("giant", "urdf", 2.0, 80.0, waist_dof=3),
        HumanoidSpec("mimic", "urdf", 1.0, 20.0, mimic=True),
        HumanoidSpec("toe_single", "urdf", 1.0, 25.0, ankle_style="single", toe_down_deg=10.0, foot_mesh=True),
        HumanoidSpec("no_effort", "urdf", 1.0, 15.0, efforts=False),
        HumanoidSpec("mjcf_bare", "mjcf", 1.3, 40.0, actuators="none"),
        HumanoidSpec("mjcf_motor", "mjcf", 1.0, 29.0, actuators="motor_frcrange", toe_down_deg=5.0),
        HumanoidSpec("mjcf_pos", "mjcf", 1.1, 30.0, actuators="position"),
    )
}


def get(name: str) -> HumanoidSpec:
    if name not in FAMILY:
        raise LabError(f"unknown family robot {name!r}; available: {', '.join(FAMILY)}")
    return FAMILY[name]


# ---------------------------------------------------------------------------------------------------------------
# The robot as a tree, shared by both writers


@dataclass(frozen=True)
class Geom:
    """A primitive: ``box`` size = full lengths, ``cylinder`` (radius, length) along z, ``sphere`` (radius,),
    ``mesh`` size = the box it was made from. ``pos`` [m] and ``pitch`` [rad] in the link frame."""

    kind: str
    size: tuple
    pos: tuple = (0.0, 0.0, 0.0)
    pitch: float = 0.0
    material: str = "grey"
    collide: bool = True


@dataclass(frozen=True)
class Link:
    name: str
    mass: float  # [kg]
    geoms: tuple  # the first one (or ``shape``) gives the inertia
    shape: Geom | None = None  # inertia shape of a link drawn by nothing


@dataclass(frozen=True)
class Joint:
    name: str
    parent: str
    child: str
    pos: tuple  # [m] in the parent frame
    axis: str = ""  # "x" | "y" | "z"; "" for a fixed joint
    lower: float = 0.0  # [rad]
    upper: float = 0.0  # [rad]
    effort: float = 0.0  # [N·m]
    velocity: float = 20.0  # [rad/s]
    damping: float = 0.05  # [N·m·s/rad]
    armature: float = 0.005  # [kg·m²], MJCF only
    mimic: str = ""  # the joint this one copies (multiplier -1)


def inertia_of(g: Geom, m: float) -> tuple:
    """Principal moments (ixx, iyy, izz) [kg·m²] of a solid primitive of mass ``m`` [kg] in its own frame."""
    if g.kind == "sphere":
        i = 0.4 * m * g.size[0] ** 2
        return i, i, i
    if g.kind == "cylinder":
        r, h = g.size
        i = m * (3 * r * r + h * h) / 12
        return i, i, m * r * r / 2
    x, y, z = g.size
    return m * (y * y + z * z) / 12, m * (x * x + z * z) / 12, m * (x * x + y * y) / 12


def _sig(x: float, digits: int = 3) -> float:
    return float(f"{x:.{digits}g}")


def _clip(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


# joint kind: axis, lower [rad], upper [rad], effort [fraction of HumanoidSpec.leg_torque; None: a small joint]
JOINTS = {
    "hip_pitch": ("y", -2.0, 2.0, 1.0),
    "hip_roll": ("x", -0.5, 0.5, 0.8),
    "hip_yaw": ("z", -0.8, 0.8, 0.5),
    "knee": ("y", 0.0, 2.5, 1.0),
    "ankle_pitch": ("y", -0.9, 0.6, 0.6),
    "ankle": ("y", -0.9, 0.6, 0.6),
    "ankle_roll": ("x", -0.4, 0.4, 0.4),
    "waist_yaw": ("z", -1.2, 1.2, 0.4),
    "waist_roll": ("x", -0.5, 0.5, 0.4),
    "waist_pitch": ("y", -0.5, 1.0, 0.4),
    "head_yaw": ("z", -1.2, 1.2, 0.05),
    "shoulder_pitch": ("y", -3.0, 1.5, 0.1),
    "left_shoulder_roll": ("x", -0.3, 2.5, 0.1),
    "right_shoulder_roll": ("x", -2.5, 0.3, 0.1),
    "shoulder_yaw": ("z", -1.5, 1.5, 0.1),
    "elbow": ("y", -2.3, 0.2, 0.1),
    "wrist_roll": ("x", -1.5, 1.5, None),
    "wrist_pitch": ("y", -1.0, 1.0, None),
    "finger_1": ("y", 0.0, 1.6, None),
    "finger_2": ("y", 0.0, 1.8, None),
    "finger_3": ("y", 0.0, 1.8, None),
    "gripper": ("x", 0.0, 0.7, None),
    "gripper_mimic": ("x", -0.7, 0.0, None),
}


def joint_kind(name: str) -> str:
    """The :data:`JOINTS` key of a joint name: ``left_knee_joint`` -> ``knee``, ``right_finger2_3_joint`` ->
    ``finger_3``, ``left_shoulder_roll_joint`` -> itself less ``_joint`` (its range depends on the side)."""
    short = name.removesuffix("_joint")
    if short in JOINTS:
        return short
    short = re.sub(r"^(left|right)_", "", short)
    return re.sub(r"^finger\d+_", "finger_", short)


class _Builder:
    """Links and joints in tree order (parent before child), with the spec's scale, masses and gains."""

    def __init__(self, spec: HumanoidSpec):
        self.spec, self.s = spec, spec.scale
        self.links, self.joints = [], []
        self.tau = spec.leg_torque
        self.damp = _clip(0.01 * spec.mass * spec.scale, 0.05, 0.5)
        self.arm = _clip(0.0005 * spec.mass * spec.scale, 0.005, 0.05)
        self.vel = _sig(20 / math.sqrt(spec.scale))

    def v(self, *xyz) -> tuple:
        return tuple(c * self.s for c in xyz)

    def link(self, name, mass, *geoms, shape=None):
        self.links.append(Link(name, mass, tuple(geoms), shape))

    def hinge(self, parent, name, pos, mass, *geoms, shape=None, child="", mimic="") -> str:
        """A revolute joint ``name`` (axis, range and effort from :data:`JOINTS`) at ``pos`` [m] on ``parent``,
        and its child link of ``mass`` [kg] drawn by ``geoms`` (``shape``: the inertia of a link drawn by
        nothing), named ``name`` with ``_link`` for ``_joint`` unless ``child``. Returns the child's name."""
        child = child or name.removesuffix("_joint") + "_link"
        axis, lo, hi, frac = JOINTS[joint_kind(name)]
        if frac is None:  # wrists 0.5-2 N·m, fingers and jaws 0.5-1 N·m, the least damping and armature
            effort = _clip(0.02 * self.tau, 0.5, 2.0) if "wrist" in name else _clip(0.002 * self.tau, 0.5, 1.0)
            damp, arm = 0.05, 0.005
        else:
            big = frac >= 0.4
            effort = frac * self.tau
            damp = self.damp if big else max(0.05, 0.5 * self.damp)
            arm = self.arm if big else max(0.005, 0.5 * self.arm)
        limits = (lo, hi, _sig(effort), self.vel, _sig(damp), _sig(arm), mimic)
        self.joints.append(Joint(name, parent, child, pos, axis, *limits))
        if mass:
            self.link(child, mass, *geoms, shape=shape)
        return child

    def fixed(self, name, parent, child, pos):
        self.joints.append(Joint(name, parent, child, pos))

    def nub(self, size) -> Geom:
        """The inertia shape of a link that is only a motor housing: a cube of ``size`` [m] at scale 1."""
        return Geom("box", self.v(size, size, size), collide=False)

    def rod(self, radius, length) -> Geom:
        """A cylinder [m at scale 1] hanging from the link origin."""
        return Geom("cylinder", self.v(radius, length), self.v(0, 0, -length / 2))


def build(spec: HumanoidSpec) -> tuple[list, list]:
    """The robot's links and joints (tree order) for ``spec``; masses add up to ``spec.mass``."""
    b = _Builder(spec)
    upper = spec.mass * spec.upper_mass_frac
    b.link("pelvis", 0.22 * upper, Geom("box", b.v(*PELVIS), material="accent"))
    for side, sy in (("left", 1), ("right", -1)):
        _leg(b, side, sy, spec.mass * (1 - spec.upper_mass_frac) / 2)
    waist = ("yaw", "roll", "pitch")[: spec.waist_dof]
    parent, pos = "pelvis", b.v(0, 0, WAIST_Z)
    for k, j in enumerate(waist):
        last = k == len(waist) - 1
        mass, child = (0.0, "torso_link") if last else (0.02 * upper, "")
        parent = b.hinge(parent, f"waist_{j}_joint", pos, mass, shape=b.nub(0.04), child=child)
        pos = (0.0, 0.0, 0.0)
    if not waist:
        b.fixed("waist_joint", "pelvis", "torso_link", pos)
    torso_mass = (0.48 - 0.02 * max(0, len(waist) - 1)) * upper
    b.link("torso_link", torso_mass, Geom("box", b.v(*TORSO), b.v(0, 0, 0.10)))
    for side, sy in (("left", 1), ("right", -1)):
        _arm(b, side, sy, 0.11 * upper)
    skull = Geom("sphere", b.v(0.06), b.v(0, 0, 0.07))
    visor = Geom("box", b.v(0.02, 0.08, 0.025), b.v(0.055, 0, 0.075), material="dark", collide=False)
    b.hinge("torso_link", "head_yaw_joint", b.v(0, 0, 0.20), 0.08 * upper, skull, visor, child="head_link")
    return b.links, b.joints


def _leg(b: _Builder, side: str, sy: int, mass: float) -> None:
    """Hip pitch/roll/yaw, knee, ankle (pitch + roll, or one pitch) and the foot, ``mass`` [kg] in all."""
    zero = (0.0, 0.0, 0.0)
    hip = b.hinge("pelvis", f"{side}_hip_pitch_joint", b.v(0, sy * HIP_Y, HIP_Z), 0.08 * mass, shape=b.nub(0.05))
    hip = b.hinge(hip, f"{side}_hip_roll_joint", zero, 0.08 * mass, shape=b.nub(0.05))
    thigh = b.hinge(hip, f"{side}_hip_yaw_joint", zero, 0.38 * mass, b.rod(0.03, THIGH))
    shank = b.hinge(thigh, f"{side}_knee_joint", b.v(0, 0, -THIGH), 0.28 * mass, b.rod(0.025, SHANK))
    kind = "mesh" if b.spec.foot_mesh else "box"
    sole = Geom(kind, b.v(*FOOT), b.v(FOOT_X, 0, FOOT[2] / 2 - SOLE), math.radians(b.spec.toe_down_deg), "dark")
    heel = Geom("cylinder", b.v(0.018, 0.02), b.v(0, 0, -0.01), material="dark", collide=False)
    ankle = b.v(0, 0, -SHANK)
    if b.spec.ankle_style == "single":
        b.hinge(shank, f"{side}_ankle_joint", ankle, 0.18 * mass, sole, heel)
    else:
        pitch = b.hinge(shank, f"{side}_ankle_pitch_joint", ankle, 0.04 * mass, shape=b.nub(0.03))
        b.hinge(pitch, f"{side}_ankle_roll_joint", zero, 0.14 * mass, sole, heel)


def _arm(b: _Builder, side: str, sy: int, mass: float) -> None:
    """Shoulder pitch/roll/yaw, elbow, optional wrist, a fixed hand with fingers or a gripper; ``mass`` [kg]."""
    spec, zero = b.spec, (0.0, 0.0, 0.0)
    at = b.v(SHOULDER[0], sy * SHOULDER[1], SHOULDER[2])
    link = b.hinge("torso_link", f"{side}_shoulder_pitch_joint", at, 0.1 * mass, shape=b.nub(0.04))
    link = b.hinge(link, f"{side}_shoulder_roll_joint", b.v(0, sy * SHOULDER_OUT, 0), 0.1 * mass, shape=b.nub(0.04))
    link = b.hinge(link, f"{side}_shoulder_yaw_joint", zero, 0.35 * mass, b.rod(0.024, UPPER_ARM))
    link = b.hinge(link, f"{side}_elbow_joint", b.v(0, 0, -UPPER_ARM), 0.3 * mass, b.rod(0.02, FOREARM))
    hand_mass, at = 0.15 * mass, b.v(0, 0, -FOREARM)
    if spec.wrists:
        light = 0.001 * spec.mass
        disc = Geom("cylinder", b.v(0.012, 0.01), collide=False)
        link = b.hinge(link, f"{side}_wrist_roll_joint", at, light, disc)
        link = b.hinge(link, f"{side}_wrist_pitch_joint", zero, light, shape=b.nub(0.02))
        hand_mass, at = hand_mass - 2 * light, zero
    hand = f"{side}_hand_link"
    b.fixed(f"{side}_hand_joint", link, hand, at)
    tip = 0.005 + 0.0001 * spec.mass  # finger link mass [kg]
    phalanx = Geom("box", b.v(*PHALANX), b.v(0, 0, -PHALANX[2] / 2), material="dark")
    for k in range(1, spec.fingers + 1):
        link, at = hand, b.v(HAND[0] * (k / (spec.fingers + 1) - 0.5), 0, -HAND[2])
        for p in (1, 2, 3):
            link = b.hinge(link, f"{side}_finger{k}_{p}_joint", at, tip, phalanx)
            at = b.v(0, 0, -PHALANX[2])
        hand_mass -= 3 * tip
    if spec.mimic:
        jaw, geom = 0.002 * spec.mass, Geom("box", b.v(*JAW), b.v(0, 0, -JAW[2] / 2), material="dark")
        leader = f"{side}_gripper_joint"
        b.hinge(hand, leader, b.v(0, 0.008, -HAND[2]), jaw, geom)
        b.hinge(hand, f"{side}_gripper_mimic_joint", b.v(0, -0.008, -HAND[2]), jaw, geom, mimic=leader)
        hand_mass -= 2 * jaw
    if hand_mass <= 0:
        raise LabError(f"spec {spec.name}: the hand has no mass left for its wrist and finger links")
    b.link(hand, hand_mass, Geom("box", b.v(*HAND), b.v(0, 0, -HAND[2] / 2)))


# ---------------------------------------------------------------------------------------------------------------
# Writers


def _n(x: float) -> str:
    """A number as written: 6 significant digits, no ``-0``."""
    x = float(f"{x:.6g}")
    return "0" if x == 0 else f"{x:g}"


def _ns(xs) -> str:
    return " ".join(_n(x) for x in xs)


MATERIALS = {"grey": (0.72, 0.74, 0.78, 1), "dark": (0.20, 0.22, 0.26, 1), "accent": (0.95, 0.55, 0.15, 1)}
AXES = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}


def _inertia_geom(link: Link) -> Geom:
    return link.shape or link.geoms[0]


def _mesh_file(spec: HumanoidSpec) -> str:
    return f"meshes/{spec.name}_foot.stl"


def _urdf_shape(g: Geom, spec: HumanoidSpec) -> str:
    if g.kind == "box":
        return f'<box size="{_ns(g.size)}"/>'
    if g.kind == "cylinder":
        return f'<cylinder radius="{_n(g.size[0])}" length="{_n(g.size[1])}"/>'
    if g.kind == "sphere":
        return f'<sphere radius="{_n(g.size[0])}"/>'
    return f'<mesh filename="{_mesh_file(spec)}"/>'


def _urdf_link(link: Link, spec: HumanoidSpec) -> list:
    ig = _inertia_geom(link)
    ixx, iyy, izz = inertia_of(ig, link.mass)
    out = [
        f'  <link name="{link.name}">',
        "    <inertial>",
        f'      <origin xyz="{_ns(ig.pos)}" rpy="0 {_n(ig.pitch)} 0"/>',
        f'      <mass value="{_n(link.mass)}"/>',
        f'      <inertia ixx="{_n(ixx)}" ixy="0" ixz="0" iyy="{_n(iyy)}" iyz="0" izz="{_n(izz)}"/>',
        "    </inertial>",
    ]
    for g in link.geoms:
        origin = f'      <origin xyz="{_ns(g.pos)}" rpy="0 {_n(g.pitch)} 0"/>'
        geometry = f"      <geometry>{_urdf_shape(g, spec)}</geometry>"
        out += ["    <visual>", origin, geometry, f'      <material name="{g.material}"/>', "    </visual>"]
        if g.collide:
            out += ["    <collision>", origin, geometry, "    </collision>"]
    return [*out, "  </link>"]


def _urdf_joint(j: Joint, spec: HumanoidSpec) -> list:
    kind = "revolute" if j.axis else "fixed"
    out = [
        f'  <joint name="{j.name}" type="{kind}">',
        f'    <parent link="{j.parent}"/>',
        f'    <child link="{j.child}"/>',
        f'    <origin xyz="{_ns(j.pos)}" rpy="0 0 0"/>',
    ]
    if j.axis:
        effort = _n(j.effort) if spec.efforts else "0"
        out += [
            f'    <axis xyz="{_ns(AXES[j.axis])}"/>',
            f'    <limit lower="{_n(j.lower)}" upper="{_n(j.upper)}" effort="{effort}" velocity="{_n(j.velocity)}"/>',
            f'    <dynamics damping="{_n(j.damping)}" friction="0"/>',
        ]
        if j.mimic:
            out.append(f'    <mimic joint="{j.mimic}" multiplier="-1" offset="0"/>')
    return [*out, "  </joint>"]


def to_urdf(spec: HumanoidSpec) -> str:
    links, joints = build(spec)
    by_name = {link.name: link for link in links}
    out = ['<?xml version="1.0"?>', f"<!-- lab.robots.family: {spec} -->", f'<robot name="{spec.name}">']
    out += [f'  <material name="{m}"><color rgba="{_ns(c)}"/></material>' for m, c in MATERIALS.items()]
    out += _urdf_link(links[0], spec)
    for j in joints:
        out += _urdf_joint(j, spec) + _urdf_link(by_name[j.child], spec)
    return "\n".join([*out, "</robot>", ""])


def _mjcf_geom(g: Geom, pad: str) -> list:
    if g.kind == "box":
        shape = f'type="box" size="{_ns(c / 2 for c in g.size)}"'
    elif g.kind == "cylinder":
        shape = f'type="cylinder" size="{_n(g.size[0])} {_n(g.size[1] / 2)}"'
    elif g.kind == "sphere":
        shape = f'type="sphere" size="{_n(g.size[0])}"'
    else:
        shape = 'type="mesh" mesh="foot"'
    where = f'pos="{_ns(g.pos)}"' + (f' euler="0 {_n(g.pitch)} 0"' if g.pitch else "")
    out = [f'{pad}<geom class="visual" {shape} {where} material="{g.material}"/>']
    if g.collide:
        out.append(f'{pad}<geom class="collision" {shape} {where}/>')
    return out


def _mjcf_body(name, spec, by_name, children, joint, pad) -> list:
    link = by_name[name]
    ig = _inertia_geom(link)
    pos = joint.pos if joint else (0.0, 0.0, spec.pelvis_height)
    out = [f'{pad}<body name="{name}" pos="{_ns(pos)}">']
    inner = pad + "  "
    if joint is None:
        out.append(f'{inner}<freejoint name="floating_base"/>')
    elif joint.axis:
        frc = f' actuatorfrcrange="{_n(-joint.effort)} {_n(joint.effort)}"'
        frc = frc if spec.actuators in ("none", "motor_frcrange") else ""
        out.append(
            f'{inner}<joint name="{joint.name}" axis="{_ns(AXES[joint.axis])}" range="{_n(joint.lower)} '
            f'{_n(joint.upper)}" damping="{_n(joint.damping)}" armature="{_n(joint.armature)}"{frc}/>'
        )
    euler = f' euler="0 {_n(ig.pitch)} 0"' if ig.pitch else ""
    out.append(
        f'{inner}<inertial pos="{_ns(ig.pos)}"{euler} mass="{_n(link.mass)}" '
        f'diaginertia="{_ns(inertia_of(ig, link.mass))}"/>'
    )
    for g in link.geoms:
        out += _mjcf_geom(g, inner)
    for j in children.get(name, []):
        out += _mjcf_body(j.child, spec, by_name, children, j, inner)
    return [*out, f"{pad}</body>"]


def _mjcf_actuator(j: Joint, kind: str) -> str:
    name = f'name="{j.name.removesuffix("_joint")}" joint="{j.name}"'
    if kind == "motor":
        return f'    <motor {name} ctrlrange="{_n(-j.effort)} {_n(j.effort)}"/>'
    if kind == "motor_frcrange":
        return f'    <motor {name} ctrllimited="false"/>'
    kp = _sig(4 * j.effort)  # saturates at 0.25 rad of error
    return (
        f'    <position {name} kp="{_n(kp)}" ctrlrange="{_n(j.lower)} {_n(j.upper)}" '
        f'forcerange="{_n(-j.effort)} {_n(j.effort)}"/>'
    )


def to_mjcf(spec: HumanoidSpec) -> str:
    links, joints = build(spec)
    by_name = {link.name: link for link in links}
    children = {}
    for j in joints:
        children.setdefault(j.parent, []).append(j)
    out = [
        f'<mujoco model="{spec.name}">',
        f"  <!-- lab.robots.family: {spec} -->",
        '  <compiler angle="radian" autolimits="true"/>',
        '  <option timestep="0.001"/>',
        "  <default>",
        '    <default class="visual"><geom contype="0" conaffinity="0" group="1"/></default>',
        '    <default class="collision"><geom contype="1" conaffinity="0" group="3" rgba="0.5 0.5 0.5 1"/></default>',
        "  </default>",
        "  <asset>",
        *(f'    <material name="{m}" rgba="{_ns(c)}"/>' for m, c in MATERIALS.items()),
        *([f'    <mesh name="foot" file="{_mesh_file(spec)}"/>'] if spec.foot_mesh else []),
        "  </asset>",
        "  <worldbody>",
        *_mjcf_body("pelvis", spec, by_name, children, None, "    "),
        "  </worldbody>",
    ]
    if spec.actuators != "none":
        out += ["  <actuator>", *(_mjcf_actuator(j, spec.actuators) for j in joints if j.axis), "  </actuator>"]
    return "\n".join([*out, "</mujoco>", ""])


def chamfered_box_stl(sx: float, sy: float, sz: float, chamfer: float) -> bytes:
    """A binary STL of a box ``sx`` x ``sy`` x ``sz`` [m] centred at the origin, its four bottom edges cut by
    ``chamfer`` [m] at 45 deg (MuJoCo reads binary STL only)."""
    a, b, c = sx / 2, sy / 2, sz / 2
    ring = ((-1, -1), (1, -1), (1, 1), (-1, 1))
    top = [(i * a, j * b, c) for i, j in ring]
    mid = [(i * a, j * b, -c + chamfer) for i, j in ring]
    bot = [(i * (a - chamfer), j * (b - chamfer), -c) for i, j in ring]
    quads = [top, bot[::-1]]
    for i in range(4):
        k = (i + 1) % 4
        quads += [[top[i], top[k], mid[k], mid[i]], [mid[i], mid[k], bot[k], bot[i]]]
    tris = [t for q in quads for t in ((q[0], q[1], q[2]), (q[0], q[2], q[3]))]
    out = bytearray(b"lab.robots.family chamfered foot".ljust(80, b" ")) + struct.pack("<I", len(tris))
    for tri in tris:
        p, q, r = tri
        u, w = [q[i] - p[i] for i in range(3)], [r[i] - p[i] for i in range(3)]
        n = [u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]]
        if sum(n[i] * (p[i] + q[i] + r[i]) for i in range(3)) < 0:  # outward normals: the box holds the origin
            q, r, n = r, q, [-x for x in n]
        norm = math.sqrt(sum(x * x for x in n))
        out += struct.pack("<12fH", *(x / norm for x in n), *p, *q, *r, 0)
    return bytes(out)


def write(spec: HumanoidSpec, folder: Path) -> Path:
    """Write ``spec``'s model (and ``meshes/`` when ``foot_mesh``) into ``folder``; returns the model path.
    The same spec always gives the same bytes."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if spec.foot_mesh:
        mesh = folder / _mesh_file(spec)
        mesh.parent.mkdir(exist_ok=True)
        sx, sy, sz = (c * spec.scale for c in FOOT)
        mesh.write_bytes(chamfered_box_stl(sx, sy, sz, 0.3 * sz))
    path = folder / f"{spec.name}.{'urdf' if spec.fmt == 'urdf' else 'xml'}"
    path.write_text(to_urdf(spec) if spec.fmt == "urdf" else to_mjcf(spec), encoding="utf-8")
    return path


def write_family(folder: Path, names=None) -> dict[str, Path]:
    """Write the named family members (all by default) into ``folder``; name -> model path."""
    return {name: write(get(name), folder) for name in (names if names is not None else FAMILY)}


def main(argv=None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m lab.robots.family OUT_DIR")
    for path in write_family(Path(args[0])).values():
        print(path)


if __name__ == "__main__":
    main()
