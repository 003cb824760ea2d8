"""The Lab's remote monitor end to end: a real state server process, the real Lab app, real Chromium.

The page goes CONNECTED -> STALE -> CONNECTED across a real SIGKILL and restart of the server, with
screenshots saved under results/screenshots/; the Lab's remote API proxies the limited command."""

import os
import signal

import pytest
import requests

from lab.control.modes import Command, Mode
from lab.remote.cli import spawn_state_server, stop_child
from lab.remote.client import wait_ready
from lab.robots.model import BUILTIN_URDF
from tests.conftest import SCREENSHOTS, free_port, wait_until


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """A state server process and a Lab watching it: a dict with urls, the process list and a restarter."""
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    logs = tmp_path_factory.mktemp("remote_e2e")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"procs": [], "url": url, "port": port}

    def start():
        proc = spawn_state_server(port, log_path=logs / f"server{len(env['procs'])}.log")
        env["procs"].append(proc)
        return wait_ready(url, timeout=30, proc=proc)

    env["start"] = start
    start()
    app = create_lab_app(remote_url=url)
    try:
        with ServerThread(app) as lab:
            env["lab"] = lab.url
            yield env
    finally:
        for p in env["procs"]:
            stop_child(p)


def status(env) -> dict:
    return requests.get(env["lab"] + "/api/remote/status", timeout=5).json()


def test_remote_status_reports_the_connected_server_and_disabled_local_dynamics(remote):
    st = wait_until(lambda: (s := status(remote))["state"] == "CONNECTED" and s, 10)
    assert st["url"] == remote["url"] and st["local_dynamics"] == "disabled"
    assert st["model"]["sha256"] == st["local_identity"]["sha256"]
    assert st["sequence"] >= 0 and st["server_instance_id"] and st["state_age_s"] < 1.0


def test_lab_proxies_the_limited_command_and_the_servers_rejections(remote):
    wait_until(lambda: status(remote)["state"] == "CONNECTED", 10)
    r = requests.post(
        remote["lab"] + "/api/remote/control",
        json={"actuator": "motor_left_elbow", "value": 23, "duration_s": 0.25},
        timeout=5,
    )
    assert r.status_code == 400 and r.json()["error"] == "value 23 is outside model ctrlrange [-22, 22]"
    r = requests.post(
        remote["lab"] + "/api/remote/control",
        data='{"actuator": "motor_left_elbow", "value": NaN, "duration_s": 0.1}',
        headers={"Content-Type": "application/json"},
        timeout=5,
    )
    assert r.status_code == 400 and r.json()["error"] == "value nan is not a finite number"
    r = requests.post(
        remote["lab"] + "/api/remote/control",
        json={"actuator": "motor_left_elbow", "value": 2.0, "duration_s": 0.25},
        timeout=5,
    )
    assert r.status_code == 202 and r.json()["status"] == "accepted" and r.json()["remote_url"] == remote["url"]
    wait_until(lambda: status(remote)["active_control"] is None, 5)


def test_connect_rejects_a_malformed_url_and_keeps_watching(remote):
    r = requests.post(remote["lab"] + "/api/remote/connect", json={"url": "ftp://x"}, timeout=5)
    assert r.status_code == 400 and r.json()["error"] == "not an http URL: 'ftp://x'"
    assert status(remote)["url"] == remote["url"]


