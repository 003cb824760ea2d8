"""Controller parameters from the model itself, for a robot the lab was not written for.

The stated method (``gain_method = "auto"``; the built-in robot keeps its reference table, "names"):

- **feet**: per side, the body whose collision geometry reaches lowest at the zero pose (side from the
  name, else from the sign of y: x forward, y left), unless a sidecar names them (``foot_bodies``);
- **legs**: the actuated hinges on the path from the root to each foot; the **knee** is the middle
  pitch joint (axis along y) of a leg with three or more, bent :data:`KNEE_BEND` toward flexion;
- **sole**: the flat face of a foot's collision geometry (box, mesh, cylinder, capsule or spheres)
  whose normal points most nearly down, with its centre and four corners;
- **nominal pose** by inverse kinematics (Gauss-Newton on the floating base and the legs): soles
  flat on the floor, feet where they were, the whole-body CoM over the middle of the soles, the root
  upright, the knees near their bend;
- **spawn**: the exact lowest point of every collision geometry (mesh vertices, box corners,
  sphere, capsule and cylinder surfaces) 0.5 mm above the floor;
- **gains**: leg joints are the reference robot's (hip/knee 150/12, ankle 100/8 on 11.1 kg,
  0.4226 m), scaled by dynamic similarity (stiffness with m·h, damping with m·h^1.5); every other
  joint gets ``kp = max(OMEGA^2 M_jj, 3 m_sub g r_sub)`` (its own inertia about the axis and the
  gravity load of what it carries), ``kd`` critical for that inertia; then every joint is bounded
  for the explicit 1 ms PD step by the smallest inertia it can see, ``I = 1 / (M^-1)_jj``:
  ``kd dt / I <= 0.5`` and ``kp dt^2 / I <= 0.1`` (in stance the floor couples a leg joint to the whole
  body, which damps it further; what the bound cut is listed in ``gain_notes``). The cut is not moved
  into passive joint damping: MuJoCo would integrate it implicitly, PyBullet does not, and Sim2Sim
  needs one law in both. For a URDF the joints' passive damping is bounded to half the bound, since
  PyBullet integrates it explicitly too (a 0.05 N·m·s/rad damper on a 5 g·cm² arm link diverges in 30 ms),
  and ``kd`` gets what is left;
- **torque limits**: the model's (actuator ctrlrange x gear, actuator forcerange, joint
  actuatorfrcrange, URDF effort, the tightest that is given); where none is, ``kp x 0.4 rad`` but at
  least 2.5x the joint's standing load;
- **balance**: the standing gravity load with the feet on the floor (:func:`stance_torques`) as a
  feed-forward, recomputed from the measured state by the controller.
"""

from dataclasses import dataclass

import mujoco
import numpy as np

G = 9.81  # [m/s^2]
REF_MASS, REF_HEIGHT = 11.1, 0.4226  # the built-in robot the reference gains hold [kg], [m]
LEG_GAINS, ANKLE_GAINS = (150.0, 12.0), (100.0, 8.0)  # reference kp [N·m/rad], kd [N·m·s/rad]
OMEGA = 42.0  # [rad/s] stiffness of a non-leg joint on its own inertia (the reference shoulder's)
KNEE_BEND = 0.5  # [rad] knee flexion of the nominal pose
DAMPING_BOUND = 0.5  # largest kd dt / I of the explicit PD
STIFFNESS_BOUND = 0.1  # largest kp dt^2 / I of the explicit PD
SPAWN_GAP = 0.0005  # [m]


@dataclass(frozen=True)
class Sole:
    """A foot's flat face in its body frame: ``normal`` (3,) pointing down out of the foot, ``center`` (3,),
    ``corners`` (4, 3) [m]."""

    body: int
    normal: np.ndarray
    center: np.ndarray
    corners: np.ndarray


