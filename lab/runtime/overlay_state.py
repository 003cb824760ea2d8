"""What the drawn overlays need of a running simulation, captured once per rendered frame.

:func:`capture` runs under the runner's lock (the render source takes it) and returns plain copies, so
the render thread draws from them after the lock is released (:func:`lab.render.overlays.draw`). It
reads only the :class:`~lab.sim.engine.Engine` interface, the mode's current command and, in ``walk``,
the feedback walker's own state, so MuJoCo and PyBullet give the same overlays.
"""

import math

import numpy as np

from lab.control.metrics import contact_support
from lab.walking.dcm import FeedbackWalker, rot
from lab.walking.lipm import G

SWING_POINTS = 16  # points of the swing ankle's planned path


def capture(runner, name: str) -> dict:
    """The overlay state of engine ``name`` of ``runner`` (a :class:`~lab.runtime.realtime.RealtimeRunner`;
    call with its lock held). Keys, each present only when there is something to draw:

    - ``weight`` [N]: the robot's weight (m g), the scale of force arrows;
    - ``contact_pos`` (k, 3) [m], ``contact_fz`` (k,) [N]: the foot contacts and their normal forces;
    - ``support`` (h, 2) [m]: the support polygon (counter-clockwise hull of the contacts);
    - ``cop`` (2,) [m]: the measured centre of pressure;
    - ``push`` ``{"body", "force" (3,) [N]}``: the mode's push while it acts (on the torso's centre of mass);
    - ``perturb`` ``{"body", "point" (3,) [m, world], "force" (3,) [N], "target" (3,) [m]}``: the mouse
      perturbation (``runner.perturb``: :meth:`lab.runtime.perturb.Perturbation.state`);
    - walk (feedback walker): ``zmp_cmd``, ``dcm`` (2,) [m]; ``footsteps`` (n, 4) planned and ``landed``
      (2, 4) sole centres ``[x, y, yaw, side]`` [m, rad] (side 0 left); ``sole_half`` (2,) [m]: a sole's
      half length and width; in single support ``swing_path`` (16, 3) [m], the swing ankle's planned path,
      and ``swing_side``.
    """
    rollout = runner.rollouts[name]
    engine = rollout.engine
    state: dict = {"weight": float(runner.robot.total_mass * G)}
    contacts = engine.foot_contacts()
    if contacts:
        state["contact_pos"] = np.array([c.pos for c in contacts], dtype=float)
        state["contact_fz"] = np.array([c.fz for c in contacts], dtype=float)
        cop, hull, _ = contact_support(contacts)
        state["support"] = np.array(hull, dtype=float)
        if cop is not None:
            state["cop"] = np.array(cop)
    push = rollout.command.push
    if push is not None:
        state["push"] = {"body": int(runner.robot.torso_body), "force": np.array(push, dtype=float)}
    pert = getattr(runner, "perturb", None)
    if pert is not None:
        state["perturb"] = {
            "body": int(pert.get("body_id", pert.get("body"))),
            "point": np.array(pert["point"], dtype=float),
            "force": np.array(pert["force"], dtype=float),
        }
        if pert.get("target") is not None:
            state["perturb"]["target"] = np.array(pert["target"], dtype=float)
    walker = getattr(rollout.mode, "controller", None)
    if isinstance(walker, FeedbackWalker) and walker.state:
        state.update(_walker(walker, rollout.command.extras or {}))
    return state


def _walker(w: FeedbackWalker, extras: dict) -> dict:
    """The feedback walker's ZMP command, DCM, footholds and swing path (see :func:`capture`)."""
    out = {}
    if "zmp_cmd_x" in extras:
        out["zmp_cmd"] = np.array([extras["zmp_cmd_x"], extras["zmp_cmd_y"]])
        out["dcm"] = np.array([extras["dcm_x"], extras["dcm_y"]])
    corners = np.array(w.geo.sole_corners, dtype=float)[:, :2]  # ankle frame
    lo, hi = corners.min(0), corners.max(0)
    centre = 0.5 * (lo + hi)
    out["sole_half"] = 0.5 * (hi - lo)

    def sole(x, y, yaw, side):
        c = np.array([x, y]) + rot(yaw) @ centre
        return [c[0], c[1], yaw, side]

    out["footsteps"] = np.array([sole(*f) for f in w.preview()], dtype=float).reshape(-1, 4)
    out["landed"] = np.array([sole(f.xy[0], f.xy[1], f.yaw, i) for i, f in enumerate(w.feet)], dtype=float)
    if w.phase == "ss" and w.swing_from is not None and w.target is not None:
        a, b = w.swing_from.xy, w.target.xy
        s = np.linspace(0.0, 1.0, SWING_POINTS)
        h = 0.5 * (1.0 - np.cos(math.pi * np.minimum(s / 0.9, 1.0)))  # as FeedbackWalker._foot_targets
        path = np.empty((SWING_POINTS, 3))
        path[:, :2] = a + h[:, None] * (b - a)
        path[:, 2] = w.ground + w.params.step_height * np.sin(math.pi * s)
        out["swing_path"] = path
        out["swing_side"] = 1 - w.support
    return out
