"""The PyBullet engine against the MuJoCo engine on the same URDF: mass, standing, falling, pushes,
the engine contract over every mode, and other URDF humanoids (meshes relative to the URDF)."""

import struct
from pathlib import Path

import numpy as np
import pytest

from lab.control.modes import MODES, get_mode
from lab.control.pd import PDGains
from lab.control.rollout import Rollout, simulate
from lab.errors import LabError
from lab.robots.model import load_robot
from lab.runtime.lockstep import Lockstep
from lab.sim.mujoco_engine import MujocoEngine
from lab.sim.pybullet_engine import PybulletEngine
from tests.model_files import write_stl_box

ENGINES = {"mujoco": MujocoEngine, "pybullet": PybulletEngine}


# ---- a small URDF humanoid with STL meshes, written by the tests --------------------------------
def _box_triangles(size):
    hx, hy, hz = (s / 2 for s in size)
    v = [(sx * hx, sy * hy, sz * hz) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = []
    for a, b, c, d in faces:
        tris += [(v[a], v[b], v[c]), (v[a], v[c], v[d])]
    return tris


def write_msh(path: Path, triangles) -> None:
    verts = [v for tri in triangles for v in tri]
    with open(path, "wb") as f:
        f.write(struct.pack("<4i", len(verts), 0, 0, len(triangles)))
        f.write(struct.pack(f"<{3 * len(verts)}f", *[c for v in verts for c in v]))
        f.write(struct.pack(f"<{3 * len(triangles)}i", *range(3 * len(triangles))))


def _inertial(mass, size, xyz="0 0 0"):
    x, y, z = size
    ixx, iyy, izz = (mass / 12 * (b * b + c * c) for b, c in ((y, z), (x, z), (x, y)))
    return (
        f'<inertial><origin xyz="{xyz}"/><mass value="{mass}"/>'
        f'<inertia ixx="{ixx:.6g}" ixy="0" ixz="0" iyy="{iyy:.6g}" iyz="0" izz="{izz:.6g}"/></inertial>'
    )


def _joint(name, parent, child, xyz, axis, lo, hi, effort):
    return (
        f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}"/><axis xyz="{axis}"/><limit lower="{lo}" upper="{hi}" effort="{effort}" velocity="30"/>'
        f'<dynamics damping="0.1" friction="0"/></joint>'
    )


def write_mesh_humanoid(folder: Path, mesh_file: str = "meshes/foot.stl", dummy_link: str | None = None) -> Path:
    """An 11-joint legged humanoid whose feet are STL meshes referenced relative to the URDF.

    ``dummy_link`` "fixed" or "revolute" adds a frame-only link (no ``<inertial>``, no geometry) on the torso.
    """
    folder.mkdir(parents=True, exist_ok=True)
    mesh = folder / mesh_file
    mesh.parent.mkdir(parents=True, exist_ok=True)
    if mesh.suffix.lower() == ".stl":
        write_stl_box(mesh, 0.16, 0.07, 0.02)
    elif mesh.suffix.lower() == ".msh":  # MuJoCo's own binary mesh format, which PyBullet does not read
        write_msh(mesh, _box_triangles((0.16, 0.07, 0.02)))
    else:
        mesh.write_bytes(b"\0" * 64)
    links = [
        f'<link name="pelvis">{_inertial(2.0, (0.1, 0.18, 0.08), "0.01 0 0.015")}'
        '<visual><geometry><box size="0.1 0.18 0.08"/></geometry></visual>'
        '<collision><geometry><box size="0.1 0.18 0.08"/></geometry></collision></link>',
        f'<link name="torso">{_inertial(3.0, (0.1, 0.18, 0.2), "0 0 0.1")}'
        '<visual><origin xyz="0 0 0.1"/><geometry><box size="0.1 0.18 0.2"/></geometry></visual></link>',
        _joint("waist_yaw_joint", "pelvis", "torso", "0 0 0.04", "0 0 1", -1, 1, 20),
    ]
    for side, y in (("left", 0.09), ("right", -0.09)):
        chain = [
            ("hip_pitch", "pelvis", f"0 {y} -0.04", "0 1 0", -1.5, 1.0, 60, (0.05, 0.05, 0.05), 0.4),
            ("hip_roll", "hip_pitch", "0 0 0", "1 0 0", -0.5, 0.5, 60, (0.05, 0.05, 0.05), 0.4),
            ("knee", "hip_roll", "0 0 -0.22", "0 1 0", 0.0, 2.2, 60, (0.05, 0.05, 0.2), 0.8),
            ("ankle_pitch", "knee", "0 0 -0.22", "0 1 0", -1.0, 1.0, 40, (0.05, 0.05, 0.2), 0.6),
            ("ankle_roll", "ankle_pitch", "0 0 0", "1 0 0", -0.5, 0.5, 40, (0.04, 0.04, 0.04), 0.1),
        ]
        for name, parent, xyz, axis, lo, hi, effort, size, mass in chain:
            link = f"{side}_{name}_link" if name != "ankle_roll" else f"{side}_foot"
            parent_link = "pelvis" if parent == "pelvis" else f"{side}_{parent}_link"
            com = "0 0 -0.11" if name in ("knee", "ankle_pitch") else "0 0 0"
            body = _inertial(mass, size, com)
            if name == "hip_roll":
                body += (
                    '<visual><origin xyz="0 0 -0.11"/><geometry><cylinder radius="0.03" length="0.22"/>'
                    "</geometry></visual>"
                )
            if name == "ankle_roll":
                body = _inertial(0.5, (0.16, 0.07, 0.02), "0.02 0 -0.04")
                body += (
                    f'<visual><origin xyz="0.02 0 -0.04"/><geometry><mesh filename="{mesh_file}"/></geometry>'
                    f'</visual><collision><origin xyz="0.02 0 -0.04"/><geometry><mesh filename="{mesh_file}"/>'
                    "</geometry></collision>"
                )
            links.append(f'<link name="{link}">{body}</link>')
            links.append(_joint(f"{side}_{name}_joint", parent_link, link, xyz, axis, lo, hi, effort))
    if dummy_link:  # a frame-only link: no <inertial>, no geometry (PyBullet gives it 1 kg)
        links.append('<link name="imu_link"/>')
        links.append(
            _joint("imu_joint", "torso", "imu_link", "0 0 0.1", "0 0 1", -1, 1, 5).replace(
                'type="revolute"', f'type="{dummy_link}"'
            )
        )
    path = folder / "mini.urdf"
    path.write_text('<?xml version="1.0"?>\n<robot name="mini">\n' + "\n".join(links) + "\n</robot>\n")
    return path


