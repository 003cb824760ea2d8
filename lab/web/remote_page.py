"""The Lab's remote monitor page (``/remote``) and its API.

The Lab watches a state server through a :class:`~lab.remote.monitor.RemoteMonitor` and draws the
remote robot with its own renderer from the received ``qpos``: kinematics only (``mj_kinematics``
inside :class:`~lab.render.renderer.Renderer`), never ``mj_step`` — local dynamics are disabled, so
what is shown is the server's state and nothing else. While the state is not live the last frame is
kept, desaturated and dimmed, and the page says why.

Routes: ``GET /remote``; ``GET /api/remote/status``; ``POST /api/remote/connect {"url"}``;
``POST /api/remote/control {"actuator", "value", "duration_s"}`` (passed to the server as it is; the
server's answer and status code come back); ``POST /api/remote/stop``; the state server's remote-control runtime passed through as it is:
``GET /api/remote/runtime``, ``POST /api/remote/runtime/{arm,start,faults,estop/clear}`` (the token),
``POST /api/remote/runtime/{stop,estop}`` (never gated); ``WS /ws/remote`` (frames of the
remote robot and the monitor status, in the format of :mod:`lab.web.messages`).
"""

import os
import time

import numpy as np
import requests
from flask import Blueprint, current_app, jsonify, render_template, request
from flask_sock import Sock

from lab.errors import LabError
from lab.remote.client import DEFAULT_URL, RemoteError, StateClient, normalize_url
from lab.remote.faults import PROFILES
from lab.remote.monitor import CONNECTED, MISMATCH, RemoteMonitor
from lab.remote.protocol import DEFAULT_ALLOWED, DEMO_LIMIT, MAX_DURATION_S, RUNTIME_ACTIONS
from lab.render.overlays import OVERLAYS
from lab.render.renderer import Renderer, default_preset
from lab.web import messages
from lab.web.common import check_token, json_body, require_token
from lab.web.server import on_stop
from lab.web.stream import FrameHub, merge_extensions, ws_loop
from lab.web.view_api import view_extension

bp = Blueprint("remote", __name__)
_sock = Sock()
REMOTE_FPS = 30.0  # frames/s of the remote view (the state arrives at >= 50 Hz; 30 is plenty to watch)
STATUS_HZ = 10.0  # status messages/s on WS /ws/remote


class RemoteSource:
    """Frames of the remote robot: the latest received qpos through the Lab's renderer (kinematics only)."""

    def __init__(self, robot, monitor: RemoteMonitor, width: int, height: int, preset: str | None):
        self.robot, self.monitor = robot, monitor
        self.width, self.height, self.preset = width, height, preset
        self.renderer = None
        self._last = {}  # channel -> (state key, rgb): a channel re-renders only when its state changed

    def open(self):
        self.renderer = Renderer(self.robot.model, self.width, self.height, self.preset)

    def frame(self, channel):
        state = self.monitor.latest()
        live = self.monitor.state.status()["state"] == CONNECTED
        if state is None:
            key, qpos, meta = ("none", live), self.robot.init_qpos, {"sim_time": 0.0, "t_wall": time.time()}
        else:
            key = (state["server_instance_id"], state["sequence"], live)
            qpos = np.asarray(state["qpos"], dtype=float)
            meta = {"sim_time": state["simulation_time"], "t_wall": state.get("wall_time", time.time())}
        key = (*key, channel.key)
        last = self._last.get(channel)
        following = channel.camera is not None and channel.camera.spec.follow  # its look-at point moves
        if last is None or last[0] != key or following:  # the state (or its liveness) changed
            rgb = self.renderer.render(qpos, camera=channel.camera, overlays=channel.overlays, overlay_state={})
            if not live:  # the last frame, kept and marked: grey and dim
                grey = rgb.mean(axis=2, keepdims=True)
                rgb = (0.55 * grey + 0.10 * rgb).astype(np.uint8)
            if len(self._last) > 64:  # channels come and go with the viewers' cameras
                self._last.clear()
            last = self._last[channel] = (key, rgb)
        return last[1], meta

    def close(self):
        if self.renderer is not None:
            self.renderer.close()


def _ctx() -> dict:
    return current_app.extensions["remote"]


def status_dict() -> dict:
    c = _ctx()
    st = c["monitor"].status()
    st["local_identity"] = c["robot"].identity_dict()
    st["local_dynamics"] = "disabled"
    st["allowed_actuators"] = list(DEFAULT_ALLOWED)
    st["demo_range"] = [-DEMO_LIMIT, DEMO_LIMIT]
    st["max_duration_s"] = MAX_DURATION_S
    st["render"] = c["hub"].stats()
    last = c["monitor"].latest()
    # the server's own simulation (running, paused, error, diverged) as of its last state; None before any
    st["server_sim"] = last.get("sim") if last else None
    return st


