"""The closed-loop walk: planner state machine, the 03_walk.py outputs, and the Lab's walk mode."""

import csv
import json
import math
import runpy
from pathlib import Path

import numpy as np
import pytest

from lab.walking.geometry import measure_geometry
from lab.walking.planner import FootstepPlanner, GaitParams

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def geo(robot):
    return measure_geometry(robot)


def _planner(robot, geo, **kw):
    com0 = np.array(geo.com_offset[:2]) + robot.init_qpos[:2]
    return FootstepPlanner(geo, GaitParams(**kw), np.array(geo.ankle_xyz), com0)


def test_planner_timeline_is_double_040_single_055_double_035(robot, geo):
    pl = _planner(robot, geo, steps=3)
    kinds = [(ph.kind, round(ph.t1 - ph.t0, 6)) for ph in pl.phases]
    assert kinds[1] == ("ds", 0.40)
    assert kinds[2:8] == [("ss", 0.55), ("ds", 0.35)] * 3
    assert pl.phases[-1].kind == "stand"
    assert pl.p.duration == pytest.approx(pl.phases[-1].t1)


def test_footholds_advance_by_the_step_length_one_ankle_spacing_apart_and_the_last_closes(robot, geo):
    pl = _planner(robot, geo, steps=4, step_len=0.05)
    holds = pl.holds
    assert holds[0] == pytest.approx([0.05, geo.ankle_xyz[1][1]])  # right foot first, beside the left
    assert holds[1] == pytest.approx([0.10, geo.ankle_xyz[0][1]])
    assert holds[2] == pytest.approx([0.15, geo.ankle_xyz[1][1]])
    assert holds[3] == pytest.approx([0.15, geo.ankle_xyz[0][1]])  # closing step: side by side
    assert pl.p.planned_forward == pytest.approx(0.15)


def test_zmp_sits_on_the_support_foot_balance_point_in_single_support(robot, geo):
    pl = _planner(robot, geo, steps=3)
    for ph in pl.phases:
        if ph.kind != "ss":
            continue
        ref = pl.reference(0.5 * (ph.t0 + ph.t1))
        support = pl.feet_at_step(ph.step)[ph.support]
        assert ref.zmp == pytest.approx(support + (geo.balance_x, 0.0), abs=1e-9)


def test_swing_follows_a_cosine_with_a_sine_lift(robot, geo):
    pl = _planner(robot, geo, steps=2, step_len=0.04, step_height=0.03)
    ph = next(p for p in pl.phases if p.kind == "ss")
    sw = 1 - ph.support
    start, end = pl.start[sw], pl.holds[0]
    for s in (0.0, 0.25, 0.5, 0.75, 1.0):
        ref = pl.reference(ph.t0 + s * (ph.t1 - ph.t0) - (1e-9 if s == 1.0 else 0.0))
        assert ref.feet[sw, :2] == pytest.approx(start + 0.5 * (1 - math.cos(math.pi * s)) * (end - start), abs=1e-6)
        assert ref.feet[sw, 2] == pytest.approx(pl.ground + 0.03 * math.sin(math.pi * s), abs=1e-6)
        assert ref.feet[ph.support, 2] == pytest.approx(pl.ground)


def test_replan_places_the_remaining_footholds_from_the_measured_support_foot(robot, geo):
    pl = _planner(robot, geo, steps=3, step_len=0.04)
    ph = next(p for p in pl.phases if p.kind == "ss" and p.step == 1)  # right foot supports
    com_before = pl.reference(ph.t0).com.copy()
    measured = np.array([[0.0, 0.09, 0.0355], [0.047, -0.07, 0.0355]])  # right foot landed off its foothold
    pl.replan(ph.t0, measured)
    assert pl.holds[1] == pytest.approx([0.047 + 0.04, -0.07 + geo.ankle_spacing])
    assert pl.holds[2] == pytest.approx([0.047 + 0.04, -0.07])  # the closing step lands beside it
    assert pl.reference(ph.t0 + 0.2).zmp == pytest.approx([0.047 + geo.balance_x, -0.07])
    assert pl.reference(ph.t0).com == pytest.approx(com_before, abs=1e-9)  # the CoM plan stays continuous


