"""Where the runtime meets the simulation: its mode, its sensors, the e-stop's damping, and one run.

The state server (:class:`~lab.remote.state_sim.StateSim`, live, wall clock, HTTP to a policy server)
and ``experiments/latency_sweep.py`` (:func:`run_episode`, virtual clock, the policy called in-process
through the fault link) use the same pieces: :class:`FollowMode` holds the runtime's targets for the
joint PD, :func:`sense` reads what an observation carries, :func:`estop_torque` is the e-stop's law;
:data:`RECORD_TOPICS` and :func:`record_to` put the runtime's observations and chunks into a recording.
"""

from dataclasses import dataclass, replace

import numpy as np

from lab.control.modes import Command, Mode
from lab.control.pd import PDGains
from lab.control.rollout import Rollout
from lab.record import format as fmt
from lab.remote.clock import VirtualClock
from lab.remote.faults import Link, get_profile
from lab.remote.policy import CONTROL_DT, SquatPolicy, TaskParams
from lab.remote.runtime import REASONS, Runtime, RuntimeConfig, chunk_record
from lab.remote.transport import VirtualTransport
from lab.robots.model import Robot
from lab.sim.engine import quat_pitch_deg, quat_roll_deg
from lab.sim.mujoco_engine import MujocoEngine


class FollowMode(Mode):
    """Hold the targets the runtime last returned (``set_target``, a new array each change)."""

    name = "remote"
    description = "follow the remote policy's action chunks (the runtime's targets)"

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        self._cmd = Command(self.q_nominal)

    def set_target(self, q: np.ndarray) -> None:
        if q is not self._cmd.q_target:
            self._cmd = Command(q)

    def command(self, t):
        return self._cmd


def sense(engine) -> dict:
    """What an observation carries from ``engine``: joint ``q``, ``dq`` (nu,) [rad, rad/s] and the base
    (``pos`` [m], ``quat`` w x y z, ``vel`` [m/s, world], ``ang_vel`` [rad/s, local]) as lists."""
    q, dq = engine.joint_state()
    pos, quat = engine.base_pose()
    d = engine.data
    return {
        "q": q.tolist(),
        "dq": dq.tolist(),
        "base": {
            "pos": pos.tolist(),
            "quat": quat.tolist(),
            "vel": d.qvel[0:3].tolist(),
            "ang_vel": d.qvel[3:6].tolist(),
        },
    }


_VEC = {"type": "array", "items": {"type": "number"}}
_BASE = {
    "type": "object",
    "properties": {"pos": _VEC, "quat": _VEC, "vel": _VEC, "ang_vel": _VEC},
    "required": ["pos", "quat", "vel", "ang_vel"],
}
# the runtime's own recorded topics (a runner's ``record_topics``, lab.record.format.extra_topics)
RECORD_TOPICS = {
    "/observation": {
        "title": "lab.Observation",
        "description": "An observation the runtime sent to the policy server (POST /predict, as sent): observed_at "
        "[s, the runtime's clock], task phase [s], model identity, joint q [rad] and dq [rad/s] (nu), the base "
        "(pos [m], quat w x y z, vel [m/s, world], ang_vel [rad/s, local]), chunk horizon",
        "type": "object",
        "properties": {
            "timestamp": fmt.TIME,
            "sim_time": {"type": "number"},
            "observed_at": {"type": "number"},
            "phase": {"type": "number"},
            "model": {"type": "object", "properties": {"sha256": {"type": "string"}}},
            "horizon": {"type": "integer"},
            "q": _VEC,
            "dq": _VEC,
            "base": _BASE,
        },
        "required": ["timestamp", "observed_at", "phase", "q", "dq", "base"],
    },
    "/action_chunk": {
        "title": "lab.ActionChunk",
        "description": "A chunk as it arrived from the policy server, with the runtime's verdict (accepted, or "
        "rejected whole with a reason): the observation it answers (observed_at [s]), arrival [s, the runtime's "
        "clock], chunk id, model sha256, phase [s], actions (horizon x nu) [rad], a non-finite value as null; a "
        "field the server did not send (or not of its type) is null",
        "type": "object",
        "properties": {
            "timestamp": fmt.TIME,
            "sim_time": {"type": "number"},
            "observed_at": {"type": "number"},
            "arrived_at": {"type": "number"},
            "verdict": {"enum": ["accepted", "rejected"]},
            "reason": {"enum": [*REASONS, None]},
            "detail": {"type": "string"},
            "chunk_id": {"type": ["string", "null"]},
            "model": {"type": ["string", "null"]},
            "phase": {"type": ["number", "null"]},
            "actions": {
                "type": ["array", "null"],
                "items": {"type": "array", "items": {"type": ["number", "null"]}},
            },
        },
        "required": ["timestamp", "observed_at", "arrived_at", "verdict", "reason", "actions"],
    },
}


