"""A viewer's own camera: orbit, pan, zoom, follow a body, pick the body under the cursor.

A :class:`CameraSpec` is what a client asked for (immutable); its :meth:`~CameraSpec.key` is what
lets clients with the same camera share renders (a following camera's look-at point is the body's,
so it is not part of the key). A :class:`ViewCamera` is the live camera of one stream channel: the
spec plus the smoothing state of a following camera, turned into a ``mujoco.MjvCamera`` per frame.

Angles are MuJoCo's free-camera angles: ``azimuth`` [deg] about +z, ``elevation`` [deg] (negative
looks down), ``distance`` [m] from the look-at point.
"""

import dataclasses
import math
from dataclasses import dataclass

import mujoco
import numpy as np

from lab.errors import LabError

DEFAULT_AZIMUTH, DEFAULT_ELEVATION, DEFAULT_DISTANCE = 145.0, -14.0, 1.55  # distance for the built-in robot [m]
ELEVATION_RANGE = (-89.0, 89.0)  # [deg]
DISTANCE_RANGE = (0.1, 25.0)  # times the robot's size
LOOKAT_LIMIT = 1000.0  # [m] |lookat| beyond this is refused
MAX_DELTA = 10.0  # |orbit|, |pan| [fractions of the view], |zoom| [log distance] per message
ORBIT_DEG = (180.0, 90.0)  # [deg] per view width / height dragged
FOLLOW_GAIN = 0.15  # share of the way to the followed body per frame
CAMERA_HINT = (
    '{"type": "camera", "orbit": [dx, dy]} | "pan": [dx, dy] | "zoom": z | "follow": true|false | "reset": true'
    ' | absolute "azimuth", "elevation", "distance", "lookat": [x, y, z]'
)


@dataclass(frozen=True)
class CameraSpec:
    azimuth: float
    elevation: float
    distance: float
    lookat: tuple  # (3,) [m]; where a following camera looks is the body's, not this
    follow: bool = True
    body: int = 1  # the body followed

    @classmethod
    def default(cls, size: float, body: int = 1) -> "CameraSpec":
        """The Lab's following camera, framing a robot of relative ``size`` as the built-in one."""
        return cls(DEFAULT_AZIMUTH, DEFAULT_ELEVATION, DEFAULT_DISTANCE * size, (0.0, 0.0, 0.3 * size), True, body)

    def key(self) -> tuple:
        """Equal for cameras that draw the same picture (angles to 0.1 deg, lengths to 1 mm)."""
        look = () if self.follow else tuple(round(v, 3) for v in self.lookat)
        return (
            round(self.azimuth % 360.0, 1),
            round(self.elevation, 1),
            round(self.distance, 3),
            self.follow,
            self.body,
            look,
        )

    def to_dict(self) -> dict:
        return {
            "azimuth": round(self.azimuth % 360.0, 3),
            "elevation": round(self.elevation, 3),
            "distance": round(self.distance, 4),
            "lookat": [round(v, 4) for v in self.lookat],
            "follow": self.follow,
            "body": self.body,
        }


def _number(msg: dict, name: str, limit: float) -> float:
    v = msg[name]
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or abs(v) > limit:
        raise LabError(f"camera {name} must be a finite number within ±{limit:g}, got {str(v)[:40]}", CAMERA_HINT)
    return float(v)


def _pair(msg: dict, name: str) -> tuple[float, float]:
    v = msg[name]
    if not isinstance(v, list) or len(v) != 2:
        raise LabError(f"camera {name} must be [dx, dy] (fractions of the view), got {str(v)[:40]}", CAMERA_HINT)
    return _number({name: v[0]}, name, MAX_DELTA), _number({name: v[1]}, name, MAX_DELTA)


CAMERA_KEYS = frozenset(
    {"type", "orbit", "pan", "zoom", "follow", "reset", "azimuth", "elevation", "distance", "lookat"}
)