@pytest.mark.e2e
def test_monitor_page_goes_connected_stale_connected_across_a_real_restart(remote, page, tmp_path):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    word = page.locator("#rstate-word")
    page.goto(remote["lab"] + "/remote")
    page.wait_for_function("document.getElementById('rstate-word').textContent === 'CONNECTED'", timeout=15000)
    page.wait_for_function(
        "window.remoteSocket && document.getElementById('fps').textContent !== '0 fps'", timeout=15000
    )
    page.wait_for_timeout(600)
    assert page.locator("#dyn").inner_text() == "local dynamics: disabled"
    first_instance = page.locator("#r-instance").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "remote_1_connected.png"))

    old = remote["procs"][-1]
    os.kill(old.pid, signal.SIGKILL)
    old.wait()
    page.wait_for_function("document.getElementById('rstate-word').textContent === 'STALE'", timeout=3000)
    page.wait_for_function(
        "document.getElementById('r-error').textContent.includes('Connection refused')", timeout=3000
    )
    assert page.locator("#mark").is_visible() and page.locator("#mark").inner_text().startswith("STALE — last frame")
    drawn = page.evaluate("window.remoteView.frames")
    page.wait_for_function(f"window.remoteView.frames > {drawn}", timeout=3000)  # the kept frame, re-drawn marked
    page.wait_for_timeout(300)
    page.screenshot(path=str(SCREENSHOTS / "remote_2_stale.png"))

    remote["start"]()
    page.wait_for_function("document.getElementById('rstate-word').textContent === 'CONNECTED'", timeout=5000)
    page.wait_for_timeout(600)
    assert page.locator("#r-instance").inner_text() != first_instance
    events = page.locator("#events").inner_text()
    assert "instance changed" in events and "connection recovered" in events and "connection lost" in events
    assert not page.locator("#mark").is_visible()
    page.screenshot(path=str(SCREENSHOTS / "remote_3_recovered.png"))

    page.fill("#control-form input[name=value]", "23")
    page.click("#send")
    page.wait_for_function("document.getElementById('answer').textContent.startsWith('400')", timeout=5000)
    assert "value 23 is outside model ctrlrange [-22, 22]" in page.locator("#answer").inner_text()
    page.fill("#control-form input[name=value]", "2.0")
    page.click("#send")
    page.wait_for_function("document.getElementById('answer').textContent.startsWith('202 accepted')", timeout=5000)
    page.wait_for_function(
        "document.getElementById('r-control').textContent.includes('motor_left_elbow')", timeout=3000
    )
    page.screenshot(path=str(SCREENSHOTS / "remote_4_command.png"))
    assert word.inner_text() == "CONNECTED"

    # a server with another model: MISMATCH, with the reason, and the state is not shown as live
    other = tmp_path / "q1_variant.urdf"
    other.write_text(BUILTIN_URDF.read_text() + "\n<!-- a variant: same shape, another file -->\n")
    port = free_port()
    variant = spawn_state_server(port, model=other, log_path=tmp_path / "variant.log")
    remote["procs"].append(variant)
    wait_ready(f"http://127.0.0.1:{port}", timeout=30, proc=variant)
    page.fill("#url", f"http://127.0.0.1:{port}")
    page.click("#connect-form button[type=submit]")
    page.wait_for_function("document.getElementById('rstate-word').textContent === 'MISMATCH'", timeout=5000)
    assert "differs from the local model" in page.locator("#mark").inner_text()
    page.wait_for_timeout(500)
    page.screenshot(path=str(SCREENSHOTS / "remote_5_mismatch.png"))
    page.fill("#url", remote["url"])
    page.click("#connect-form button[type=submit]")
    page.wait_for_function("document.getElementById('rstate-word').textContent === 'CONNECTED'", timeout=5000)
    assert page.errors == []


RT_STATE = "document.getElementById('rt-state').textContent"


