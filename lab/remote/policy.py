"""The built-in remote policy: observation in, a chunk of joint targets out, from the observation only.

:func:`check_observation` is the policy server's trust boundary (every fault a 400 with a hint);
:class:`SquatPolicy` answers one observation with one chunk. It is stateless: the task is a function
of the observed task ``phase`` [s] (how far the robot has executed the task, reported by the robot
with each observation): squat ``cycles`` times (pelvis ``depth_m`` down and back every ``period_s``),
then stand. Action ``k`` of a chunk is the target for ``observed_at + k * dt`` (task phase
``phase + k * dt``); the robot side (:mod:`lab.remote.runtime`) decides which action is due.

Observation (``POST /predict`` body)::

    {"observed_at": 12.34, "phase": 0.8, "model": {"sha256": "0f20..."} | "0f20...",
     "q": [nu floats], "dq": [nu floats], "base": {"pos": [3], "quat": [4 w x y z], "vel": [3], "ang_vel": [3]},
     "horizon": 20}                                      (or "qpos": [nq], "qvel": [nv] instead of q/dq)

Chunk (the answer)::

    {"chunk_id": "3fa1c0d2e9b4", "observed_at": 12.34, "phase": 0.8, "model": {"sha256", "short", ...},
     "dt": 0.02, "horizon": 20, "joint_names": [nu], "actions": [[nu floats] x horizon]}
"""

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from lab.control.modes import Squat, SquatParams
from lab.errors import LabError
from lab.robots.model import Robot

CONTROL_DT = 0.02  # [s] one action per 20 ms: the robot's 50 Hz control loop
HORIZON = 20  # actions per chunk by default: 0.4 s at 50 Hz
MAX_HORIZON = 100
OBS_HINT = (
    'body: {"observed_at": t, "phase": p, "model": {"sha256": ...}, "q": [nu], "dq": [nu], '
    '"base": {"pos": [3], "quat": [4], "vel": [3], "ang_vel": [3]}}'
)


@dataclass(frozen=True)
class TaskParams:
    """Squat ``cycles`` times, ``period_s`` [s] each, ``depth_m`` [m] deep, then stand."""

    cycles: int = 1
    period_s: float = 2.0
    depth_m: float = 0.06

    @property
    def duration_s(self) -> float:
        """The task's length in phase [s]: it is done once the robot has executed this much of it."""
        return self.cycles * self.period_s


def _finite_list(obs: dict, key: str, n: int) -> list:
    v = obs.get(key)
    if not isinstance(v, list) or len(v) != n:
        got = f"{len(v)} values" if isinstance(v, list) else type(v).__name__
        raise LabError(f"observation {key} must be a list of {n} numbers, got {got}", OBS_HINT)
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise LabError(f"observation {key}[{i}] is not a finite number ({x!r:.40})", OBS_HINT)
    return v


def _finite(obs: dict, key: str) -> float:
    if key not in obs:
        raise LabError(f"observation lacks '{key}'", OBS_HINT)
    v = obs[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise LabError(f"observation {key} must be a finite number, got {v!r:.40}", OBS_HINT)
    return float(v)


def check_observation(obs, robot: Robot) -> dict:
    """``obs`` checked whole against ``robot``: a dict with ``observed_at``, ``phase`` (>= 0), ``horizon``
    (1..100, default 20) and ``sha256``; or a :class:`LabError` (400) saying what is wrong."""
    if not isinstance(obs, dict):
        raise LabError(f"observation must be a JSON object, got {type(obs).__name__}", OBS_HINT)
    t, phase = _finite(obs, "observed_at"), _finite(obs, "phase")
    if phase < 0:
        raise LabError(f"observation phase {phase:g} is negative", "phase [s]: how much of the task is done, >= 0")
    model = obs.get("model")
    sha = model.get("sha256") if isinstance(model, dict) else model
    if not isinstance(sha, str):
        raise LabError("observation lacks the model identity", 'send "model": {"sha256": ...} (GET /api/v1/health)')
    if sha != robot.identity:
        raise LabError(
            f"observation is of model {sha[:12]}, this policy drives {robot.short_id} ({robot.path.name})",
            "point the runtime at a policy server started with the same --model",
        )
    nu, m = len(robot.joint_names), robot.model
    if "q" in obs or "qpos" not in obs:
        _finite_list(obs, "q", nu)
        _finite_list(obs, "dq", nu)
    else:
        _finite_list(obs, "qpos", m.nq)
        _finite_list(obs, "qvel", m.nv)
    base = obs.get("base")
    if base is not None:
        if not isinstance(base, dict):
            raise LabError("observation base must be an object", OBS_HINT)
        for key, n in (("pos", 3), ("quat", 4), ("vel", 3), ("ang_vel", 3)):
            if key in base:
                _finite_list(base, key, n)
    horizon = obs.get("horizon", HORIZON)
    if isinstance(horizon, bool) or not isinstance(horizon, int) or not 1 <= horizon <= MAX_HORIZON:
        raise LabError(f"observation horizon {horizon!r:.20} is not an integer in 1..{MAX_HORIZON}", "default 20")
    return {"observed_at": t, "phase": phase, "horizon": horizon, "sha256": sha}


class SquatPolicy:
    """Squat cycles then stand, for ``robot``: :meth:`predict` maps one observation to one chunk."""

    def __init__(self, robot: Robot, task: TaskParams | None = None, dt: float = CONTROL_DT):
        self.robot = robot
        self.task = task or TaskParams()
        self.dt = dt
        self._squat = Squat(robot, squat=SquatParams(depth_m=self.task.depth_m, period_s=self.task.period_s))
        self._stand = robot.q_nominal.copy()
        self.identity = robot.identity_dict()

    def target(self, phase: float) -> np.ndarray:
        """Joint targets (nu,) [rad] at task ``phase`` [s]: the squat while the task lasts, then stand."""
        if phase >= self.task.duration_s:
            return self._stand
        return self._squat.command(phase).q_target

    def predict(self, obs) -> dict:
        """The chunk for ``obs`` (see the module docstring); raises :class:`LabError` on a bad observation."""
        o = check_observation(obs, self.robot)
        p0, n = o["phase"], o["horizon"]
        actions = [self.target(p0 + k * self.dt).tolist() for k in range(n)]
        key = f"{o['observed_at']!r}|{p0!r}|{n}|{o['sha256']}".encode()
        return {
            "chunk_id": hashlib.sha256(key).hexdigest()[:12],  # stateless: the same observation, the same id
            "observed_at": o["observed_at"],
            "phase": p0,
            "model": self.identity,
            "dt": self.dt,
            "horizon": n,
            "joint_names": list(self.robot.joint_names),
            "actions": actions,
        }
