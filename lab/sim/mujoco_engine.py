"""MuJoCo behind the :class:`~lab.sim.engine.Engine` interface."""

import mujoco
import numpy as np

from lab.robots.model import Robot
from lab.sim.engine import Contact, Engine

_RESET = "MuJoCo reset its data by itself"
_BAD = [  # (warning, what it means, what MuJoCo did about it)
    (int(mujoco.mjtWarning.mjWARN_BADQACC), "bad acceleration (NaN, inf or huge qacc)", _RESET),
    (int(mujoco.mjtWarning.mjWARN_BADQVEL), "bad velocity (NaN, inf or huge qvel)", _RESET),
    (int(mujoco.mjtWarning.mjWARN_BADQPOS), "bad position (NaN, inf or huge qpos)", _RESET),
    (int(mujoco.mjtWarning.mjWARN_BADCTRL), "bad control (NaN or inf actuator input)", "MuJoCo zeroed the controls"),
]


class MujocoEngine(Engine):
    name = "mujoco"
    version = mujoco.__version__

    def __init__(self, robot: Robot):
        self.robot = robot
        self.model = robot.model
        self.data = mujoco.MjData(self.model)
        self.dt = float(self.model.opt.timestep)
        self._qadr, self._dadr = robot.qadr, robot.dadr
        self._act = np.arange(self.model.nu)  # actuators are in robot order by construction
        self._torso = robot.torso_body
        self._free_q = int(self.model.jnt_qposadr[self.model.body_jntadr[robot.root_body]])
        self._floor_geoms = {g for g in range(self.model.ngeom) if self.model.geom_bodyid[g] == 0}
        self._foot_side = robot.foot_sides
        self._geom_body = self.model.geom_bodyid.tolist()
        self._force6 = np.zeros(6)
        # views onto MjData's buffers, made once (each attribute access builds a new array object)
        d = self.data
        self._qpos, self._qvel, self._ctrl = d.qpos, d.qvel, d.ctrl
        self._q = _view(d.qpos, self._qadr)
        self._qd = _view(d.qvel, self._dadr)
        self._bias = _view(d.qfrc_bias, self._dadr)
        self._xfrc = d.xfrc_applied
        self.reset()

    def divergence(self):
        """MuJoCo's own verdict: a bad qpos/qvel/qacc/ctrl warning since the last reset (MuJoCo then resets
        its data or zeroes the controls by itself, so the state alone would not show it), else a
        non-finite state."""
        for w, what, done in _BAD:
            n = self.data.warning[w].number
            if n:
                return f"{what}; {done} ({n} warning{'s' if n > 1 else ''})"
        return super().divergence()

    def clear_divergence(self) -> None:
        for w, _, _ in _BAD:
            self.data.warning[w].number = 0

    def reset(self) -> None:
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = self.robot.init_qpos
        mujoco.mj_forward(self.model, self.data)

    def step(self, tau: np.ndarray) -> None:
        if tau is not self._ctrl:
            self._ctrl[:] = tau
        mujoco.mj_step(self.model, self.data)

    def torque_buffer(self) -> np.ndarray:
        """``data.ctrl`` itself: a controller that writes its torques here saves a copy per step."""
        return self._ctrl

    def joint_state(self):
        """Views (or copies, for scattered joints) of the actuated joints' q, qd: read them before the next step."""
        if self._q is not None:
            return self._q, self._qd
        return self._qpos[self._qadr], self._qvel[self._dadr]

    def base_pose(self):
        a = self._free_q
        return self.data.qpos[a : a + 3].copy(), self.data.qpos[a + 3 : a + 7].copy()

    def torso_quat(self):
        return self.data.xquat[self._torso].copy()

    def set_push(self, force):
        self._xfrc[self._torso, :] = 0.0
        if force is not None:
            self._xfrc[self._torso, :3] = force

    def set_body_force(self, body, force=None, point=None):
        qf = self.data.qfrc_applied
        qf[:] = 0.0
        if body is not None:
            f = np.asarray(force, dtype=float)
            mujoco.mj_applyFT(self.model, self.data, f, np.zeros(3), np.asarray(point, dtype=float), int(body), qf)

    def com(self):
        return self.data.subtree_com[self.robot.root_body].copy()

    def foot_contacts(self):
        m, d, out = self.model, self.data, []
        if d.ncon == 0:
            return out
        con = d.contact
        g1, g2, pos = con.geom1.tolist(), con.geom2.tolist(), con.pos
        body = self._geom_body
        for i in range(d.ncon):
            other = g2[i] if g1[i] in self._floor_geoms else g1[i] if g2[i] in self._floor_geoms else None
            if other is None:
                continue
            side = self._foot_side.get(body[other])
            if side is None:
                continue
            mujoco.mj_contactForce(m, d, i, self._force6)
            out.append(Contact(side, pos[i], float(abs(self._force6[0]))))
        return out

    def mj_qpos(self):
        return self.data.qpos.copy()

    def bias_torque(self):
        return self._bias.copy() if self._bias is not None else self.data.qfrc_bias[self._dadr]

    @property
    def time(self):
        return float(self.data.time)

    @property
    def total_mass(self):
        return float(self.model.body_mass.sum())


def _view(arr: np.ndarray, idx: np.ndarray):
    """A slice view of ``arr`` when ``idx`` is a contiguous ascending run, else None."""
    if len(idx) and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
        return arr[idx[0] : idx[0] + len(idx)]
    return None
