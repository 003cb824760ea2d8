"""The ``pose`` mode: hold joint targets set one joint at a time (the robot panel's sliders), and the
checks every per-joint value the Lab takes goes through (joint names, finite numbers, joint ranges).

Targets start at the robot's nominal pose; :meth:`Pose.set_targets` hands out a new target array for
each change (the control tick caches ``kp * q_target`` by the array's identity, see
:class:`~lab.control.modes.Command`).
"""

import math

import numpy as np

from lab.control.modes import Command, Mode
from lab.errors import LabError
from lab.robots.model import Robot

UNLIMITED_SPAN = math.pi  # [rad] the range a slider offers a joint without limits: ±pi

GAIN_MAX = 1e5  # largest kp [N·m/rad] or kd [N·m·s/rad] the robot panel accepts


def joint_ranges(robot: Robot) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` (nu,) [rad] of each actuated joint, in actuator order; NaN where unlimited."""
    m = robot.model
    lower = np.full(len(robot.joint_names), np.nan)
    upper = np.full(len(robot.joint_names), np.nan)
    for i in range(len(robot.joint_names)):
        j = int(m.actuator_trnid[i, 0])
        if m.jnt_limited[j]:
            lower[i], upper[i] = float(m.jnt_range[j, 0]), float(m.jnt_range[j, 1])
    return lower, upper


def _valid_names(robot: Robot, n: int = 4) -> str:
    names = robot.joint_names
    more = f", … ({len(names)} in all)" if len(names) > n else ""
    return ", ".join(names[:n]) + more


def joint_index(robot: Robot, name, what: str = "joint") -> int:
    """The actuator index of the joint ``name``; a :class:`LabError` naming it and a few valid ones."""
    if not isinstance(name, str) or name not in robot.joint_names:
        shown = name[:60] if isinstance(name, str) else repr(name)[:60]
        raise LabError(f"unknown {what} '{shown}'", f"actuated joints: {_valid_names(robot)} (GET /api/robot)")
    return robot.joint_names.index(name)


def finite_number(value, where: str, lo: float | None = None, hi: float | None = None) -> float:
    """``value`` as a float; a :class:`LabError` unless it is a finite JSON number (not a boolean) in [lo, hi]."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        try:
            ok = math.isfinite(value)
        except OverflowError:
            ok = False
    if not ok:
        shown = "true" if value is True else "false" if value is False else repr(value)[:40]
        raise LabError(f"{where}: expected a finite number, got {shown}", "send a JSON number")
    v = float(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise LabError(f"{where}: value {v:g} is outside [{lo:g}, {hi:g}]", f"send a number in [{lo:g}, {hi:g}]")
    return v


def check_angles(robot: Robot, raw, field: str) -> dict:
    """``raw`` (``{joint: angle [rad]}``) checked whole: index -> angle. Each name must be an actuated
    joint and each angle a finite number inside the joint's range; the first fault raises a :class:`LabError`."""
    if not isinstance(raw, dict) or not raw:
        raise LabError(
            f"'{field}' must be a non-empty object of joint name -> angle [rad]",
            f'e.g. {{"{field}": {{"{robot.joint_names[0]}": 0.1}}}}',
        )
    lower, upper = joint_ranges(robot)
    out = {}
    for name, value in raw.items():
        i = joint_index(robot, name)
        v = finite_number(value, f"{field} of {name}")
        lo, hi = lower[i], upper[i]
        if not np.isnan(lo) and not lo <= v <= hi:
            raise LabError(
                f"value {v:g} is outside joint {name} range [{lo:g}, {hi:g}]",
                f"an angle [rad] in [{lo:g}, {hi:g}]",
            )
        out[i] = v
    return out


class Pose(Mode):
    name = "pose"
    description = "hold joint targets set per joint (sliders)"

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        self._cmd = Command(self.q_nominal)

    @property
    def q_target(self) -> np.ndarray:
        """The targets held now (nu,) [rad] (do not modify: a copy is handed out on each change)."""
        return self._cmd.q_target

    def set_targets(self, targets: dict) -> np.ndarray:
        """New targets for some joints (actuator index -> angle [rad]); the rest hold. The new array."""
        q = self._cmd.q_target.copy()
        for i, v in targets.items():
            q[i] = v
        self._cmd = Command(q)
        return q

    def command(self, t):
        return self._cmd
