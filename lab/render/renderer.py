"""Offscreen rendering of a robot state through EGL, with quality presets and a following camera.

EGL is chosen in ``lab/__init__.py``, which runs before this module (and anything else here) imports
mujoco. A GL context belongs to the thread that made it: create the :class:`Renderer` in the thread
that renders.
"""

import copy
from dataclasses import dataclass

import mujoco
import numpy as np

from lab.render import overlays as overlay_draw
from lab.render.camera import ViewCamera, pick
from lab.robots.model import GRID_GROUP


@dataclass(frozen=True)
class RenderPreset:
    """What the GPU (or llvmpipe) is asked to do per frame."""

    shadows: bool
    reflections: bool
    msaa: int  # offscreen multisamples
    skybox: bool = True
    floor_texture: bool = True  # False: plain floor plus grid lines (geom group 4), no reflectance


PRESETS = {
    "fast": RenderPreset(shadows=False, reflections=False, msaa=0, skybox=False, floor_texture=False),
    "nice": RenderPreset(shadows=True, reflections=True, msaa=4),
}

FLOOR_RGBA = (0.15, 0.17, 0.20, 1.0)  # the floor's colour when a preset drops its texture

_GL_INFO: dict | None = None


def gl_info() -> dict:
    """The OpenGL renderer behind EGL: ``{"renderer", "vendor", "version", "software"}`` (probed once)."""
    global _GL_INFO
    if _GL_INFO is None:
        info = {"renderer": "unknown", "vendor": "unknown", "version": "unknown", "software": True}
        try:
            ctx = mujoco.GLContext(16, 16)
            ctx.make_current()
            from OpenGL import GL

            info = {
                "renderer": GL.glGetString(GL.GL_RENDERER).decode(),
                "vendor": GL.glGetString(GL.GL_VENDOR).decode(),
                "version": GL.glGetString(GL.GL_VERSION).decode(),
            }
            name = info["renderer"].lower()
            info["software"] = any(s in name for s in ("llvmpipe", "softpipe", "swrast", "software"))
            ctx.free()
        except Exception as exc:  # no EGL at all: report it, rendering will fail with a clear error later
            info["error"] = str(exc)
        _GL_INFO = info
    return dict(_GL_INFO)


def default_preset() -> str:
    """``fast`` on a software renderer (Mesa llvmpipe), ``nice`` on a GPU."""
    return "fast" if gl_info().get("software", True) else "nice"


def check_preset(name) -> str:
    from lab.errors import LabError

    if not isinstance(name, str) or name not in PRESETS:
        raise LabError(f"unknown render preset {name!r}", f"available: {', '.join(PRESETS)}")
    return name


REF_SPAN = 0.878  # [m] height span of the built-in robot's geometry at its zero pose


def robot_span(model, data) -> float:
    """Height span [m] of the robot's geometry (every geom not on the world body) at ``qpos0``, at least 5 cm."""
    mujoco.mj_forward(model, data)
    g = np.flatnonzero(model.geom_bodyid > 0)
    if not len(g):
        return REF_SPAN
    z, rb = data.geom_xpos[g, 2], model.geom_rbound[g]
    return max(float((z + rb).max() - (z - rb).min()), 0.05)