def geom_points(model, g) -> tuple[np.ndarray, np.ndarray]:
    """Points (k, 3) in the geom frame and the radius (k,) around each that bound geom ``g``'s surface."""
    t, s = int(model.geom_type[g]), model.geom_size[g]
    if t == mujoco.mjtGeom.mjGEOM_SPHERE:
        return np.zeros((1, 3)), np.array([s[0]])
    if t == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return np.array([[0, 0, -s[1]], [0, 0, s[1]]]), np.array([s[0], s[0]])
    if t == mujoco.mjtGeom.mjGEOM_CYLINDER:
        a = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        ring = np.stack([s[0] * np.cos(a), s[0] * np.sin(a), np.zeros_like(a)], 1)
        pts = np.concatenate([ring + [0, 0, -s[1]], ring + [0, 0, s[1]]])
        return pts, np.zeros(len(pts))
    if t == mujoco.mjtGeom.mjGEOM_MESH:
        i = int(model.geom_dataid[g])
        a, n = int(model.mesh_vertadr[i]), int(model.mesh_vertnum[i])
        pts = np.array(model.mesh_vert[a : a + n], dtype=float)
        return pts, np.zeros(len(pts))
    if t == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
        pts = np.concatenate([np.diag(s[:3]), -np.diag(s[:3])])
        return pts, np.zeros(6)
    # box, and anything else by its bounding box
    c, h = (model.geom_aabb[g, :3], model.geom_aabb[g, 3:]) if t != mujoco.mjtGeom.mjGEOM_BOX else (0, s[:3])
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * h + c
    return corners, np.zeros(8)


def _collides(model, g) -> bool:
    return bool(model.geom_contype[g] or model.geom_conaffinity[g]) and model.geom_bodyid[g] != 0


def lowest_point(model, data) -> float:
    """World z [m] of the lowest point of every collision geometry of the robot at ``data``'s pose."""
    low = min((geom_lowest(model, data, g) for g in range(model.ngeom) if _collides(model, g)), default=np.inf)
    return low if np.isfinite(low) else 0.0


def geom_lowest(model, data, g) -> float:
    """World z [m] of the lowest point of geom ``g`` at ``data``'s pose."""
    pts, rad = geom_points(model, g)
    return float((data.geom_xpos[g, 2] + pts @ data.geom_xmat[g].reshape(3, 3)[2] - rad).min())


def body_points(model, body) -> tuple[np.ndarray, np.ndarray, list]:
    """Collision points (k, 3) and radii (k,) of ``body`` in its own frame, and candidate sole normals."""
    pts, rads, normals = [], [], []
    for g in range(model.ngeom):
        if model.geom_bodyid[g] != body or not _collides(model, g):
            continue
        p, r = geom_points(model, g)
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, model.geom_quat[g])
        rot = rot.reshape(3, 3)
        pts.append(p @ rot.T + model.geom_pos[g])
        rads.append(r)
        if int(model.geom_type[g]) != mujoco.mjtGeom.mjGEOM_SPHERE:
            normals += [s * rot[:, k] for k in range(3) for s in (1, -1)]
    if not pts:
        return np.zeros((0, 3)), np.zeros(0), []
    pts, rads = np.concatenate(pts), np.concatenate(rads)
    spheres = pts[rads > 0]
    if len(spheres) >= 3:  # contact spheres: the plane through their centres
        c = spheres - spheres.mean(0)
        n = np.linalg.svd(c)[2][-1]
        normals += [n, -n]
    return pts, rads, normals


