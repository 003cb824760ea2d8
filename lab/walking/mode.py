"""The ``walk`` mode: the feedback walker of :mod:`lab.walking.dcm` (``controller="feedback"``, the
default) or the joint-PD walk of :mod:`lab.walking.walk` (``controller="pd"``, the baseline that falls),
played live.

The feedback walker walks while it has a velocity command (:meth:`Walk.set_command`; selecting the mode
starts it forward at :data:`START_COMMAND`) and stands when the command is zero; the PD walk plays its
fixed plan and, with ``loop``, walks again from where it stands.

The mode needs the real state (measured feet and CoM), so the :class:`~lab.control.rollout.Rollout`
that runs it calls :meth:`Walk.bind` with its engine. Joint targets are recomputed at the IK
rate (100 Hz) and held in between; once the fall rule fires (pelvis below its floor or torso
tilt beyond 45 deg: :meth:`Robot.has_fallen`) the targets are frozen until the rollout resets; each
:class:`Command` carries, in ``extras``, what the controller reports for the Lab's curves: the feedback
walker's DCM, its reference, the commanded and planned ZMP, the support polygon and footholds
(:meth:`FeedbackWalker.extras`), or the PD walk's planned and actual CoM and planned ZMP. The registries that
offer it are built in :mod:`lab.runtime.modes`.
"""

import numpy as np

from lab.control.modes import Command, Mode
from lab.errors import LabError
from lab.sim.engine import quat_pitch_deg, quat_roll_deg
from lab.walking.dcm import FeedbackParams, FeedbackWalker
from lab.walking.walk import WalkController, WalkParams

CONTROLLERS = ("feedback", "pd")
START_COMMAND = (0.15, 0.0, 0.0)  # vx, vy [m/s], yaw rate [rad/s] when the feedback walk is selected


class Walk(Mode):
    name = "walk"
    description = "feedback walk: DCM tracking, ZMP feedback and step adjustment; velocity command (arrow keys)"

    def __init__(
        self,
        robot,
        walk: WalkParams | None = None,
        loop: bool = True,
        controller: str = "feedback",
        feedback: FeedbackParams | None = None,
        command=START_COMMAND,
        **kw,
    ):
        super().__init__(robot, **kw)
        if controller not in CONTROLLERS:
            raise LabError(f"unknown walk controller '{controller}'", f"available: {', '.join(CONTROLLERS)}")
        self.kind = controller
        if controller == "feedback":
            self.controller = FeedbackWalker(robot, feedback)
            self.controller.set_command(*command)
        else:
            self.controller = WalkController(robot, walk)
        self.loop = loop  # walk again from where it stands when a walk ends upright
        self.engine = None
        self._t0 = 0.0  # mode time the current walk started [s]
        self._next = 0.0  # mode time of the next IK tick [s]
        self._last = -1.0
        self._engine_t = 0.0  # engine time at the last call [s]; going back means a reset
        self._cmd = Command(self.q_nominal.copy())
        self.fallen = False  # the fall rule fired: targets are frozen until the rollout resets

    def set_command(self, vx: float, vy: float, yaw_rate: float) -> tuple:
        """New velocity command (feedback walker only); the bounded command now held."""
        if self.kind != "feedback":
            raise LabError(
                "the PD walk plays a fixed plan and takes no velocity command", 'select "walk" (feedback)', 409
            )
        return tuple(float(v) for v in self.controller.set_command(vx, vy, yaw_rate))

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
        dt = ctl.params.dt if self.kind == "feedback" else ctl.params.gait.dt
        if t + 1e-9 >= self._next and not self.fallen:
            if not self._upright():
                self.fallen = True
                self._cmd = Command(ctl.q_target, extras={**ctl.extras(), "fallen": 1.0})
                return self._cmd
            tw = t - self._t0
            if self.kind == "pd":
                if self.loop and tw >= ctl.duration and self._upright():
                    self._restart(t)
                    tw = 0.0
                tw = min(tw, ctl.duration)
            ctl.update(tw, self.engine)
            self._next = self._t0 + (np.floor(tw / dt + 1e-6) + 1) * dt
            self._cmd = Command(ctl.q_target, extras={**ctl.extras(), "fallen": 0.0})
        return self._cmd

    def _upright(self) -> bool:
        pos, _ = self.engine.base_pose()
        q = self.engine.torso_quat()
        return not self.robot.has_fallen(float(pos[2]), quat_pitch_deg(q), quat_roll_deg(q))


class WalkPD(Walk):
    """The joint-PD walk (the baseline): the planned CoM tracked by joint PD alone; it falls."""

    name = "walk_pd"
    description = "baseline walk: LIPM plan tracked by joint PD alone (falls sideways, ~2.6 s)"

    def __init__(self, robot, **kw):
        kw.pop("controller", None)
        super().__init__(robot, controller="pd", **kw)
