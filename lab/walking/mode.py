"""The ``walk`` mode: the closed-loop walk of :mod:`lab.walking.walk`, played live.

The mode needs the real state (measured feet and CoM), so the :class:`~lab.control.rollout.Rollout`
that runs it calls :meth:`Walk.bind` with its engine. Joint targets are recomputed at the IK
rate (100 Hz) and held in between; once the fall rule fires (pelvis below its floor or torso
tilt beyond 45 deg: :meth:`Robot.has_fallen`) the targets are frozen until the rollout resets; each
:class:`Command` carries, in ``extras``, the planned and actual CoM and the planned ZMP (floats, [m])
for the Lab's curves. The registries that offer it are built in :mod:`lab.runtime.modes`.
"""

import numpy as np

from lab.control.modes import Command, Mode
from lab.sim.engine import quat_pitch_deg, quat_roll_deg
from lab.walking.walk import WalkController, WalkParams


class Walk(Mode):
    name = "walk"
    description = "closed-loop walk: LIPM plan, foot IK at 100 Hz, joint PD (position PD alone falls)"

    def __init__(self, robot, walk: WalkParams | None = None, loop: bool = True, **kw):
        super().__init__(robot, **kw)
        self.controller = WalkController(robot, walk)
        self.loop = loop  # walk again from where it stands when a walk ends upright
        self.engine = None
        self._t0 = 0.0  # mode time the current walk started [s]
        self._next = 0.0  # mode time of the next IK tick [s]
        self._last = -1.0
        self._engine_t = 0.0  # engine time at the last call [s]; going back means a reset
        self._cmd = Command(self.q_nominal.copy())
        self.fallen = False  # the fall rule fired: targets are frozen until the rollout resets

    def bind(self, engine) -> None:
        """Give the mode the engine whose robot it walks (the Rollout does this)."""
        self.engine = engine
        self._last = -1.0

    def _restart(self, t: float) -> None:
        self.fallen = False
        self._t0 = t
        self._next = t
        self.controller.start(self.engine)

    def command(self, t):
        if self.engine is None:  # not bound yet: stand
            return self._cmd
        now = self.engine.time
        if t < self._last or self._last < 0 or now < self._engine_t:  # first call, or the rollout was reset
            self._restart(t)
        self._last, self._engine_t = t, now
        ctl = self.controller
        dt = ctl.params.gait.dt
        if t + 1e-9 >= self._next and not self.fallen:
            if not self._upright():
                self.fallen = True
                self._cmd = Command(ctl.q_target, extras={**ctl.extras(), "fallen": 1.0})
                return self._cmd
            tw = t - self._t0
            if self.loop and tw >= ctl.duration and self._upright():
                self._restart(t)
                tw = 0.0
            ctl.update(min(tw, ctl.duration), self.engine)
            self._next = self._t0 + (np.floor(tw / dt + 1e-6) + 1) * dt
            self._cmd = Command(ctl.q_target, extras={**ctl.extras(), "fallen": 0.0})
        return self._cmd

    def _upright(self) -> bool:
        pos, _ = self.engine.base_pose()
        q = self.engine.torso_quat()
        return not self.robot.has_fallen(float(pos[2]), quat_pitch_deg(q), quat_roll_deg(q))