def find_sole(model, data, body) -> Sole | None:
    """The flat face of ``body``'s collision geometry that points most nearly down at ``data``'s pose."""
    pts, rads, normals = body_points(model, body)
    if not len(pts):
        return None
    rot = data.xmat[body].reshape(3, 3)
    if not normals:
        normals = [rot.T @ np.array([0, 0, -1.0])]
    n = max(normals, key=lambda v: float((rot @ v)[2] * -1))
    n = n / np.linalg.norm(n)
    s = pts @ n + rads
    tol = max(0.002, 0.02 * float(np.ptp(s)))
    on = s >= s.max() - tol
    sole = pts[on] + np.outer(rads[on], n)
    sole = sole - np.outer(sole @ n - s.max(), n)  # onto the plane
    center = sole.mean(0)
    # in-plane axes: the sole's longest extent first
    flat = sole - center
    flat = flat - np.outer(flat @ n, n)
    if len(flat) >= 2 and np.linalg.norm(flat) > 1e-9:
        u = np.linalg.svd(flat)[2][0]
    else:
        u = np.cross(n, [0, 1.0, 0]) if abs(n[1]) < 0.9 else np.cross(n, [1.0, 0, 0])
    u = u - n * (u @ n)
    u /= np.linalg.norm(u)
    v = np.cross(n, u)
    a, b = flat @ u, flat @ v
    corners = np.array([center + x * u + y * v for x in (a.min(), a.max()) for y in (b.min(), b.max())])
    return Sole(body, n, center, corners)


def find_feet(model, data, side_of) -> list[int]:
    """Per side, the body whose collision geometry reaches lowest (``data`` at the zero pose); [left, right]."""
    low = {}
    for g in range(model.ngeom):
        if not _collides(model, g):
            continue
        z = geom_lowest(model, data, g)
        b = int(model.geom_bodyid[g])
        low[b] = min(low.get(b, np.inf), z)
    best = {}
    for b, z in low.items():
        if b == 1:  # the root itself is not a foot
            continue
        side = side_of(model.body(b).name)
        if side is None:  # x forward, y left
            side = 0 if data.xpos[b, 1] > data.xpos[1, 1] else 1
        if side not in best or z < best[side][1] - 1e-6:
            best[side] = (b, z)
    return [best[s][0] for s in (0, 1) if s in best]


