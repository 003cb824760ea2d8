"""The Lab's modes: what the controller is asked to do at each instant.

A mode maps simulation time to a :class:`Command` (joint targets, control on/off, a push).
Registry: :data:`MODES` (the four modes every service offers) and :func:`get_mode`; a new mode is one
class plus one entry. Services build their own registries explicitly (:mod:`lab.runtime.modes`).
"""

from dataclasses import dataclass, field

import numpy as np

from lab.errors import LabError
from lab.robots.model import Robot


@dataclass(frozen=True)
class Command:
    """``q_target`` (nu,) [rad]; ``enabled`` False means zero torque; ``push`` (3,) [N] on the torso or None.

    A handed-out ``q_target`` is never modified in place (hand out a new array for a new target):
    the control tick caches ``kp * q_target`` by the array's identity.
    """

    q_target: np.ndarray
    enabled: bool = True
    push: np.ndarray | None = None
    pelvis_z_target: float | None = None  # [m], where the mode tracks a height
    extras: dict | None = None  # mode-specific numbers for the curves (e.g. planned CoM/ZMP of a walk)


PUSH_DELTA_V = 0.225  # [m/s] the built-in robot's default push: 25 N for 0.1 s on 11.1 kg
SQUAT_DEPTH_FRACTION = 0.06 / 0.4226  # the built-in robot's 6 cm squat, as a fraction of its standing height


@dataclass(frozen=True)
class PushParams:
    """A horizontal push on the torso: ``force_n`` [N] along +x for ``duration_s`` [s] every ``period_s`` [s]."""

    force_n: float = 25.0
    duration_s: float = 0.10
    period_s: float = 3.0
    first_s: float = 1.0  # time of the first push after the mode starts [s]

    LIMITS = {"force_n": (0.0, 2000.0), "duration_s": (0.01, 1.0), "period_s": (0.5, 60.0), "first_s": (0.0, 60.0)}

    @classmethod
    def for_robot(cls, robot: Robot) -> "PushParams":
        """The default push for ``robot``: the built-in robot's 25 N, else the same change of velocity
        (:data:`PUSH_DELTA_V`) for the robot's mass."""
        if robot.builtin:
            return cls()
        return cls(force_n=round(PUSH_DELTA_V * robot.total_mass / cls.duration_s, 1))

    def validated(self) -> "PushParams":
        for name, (lo, hi) in self.LIMITS.items():
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v):
                raise LabError(f"push {name} must be a finite number, got {v!r}", f"{name} in [{lo:g}, {hi:g}]")
            if not lo <= v <= hi:
                raise LabError(f"push {name} {v:g} is outside [{lo:g}, {hi:g}]", f"{name} in [{lo:g}, {hi:g}]")
        if self.duration_s >= self.period_s:
            raise LabError(
                f"push duration_s {self.duration_s:g} must be shorter than period_s {self.period_s:g}",
                "use a period longer than the push",
            )
        return self


@dataclass(frozen=True)
class SquatParams:
    """Squat then rise: the pelvis goes ``depth_m`` [m] down and back every ``period_s`` [s]."""

    depth_m: float = 0.06
    period_s: float = 4.0

    @classmethod
    def for_robot(cls, robot: Robot) -> "SquatParams":
        """The built-in robot's 6 cm, else the same fraction of the robot's standing height."""
        if robot.builtin:
            return cls()
        return cls(depth_m=round(SQUAT_DEPTH_FRACTION * robot.standing_height, 4))


class Mode:
    name = "mode"
    description = ""

    def __init__(self, robot: Robot, push: PushParams | None = None, squat: SquatParams | None = None):
        self.robot = robot
        self.q_nominal = robot.q_nominal.copy()
        self.push_params = push or PushParams.for_robot(robot)
        self.squat_params = squat or SquatParams.for_robot(robot)

    def command(self, t: float) -> Command:  # t: time since the mode started [s]
        raise NotImplementedError


class Stand(Mode):
    name = "stand"
    description = "hold the nominal pose"

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        self._cmd = Command(self.q_nominal)

    def command(self, t):
        return self._cmd


class Zero(Mode):
    name = "zero"
    description = "control off (zero torque): the robot falls"

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        self._cmd = Command(self.q_nominal, enabled=False)

    def command(self, t):
        return self._cmd


class Push(Mode):
    name = "push"
    description = "stand, with a horizontal push on the torso at a fixed period"

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        p = self.push_params
        self._quiet = Command(self.q_nominal)
        self._pushed = Command(self.q_nominal, push=np.array([p.force_n, 0.0, 0.0]))

    def command(self, t):
        p = self.push_params
        if t < p.first_s:
            return self._quiet
        return self._pushed if (t - p.first_s) % p.period_s < p.duration_s else self._quiet


