"""The 3D view over WS /ws with real clients on the real Lab: each viewer's own camera, shared renders for
a shared camera, picking, the mouse pull (limited, logged, gated by the token) and bad messages."""

import json
import time

import numpy as np
import pytest
import requests
import simplejpeg

from tests.conftest import WsClient, free_port, wait_until


def ws_url(srv, path="/ws"):
    return srv.url.replace("http", "ws") + path


class Viewer:
    """A WebSocket viewer that keeps the newest frame and every other message by type."""

    def __init__(self, url):
        self.c = WsClient(url)
        self.frames = []  # (header, jpeg)
        self.got = {}

    def send(self, **msg):
        self.c.ws.send(json.dumps(msg))

    def pump(self, seconds=0.0, until=None, deadline_s=20.0):
        """Read messages for ``seconds``, or until ``until(self)`` is true (failing after ``deadline_s``)."""
        end = time.monotonic() + (seconds if until is None else deadline_s)
        while time.monotonic() < end:
            msg = self.c.recv()
            if isinstance(msg, bytes):
                self.frames.append((self.c.last_header, msg))
                self.frames = self.frames[-40:]
                self.c.ack()
            elif msg.get("type") != "frame":
                self.got.setdefault(msg["type"], []).append(msg)
            if until is not None and until(self):
                return self
        if until is not None:
            raise AssertionError(f"condition not met in {deadline_s} s; got types {sorted(self.got)}")
        return self

    def reply(self, kind, n_before):
        self.pump(until=lambda v: len(v.got.get(kind, [])) > n_before)
        return self.got[kind][-1]

    def newest(self):
        return simplejpeg.decode_jpeg(self.frames[-1][1]).astype(float)

    def close(self):
        self.c.close()