def chain_joints(model, body) -> list[int]:
    """Hinge joint ids on the path from the root to ``body``, root first."""
    out = []
    b = body
    while b > 0:
        a, n = int(model.body_jntadr[b]), int(model.body_jntnum[b])
        out[:0] = [j for j in range(a, a + n) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        b = int(model.body_parentid[b])
    return out


def pitch_joints(model, data, joints) -> list[int]:
    """Those of ``joints`` whose axis is within 30 deg of the world y axis at ``data``'s pose."""
    return [j for j in joints if abs(data.xaxis[j, 1]) > np.cos(np.radians(30))]


def _jac_point(model, data, body, point) -> np.ndarray:
    jp = np.zeros((3, model.nv))
    mujoco.mj_jac(model, data, jp, None, point, body)
    return jp


def stance_torques(model, data, soles, dadr) -> np.ndarray:
    """Joint torques (len(dadr),) [N·m] that hold ``data``'s pose against gravity with the soles on the floor.

    Static balance ``g(q) + k (q - q_spring) = S^T tau + sum J_i^T f_i`` (gravity and the joints' own springs): the smallest contact forces ``f_i`` at the soles'
    corners that carry the floating base's rows of ``g``, then ``tau`` from the actuated rows. Needs
    ``mj_kinematics`` and ``mj_comPos`` on ``data`` (velocities are taken as zero)."""
    qvel = data.qvel.copy()
    data.qvel[:] = 0
    g = np.zeros(model.nv)
    mujoco.mj_rne(model, data, 0, g)
    data.qvel[:] = qvel
    g += _spring_load(model, data)
    jac = []
    for sole in soles:
        rot = data.xmat[sole.body].reshape(3, 3)
        for c in sole.corners:
            jac.append(_jac_point(model, data, sole.body, data.xpos[sole.body] + rot @ c))
    if not jac:
        return g[dadr]
    jc = np.concatenate(jac)  # (3k, nv)
    f = np.linalg.lstsq(jc[:, :6].T, g[:6], rcond=None)[0]
    tau = g - jc.T @ f
    return tau[dadr]


def _spring_load(model, data) -> np.ndarray:
    """(nv,) what the joints' own springs (MJCF ``stiffness``, rest at ``springref``) pull with, to be held."""
    out = np.zeros(model.nv)
    for j in np.flatnonzero(model.jnt_stiffness):
        if model.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            a = int(model.jnt_qposadr[j])
            out[int(model.jnt_dofadr[j])] = model.jnt_stiffness[j] * (data.qpos[a] - model.qpos_spring[a])
    return out


def nominal_pose(model, qpos, soles, leg_qadr, leg_dadr, root=1, iters=40, root_z=None) -> np.ndarray:
    """``qpos`` (nq,) moved by Gauss-Newton (finite-difference Jacobian) on the floating base and the leg dofs
    until the soles are flat on z = 0 where they were in xy, the CoM is over the soles' middle, the root is
    upright, and the legs stay near their guess (and the root at height ``root_z`` [m] when given). Joint limits
    are respected."""
    d = mujoco.MjData(model)
    guess = qpos[leg_qadr].copy()
    dofs = np.concatenate([np.arange(6), leg_dadr])

    def place(q):
        d.qpos[:] = q
        mujoco.mj_kinematics(model, d)
        mujoco.mj_comPos(model, d)

    place(qpos)
    xy0 = [d.xpos[s.body] + d.xmat[s.body].reshape(3, 3) @ s.center for s in soles]
    xy0 = np.array(xy0)[:, :2]
    mid0 = xy0.mean(0)

    def residual(q):
        place(q)
        r = []
        for s, xy in zip(soles, xy0):
            rot = d.xmat[s.body].reshape(3, 3)
            n = rot @ s.normal
            r += list(1000 * np.cross(n, [0, 0, -1.0])[:2])
            c = d.xpos[s.body] + rot @ s.center
            r += [1000 * c[2], *(1000 * (c[:2] - xy))]
        r += list(1000 * (d.subtree_com[root][:2] - mid0))
        up = d.xmat[root].reshape(3, 3)[:, 2]
        r += list(1000 * np.cross(up, [0, 0, 1.0])[:2])
        r += list(10 * (q[leg_qadr] - guess))
        if root_z is not None:
            r.append(1000 * (d.xpos[root][2] - root_z))
        return np.array(r)

    lo, hi = model.jnt_range[:, 0], model.jnt_range[:, 1]
    jnt_of_q = {int(model.jnt_qposadr[j]): j for j in range(model.njnt)}

    def clip(q):
        for a in leg_qadr:
            j = jnt_of_q.get(int(a))
            if j is not None and model.jnt_limited[j]:
                q[a] = np.clip(q[a], lo[j], hi[j])
        return q

    q = qpos.copy()
    eps = 1e-6
    for _ in range(iters):
        r = residual(q)
        jac = np.zeros((len(r), len(dofs)))
        for k, dof in enumerate(dofs):
            dq = np.zeros(model.nv)
            dq[dof] = eps
            qk = q.copy()
            mujoco.mj_integratePos(model, qk, dq, 1.0)
            jac[:, k] = (residual(qk) - r) / eps
        step = np.linalg.solve(jac.T @ jac + 1e-3 * np.eye(len(dofs)), -jac.T @ r)
        dq = np.zeros(model.nv)
        dq[dofs] = step
        mujoco.mj_integratePos(model, q, dq, 1.0)
        q = clip(q)
        if np.abs(step).max() < 1e-7:
            break
    return q


def squat_table(model, qpos, soles, leg_qadr, leg_dadr, drops) -> np.ndarray:
    """``qpos`` (len(drops), nq) with the root lowered by each of ``drops`` [m] from ``qpos``, soles flat where they
    are and the CoM over them (:func:`nominal_pose`, each level starting from the one above)."""
    out, q = [], qpos.copy()
    z0 = float(qpos[2])
    for drop in drops:
        q = nominal_pose(model, q, soles, leg_qadr, leg_dadr, iters=25, root_z=z0 - drop) if drop else qpos.copy()
        out.append(q.copy())
    return np.array(out)


def inertias(model, qpos) -> tuple[np.ndarray, np.ndarray, mujoco.MjData]:
    """``M_jj`` (nv,) and ``1 / (M^-1)_jj`` (nv,) [kg·m^2] at ``qpos``, and the data it was computed on."""
    d = mujoco.MjData(model)
    d.qpos[:] = qpos
    mujoco.mj_forward(model, d)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, d, full)
    return np.diag(full).copy(), 1.0 / np.diag(np.linalg.inv(full)), d


