"""The synthetic humanoid family: every member writes, loads in the lab (MuJoCo) and PyBullet, and has the
mass, size, joints and feet its spec says."""

import itertools
import math
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

from lab.errors import LabError
from lab.robots.family import FAMILY, HumanoidSpec, get, write, write_family
from lab.robots.model import load_robot

URDFS = [n for n, s in FAMILY.items() if s.fmt == "urdf"]
TOE_DOWN = [n for n, s in FAMILY.items() if s.toe_down_deg]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    return write_family(tmp_path_factory.mktemp("family"))


@pytest.fixture(scope="module")
def robot_of(paths):
    """name -> the member loaded by the lab loader, each loaded once."""
    cache = {}

    def get_robot(name):
        if name not in cache:
            cache[name] = load_robot(paths[name])
        return cache[name]

    return get_robot


def _at_zero(m):
    """MjData at qpos0 (every joint at 0), forward kinematics done."""
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    return d


def _points(m, d, g):
    """World points [m] of collision geom ``g``: a box's 8 corners, a mesh's vertices, else its AABB corners."""
    R = d.geom_xmat[g].reshape(3, 3)
    if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH:
        k = m.geom_dataid[g]
        local = m.mesh_vert[m.mesh_vertadr[k] : m.mesh_vertadr[k] + m.mesh_vertnum[k]]
    else:
        c, h = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
        local = np.array([c + np.array(s) * h for s in itertools.product((-1, 1), repeat=3)])
    return d.geom_xpos[g] + local @ R.T


def _collision_geoms(m):
    return [g for g in range(m.ngeom) if m.geom_bodyid[g] and (m.geom_contype[g] or m.geom_conaffinity[g])]


def _is_foot(m, g):
    return bool(m.body(m.geom_bodyid[g]).name.endswith(("_ankle_roll_link", "_ankle_link")))


@pytest.mark.parametrize("name", list(FAMILY))
def test_every_member_loads_in_the_lab_with_its_spec_mass_and_one_motor_per_hinge(robot_of, name):
    robot = robot_of(name)
    m = robot.model
    hinges = int(np.sum(m.jnt_type == mujoco.mjtJoint.mjJNT_HINGE))
    mimics = len(robot.mimic)  # a <mimic> joint follows its leader through a constraint and gets no motor
    assert mimics == (2 if FAMILY[name].mimic else 0)
    assert robot.total_mass == pytest.approx(FAMILY[name].mass, rel=0.02)
    assert m.nu == hinges - mimics >= 20
    assert np.all(robot.tau_limit > 0)


@pytest.mark.parametrize("name", list(FAMILY))
def test_legs_and_pelvis_height_scale_with_the_spec_and_only_the_feet_are_lowest(robot_of, name):
    spec, m = FAMILY[name], robot_of(name).model
    d = _at_zero(m)
    ankle = "left_ankle_link" if spec.ankle_style == "single" else "left_ankle_pitch_link"
    leg = np.linalg.norm(d.xpos[m.body(ankle).id] - d.xpos[m.body("left_hip_pitch_link").id])
    assert leg == pytest.approx(0.40 * spec.scale, rel=1e-4)
    pelvis_z = d.xpos[m.body("pelvis").id, 2]
    low = {g: _points(m, d, g)[:, 2].min() for g in _collision_geoms(m)}
    feet = [z for g, z in low.items() if _is_foot(m, g)]
    others = [z for g, z in low.items() if not _is_foot(m, g)]
    assert len(feet) == 2
    if not spec.toe_down_deg:
        assert pelvis_z - min(feet) == pytest.approx(spec.pelvis_height, rel=1e-4)
        assert spec.pelvis_height == pytest.approx(0.44 * spec.scale)
    assert min(others) - min(feet) > 0.02 * spec.scale  # nothing but the soles touches the floor


@pytest.mark.parametrize("name", URDFS)
def test_urdf_members_load_in_pybullet_with_as_many_revolute_joints_as_mujoco_hinges(paths, robot_of, name):
    import pybullet as p

    cid = p.connect(p.DIRECT)
    try:
        body = p.loadURDF(str(paths[name]), flags=p.URDF_USE_INERTIA_FROM_FILE, physicsClientId=cid)
        infos = [p.getJointInfo(body, j, physicsClientId=cid) for j in range(p.getNumJoints(body, physicsClientId=cid))]
        mass = p.getDynamicsInfo(body, -1, physicsClientId=cid)[0]
        mass += sum(p.getDynamicsInfo(body, j, physicsClientId=cid)[0] for j in range(len(infos)))
    finally:
        p.disconnect(cid)
    revolute = sum(info[2] == p.JOINT_REVOLUTE for info in infos)
    m = robot_of(name).model
    assert revolute == int(np.sum(m.jnt_type == mujoco.mjtJoint.mjJNT_HINGE))
    assert mass == pytest.approx(FAMILY[name].mass, rel=0.02)


