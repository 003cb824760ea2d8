"""PyBullet behind the :class:`~lab.sim.engine.Engine` interface, loading the same URDF as MuJoCo.

The traps of torque-controlled humanoids in PyBullet, and what this module does about each:

- every revolute joint starts with a velocity motor (``VELOCITY_CONTROL``) that fights the
  controller: it is set to target velocity 0 with a force equal to the MuJoCo joint's
  ``frictionloss`` (0 for the built-in robot, i.e. disabled), which is also how dry joint
  friction is modelled on the MuJoCo side;
- ``TORQUE_CONTROL`` forces act for one ``stepSimulation`` only, so they are re-sent every step;
- the timestep is the MuJoCo model's (0.001 s), with no sub-steps;
- joint damping is set from MuJoCo's ``dof_damping`` (both read the URDF ``<dynamics>``);
- ``maxJointVelocity`` is raised from Bullet's 100 rad/s clamp, link damping set to 0 (MuJoCo has none);
- inertias come from the URDF (``URDF_USE_INERTIA_FROM_FILE``), not from the collision shapes;
- PyBullet reports the base's *inertial* frame; :meth:`base_pose` converts it to the URDF root
  link frame, which is what MuJoCo's free joint holds;
- joints and links are matched to the MuJoCo model by name, never by index;
- the floor is a thick box (top at z = 0): mesh feet tip over on Bullet's plane;
- lateral friction is 1.0 on the feet and the floor, as on the MuJoCo side (Bullet multiplies the
  two coefficients, MuJoCo takes the larger); no rolling or spinning friction (MuJoCo condim 3);
- links without ``<inertial>`` get 1 kg in PyBullet: :attr:`total_mass` reports what PyBullet sees.

One DIRECT-mode physics client per engine instance; :meth:`close` disconnects it.
"""

import os
import re
import tempfile
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from importlib.metadata import version as _pkg_version
from pathlib import Path

import mujoco
import numpy as np
import pybullet as pb

from lab.errors import LabError
from lab.robots.model import Robot, _resolve_mesh
from lab.sim.engine import Contact, Engine

# Mesh formats PyBullet's URDF importer reads (collision and visual).
PYBULLET_MESH_EXTS = (".obj", ".stl", ".dae")
MAX_JOINT_VELOCITY = 1000.0  # [rad/s], above Bullet's default clamp of 100
FLOOR_FRICTION = 1.0  # as MuJoCo's floor and the robot's collision geoms
FLOOR_HALF, FLOOR_HALF_Z = 50.0, 0.5  # [m] half sizes of the floor box


def _wxyz(q_xyzw) -> np.ndarray:
    return np.array([q_xyzw[3], q_xyzw[0], q_xyzw[1], q_xyzw[2]])


def _xyzw(q_wxyz) -> list:
    return [float(q_wxyz[1]), float(q_wxyz[2]), float(q_wxyz[3]), float(q_wxyz[0])]


@contextmanager
def _captured_output():
    """Capture what C code writes to fd 1/2 (PyBullet's parser messages) into a list of lines."""
    lines: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield lines
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            lines.extend(tmp.read().decode(errors="replace").splitlines())


def check_urdf_for_pybullet(path: Path) -> None:
    """Raise :class:`LabError` naming PyBullet when the URDF uses something PyBullet cannot read."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise LabError(f"PyBullet cannot load {path.name}: not valid XML ({exc})", "Sim2Sim needs a URDF") from exc
    if root.tag != "robot":
        raise LabError(
            f"PyBullet cannot load {path.name}: it is not a URDF (root element <{root.tag}>)",
            "Sim2Sim needs a URDF that both MuJoCo and PyBullet read; MJCF works in the Lab only",
        )
    for mesh in root.iter("mesh"):
        fn = mesh.get("filename") or ""
        if Path(fn).suffix.lower() not in PYBULLET_MESH_EXTS:
            raise LabError(
                f"PyBullet cannot load {path.name}: mesh '{fn}' is in a format PyBullet does not read",
                f"PyBullet reads {', '.join(PYBULLET_MESH_EXTS)} meshes; convert the mesh (e.g. to .stl or .obj)",
            )


def _urdf_for_pybullet(path: Path, tmpdir: str) -> Path:
    """``path`` itself, or a copy with absolute mesh paths when it uses ``package://`` URIs."""
    text = path.read_text(errors="replace")
    if "package://" not in text:
        return path
    root = ET.parse(path).getroot()
    for mesh in root.iter("mesh"):
        fn = mesh.get("filename")
        if fn:
            mesh.set("filename", str(_resolve_mesh(fn, path.parent)))
    out = Path(tmpdir) / path.name
    out.write_text(ET.tostring(root, encoding="unicode"))
    return out


