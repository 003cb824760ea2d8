"""The closed-loop walk: plan -> online foot IK -> 22-joint PD in MuJoCo.

:class:`WalkController` is called at the IK rate (100 Hz). Each call it

1. reads the real state through the :class:`~lab.sim.engine.Engine` interface (qpos, CoM);
2. at the start of each single support re-places the footholds from the *measured* support
   foot and re-solves the bounded LIPM (:meth:`FootstepPlanner.replan`);
3. takes the planned CoM and corrects it by the CoM tracking error,
   ``c* = c_plan + clip(k (c_plan - c), +-3 cm)``;
4. finds the pelvis position whose whole-body CoM is ``c*`` (pelvis upright, at the walking
   height) and both legs' angles that put the ankles on the planned foot poses, by the foot IK,
   warm-started from the previous tick;
5. returns joint targets (legs from the IK, every other joint at its nominal angle) for the
   joint PD, which runs at the physics rate.

The ``walk`` mode (:mod:`lab.walking.mode`) plays it live; :func:`lab.walking.run.run_walk` runs
that mode through the same :class:`~lab.control.rollout.Rollout` the Lab uses and judges the run.
"""

from dataclasses import dataclass, field

import mujoco
import numpy as np

from lab.robots.model import FALL_TILT_DEG, Robot
from lab.walking.geometry import GaitGeometry, measure_geometry
from lab.walking.ik import IKConfig, LegIK
from lab.walking.planner import FootstepPlanner, GaitParams, Reference

UPRIGHT = np.array([1.0, 0.0, 0.0, 0.0])


@dataclass(frozen=True)
class WalkParams:
    gait: GaitParams = field(default_factory=GaitParams)
    com_gain: float = 1.0  # CoM correction gain [-]
    com_clip: float = 0.03  # largest CoM correction per axis [m]
    com_iters: int = 2  # pelvis <- CoM fixed-point iterations per tick
    pelvis_height: float | None = None  # walking pelvis height [m]; None = standing height
    ik: IKConfig = field(default_factory=lambda: IKConfig(max_iters=15))  # warm starts need 2-3 iterations


def stability_limits(robot: Robot) -> tuple[float, float]:
    """(pelvis height floor [m], tilt limit [deg]) of the robot's one fall rule (:meth:`Robot.has_fallen`)."""
    return robot.fall_height, FALL_TILT_DEG


class WalkController:
    """Plan + IK + CoM correction for ``robot``; :meth:`start` then :meth:`update` at the IK rate."""

    def __init__(self, robot: Robot, params: WalkParams | None = None, geometry: GaitGeometry | None = None):
        self.robot = robot
        self.params = params or WalkParams()
        self.geo = geometry or measure_geometry(robot)
        self.ik = LegIK(robot, self.geo, self.params.ik)
        self.legs = self.geo.legs
        self._fk = mujoco.MjData(robot.model)
        self.planner: FootstepPlanner | None = None
        self.q_target = robot.q_nominal.copy()
        self.ref: Reference | None = None
        self.state = {}

    @property
    def duration(self) -> float:
        return self.params.gait.duration

    def measured(self, qpos: np.ndarray) -> np.ndarray:
        """Ankle positions (2, 3) [m] of a MuJoCo ``qpos`` (nq,)."""
        self._fk.qpos[:] = qpos
        mujoco.mj_kinematics(self.robot.model, self._fk)
        return np.array([self._fk.xpos[leg.foot_body] for leg in self.legs])

    def start(self, engine) -> None:
        """Plan from where ``engine``'s robot stands now."""
        feet = self.measured(engine.mj_qpos())
        com = engine.com()
        q, _ = engine.joint_state()
        self.q_legs = [np.array(q[list(leg.act)]) for leg in self.legs]
        pos, _ = engine.base_pose()
        self.pelvis = np.array(pos, float)
        self.pelvis_z = float(self.params.pelvis_height or self.robot.standing_height)
        self.com_offset = com[:2] - pos[:2]
        self.planner = FootstepPlanner(self.geo, self.params.gait, feet, com[:2])
        self._phase = None
        self.landings = []  # per step: measured minus planned foothold at touchdown [m]
        self.q_target = self.robot.q_nominal.copy()
        self.update(0.0, engine)

    def update(self, t: float, engine) -> np.ndarray:
        """Joint targets (nu,) [rad] at plan time ``t`` [s] given the real state of ``engine``."""
        pl, prm = self.planner, self.params
        qpos = engine.mj_qpos()
        feet = self.measured(qpos)
        com = engine.com()
        ph = pl.phase_at(t)
        prev = self._phase
        if prev is not None and prev.kind == "ss" and ph != prev:  # touchdown: where did the swing foot land?
            sw = 1 - prev.support
            d = feet[sw] - np.array([*pl.holds[prev.step], pl.ground])
            self.landings.append({"step": prev.step, "side": sw, "t_s": t, "dx_m": d[0], "dy_m": d[1], "dz_m": d[2]})
        if ph.kind == "ss" and ph != prev:
            pl.replan(t, feet)
        self._phase = ph
        ref = self.ref = pl.reference(t)
        corr = np.clip(prm.com_gain * (ref.com - com[:2]), -prm.com_clip, prm.com_clip)
        target = ref.com + corr
        pelvis = np.array([*(target - self.com_offset), self.pelvis_z]) if t == 0.0 else self.pelvis.copy()
        pelvis[2] = self.pelvis_z
        err = 0.0
        ok = True
        for it in range(max(1, prm.com_iters) + 1):
            self.ik.set_pelvis(pelvis, UPRIGHT)
            err, ok = 0.0, True
            for i, leg in enumerate(self.legs):
                res = self.ik.solve(leg, ref.feet[i], UPRIGHT, q0=self.q_legs[i])
                if res.converged:
                    self.q_legs[i] = res.q
                err, ok = max(err, res.error), ok and res.converged
                self.ik.data.qpos[list(leg.qadr)] = self.q_legs[i]
            if it == max(1, prm.com_iters):
                break
            mujoco.mj_kinematics(self.robot.model, self.ik.data)
            mujoco.mj_comPos(self.robot.model, self.ik.data)
            model_com = self.ik.data.subtree_com[self.robot.root_body, :2]
            pelvis[:2] += target - model_com
        self.pelvis = pelvis
        q = self.q_target.copy()
        for i, leg in enumerate(self.legs):
            q[list(leg.act)] = self.q_legs[i]
        self.q_target = q
        self.state = {
            "com": com,
            "feet": feet,
            "corr": corr,
            "clipped": bool(np.any(np.abs(prm.com_gain * (ref.com - com[:2])) > prm.com_clip)),
            "ik_error": err,
            "ik_ok": ok,
            "pelvis_target": pelvis,
        }
        return q

    def extras(self) -> dict:
        """Planned vs actual numbers for the Lab's curves (floats)."""
        ref, st = self.ref, self.state
        if ref is None:
            return {}
        phase = {"ds": 0.0, "ss": 1.0, "stand": 2.0}[ref.phase.kind]
        return {
            "com_plan_x": float(ref.com[0]),
            "com_plan_y": float(ref.com[1]),
            "zmp_plan_x": float(ref.zmp[0]),
            "zmp_plan_y": float(ref.zmp[1]),
            "com_x": float(st["com"][0]),
            "com_y": float(st["com"][1]),
            "com_corr_x": float(st["corr"][0]),
            "com_corr_y": float(st["corr"][1]),
            "phase": phase,
            "step": float(ref.phase.step),
            "ik_error_mm": 1000.0 * float(st["ik_error"]),
        }
