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
- the URDF is read through a copy (:func:`prepare_urdf`): absolute mesh and texture paths, and a name
  for every ``<material>`` without one (PyBullet's parser refuses the whole file otherwise);
- a link without ``<inertial>`` gets 1 kg and a unit inertia in PyBullet, MuJoCo's from its geoms:
  PyBullet is given MuJoCo's mass, CoM and inertia for it (an ``<inertial>`` written into the copy), and
  any other link whose mass or inertia differs by more than 1 % is set to MuJoCo's with
  ``changeDynamics``; MuJoCo's model is the reference both engines share. :attr:`parity_before` holds
  the per-link comparison on PyBullet's raw values, :attr:`load_notes` one line per cause and correction;
- ``<mimic>`` joints (``robot.mimic``), which PyBullet ignores, are held by a ``JOINT_GEAR`` constraint;
- :meth:`bias_torque` is the gravity torque of the actuated joints from PyBullet's own floating-base
  inverse dynamics (``calculateInverseDynamics``, ``flags=1``, zero velocities and accelerations);
  PyBullet's velocity terms in that call disagree with MuJoCo's, so they are left out (see there).

One DIRECT-mode physics client per engine instance; :meth:`close` disconnects it.
"""

import tempfile
from importlib.metadata import version as _pkg_version
from pathlib import Path

import mujoco
import numpy as np
import pybullet as pb

from lab.errors import LabError
from lab.robots.model import Robot
from lab.sim.engine import Contact, Engine
from lab.sim.parity import PARITY_TOLERANCE, LinkInertia, mujoco_links, parity_rows
from lab.sim.pybullet_urdf import (
    NO_INERTIAL,
    bullet_messages,
    captured_output,
    check_urdf_for_pybullet,
    inertial_element,
    prepare_urdf,
)

MAX_JOINT_VELOCITY = 1000.0  # [rad/s], above Bullet's default clamp of 100
FLOOR_FRICTION = 1.0  # as MuJoCo's floor and the robot's collision geoms
FLOOR_HALF, FLOOR_HALF_Z = 50.0, 0.5  # [m] half sizes of the floor box
MIMIC_MAX_FORCE = 1000.0  # [N·m] the most a <mimic> gear constraint may apply
MIMIC_ERP = 0.2  # position error removed per step by a <mimic> gear constraint


def _wxyz(q_xyzw) -> np.ndarray:
    return np.array([q_xyzw[3], q_xyzw[0], q_xyzw[1], q_xyzw[2]])


def _xyzw(q_wxyz) -> list:
    return [float(q_wxyz[1]), float(q_wxyz[2]), float(q_wxyz[3]), float(q_wxyz[0])]


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
        self._body = self._load_robot(robot)
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
        self._correct_inertias()
        self._masses = np.array([pb.getDynamicsInfo(body, j, physicsClientId=cid)[0] for j in range(-1, n)])
        self._total_mass = float(self._masses.sum())
        self._mimic = self._add_mimic(joint_index)
        pos = {j: i for i, j in enumerate(movable)}
        self._bias_at = np.array([pos[j] for j in self._idx])  # actuated joints within the movable dofs
        self._tau = [0.0] * len(self._idx)
        self._push = None
        self._set_initial_state()
        self._state_id = pb.saveState(physicsClientId=cid)
        self._steps = 0
        self._q_cache = None

    def _load_robot(self, robot: Robot) -> int:
        """Load the URDF (through :func:`prepare_urdf`) and return the body; fill :attr:`load_notes`,
        :attr:`parity_before` (PyBullet's raw values) and :attr:`corrected` for what PyBullet was given
        of MuJoCo's inertias. A file PyBullet refuses raises a :class:`LabError` with PyBullet's message."""
        prep = prepare_urdf(robot.path)
        self.load_notes = list(prep.notes)
        mj = mujoco_links(robot)
        with tempfile.TemporaryDirectory() as tmp:
            body, messages = self._load_file(robot, prep.write(tmp, f"raw_{robot.path.name}"))
            raw = self.link_inertias(body)
            self.raw_total_mass = float(sum(li.mass for li in raw.values()))
            self.parity_before = parity_rows(mj, raw)
            for level, msg in messages:
                if not msg.startswith(NO_INERTIAL) and level in ("error", "warning"):  # those are said below
                    self.load_notes.append(f"PyBullet {level}: {msg}")
            fix = [n for n in prep.bare_links if n in mj and n in raw]
            for name in prep.bare_links:
                pb_kg = raw[name].mass if name in raw else 1.0
                if name in mj:
                    self.load_notes.append(
                        f"link {name} has no <inertial>: PyBullet gives it {pb_kg:g} kg "
                        f"(MuJoCo: {mj[name].mass:.4g} kg from its geoms); given MuJoCo's mass, CoM and inertia"
                    )
                else:
                    self.load_notes.append(
                        f"link {name} has no <inertial>: PyBullet gives it {pb_kg:g} kg; MuJoCo merged it into "
                        "its parent, so it is left as PyBullet has it"
                    )
            self.corrected = list(fix)
            if fix:  # load again with MuJoCo's inertial written into the links that have none
                for link in prep.root.findall("link"):
                    if link.get("name") in fix:
                        link.insert(0, inertial_element(mj[link.get("name")]))
                pb.removeBody(body, physicsClientId=self._cid)
                body, _ = self._load_file(robot, prep.write(tmp, robot.path.name))
        return body

    def _load_file(self, robot: Robot, urdf: Path) -> tuple[int, list]:
        flags = pb.URDF_USE_INERTIA_FROM_FILE | pb.URDF_MAINTAIN_LINK_ORDER
        with captured_output() as out:
            try:
                body = pb.loadURDF(str(urdf), [0, 0, 1], flags=flags, useFixedBase=False, physicsClientId=self._cid)
            except pb.error:
                body = -1
        messages = bullet_messages(out)
        if body < 0:
            errors = [m for level, m in messages if level == "error"] or [m for _, m in messages]
            reason = "; ".join(errors)[:300] or "its URDF parser rejected the file"
            raise LabError(
                f"PyBullet cannot load {robot.path.name}: {reason}",
                'check the URDF with `python -c "import pybullet as p; p.connect(p.DIRECT); p.loadURDF(PATH)"`',
            )
        return body, messages

    def link_inertias(self, body: int | None = None) -> dict:
        """Every link's :class:`~lab.sim.parity.LinkInertia` as PyBullet has it now, by link name
        (CoM in the link frame; inertia diagonal in PyBullet's principal frame)."""
        cid = self._cid
        body = self._body if body is None else body
        names = {-1: pb.getBodyInfo(body, physicsClientId=cid)[0].decode()}
        for j in range(pb.getNumJoints(body, physicsClientId=cid)):
            names[j] = pb.getJointInfo(body, j, physicsClientId=cid)[12].decode()
        out = {}
        for j, name in names.items():
            d = pb.getDynamicsInfo(body, j, physicsClientId=cid)
            out[name] = LinkInertia(float(d[0]), tuple(map(float, d[2])), tuple(map(float, d[3])), _wxyz(d[4]))
        return out

    def _correct_inertias(self) -> None:
        """Give every link whose mass or inertia still differs from MuJoCo's by more than 1 % MuJoCo's
        values (``changeDynamics``: mass and principal inertia; the inertia frame stays PyBullet's)."""
        mj = mujoco_links(self.robot)
        for row in parity_rows(mj, self.link_inertias()):
            if row.merged or max(row.rel_diff, row.inertia_rel_diff) <= PARITY_TOLERANCE:
                continue
            j = self._link_index[row.link]
            cur = np.array(pb.getDynamicsInfo(self._body, j, physicsClientId=self._cid)[2])
            diag = np.empty(3)
            diag[np.argsort(cur)] = np.sort(mj[row.link].diag)  # MuJoCo's values on PyBullet's axes, by rank
            pb.changeDynamics(
                self._body,
                j,
                mass=float(mj[row.link].mass),
                localInertiaDiagonal=diag.tolist(),
                physicsClientId=self._cid,
            )
            self.load_notes.append(
                f"link {row.link}: PyBullet mass {row.pybullet_mass:.4g} kg, inertia "
                f"{_fmt3(row.pybullet_inertia)} set to MuJoCo's {row.mujoco_mass:.4g} kg, {_fmt3(row.mujoco_inertia)}"
            )
            if row.link not in self.corrected:
                self.corrected.append(row.link)

    def _add_mimic(self, joint_index: dict) -> list:
        """One ``JOINT_GEAR`` constraint per ``<mimic>`` (``robot.mimic``: joint, leader, multiplier, offset):
        q_joint - multiplier * q_leader = offset. Returns (joint index, leader index, multiplier, offset)."""
        out = []
        for joint, leader, mult, offset in getattr(self.robot, "mimic", None) or []:
            if joint not in joint_index or leader not in joint_index:
                self.load_notes.append(f"mimic joint {joint} of {leader}: not found by name in PyBullet; not held")
                continue
            a, b = joint_index[joint], joint_index[leader]
            c = pb.createConstraint(
                self._body, a, self._body, b, pb.JOINT_GEAR, [0, 0, 1], [0, 0, 0], [0, 0, 0], physicsClientId=self._cid
            )
            pb.changeConstraint(
                c,
                gearRatio=-float(mult),
                maxForce=MIMIC_MAX_FORCE,
                erp=MIMIC_ERP,
                relativePositionTarget=float(offset),
                physicsClientId=self._cid,
            )
            out.append((a, b, float(mult), float(offset)))
        return out

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
        for a, b, mult, offset in self._mimic:  # a mimic joint starts where its constraint holds it
            q_lead = pb.getJointState(self._body, b, physicsClientId=self._cid)[0]
            pb.resetJointState(self._body, a, mult * q_lead + offset, 0.0, physicsClientId=self._cid)

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

    def bias_torque(self) -> np.ndarray:
        """Gravity torque (nu,) [N·m] of the actuated joints for feed-forward: PyBullet's floating-base
        inverse dynamics (``calculateInverseDynamics``, ``flags=1``: base position and quaternion before
        the joint positions) at the current pose with zero velocities and accelerations. It equals the
        gravity part of MuJoCo's ``qfrc_bias`` (to 1e-12 at the standing pose, tests/test_parity.py).

        Velocity terms are left out on purpose: with joint velocities given, this PyBullet call's
        Coriolis part disagrees with MuJoCo's (it reads the velocity list at the positions' offset of 7,
        one past the 6 base dofs, and still differs by up to 0.08 N·m on the built-in robot when every
        joint moves), so the feed-forward is gravity only, the part that matters near standing."""
        cid, body = self._cid, self._body
        pos, orn = pb.getBasePositionAndOrientation(body, physicsClientId=cid)
        q = [s[0] for s in pb.getJointStates(body, self._movable, physicsClientId=cid)]
        zeros = [0.0] * (6 + len(q))
        out = pb.calculateInverseDynamics(body, [*pos, *orn, *q], zeros, zeros, flags=1, physicsClientId=cid)
        return np.asarray(out[len(out) - len(q) :])[self._bias_at]

    @property
    def time(self):
        return self._steps * self.dt

    @property
    def total_mass(self):
        return self._total_mass

    def link_masses(self) -> dict:
        """Mass [kg] of each link as PyBullet sees it, by link name."""
        return {name: float(self._masses[i + 1]) for name, i in self._link_index.items()}


def _fmt3(v) -> str:
    return "(" + ", ".join(f"{x:.3g}" for x in v) + ")"
