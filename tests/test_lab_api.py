"""The Lab's HTTP API against a real server thread: status, metrics, modes, errors, auth."""

import time

import pytest
import requests

from lab.runtime.modes import LAB_MODES as MODES
from tests.conftest import wait_until


def get(srv, path):
    r = requests.get(srv.url + path, timeout=5)
    return r.status_code, r.json()


def post(srv, path, body=None, raw=None, headers=None):
    """POST ``body`` as JSON, or the text ``raw`` declared as JSON (for malformed bodies)."""
    headers = {**({"Content-Type": "application/json"} if raw is not None else {}), **(headers or {})}
    r = requests.post(srv.url + path, json=body if raw is None else None, data=raw, timeout=5, headers=headers)
    return r.status_code, r.json()


def sim_time(srv):
    return get(srv, "/api/metrics")[1]["sim_time"]


def test_status_reports_mode_time_identity_and_render(lab_server):
    code, s = get(lab_server, "/api/status")
    assert code == 200
    assert s["mode"] in MODES and s["paused"] is False and s["sim_time"] > 0
    assert s["identity"]["nq"] == 29 and s["identity"]["nv"] == 28 and s["identity"]["nu"] == 22
    assert len(s["identity"]["sha256"]) == 64
    r = s["render"]
    assert (r["width"], r["height"]) == (640, 480) and r["preset"] in ("fast", "nice")
    assert r["default_preset"] == ("fast" if r["gl"]["software"] else "nice")


def test_metrics_carry_the_five_seed_numbers_and_sim_time_advances(lab_server):
    _, a = get(lab_server, "/api/metrics")
    for key in ("sim_time", "pelvis_z", "forward_x", "pitch_deg", "max_joint_err", "rtf", "com", "support", "margin"):
        assert key in a
    wait_until(lambda: sim_time(lab_server) > a["sim_time"] + 0.2, 5)


def test_each_mode_switch_shows_in_status(lab_server):
    for mode in ("squat", "push", "zero", "stand"):
        code, s = post(lab_server, "/api/mode", {"mode": mode})
        assert code == 200 and s["mode"] == mode
        assert get(lab_server, "/api/status")[1]["mode"] == mode
    post(lab_server, "/api/reset")


def test_pause_stops_sim_time_and_resume_restarts_it(lab_server):
    assert post(lab_server, "/api/pause", {"paused": True})[1]["paused"] is True
    t0 = sim_time(lab_server)
    time.sleep(0.3)
    assert sim_time(lab_server) == t0
    assert post(lab_server, "/api/pause", {"paused": False})[1]["paused"] is False
    wait_until(lambda: sim_time(lab_server) > t0 + 0.1, 5)


def test_reset_brings_time_back_to_zero(lab_server):
    wait_until(lambda: sim_time(lab_server) > 0.5, 5)
    code, s = post(lab_server, "/api/reset")
    assert code == 200 and s["sim_time"] < 0.3


def test_unknown_mode_is_a_400_with_the_available_modes(lab_server):
    code, body = post(lab_server, "/api/mode", {"mode": "x"})
    assert code == 400
    assert body == {"error": "unknown mode 'x'", "hint": "available: " + ", ".join(MODES)}
    assert body["hint"].startswith("available: stand, squat, push, zero")


@pytest.mark.parametrize(
    ("path", "kwargs", "needle"),
    [
        ("/api/mode", {"raw": "{not json"}, "malformed JSON"),
        ("/api/mode", {"raw": "[1, 2]"}, "expected a JSON object"),
        ("/api/mode", {"raw": ""}, "request body is empty"),
        ("/api/mode", {"body": {"mode": 5}}, "unknown mode '5'"),
        ("/api/mode", {"body": {}}, "missing field 'mode'"),
        ("/api/mode", {"body": {"mode": "push", "force_n": 1e9}}, "push force_n 1e+09 is outside [0, 2000]"),
        ("/api/mode", {"body": {"mode": "push", "force_n": "big"}}, "must be a finite number"),
        ("/api/mode", {"body": {"mode": "push", "bogus": 1}}, "unknown push parameter(s): bogus"),
        ("/api/push", {"body": {"force_n": -5}}, "push force_n -5 is outside [0, 2000]"),
        ("/api/push", {"body": {"duration_s": 0}}, "push duration_s 0 is outside [0.01, 1]"),
        ("/api/pause", {"body": {"paused": "yes"}}, "'paused' must be true or false"),
        ("/api/render", {"body": {"preset": "ultra"}}, "unknown render preset 'ultra'"),
        ("/api/rtf", {"body": {"rtf": 100}}, "rtf 100 is outside [0.05, 4]"),
    ],
)
def test_bad_input_is_a_400_with_error_and_hint_and_the_simulation_keeps_running(lab_server, path, kwargs, needle):
    mode_before = get(lab_server, "/api/status")[1]["mode"]
    t0 = sim_time(lab_server)
    code, body = post(lab_server, path, **kwargs)
    assert code == 400, body
    assert needle in body["error"] and body["hint"]
    assert get(lab_server, "/api/status")[1]["mode"] == mode_before
    wait_until(lambda: sim_time(lab_server) > t0, 5)


