"""Six-DoF foot pose IK per leg: damped least squares on the MuJoCo Jacobian.

Given the pelvis pose and a target pose of the foot (its ankle frame, see
:mod:`lab.walking.geometry`), find the leg's six joint angles. Each iteration runs MuJoCo's
kinematics on a private ``MjData`` and takes the foot body's 6 x 6 Jacobian
(``mj_jacBody``, leg columns only):

    dq = J^T (J J^T + lambda I)^-1 e,   lambda = 1e-6,  |dq|_inf clamped to ``max_step``

with ``e`` = (position error, rotation error as a world-frame rotation vector). Convergence is
judged by the **end-effector error**, the largest distance between a sole corner where it is
and where it should be; a solution counts when that is below ``tol`` (2 mm), never because an
iteration count ran out. The solver tries a warm start first, then several knee-bend seeds that
all keep the foot flat (hip + knee + ankle pitch = 0).

``method="pinv"`` is the pitfall kept for comparison: a truncated pseudo-inverse
(``numpy.linalg.pinv(J, rcond=0.05)``) run for a fixed number of iterations from one seed. Near
a straight knee the singular value that moves the foot vertically falls below 5 % of the
largest, is dropped, and the solver stops moving the foot up or down without saying so.
"""

from dataclasses import dataclass
from typing import NamedTuple

import mujoco
import numpy as np

from lab.robots.model import Robot
from lab.walking.geometry import GaitGeometry, Leg


@dataclass(frozen=True)
class IKConfig:
    damping: float = 1e-6  # lambda of the damped least squares [-]
    max_step: float = 0.2  # largest joint change per iteration [rad]
    tol: float = 0.002  # end-effector error that counts as converged [m]
    stop: float = 1e-6  # error at which the iteration stops early [m]
    max_iters: int = 60  # per seed
    seeds_knee: tuple = (0.3, 0.7, 1.1, 1.5)  # knee bends of the flat-foot seeds [rad]
    rcond: float = 0.05  # truncation of the pseudo-inverse variant (method="pinv")


@dataclass(frozen=True)
class IKResult:
    """``q`` (6,) leg joint angles [rad], hip to ankle; ``error`` end-effector error [m]."""

    q: np.ndarray
    error: float
    pos_error: float  # ankle position error [m]
    rot_error: float  # foot orientation error [rad]
    iters: int  # iterations over all seeds tried
    converged: bool
    seed: int  # -1 warm start, else index into IKConfig.seeds_knee

    @property
    def error_mm(self) -> float:
        return 1000.0 * self.error


def flat_seed(leg: Leg, knee: float) -> np.ndarray:
    """Leg angles (6,) with the knee bent by ``knee`` [rad] and the foot flat (hip + knee + ankle = 0)."""
    q = np.zeros(6)
    k = leg.knee_sign * knee
    q[leg.knee], q[leg.hip_pitch], q[leg.ankle_pitch] = k, -k / 2, -k / 2
    return np.clip(q, leg.lo, leg.hi)


