"""The lockstep runner: both engines from one start state, one mode, one push, one pause and reset;
and loading a model for Sim2Sim, where an engine that cannot read it is named with the reason."""

import time

import numpy as np
import pytest

from lab.errors import LabError
from lab.robots.model import load_robot
from lab.runtime.lockstep import Lockstep, load_sim2sim_robot, mass_report
from tests.test_pybullet_engine import write_mesh_humanoid


@pytest.fixture
def lockstep(robot):
    ls = Lockstep(robot, "stand")
    yield ls
    ls.close()


def test_both_engines_start_from_the_same_state(lockstep, robot):
    s = lockstep.latest()
    assert s["sim_time"] == 0.0
    assert set(s["engines"]) == {"mujoco", "pybullet"}
    assert s["divergence"]["joint_rms"] == 0.0 and s["divergence"]["pelvis_dz"] == 0.0
    for name in ("mujoco", "pybullet"):
        qpos, t = lockstep.snapshot(name)
        np.testing.assert_allclose(qpos, robot.init_qpos, atol=1e-9)
        assert t == 0.0


def test_engines_advance_by_the_same_ticks_and_stay_close_when_standing(lockstep):
    lockstep.advance(1.0)
    s = lockstep.latest()
    assert s["sim_time"] == pytest.approx(1.0)
    assert all(m["sim_time"] == pytest.approx(1.0) for m in s["engines"].values())
    assert abs(s["divergence"]["pelvis_dz"]) < 0.005
    assert 0.0 < s["divergence"]["joint_rms"] < 0.01
    assert len(lockstep.history) == 51  # 50 Hz samples plus the one at t = 0


def test_mode_acts_on_both_engines_and_push_pushes_both(lockstep):
    lockstep.set_mode("push", push={"force_n": 60.0, "first_s": 0.2})
    lockstep.advance(0.25)
    s = lockstep.latest()
    assert s["mode"] == "push" and s["push"] is True
    assert all(m["push"] for m in s["engines"].values())
    lockstep.advance(0.35)
    x = {n: m["forward_x"] for n, m in lockstep.latest()["engines"].items()}
    assert x["mujoco"] > 0.005 and x["pybullet"] > 0.005
    assert x["pybullet"] == pytest.approx(x["mujoco"], rel=0.5)


def test_zero_mode_makes_both_fall_and_records_the_fall_time(lockstep):
    lockstep.set_mode("zero")
    lockstep.reset()
    lockstep.advance(1.5)
    s = lockstep.latest()
    for m in s["engines"].values():
        assert m["fall_time"] is not None and 0.1 < m["fall_time"] < 1.5


def test_reset_brings_both_back_to_time_zero_and_clears_history(lockstep, robot):
    lockstep.set_mode("squat")
    lockstep.advance(0.5)
    lockstep.reset()
    s = lockstep.latest()
    assert s["sim_time"] == 0.0 and s["mode"] == "squat" and s["resets"] == 1
    assert len(lockstep.history) == 1
    for name in ("mujoco", "pybullet"):
        np.testing.assert_allclose(lockstep.snapshot(name)[0], robot.init_qpos, atol=1e-9)


def test_same_mode_twice_gives_the_same_trajectories(lockstep):
    lockstep.set_mode("squat")
    runs = []
    for _ in range(2):
        lockstep.reset()
        lockstep.advance(0.4)
        runs.append(list(lockstep.history))
    assert runs[0] == runs[1]


def test_unknown_mode_is_refused_and_lists_the_modes(lockstep):
    with pytest.raises(LabError) as err:
        lockstep.set_mode("fly")
    assert str(err.value) == "unknown mode 'fly'"
    assert "stand" in err.value.hint and "zero" in err.value.hint
    assert lockstep.mode_name == "stand"


def test_bad_push_parameters_are_refused(lockstep):
    with pytest.raises(LabError, match="push force_n 2900 is outside"):
        lockstep.set_mode("push", push={"force_n": 2900})
    with pytest.raises(LabError, match="unknown push parameter"):
        lockstep.set_mode("push", push={"newtons": 9})
    assert lockstep.mode_name == "stand"


def test_thread_steps_both_engines_and_pause_stops_them(lockstep):
    lockstep.start()
    deadline = time.time() + 5
    while lockstep.sim_time < 0.1 and time.time() < deadline:
        time.sleep(0.02)
    assert lockstep.sim_time >= 0.1
    lockstep.pause(True)
    time.sleep(0.05)
    t = lockstep.sim_time
    time.sleep(0.2)
    assert lockstep.sim_time == t
    assert lockstep.latest()["paused"] is True
    lockstep.pause(False)
    deadline = time.time() + 5
    while lockstep.sim_time <= t and time.time() < deadline:
        time.sleep(0.02)
    assert lockstep.sim_time > t
    lockstep.reset()
    assert lockstep.sim_time < t
    lockstep.stop()


