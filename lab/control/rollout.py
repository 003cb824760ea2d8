"""One function ties a run together: engine + PD + mode -> trajectory.

:class:`Rollout` is the control tick that both the live session thread and the offline
:func:`simulate` (used by ``experiments/`` and tests) call, so a curve on a page and a figure in a
script come from the same code.
"""

from dataclasses import replace

import numpy as np

from lab.control.metrics import Metrics, measure
from lab.control.modes import Mode
from lab.control.pd import PDGains, pd_torque
from lab.control.stance import StanceFeedForward
from lab.sim.engine import Engine


class Rollout:
    """Engine + gains + mode, advanced one physics step per :meth:`step`."""

    def __init__(self, engine: Engine, gains: PDGains, mode: Mode):
        self.engine = engine
        self.gains = gains
        self.mode = mode
        self.mode_t0 = 0.0
        _bind(mode, engine)
        self.command = mode.command(0.0)
        buf = engine.torque_buffer()
        self._tau = buf if buf is not None and buf.shape == gains.kp.shape else np.zeros_like(gains.kp)
        self._tmp = np.zeros_like(gains.kp)
        self._target_ref = None  # the q_target array kp * q_target was computed for
        self._kp_target = np.zeros_like(gains.kp)
        self._push_on = False
        self.x0 = float(engine.base_pose()[0][0])
        self._stance = StanceFeedForward(mode.robot) if gains.gravity_ff else None

    def reset(self) -> None:
        self.engine.reset()
        self.engine.set_push(None)
        self._push_on = False
        self.mode_t0 = 0.0
        self.x0 = float(self.engine.base_pose()[0][0])
        self.command = self.mode.command(0.0)

    def set_gains(self, gains: PDGains) -> None:
        """New gains from the next tick on (the cached ``kp * q_target`` is recomputed)."""
        self.gains = gains
        self._target_ref = None
        if gains.gravity_ff and self._stance is None:
            self._stance = StanceFeedForward(self.mode.robot)

    def set_mode(self, mode: Mode) -> None:
        self.mode = mode
        self.mode_t0 = self.engine.time
        _bind(mode, self.engine)
        self.command = mode.command(0.0)

    def step(self) -> None:
        eng = self.engine
        cmd = self.command = self.mode.command(eng.time - self.mode_t0)
        push = cmd.push is not None
        if push or self._push_on:
            eng.set_push(cmd.push)
            self._push_on = push
        if cmd.enabled:
            q, qd = eng.joint_state()
            g = self.gains
            qt = cmd.q_target
            if qt is not self._target_ref:  # modes hand out the same array while the target holds
                np.multiply(g.kp, qt, out=self._kp_target)
                self._target_ref = qt
            ff = self._stance.torque(eng) if g.gravity_ff else None
            tau = pd_torque(g, q, qd, qt, ff, out=self._tau, tmp=self._tmp, kp_target=self._kp_target)
        else:
            tau = self._tau
            tau[:] = 0.0
        eng.step(tau)

    def metrics(self) -> Metrics:
        cmd = self.command
        return measure(
            self.engine, cmd.q_target, self.x0, pelvis_z_target=cmd.pelvis_z_target, push=cmd.push is not None
        )


def _bind(mode: Mode, engine: Engine) -> None:
    """Modes that need the real state (the closed-loop ``walk``) get the engine through ``bind``."""
    bind = getattr(mode, "bind", None)
    if bind is not None:
        bind(engine)


def simulate(rollout: Rollout, seconds: float, sample_dt: float = 0.01, on_sample=None) -> list[Metrics]:
    """Advance ``rollout`` by ``seconds`` [s], sampling metrics every ``sample_dt`` [s] (first sample at t0)."""
    dt = rollout.engine.dt
    n = int(round(seconds / dt))
    every = max(1, int(round(sample_dt / dt)))
    out = [rollout.metrics()]
    for i in range(1, n + 1):
        rollout.step()
        if i % every == 0:
            m = rollout.metrics()
            out.append(m)
            if on_sample is not None:
                on_sample(m)
    return out


def with_time(m: Metrics, t: float) -> Metrics:
    return replace(m, sim_time=t)