@pytest.mark.e2e
def test_runtime_panel_streams_holds_in_an_outage_and_the_estop_needs_no_token(remote, robot, page):
    """The /remote runtime panel against a real state server process and a real policy server: armed with a
    reason, STREAMING, the outage profile -> HOLD or BREAKER OPEN with repeats collapsed in the event log,
    E-STOP from a page without a token -> ESTOP."""
    from lab.web.policy_server import create_policy_app
    from lab.web.server import ServerThread

    api = remote["lab"] + "/api/remote/runtime"
    wait_until(lambda: status(remote)["state"] == "CONNECTED", 15)
    with ServerThread(create_policy_app(robot)) as policy:
        try:
            page.goto(remote["lab"] + "/remote")
            page.wait_for_function(f"{RT_STATE} === 'IDLE' || {RT_STATE} === 'STOPPED'", timeout=15000)
            page.fill("#rt-reason", "e2e: the runtime panel")
            page.click("#rt-arm-form button[type=submit]")
            page.wait_for_function(
                "document.getElementById('rt-armed').textContent.endsWith('the runtime panel')", timeout=5000
            )
            page.fill("#rt-policy", policy.url)
            page.click("#rt-start-form button[type=submit]")
            page.wait_for_function(f"{RT_STATE} === 'STREAMING'", timeout=10000)
            page.wait_for_function("document.getElementById('rt-chunk').textContent.includes('observed')")
            page.select_option("#rt-profile", "outage")
            page.click("#rt-fault-form button[type=submit]")
            page.wait_for_function(f"['HOLD', 'BREAKER OPEN'].includes({RT_STATE})", timeout=10000)
            page.wait_for_function(  # the breaker's rejections, one line: "breaker_rejected x<N>"
                "[...document.querySelectorAll('#rt-events li span')].some((s) => /^breaker_rejected x\\d+/"
                ".test(s.textContent))",
                timeout=10000,
            )
            assert "outage" in page.inner_text("#rt-faults")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "remote_7_runtime_hold.png"))
            with page.expect_request("**/api/remote/runtime/estop") as sent:
                page.click("#rt-estop")
            assert "authorization" not in sent.value.headers  # this page holds no token
            page.wait_for_function(f"{RT_STATE} === 'ESTOP'", timeout=5000)
            assert page.get_attribute("#rt-state", "data-state") == "estop"
            assert requests.get(api, timeout=5).json()["estopped"]
            page.screenshot(path=str(SCREENSHOTS / "remote_8_runtime_estop.png"))
            assert page.errors == []
        finally:  # the state server back as it was for the other tests
            requests.post(api + "/stop", json={}, timeout=5)
            requests.post(api + "/estop/clear", json={"confirm": True}, timeout=5)
            requests.post(api + "/faults", json={"profile": "healthy", "seed": 0}, timeout=5)


class RaisesSoon(Mode):
    """A test mode for an in-process state server: holds the pose, raises 0.5 s in."""

    name = "raises"

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        self._cmd = Command(self.q_nominal)

    def command(self, t):
        if t >= 0.5:
            raise RuntimeError("the test mode raised on purpose")
        return self._cmd


@pytest.fixture()
def failing_server(robot):
    """A state server (in this process) whose simulation stops with an error 0.5 s in, and a Lab watching it."""
    from lab.runtime.modes import LAB_MODES
    from lab.web import create_lab_app
    from lab.web.server import ServerThread
    from lab.web.state_server import create_state_app

    state_app = create_state_app(robot, mode="raises", modes={**LAB_MODES, RaisesSoon.name: RaisesSoon})
    with ServerThread(state_app) as server, ServerThread(create_lab_app(remote_url=server.url, start=False)) as lab:
        yield {"url": server.url, "lab": lab.url}


@pytest.mark.e2e
def test_monitor_page_says_in_red_when_the_state_servers_simulation_stopped_with_an_error(failing_server, page):
    page.goto(failing_server["lab"] + "/remote")
    page.wait_for_function("!document.getElementById('server-sim').hidden", timeout=15000)
    sim = requests.get(failing_server["url"] + "/api/v1/health", timeout=5).json()["sim"]
    assert sim["state"] == "error" and sim["error"] == "RuntimeError: the test mode raised on purpose"
    text = page.inner_text("#server-sim")
    assert text.startswith("State server simulation error at t=0.5 s: RuntimeError: the test mode raised on purpose")
    assert text.endswith("— restart the state server")
    rgb = page.evaluate("getComputedStyle(document.getElementById('server-sim')).backgroundColor")
    r, g, b = (float(x) for x in rgb[rgb.index("(") + 1 :].rstrip(")").split(",")[:3])
    assert r > 170 and g < 90 and b < 110, rgb
    assert page.inner_text("#r-sim").startswith("error at t=0.5 s: RuntimeError")
    assert page.get_attribute("#r-sim", "class") == "bad"
    page.wait_for_function("document.getElementById('rstate-word').textContent === 'STALE'", timeout=10000)
    page.wait_for_timeout(500)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "remote_6_server_error.png"))
    assert page.errors == []
