"""The state server's simulation: the only copy of a headless MuJoCo state, stepped in real time.

One :class:`StateSim` owns one ``MjData`` (inside a :class:`~lab.sim.mujoco_engine.MujocoEngine`)
and a background thread that advances it in real time through the Lab's
:class:`~lab.control.rollout.Rollout` (mode ``stand`` by default). Readers never step: they copy
the latest published snapshot or set a command, both under the lock. An accepted command replaces
that actuator's torque from the mode for ``duration_s`` of *simulation* time; the thread clears it
at expiry by itself. The HTTP/WebSocket face is :mod:`lab.web.state_server`.
"""

import json
import logging
import math
import time
import uuid
from dataclasses import dataclass

import mujoco
import numpy as np

from lab.errors import LabError
from lab.remote.protocol import (
    DEFAULT_ALLOWED,
    DEMO_LIMIT,
    MAX_DURATION_S,
    ControlRejected,
    ControlRequest,
    fmt_num,
)
from lab.robots.model import Robot, load_robot
from lab.runtime.modes import LAB_MODES
from lab.runtime.realtime import RealtimeRunner
from lab.sim.mujoco_engine import MujocoEngine

log = logging.getLogger("lab.remote.server")

PUBLISH_DT = 0.005  # a snapshot every 5 ms of simulation time (200 per second in real time) [s]
STREAM_HZ = 100  # default rate of WS /api/v1/stream [Hz]; ?hz= picks 1..200
MAX_LAG_S = 0.25  # further behind real time than this, the thread drops the backlog instead of racing [s]
ENDPOINTS = (
    "GET /api/v1/health, GET /api/v1/state, POST /api/v1/control, POST /api/v1/control/stop, "
    "POST /api/v1/reset, WS /api/v1/stream"
)


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


class StateSim(RealtimeRunner):
    """One MjData stepped in real time by the runner's thread; snapshots and commands under its lock."""

    service = "the state server"

    def __init__(self, robot: Robot, mode: str = "stand", allow_actuators=DEFAULT_ALLOWED, modes: dict | None = None):
        for name in allow_actuators:
            if name not in robot.actuator_names:
                raise LabError(
                    f"--allow-actuator '{name}' is not an actuator of {robot.path.name}",
                    f"actuators: {', '.join(robot.actuator_names)}",
                )
        self.allowed = tuple(allow_actuators)
        self.model = robot.model
        self.instance_id = uuid.uuid4().hex
        self.identity = robot.identity_dict()
        m = self.model
        self.ctrlranges = [
            tuple(m.actuator_ctrlrange[a]) if m.actuator_ctrllimited[a] else (-math.inf, math.inf) for a in range(m.nu)
        ]
        self._sequence = -1
        self._snapshot = None
        self.active = None  # dict of the command in force, or None
        self.last_control = None  # the last command that ended, with "ended_at"
        self._command_count = 0
        self.started_wall = time.time()
        self.engine = _CommandedEngine(robot)
        self.data = self.engine.data
        self._next_pub = PUBLISH_DT
        super().__init__(
            robot,
            {"mujoco": self.engine},
            modes or LAB_MODES,
            mode,
            sample_hz=10.0,
            history_s=1.0,
            max_catchup_s=MAX_LAG_S,
            max_chunk=10,  # at most 10 ms of simulation per hold of the lock
        )
        self.rollout = self.rollouts["mujoco"]

    # --- the runner's hooks -------------------------------------------------------------------

    def _tick(self) -> None:
        self.rollout.step()
        cmd = self.active
        if cmd is not None and self.data.time >= cmd["expires_at"] - 1e-9:
            self._end_command("expired")
        if self.data.time >= self._next_pub - 1e-9:
            self._next_pub += PUBLISH_DT
            self._publish_snapshot()

    def _on_reset(self) -> None:
        self._end_command("reset")
        self._next_pub = PUBLISH_DT

    def _make_sample(self, metrics: dict):
        return metrics["mujoco"]

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        super().stop()

    def _end_command(self, how: str) -> None:
        cmd, self.active = self.active, None
        self.engine.override = None
        if cmd is not None:
            self.last_control = {**cmd, "ended_at": round(float(self.data.time), 6), "ended": how}

    def _publish(self) -> None:
        """After a chunk: snapshots come every PUBLISH_DT from the tick; here only a new start or a fault."""
        super()._publish()
        snap = self._snapshot
        if snap is None or self._fault is not None or self.data.time < snap.state["simulation_time"]:
            self._publish_snapshot()

    def _publish_snapshot(self) -> None:
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
            "sim": self.sim_info(),
            "qpos": d.qpos.tolist(),
            "qvel": d.qvel.tolist(),
            "ctrl": d.ctrl.tolist(),
            "active_control": self.active,
            "last_control": self.last_control,
        }
        self._snapshot = Snapshot(self._sequence, state, json.dumps(state, separators=(",", ":")))
        self._lock.notify_all()

    # --- what the handlers call ---------------------------------------------------------------

    def state_snapshot(self) -> Snapshot:
        """The latest published state (the wire dict and its JSON)."""
        with self._lock:
            return self._snapshot

    def wait_snapshot(self, after: int, timeout: float) -> Snapshot | None:
        """The latest snapshot once its sequence is past ``after``; None on timeout or stop."""
        with self._lock:
            if self._snapshot.sequence <= after and not self._stop.is_set():
                self._lock.wait(timeout)
            snap = self._snapshot
        return snap if snap.sequence > after else None

    def command(self, req: ControlRequest) -> dict:
        """Put ``req`` in force from now; 409 if a command is already active."""
        with self._lock:
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
            self._publish_snapshot()  # a state read right after the 202 already shows the command in force
            return dict(self.active)

    def cancel(self) -> dict | None:
        with self._lock:
            was = self.active
            if was is not None:
                self._end_command("stopped")
                self._publish_snapshot()  # a state read right after the stop already shows it gone
            return was

    def health(self) -> dict:
        with self._lock:
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
            "status": ("ok" if self._fault is None else self._fault["state"]) if self.running else "stopped",
            "sim": self.sim_info(),
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
