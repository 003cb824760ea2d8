"""Overlays drawn into the rendered scene (added MuJoCo geoms and visual flags, never a 2D layer).

:func:`prepare` sets the :class:`mujoco.MjvOption` flags before ``mjv_updateScene``; :func:`draw` adds
geoms to the scene after it, from the kinematics of the drawn qpos (``data``: ``mj_kinematics`` and
``mj_comPos`` done) and from a state captured under the simulation's lock
(:func:`lab.runtime.overlay_state.capture`; every key optional). Lengths are world metres of the
built-in robot, times ``size`` (the drawn robot's height relative to it).

| overlay | drawn | from |
|---|---|---|
| ``contacts`` | a sphere at each foot contact and an arrow up along its normal force, ``fz / (m g) * 0.6 m`` long (at most 0.45 m) | ``contact_pos``, ``contact_fz``, ``weight`` |
| ``com`` | a crosshair at the whole-body CoM, a dashed plumb line and a disc on the floor under it | ``data.subtree_com[0]`` |
| ``support`` | the support polygon on the floor, fenced by a low translucent wall (feet hide a flat outline) | ``support`` |
| ``cop`` | the measured CoP (a disc on the floor and a pin) and the walker's commanded ZMP (another colour) | ``cop``, ``zmp_cmd`` |
| ``dcm`` | the walker's DCM (capture point) as a disc and pin | ``dcm`` |
| ``push`` | the push force as an arrow out of the torso along it while it acts; a mouse perturbation as an arrow from the grabbed point along its pull, and its spring to the target | ``push``, ``perturb`` |
| ``footsteps`` | planned footholds (translucent, outlined), the last landed ones (solid), the swing ankle's path | ``footsteps``, ``landed``, ``swing_path`` |
| ``frames`` | every body's (joint's) frame as red/green/blue axes long enough to stand out of the links (added geoms: MuJoCo's own frames lie inside the links, and a translucent robot costs llvmpipe 5-10x per frame) | the drawn qpos |
"""

import math

import mujoco
import numpy as np

OVERLAYS = ("contacts", "com", "support", "cop", "dcm", "push", "footsteps", "frames")

# colours (r, g, b, a); each overlay its own hue, the feet left blue / right salmon
CONTACT_RGBA = (0.15, 0.95, 0.35, 1.0)
COM_RGBA = (1.0, 0.88, 0.1, 1.0)
SUPPORT_RGBA = (0.2, 0.85, 1.0, 1.0)
SUPPORT_WALL_RGBA = (0.2, 0.85, 1.0, 0.3)
COP_RGBA = (1.0, 0.2, 0.85, 1.0)
ZMP_RGBA = (0.95, 0.95, 0.95, 1.0)
DCM_RGBA = (1.0, 0.45, 0.0, 1.0)
PUSH_RGBA = (1.0, 0.12, 0.08, 1.0)
PERTURB_RGBA = (0.7, 0.35, 1.0, 1.0)
SIDE_RGB = ((0.3, 0.55, 1.0), (1.0, 0.5, 0.35))  # left, right

LIFT = 0.0015  # [m] floor geoms are drawn this far above z = 0 (above the grid lines)
CONTACT_SCALE = 0.6  # [m] arrow length per robot weight of normal force
CONTACT_MAX = 0.45  # [m] longest contact arrow (one contact carrying the robot)
PUSH_SCALE = 1.5  # [m] arrow length per robot weight of push force
ARROW_LEN = (0.06, 0.45)  # [m] shortest and longest push arrow
EMISSION = 0.45  # overlays stay bright whatever the lighting

_GEOM = mujoco.mjtGeom
_EYE = np.eye(3).ravel()


def prepare(option, on: frozenset) -> None:
    """Set ``option``'s visual flags for the overlays ``on`` (before ``mjv_updateScene``). Every overlay
    is an added geom today, so MuJoCo's own frame and transparency flags stay off."""
    option.frame = mujoco.mjtFrame.mjFRAME_NONE
    option.flags[mujoco.mjtVisFlag.mjVIS_TRANSPARENT] = False