def test_unknown_api_route_is_a_json_404(lab_server):
    code, body = get(lab_server, "/api/does-not-exist")
    assert code == 404 and body["error"].startswith("404 Not Found") and body["hint"]
    r = requests.get(lab_server.url + "/api/mode", timeout=5)
    assert r.status_code == 405 and "POST" in r.json()["hint"]


def test_push_parameters_change_from_the_api(lab_server):
    code, body = post(lab_server, "/api/push", {"force_n": 30, "duration_s": 0.12, "period_s": 2.5})
    assert code == 200 and body["push"]["force_n"] == 30
    assert get(lab_server, "/api/status")[1]["push"]["period_s"] == 2.5
    post(lab_server, "/api/push", {"force_n": 25, "duration_s": 0.1, "period_s": 3.0})


def test_render_preset_switches_and_frames_keep_coming(lab_server):
    from tests.conftest import WsClient

    assert post(lab_server, "/api/render", {"preset": "nice"})[1]["render"]["preset"] == "nice"
    ws = WsClient(lab_server.url.replace("http", "ws") + "/ws")
    try:
        seen = 0
        deadline = time.monotonic() + 10
        while seen < 3 and time.monotonic() < deadline:
            if isinstance(ws.recv(), bytes):
                ws.ack()
                seen += 1
        assert seen == 3
    finally:
        ws.close()
        post(lab_server, "/api/render", {"preset": "fast"})


def test_plotly_is_served_from_the_installed_package(lab_server):
    r = requests.get(lab_server.url + "/vendor/plotly.min.js", timeout=10)
    assert r.status_code == 200 and len(r.content) > 1_000_000 and b"plotly" in r.content[:2000].lower()


def test_page_loads_nothing_from_the_internet(lab_server):
    html = requests.get(lab_server.url + "/", timeout=5).text
    assert "http://" not in html.replace("http://127.0.0.1", "") and "https://" not in html


def test_token_guards_changes_but_not_reads_or_stopping():
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(token="s3cret")
    with ServerThread(app) as srv:
        assert get(srv, "/api/status")[0] == 200
        code, body = post(srv, "/api/mode", {"mode": "squat"})
        assert code == 401 and "bearer token" in body["error"]
        assert post(srv, "/api/reset")[0] == 401
        assert post(srv, "/api/mode", {"mode": "squat"}, headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert post(srv, "/api/mode", {"mode": "zero"})[0] == 200  # stop is never blocked
        assert post(srv, "/api/pause", {"paused": True})[0] == 200
        assert post(srv, "/api/pause", {"paused": False})[0] == 401


@pytest.mark.parametrize("url", ["x" * 300, "http://" + "a" * 64 + ":8766", "http://bad_host!:1"])
def test_a_remote_url_that_is_no_host_is_a_400_and_the_remote_routes_keep_answering(lab_server, url):
    before = get(lab_server, "/api/remote/status")[1]
    code, err = post(lab_server, "/api/remote/connect", {"url": url})
    assert code == 400 and err["error"].startswith("not a host name or address") and err["hint"]
    for path in ("/api/remote/control", "/api/remote/stop"):
        code, _ = post(lab_server, path, {"actuator": "motor_left_elbow", "value": 1.0, "duration_s": 0.1})
        assert code != 500  # never a traceback (502: the state server is not reachable), whatever was sent before
    assert get(lab_server, "/api/remote/status")[1]["url"] == before["url"]  # nothing already set is lost