@dataclass(frozen=True)
class LegChain:
    """Sagittal leg joints (actuator indices) and segment lengths [m] for the squat."""

    hip: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    knee: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    ankle: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    thigh: float = 0.0
    shank: float = 0.0


def leg_chain(robot: Robot) -> LegChain:
    """Find hip-pitch, knee and ankle-pitch joints by name and measure the segments from the model."""
    import mujoco

    names = robot.joint_names

    def idx(key):
        return np.array([i for i, n in enumerate(names) if key in n], int)

    hip, knee, ankle = idx("hip_pitch"), idx("knee"), idx("ankle_pitch")
    if not (len(hip) == len(knee) == len(ankle) == 2):
        raise LabError(
            "squat needs two legs with joints named *hip_pitch*, *knee* and *ankle_pitch*",
            f"this model's actuated joints: {', '.join(names)}",
        )
    m = robot.model
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)  # qpos0: legs straight
    jid = [m.actuator_trnid[i, 0] for i in (hip[0], knee[0], ankle[0])]
    p = [d.xanchor[j] for j in jid]
    return LegChain(hip, knee, ankle, float(np.linalg.norm(p[1] - p[0])), float(np.linalg.norm(p[2] - p[1])))


class Squat(Mode):
    name = "squat"
    description = "squat then rise, periodically: tracking a moving pelvis height"
    LEVELS = 13  # poses solved by IK between standing and the full depth (robots tuned "auto")

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        self.h0 = robot.standing_height
        self.table = None
        if robot.gain_method == "auto":
            self._init_table(robot)
            return
        self.chain = leg_chain(robot)
        c = self.chain
        k0 = float(self.q_nominal[c.knee[0]])
        self.d0 = self._hip_ankle(k0)  # vertical hip-ankle distance at the nominal pose [m]

    def _init_table(self, robot) -> None:
        """The legs' joint targets at :attr:`LEVELS` depths, by the same IK as the nominal pose: soles flat where
        they are, CoM over them, pelvis upright; the other joints keep their nominal angles."""
        from lab.robots.tuning import squat_table

        legs = sorted({i for leg in robot.legs for i in leg})
        if len(robot.soles) < 2 or not legs:
            raise LabError(
                "squat needs two feet with a flat sole and leg joints between them and the root",
                f"feet found: {[robot.model.body(b).name for b in robot.foot_bodies]}; name them with foot_bodies "
                "in <model>.lab.json",
            )
        qpos = robot.init_qpos.copy()
        qpos[robot.qadr] = self.q_nominal
        self.drops = np.linspace(0.0, self.squat_params.depth_m, self.LEVELS)
        table = squat_table(robot.model, qpos, robot.soles, robot.qadr[legs], robot.dadr[legs], self.drops)
        self.table = table[:, robot.qadr]

    def _hip_ankle(self, knee):
        c = self.chain
        return float(np.sqrt(c.thigh**2 + c.shank**2 + 2 * c.thigh * c.shank * np.cos(knee)))

    def height_target(self, t) -> float:
        p = self.squat_params
        return self.h0 - p.depth_m * 0.5 * (1.0 - np.cos(2 * np.pi * t / p.period_s))

    def command(self, t):
        if self.table is not None:
            drop = self.h0 - self.height_target(t)
            k = float(np.clip(drop / max(self.drops[-1], 1e-9), 0.0, 1.0)) * (self.LEVELS - 1)
            i = min(int(k), self.LEVELS - 2)
            q = self.table[i] + (k - i) * (self.table[i + 1] - self.table[i])
            return Command(q, pelvis_z_target=self.height_target(t))
        c = self.chain
        drop = self.h0 - self.height_target(t)
        d = self.d0 - drop
        cosk = (d * d - c.thigh**2 - c.shank**2) / (2 * c.thigh * c.shank)
        knee = float(np.arccos(np.clip(cosk, -1.0, 1.0)))
        hip = -float(np.arctan2(c.shank * np.sin(knee), c.thigh + c.shank * np.cos(knee)))
        q = self.q_nominal.copy()
        q[c.hip], q[c.knee], q[c.ankle] = hip, knee, -(hip + knee)
        return Command(q, pelvis_z_target=self.height_target(t))


MODES = {m.name: m for m in (Stand, Squat, Push, Zero)}


def get_mode(name, robot: Robot, modes: dict | None = None, **kw) -> Mode:
    """The mode ``name`` of the registry ``modes`` (default :data:`MODES`) for ``robot``.

    An unknown name raises and lists what the registry holds."""
    modes = MODES if modes is None else modes
    if not isinstance(name, str) or name not in modes:
        shown = name if isinstance(name, str) else repr(name)
        raise LabError(f"unknown mode '{shown}'", f"available: {', '.join(modes)}")
    return modes[name](robot, **kw)