class PybulletEngine(Engine):
    """The robot of ``robot`` (its URDF file ``robot.path``) in a PyBullet DIRECT client."""

    name = "pybullet"
    version = _pkg_version("pybullet")

    def __init__(self, robot: Robot):
        if robot.kind != "urdf":
            raise LabError(
                f"PyBullet cannot load {robot.path.name}: it is an MJCF model",
                "Sim2Sim needs a URDF that both MuJoCo and PyBullet read",
            )
        check_urdf_for_pybullet(robot.path)
        self.robot = robot
        m = robot.model
        self.dt = float(m.opt.timestep)
        self._cid = pb.connect(pb.DIRECT)
        self._state_id = None
        try:
            self._setup(robot, m)
        except Exception:
            self.close()
            raise

    # ---- construction -------------------------------------------------------------------------
    def _setup(self, robot: Robot, m: mujoco.MjModel) -> None:
        cid = self._cid
        pb.resetSimulation(physicsClientId=cid)
        pb.setGravity(*map(float, m.opt.gravity), physicsClientId=cid)
        pb.setPhysicsEngineParameter(
            fixedTimeStep=self.dt, numSubSteps=0, deterministicOverlappingPairs=1, physicsClientId=cid
        )
        # The floor is a thick box with its top face at z = 0, not a GEOM_PLANE: Bullet's plane-convex
        # collision finds one or two points per step for mesh feet (they tip over); box-convex fills
        # the whole manifold, as MuJoCo's plane-mesh collision does.
        floor = pb.createCollisionShape(
            pb.GEOM_BOX, halfExtents=[FLOOR_HALF, FLOOR_HALF, FLOOR_HALF_Z], physicsClientId=cid
        )
        self._floor = pb.createMultiBody(0, floor, basePosition=[0, 0, -FLOOR_HALF_Z], physicsClientId=cid)
        pb.changeDynamics(
            self._floor,
            -1,
            lateralFriction=FLOOR_FRICTION,
            rollingFriction=0.0,
            spinningFriction=0.0,
            restitution=0.0,
            physicsClientId=cid,
        )
        flags = pb.URDF_USE_INERTIA_FROM_FILE | pb.URDF_MAINTAIN_LINK_ORDER
        with tempfile.TemporaryDirectory() as tmp:
            urdf = _urdf_for_pybullet(robot.path, tmp)
            with _captured_output() as out:
                try:
                    self._body = pb.loadURDF(str(urdf), [0, 0, 1], flags=flags, useFixedBase=False, physicsClientId=cid)
                except pb.error:
                    self._body = -1
        if self._body < 0:
            reason = next((ln.strip() for ln in out if re.search(r"error|cannot|fail|invalid", ln, re.I)), "")
            raise LabError(
                f"PyBullet cannot load {robot.path.name}: {reason or 'its URDF parser rejected the file'}",
                'check the URDF with `python -c "import pybullet as p; p.connect(p.DIRECT); p.loadURDF(PATH)"`',
            )
        body = self._body
        n = pb.getNumJoints(body, physicsClientId=cid)
        infos = [pb.getJointInfo(body, j, physicsClientId=cid) for j in range(n)]
        joint_index = {info[1].decode(): j for j, info in enumerate(infos)}
        self._link_index = {pb.getBodyInfo(body, physicsClientId=cid)[0].decode(): -1}
        self._link_index.update({info[12].decode(): j for j, info in enumerate(infos)})
        self._n_links = n

        missing = [j for j in robot.joint_names if j not in joint_index]
        if missing:
            raise LabError(
                f"PyBullet cannot load {robot.path.name}: joint(s) {', '.join(missing)} not found by name",
                "the URDF's joint names must be the same for both engines",
            )
        self._idx = [joint_index[j] for j in robot.joint_names]  # actuator order -> PyBullet joint
        # every MuJoCo hinge/slide joint that PyBullet also has: (pybullet index, qpos address)
        self._mj_map = []
        for j in range(m.njnt):
            if int(m.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
                name = m.joint(j).name
                if name in joint_index:
                    self._mj_map.append((joint_index[name], int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])))
        root_free = int(m.body_jntadr[robot.root_body])
        self._free_q = int(m.jnt_qposadr[root_free])
        self._torso = self._link_for_body(robot.torso_body)
        self._foot_side = {  # the robot's foot-side rule, on PyBullet link indices
            self._link_index[m.body(c).name]: side
            for c, side in robot.foot_sides.items()
            if m.body(c).name in self._link_index
        }

        # dynamics matched to the MuJoCo side
        pb.changeDynamics(
            body,
            -1,
            linearDamping=0.0,
            angularDamping=0.0,
            lateralFriction=FLOOR_FRICTION,
            rollingFriction=0.0,
            spinningFriction=0.0,
            restitution=0.0,
            physicsClientId=cid,
        )
        for j in range(n):
            pb.changeDynamics(
                body,
                j,
                linearDamping=0.0,
                angularDamping=0.0,
                lateralFriction=FLOOR_FRICTION,
                rollingFriction=0.0,
                spinningFriction=0.0,
                restitution=0.0,
                maxJointVelocity=MAX_JOINT_VELOCITY,
                physicsClientId=cid,
            )
        self._friction = np.zeros(n)
        for j_pb, _, dadr in self._mj_map:
            pb.changeDynamics(body, j_pb, jointDamping=float(m.dof_damping[dadr]), physicsClientId=cid)
            self._friction[j_pb] = float(m.dof_frictionloss[dadr])
        movable = [j for j in range(n) if infos[j][2] != pb.JOINT_FIXED]
        self._movable = movable
        self._disable_velocity_motors()

        d = self._dyn_base = pb.getDynamicsInfo(body, -1, physicsClientId=cid)
        self._base_inertial = (list(d[3]), list(d[4]))  # inertial frame in the root link frame
        self._base_inertial_inv = pb.invertTransform(*self._base_inertial, physicsClientId=cid)
        self._masses = np.array([pb.getDynamicsInfo(body, j, physicsClientId=cid)[0] for j in range(-1, n)])
        self._total_mass = float(self._masses.sum())
        self._tau = [0.0] * len(self._idx)
        self._push = None
        self._set_initial_state()
        self._state_id = pb.saveState(physicsClientId=cid)
        self._steps = 0
        self._q_cache = None

    def _link_for_body(self, body_id: int) -> int:
        name = self.robot.model.body(body_id).name
        if name not in self._link_index:
            raise LabError(
                f"PyBullet cannot load {self.robot.path.name}: link '{name}' not found by name",
                "the URDF's link names must be the same for both engines",
            )
        return self._link_index[name]

    def _disable_velocity_motors(self) -> None:
        """Default velocity motors off (force 0), or holding the joint's dry friction [N·m] where it has one."""
        idx = self._movable
        pb.setJointMotorControlArray(
            self._body,
            idx,
            pb.VELOCITY_CONTROL,
            targetVelocities=[0.0] * len(idx),
            forces=[float(self._friction[j]) for j in idx],
            physicsClientId=self._cid,
        )

    def _set_initial_state(self) -> None:
        q0 = self.robot.init_qpos
        a = self._free_q
        self._set_root(q0[a : a + 3], q0[a + 3 : a + 7])
        pb.resetBaseVelocity(self._body, [0, 0, 0], [0, 0, 0], physicsClientId=self._cid)
        for j_pb, qadr, _ in self._mj_map:
            pb.resetJointState(self._body, j_pb, float(q0[qadr]), 0.0, physicsClientId=self._cid)

    def _set_root(self, pos, quat_wxyz) -> None:
        """Place the root link frame; PyBullet wants the base inertial frame."""
        cpos, corn = pb.multiplyTransforms(
            list(map(float, pos)), _xyzw(quat_wxyz), *self._base_inertial, physicsClientId=self._cid
        )
        pb.resetBasePositionAndOrientation(self._body, cpos, corn, physicsClientId=self._cid)

    # ---- Engine interface ---------------------------------------------------------------------
    def close(self) -> None:
        if self._cid is not None and self._cid >= 0:
            try:
                pb.disconnect(physicsClientId=self._cid)
            except pb.error:
                pass
        self._cid = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def reset(self) -> None:
        pb.restoreState(self._state_id, physicsClientId=self._cid)
        self._disable_velocity_motors()
        self._push = None
        self._steps = 0
        self._q_cache = None

    def step(self, tau: np.ndarray) -> None:
        cid, body = self._cid, self._body
        if self._push is not None:
            pos = self._link_com(self._torso)
            pb.applyExternalForce(body, self._torso, self._push, pos, pb.WORLD_FRAME, physicsClientId=cid)
        pb.setJointMotorControlArray(
            body, self._idx, pb.TORQUE_CONTROL, forces=np.asarray(tau, dtype=float).tolist(), physicsClientId=cid
        )
        pb.stepSimulation(physicsClientId=cid)
        self._steps += 1
        self._q_cache = None

    def joint_state(self):
        if self._q_cache is None:
            states = pb.getJointStates(self._body, self._idx, physicsClientId=self._cid)
            self._q_cache = (np.array([s[0] for s in states]), np.array([s[1] for s in states]))
        return self._q_cache

    def base_pose(self):
        cpos, corn = pb.getBasePositionAndOrientation(self._body, physicsClientId=self._cid)
        pos, orn = pb.multiplyTransforms(cpos, corn, *self._base_inertial_inv, physicsClientId=self._cid)
        return np.array(pos), _wxyz(orn)

    def torso_quat(self):
        if self._torso < 0:
            return self.base_pose()[1]
        s = pb.getLinkState(self._body, self._torso, computeForwardKinematics=True, physicsClientId=self._cid)
        return _wxyz(s[5])  # URDF link frame, as MuJoCo's xquat

    def _link_com(self, link: int) -> list:
        if link < 0:
            return list(pb.getBasePositionAndOrientation(self._body, physicsClientId=self._cid)[0])
        return list(pb.getLinkState(self._body, link, computeForwardKinematics=True, physicsClientId=self._cid)[0])

    def set_push(self, force):
        self._push = None if force is None else [float(f) for f in force]

    def com(self):
        base = pb.getBasePositionAndOrientation(self._body, physicsClientId=self._cid)[0]
        links = pb.getLinkStates(
            self._body, list(range(self._n_links)), computeForwardKinematics=True, physicsClientId=self._cid
        )
        pos = np.array([base] + [s[0] for s in links])
        return (self._masses[:, None] * pos).sum(0) / self._total_mass

    def foot_contacts(self):
        if self._steps == 0:  # PyBullet keeps the last step's contacts across restoreState: none yet
            return []
        out = []
        for c in pb.getContactPoints(self._body, self._floor, physicsClientId=self._cid):
            side = self._foot_side.get(c[3])
            if side is None or (c[9] <= 0.0 and c[8] > 0.0):  # not a foot, or in the margin with no force
                continue
            out.append(Contact(side, np.array(c[6]), float(c[9])))
        return out

    def mj_qpos(self):
        qpos = self.robot.model.qpos0.copy()
        pos, quat = self.base_pose()
        a = self._free_q
        qpos[a : a + 3], qpos[a + 3 : a + 7] = pos, quat
        states = pb.getJointStates(self._body, [j for j, _, _ in self._mj_map], physicsClientId=self._cid)
        for (_, qadr, _), s in zip(self._mj_map, states):
            qpos[qadr] = s[0]
        return qpos

    @property
    def time(self):
        return self._steps * self.dt

    @property
    def total_mass(self):
        return self._total_mass

    def link_masses(self) -> dict:
        """Mass [kg] of each link as PyBullet sees it, by link name."""
        return {name: float(self._masses[i + 1]) for name, i in self._link_index.items()}
