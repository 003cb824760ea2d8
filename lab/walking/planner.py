"""Footstep state machine, ZMP reference and swing-foot trajectories.

Timeline: a lead-in (``lead_in``, 0.6 s) holds the ZMP under the standing CoM so that the
bounded CoM can start from rest (without it the plan asks for a jump in CoM velocity at t = 0);
an initial double support (``ds_first``, 0.40 s) moves the ZMP from under the
standing CoM to the first support foot; every step is a single support (``ss``, 0.55 s) in which
the other foot swings, followed by a double support (``ds``, 0.35 s) in which the ZMP moves to
the foot that just landed; after the last step the ZMP moves to the middle of both feet and the
robot stands for ``settle`` seconds.

- ZMP: held on the support foot's *balance point* (the sole centre, ``GaitGeometry.balance_x``
  ahead of the ankle) in single support, moved linearly between balance points in double support.
- Footholds: every step puts the swing ankle ``step_len`` ahead of the support ankle and one
  ankle spacing beside it; the last step closes the feet side by side. At the start of each
  single support :meth:`FootstepPlanner.replan` takes the *measured* support (and swing) foot,
  re-places the remaining footholds from it, and re-solves the bounded LIPM from the current
  planned CoM, so the plan follows where the robot really stands.
- Swing: cosine horizontal profile ``(1 - cos(pi s)) / 2``, sine lift ``step_height sin(pi s)``,
  foot kept flat, ``s`` in [0, 1] over the single support.

Positions are of the ankle frame; ``side`` is 0 left, 1 right.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lab.walking.geometry import GaitGeometry
from lab.walking.lipm import bounded_com


@dataclass(frozen=True)
class GaitParams:
    step_len: float = 0.04  # swing ankle lands this far ahead of the support ankle [m]
    step_height: float = 0.035  # swing apex above the floor [m]
    steps: int = 6  # number of steps, the last one closing the feet side by side
    lead_in: float = 0.6  # ZMP held under the standing CoM before the first double support [s]
    ds_first: float = 0.40  # initial double support [s]
    ss: float = 0.55  # single support per step [s]
    ds: float = 0.35  # double support after each step [s]
    settle: float = 1.0  # standing after the last step [s]
    dt: float = 0.01  # plan sampling = IK rate [s]
    first_swing: int = 1  # the right foot swings first

    @property
    def duration(self) -> float:
        """Whole plan [s]."""
        return self.lead_in + self.ds_first + self.steps * (self.ss + self.ds) + self.settle

    @property
    def planned_forward(self) -> float:
        """Forward displacement of the feet's midpoint over the plan [m]."""
        return max(self.steps - 1, 0) * self.step_len


class Phase(NamedTuple):
    kind: str  # "ds" | "ss" | "stand"
    t0: float  # [s]
    t1: float  # [s]
    step: int  # step index; -1 before the first
    support: int  # side holding the robot in "ss"; the side the ZMP moves to in "ds" (-1 = both)


class Reference(NamedTuple):
    """The plan at one instant: ``com``, ``com_vel``, ``zmp`` (2,) world [m, m/s]; ``feet`` (2, 3) ankle targets [m]."""

    com: np.ndarray
    com_vel: np.ndarray
    zmp: np.ndarray
    feet: np.ndarray
    phase: Phase
    swing_s: float  # progress of the swing in [0, 1], 0 outside single support