def both(a, b, seconds=1.5):
    """Read both viewers in turns, so that their recent frames are of the same moments."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        a.pump(0.05)
        b.pump(0.05)


def changed(a, b) -> float:
    """Share of pixels that differ clearly between two images."""
    return float((np.abs(a - b).max(axis=2) > 40).mean())


def n(v, kind):
    return len(v.got.get(kind, []))


def hub(srv):
    return srv.app.extensions["lab"]["hub"]


def fresh_frame(v):
    """The image of a frame rendered after this call (frames already in flight skipped)."""
    seen = len(v.frames)
    v.pump(until=lambda x: len(x.frames) >= seen + 3)
    return v.newest()


def test_a_viewers_camera_moves_only_its_own_picture_and_a_reset_shares_again(lab_server):
    a, b = Viewer(ws_url(lab_server)), Viewer(ws_url(lab_server))
    try:
        a.pump(until=lambda v: len(v.frames) >= 3)
        b.pump(until=lambda v: len(v.frames) >= 3)
        before_b = fresh_frame(b)
        k = n(a, "camera")
        a.send(type="camera", orbit=[0.5, 0.0])  # 90 deg round
        cam = a.reply("camera", k)
        assert cam["shared"] is False and abs(cam["azimuth"] - 55.0) < 1e-6 and cam["follow"] is True
        wait_until(lambda: hub(lab_server).cameras == 2, 10)
        after_a, after_b = fresh_frame(a), fresh_frame(b)
        assert changed(after_a, after_b) > 0.03, "a's picture is seen from elsewhere"
        assert changed(after_b, before_b) < 0.01, "b's camera did not move"
        k = n(a, "camera")
        a.send(type="camera", reset=True)
        assert a.reply("camera", k)["shared"] is True
        wait_until(lambda: hub(lab_server).cameras == 1, 10)
        # back on the shared camera: both receive the same renders (same seq numbers)
        both(a, b)
        assert len({h["seq"] for h, _ in a.frames[-20:]} & {h["seq"] for h, _ in b.frames[-20:]}) >= 3
    finally:
        a.close()
        b.close()


def test_two_viewers_on_the_same_camera_share_one_channel(lab_server):
    a, b = Viewer(ws_url(lab_server)), Viewer(ws_url(lab_server))
    try:
        for v in (a, b):
            k = n(v, "camera")
            v.send(type="camera", azimuth=30, elevation=-20, distance=2.5, lookat=[0, 0, 0.5])
            cam = v.reply("camera", k)
            assert cam["follow"] is False and cam["lookat"] == [0, 0, 0.5]
        wait_until(lambda: hub(lab_server).cameras == 1, 10)
        both(a, b)
        assert len({h["seq"] for h, _ in a.frames[-20:]} & {h["seq"] for h, _ in b.frames[-20:]}) >= 3
    finally:
        a.close()
        b.close()
    wait_until(lambda: hub(lab_server).cameras == 0, 10)


def test_zoom_and_pan_change_the_camera_within_bounds(lab_server):
    v = Viewer(ws_url(lab_server))
    try:
        k = n(v, "camera")
        v.send(type="camera", zoom=-1.0)
        near = v.reply("camera", k)
        k = n(v, "camera")
        v.send(type="camera", zoom=9.0)  # far beyond the bound: clamped
        far = v.reply("camera", k)
        assert near["distance"] < 1.55 * 0.5 and far["distance"] <= 25.0 * 1.01
        k = n(v, "camera")
        v.send(type="camera", pan=[0.1, 0.0])
        panned = v.reply("camera", k)
        assert panned["follow"] is False  # a pan leaves the body
        k = n(v, "camera")
        v.send(type="camera", follow=True)
        assert v.reply("camera", k)["follow"] is True
    finally:
        v.close()


def test_double_click_pick_recentres_on_the_body_under_the_cursor(lab_server):
    v = Viewer(ws_url(lab_server))
    try:
        v.pump(until=lambda x: len(x.frames) >= 3)
        k = n(v, "picked")
        v.send(type="pick", x=0.5, y=0.45)  # the default camera looks at the robot's hips
        got = v.reply("picked", k)
        assert got["body"] is not None and got["body_id"] > 0 and len(got["point"]) == 3
        cam = v.reply("camera", 0)
        assert cam["body"] == got["body_id"] and cam["body_name"] == got["body"]
        k = n(v, "picked")
        v.send(type="pick", x=0.02, y=0.02)  # the sky
        assert v.reply("picked", k)["body"] is None
    finally:
        v.close()


def test_bad_view_messages_get_clear_errors_and_the_stream_goes_on(lab_server):
    v = Viewer(ws_url(lab_server))
    try:
        for bad in (
            {"type": "camera", "orbit": [1e9, 0]},
            {"type": "camera", "zoom": float("nan")},
            {"type": "camera", "lookat": [0, 0]},
            {"type": "camera", "fly": 1},
            {"type": "overlays", "on": ["contacts", "laser"]},
            {"type": "overlays", "on": "contacts"},
            {"type": "pick", "x": 2, "y": 0.5},
            {"type": "pick", "x": 0.5, "y": 0.5, "view": "nope"},
            {"type": "perturb", "phase": "wiggle"},
            {"type": "perturb", "phase": "move", "x": 0.5, "y": 0.5},
        ):
            k = n(v, "error")
            v.c.ws.send(json.dumps(bad).replace("NaN", "NaN"))
            err = v.reply("error", k)
            assert err["error"] and err["hint"], bad
        seen = len(v.frames)
        v.pump(until=lambda x: len(x.frames) > seen + 3)
        assert requests.get(lab_server.url + "/api/metrics", timeout=5).json()["sim"]["state"] == "running"
    finally:
        v.close()


def test_overlays_message_moves_the_viewer_to_a_channel_with_them(lab_server):
    v = Viewer(ws_url(lab_server))
    try:
        k = n(v, "overlays")
        v.send(type="overlays", on=["com", "contacts"])
        assert v.reply("overlays", k)["on"] == ["com", "contacts"]
        wait_until(lambda: any(c.overlays for c in hub(lab_server)._channels.values() if c.subs), 10)
        seen = len(v.frames)
        v.pump(until=lambda x: len(x.frames) > seen + 3)
    finally:
        v.close()


def test_ctrl_drag_pulls_the_body_with_a_limited_logged_force(lab_server):
    srv = lab_server
    requests.post(srv.url + "/api/mode", json={"mode": "stand"}, timeout=5)
    requests.post(srv.url + "/api/reset", timeout=5)
    v = Viewer(ws_url(srv))
    try:
        v.pump(until=lambda x: len(x.frames) >= 3)
        x0 = requests.get(srv.url + "/api/metrics", timeout=5).json()["forward_x"]
        k = n(v, "perturb")
        v.send(type="perturb", phase="start", x=0.5, y=0.45)
        started = v.reply("perturb", k)
        assert started["active"] is True and started["body"] and started["max_n"] > 0
        for i in range(30):  # drag far to the right of the view: the spring saturates at its limit
            v.send(type="perturb", phase="move", x=min(0.5 + 0.05 * i, 1.0), y=0.45)
            v.pump(0.03)
        m = requests.get(srv.url + "/api/metrics", timeout=5).json()
        assert m["perturb"] is not None and 0 < m["perturb"]["force_n"] <= m["perturb"]["max_n"] + 0.01
        k = n(v, "perturb")
        v.send(type="perturb", phase="end")
        ended = v.reply("perturb", k)
        assert ended["active"] is False and ended["event"]["peak_force_n"] > 0
        wait_until(lambda: requests.get(srv.url + "/api/metrics", timeout=5).json()["perturb"] is None, 5)
        events = requests.get(srv.url + "/api/events", timeout=5).json()["events"]
        assert events[-1]["kind"] == "perturb" and events[-1]["ended"] == "released"
        assert events[-1]["peak_force_n"] <= started["max_n"] + 0.01  # shown to 0.01 N
        x1 = requests.get(srv.url + "/api/metrics", timeout=5).json()["forward_x"]
        assert abs(x1 - x0) > 1e-3 or np.linalg.norm(events[-1]["impulse_ns"]) > 1.0  # it pulled
    finally:
        v.close()


def test_a_viewer_that_leaves_mid_drag_releases_the_pull(lab_server):
    srv = lab_server
    requests.post(srv.url + "/api/reset", timeout=5)  # standing again after the pull of the test before
    v = Viewer(ws_url(srv))
    v.pump(until=lambda x: len(x.frames) >= 30)  # the following camera has caught up with the robot
    k = n(v, "perturb")
    v.send(type="perturb", phase="start", x=0.5, y=0.45)
    assert v.reply("perturb", k)["active"] is True
    v.send(type="perturb", phase="move", x=0.9, y=0.45)
    v.pump(0.3)
    v.close()
    wait_until(lambda: requests.get(srv.url + "/api/metrics", timeout=5).json()["perturb"] is None, 10)
    assert requests.get(srv.url + "/api/events", timeout=5).json()["events"][-1]["ended"] == "viewer left"


@pytest.fixture(scope="module")
def lab_with_token():
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(remote_url=f"http://127.0.0.1:{free_port()}", token="s3cret-token-for-tests")
    with ServerThread(app) as srv:
        yield srv


def test_the_token_gates_the_pull(lab_with_token):
    v = Viewer(ws_url(lab_with_token))
    try:
        v.pump(until=lambda x: len(x.frames) >= 2)
        k = n(v, "error")
        v.send(type="perturb", phase="start", x=0.5, y=0.45)
        err = v.reply("error", k)
        assert "token" in err["error"] and err["about"] == "perturb"
        k = n(v, "error")
        v.send(type="auth", token="wrong")
        assert v.reply("error", k)["error"] == "wrong token"
        k = n(v, "auth")
        v.send(type="auth", token="s3cret-token-for-tests")
        assert v.reply("auth", k)["trusted"] is True
        k = n(v, "perturb")
        v.send(type="perturb", phase="start", x=0.5, y=0.45)
        assert v.reply("perturb", k)["active"] is True
        k = n(v, "perturb")
        v.send(type="perturb", phase="end")
        assert v.reply("perturb", k)["active"] is False
    finally:
        v.close()


def test_sim2sim_one_camera_moves_both_engine_views_together(s2s):
    hubs = s2s.app.extensions["sim2sim"]["hubs"]
    v = Viewer(ws_url(s2s, "/ws?views=mujoco,pybullet"))
    try:
        v.pump(until=lambda x: {h["view"] for h, _ in x.frames} == {"mujoco", "pybullet"})
        k = n(v, "camera")
        v.send(type="camera", orbit=[0.25, 0.1])
        assert v.reply("camera", k)["shared"] is False
        wait_until(lambda: hubs["mujoco"].cameras == 1 and hubs["pybullet"].cameras == 1, 10)
        # both views now stream from a channel of this viewer's camera (not the hubs' defaults)
        assert not hubs["mujoco"].default.subs and not hubs["pybullet"].default.subs
        seen = len(v.frames)
        v.pump(until=lambda x: {h["view"] for h, _ in x.frames[seen:]} == {"mujoco", "pybullet"})
        k = n(v, "error")
        v.send(type="perturb", phase="start", x=0.5, y=0.5)  # the pull is the Lab's only
        assert "perturb" in v.reply("error", k)["error"]
    finally:
        v.close()


def test_the_remote_monitor_view_has_its_own_camera_too(lab_server):
    hub_r = lab_server.app.extensions["remote"]["hub"]
    v = Viewer(ws_url(lab_server, "/ws/remote"))
    try:
        v.pump(until=lambda x: len(x.frames) >= 1)
        k = n(v, "camera")
        v.send(type="camera", zoom=0.3)
        assert v.reply("camera", k)["shared"] is False
        wait_until(lambda: hub_r.cameras == 1 and not hub_r.default.subs, 10)
        k = n(v, "overlays")
        v.send(type="overlays", on=["com", "frames"])
        assert v.reply("overlays", k)["on"] == ["com", "frames"]
        seen = len(v.frames)
        v.pump(until=lambda x: len(x.frames) > seen)
    finally:
        v.close()