# ---- the built-in robot in both engines ----------------------------------------------------------
def _run_both(robot, mode, seconds):
    ls = Lockstep(robot, mode, sample_hz=50)
    try:
        ls.advance(seconds)
        return list(ls.history)
    finally:
        ls.close()


def _series(history, engine, key):
    return np.array([h["engines"][engine][key] for h in history])


def test_total_mass_is_equal_in_both_engines_within_0_1_percent(robot):
    mj, pyb = MujocoEngine(robot), PybulletEngine(robot)
    try:
        assert mj.total_mass == pytest.approx(robot.total_mass, rel=1e-3)
        assert pyb.total_mass == pytest.approx(mj.total_mass, rel=1e-3)
    finally:
        pyb.close()


def test_pybullet_reports_the_root_link_frame_at_the_mujoco_start_pose(robot):
    mj, pyb = MujocoEngine(robot), PybulletEngine(robot)
    try:
        for a, b in zip(mj.base_pose(), pyb.base_pose()):
            np.testing.assert_allclose(a, b, atol=1e-9)
        np.testing.assert_allclose(pyb.torso_quat(), mj.torso_quat(), atol=1e-9)
        np.testing.assert_allclose(pyb.joint_state()[0], robot.q_nominal, atol=1e-12)
        np.testing.assert_allclose(pyb.mj_qpos(), robot.init_qpos, atol=1e-9)
        np.testing.assert_allclose(pyb.com(), mj.com(), atol=1e-6)
    finally:
        pyb.close()


def test_pybullet_runs_at_the_model_timestep_with_velocity_motors_off(robot):
    import pybullet

    pyb = PybulletEngine(robot)
    try:
        params = pybullet.getPhysicsEngineParameters(physicsClientId=pyb._cid)
        assert params["fixedTimeStep"] == pytest.approx(robot.model.opt.timestep)
        assert params["numSubSteps"] == 0
        # with zero torque and the default motors off, a swinging arm is not held at rest
        pyb.step(np.zeros(len(robot.joint_names)))
        for _ in range(200):
            pyb.step(np.zeros(len(robot.joint_names)))
        q, qd = pyb.joint_state()
        assert np.max(np.abs(q - robot.q_nominal)) > 0.05
    finally:
        pyb.close()


def test_both_engines_stand_10_s_in_stand(robot):
    hist = _run_both(robot, "stand", 10.0)
    assert hist[-1]["sim_time"] == pytest.approx(10.0)
    for eng in ("mujoco", "pybullet"):
        z, pitch = _series(hist, eng, "pelvis_z"), _series(hist, eng, "pitch_deg")
        assert np.max(np.abs(z - robot.standing_height)) < 0.01, eng
        assert np.max(np.abs(pitch)) < 2.0, eng
        assert hist[-1]["engines"][eng]["support"] == "double"
    dz = np.array([h["divergence"]["pelvis_dz"] for h in hist])
    assert np.max(np.abs(dz)) < 0.01


def test_both_engines_fall_in_zero(robot):
    hist = _run_both(robot, "zero", 2.0)
    for eng in ("mujoco", "pybullet"):
        assert hist[-1]["engines"][eng]["pelvis_z"] < 0.5 * robot.standing_height, eng
        assert hist[-1]["engines"][eng]["fall_time"] is not None, eng
        assert 0.1 < hist[-1]["engines"][eng]["fall_time"] < 1.5, eng