class Renderer:
    """Draws a robot from a qpos (nq,) with a camera that follows the root body.

    ``render(qpos, ghost_qpos)`` computes kinematics only (``mj_kinematics``), never dynamics; a
    ghost state is drawn translucent in the same scene (the Sim2Sim overlay).
    """

    def __init__(
        self, model: mujoco.MjModel, width: int = 640, height: int = 480, preset: str | None = None, track_body: int = 1
    ):
        self.width, self.height = int(width), int(height)
        self.model = copy.copy(model)  # own copy: the preset changes visual settings
        # an offscreen buffer of exactly the image size: llvmpipe clears every pixel of it each frame
        self.model.vis.global_.offwidth = self.width
        self.model.vis.global_.offheight = self.height
        self.data = mujoco.MjData(self.model)
        self.ghost = mujoco.MjData(self.model)
        self.track_body = track_body
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self.size = robot_span(self.model, self.data) / REF_SPAN  # frame a robot of any size as the built-in one
        self.camera.distance = 1.55 * self.size
        self.camera.azimuth = 145.0
        self.camera.elevation = -14.0
        self.camera.lookat[:] = [0, 0, 0.3 * self.size]
        self.option = mujoco.MjvOption()
        self.ghost_option = mujoco.MjvOption()
        self._lookat = None
        self._overlay_opt = False
        self._r = None
        self._matid = self.model.geom_matid.copy()
        self._rgba = self.model.geom_rgba.copy()
        self._reflectance = self.model.mat_reflectance.copy()
        self._floor = [g for g in range(self.model.ngeom) if self.model.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE]
        self.preset = None
        self.set_preset(preset or default_preset())

    def set_preset(self, name: str) -> None:
        name = check_preset(name)
        if name == self.preset:
            return
        p = PRESETS[name]
        self.model.vis.quality.offsamples = p.msaa
        m = self.model
        m.geom_matid[:] = self._matid
        m.geom_rgba[:] = self._rgba
        m.mat_reflectance[:] = self._reflectance
        if not p.floor_texture:
            m.geom_matid[self._floor] = -1
            m.geom_rgba[self._floor] = FLOOR_RGBA
            m.mat_reflectance[:] = 0.0
        self.option.geomgroup[GRID_GROUP] = 0 if p.floor_texture else 1
        if self._r is not None:
            self._r.close()
        self._r = mujoco.Renderer(self.model, self.height, self.width)
        self.preset = name
        self._flags = {
            mujoco.mjtRndFlag.mjRND_SHADOW: p.shadows,
            mujoco.mjtRndFlag.mjRND_REFLECTION: p.reflections,
            mujoco.mjtRndFlag.mjRND_SKYBOX: p.skybox,
        }

    def _follow(self, cam: ViewCamera | None) -> mujoco.MjvCamera:
        """The MuJoCo camera for this frame: the renderer's own following camera, or ``cam``'s."""
        if cam is None:
            target = self.data.xpos[self.track_body].copy()
            target[2] = max(0.15 * self.size, min(target[2] * 0.75, 0.6 * self.size))
            self._lookat = target if self._lookat is None else self._lookat + 0.15 * (target - self._lookat)
            self.camera.lookat[:] = self._lookat
            return self.camera
        return cam.update(self.data, self.size)

    def render(
        self,
        qpos: np.ndarray,
        ghost_qpos: np.ndarray | None = None,
        ghost_rgba=(0.35, 0.75, 1.0, 0.35),
        camera: ViewCamera | None = None,
        overlays: frozenset = frozenset(),
        overlay_state: dict | None = None,
    ) -> np.ndarray:
        """(height, width, 3) uint8 image of ``qpos`` (nq,) and, if given, a translucent ``ghost_qpos``.

        ``camera``: a :class:`~lab.render.camera.ViewCamera` (a client's own), else the renderer's
        following camera. ``overlays``: names of :data:`lab.render.overlays.OVERLAYS` to draw into the
        scene from ``overlay_state`` (see :func:`lab.runtime.overlay_state.capture`)."""
        m, d = self.model, self.data
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        if overlays:
            mujoco.mj_comPos(m, d)  # subtree centres of mass, for the CoM overlay
        cam = self._follow(camera)
        r = self._r
        opt = self.option
        if overlays or self._overlay_opt:
            overlay_draw.prepare(opt, overlays)
            self._overlay_opt = bool(overlays)
        r.update_scene(d, cam, opt)
        scn = r.scene
        for flag, on in self._flags.items():
            scn.flags[flag] = on
        if ghost_qpos is not None:
            g = self.ghost
            g.qpos[:] = ghost_qpos
            mujoco.mj_kinematics(m, g)
            n0 = scn.ngeom
            mujoco.mjv_addGeoms(m, g, self.ghost_option, mujoco.MjvPerturb(), mujoco.mjtCatBit.mjCAT_DYNAMIC, scn)
            for i in range(n0, scn.ngeom):
                scn.geoms[i].rgba[:] = ghost_rgba
        if overlays:
            overlay_draw.draw(scn, m, d, overlays, overlay_state or {}, self.size)
        return r.render()

    def select(self, camera: ViewCamera | None, x: float, y: float) -> tuple[int, np.ndarray] | None:
        """The robot body under the image point (``x``, ``y``) in [0, 1] (0, 0 top left) as drawn by the
        last :meth:`render` with ``camera``: ``(body id, world point (3,) [m])``, or None (floor, sky)."""
        cam = self.camera if camera is None else camera.mjv
        return pick(self.model, self.data, self._r.scene, self.option, cam, self.width / self.height, x, y)

    def close(self) -> None:
        if self._r is not None:
            self._r.close()
            self._r = None