def record_to(runtime: Runtime, runner) -> None:
    """While ``runner`` records (its ``recorder`` set; its ``record_topics`` :data:`RECORD_TOPICS`), each
    observation ``runtime`` sends goes to ``/observation`` and each chunk that arrives, with its verdict, to
    ``/action_chunk``. Called from the runtime's tick, the runner's lock held; nothing is built otherwise."""

    def observation(obs: dict) -> None:
        if runner.recorder is not None:
            runner.recorder.message("/observation", obs)

    def chunk(raw, observed_at: float, now: float, reason, why: str) -> None:
        if runner.recorder is not None:
            runner.recorder.message("/action_chunk", chunk_record(raw, observed_at, now, reason, why))

    runtime.on_observation, runtime.on_chunk = observation, chunk


def estop_torque(engine, kd: np.ndarray) -> np.ndarray:
    """The e-stop's law: no target, only damping, ``tau = -kd * qd`` (nu,) [N·m]."""
    return -kd * engine.joint_state()[1]


class DampableEngine(MujocoEngine):
    """MuJoCo engine whose ``step`` applies :func:`estop_torque` instead of the controller's while ``estop_kd`` is set."""

    estop_kd = None

    def step(self, tau):
        if self.estop_kd is not None:
            tau = estop_torque(self, self.estop_kd)
        super().step(tau)


@dataclass(frozen=True)
class EpisodeResult:
    """One run: the task done (``done_at`` [s] or None), fell, ``invalid_sent`` targets, time in hold [s],
    stale rejections, e-stops, requests, and the runtime's rejection counts."""

    done_at: float | None
    fell: bool
    invalid_sent: int
    hold_s: float
    stale_rejected: int
    estops: int
    requests: int
    rejected: dict

    @property
    def safe(self) -> bool:
        return not self.fell and self.invalid_sent == 0

    @property
    def success(self) -> bool:
        return self.safe and self.done_at is not None


def run_episode(
    robot: Robot,
    profile: str = "healthy",
    seed: int = 0,
    config: RuntimeConfig | None = None,
    duration_s: float = 6.0,
    task: TaskParams | None = None,
) -> EpisodeResult:
    """``duration_s`` [s] of the robot following :class:`SquatPolicy` through the fault ``profile``
    (seeded) on the virtual clock (the simulation time): the same :class:`Runtime` as the state server's."""
    task = task or TaskParams()
    engine = DampableEngine(robot)
    mode = FollowMode(robot)
    gains = PDGains.for_robot(robot)
    rollout = Rollout(engine, gains, mode)
    clock = VirtualClock()
    policy = SquatPolicy(robot, task)
    runtime = Runtime(robot, VirtualTransport(policy.predict, Link(get_profile(profile), seed)), config)
    every = int(round(CONTROL_DT / engine.dt))
    n = int(round(duration_s / engine.dt))
    done_at, fell = None, False
    for k in range(n):
        if k % every == 0:
            clock.advance_to(k * engine.dt)
            now = clock.now()
            target = runtime.tick(now, lambda: sense(engine))
            if not np.all(np.isfinite(target)):  # a NaN reached the robot: the run ends unsafe (MuJoCo would diverge)
                fell = True
                break
            mode.set_target(target)
            engine.estop_kd = gains.kd if runtime.estopped else None
            if done_at is None and runtime.phase >= task.duration_s - 1e-9:
                done_at = now
            pos, quat = engine.base_pose()
            if not (np.all(np.isfinite(engine.data.qpos))) or robot.has_fallen(
                pos[2], quat_pitch_deg(quat), quat_roll_deg(quat)
            ):
                fell = True
                break
        rollout.step()
    return EpisodeResult(
        done_at=done_at,
        fell=fell,
        invalid_sent=runtime.invalid_sent,
        hold_s=runtime.hold_s,
        stale_rejected=runtime.rejected["stale"],
        estops=runtime.counts["estops"],
        requests=runtime.counts["requests"],
        rejected=dict(runtime.rejected),
    )


def ablated(name: str, config: RuntimeConfig | None = None) -> RuntimeConfig:
    """``config`` (default the full runtime) with the mitigation ``name`` switched off ("full": none)."""
    config = config or RuntimeConfig()
    return config if name == "full" else replace(config, **{name: False})