# ---- loading a model for Sim2Sim -----------------------------------------------------------------
def test_builtin_robot_has_the_same_mass_in_both_engines(lockstep):
    masses = lockstep.masses
    assert masses["mass_warning"] is None
    assert masses["total_mass"]["pybullet"] == pytest.approx(masses["total_mass"]["mujoco"], rel=1e-3)


def test_urdf_with_stl_meshes_loads_for_sim2sim(tmp_path):
    robot = load_sim2sim_robot(write_mesh_humanoid(tmp_path / "mini"))
    assert robot.path.name == "mini.urdf" and len(robot.joint_names) == 11


def test_model_only_mujoco_can_load_names_pybullet_and_the_reason(tmp_path):
    path = write_mesh_humanoid(tmp_path / "msh", mesh_file="meshes/foot.msh")
    load_robot(path)  # MuJoCo reads its own .msh format
    with pytest.raises(LabError) as err:
        load_sim2sim_robot(path)
    assert (
        str(err.value) == "PyBullet cannot load mini.urdf: mesh 'meshes/foot.msh' is in a format PyBullet does not read"
    )


def test_model_only_pybullet_can_load_names_mujoco_and_the_reason(tmp_path):
    # a moving link without <inertial> or geometry: PyBullet gives it 1 kg, MuJoCo refuses a massless body
    path = write_mesh_humanoid(tmp_path / "dummy", dummy_link="revolute")
    with pytest.raises(LabError) as err:
        load_sim2sim_robot(path)
    assert str(err.value).startswith("MuJoCo cannot load mini.urdf: ")
    assert "mass and inertia of moving bodies" in str(err.value)


def test_link_without_inertial_is_corrected_to_mujocos_mass_and_said_so(tmp_path):
    robot = load_sim2sim_robot(write_mesh_humanoid(tmp_path / "fixed", dummy_link="fixed"))
    ls = Lockstep(robot, "stand")
    try:
        report = mass_report(robot, ls.engines)
        assert report["total_mass"]["pybullet"] == pytest.approx(report["total_mass"]["mujoco"])
        assert report["mass_warning"] is None
        pyb = ls.engines["pybullet"]
        assert "imu_link" in pyb.corrected
        assert pyb.raw_total_mass == pytest.approx(report["total_mass"]["mujoco"] + 1.0)  # as PyBullet loads it
        assert any("imu_link" in n and "1 kg" in n for n in pyb.load_notes)
    finally:
        ls.close()


def test_mjcf_model_is_refused_for_sim2sim(tmp_path):
    path = tmp_path / "robot.xml"
    path.write_text("<mujoco><worldbody><body><freejoint/><geom size='0.1'/></body></worldbody></mujoco>")
    with pytest.raises(LabError) as err:
        load_sim2sim_robot(path)
    assert str(err.value) == "PyBullet cannot load robot.xml: it is not a URDF (root element <mujoco>)"


def test_missing_model_file_is_reported_as_such(tmp_path):
    with pytest.raises(LabError, match="model file not found"):
        load_sim2sim_robot(tmp_path / "nope.urdf")


# ---- experiments/sim2sim.py ---------------------------------------------------------------------
def _numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, float):
        yield obj


def test_sim2sim_experiment_writes_summary_csv_and_figures_with_finite_numbers(tmp_path):
    import csv
    import importlib.util
    import json

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("exp_sim2sim", ROOT / "experiments" / "sim2sim.py")
    exp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exp)
    exp.main(["--mode", "stand", "zero", "--seconds", "1.0", "--out", str(tmp_path)])

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["modes"]) == {"stand", "zero"}
    assert all(np.isfinite(x) for x in _numbers(summary))
    stand, zero = summary["modes"]["stand"], summary["modes"]["zero"]
    for eng in ("mujoco", "pybullet"):
        assert stand["engines"][eng]["time_to_fall_s"] is None
        assert 0.0 < zero["engines"][eng]["time_to_fall_s"] < 1.0
        assert 0.0 < stand["engines"][eng]["steady_state_max_joint_err_rad"]["mean"] < 0.05
    assert stand["divergence"]["pelvis_dz_m"]["max"] < 0.005
    assert len(stand["divergence_over_time"]) == 3  # t = 0, 0.5, 1.0
    for mode in ("stand", "zero"):
        rows = list(csv.reader(open(tmp_path / f"sim2sim_{mode}.csv")))
        assert rows[0][0] == "sim_time" and "div_joint_rms" in rows[0] and len(rows) == 1 + 101
        assert (tmp_path / f"sim2sim_{mode}.png").stat().st_size > 20_000


def test_lockstep_refuses_an_unknown_start_mode(robot):
    with pytest.raises(LabError, match="unknown mode 'hop'"):
        Lockstep(robot, "hop")
