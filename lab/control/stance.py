"""Standing balance from the controller's own copy of the model: the gravity load with the soles on the floor
as a feed-forward, and damping of the whole body's lean about the ankles.

- **load**: what the joints must give to hold the measured pose with the soles on the floor
  (:func:`lab.robots.tuning.stance_torques`);
- **lean damping**: each ankle joint (a leg joint below a quarter of the standing height) adds
  ``D (r x c_dot) . a / |r_perp|^2``, the CoM's angular rate about the joint's axis ``a`` (``r``: from the
  joint to the CoM). The joint's own ``kd`` is bounded by the foot's small inertia (a foot in the air
  would chatter), so the body's rocking on its feet is damped by this term, which does not feed back the
  foot's own velocity. ``D`` makes the lean critically damped on the joint's stiffness:
  ``2 sqrt(kp m r^2 / legs) - kd``.

It reads only what an engine reports (base pose, joint angles), so MuJoCo and PyBullet get the same law;
recomputed every :data:`EVERY` ticks (10 ms; the CoM velocity is the difference of two updates).
"""

import mujoco
import numpy as np

from lab.robots.model import Robot
from lab.robots.tuning import stance_torques

EVERY = 10  # ticks between two updates
ANKLE_HEIGHT = 0.25  # a leg joint below this fraction of the standing height is an ankle


class StanceFeedForward:
    def __init__(self, robot: Robot):
        self.robot = robot
        m = robot.model
        self.data = d = mujoco.MjData(m)
        d.qpos[:] = robot.init_qpos
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        self._tau = np.zeros(len(robot.qadr))
        self._count = 0
        self._prev = None  # (time, com) of the last update
        legs = [i for leg in robot.legs for i in leg]
        jids = m.actuator_trnid[:, 0]
        com = d.subtree_com[robot.root_body]
        self.ankles, damping = [], []
        for i in legs:
            j = int(jids[i])
            if d.xanchor[j, 2] >= ANKLE_HEIGHT * robot.standing_height:
                continue
            r = com - d.xanchor[j]
            r_perp = r - d.xaxis[j] * (r @ d.xaxis[j])
            inertia = robot.total_mass * float(r_perp @ r_perp) / max(len(robot.legs), 1)
            self.ankles.append((i, j))
            damping.append(max(2.0 * np.sqrt(robot.kp[i] * inertia) - robot.kd[i], 0.0))
        self.damping = np.array(damping)
        # (mimic qpos address, leader qpos address, multiplier, offset), looked up once
        self._mimic = [
            (int(m.joint(j).qposadr[0]), int(m.joint(lead).qposadr[0]), mult, off) for j, lead, mult, off in robot.mimic
        ]

    def torque(self, engine) -> np.ndarray:
        """(nu,) [N·m] for ``engine``'s current state; the same array until the next update."""
        if self._count % EVERY == 0:
            self._update(engine)
        self._count += 1
        return self._tau

    def _update(self, engine) -> None:
        r, d, m = self.robot, self.data, self.robot.model
        pos, quat = engine.base_pose()
        q, _ = engine.joint_state()
        d.qpos[0:3], d.qpos[3:7] = pos, quat
        d.qpos[r.qadr] = q
        for a, lead, mult, offset in self._mimic:
            d.qpos[a] = offset + mult * d.qpos[lead]
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        tau = stance_torques(m, d, r.soles, r.dadr)
        com, t = d.subtree_com[r.root_body].copy(), engine.time
        prev, self._prev = self._prev, (t, com)
        if prev is not None and t > prev[0] and self.ankles:
            vel = (com - prev[1]) / (t - prev[0])
            for (i, j), gain in zip(self.ankles, self.damping):
                axis, arm = d.xaxis[j], com - d.xanchor[j]
                arm_perp = arm - axis * (arm @ axis)
                rate = float(np.cross(arm, vel) @ axis) / max(float(arm_perp @ arm_perp), 1e-6)
                tau[i] += gain * rate
        self._tau[:] = np.where(np.isfinite(tau), tau, 0.0)