def _read_trace(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_walk_script_with_two_short_steps_writes_finite_consistent_outputs(tmp_path):
    main = runpy.run_path(str(ROOT / "experiments" / "03_walk.py"), run_name="not_main")["main"]
    main(["--steps", "2", "--step-len", "0.02", "--step-height", "0.02", "--seed", "0", "--out", str(tmp_path)])
    s = json.loads((tmp_path / "summary.json").read_text())
    rows = _read_trace(tmp_path / "walk_trace.csv")
    assert (tmp_path / "walk_curves.png").stat().st_size > 20_000
    for key in (
        "z_min",
        "pitch_max_deg",
        "forward_planned_m",
        "forward_actual_m",
        "com_track_rms_m",
        "ik_max_error_mm",
    ):
        assert math.isfinite(s[key]), key
    assert len(rows) == s["trace_rows"] > 100
    t = np.array([float(r["t_s"]) for r in rows])
    z = np.array([float(r["pelvis_z_m"]) for r in rows])
    pitch = np.array([float(r["pitch_deg"]) for r in rows])
    assert np.all(np.diff(t) > 0) and t[-1] == pytest.approx(s["sim_duration_s"], abs=1e-6)
    assert s["z_min"] == pytest.approx(z.min(), abs=1e-5)
    assert s["pitch_max_deg"] == pytest.approx(np.abs(pitch).max(), abs=1e-3)
    assert s["forward_actual_m"] == pytest.approx(float(rows[-1]["pelvis_x_m"]), abs=1e-5)
    bad = (z < s["pelvis_limit_m"]) | (np.abs(pitch) > s["pitch_limit_deg"])
    assert s["fell"] == bool(bad.any()) and s["stable"] == (not s["fell"])
    if s["fell"]:
        assert s["fall_time_s"] == pytest.approx(t[np.argmax(bad)], abs=1e-6)
        assert t[-1] <= s["fall_time_s"] + 0.5 + 1e-6
    else:
        assert s["fall_time_s"] is None and t[-1] == pytest.approx(s["plan_duration_s"], abs=1e-6)
    assert s["pelvis_limit_m"] == pytest.approx(0.35, abs=1e-3) and s["pitch_limit_deg"] == 45.0
    assert s["ik_max_error_mm"] < 2.0  # IK is not the layer that fails


def test_run_walk_gives_the_same_summary_twice(robot):
    from lab.walking.run import run_walk

    a = run_walk(step_len=0.02, step_height=0.02, steps=1, seed=3, robot=robot)
    b = run_walk(step_len=0.02, step_height=0.02, steps=1, seed=3, robot=robot)
    drop = ("wall_s",)
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def test_pd_walk_mode_is_registered_and_puts_planned_com_and_zmp_in_extras(robot):
    from lab.control.modes import MODES, get_mode
    from lab.control.pd import PDGains
    from lab.control.rollout import Rollout, simulate
    from lab.runtime.modes import LAB_MODES
    from lab.sim.mujoco_engine import MujocoEngine

    assert "walk_pd" in LAB_MODES and "walk_pd" not in MODES  # the Lab's registry is built explicitly
    engine = MujocoEngine(robot)
    rollout = Rollout(engine, PDGains.for_robot(robot), get_mode("walk_pd", robot, modes=LAB_MODES))
    samples, extras = simulate(rollout, 1.2, sample_dt=0.1), rollout.command.extras
    for key in ("com_plan_x", "com_plan_y", "zmp_plan_x", "zmp_plan_y", "com_x", "com_y", "phase", "fallen"):
        assert isinstance(extras[key], float) and math.isfinite(extras[key]), key
    assert extras["zmp_plan_y"] > 0.05  # by 1.2 s the ZMP is on the left (first support) foot
    assert abs(extras["com_plan_y"] - extras["com_y"]) < 0.03
    assert samples[-1].pelvis_z > 0.4 and extras["fallen"] == 0.0
    # a reset restarts the plan from the standing robot
    rollout.reset()
    assert rollout.command.extras["zmp_plan_y"] == pytest.approx(0.0, abs=1e-6)
    assert rollout.command.extras["phase"] == 2.0  # lead-in ("stand") again
