"""Joint PD as a humanoid SDK does it: target position + stiffness/damping, torques clipped."""

from dataclasses import dataclass

import numpy as np

from lab.robots.model import Robot


@dataclass(frozen=True)
class PDGains:
    """Per-joint gains in actuator order: ``kp`` (nu,) [N·m/rad], ``kd`` (nu,) [N·m·s/rad], ``limit`` (nu,) [N·m]."""

    kp: np.ndarray
    kd: np.ndarray
    limit: np.ndarray
    gravity_ff: bool = False

    @classmethod
    def for_robot(cls, robot: Robot) -> "PDGains":
        return cls(robot.kp.copy(), robot.kd.copy(), robot.tau_limit.copy(), robot.config.gravity_ff)


def pd_torque(gains: PDGains, q, qd, q_target, tau_ff=None) -> np.ndarray:
    """``clip(kp (q* - q) - kd qd [+ tau_ff], -limit, limit)``, all (nu,)."""
    tau = gains.kp * (q_target - q) - gains.kd * qd
    if tau_ff is not None:
        tau += tau_ff
    return np.clip(tau, -gains.limit, gains.limit, out=tau)
