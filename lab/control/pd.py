"""Joint PD as a humanoid SDK does it: target position + stiffness/damping, torques clipped."""

from dataclasses import dataclass

import numpy as np

try:  # numpy's clip ufunc: one call instead of minimum + maximum (np.clip wraps it in Python checks)
    from numpy._core.umath import clip as _clip
except ImportError:  # pragma: no cover - other numpy layouts
    _clip = None

from lab.robots.model import Robot


@dataclass(frozen=True)
class PDGains:
    """Per-joint gains in actuator order: ``kp`` (nu,) [N·m/rad], ``kd`` (nu,) [N·m·s/rad], ``limit`` (nu,) [N·m]."""

    kp: np.ndarray
    kd: np.ndarray
    limit: np.ndarray
    gravity_ff: bool = False

    @property
    def neg_limit(self) -> np.ndarray:
        neg = self.__dict__.get("_neg")
        if neg is None:
            neg = -self.limit
            object.__setattr__(self, "_neg", neg)
        return neg

    @classmethod
    def for_robot(cls, robot: Robot) -> "PDGains":
        return cls(robot.kp.copy(), robot.kd.copy(), robot.tau_limit.copy(), robot.gravity_ff)


def pd_torque(gains: PDGains, q, qd, q_target, tau_ff=None, out=None, tmp=None, kp_target=None) -> np.ndarray:
    """``clip(kp (q* - q) - kd qd [+ tau_ff], -limit, limit)``, all (nu,); written into ``out`` if given.

    In-place ufuncs: this runs at 1 kHz in Python beside ``mj_step``, so it allocates nothing when
    ``out`` (and the scratch ``tmp``) are given; ``kp_target`` = ``kp * q_target`` may be passed
    precomputed when the target does not change between ticks.
    """
    if out is None:
        out = np.empty_like(gains.kp)
    tmp = np.multiply(gains.kd, qd, out=tmp)
    if kp_target is None:
        np.subtract(q_target, q, out=out)
        np.multiply(out, gains.kp, out=out)
    else:
        np.multiply(gains.kp, q, out=out)
        np.subtract(kp_target, out, out=out)
    np.subtract(out, tmp, out=out)
    if tau_ff is not None:
        np.add(out, tau_ff, out=out)
    if _clip is not None:
        return _clip(out, gains.neg_limit, gains.limit, out=out)
    np.minimum(out, gains.limit, out=out)
    np.maximum(out, gains.neg_limit, out=out)
    return out