class LegIK:
    """Foot IK for ``robot``; one instance per thread (it owns an ``MjData``)."""

    def __init__(self, robot: Robot, geometry: GaitGeometry, config: IKConfig | None = None):
        self.robot = robot
        self.model = robot.model
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:] = robot.init_qpos
        self.geometry = geometry
        self.config = config or IKConfig()
        root_j = int(self.model.body_jntadr[robot.root_body])
        self._root_q = int(self.model.jnt_qposadr[root_j])
        self._corners = np.array(geometry.sole_corners)  # (4, 3) in the ankle frame
        self._jacp = np.zeros((3, self.model.nv))
        self._jacr = np.zeros((3, self.model.nv))
        self._rot = np.zeros(3)

    def set_pelvis(self, pos, quat) -> None:
        """Root pose for the next solves: ``pos`` (3,) [m], ``quat`` (4,) w, x, y, z."""
        a = self._root_q
        self.data.qpos[a : a + 3] = pos
        self.data.qpos[a + 3 : a + 7] = quat

    def foot_pose(self, leg: Leg, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Forward kinematics: ankle position (3,) and rotation matrix (3, 3) for leg angles ``q`` (6,)."""
        self._fk(leg, q)
        b = leg.foot_body
        return self.data.xpos[b].copy(), self.data.xmat[b].reshape(3, 3).copy()

    def _fk(self, leg: Leg, q) -> None:
        self.data.qpos[list(leg.qadr)] = q
        mujoco.mj_kinematics(self.model, self.data)

    def ee_error(self, p, R, p_d, R_d) -> float:
        """Largest sole-corner distance [m] between pose (p, R) and target (p_d, R_d)."""
        diff = self._corners @ (R - R_d).T + (p - p_d)
        return float(np.sqrt((diff * diff).sum(1)).max())

    def _error_vec(self, leg: Leg, p_d, q_d) -> tuple[np.ndarray, float, float, float]:
        b = leg.foot_body
        p = self.data.xpos[b]
        R = self.data.xmat[b].reshape(3, 3)
        mujoco.mju_subQuat(self._rot, q_d, self.data.xquat[b])  # local frame of the current foot
        e = np.concatenate([p_d - p, R @ self._rot])
        R_d = np.zeros(9)
        mujoco.mju_quat2Mat(R_d, q_d)
        err = self.ee_error(p, R, p_d, R_d.reshape(3, 3))
        return e, err, float(np.linalg.norm(e[:3])), float(np.linalg.norm(e[3:]))

    def _jacobian(self, leg: Leg) -> np.ndarray:
        mujoco.mj_comPos(self.model, self.data)
        mujoco.mj_jacBody(self.model, self.data, self._jacp, self._jacr, leg.foot_body)
        cols = list(leg.dof)
        return np.vstack([self._jacp[:, cols], self._jacr[:, cols]])

    def _iterate(self, leg: Leg, q, p_d, q_d, method: str, iters: int, history=None):
        cfg = self.config
        lo, hi = np.array(leg.lo), np.array(leg.hi)
        q = np.clip(np.array(q, float), lo, hi)
        n = 0
        self._fk(leg, q)
        e, err, ep, er = self._error_vec(leg, p_d, q_d)
        if history is not None:
            history.append(err)
        while n < iters and err > cfg.stop:
            J = self._jacobian(leg)
            if method == "pinv":
                dq = np.linalg.pinv(J, rcond=cfg.rcond) @ e
            else:
                dq = J.T @ np.linalg.solve(J @ J.T + cfg.damping * np.eye(6), e)
            big = np.abs(dq).max()
            if big > cfg.max_step:
                dq *= cfg.max_step / big
            q = np.clip(q + dq, lo, hi)
            n += 1
            self._fk(leg, q)
            e, err, ep, er = self._error_vec(leg, p_d, q_d)
            if history is not None:
                history.append(err)
        return q, err, ep, er, n

    def solve(
        self,
        leg: Leg,
        foot_pos,
        foot_quat=(1.0, 0.0, 0.0, 0.0),
        q0=None,
        method: str = "dls",
        history: list | None = None,
    ) -> IKResult:
        """Leg angles that put ``leg``'s ankle frame at ``foot_pos`` (3,) [m], ``foot_quat`` (4,) w, x, y, z.

        The pelvis is where :meth:`set_pelvis` last put it. ``q0`` (6,) is a warm start.
        ``method="dls"`` (the solver) tries ``q0`` then each knee seed until one converges;
        ``method="pinv"`` (the pitfall) runs the truncated pseudo-inverse from ``q0`` (or the
        straightest seed) for ``max_iters`` iterations and returns whatever it reached.
        ``history``, when a list, receives the end-effector error [m] after every iteration.
        """
        cfg = self.config
        p_d = np.asarray(foot_pos, float)
        q_d = np.asarray(foot_quat, float)
        q_d = q_d / np.linalg.norm(q_d)
        if method == "pinv":
            start = flat_seed(leg, cfg.seeds_knee[0]) if q0 is None else q0
            q, err, ep, er, n = self._iterate(leg, start, p_d, q_d, "pinv", cfg.max_iters, history)
            return IKResult(q, err, ep, er, n, err < cfg.tol, -1 if q0 is not None else 0)
        if method != "dls":
            raise ValueError(f"unknown IK method '{method}'; available: dls, pinv")
        seeds = ([(-1, np.asarray(q0, float))] if q0 is not None else []) + [
            (i, flat_seed(leg, k)) for i, k in enumerate(cfg.seeds_knee)
        ]
        best, total = None, 0
        for idx, start in seeds:
            q, err, ep, er, n = self._iterate(leg, start, p_d, q_d, "dls", cfg.max_iters, history)
            total += n
            if best is None or err < best.error:
                best = IKResult(q, err, ep, er, total, err < cfg.tol, idx)
            if err < cfg.tol:
                break
        return IKResult(best.q, best.error, best.pos_error, best.rot_error, total, best.converged, best.seed)


class Target(NamedTuple):
    """A validation target: the ankle moved by (``dx``, ``dy``, ``dz``) [m] from its standing position,
    the foot turned by ``yaw``/``roll`` [rad]; the pelvis stays at its standing pose."""

    name: str
    dx: float
    dz: float
    dy: float = 0.0
    yaw: float = 0.0
    roll: float = 0.0


VALIDATION_TARGETS = (
    Target("stand", 0.0, 0.0),
    Target("lift 20 mm", 0.0, 0.020),
    Target("lift 50 mm", 0.0, 0.050),
    Target("lift 100 mm", 0.0, 0.100),
    Target("forward 30 mm", 0.030, 0.0),
    Target("forward 60 mm", 0.060, 0.0),
    Target("back 30 mm", -0.030, 0.0),
    Target("forward 30 + lift 50", 0.030, 0.050),
    Target("forward 60 + lift 50", 0.060, 0.050),
    Target("forward 60 + lift 100", 0.060, 0.100),
    Target("back 30 + lift 50", -0.030, 0.050),
    Target("forward 30 + lift 35, toe out 10 deg", 0.030, 0.035, yaw=np.radians(10.0)),
    Target("lift 50, out 20 mm, roll 5 deg", 0.0, 0.050, dy=0.020, roll=np.radians(5.0)),
)


def target_pose(geometry: GaitGeometry, side: int, target: Target) -> tuple[np.ndarray, np.ndarray]:
    """Ankle position (3,) [m] and quaternion (4,) w, x, y, z of ``target`` for leg ``side``.

    Lateral moves and yaw/roll are mirrored for the right leg (outward is +y on the left).
    """
    s = 1.0 if side == 0 else -1.0
    p = np.array(geometry.ankle_xyz[side]) + (target.dx, s * target.dy, target.dz)
    quat = np.zeros(4)
    mujoco.mju_euler2Quat(quat, np.array([s * target.roll, 0.0, s * target.yaw]), "xyz")
    return p, quat
