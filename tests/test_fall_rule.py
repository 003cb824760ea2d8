"""One fall rule for every service, scan and experiment: Sim2Sim, the Lab and a push scan point agree
on when the same run fell: the rule is checked every 10 ms of simulation time in every runner and in a scan,
whatever their sample rates."""

import pytest

from lab.control.modes import PushParams
from lab.runtime.lockstep import Lockstep
from lab.runtime.session import SimSession
from lab.scans.builtin import PUSH_FIRST_S, push_point

FORCE_N, DURATION_S, SECONDS = 150.0, 0.2, 2.5  # a push the PD stand does not survive


def test_sim2sim_the_lab_and_the_push_scan_report_the_same_fall_time_for_the_same_run(robot, tmp_path):
    scan = push_point({"force_n": FORCE_N, "duration_s": DURATION_S, "seconds": SECONDS}, tmp_path)
    assert scan["fell"] and scan["fall_time"] is not None

    push = PushParams(force_n=FORCE_N, duration_s=DURATION_S, period_s=60.0, first_s=PUSH_FIRST_S)
    s2s = Lockstep(robot, mode="push", push=push)  # the Sim2Sim service's runner, both engines, its defaults
    try:
        s2s.advance(SECONDS)
        s2s_fall = s2s.latest()["engines"]["mujoco"]["fall_time"]
    finally:
        s2s.close()
    lab = SimSession(robot, mode="push", push=push)  # the Lab's runner with its defaults (25 Hz samples)
    lab.advance(SECONDS)

    assert s2s_fall == pytest.approx(scan["fall_time"], abs=1e-9)
    assert lab.fell_at() == pytest.approx(scan["fall_time"], abs=1e-9)
    assert PUSH_FIRST_S < scan["fall_time"] < SECONDS


def test_a_robot_lying_on_the_floor_has_fallen_whatever_its_feet_touch(robot):
    lab = SimSession(robot, mode="zero")
    lab.advance(1.5)
    m = lab.latest()
    assert m["fall_time"] is not None and 0.05 < m["fall_time"] < 1.0
    assert robot.has_fallen(m["pelvis_z"], m["pitch_deg"], m["roll_deg"])
    assert not robot.has_fallen(robot.standing_height, 0.0, 0.0)
    assert robot.has_fallen(robot.standing_height, 0.0, 50.0)  # tipped sideways
    assert robot.fall_height == pytest.approx(0.35, abs=1e-3)  # the built-in robot: 0.35 m
