"""Writes ``q1.urdf``, the built-in Q1-class humanoid, from the numbers below.

Run ``python -m lab.robots.q1.make_urdf`` after changing a number; the URDF is committed and
``tests/test_robots.py`` checks that this script reproduces it byte for byte.

Frames: x forward, y left, z up; every joint frame coincides with its child link frame.
Link inertias are box/capsule inertias of the link plus the reflected rotor inertia of the
actuator that drives it (URDF has no ``armature``, so it is written into the link where both
engines see it). Without it the distal links (feet, forearms, head) are too light for the
SDK gains at a 1 kHz explicit control tick.
"""

from pathlib import Path

HERE = Path(__file__).parent

HIP_Y = 0.0905  # lateral hip/ankle offset [m] -> ankles 181 mm apart
HIP_Z = -0.005  # hip joints below the pelvis origin [m]
THIGH = 0.20  # hip -> knee [m]
SHANK = 0.20  # knee -> ankle [m]
FOOT_LEN, FOOT_WID = 0.145, 0.046  # [m]
HEEL = 0.050  # ankle is 50 mm ahead of the heel [m]
SOLE = 0.035  # ankle height above the sole [m]
SPHERE_R = 0.005  # contact sphere radius [m]

# rotor inertia reflected through the gearbox, added to the driven link [kg m^2]
ROTOR = {"leg": 0.010, "ankle": 0.006, "arm": 0.003, "waist": 0.010, "head": 0.003}


def box_inertia(m, sx, sy, sz, extra):
    return (
        m * (sy * sy + sz * sz) / 12 + extra,
        m * (sx * sx + sz * sz) / 12 + extra,
        m * (sx * sx + sy * sy) / 12 + extra,
    )


def inertial(m, com, inertia):
    ixx, iyy, izz = inertia
    return (
        f'    <inertial>\n      <origin xyz="{com[0]:g} {com[1]:g} {com[2]:g}" rpy="0 0 0"/>\n'
        f'      <mass value="{m:g}"/>\n'
        f'      <inertia ixx="{ixx:.6g}" ixy="0" ixz="0" iyy="{iyy:.6g}" iyz="0" izz="{izz:.6g}"/>\n'
        "    </inertial>\n"
    )


def geom(kind, shape, xyz=(0, 0, 0), rpy=(0, 0, 0), material=None):
    mat = f'\n      <material name="{material}"/>' if material and kind == "visual" else ""
    return (
        f"    <{kind}>\n"
        f'      <origin xyz="{xyz[0]:g} {xyz[1]:g} {xyz[2]:g}" rpy="{rpy[0]:g} {rpy[1]:g} {rpy[2]:g}"/>\n'
        f"      <geometry>{shape}</geometry>{mat}\n"
        f"    </{kind}>\n"
    )


def box(sx, sy, sz):
    return f'<box size="{sx:g} {sy:g} {sz:g}"/>'


def cyl(r, length):
    return f'<cylinder radius="{r:g}" length="{length:g}"/>'


def sphere(r):
    return f'<sphere radius="{r:g}"/>'


def link(name, body):
    return f'  <link name="{name}">\n{body}  </link>\n'


def joint(name, parent, child, xyz, axis, lower, upper, effort, velocity=20.0):
    return (
        f'  <joint name="{name}" type="revolute">\n'
        f'    <parent link="{parent}"/>\n    <child link="{child}"/>\n'
        f'    <origin xyz="{xyz[0]:g} {xyz[1]:g} {xyz[2]:g}" rpy="0 0 0"/>\n'
        f'    <axis xyz="{axis[0]:g} {axis[1]:g} {axis[2]:g}"/>\n'
        f'    <limit lower="{lower:g}" upper="{upper:g}" effort="{effort:g}" velocity="{velocity:g}"/>\n'
        '    <dynamics damping="0.05" friction="0"/>\n'
        "  </joint>\n"
    )


def small_link(name, m, rotor):
    return link(name, inertial(m, (0, 0, 0), box_inertia(m, 0.04, 0.04, 0.04, rotor)))


def rod_link(name, m, length, r, rotor, material, collide=True):
    com = (0, 0, -length / 2)
    body = inertial(m, com, box_inertia(m, 2 * r, 2 * r, length, rotor))
    body += geom("visual", cyl(r, length), com, material=material)
    if collide:
        body += geom("collision", cyl(r, length), com)
    return link(name, body)


