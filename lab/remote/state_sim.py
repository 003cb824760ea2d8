"""The state server's simulation: the only copy of a headless MuJoCo state, stepped in real time.

One :class:`StateSim` owns one ``MjData`` (inside a :class:`~lab.sim.mujoco_engine.MujocoEngine`)
and a background thread that advances it in real time through the Lab's
:class:`~lab.control.rollout.Rollout` (mode ``stand`` by default). Readers never step: they copy
the latest published snapshot or set a command, both under the lock. An accepted command replaces
that actuator's torque from the mode for ``duration_s`` of *simulation* time; the thread clears it
at expiry by itself. The HTTP/WebSocket face is :mod:`lab.web.state_server`.

Remote control: once motion is armed (a reason and an expiry), :meth:`StateSim.start_runtime` makes the
simulation follow a policy server through a :class:`~lab.remote.runtime.Runtime` ticked every 20 ms of
the thread's steps on the wall clock (requests from worker threads: the tick never waits); the e-stop
(:meth:`StateSim.estop`, or the runtime's own after an 8 s hold) replaces every torque with damping
until :meth:`StateSim.clear_estop` is confirmed.
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
from lab.remote.clock import WallClock
from lab.remote.episode import RECORD_TOPICS, DampableEngine, FollowMode, record_to, sense
from lab.remote.faults import Link, get_profile
from lab.remote.protocol import (
    DEFAULT_ALLOWED,
    DEMO_LIMIT,
    MAX_DURATION_S,
    ControlRejected,
    ControlRequest,
    fmt_num,
)
from lab.remote.runtime import Runtime, RuntimeConfig
from lab.remote.transport import HttpTransport
from lab.robots.model import Robot, load_robot
from lab.runtime.modes import LAB_MODES
from lab.runtime.realtime import RealtimeRunner

log = logging.getLogger("lab.remote.server")

PUBLISH_DT = 0.005  # a snapshot every 5 ms of simulation time (200 per second in real time) [s]
STREAM_HZ = 100  # default rate of WS /api/v1/stream [Hz]; ?hz= picks 1..200
MAX_LAG_S = 0.25  # further behind real time than this, the thread drops the backlog instead of racing [s]
ENDPOINTS = (
    "GET /api/v1/health, GET /api/v1/state, POST /api/v1/control, POST /api/v1/control/stop, "
    "POST /api/v1/reset, WS /api/v1/stream, GET /api/v1/runtime, POST /api/v1/arm, POST /api/v1/runtime/start, "
    "POST /api/v1/runtime/stop, POST /api/v1/estop, POST /api/v1/estop/clear, POST /api/v1/runtime/faults"
)


MAX_ARM_S = 600.0  # [s] arming motion lasts at most this long


class _CommandedEngine(DampableEngine):
    """MuJoCo engine whose ``step`` lets one accepted command replace one actuator's torque (and the e-stop
    replace every torque with damping)."""

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
    record_topics = RECORD_TOPICS  # a recording also has the runtime's /observation and /action_chunk

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
        self.clock = WallClock()
        self.runtime: Runtime | None = None  # the remote-control runtime while one runs
        self.link = Link(get_profile("healthy"), 0, self.clock.now())
        self.armed: dict | None = None  # {"reason", "until" [s, wall monotonic], "expires_s"} while motion is armed
        self.estopped = False  # latched by POST /estop or by the runtime; cleared only with confirmation
        self.last_runtime: Runtime | None = None  # the one that ran last (its status stays readable)
        self.policy_url: str | None = None
        self._follow: FollowMode | None = None
        self._control_every = int(round(self.runtime_config().dt / self.dt))

    # --- the runner's hooks -------------------------------------------------------------------

    def _tick(self) -> None:
        rt = self.runtime
        if rt is not None and self.steps % self._control_every == 0:
            now = self.clock.now()
            if self.armed is not None and now >= self.armed["until"]:
                self._stop_runtime("arming expired")
            else:
                self._follow.set_target(rt.tick(now, lambda: sense(self.engine)))
                self.estopped = self.estopped or rt.estopped
        self.engine.estop_kd = self.rollout.gains.kd if self.estopped else None
        self.rollout.step()
        cmd = self.active
        if cmd is not None and self.data.time >= cmd["expires_at"] - 1e-9:
            self._end_command("expired")
        if self.data.time >= self._next_pub - 1e-9:
            self._next_pub += PUBLISH_DT
            self._publish_snapshot()

    def reset(self) -> None:
        """Back to the start pose at t=0 in the stand mode (a running runtime is stopped first)."""
        self.stop_runtime("reset")
        super().reset()

    def _on_reset(self) -> None:
        self._end_command("reset")
        self._next_pub = PUBLISH_DT

    def _make_sample(self, metrics: dict):
        return metrics["mujoco"]

    def sample_dict(self, sample) -> dict:
        """A metrics sample as the recording writes it (``/metrics``)."""
        return sample.to_dict()

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

    # --- remote control: the runtime, arming, e-stop, faults (lock held where it says) --------------------
    @staticmethod
    def runtime_config() -> RuntimeConfig:
        return RuntimeConfig()

    def arm(self, reason, expires_s) -> dict:
        """Arm motion for ``expires_s`` [s] (0 < expires_s <= 600) with a ``reason`` (non-empty words)."""
        if not isinstance(reason, str) or not reason.strip():
            raise LabError("arming needs a reason", 'send {"reason": "why the robot may move", "expires_s": 60}')
        if isinstance(expires_s, bool) or not isinstance(expires_s, (int, float)) or not 0 < expires_s <= MAX_ARM_S:
            raise LabError(f"expires_s {expires_s!r:.20} is outside (0, {MAX_ARM_S:g}]", "arming expires: e.g. 60 s")
        with self._lock:
            self.armed = {
                "reason": reason.strip()[:200],
                "until": self.clock.now() + float(expires_s),
                "expires_s": float(expires_s),
            }
            self._note("armed", reason=self.armed["reason"], expires_s=float(expires_s))
            return self.arming()

    def arming(self) -> dict:
        a = self.armed
        left = a["until"] - self.clock.now() if a is not None else 0.0
        if a is None or left <= 0:
            return {"armed": False, "reason": None, "expires_in_s": 0.0}
        return {"armed": True, "reason": a["reason"], "expires_in_s": round(left, 3)}

    def start_runtime(self, policy_url: str) -> dict:
        """Follow the policy at ``policy_url`` (needs motion armed and no e-stop); the runtime's status."""
        if not self.arming()["armed"]:
            raise LabError("motion is not armed", 'POST /api/v1/arm {"reason": "...", "expires_s": 60} first', 409)
        if self.estopped:
            raise LabError("the e-stop is latched", 'POST /api/v1/estop/clear {"confirm": true} first', 409)
        with self._lock:
            self._stop_runtime("restarted")
            transport = HttpTransport(policy_url, self.link, self.clock)
            rt = Runtime(self.robot, transport, self.runtime_config(), on_event=self._runtime_event)
            record_to(rt, self)
            rt.target = self.rollout.command.q_target.copy()
            self._follow = FollowMode(self.robot)
            self._follow.set_target(rt.target)
            self.rollout.set_mode(self._follow)
            self.mode_name, self.runtime, self.policy_url = FollowMode.name, rt, policy_url
            self._note("runtime_start", policy_url=policy_url)
            return self._runtime_status()

    def stop_runtime(self, why: str = "stopped") -> dict:
        """Stop following (back to the stand mode); never refused."""
        with self._lock:
            self._stop_runtime(why)
            return self._runtime_status()

    def _stop_runtime(self, why: str) -> None:
        rt, self.runtime = self.runtime, None
        if rt is None:
            return
        rt.transport.close()
        self.last_runtime = rt
        made = self._make_modes("stand")
        self.rollout.set_mode(made["mujoco"])
        self.mode_name = "stand"
        rt.log.add(self.clock.now(), "runtime_stopped", why)

    def estop(self) -> dict:
        """Latch the e-stop now (damped, zero target): never gated, never refused."""
        with self._lock:
            self.estopped = True
            if self.runtime is not None:
                self.runtime.estop(self.clock.now(), "requested")
            self._note("estop", by="request")
            return self._runtime_status()

    def clear_estop(self, confirm) -> dict:
        """Clear a latched e-stop: only with ``confirm`` true."""
        if confirm is not True:
            raise LabError("clearing the e-stop needs confirmation", 'send {"confirm": true}')
        with self._lock:
            if self.runtime is not None:
                self.runtime.clear_estop(self.clock.now(), True)
            self.estopped = False
            self._note("estop_cleared")
            return self._runtime_status()

    def set_faults(self, profile, seed=0) -> dict:
        """Inject fault ``profile`` (seeded) between the runtime and the policy from now on."""
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise LabError(f"seed {seed!r:.20} is not an integer in [0, 2^32)", "e.g. 0")
        with self._lock:
            self.link = Link(get_profile(profile), seed, self.clock.now())
            if self.runtime is not None:
                self.runtime.transport.set_link(self.link)
                self.runtime.log.add(self.clock.now(), "fault_profile", profile)
            self._note("fault_profile", profile=profile, seed=seed)
            return self._runtime_status()

    def runtime_status(self) -> dict:
        with self._lock:
            return self._runtime_status()

    def _runtime_status(self) -> dict:
        rt = self.runtime or self.last_runtime
        now = self.clock.now()
        out = rt.status(now) if rt is not None else {"state": "idle", "events": []}
        if rt is not None and self.runtime is None:
            out["state"] = "stopped"
        if self.estopped:
            out["state"] = "estop"
        out.update(
            running=self.runtime is not None,
            estopped=self.estopped,
            arming=self.arming(),
            faults=self.link.describe(),
            policy_url=self.policy_url,
        )
        return out

    def _runtime_event(self, kind: str, data: dict) -> None:
        self._note(f"runtime_{kind}", **data)

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