def test_both_engines_respond_to_push(robot):
    push = _run_both(robot, "push", 2.0)  # first push at 1.0 s, 25 N for 0.1 s
    stand = _run_both(robot, "stand", 2.0)
    t = np.array([h["sim_time"] for h in push])
    window = (t > 1.0) & (t < 1.6)
    for eng in ("mujoco", "pybullet"):
        dx = _series(push, eng, "forward_x")[window] - _series(stand, eng, "forward_x")[window]
        dpitch = _series(push, eng, "pitch_deg")[window] - _series(stand, eng, "pitch_deg")[window]
        assert np.max(dx) > 0.005, eng  # pushed along +x
        assert np.max(np.abs(dpitch)) > 1.0, eng
        assert _series(push, eng, "pelvis_z")[-1] > 0.95 * robot.standing_height, eng  # and recovers


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_engine_contract_holds_for_every_mode(robot, engine, mode):
    eng = ENGINES[engine](robot)
    try:
        nu, nq = len(robot.joint_names), robot.model.nq
        rollout = Rollout(eng, PDGains.for_robot(robot), get_mode(mode, robot))

        def run():
            rollout.reset()
            assert eng.time == 0.0
            np.testing.assert_allclose(eng.mj_qpos(), robot.init_qpos, atol=1e-9)
            return simulate(rollout, 0.3, sample_dt=0.05)

        first = run()
        q, qd = eng.joint_state()
        pos, quat = eng.base_pose()
        assert q.shape == qd.shape == (nu,)
        assert pos.shape == (3,) and quat.shape == (4,) and eng.torso_quat().shape == (4,)
        assert abs(np.linalg.norm(quat) - 1.0) < 1e-6
        assert eng.mj_qpos().shape == (nq,) and eng.com().shape == (3,)
        assert eng.time == pytest.approx(0.3)
        for arr in (q, qd, pos, quat, eng.mj_qpos(), eng.com()):
            assert np.all(np.isfinite(arr))
        assert all(np.isfinite(c.fz) and c.pos.shape == (3,) and c.side in (0, 1) for c in eng.foot_contacts())
        second = run()
        assert [m.to_dict() for m in first] == [m.to_dict() for m in second]
    finally:
        if hasattr(eng, "close"):
            eng.close()


def test_pybullet_state_maps_to_mujoco_qpos_by_joint_name(robot):
    """Feed PyBullet's qpos to MuJoCo's kinematics: every link lands where PyBullet has it."""
    import mujoco
    import pybullet

    pyb = PybulletEngine(robot)
    try:
        rollout = Rollout(pyb, PDGains.for_robot(robot), get_mode("squat", robot))
        simulate(rollout, 1.0)
        d = mujoco.MjData(robot.model)
        d.qpos[:] = pyb.mj_qpos()
        mujoco.mj_kinematics(robot.model, d)
        for name, link in pyb._link_index.items():
            if link < 0:
                continue
            state = pybullet.getLinkState(pyb._body, link, computeForwardKinematics=True, physicsClientId=pyb._cid)
            np.testing.assert_allclose(d.xpos[robot.model.body(name).id], state[4], atol=1e-6, err_msg=name)
    finally:
        pyb.close()


# ---- another URDF humanoid ----------------------------------------------------------------------
def test_urdf_with_relative_stl_meshes_loads_and_stands_in_both_engines(tmp_path):
    robot = load_robot(write_mesh_humanoid(tmp_path / "mini"))
    assert any(a.suffix == ".stl" for a in robot.assets)
    hist = _run_both(robot, "stand", 2.0)
    start = hist[0]["engines"]
    for eng in ("mujoco", "pybullet"):
        z = _series(hist, eng, "pelvis_z")
        assert np.max(np.abs(z - robot.standing_height)) < 0.02, eng
        assert abs(hist[-1]["engines"][eng]["pitch_deg"]) < 3.0, eng
        assert start[eng]["pelvis_z"] == pytest.approx(robot.standing_height)
    pyb = PybulletEngine(robot)
    try:
        assert pyb.total_mass == pytest.approx(robot.total_mass, rel=1e-3)
        # the pelvis' inertial frame is offset from its link frame: the reported pose is the link's
        np.testing.assert_allclose(pyb.base_pose()[0], robot.init_qpos[:3], atol=1e-9)
    finally:
        pyb.close()


def test_urdf_with_package_uri_meshes_loads_in_pybullet(tmp_path):
    folder = tmp_path / "mini_pkg"
    path = write_mesh_humanoid(folder)
    path.write_text(path.read_text().replace('filename="meshes/', 'filename="package://mini_pkg/meshes/'))
    robot = load_robot(path)
    pyb = PybulletEngine(robot)
    try:
        assert pyb.total_mass == pytest.approx(robot.total_mass, rel=1e-3)
    finally:
        pyb.close()


def test_pybullet_refuses_a_mesh_format_it_cannot_read_and_says_so(tmp_path):
    robot = load_robot(write_mesh_humanoid(tmp_path / "msh", mesh_file="meshes/foot.msh"))  # MuJoCo reads it
    with pytest.raises(LabError) as err:
        PybulletEngine(robot)
    assert "PyBullet cannot load mini.urdf: mesh 'meshes/foot.msh'" in str(err.value)
    assert ".stl" in err.value.hint