def leg(side, s):
    p = f"{side}_"
    out = joint(f"{p}hip_pitch_joint", "pelvis", f"{p}hip_pitch_link", (0, s * HIP_Y, HIP_Z), (0, 1, 0), -1.8, 0.8, 60)
    out += small_link(f"{p}hip_pitch_link", 0.25, ROTOR["leg"])
    out += joint(f"{p}hip_roll_joint", f"{p}hip_pitch_link", f"{p}hip_roll_link", (0, 0, 0), (1, 0, 0), -0.6, 0.6, 40)
    out += small_link(f"{p}hip_roll_link", 0.25, ROTOR["leg"])
    out += joint(f"{p}hip_yaw_joint", f"{p}hip_roll_link", f"{p}thigh_link", (0, 0, 0), (0, 0, 1), -0.8, 0.8, 30)
    out += rod_link(f"{p}thigh_link", 0.70, THIGH, 0.03, ROTOR["leg"], "grey")
    out += joint(f"{p}knee_joint", f"{p}thigh_link", f"{p}shank_link", (0, 0, -THIGH), (0, 1, 0), -0.05, 2.4, 60)
    out += rod_link(f"{p}shank_link", 0.45, SHANK, 0.025, ROTOR["leg"], "grey")
    out += joint(f"{p}ankle_pitch_joint", f"{p}shank_link", f"{p}ankle_link", (0, 0, -SHANK), (0, 1, 0), -1.0, 0.8, 30)
    out += small_link(f"{p}ankle_link", 0.10, ROTOR["ankle"])
    out += joint(f"{p}ankle_roll_joint", f"{p}ankle_link", f"{p}foot_link", (0, 0, 0), (1, 0, 0), -0.5, 0.5, 20)
    cx = FOOT_LEN / 2 - HEEL  # foot centre ahead of the ankle [m]
    plate = 0.012
    body = inertial(0.30, (cx, 0, -SOLE + plate / 2), box_inertia(0.30, FOOT_LEN, FOOT_WID, plate, ROTOR["ankle"]))
    body += geom("visual", box(FOOT_LEN, FOOT_WID, plate), (cx, 0, -SOLE + 0.002 + plate / 2), material="dark")
    body += geom("visual", cyl(0.018, SOLE - plate), (0, 0, -(SOLE - plate) / 2), material="dark")
    for x in (-HEEL + SPHERE_R, FOOT_LEN - HEEL - SPHERE_R):
        for y in (FOOT_WID / 2 - SPHERE_R, -(FOOT_WID / 2 - SPHERE_R)):
            body += geom("collision", sphere(SPHERE_R), (x, y, -SOLE + SPHERE_R))
    out += link(f"{p}foot_link", body)
    return out


def arm(side, s):
    p = f"{side}_"
    out = joint(
        f"{p}shoulder_pitch_joint",
        "torso_link",
        f"{p}shoulder_pitch_link",
        (0, s * 0.105, 0.17),
        (0, 1, 0),
        -3.0,
        1.5,
        22,
    )
    out += small_link(f"{p}shoulder_pitch_link", 0.15, ROTOR["arm"])
    out += joint(
        f"{p}shoulder_roll_joint",
        f"{p}shoulder_pitch_link",
        f"{p}shoulder_roll_link",
        (0, 0, 0),
        (1, 0, 0),
        -1.5,
        1.5,
        22,
    )
    out += small_link(f"{p}shoulder_roll_link", 0.15, ROTOR["arm"])
    out += joint(
        f"{p}shoulder_yaw_joint", f"{p}shoulder_roll_link", f"{p}upper_arm_link", (0, 0, 0), (0, 0, 1), -1.5, 1.5, 22
    )
    out += rod_link(f"{p}upper_arm_link", 0.35, 0.12, 0.024, ROTOR["arm"], "grey")
    out += joint(f"{p}elbow_joint", f"{p}upper_arm_link", f"{p}forearm_link", (0, 0, -0.12), (0, 1, 0), -2.3, 0.2, 22)
    out += rod_link(f"{p}forearm_link", 0.25, 0.13, 0.02, ROTOR["arm"], "grey")
    return out


def build():
    out = '<?xml version="1.0"?>\n<!-- Generated by lab/robots/q1/make_urdf.py; edit that, not this. -->\n'
    out += '<robot name="q1">\n'
    out += '  <material name="grey"><color rgba="0.72 0.74 0.78 1"/></material>\n'
    out += '  <material name="dark"><color rgba="0.20 0.22 0.26 1"/></material>\n'
    out += '  <material name="accent"><color rgba="0.95 0.55 0.15 1"/></material>\n'
    body = inertial(1.6, (0, 0, 0), box_inertia(1.6, 0.10, 0.16, 0.08, 0.0))
    body += geom("visual", box(0.10, 0.16, 0.08), material="accent") + geom("collision", box(0.10, 0.16, 0.08))
    out += link("pelvis", body)
    # joint order = MuJoCo tree order = actuator order: legs, waist, arms, head
    for side, s in (("left", 1), ("right", -1)):
        out += leg(side, s)
    out += joint("waist_yaw_joint", "pelvis", "torso_link", (0, 0, 0.04), (0, 0, 1), -1.2, 1.2, 22)
    body = inertial(3.0, (0.01, 0, 0.10), box_inertia(3.0, 0.10, 0.16, 0.18, ROTOR["waist"]))
    body += geom("visual", box(0.10, 0.17, 0.18), (0, 0, 0.10), material="grey")
    body += geom("collision", box(0.10, 0.17, 0.18), (0, 0, 0.10))
    out += link("torso_link", body)
    for side, s in (("left", 1), ("right", -1)):
        out += arm(side, s)
    out += joint("head_yaw_joint", "torso_link", "head_link", (0, 0, 0.20), (0, 0, 1), -1.2, 1.2, 10)
    body = inertial(0.6, (0, 0, 0.07), box_inertia(0.6, 0.11, 0.11, 0.11, ROTOR["head"]))
    body += geom("visual", sphere(0.06), (0, 0, 0.07), material="grey")
    body += geom("visual", box(0.02, 0.08, 0.025), (0.055, 0, 0.075), material="dark")
    body += geom("collision", sphere(0.06), (0, 0, 0.07))
    out += link("head_link", body)
    return out + "</robot>\n"


def main():
    (HERE / "q1.urdf").write_text(build())


if __name__ == "__main__":
    main()
