"""The state server (port 8766): the only copy of a headless MuJoCo state, served over HTTP and a
WebSocket stream, with one narrow, self-expiring control.

One :class:`StateSim` owns one ``MjData`` (inside a :class:`~lab.sim.mujoco_engine.MujocoEngine`)
and a background thread that advances it in real time through the Lab's
:class:`~lab.sim.runner.Rollout` (mode ``stand`` by default). HTTP handlers never step: they copy
the latest published snapshot or set a command, both under the lock. An accepted command replaces
that actuator's torque from the mode for ``duration_s`` of *simulation* time; the thread clears it
at expiry by itself.

``create_state_app(...)`` builds the Flask app; ``main(argv)`` is the command line (``python -m
lab.remote serve`` and ``python app.py state-server`` both end up there).
"""

import hmac
import json
import logging
import math
import socket
import threading
import time
import uuid
from dataclasses import dataclass

import mujoco
import numpy as np
from flask import Flask, jsonify, request
from flask_sock import Sock
from werkzeug.exceptions import HTTPException

from lab.control.modes import get_mode
from lab.control.pd import PDGains
from lab.errors import LabError
from lab.remote.protocol import (
    API,
    DEFAULT_ALLOWED,
    DEMO_LIMIT,
    MAX_BODY_BYTES,
    MAX_DURATION_S,
    ControlRejected,
    ControlRequest,
    fmt_num,
    validate_control,
)
from lab.robots.model import Robot, load_robot
from lab.sim.mujoco_engine import MujocoEngine
from lab.sim.runner import Rollout

log = logging.getLogger("lab.remote.server")

PUBLISH_DT = 0.005  # a snapshot every 5 ms of simulation time (200 per second in real time) [s]
STREAM_HZ = 100  # default rate of WS /api/v1/stream [Hz]; ?hz= picks 1..200
MAX_LAG_S = 0.25  # further behind real time than this, the thread drops the backlog instead of racing [s]
ENDPOINTS = "GET /api/v1/health, GET /api/v1/state, POST /api/v1/control, POST /api/v1/control/stop, WS /api/v1/stream"


class _CommandedEngine(MujocoEngine):
    """MuJoCo engine whose ``step`` lets one accepted command replace one actuator's torque."""

    override = None  # (actuator index, value [N·m]) or None

    def step(self, tau):
        if self.override is not None:
            tau = np.array(tau, dtype=float)
            tau[self.override[0]] = self.override[1]
        super().step(tau)


@dataclass(frozen=True)
class Snapshot:
    """One published state: ``state`` (the wire dict) and ``text`` (its JSON, encoded once)."""

    sequence: int
    state: dict
    text: str


def _robot(model) -> Robot:
    if isinstance(model, Robot):
        return model
    return load_robot(model)


