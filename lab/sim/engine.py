"""The engine interface: what the controller, the metrics and the renderer need of a physics engine.

Every array is in the robot's actuator order (``Robot.joint_names``); joints are matched to an
engine's own indices by name, never by index. Quaternions are w, x, y, z.
"""

import math
from abc import ABC, abstractmethod
from typing import NamedTuple

import numpy as np


class Contact(NamedTuple):
    """One contact of a foot with the floor: ``side`` 0 = left, 1 = right; ``pos`` (3,) [m]; ``fz`` [N]."""

    side: int
    pos: np.ndarray
    fz: float


class Engine(ABC):
    """One simulated humanoid. ``dt`` is the physics step [s]; ``step`` advances by one."""

    name: str = "engine"
    version: str = ""
    dt: float = 0.001

    @abstractmethod
    def reset(self) -> None:
        """Back to the nominal standing pose, at rest, time 0."""

    @abstractmethod
    def step(self, tau: np.ndarray) -> None:
        """Apply joint torques ``tau`` (nu,) [N·m] for one physics step."""

    @abstractmethod
    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """``(q (nu,) [rad], qd (nu,) [rad/s])``."""

    @abstractmethod
    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Root link frame: ``(pos (3,) [m], quat (4,) w, x, y, z)`` in the world."""

    @abstractmethod
    def torso_quat(self) -> np.ndarray:
        """Torso body orientation (4,) w, x, y, z."""

    @abstractmethod
    def set_push(self, force: np.ndarray | None) -> None:
        """Hold a world-frame force (3,) [N] on the torso's centre of mass until changed; None clears it."""

    @abstractmethod
    def com(self) -> np.ndarray:
        """Whole-body centre of mass (3,) [m]."""

    @abstractmethod
    def foot_contacts(self) -> list[Contact]:
        """Current foot-floor contacts with their normal forces."""

    @abstractmethod
    def mj_qpos(self) -> np.ndarray:
        """The state as a MuJoCo qpos (nq,) of the lab's model, for rendering and comparison."""

    def torque_buffer(self) -> np.ndarray | None:
        """An (nu,) array that :meth:`step` applies without copying when passed to it, or None."""
        return None

    def divergence(self) -> str | None:
        """Why the simulation is no longer trustworthy since :meth:`clear_divergence`, or None.

        The default: a non-finite state. An engine that can tell more (MuJoCo's bad-acceleration
        warning, after which MuJoCo resets its data by itself) says so."""
        q = self.mj_qpos()
        if not np.isfinite(q).all():
            return f"non-finite state at t={self.time:.3f} s"
        return None

    def clear_divergence(self) -> None:
        """Forget earlier divergence (called after a reset)."""

    def close(self) -> None:
        """Release what the engine holds (a physics server, files); the default holds nothing."""

    def set_body_force(self, body: int | None, force=None, point=None) -> None:
        """Hold a world-frame ``force`` (3,) [N] applied at world ``point`` (3,) [m] on MuJoCo body id
        ``body`` of the lab's model until changed; ``body=None`` clears it. Separate from :meth:`set_push`
        (both may act). Engines that cannot raise a :class:`~lab.errors.LabError`."""
        from lab.errors import LabError

        raise LabError(f"{self.name} does not take body forces", "drag the robot in the Lab (MuJoCo)", 409)

    def bias_torque(self) -> np.ndarray | None:
        """Gravity + Coriolis torque (nu,) [N·m] for feed-forward, or None if the engine has none."""
        return None

    @property
    @abstractmethod
    def time(self) -> float:
        """Simulation time [s]."""

    @property
    @abstractmethod
    def total_mass(self) -> float:
        """Mass of the robot as this engine sees it [kg]."""


def quat_pitch_deg(quat) -> float:
    """Pitch [deg] of a w, x, y, z quaternion (ZYX Euler; positive leans forward, toward +x)."""
    w, x, y, z = (float(v) for v in quat)
    return math.degrees(math.asin(min(1.0, max(-1.0, 2.0 * (w * y - z * x)))))


def quat_roll_deg(quat) -> float:
    """Roll [deg] of a w, x, y, z quaternion (ZYX Euler)."""
    w, x, y, z = (float(v) for v in quat)
    return math.degrees(math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y)))