def draw(scene, model, data, on: frozenset, state: dict, size: float) -> None:
    """Add the geoms of the overlays ``on`` to ``scene`` (at most up to ``scene.maxgeom``) from ``state``
    (see the module docstring; missing keys draw nothing) and ``data``'s kinematics."""
    s = float(size)
    if "support" in on and state.get("support") is not None:
        _support(scene, np.asarray(state["support"]), s)
    if "footsteps" in on:
        _footsteps(scene, state, s)
    if "com" in on:
        _com(scene, data.subtree_com[0], s)
    if "cop" in on:
        if state.get("cop") is not None:
            _pin(scene, state["cop"], COP_RGBA, 0.10 * s, 2 * LIFT, s)
        if state.get("zmp_cmd") is not None:
            _pin(scene, state["zmp_cmd"], ZMP_RGBA, 0.075 * s, 3 * LIFT, s)
    if "dcm" in on and state.get("dcm") is not None:
        _pin(scene, state["dcm"], DCM_RGBA, 0.125 * s, 4 * LIFT, s)
    if "contacts" in on and state.get("contact_pos") is not None:
        _contacts(scene, state["contact_pos"], state["contact_fz"], state.get("weight", 1.0), s)
    if "frames" in on:
        _frames(scene, data, s)
    if "push" in on:
        push = state.get("push")
        if push is not None:
            _push(scene, model, data, push["body"], np.asarray(push["force"], float), state.get("weight", 1.0), s)
        pert = state.get("perturb")
        if pert is not None:
            _perturb(scene, pert, state.get("weight", 1.0), s)


# --- the overlays ------------------------------------------------------------------------------------
def _contacts(scene, pos, fz, weight: float, s: float) -> None:
    for p, f in zip(np.asarray(pos, float), np.asarray(fz, float)):
        _add(scene, _GEOM.mjGEOM_SPHERE, (0.009 * s, 0, 0), (p[0], p[1], p[2] + LIFT), _EYE, CONTACT_RGBA)
        length = min(CONTACT_SCALE * f / max(weight, 1e-9), CONTACT_MAX) * s
        if length > 0.004 * s:
            _line(scene, _GEOM.mjGEOM_ARROW, 0.005 * s, p, (p[0], p[1], p[2] + length), CONTACT_RGBA)


FRAME_RGBA = ((1.0, 0.25, 0.25, 1.0), (0.3, 1.0, 0.3, 1.0), (0.35, 0.55, 1.0, 1.0))  # x, y, z
FRAME_LEN = 0.085  # [m] axis length: out of a link of the built-in robot (radius ~4 cm)


def _frames(scene, data, s: float) -> None:
    """Each body's frame (x red, y green, z blue) at its origin, where its joint turns."""
    for b in range(1, data.xpos.shape[0]):
        o, r = data.xpos[b], data.xmat[b].reshape(3, 3)
        for k in range(3):
            _line(scene, _GEOM.mjGEOM_CAPSULE, 0.0028 * s, o, o + FRAME_LEN * s * r[:, k], FRAME_RGBA[k])


def _com(scene, com, s: float) -> None:
    c = np.array(com, float)
    arm = 0.14 * s
    for axis in (0, 1):
        d = np.zeros(3)
        d[axis] = arm
        _line(scene, _GEOM.mjGEOM_CAPSULE, 0.0045 * s, c - d, c + d, COM_RGBA)
    _add(scene, _GEOM.mjGEOM_SPHERE, (0.016 * s, 0, 0), c, _EYE, COM_RGBA)
    dash, gap = 0.025 * s, 0.015 * s  # [m] dashed plumb line down to the floor
    z = c[2]
    while z > 2 * LIFT:
        z1 = max(z - dash, 2 * LIFT)
        _line(scene, _GEOM.mjGEOM_CAPSULE, 0.003 * s, (c[0], c[1], z), (c[0], c[1], z1), COM_RGBA)
        z = z1 - gap
    _disc(scene, c, 0.03 * s, LIFT, (*COM_RGBA[:3], 0.85))


