"""The built-in Q1 and loading other robots."""

import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from lab.errors import LabError
from lab.robots import tuning
from lab.robots.model import BUILTIN_URDF, load_robot
from lab.robots.q1 import make_urdf
from tests.model_files import write_mesh_urdf, write_stl_box

ROOT = BUILTIN_URDF.parents[3]


def test_builtin_model_has_the_designed_dimensions(robot):
    m = robot.model
    assert (m.nq, m.nv, m.nu) == (29, 28, 22)
    assert m.opt.timestep == 0.001
    assert list(m.actuator("motor_left_elbow").ctrlrange) == [-22.0, 22.0]
    assert m.actuator("motor_left_elbow").gear[0] == 1.0
    assert robot.joint_names[robot.actuator_names.index("motor_left_elbow")] == "left_elbow_joint"


def test_urdf_is_what_the_generator_writes():
    assert BUILTIN_URDF.read_text() == make_urdf.build()


def test_every_urdf_link_has_an_inertial():
    root = ET.parse(BUILTIN_URDF).getroot()
    links = root.findall("link")
    assert len(links) == 23
    assert all(link.find("inertial") is not None for link in links)


def test_gains_follow_the_design_by_joint_name(robot):
    g = dict(zip(robot.joint_names, zip(robot.kp, robot.kd)))
    assert g["left_hip_pitch_joint"] == (150, 12) and g["right_knee_joint"] == (150, 12)
    assert g["left_ankle_roll_joint"] == (100, 8)
    assert g["left_elbow_joint"] == (40, 3) and g["waist_yaw_joint"] == (40, 3) and g["head_yaw_joint"] == (40, 3)


def test_nominal_pose_keeps_feet_flat_and_pelvis_near_042(robot):
    q = dict(zip(robot.joint_names, robot.q_nominal))
    assert q["left_hip_pitch_joint"] + q["left_knee_joint"] + q["left_ankle_pitch_joint"] == pytest.approx(0)
    assert 0.40 < robot.standing_height < 0.44


def test_identity_covers_file_and_changes_with_it(robot, tmp_path):
    again = load_robot()
    assert again.identity == robot.identity and len(robot.identity) == 64
    copy = tmp_path / "q1.urdf"
    copy.write_text(BUILTIN_URDF.read_text().replace('<mass value="0.6"/>', '<mass value="0.61"/>'))
    assert load_robot(copy).identity != robot.identity


def test_missing_model_file_is_a_clear_error(tmp_path):
    with pytest.raises(LabError, match="model file not found"):
        load_robot(tmp_path / "nope.urdf")


def test_model_that_does_not_compile_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text(
        "<mujoco><worldbody><body><geom type='sphere'/></body></worldbody><actuator><motor joint='nope'/></actuator></mujoco>"
    )
    with pytest.raises(LabError, match="does not (load|compile)"):
        load_robot(bad)


def test_urdf_with_meshes_relative_to_the_file_loads_and_stands(tmp_path):
    from lab.control.modes import get_mode
    from lab.control.pd import PDGains
    from lab.control.rollout import Rollout, simulate
    from lab.sim.mujoco_engine import MujocoEngine

    path = write_mesh_urdf(tmp_path / "robot")
    r = load_robot(path)
    assert r.model.nmesh == 1 and r.model.nu == 22
    assert any(a.name == "torso.stl" for a in r.assets)
    ms = simulate(Rollout(MujocoEngine(r), PDGains.for_robot(r), get_mode("stand", r)), 2.0)
    assert abs(ms[-1].pelvis_z - r.standing_height) < 0.01


def test_mjcf_humanoid_with_a_mesh_loads_with_motors_added(tmp_path):
    (tmp_path / "assets").mkdir()
    write_stl_box(tmp_path / "assets" / "body.stl", 0.1, 0.1, 0.2)
    xml = tmp_path / "walker.xml"
    xml.write_text("""<mujoco model="walker"><compiler meshdir="assets"/>
      <asset><mesh name="body" file="body.stl"/></asset>
      <worldbody><body name="pelvis" pos="0 0 0.6"><freejoint/><geom type="mesh" mesh="body" mass="3"/>
        <body name="left_thigh" pos="0 0.05 -0.1"><joint name="left_hip_pitch_joint" axis="0 1 0" range="-1 1"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.5"/>
          <body name="left_shin" pos="0 0 -0.2"><joint name="left_knee_joint" axis="0 1 0" range="0 2"/>
            <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.3"/></body></body>
      </body></worldbody></mujoco>""")
    r = load_robot(xml)
    assert r.kind == "mjcf" and r.model.nu == 2
    assert r.actuator_names == ["motor_left_hip_pitch", "motor_left_knee"]
    # no sidecar: gains from the model (lab.robots.tuning): the reference leg gains scaled by m·h, then bounded
    sk = tuning.similarity(r.total_mass, r.standing_height)[0]
    _, ifree, _ = tuning.inertias(r.model, r.init_qpos)
    bound = tuning.STIFFNESS_BOUND * ifree[r.dadr] / r.model.opt.timestep**2
    np.testing.assert_allclose(r.kp, np.minimum(150 * sk, bound))
    assert r.gain_method == "auto" and np.all(r.kd * r.model.opt.timestep / ifree[r.dadr] <= 0.5 + 1e-9)


def test_app_exits_with_one_clear_line_for_a_missing_model():
    p = subprocess.run(
        [sys.executable, "app.py", "lab", "--model", "/nonexistent/robot.urdf", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: model file not found: /nonexistent/robot.urdf")


def test_app_refuses_a_public_bind_without_a_token():
    p = subprocess.run(
        [sys.executable, "app.py", "lab", "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "MUJOCO_GL": "egl"},
    )
    assert p.returncode == 2
    assert "refusing to bind 0.0.0.0 without a token" in p.stderr