def test_the_mimic_member_has_a_mimic_jaw_per_hand(paths):
    root = ET.parse(paths["mimic"]).getroot()
    mimics = {j.get("name"): j.find("mimic").attrib for j in root.iter("joint") if j.find("mimic") is not None}
    assert mimics == {
        f"{s}_gripper_mimic_joint": {"joint": f"{s}_gripper_joint", "multiplier": "-1", "offset": "0"}
        for s in ("left", "right")
    }
    assert mujoco.MjModel.from_xml_path(str(paths["mimic"])).neq == 2  # MuJoCo's URDF reader makes them equalities


def test_the_single_ankle_member_has_one_ankle_joint_and_an_ankle_link_foot(paths, robot_of):
    m = robot_of("toe_single").model
    names = {m.joint(j).name for j in range(m.njnt)}
    assert {"left_ankle_joint", "right_ankle_joint"} <= names
    assert not any("ankle_pitch" in n or "ankle_roll" in n for n in names)
    assert m.body("left_ankle_link").id > 0
    assert (paths["toe_single"].parent / "meshes" / "toe_single_foot.stl").is_file()


@pytest.mark.parametrize("name", TOE_DOWN)
def test_toe_down_members_have_their_sole_pitched_toe_down_at_zero_angles(robot_of, name):
    spec, m = FAMILY[name], robot_of(name).model
    d = _at_zero(m)
    (g,) = [g for g in _collision_geoms(m) if _is_foot(m, g) and m.body(m.geom_bodyid[g]).name.startswith("left")]
    R = d.geom_xmat[g].reshape(3, 3)
    tilt = min(math.degrees(math.acos(min(1.0, abs(R[2, k])))) for k in range(3))
    assert tilt == pytest.approx(spec.toe_down_deg, abs=0.01)
    pts = _points(m, d, g)
    ankle_x = d.xpos[m.geom_bodyid[g], 0]
    assert pts[np.argmin(pts[:, 2]), 0] > ankle_x + 0.05 * spec.scale  # the toe is lowest, not the heel


def test_mjcf_actuator_styles_are_as_specified(paths):
    bare = mujoco.MjModel.from_xml_path(str(paths["mjcf_bare"]))
    assert bare.nu == 0 and bare.jnt_actfrclimited[1:].all()
    motor = mujoco.MjModel.from_xml_path(str(paths["mjcf_motor"]))
    assert motor.nu == 22 and not motor.actuator_ctrllimited.any() and motor.jnt_actfrclimited[1:].all()
    pos = mujoco.MjModel.from_xml_path(str(paths["mjcf_pos"]))
    assert pos.nu == 22 and (pos.actuator_gainprm[:, 0] > 0).all() and (pos.actuator_biasprm[:, 1] < 0).all()
    assert pos.actuator_forcelimited.all() and not pos.jnt_actfrclimited.any()
    knee = pos.actuator("left_knee").id
    assert pos.actuator_ctrlrange[knee].tolist() == [0.0, 2.5]


def test_efforts_scale_with_mass_and_size_and_no_effort_writes_zero(paths):
    def efforts(name):
        root = ET.parse(paths[name]).getroot()
        return {
            j.get("name"): float(j.find("limit").get("effort"))
            for j in root.iter("joint")
            if j.find("limit") is not None
        }

    tiny, heavy = efforts("tiny"), efforts("heavy")
    spec = FAMILY["heavy"]
    assert heavy["left_knee_joint"] == pytest.approx(2.5 * spec.mass * 9.81 * 0.40 * spec.scale / 2, rel=0.01)
    assert heavy["left_knee_joint"] > 20 * tiny["left_knee_joint"]
    assert heavy["left_ankle_pitch_joint"] == pytest.approx(0.6 * heavy["left_knee_joint"], rel=0.01)
    assert 0.5 <= heavy["left_wrist_roll_joint"] <= 2 and 0.5 <= heavy["left_finger1_1_joint"] <= 2
    assert set(efforts("no_effort").values()) == {0.0}


def test_writing_twice_gives_the_same_bytes(paths, tmp_path):
    again = write_family(tmp_path)
    for name, path in paths.items():
        assert again[name].read_bytes() == path.read_bytes(), name
    mesh = "meshes/toe_single_foot.stl"
    assert (tmp_path / mesh).read_bytes() == (paths["toe_single"].parent / mesh).read_bytes()


def test_bad_specs_and_unknown_names_are_refused_with_what_exists(tmp_path):
    with pytest.raises(LabError, match="fmt 'sdf' is not one of urdf, mjcf"):
        HumanoidSpec("x", "sdf", 1.0, 10.0)
    with pytest.raises(LabError, match="mimic grippers need fmt 'urdf'"):
        HumanoidSpec("x", "mjcf", 1.0, 10.0, mimic=True)
    with pytest.raises(LabError, match="unknown family robot 'nope'; available: tiny, small"):
        get("nope")
    path = write(HumanoidSpec("fixed_waist", "mjcf", 1.0, 10.0, waist_dof=0, foot_mesh=True), tmp_path)
    m = mujoco.MjModel.from_xml_path(str(path))
    assert m.body("torso_link").jntnum == 0 and m.body_mass.sum() == pytest.approx(10.0, rel=1e-4)
