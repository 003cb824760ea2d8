"""The one real-time runner under the Lab session, Sim2Sim lockstep and state server: an exception or a
divergence in the physics thread is never silent, and reset recovers."""

import time

import numpy as np
import pytest

from lab.control.modes import MODES
from lab.remote.state_sim import StateSim
from lab.runtime.lockstep import Lockstep
from lab.runtime.modes import LAB_MODES
from lab.runtime.realtime import RealtimeRunner
from lab.runtime.session import SimSession
from tests.fault_modes import MESSAGE, NanTargets, Raises, with_faults

TEST_MODES = with_faults(LAB_MODES, Raises, NanTargets)
S2S_TEST_MODES = with_faults(MODES, Raises, NanTargets)


def make_runner(kind: str, robot) -> RealtimeRunner:
    if kind == "lab":
        return SimSession(robot, modes=TEST_MODES)
    if kind == "sim2sim":
        return Lockstep(robot, modes=S2S_TEST_MODES)
    return StateSim(robot, modes=TEST_MODES)


@pytest.fixture(params=["lab", "sim2sim", "state-server"])
def runner(request, robot):
    r = make_runner(request.param, robot)
    yield r
    r.close()


def test_a_mode_that_raises_stops_the_runner_with_its_reason_and_reset_recovers(runner):
    runner.set_mode("boom")
    runner.advance(0.2)
    info = runner.sim_info()
    assert info["state"] == "error"
    assert info["error"] == f"RuntimeError: {MESSAGE}"
    assert 0.05 <= info["at"] <= 0.2
    t = runner.sim_time
    runner.advance(0.1)
    assert runner.sim_time == t  # stopped: no step after the error
    assert runner.measured_rtf() == 0.0
    runner.set_mode("stand")
    runner.reset()
    assert runner.sim_info() == {"state": "running", "error": None, "at": None, "resets": 1}
    runner.advance(0.1)
    assert runner.sim_time == pytest.approx(0.1)


def test_nan_targets_are_reported_as_a_divergence_not_hidden_by_an_engine_reset(runner):
    runner.set_mode("nan")
    runner.advance(0.3)
    info = runner.sim_info()
    assert info["state"] == "diverged", info
    assert info["error"].startswith(("MuJoCo: ", "PyBullet: "))
    runner.set_mode("stand")
    runner.reset()
    assert runner.sim_info()["state"] == "running"
    runner.advance(0.2)
    assert runner.sim_info()["state"] == "running"
    assert np.isfinite(runner.snapshot()[0]).all()


def test_the_labs_200_n_push_attack_is_reported_as_diverged_instead_of_a_silent_reset(robot):
    """push 200 N for 1.0 s every 1.01 s: MuJoCo blows up after ~30 s and used to reset itself unseen."""
    s = SimSession(robot, mode="push")
    s.set_push({"force_n": 200, "duration_s": 1.0, "period_s": 1.01})
    for _ in range(120):
        s.advance(0.5)
        if s.sim_info()["state"] != "running":
            break
    info = s.sim_info()
    assert info["state"] == "diverged"
    assert "bad acceleration" in info["error"] and "MuJoCo reset its data" in info["error"]
    assert info["at"] > 5.0  # when it happened, not the time MuJoCo's own reset restarted from
    assert s.fell_at() is not None and s.fell_at() < info["at"]  # it had fallen long before
    s.reset()
    assert s.sim_info()["state"] == "running" and s.fell_at() is None


def test_the_live_thread_reports_an_error_and_keeps_serving_reads(robot):
    s = SimSession(robot, modes=TEST_MODES).start()
    try:
        deadline = time.monotonic() + 20
        while s.sim_time < 0.1 and time.monotonic() < deadline:
            time.sleep(0.01)
        s.set_mode("boom")
        while s.sim_info()["state"] != "error" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.sim_info()["state"] == "error"
        assert s._thread.is_alive()  # the thread waits for a reset; it did not die
        assert s.latest()["sim"]["state"] == "error"
        s.set_mode("stand")
        s.reset()
        t0 = time.monotonic()
        while s.sim_time < 0.2 and time.monotonic() - t0 < 20:
            time.sleep(0.01)
        assert s.sim_info()["state"] == "running" and s.sim_time >= 0.2
    finally:
        s.stop()


def test_pause_is_a_state_and_holds_the_clock(robot):
    s = SimSession(robot)
    s.pause(True)
    assert s.sim_info()["state"] == "paused"
    s.pause(False)
    assert s.sim_info()["state"] == "running"


def test_sim2sim_names_a_mode_only_the_lab_has(robot):
    from lab.errors import LabError

    ls = Lockstep(robot, engines=("mujoco",))
    try:
        with pytest.raises(LabError) as e:
            ls.set_mode("pose")
        assert e.value.message == "mode 'pose' is not available in Sim2Sim"
        assert e.value.hint == "available: stand, squat, push, zero, walk"
    finally:
        ls.close()