def init_app(
    app,
    remote_url: str | None,
    robot,
    width: int = 640,
    height: int = 480,
    fps: float = REMOTE_FPS,
    preset: str | None = None,
    remote_token: str | None = None,
) -> None:
    """Register the page, start the monitor (watching ``remote_url``, or nothing) and the frame hub;
    both stop through :func:`lab.web.server.on_stop`. ``remote_token``: bearer token sent to the state
    server with a command (default ``LAB_REMOTE_TOKEN``, else the Lab's own token)."""
    monitor = RemoteMonitor(None, robot.identity, robot.model.nq, robot.model.nv)
    if remote_url:
        try:
            monitor.set_url(remote_url)
        except RemoteError as err:  # a bad --remote-url: the page says so and offers the form
            monitor.state.on_error(err.message, time.monotonic())
    monitor.start()
    source = RemoteSource(robot, monitor, width, height, preset or default_preset())
    hub = FrameHub(source, fps=fps, name="remote")
    token = remote_token or os.environ.get("LAB_REMOTE_TOKEN") or app.config.get("LAB_TOKEN")
    app.extensions["remote"] = {"robot": robot, "monitor": monitor, "hub": hub, "source": source, "token": token}
    on_stop(app, hub.close)
    on_stop(app, monitor.stop)
    app.register_blueprint(bp)


@bp.route("/remote")
def page():
    settings = current_app.extensions.get("settings")
    default_url = (settings.monitor_url if settings else None) or DEFAULT_URL
    return render_template(
        "remote.html", status=status_dict(), page="remote", default_url=default_url, fault_profiles=list(PROFILES)
    )


@bp.get("/api/remote/status")
def api_status():
    return jsonify(status_dict())


@bp.post("/api/remote/connect")
@require_token
def api_connect():
    body = json_body()
    url = body.get("url")
    if not isinstance(url, str) or not url.strip():
        raise LabError("missing field 'url'", f'send {{"url": "{DEFAULT_URL}"}}')
    try:
        normalize_url(url)
    except RemoteError as err:
        raise LabError(err.message, err.hint, 400) from None
    _ctx()["monitor"].set_url(url)
    return jsonify(status_dict())


def _proxy(fn):
    c = _ctx()
    url = c["monitor"].url
    if url is None:
        raise LabError("no state server to send to", 'connect first: POST /api/remote/connect {"url": ...}', 409)
    client = StateClient(url, token=c["token"], timeout=2.0)
    try:
        answer = fn(client)
    except RemoteError as err:
        raise LabError(f"state server {url}: {err.reason}", "is the state server running?", 502) from None
    finally:
        client.close()
    return jsonify({**answer.body, "remote_url": url, "remote_status": answer.status}), answer.status


@bp.post("/api/remote/control")
@require_token
def api_control():
    body = json_body()
    st = _ctx()["monitor"].state.status()
    if st["state"] == MISMATCH:
        raise LabError(
            "the state server runs another model: control is disabled",
            st["mismatch"] or "connect to a server running the same model as this Lab",
            409,
        )
    del body  # checked to be a JSON object; the server validates the fields and answers in its own words
    return _proxy(lambda client: client.post_raw(request.get_data(cache=True)))


@bp.post("/api/remote/stop")
def api_stop():  # a stop is never blocked by auth
    return _proxy(lambda client: client.stop())


def _runtime_call(method: str, path: str, body: bytes | None = None):
    c = _ctx()
    url = c["monitor"].url
    if url is None:
        raise LabError("no state server to send to", 'connect first: POST /api/remote/connect {"url": ...}', 409)
    headers = {"Content-Type": "application/json"}
    if c["token"]:
        headers["Authorization"] = f"Bearer {c['token']}"
    try:
        r = requests.request(method, url + path, data=body, headers=headers, timeout=2.0)
        data = r.json()
    except (requests.RequestException, ValueError) as exc:
        raise LabError(f"state server {url}: {type(exc).__name__}", "is the state server running?", 502) from None
    return jsonify(data), r.status_code


@bp.get("/api/remote/runtime")
def api_runtime():
    return _runtime_call("GET", "/api/v1/runtime")


@bp.post("/api/remote/runtime/<path:action>")
def api_runtime_post(action):
    if action not in RUNTIME_ACTIONS:
        raise LabError(f"unknown runtime action '{action[:40]}'", f"actions: {', '.join(RUNTIME_ACTIONS)}", 404)
    path, gated = RUNTIME_ACTIONS[action]
    if gated:
        check_token()
    body = request.get_data(cache=True) or b"{}"
    return _runtime_call("POST", path, body)


@_sock.route("/ws/remote", bp=bp)
def ws_remote(ws):
    c = _ctx()
    src = c["source"]
    hello = messages.hello(
        "remote",
        ["remote"],
        src.width,
        src.height,
        c["hub"].fps,
        c["robot"].identity_dict(),
        local_dynamics="disabled",
        overlays=list(OVERLAYS),
    )
    handlers, tickers = merge_extensions([view_extension(lambda: c["robot"].model)])
    ws_loop(ws, {"remote": c["hub"]}, status_dict, hello, metrics_hz=STATUS_HZ, handlers=handlers, tickers=tickers)
