"""The state server's web face (port 8766): HTTP state and health, a WebSocket stream, and one narrow,
self-expiring control, in front of one :class:`~lab.remote.state_sim.StateSim`.

``create_state_app(...)`` builds the Flask app; ``python app.py state-server`` serves it.
"""

import hmac
import json
import logging
import math
import socket
import time

import mujoco
from flask import Flask, jsonify, request
from flask_sock import Sock
from werkzeug.exceptions import HTTPException

from lab.errors import LabError
from lab.remote.protocol import API, DEFAULT_ALLOWED, DEMO_LIMIT, MAX_BODY_BYTES, ControlRejected, validate_control
from lab.remote.state_sim import ENDPOINTS, STREAM_HZ, StateSim, _robot

log = logging.getLogger("lab.remote.server")




def _read_body() -> object:
    """The request body as JSON; ControlRejected for an oversized or malformed body."""
    length = request.content_length
    stream = request.stream
    raw = stream.read(MAX_BODY_BYTES + 1)
    if (length is not None and length > MAX_BODY_BYTES) or len(raw) > MAX_BODY_BYTES:
        total = len(raw)
        while total < 16 * 2**20:  # drain (bounded) so the client reads the answer instead of a reset
            chunk = stream.read(65536)
            if not chunk:
                break
            total += len(chunk)
        raise ControlRejected(
            f"control body is {length if length is not None else total} bytes; at most {MAX_BODY_BYTES} accepted",
            "send a small JSON object with actuator, value and duration_s",
            status=413,
        )
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ControlRejected("control body is not UTF-8 text", "send a JSON object") from None
    except RecursionError:
        raise ControlRejected("control body is not valid JSON: nested too deeply", "send a flat JSON object") from None
    except ValueError as exc:
        msg = str(exc).split(":")[0] if "Exceeds the limit" in str(exc) else str(exc)
        raise ControlRejected(f"control body is not valid JSON: {msg}", "send a JSON object") from None


def _authorized(token: str | None) -> bool:
    if not token:
        return True
    auth = request.headers.get("Authorization", "")
    given = auth[7:].strip() if auth.startswith("Bearer ") else ""
    return hmac.compare_digest(given.encode(), token.encode())


def create_state_app(model=None, token=None, allow_actuators=DEFAULT_ALLOWED, mode="stand", start=True) -> Flask:
    """The state server's Flask app. ``model``: a path, a loaded :class:`Robot` or None (built-in Q1).

    The simulation lives in ``app.extensions["state_sim"]`` (a :class:`StateSim`), started here
    unless ``start=False``; stop it with ``app.extensions["state_sim"].stop()``.
    """
    robot = _robot(model)
    sim = StateSim(robot, mode=mode, allow_actuators=allow_actuators)
    app = Flask(__name__)
    app.config["LAB_TOKEN"] = token or None
    app.config["SOCK_SERVER_OPTIONS"] = {"ping_interval": None}
    app.extensions["state_sim"] = sim
    sock = Sock(app)

    @app.errorhandler(ControlRejected)
    def _rejected(err):
        return jsonify(err.to_dict()), err.status

    @app.errorhandler(LabError)
    def _lab_error(err):
        return jsonify(err.to_dict()), err.status

    @app.errorhandler(HTTPException)
    def _http_error(err):
        if err.code == 404:
            msg, hint = f"no endpoint {request.method} {request.path}", f"endpoints: {ENDPOINTS}"
        elif err.code == 405:
            msg, hint = f"method {request.method} is not allowed on {request.path}", f"endpoints: {ENDPOINTS}"
        else:
            msg, hint = f"{err.code} {err.name}", err.description or ""
        return jsonify({"error": msg, "hint": hint}), err.code

    @app.errorhandler(Exception)
    def _unexpected(err):  # a bug, never bad input: still JSON, and logged
        log.exception("unexpected error on %s %s", request.method, request.path)
        return jsonify({"error": f"internal error: {type(err).__name__}", "hint": "see the server log"}), 500

    @app.get(f"{API}/health")
    def health():
        return jsonify(sim.health())

    @app.get(f"{API}/state")
    def state():
        snap = sim.snapshot()
        return app.response_class(snap.text, mimetype="application/json")

    @app.post(f"{API}/control")
    def control():
        if not _authorized(app.config["LAB_TOKEN"]):
            raise ControlRejected(
                "control requires Authorization: Bearer TOKEN",
                "this server was started with --token; send the same token",
                status=401,
            )
        body = _read_body()
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

    @app.post(f"{API}/control/stop")
    def control_stop():  # a stop is never blocked by auth
        was = sim.cancel()
        return jsonify({"status": "stopped", "cancelled": was})

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