class StateSim:
    """One MjData stepped in real time by a background thread; snapshots and commands under one lock."""

    def __init__(self, robot: Robot, mode: str = "stand", allow_actuators=DEFAULT_ALLOWED):
        self.robot = robot
        self.model = robot.model
        for name in allow_actuators:
            if name not in robot.actuator_names:
                raise LabError(
                    f"--allow-actuator '{name}' is not an actuator of {robot.path.name}",
                    f"actuators: {', '.join(robot.actuator_names)}",
                )
        self.allowed = tuple(allow_actuators)
        self.instance_id = uuid.uuid4().hex
        self.engine = _CommandedEngine(robot)
        self.data = self.engine.data
        self.mode_name = mode
        self.rollout = Rollout(self.engine, PDGains.for_robot(robot), get_mode(mode, robot))
        self.identity = robot.identity_dict()
        m = self.model
        self.ctrlranges = [
            tuple(m.actuator_ctrlrange[a]) if m.actuator_ctrllimited[a] else (-math.inf, math.inf) for a in range(m.nu)
        ]
        self.lock = threading.Lock()
        self._published = threading.Condition(self.lock)
        self._stop = threading.Event()
        self._thread = None
        self._sequence = -1
        self._snapshot = None
        self.active = None  # dict of the command in force, or None
        self.last_control = None  # the last command that ended, with "ended_at"
        self._command_count = 0
        self.started_wall = time.time()
        self.steps = 0
        self.lag_drops = 0  # times the thread fell MAX_LAG_S behind and dropped the backlog
        with self.lock:
            self._publish()

    # --- the simulation thread ---------------------------------------------------------------

    def start(self) -> "StateSim":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="state-sim", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            self._published.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def _run(self) -> None:
        dt = float(self.model.opt.timestep)
        wall0, sim0 = time.perf_counter(), float(self.data.time)
        next_pub = sim0 + PUBLISH_DT
        while not self._stop.is_set():
            target = sim0 + (time.perf_counter() - wall0)
            behind = target - float(self.data.time)
            if behind > MAX_LAG_S:  # a stall (machine busy): resume in real time from here
                wall0, sim0 = time.perf_counter(), float(self.data.time)
                self.lag_drops += 1
                continue
            n = int(min(behind, 0.01) / dt)  # at most 10 ms of simulation per hold of the lock
            if n <= 0:
                time.sleep(min(0.001, dt))
                continue
            with self.lock:
                for _ in range(n):
                    self._step_one()
                    if self.data.time >= next_pub - 1e-9:
                        next_pub += PUBLISH_DT
                        self._publish()

    def _step_one(self) -> None:
        self.rollout.step()
        self.steps += 1
        cmd = self.active
        if cmd is not None and self.data.time >= cmd["expires_at"] - 1e-9:
            self._end_command("expired")

    def _end_command(self, how: str) -> None:
        cmd, self.active = self.active, None
        self.engine.override = None
        if cmd is not None:
            self.last_control = {**cmd, "ended_at": round(float(self.data.time), 6), "ended": how}

    def _publish(self) -> None:
        """Take a snapshot (caller holds the lock) and wake the stream writers."""
        d = self.data
        self._sequence += 1
        state = {
            "type": "state",
            "sequence": self._sequence,
            "simulation_time": round(float(d.time), 6),
            "wall_time": time.time(),
            "server_instance_id": self.instance_id,
            "model": self.identity,
            "mode": self.mode_name,
            "qpos": d.qpos.tolist(),
            "qvel": d.qvel.tolist(),
            "ctrl": d.ctrl.tolist(),
            "active_control": self.active,
            "last_control": self.last_control,
        }
        self._snapshot = Snapshot(self._sequence, state, json.dumps(state, separators=(",", ":")))
        self._published.notify_all()

    # --- what the handlers call ---------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        with self.lock:
            return self._snapshot

    def wait_snapshot(self, after: int, timeout: float) -> Snapshot | None:
        """The latest snapshot once its sequence is past ``after``; None on timeout or stop."""
        with self.lock:
            if self._snapshot.sequence <= after and not self._stop.is_set():
                self._published.wait(timeout)
            snap = self._snapshot
        return snap if snap.sequence > after else None

    def command(self, req: ControlRequest) -> dict:
        """Put ``req`` in force from now; 409 if a command is already active."""
        with self.lock:
            if self.active is not None:
                a = self.active
                raise ControlRejected(
                    f"a command is already active on {a['actuator']} (value {fmt_num(a['value'])}, "
                    f"expires at t={a['expires_at']:.3f} s)",
                    "wait until it expires (at most 0.25 s of simulation time), then send again",
                    status=409,
                )
            self._command_count += 1
            t0 = float(self.data.time)
            self.active = {
                "id": self._command_count,
                "actuator": req.actuator,
                "value": req.value,
                "duration_s": req.duration_s,
                "start_time": round(t0, 6),
                "expires_at": round(t0 + req.duration_s, 6),
            }
            self.engine.override = (req.index, req.value)
            self.data.ctrl[req.index] = req.value
            self._publish()  # a state read right after the 202 already shows the command in force
            return dict(self.active)

    def cancel(self) -> dict | None:
        with self.lock:
            was = self.active
            if was is not None:
                self._end_command("stopped")
                self._publish()  # a state read right after the stop already shows it gone
            return was

    def health(self) -> dict:
        with self.lock:
            t, seq, steps = float(self.data.time), self._sequence, self.steps
        up = time.time() - self.started_wall
        m, r = self.model, self.robot
        allowed = []
        for name in self.allowed:
            a = r.actuator_names.index(name)
            allowed.append(
                {
                    "name": name,
                    "index": a,
                    "joint": r.joint_names[a],
                    "qpos_index": int(r.qadr[a]),
                    "dof_index": int(r.dadr[a]),
                    "ctrlrange": list(self.ctrlranges[a]),
                    "demo_range": [-DEMO_LIMIT, DEMO_LIMIT],
                }
            )
        return {
            "status": "ok" if self.running else "stopped",
            "server_instance_id": self.instance_id,
            "model": self.identity,
            "mujoco": mujoco.__version__,
            "nq": int(m.nq),
            "nv": int(m.nv),
            "nu": int(m.nu),
            "timestep": float(m.opt.timestep),
            "mode": self.mode_name,
            "simulation_time": round(t, 6),
            "sequence": seq,
            "steps": steps,
            "uptime_s": round(up, 3),
            "real_time_factor": round(t / up, 3) if up > 0.5 else None,
            "lag_drops": self.lag_drops,
            "actuator_names": list(r.actuator_names),
            "allowed_actuators": allowed,
            "demo_range": [-DEMO_LIMIT, DEMO_LIMIT],
            "max_duration_s": MAX_DURATION_S,
            "publish_hz": round(1.0 / PUBLISH_DT),
            "stream_hz": STREAM_HZ,
        }


# --- the web layer ------------------------------------------------------------------------------


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
