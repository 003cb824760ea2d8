"""The Lab's remote monitor: its state machine fed by hand, then against real server processes killed
with SIGKILL, restarted, and replaced by a server of another model."""

import os
import signal
import time

import pytest

from lab.remote.cli import spawn_state_server, stop_child
from lab.remote.client import wait_ready
from lab.remote.monitor import CONNECTED, DISCONNECTED, MISMATCH, STALE, MonitorState, RemoteMonitor
from lab.robots.model import BUILTIN_URDF
from tests.conftest import free_port


def state(robot, seq, instance="a" * 32, **over):
    s = {
        "type": "state",
        "sequence": seq,
        "simulation_time": seq * 0.005,
        "server_instance_id": instance,
        "model": robot.identity_dict(),
        "qpos": robot.init_qpos.tolist(),
        "qvel": [0.0] * robot.model.nv,
        "active_control": None,
    }
    s.update(over)
    return s


@pytest.fixture()
def mon(robot):
    return MonitorState(robot.identity, robot.model.nq, robot.model.nv)


def kinds(status):
    return [e["kind"] for e in status["events"]]


def test_monitor_is_disconnected_before_any_state(mon):
    assert mon.status(0.0)["state"] == DISCONNECTED
    mon.on_error("Connection refused", 0.1)
    st = mon.status(0.2)
    assert st["state"] == DISCONNECTED and st["last_error"] == "Connection refused"


def test_fresh_state_connects_and_a_second_without_news_makes_it_stale(mon, robot):
    assert mon.on_state(state(robot, 1), 10.0)
    st = mon.status(10.5)
    assert (st["state"], st["sequence"], st["state_age_s"]) == (CONNECTED, 1, 0.5)
    assert not mon.on_state(state(robot, 1), 10.9)  # the same sequence again is not fresh
    st = mon.status(11.01)
    assert st["state"] == STALE and "connection lost" in kinds(st)
    assert mon.latest()["sequence"] == 1  # the last state is kept while stale


def test_a_link_error_is_stale_at_once_then_disconnected_after_five_seconds(mon, robot):
    mon.on_state(state(robot, 5), 0.0)
    mon.on_error("connection closed by server", 0.1)
    assert mon.status(0.1)["state"] == STALE
    mon.on_error("Connection refused", 0.3)
    st = mon.status(5.2)
    assert st["state"] == DISCONNECTED and st["last_error"] == "Connection refused"
    assert kinds(st).count("connection lost") == 1


def test_a_new_instance_restarts_the_sequence_and_logs_both_events(mon, robot):
    mon.on_state(state(robot, 900), 0.0)
    mon.on_error("Connection refused", 0.1)
    assert mon.on_state(state(robot, 0, instance="b" * 32), 2.0)
    st = mon.status(2.0)
    assert st["state"] == CONNECTED and st["server_instance_id"] == "b" * 32 and st["sequence"] == 0
    assert kinds(st)[-3:] == ["connection lost", "instance changed", "connection recovered"]
    assert st["events"][-2]["text"] == "instance changed: aaaaaaaa -> bbbbbbbb (sequence restarts at 0)"


def test_a_sequence_going_backwards_within_one_instance_is_flagged(mon, robot):
    mon.on_state(state(robot, 100), 0.0)
    mon.on_state(state(robot, 40), 0.01)
    st = mon.status(0.02)
    assert st["sequence_backwards"] == 1
    assert st["sequence_flag"] == "sequence went backwards: 100 -> 40 within instance aaaaaaaa"
    assert "sequence went backwards" in kinds(st)


def test_another_model_is_a_mismatch_and_never_shown_as_live(mon, robot):
    other = dict(robot.identity_dict(), sha256="e" * 64, short="e" * 12, file="other.urdf")
    assert not mon.on_state(state(robot, 1, model=other), 0.0)
    st = mon.status(0.1)
    assert st["state"] == MISMATCH and not st["live"]
    assert st["mismatch"].startswith("model identity eeeeeeeeeeee (other.urdf, nq=29) differs from the local model")
    assert mon.latest() is None
    assert "model mismatch" in kinds(st)


# --- real processes ----------------------------------------------------------------------------


def wait_for(monitor, want, timeout):
    """Poll the monitor until its state is in ``want``; (seconds it took, status)."""
    t0 = time.monotonic()
    while True:
        st = monitor.status()
        if st["state"] in want:
            return time.monotonic() - t0, st
        if time.monotonic() - t0 > timeout:
            return None, st
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("transport", "entry"), [("stream", "app"), ("poll", "module")], ids=["stream-app.py", "poll-module"]
)
def test_monitor_follows_a_real_server_through_sigkill_and_restart(robot, tmp_path, transport, entry):
    """The server runs as ``python app.py state-server`` or ``python -m lab.remote serve``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    procs = [spawn_state_server(port, log_path=tmp_path / "a.log", entry=entry)]
    monitor = RemoteMonitor(url, robot.identity, robot.model.nq, robot.model.nv, transport=transport).start()
    try:
        first = wait_ready(url, timeout=30, proc=procs[0])
        took, st = wait_for(monitor, {CONNECTED}, 5.0)
        assert took is not None, st
        assert st["server_instance_id"] == first["server_instance_id"]

        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait()
        took, st = wait_for(monitor, {STALE, DISCONNECTED}, 1.5)
        assert took is not None, f"still {st['state']} 1.5 s after SIGKILL"
        assert st["sequence"] is not None  # the last state is kept
        time.sleep(0.3)
        assert monitor.status()["last_error"] in ("Connection refused", "connection closed by server")

        procs.append(spawn_state_server(port, log_path=tmp_path / "b.log", entry=entry))
        second = wait_ready(url, timeout=30, proc=procs[1])
        took, st = wait_for(monitor, {CONNECTED}, 1.5)
        assert took is not None, f"still {st['state']} 1.5 s after the new server answered"
        assert st["server_instance_id"] == second["server_instance_id"] != first["server_instance_id"]
        events = [e["kind"] for e in st["events"]]
        assert "instance changed" in events and "connection recovered" in events
        assert events.index("connection lost") < events.index("instance changed")
    finally:
        monitor.stop()
        for p in procs:
            stop_child(p)


def test_monitor_reports_mismatch_for_a_server_running_another_model(robot, tmp_path):
    other = tmp_path / "q1_variant.urdf"
    other.write_text(BUILTIN_URDF.read_text() + "\n<!-- a variant: same shape, another file -->\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = spawn_state_server(port, model=other, log_path=tmp_path / "c.log")
    monitor = RemoteMonitor(url, robot.identity, robot.model.nq, robot.model.nv).start()
    try:
        wait_ready(url, timeout=30, proc=proc)
        took, st = wait_for(monitor, {MISMATCH}, 5.0)
        assert took is not None, st
        assert "differs from the local model" in st["mismatch"] and "q1_variant.urdf" in st["mismatch"]
        assert monitor.latest() is None and not st["live"]
    finally:
        monitor.stop()
        stop_child(proc)