class FootstepPlanner:
    """The walk plan for ``geometry``, starting from ankles ``feet0`` (2, 3) and CoM ``com0`` (2,)."""

    def __init__(self, geometry: GaitGeometry, params: GaitParams, feet0, com0, z_c: float | None = None):
        self.geo = geometry
        self.p = params
        self.z_c = float(z_c if z_c is not None else geometry.com_height)
        self.ground = float(np.mean(np.asarray(feet0, float)[:, 2]))  # ankle height standing [m]
        self.phases = self._phases()
        n = int(round(params.duration / params.dt)) + 1
        self.t = np.arange(n) * params.dt
        self.start = np.asarray(feet0, float)[:, :2].copy()  # (2, 2) where each foot stands now
        self._base_step = 0  # the step ``start`` refers to
        self.swing_from = self.start.copy()  # (2, 2) where each foot's current swing began
        self.holds = self._footholds(0, self.start)  # (steps, 2) landing of each step
        self.zmp0 = np.asarray(com0, float)[:2].copy()
        self.zmp = self._zmp(self.t)
        self.com, self.vel, self.xi = bounded_com(self.zmp, params.dt, self.z_c, x0=self.zmp0)
        self.planned_com_travel = self.com[-1] - self.com[0]  # (2,) of the first plan, before any replan [m]
        self.replans = 0

    # --- timeline -------------------------------------------------------------------------
    def _phases(self) -> list:
        p = self.p
        first_support = 1 - p.first_swing
        out = [
            Phase("stand", 0.0, p.lead_in, -1, -1),
            Phase("ds", p.lead_in, p.lead_in + p.ds_first, -1, first_support if p.steps else -1),
        ]
        t = p.lead_in + p.ds_first
        for i in range(p.steps):
            support = self.support_of(i)
            out.append(Phase("ss", t, t + p.ss, i, support))
            t += p.ss
            out.append(Phase("ds", t, t + p.ds, i, 1 - support if i < p.steps - 1 else -1))
            t += p.ds
        out.append(Phase("stand", t, t + p.settle, p.steps, -1))
        return out

    def support_of(self, step: int) -> int:
        return (1 - self.p.first_swing) if step % 2 == 0 else self.p.first_swing

    def phase_at(self, t: float) -> Phase:
        for ph in self.phases:
            if t < ph.t1:
                return ph
        return self.phases[-1]

    # --- footholds and ZMP ------------------------------------------------------------------
    def _footholds(self, first: int, stand: np.ndarray) -> np.ndarray:
        """Landing (steps, 2) of steps ``first``.. given where each foot stands at step ``first``."""
        p, holds = self.p, getattr(self, "holds", np.zeros((self.p.steps, 2))).copy()
        feet = stand.copy()
        for i in range(first, p.steps):
            sup = self.support_of(i)
            swing = 1 - sup
            lateral = self.geo.ankle_spacing * (1.0 if swing == 0 else -1.0)
            ahead = p.step_len if i < p.steps - 1 else 0.0
            holds[i] = feet[sup] + (ahead, lateral)
            feet[swing] = holds[i]
        return holds

    def feet_at_step(self, step: int) -> np.ndarray:
        """Where both ankles stand (2, 2) during step ``step``'s single support (before it lands)."""
        feet = self.start.copy()
        for i in range(self._base_step, min(step, self.p.steps)):
            feet[1 - self.support_of(i)] = self.holds[i]
        return feet

    def _balance(self, xy: np.ndarray) -> np.ndarray:
        return xy + (self.geo.balance_x, 0.0)

    def _zmp(self, times: np.ndarray) -> np.ndarray:
        out = np.empty((len(times), 2))
        for k, t in enumerate(times):
            out[k] = self._zmp_at(t)
        return out

    def _zmp_at(self, t: float) -> np.ndarray:
        ph = self.phase_at(t)
        s = np.clip((t - ph.t0) / max(ph.t1 - ph.t0, 1e-9), 0.0, 1.0)
        if ph.kind == "ss":
            return self._balance(self.feet_at_step(ph.step)[ph.support])
        if ph.kind == "stand" and ph.step < 0:  # lead-in: under the standing CoM
            return self.zmp0
        if ph.kind == "stand" or (ph.kind == "ds" and ph.step == self.p.steps - 1):
            feet = self.feet_at_step(self.p.steps)
            mid = self._balance(feet.mean(0))
            if ph.kind == "stand":
                return mid
            a = self._balance(feet[self.support_of(ph.step)])
            return (1 - s) * a + s * mid
        if ph.step < 0:  # initial double support: from under the standing CoM to the first support foot
            a = self.zmp0
            b = self._balance(self.start[ph.support]) if ph.support >= 0 else a
            return (1 - s) * a + s * b
        feet = self.feet_at_step(ph.step + 1)
        a = self._balance(feet[self.support_of(ph.step)])
        b = self._balance(feet[ph.support])
        return (1 - s) * a + s * b

    # --- online update ----------------------------------------------------------------------
    def replan(self, t: float, feet_measured) -> None:
        """At the start of a single support: re-place the remaining footholds from the measured
        ankles ``feet_measured`` (2, 2+) and re-solve the CoM from the planned CoM at ``t``."""
        ph = self.phase_at(t)
        if ph.kind != "ss":
            return
        meas = np.asarray(feet_measured, float)[:, :2]
        stand = self.feet_at_step(ph.step)
        stand[ph.support] = meas[ph.support]
        self.swing_from = stand.copy()
        self.swing_from[1 - ph.support] = meas[1 - ph.support]
        self.holds = self._footholds(ph.step, stand)
        self.start, self._base_step = stand, ph.step
        k = min(int(round(t / self.p.dt)), len(self.t) - 1)
        self.zmp[k:] = self._zmp(self.t[k:])
        x, v, xi = bounded_com(self.zmp[k:], self.p.dt, self.z_c, x0=self.com[k])
        self.com[k:], self.vel[k:], self.xi[k:] = x, v, xi
        self.replans += 1

    # --- sampling ---------------------------------------------------------------------------
    def reference(self, t: float) -> Reference:
        """The plan at time ``t`` [s] (held at its last value after the end)."""
        p = self.p
        u = np.clip(t / p.dt, 0.0, len(self.t) - 1.0)
        k = min(int(u), len(self.t) - 2)
        f = u - k
        com = (1 - f) * self.com[k] + f * self.com[k + 1]
        vel = (1 - f) * self.vel[k] + f * self.vel[k + 1]
        zmp = (1 - f) * self.zmp[k] + f * self.zmp[k + 1]
        ph = self.phase_at(t)
        feet = np.empty((2, 3))
        feet[:, 2] = self.ground
        swing_s = 0.0
        if ph.kind == "ss":
            stand = self.feet_at_step(ph.step)
            feet[:, :2] = stand
            sw = 1 - ph.support
            swing_s = float(np.clip((t - ph.t0) / (ph.t1 - ph.t0), 0.0, 1.0))
            a = self.swing_from[sw] if ph.step == self._base_step else stand[sw]
            b = self.holds[ph.step]
            feet[sw, :2] = a + 0.5 * (1 - np.cos(np.pi * swing_s)) * (b - a)
            feet[sw, 2] = self.ground + self.p.step_height * np.sin(np.pi * swing_s)
        else:
            feet[:, :2] = self.feet_at_step(ph.step + 1 if ph.step >= 0 else 0)
        return Reference(com, vel, zmp, feet, ph, swing_s)