def moved(spec: CameraSpec, msg: dict, size: float, default: CameraSpec, lookat_now=None) -> CameraSpec:
    """``spec`` changed by a client's camera message ``msg`` (see :data:`CAMERA_HINT`), clamped to sane
    ranges; a :class:`LabError` for anything malformed, before anything changes. ``lookat_now`` (3,) is
    where the camera looks now (a following camera's smoothed point): panning or leaving follow starts there."""
    unknown = set(msg) - CAMERA_KEYS
    if unknown:
        raise LabError(f"unknown camera field(s): {', '.join(sorted(map(str, unknown)))[:80]}", CAMERA_HINT)
    if msg.get("reset") is True:
        return dataclasses.replace(default, body=spec.body) if "follow" not in msg else default
    az, el, dist = spec.azimuth, spec.elevation, spec.distance
    look = np.array(lookat_now if lookat_now is not None else spec.lookat, dtype=float)
    follow = spec.follow
    if "follow" in msg:
        if not isinstance(msg["follow"], bool):
            raise LabError(f"camera follow must be true or false, got {str(msg['follow'])[:40]}", CAMERA_HINT)
        follow = msg["follow"]
    if "azimuth" in msg:
        az = _number(msg, "azimuth", 1e4)
    if "elevation" in msg:
        el = _number(msg, "elevation", 90.0)
    if "distance" in msg:
        dist = _number(msg, "distance", 1e4)
        if dist <= 0:
            raise LabError(f"camera distance must be positive, got {dist:g}", CAMERA_HINT)
    if "lookat" in msg:
        v = msg["lookat"]
        if not isinstance(v, list) or len(v) != 3:
            raise LabError(f"camera lookat must be [x, y, z] [m], got {str(v)[:40]}", CAMERA_HINT)
        look = np.array([_number({"lookat": x}, "lookat", LOOKAT_LIMIT) for x in v])
        follow = msg.get("follow", False) is True
    if "orbit" in msg:
        dx, dy = _pair(msg, "orbit")
        az -= ORBIT_DEG[0] * dx
        el -= ORBIT_DEG[1] * dy
    if "zoom" in msg:
        dist *= math.exp(_number(msg, "zoom", MAX_DELTA))
    if "pan" in msg:
        dx, dy = _pair(msg, "pan")
        _, right, up = camera_axes(az, el)
        look = look - dx * dist * right + dy * dist * up
        follow = False  # a pan leaves the body: the camera stays where it was put
    el = min(max(el, ELEVATION_RANGE[0]), ELEVATION_RANGE[1])
    dist = min(max(dist, DISTANCE_RANGE[0] * size), DISTANCE_RANGE[1] * size)
    return CameraSpec(az % 360.0, el, dist, tuple(float(v) for v in look), follow, spec.body)


def camera_axes(azimuth: float, elevation: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit ``(forward, right, up)`` (3,) of a free camera at these angles [deg] (as ``mjv_cameraFrame``)."""
    a, e = math.radians(azimuth), math.radians(elevation)
    fwd = np.array([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])
    up = np.array([-math.sin(e) * math.cos(a), -math.sin(e) * math.sin(a), math.cos(e)])
    return fwd, np.cross(fwd, up), up


class ViewCamera:
    """The live camera of one channel: ``spec`` plus where a following camera looks now."""

    def __init__(self, spec: CameraSpec, lookat: np.ndarray | None = None):
        self.spec = spec
        self.mjv = mujoco.MjvCamera()
        self.mjv.type = mujoco.mjtCamera.mjCAMERA_FREE
        self._lookat = None if lookat is None else np.array(lookat, dtype=float)

    @property
    def lookat(self) -> np.ndarray:
        """(3,) [m] where the camera looks now."""
        return np.array(self.spec.lookat if self._lookat is None else self._lookat, dtype=float)

    def update(self, data: mujoco.MjData, size: float) -> mujoco.MjvCamera:
        """The ``MjvCamera`` for a frame of ``data`` (kinematics done): a following camera eases towards its
        body (the root body framed at a standing robot's hip height, as the default view)."""
        s = self.spec
        if s.follow and 0 < s.body < data.xpos.shape[0]:
            target = data.xpos[s.body].copy()
            if s.body == 1:
                target[2] = max(0.15 * size, min(target[2] * 0.75, 0.6 * size))
            self._lookat = target if self._lookat is None else self._lookat + FOLLOW_GAIN * (target - self._lookat)
        elif self._lookat is None or not s.follow:
            self._lookat = np.array(s.lookat, dtype=float)
        cam = self.mjv
        cam.azimuth, cam.elevation, cam.distance = s.azimuth, s.elevation, s.distance
        cam.lookat[:] = self._lookat
        return cam


def pick(model, data, scene, option, camera: mujoco.MjvCamera, aspect: float, x: float, y: float):
    """``(body id, world point (3,))`` of the robot under image point (``x``, ``y``) in [0, 1], (0, 0) top
    left, for ``camera``; None for the floor, the sky or the world body. ``scene`` is rebuilt for ``camera``."""
    mujoco.mjv_updateScene(model, data, option, None, camera, mujoco.mjtCatBit.mjCAT_ALL, scene)
    point = np.zeros(3)
    geom, flex, skin = (np.full(1, -1, dtype=np.int32) for _ in range(3))
    body = mujoco.mjv_select(model, data, option, aspect, x, 1.0 - y, scene, point, geom, flex, skin)
    if body <= 0:
        return None
    return int(body), point