def _support(scene, poly, s: float) -> None:
    """Outline of the polygon ``poly`` (k, 2) on the floor and a low translucent wall along it."""
    if len(poly) == 0:
        return
    if len(poly) == 1:
        _disc(scene, poly[0], 0.01 * s, LIFT, SUPPORT_RGBA)
        return
    h = 0.03 * s  # the wall rises above a foot's sole (the polygon's edges lie under the feet)
    edges = [(poly[i], poly[(i + 1) % len(poly)]) for i in range(len(poly) if len(poly) > 2 else 1)]
    for a, b in edges:
        a0, b0 = (a[0], a[1], LIFT), (b[0], b[1], LIFT)
        _line(scene, _GEOM.mjGEOM_CAPSULE, 0.0035 * s, a0, b0, SUPPORT_RGBA)
        _line(scene, _GEOM.mjGEOM_CAPSULE, 0.003 * s, (a[0], a[1], h), (b[0], b[1], h), SUPPORT_RGBA)
        d = np.subtract(b, a)
        half = 0.5 * math.hypot(d[0], d[1])
        if half > 1e-6:
            mid = (0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1]), 0.5 * h)
            _add(
                scene,
                _GEOM.mjGEOM_BOX,
                (half, 0.0005, 0.5 * h),
                mid,
                _yaw_mat(math.atan2(d[1], d[0])),
                SUPPORT_WALL_RGBA,
            )


def _pin(scene, xy, rgba, height: float, lift: float, s: float) -> None:
    """A point on the floor: a disc, and a pin with a ball on top that a foot standing on it does not hide."""
    x, y = float(xy[0]), float(xy[1])
    _disc(scene, (x, y), 0.025 * s, lift, rgba)
    _line(scene, _GEOM.mjGEOM_CAPSULE, 0.0025 * s, (x, y, lift), (x, y, height), rgba)
    _add(scene, _GEOM.mjGEOM_SPHERE, (0.012 * s, 0, 0), (x, y, height), _EYE, rgba)


def _push(scene, model, data, body: int, force, weight: float, s: float) -> None:
    """The push as an arrow along the force from where it leaves the body ``body`` (its centre of mass
    inside the body, as MuJoCo draws applied forces; the part inside would be hidden)."""
    n = float(np.linalg.norm(force))
    if n < 1e-9:
        return
    d = force / n
    p = data.xipos[body]
    tail = p + d * _extent(model, data, body, d, p)
    length = min(max(PUSH_SCALE * s * n / max(weight, 1e-9), ARROW_LEN[0] * s), ARROW_LEN[1] * s)
    _line(scene, _GEOM.mjGEOM_ARROW, 0.01 * s, tail, tail + d * length, PUSH_RGBA)


def _perturb(scene, pert: dict, weight: float, s: float) -> None:
    """A mouse perturbation: a ball at the grabbed point, an arrow along the pull, and a thin line to
    the dragged target with a small ball there (the spring, as ``simulate`` draws it)."""
    point, force = np.asarray(pert["point"], float), np.asarray(pert["force"], float)
    _add(scene, _GEOM.mjGEOM_SPHERE, (0.012 * s, 0, 0), point, _EYE, PERTURB_RGBA)
    target = pert.get("target")
    if target is not None:
        _line(scene, _GEOM.mjGEOM_CAPSULE, 0.002 * s, point, target, (*PERTURB_RGBA[:3], 0.6))
        _add(scene, _GEOM.mjGEOM_SPHERE, (0.008 * s, 0, 0), target, _EYE, (*PERTURB_RGBA[:3], 0.6))
    n = float(np.linalg.norm(force))
    if n < 1e-9:
        return
    length = min(max(PUSH_SCALE * s * n / max(weight, 1e-9), ARROW_LEN[0] * s), ARROW_LEN[1] * s)
    _line(scene, _GEOM.mjGEOM_ARROW, 0.009 * s, point, point + force / n * length, PERTURB_RGBA)


