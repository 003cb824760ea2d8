"""The state server's web face (port 8766): HTTP state and health, a WebSocket stream, and one narrow,
self-expiring control, in front of one :class:`~lab.remote.state_sim.StateSim`.

``create_state_app(...)`` builds the Flask app; ``python app.py state-server`` serves it.
"""

import logging
import math
import socket
import time

import mujoco
from flask import Flask, jsonify, request

from lab.errors import LabError
from lab.remote.protocol import API, DEFAULT_ALLOWED, DEMO_LIMIT, MAX_BODY_BYTES, ControlRejected, validate_control
from lab.remote.state_sim import ENDPOINTS, STREAM_HZ, StateSim, _robot
from lab.settings import Settings
from lab.web import make_flask, recordings_api
from lab.web.common import json_body, require_token

log = logging.getLogger("lab.remote.server")


def create_state_app(settings=None, token=None, allow_actuators=None, mode=None, start=True, modes=None) -> Flask:
    """The state server's Flask app (``settings.state_port``), from a :class:`~lab.settings.Settings`
    (model, token, ``state_mode``, ``allow_actuators``). For older callers ``settings`` may instead be
    the model (a path, a loaded :class:`Robot` or None: built-in Q1), and ``token``, ``allow_actuators``
    and ``mode`` override the settings' when given. ``modes``: the mode registry (default the Lab's).

    The simulation lives in ``app.extensions["state_sim"]`` (a :class:`StateSim`), started here
    unless ``start=False``; stop it with ``app.extensions["state_sim"].stop()``.
    """
    model = None
    if not isinstance(settings, Settings):
        model, settings = settings, Settings(allow_actuators=DEFAULT_ALLOWED)
    changes = {"token": token, "allow_actuators": allow_actuators, "state_mode": mode}
    settings = settings.replace(**{k: v for k, v in changes.items() if v is not None})
    token = settings.token
    robot = _robot(model if model is not None else settings.model)
    sim = StateSim(robot, mode=settings.state_mode, allow_actuators=settings.allow_actuators, modes=modes)
    # built like every service: the request guard (Host, Origin, 413 over 4 KiB, 415), JSON errors, the
    # bearer token and body parsing of lab/web/common.py, the OpenAPI route
    app, sock = make_flask("state-server", token, max_body=MAX_BODY_BYTES)
    app.config["SOCK_SERVER_OPTIONS"] = {"ping_interval": None, "max_message_size": 64 * 1024}
    app.config["LAB_API_HINT"] = f"endpoints: {ENDPOINTS}"
    app.extensions["state_sim"] = sim
    app.extensions["settings"] = settings

    @app.get(f"{API}/health")
    def health():
        return jsonify(sim.health())

    @app.get(f"{API}/state")
    def state():
        snap = sim.state_snapshot()
        return app.response_class(snap.text, mimetype="application/json")

    @app.post(f"{API}/control")
    @require_token(
        message="control requires Authorization: Bearer TOKEN",
        hint="this server was started with --token; send exactly 'Authorization: Bearer <token>'",
        exc=ControlRejected,
    )
    def control():
        try:  # any JSON (validate_control names what is not an object); NaN, 400-digit numbers refused here
            body = json_body(label="control body", want_object=False)
        except ControlRejected:
            raise
        except LabError as err:
            raise ControlRejected(err.message, err.hint, err.status) from None
        req = validate_control(body, robot.actuator_names, sim.ctrlranges, sim.allowed)
        cmd = sim.command(req)
        lo, hi = req.ctrlrange
        out = {
            "status": "accepted",
            **cmd,
            "model_range": [lo, hi],
            "demo_range": [-DEMO_LIMIT, DEMO_LIMIT],
            "server_instance_id": sim.instance_id,
        }
        return jsonify(out), 202

    @app.post(f"{API}/reset")
    @require_token
    def reset():  # the state back to the start pose at t=0 (clears an error or a divergence); the health after it
        sim.reset()
        return jsonify(sim.health())

    @app.post(f"{API}/control/stop")
    def control_stop():  # a stop is never blocked by auth
        was = sim.cancel()
        return jsonify({"status": "stopped", "cancelled": was})

    # --- remote control: the runtime following a policy server, arming, e-stop, faults -------------------
    @app.get(f"{API}/runtime")
    def runtime_state():
        return jsonify(sim.runtime_status())

    @app.post(f"{API}/arm")
    @require_token
    def arm():  # motion needs a reason and expires
        body = json_body(label="arm body")
        return jsonify(sim.arm(body.get("reason"), body.get("expires_s", 60.0)))

    @app.post(f"{API}/runtime/start")
    @require_token
    def runtime_start():
        body = json_body(label="runtime body")
        url = body.get("policy_url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise LabError("policy_url must be an http(s) URL", 'send {"policy_url": "http://127.0.0.1:8768"}')
        return jsonify(sim.start_runtime(url))

    @app.post(f"{API}/runtime/stop")
    def runtime_stop():  # a stop is never blocked by auth
        return jsonify(sim.stop_runtime("stopped by request"))

    @app.post(f"{API}/estop")
    def estop():  # never gated by a token, never refused
        return jsonify(sim.estop())

    @app.post(f"{API}/estop/clear")
    @require_token
    def estop_clear():
        body = json_body(label="clear body")
        return jsonify(sim.clear_estop(body.get("confirm")))

    @app.post(f"{API}/runtime/faults")
    @require_token
    def runtime_faults():
        body = json_body(label="faults body")
        return jsonify(sim.set_faults(body.get("profile"), body.get("seed", 0)))

    recordings_api.init_app(app, "state-server", lambda: sim)

    @sock.route(f"{API}/stream")
    def stream(ws):
        try:
            hz = float(request.args.get("hz", STREAM_HZ))
        except ValueError:
            hz = STREAM_HZ
        period = 1.0 / min(max(hz if math.isfinite(hz) else STREAM_HZ, 1.0), 200.0)
        try:  # small messages one way: without this, Nagle + delayed ACK hold some for up to 40 ms
            ws.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (AttributeError, OSError):
            pass
        last, next_t = -1, time.perf_counter()
        while not sim._stop.is_set() and ws.connected:
            while ws.receive(timeout=0) is not None:  # this stream only sends: client messages are dropped
                pass
            snap = sim.wait_snapshot(last, timeout=0.5)
            if snap is None:
                continue
            ws.send(snap.text)
            last = snap.sequence
            next_t += period
            pause = next_t - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            else:
                next_t = time.perf_counter()

    app.extensions.setdefault("lab_stop", []).append(sim.stop)  # lab.web.server.serve stops it
    _log_start(sim, token)
    if start:
        sim.start()
    return app


def _ensure_logging() -> None:
    """INFO lines of this module reach stderr even when nobody configured logging."""
    if not logging.getLogger().handlers and not log.handlers:
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
        log.addHandler(h)
        log.setLevel(logging.INFO)


def _log_start(sim: StateSim, token) -> None:
    """The start line the issue asks for: MuJoCo version, identity, sizes, timestep, instance id."""
    _ensure_logging()
    m = sim.model
    log.info(
        "state server: MuJoCo %s, model %s identity %s, nq=%d nv=%d nu=%d, timestep %g s, mode %s, "
        "allowed actuators %s, control %s",
        mujoco.__version__,
        sim.identity["file"],
        sim.identity["sha256"],
        m.nq,
        m.nv,
        m.nu,
        m.opt.timestep,
        sim.mode_name,
        ", ".join(sim.allowed),
        "needs a bearer token" if token else "open (loopback)",
    )
    log.info("server_instance_id %s", sim.instance_id)