def similarity(mass: float, height: float) -> tuple[float, float]:
    """Scale of stiffness (m·h) and of damping (m·h^1.5) of a robot of ``mass`` [kg] and standing ``height`` [m]
    relative to the reference robot (dynamic similarity: time scales with sqrt(h/g))."""
    m, h = mass / REF_MASS, height / REF_HEIGHT
    return m * h, m * h**1.5


@dataclass(frozen=True)
class Derived:
    """What :func:`derive` found, in actuator order where per joint."""

    feet: list  # foot body ids [left, right]
    soles: list  # Sole per foot
    legs: list  # per foot: actuator indices of its leg, root first
    knees: list  # actuator index of each leg's knee (or -1)
    init_qpos: np.ndarray  # (nq,) the nominal pose on the floor
    kp: np.ndarray
    kd: np.ndarray
    tau_limit: np.ndarray
    damping: np.ndarray  # (nv,) [N·m·s/rad] the model's passive joint damping bounded like kd (see derive)
    stance_tau: np.ndarray  # (nu,) standing load at the nominal pose [N·m]
    notes: list  # one line per joint whose gain the bound cut


def derive(
    model, jids, qadr, dadr, limits, fixed_nominal, side_of, foot_bodies=None, explicit_damping=False
) -> Derived:
    """Feet, soles, nominal pose, spawn, gains and limits of the robot ``model`` by the module's method.

    ``jids`` (nu,) actuated joint ids; ``limits`` (nu,) torque limits the model gives (nan: none);
    ``fixed_nominal`` {actuator index: angle} set by a sidecar (left out of the IK); ``foot_bodies``: the
    feet a sidecar named, else found from the geometry; ``explicit_damping``: the model's passive joint damping
    is integrated explicitly by an engine that runs it (PyBullet, for a URDF): bounded, and counted in the bound
    of ``kd``."""
    nu = len(jids)
    d = mujoco.MjData(model)
    qpos = model.qpos0.copy()
    qpos[0:3] = [0, 0, 1.0]
    qpos[3:7] = [1, 0, 0, 0]
    for i, a in fixed_nominal.items():
        qpos[qadr[i]] = a
    d.qpos[:] = qpos
    mujoco.mj_kinematics(model, d)
    feet = list(foot_bodies) if foot_bodies else find_feet(model, d, side_of)
    act_of_joint = {int(j): i for i, j in enumerate(jids)}
    legs, knees = [], []
    for f in feet:
        joints = [j for j in chain_joints(model, f) if j in act_of_joint]
        legs.append([act_of_joint[j] for j in joints])
        pitch = pitch_joints(model, d, joints)
        knee = pitch[-2] if len(pitch) >= 3 else -1
        knees.append(act_of_joint[knee] if knee >= 0 else -1)
        if knee >= 0 and act_of_joint[knee] not in fixed_nominal:
            qpos[int(model.jnt_qposadr[knee])] = _flexion(model, d, qpos, knee, f)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(model, d)
    soles = [s for s in (find_sole(model, d, f) for f in feet) if s is not None]
    leg_idx = sorted({i for leg in legs for i in leg} - set(fixed_nominal) - {k for k in knees if k >= 0})
    if len(soles) == len(feet) and feet:
        qpos = nominal_pose(model, qpos, soles, qadr[leg_idx], dadr[leg_idx])
    d.qpos[:] = qpos
    mujoco.mj_kinematics(model, d)
    qpos[2] -= lowest_point(model, d) - SPAWN_GAP
    d.qpos[:] = qpos
    mujoco.mj_forward(model, d)

    mjj, ifree, d = inertias(model, qpos)
    mass = float(model.body_subtreemass[1])
    height = float(qpos[2])
    sk, sd = similarity(mass, height)
    in_leg = {i for leg in legs for i in leg}
    ankle_z = 0.25 * height  # joints this low on a leg are its ankle
    kp, kd = np.zeros(nu), np.zeros(nu)
    for i, j in enumerate(jids):
        da, b = int(dadr[i]), int(model.jnt_bodyid[j])
        if i in in_leg:
            ref = ANKLE_GAINS if d.xanchor[j, 2] < ankle_z else LEG_GAINS
            kp[i], kd[i] = ref[0] * sk, ref[1] * sd
        else:
            axis, anchor = d.xaxis[j], d.xanchor[j]
            v = d.subtree_com[b] - anchor
            r = float(np.linalg.norm(v - axis * (v @ axis)))
            kp[i] = max(OMEGA**2 * mjj[da], 3.0 * float(model.body_subtreemass[b]) * G * r)
            kd[i] = 2.0 * np.sqrt(kp[i] * mjj[da])
    notes = []
    dt = float(model.opt.timestep)
    damping = model.dof_damping.copy()
    if explicit_damping:  # a URDF: PyBullet integrates passive damping explicitly; it gets half the bound
        for j in range(model.njnt):
            if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
                continue
            da = int(model.jnt_dofadr[j])
            bound = 0.5 * DAMPING_BOUND * float(ifree[da]) / dt
            if damping[da] > bound:
                notes.append(
                    f"{model.joint(j).name}: passive damping {damping[da]:.4g} -> {bound:.4g} "
                    f"(PyBullet integrates it explicitly, on {ifree[da]:.3g} kg·m²)"
                )
                damping[da] = bound
    for i, j in enumerate(jids):
        inertia = float(ifree[dadr[i]])
        passive = float(damping[dadr[i]]) if explicit_damping else 0.0
        kd_max, kp_max = max(DAMPING_BOUND * inertia / dt - passive, 0.0), STIFFNESS_BOUND * inertia / dt**2
        if kd[i] > kd_max or kp[i] > kp_max:
            notes.append(
                f"{model.joint(j).name}: kp {kp[i]:.4g} -> {min(kp[i], kp_max):.4g}, kd {kd[i]:.4g} -> "
                f"{min(kd[i], kd_max):.4g} (explicit 1 ms PD on {inertia:.3g} kg·m²)"
            )
            kp[i], kd[i] = min(kp[i], kp_max), min(kd[i], kd_max)
    for s in soles:
        c = s.corners
        area = float(np.linalg.norm(np.cross(c[1] - c[0], c[2] - c[0])))
        if area < 1e-4:
            notes.append(
                f"{model.body(s.body).name}: the foot touches the floor along a line or at a point "
                f"({area * 1e4:.2f} cm² of sole): no ankle torque can hold the robot upright on it"
            )
    stance = stance_torques(model, d, soles, dadr) if soles else np.zeros(nu)
    lim = np.array(limits, float)
    auto = np.maximum(0.4 * kp, 2.5 * np.abs(stance))
    lim = np.where(np.isfinite(lim) & (lim > 0), lim, auto)
    return Derived(feet, soles, legs, knees, qpos, kp, kd, lim, damping, stance, notes)


def _flexion(model, data, qpos, knee, foot) -> float:
    """The knee angle :data:`KNEE_BEND` in the direction that moves the foot backward (-x of the root)."""
    a = int(model.jnt_qposadr[knee])
    q = qpos.copy()
    q[a] = qpos[a] + 0.05
    data.qpos[:] = q
    mujoco.mj_kinematics(model, data)
    x_plus = float(data.xpos[foot, 0])
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    sign = 1.0 if x_plus < float(data.xpos[foot, 0]) else -1.0
    target = qpos[a] + sign * KNEE_BEND
    if model.jnt_limited[knee]:
        lo, hi = model.jnt_range[knee]
        target = float(np.clip(target, lo, hi))
    return target
