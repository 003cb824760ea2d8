"""The state server as a real process (``python -m lab.remote serve``) and its simulation thread:
probe, the limited command and its expiry, rejections in the contract's words, 409, token, binding."""

import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from lab.remote.cli import spawn_state_server, stop_child
from lab.remote.client import StateClient, wait_ready
from lab.remote.protocol import ControlRequest
from lab.remote.state_sim import StateSim
from lab.web.server import ServerThread
from lab.web.state_server import create_state_app
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[1]
ELBOW = "motor_left_elbow"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One state server process for the module: (url, process, log path)."""
    port = free_port()
    log = tmp_path_factory.mktemp("state_server") / "server.log"
    proc = spawn_state_server(port, log_path=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, timeout=30, proc=proc)
        yield url, proc, log
    finally:
        stop_child(proc)


@pytest.fixture()
def client(server):
    c = StateClient(server[0])
    yield c
    c.stop()  # never leave a command active for the next test
    c.close()


def wait_idle(client: StateClient, timeout: float = 3.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = client.state()
        if s["active_control"] is None:
            return s
        time.sleep(0.01)
    raise AssertionError("a command stayed active")


def cli(*args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lab.remote", *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_server_logs_version_identity_sizes_timestep_and_instance_at_start(server):
    url, _, log = server
    text = log.read_text()
    health = StateClient(url).health()
    assert "MuJoCo 4" in text or f"MuJoCo {health['mujoco']}" in text
    assert health["model"]["sha256"] in text
    assert "nq=29 nv=28 nu=22" in text and "timestep 0.001 s" in text
    assert f"server_instance_id {health['server_instance_id']}" in text


def test_probe_passes_against_a_running_server(server):
    out = cli("probe", "--url", server[0])
    assert out.returncode == 0, out.stderr
    assert "probe passed: 5 states" in out.stdout and "matches the local model" in out.stdout


def test_probe_fails_with_the_reason_when_nothing_listens():
    out = cli("probe", "--url", f"http://127.0.0.1:{free_port()}", "--any-model")
    assert out.returncode != 0
    assert "Connection refused" in out.stderr


def test_state_reports_sequence_time_instance_arrays_identity_and_no_control(server, client, robot):
    s1 = wait_idle(client)
    time.sleep(0.05)
    s2 = client.state()
    assert s2["sequence"] > s1["sequence"] and s2["simulation_time"] > s1["simulation_time"]
    assert s2["server_instance_id"] == client.health()["server_instance_id"]
    assert (len(s2["qpos"]), len(s2["qvel"]), len(s2["ctrl"])) == (29, 28, 22)
    assert s2["model"]["sha256"] == robot.identity
    assert s2["active_control"] is None
    assert s2["qpos"][2] > 0.35  # stand mode: the robot stands


def test_send_of_two_newton_metres_for_a_quarter_second_is_accepted_and_clears_itself(server, client):
    wait_idle(client)
    answer = client.control(ELBOW, 2.0, 0.25)
    assert answer.status == 202, answer.body
    b = answer.body
    assert b["status"] == "accepted" and b["model_range"] == [-22, 22] and b["demo_range"] == [-2, 2]
    assert b["duration_s"] == 0.25 and math.isclose(b["expires_at"] - b["start_time"], 0.25, abs_tol=1e-6)
    during = client.state()
    assert during["active_control"]["id"] == b["id"]
    assert during["ctrl"][16] == 2.0  # the command replaces the mode's torque on that actuator
    after = wait_idle(client)
    assert after["simulation_time"] >= b["expires_at"]
    assert after["last_control"]["id"] == b["id"] and after["last_control"]["ended"] == "expired"
    assert abs(after["last_control"]["ended_at"] - b["expires_at"]) <= 0.0011  # cleared by simulation time


def test_send_command_prints_before_after_and_final_active_control(server):
    wait_idle(StateClient(server[0]))
    out = cli("send", "--value", "2.0", "--duration", "0.25", "--url", server[0])
    assert out.returncode == 0, out.stderr
    assert "accepted: motor_left_elbow value 2 N·m for 0.25 s" in out.stdout
    assert "left_elbow_joint: before" in out.stdout and "left_elbow_joint: after" in out.stdout
    assert "active_control: None" in out.stdout


def test_send_of_23_exits_non_zero_with_the_exact_message(server):
    out = cli("send", "--value", "23", "--duration", "0.25", "--url", server[0])
    assert out.returncode != 0
    assert "HTTP 400: value 23 is outside model ctrlrange [-22, 22]" in out.stderr


def test_value_23_gets_400_with_the_exact_message(client):
    answer = client.control(ELBOW, 23.0, 0.25)
    assert answer.status == 400
    assert answer.body["status"] == "rejected"
    assert answer.body["error"] == "value 23 is outside model ctrlrange [-22, 22]"


@pytest.mark.parametrize(
    ("actuator", "value", "duration", "message"),
    [
        (ELBOW, math.nan, 0.1, "value nan is not a finite number"),
        ("motor_tail", 1.0, 0.1, "unknown actuator 'motor_tail'"),
        ("motor_right_knee", 1.0, 0.1, "actuator 'motor_right_knee' is not allowed"),
        (ELBOW, 3.0, 0.1, "value 3 is outside demo limit [-2, 2]"),
        (ELBOW, 1.0, 5, "duration_s 5 is outside (0, 0.25]"),
    ],
)
def test_nan_unknown_actuator_demo_limit_and_long_duration_get_400(client, actuator, value, duration, message):
    answer = client.control(actuator, value, duration)
    assert (answer.status, answer.body["error"]) == (400, message)
    assert client.state()["active_control"] is None


def test_an_overlapping_command_gets_409_and_the_first_one_stands(client):
    wait_idle(client)
    first = client.control(ELBOW, 1.0, 0.25)
    assert first.status == 202
    second = client.control(ELBOW, -1.0, 0.1)
    assert second.status == 409
    assert second.body["error"].startswith("a command is already active on motor_left_elbow (value 1, expires at t=")
    assert client.state()["active_control"]["id"] == first.body["id"]


def test_stop_cancels_the_active_command_at_once(client):
    wait_idle(client)
    assert client.control(ELBOW, 1.5, 0.25).status == 202
    stopped = client.stop()
    assert stopped.status == 200 and stopped.body["cancelled"]["value"] == 1.5
    assert client.state()["active_control"] is None


def test_unknown_paths_and_methods_answer_json_errors(server):
    r = requests.get(server[0] + "/api/v1/nope", timeout=2)
    # every service words a 404 the same way (lab/web/common.py); the hint lists this server's endpoints
    assert r.status_code == 404 and r.json()["error"] == "404 Not Found: no endpoint GET /api/v1/nope"
    assert r.json()["hint"].startswith("endpoints: ")
    r = requests.put(server[0] + "/api/v1/control", timeout=2)
    assert r.status_code == 405 and "PUT" in r.json()["error"]


def test_stream_sends_states_with_increasing_sequence(client):
    with client.stream(hz=100) as stream:
        states = [stream.recv() for _ in range(10)]
    seqs = [s["sequence"] for s in states]
    assert seqs == sorted(seqs) and len(set(seqs)) == 10
    assert all(len(s["qpos"]) == 29 for s in states)


def test_binding_beyond_loopback_without_a_token_is_refused(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "lab.remote", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 2
    assert "error: refusing to bind 0.0.0.0 without a token" in proc.stderr  # the one check every service uses


# --- the same app in this process: token, and the simulation thread's clock ------------------


def test_with_a_token_control_needs_bearer_and_reads_stay_open(robot):
    app = create_state_app(robot, token="s3cret")
    with ServerThread(app) as srv:
        assert StateClient(srv.url).state()["sequence"] >= 0  # reads are open
        assert StateClient(srv.url).health()["status"] == "ok"
        denied = StateClient(srv.url).control(ELBOW, 1.0, 0.1)
        assert denied.status == 401 and denied.body["error"] == "control requires Authorization: Bearer TOKEN"
        assert StateClient(srv.url, token="wrong").control(ELBOW, 1.0, 0.1).status == 401
        assert StateClient(srv.url, token="s3cret").control(ELBOW, 1.0, 0.1).status == 202
        assert StateClient(srv.url).stop().status == 200  # a stop is never blocked by auth
    assert not app.extensions["state_sim"].running  # stopping the server stopped the simulation thread


def test_command_overrides_one_actuator_and_expires_by_simulation_time_alone(robot):
    sim = StateSim(robot)  # no thread: step it by hand, like the thread does
    req = ControlRequest(ELBOW, 16, 2.0, 0.05, (-22.0, 22.0))
    cmd = sim.command(req)
    assert cmd["expires_at"] == pytest.approx(0.05)
    steps_with_override = 0
    for _ in range(100):
        active = sim.active is not None
        sim.advance(sim.dt)
        if active:
            assert sim.data.ctrl[16] == 2.0
            steps_with_override += 1
    assert steps_with_override == 50  # 0.05 s at 1 ms
    assert sim.active is None and sim.last_control["ended"] == "expired"
    assert sim.data.ctrl[16] != 2.0  # the mode's PD torque is back


def test_zero_mode_lets_the_uncontrolled_robot_fall(robot):
    sim = StateSim(robot, mode="zero")
    sim.advance(1.5)
    assert sim.data.qpos[2] < 0.3
    assert not sim.data.ctrl.any()


def test_an_error_in_the_state_servers_simulation_is_reported_over_http_and_reset_recovers(robot):
    from lab.runtime.modes import LAB_MODES
    from tests.fault_modes import MESSAGE, RaisesOnce, with_faults

    RaisesOnce.raised = False
    app = create_state_app(robot, mode="raises", modes=with_faults(LAB_MODES, RaisesOnce), token="s3cret")
    with ServerThread(app) as srv:
        deadline = time.monotonic() + 20
        while requests.get(srv.url + "/api/v1/health", timeout=5).json()["sim"]["state"] != "error":
            assert time.monotonic() < deadline, "the error was never reported"
            time.sleep(0.02)
        health = requests.get(srv.url + "/api/v1/health", timeout=5).json()
        assert health["status"] == "error" and health["sim"]["error"] == f"RuntimeError: {MESSAGE}"
        state = requests.get(srv.url + "/api/v1/state", timeout=5).json()
        assert state["sim"]["state"] == "error" and state["sim"]["at"] >= 0.3
        assert requests.post(srv.url + "/api/v1/reset", timeout=5).status_code == 401  # a reset needs the token
        r = requests.post(srv.url + "/api/v1/reset", headers={"Authorization": "Bearer s3cret"}, timeout=5)
        assert r.status_code == 200 and r.json()["sim"] == {"state": "running", "error": None, "at": None, "resets": 1}
        t0 = time.monotonic()
        while requests.get(srv.url + "/api/v1/state", timeout=5).json()["simulation_time"] < 0.5:
            assert time.monotonic() - t0 < 20
            time.sleep(0.02)
        assert requests.get(srv.url + "/api/v1/health", timeout=5).json()["status"] == "ok"