def _footsteps(scene, state: dict, s: float) -> None:
    half = state.get("sole_half")
    if half is None:
        return
    hx, hy = float(half[0]) + 0.004 * s, float(half[1]) + 0.004 * s  # a pad just wider than the sole
    for x, y, yaw, side in state.get("landed", ()):
        _add(scene, _GEOM.mjGEOM_BOX, (hx, hy, 0.0008), (x, y, LIFT), _yaw_mat(yaw), (*SIDE_RGB[int(side)], 0.9))
    for x, y, yaw, side in state.get("footsteps", ()):
        rgb = SIDE_RGB[int(side)]
        _add(scene, _GEOM.mjGEOM_BOX, (hx, hy, 0.0008), (x, y, 2 * LIFT), _yaw_mat(yaw), (*rgb, 0.3))
        c, sn = math.cos(yaw), math.sin(yaw)
        corners = [
            (x + c * u - sn * v, y + sn * u + c * v, 2 * LIFT) for u, v in ((hx, hy), (-hx, hy), (-hx, -hy), (hx, -hy))
        ]
        for i in range(4):
            _line(scene, _GEOM.mjGEOM_CAPSULE, 0.003 * s, corners[i], corners[(i + 1) % 4], (*rgb, 1.0))
    path = state.get("swing_path")
    if path is not None and len(path) > 1:
        rgb = SIDE_RGB[int(state.get("swing_side", 0))]
        for a, b in zip(path[:-1], path[1:]):
            _line(scene, _GEOM.mjGEOM_CAPSULE, 0.004 * s, a, b, (*rgb, 1.0))


# --- geoms -------------------------------------------------------------------------------------------
def _add(scene, gtype, size, pos, mat, rgba):
    """One decoration geom; None once the scene is full."""
    if scene.ngeom >= scene.maxgeom:
        return None
    g = scene.geoms[scene.ngeom]
    mujoco.mjv_initGeom(g, gtype, np.asarray(size, float), np.asarray(pos, float), mat, np.asarray(rgba, np.float32))
    _finish(g, rgba)
    scene.ngeom += 1
    return g


def _line(scene, gtype, width: float, a, b, rgba):
    """A capsule or arrow of radius ``width`` [m] from ``a`` to ``b`` (3,) [m]."""
    if scene.ngeom >= scene.maxgeom:
        return None
    g = scene.geoms[scene.ngeom]
    mujoco.mjv_initGeom(g, gtype, np.zeros(3), np.zeros(3), _EYE, np.asarray(rgba, np.float32))
    mujoco.mjv_connector(g, gtype, width, np.asarray(a, float), np.asarray(b, float))
    _finish(g, rgba)
    scene.ngeom += 1
    return g


def _finish(g, rgba) -> None:
    g.category = mujoco.mjtCatBit.mjCAT_DECOR
    g.objtype = mujoco.mjtObj.mjOBJ_UNKNOWN
    g.objid = -1
    g.segid = -1
    g.emission = EMISSION
    g.castshadow = 0
    g.transparent = rgba[3] < 1.0


def _disc(scene, xy, radius: float, lift: float, rgba) -> None:
    _add(scene, _GEOM.mjGEOM_CYLINDER, (radius, 0.0006, 0.0006), (xy[0], xy[1], lift), _EYE, rgba)


def _yaw_mat(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0])


def _extent(model, data, body: int, d, p) -> float:
    """How far the geoms of ``body`` reach from ``p`` (3,) along the unit ``d`` (3,) [m] (their bounding boxes)."""
    reach = 0.0
    for g in range(model.body_geomadr[body], model.body_geomadr[body] + model.body_geomnum[body]):
        R = data.geom_xmat[g].reshape(3, 3)
        centre = data.geom_xpos[g] + R @ model.geom_aabb[g, :3]
        reach = max(reach, float((centre - p) @ d + np.abs(R.T @ d) @ model.geom_aabb[g, 3:]))
    return reach
