"""What a recording holds: its topics, their JSON schemas, and the two binary layouts of the exact MuJoCo state.

Time: every message's ``log_time`` is the *recording time* ``k * dt`` [ns], ``k`` the physics steps taken
since the recording started (it runs on through resets and stands still while paused); ``publish_time``
is the wall clock [ns since the epoch]. Each JSON message also says the engine's own ``sim_time`` [s].

JSON topics (``jsonschema`` schemas, ``json`` messages), after Foxglove's schemas where one fits
(timestamps ``{sec, nsec}`` of the recording time). The first engine (MuJoCo) is unprefixed; any other
engine's topics are under ``/<engine>/`` (Sim2Sim: ``/pybullet/joint_states``, ...):

=====================  =========================  ===================================================
topic                  schema                     what
=====================  =========================  ===================================================
``/joint_states``      ``sensor_msgs/msg/JointState``  q [rad], qd [rad/s], the applied torque [N·m], by joint name (ROS 2's shape; Foxglove has no JointState)
``/base``              ``foxglove.PoseInFrame``   the root body's pose in ``world``
``/tf``                ``foxglove.FrameTransform``  the same pose as the transform ``world`` -> ``base`` (another engine's: ``<engine>/base``)
``/contacts``          ``lab.Contacts``           foot-floor contact points [m] and normal forces [N]
``/contact_scene``     ``foxglove.SceneUpdate``   the same contacts drawn: a sphere at each point, an arrow up of its force
``/command``           ``lab.Command``            mode, joint targets [rad], applied torques [N·m], push [N]
``/metrics``           ``lab.Metrics``            the service's metrics sample (25 Hz Lab, 50 Hz Sim2Sim), as ``GET /api/metrics``
``/event``             ``lab.Event``              mode changes, pushes, pulls, resets, pauses, gains, ...; a repeat within :data:`COLLAPSE_S` is counted
=====================  =========================  ===================================================

The JSON topics are built by the writer process from a snapshot of each engine at each sample (its joint
states, torques, targets, base pose and foot contacts, as raw numbers).

A service may record more JSON topics of its own (the state server's runtime: ``/observation``,
``/action_chunk``): its runner declares them in ``record_topics`` ({topic: JSON schema, its ``title`` the
schema's name}, :func:`extra_topics`) and sends each message with :meth:`lab.record.recorder.Recorder.message`
(stamped like the others; nothing per physics step).

The exact MuJoCo state, for bit-exact replay (schema-less channels, raw little-endian float64):

- ``/mujoco/keyframe`` (message encoding :data:`KEYFRAME_ENCODING`): ``<QdB`` = step ``k``, ``sim_time`` [s],
  kind (0 periodic every :data:`KEYFRAME_S`, 1 start, 2 reset: replay loads it, 3 end), then the
  ``mj_getState(m, d, s, mjSTATE_INTEGRATION)`` vector (``nstate`` float64).
- ``/mujoco/inputs`` (:data:`INPUTS_ENCODING`): the inputs of every physics step, in blocks of at most
  :data:`BLOCK` steps: ``<QIII`` = ``k0`` (row ``i`` holds the inputs of the step that takes the state after ``k0 + i``
  steps to the state after ``k0 + i + 1``), ``n`` rows, ``nq`` rows with a non-zero ``qfrc_applied``, ``nx`` rows with
  a non-zero ``xfrc_applied``; then ``ctrl`` (n x nu float64); ``uint32[nq]`` row offsets and ``qfrc_applied``
  (nq x nv float64); ``uint32[nx]`` row offsets and ``xfrc_applied`` (nx x nbody*6 float64). A row left out is zero.

The dimensions are in each channel's metadata and in the ``recording`` metadata record.
"""

import struct

import mujoco
import numpy as np
import orjson

KEYFRAME_S = 1.0  # [s of recording time] between two periodic keyframes
BLOCK = 100  # physics steps per /mujoco/inputs message (at most; a block never spans a keyframe)
DIGITS = 6  # decimals kept in the JSON topics (the exact state is in the binary ones)
CONTACT_SPHERE_M = 0.02  # [m] the diameter of a contact's sphere in /contact_scene
CONTACT_ARROW_M = 0.5  # [m] the length of a contact's force arrow in /contact_scene per body weight of force
CONTACT_COLORS = {"left": {"r": 0.2, "g": 0.5, "b": 1.0, "a": 1.0}, "right": {"r": 1.0, "g": 0.55, "b": 0.1, "a": 1.0}}
COLLAPSE_S = 1.0  # [s] an event identical to the one before within this time is counted into it
PROFILE = "lab"
KEYFRAME_ENCODING = "lab.mj_state.v1"
INPUTS_ENCODING = "lab.mj_inputs.v1"
KEYFRAME_TOPIC, INPUTS_TOPIC = "/mujoco/keyframe", "/mujoco/inputs"
KEY_PERIODIC, KEY_START, KEY_RESET, KEY_END = 0, 1, 2, 3
STATE_SPEC = int(mujoco.mjtState.mjSTATE_INTEGRATION)
INPUT_SPEC = int(
    mujoco.mjtState.mjSTATE_CTRL | mujoco.mjtState.mjSTATE_QFRC_APPLIED | mujoco.mjtState.mjSTATE_XFRC_APPLIED
)
_KEY_HEAD = struct.Struct("<QdB")
_BLOCK_HEAD = struct.Struct("<QIII")


# ---- JSON schemas ------------------------------------------------------------------------------
def _num(desc: str = "") -> dict:
    return {"type": "number", "description": desc} if desc else {"type": "number"}


TIME = {
    "type": "object",
    "title": "time",
    "properties": {
        "sec": {"type": "integer", "minimum": 0},
        "nsec": {"type": "integer", "minimum": 0, "maximum": 999999999},
    },
}
VECTOR3 = {"title": "foxglove.Vector3", "type": "object", "properties": {k: _num() for k in "xyz"}}
QUATERNION = {"title": "foxglove.Quaternion", "type": "object", "properties": {k: _num() for k in "xyzw"}}
POSE = {"title": "foxglove.Pose", "type": "object", "properties": {"position": VECTOR3, "orientation": QUATERNION}}
NUMBERS = {"type": "array", "items": {"type": "number"}}
DURATION = {
    "type": "object",
    "title": "duration",
    "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}},
}
COLOR = {"title": "foxglove.Color", "type": "object", "properties": {k: _num() for k in "rgba"}}
_EMPTY = {"type": "array", "maxItems": 0}  # SceneEntity primitives the lab does not draw
SPHERE = {
    "title": "foxglove.SpherePrimitive",
    "type": "object",
    "properties": {"pose": POSE, "size": VECTOR3, "color": COLOR},
    "required": ["pose", "size", "color"],
}
ARROW = {
    "title": "foxglove.ArrowPrimitive",
    "type": "object",
    "properties": {
        "pose": POSE,
        "shaft_length": _num("[m]"),
        "shaft_diameter": _num("[m]"),
        "head_length": _num("[m]"),
        "head_diameter": _num("[m]"),
        "color": COLOR,
    },
    "required": ["pose", "shaft_length", "shaft_diameter", "head_length", "head_diameter", "color"],
}
SCENE_ENTITY = {
    "title": "foxglove.SceneEntity",
    "type": "object",
    "properties": {
        "timestamp": TIME,
        "frame_id": {"type": "string"},
        "id": {"type": "string"},
        "lifetime": DURATION,
        "frame_locked": {"type": "boolean"},
        "metadata": {
            "type": "array",
            "items": {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}}},
        },
        "arrows": {"type": "array", "items": ARROW},
        "spheres": {"type": "array", "items": SPHERE},
        **{k: _EMPTY for k in ("cubes", "cylinders", "lines", "triangles", "texts", "models")},
    },
    "required": ["timestamp", "frame_id", "id", "lifetime", "frame_locked", "arrows", "spheres"],
}

SCHEMAS = {
    "sensor_msgs/msg/JointState": {
        "title": "sensor_msgs/msg/JointState",
        "description": "Joint states, shaped like ROS 2 sensor_msgs/msg/JointState: position [rad], velocity [rad/s], "
        "effort [N·m], by joint name (Foxglove has no joint-state schema)",
        "type": "object",
        "properties": {
            "header": {
                "type": "object",
                "properties": {
                    "stamp": {
                        "type": "object",
                        "properties": {"sec": {"type": "integer"}, "nanosec": {"type": "integer", "minimum": 0}},
                    },
                    "frame_id": {"type": "string"},
                },
            },
            "name": {"type": "array", "items": {"type": "string"}},
            "position": NUMBERS,
            "velocity": NUMBERS,
            "effort": NUMBERS,
            "sim_time": _num("the engine's simulation time [s]"),
        },
        "required": ["header", "name", "position", "velocity", "effort"],
    },
    "foxglove.PoseInFrame": {
        "title": "foxglove.PoseInFrame",
        "description": "A timestamped pose in a named frame: the robot's root body in world",
        "type": "object",
        "properties": {"timestamp": TIME, "frame_id": {"type": "string"}, "pose": POSE, "sim_time": _num()},
        "required": ["timestamp", "frame_id", "pose"],
    },
    "foxglove.FrameTransform": {
        "title": "foxglove.FrameTransform",
        "description": "The transform from parent_frame_id (world) to child_frame_id (base, the robot's root body)",
        "type": "object",
        "properties": {
            "timestamp": TIME,
            "parent_frame_id": {"type": "string"},
            "child_frame_id": {"type": "string"},
            "translation": VECTOR3,
            "rotation": QUATERNION,
        },
        "required": ["timestamp", "parent_frame_id", "child_frame_id", "translation", "rotation"],
    },
    "foxglove.SceneUpdate": {
        "title": "foxglove.SceneUpdate",
        "description": "The foot-floor contacts drawn in world: one entity 'contacts' (replaced by each message), a "
        "sphere at each contact point, an arrow up as long as its normal force (CONTACT_ARROW_M per body weight)",
        "type": "object",
        "properties": {
            "deletions": {"type": "array", "items": {"type": "object"}},
            "entities": {"type": "array", "items": SCENE_ENTITY},
        },
        "required": ["deletions", "entities"],
    },
    "lab.Contacts": {
        "title": "lab.Contacts",
        "description": "Foot-floor contacts: side (left/right), point in world [m], normal force [N]",
        "type": "object",
        "properties": {
            "timestamp": TIME,
            "sim_time": _num(),
            "contacts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "side": {"type": "string"},
                        "position": VECTOR3,
                        "force_n": _num("normal force [N]"),
                    },
                    "required": ["side", "position", "force_n"],
                },
            },
        },
        "required": ["timestamp", "contacts"],
    },
    "lab.Command": {
        "title": "lab.Command",
        "description": "What the controller commanded: mode, joint targets [rad], applied torques [N·m], push [N] or null",
        "type": "object",
        "properties": {
            "timestamp": TIME,
            "sim_time": _num(),
            "mode": {"type": "string"},
            "enabled": {"type": "boolean"},
            "q_target": NUMBERS,
            "tau": NUMBERS,
            "push": {"type": ["array", "null"], "items": {"type": "number"}},
        },
        "required": ["timestamp", "mode", "q_target", "tau"],
    },
    "lab.Metrics": {
        "title": "lab.Metrics",
        "description": "The service's metrics sample, as GET /api/metrics returns it (docs/CONTRACT.md)",
        "type": "object",
        "properties": {"timestamp": TIME, "sim_time": _num()},
        "required": ["timestamp"],
    },
    "lab.Event": {
        "title": "lab.Event",
        "description": "Something that happened: kind (start, stop, mode, push, perturb_start, perturb, reset, pause, "
        "resume, gains, nominal, walk, pose, rtf, sim, closed), its fields, and how often it repeated",
        "type": "object",
        "properties": {
            "timestamp": TIME,
            "sim_time": _num(),
            "kind": {"type": "string"},
            "data": {"type": "object"},
            "count": {"type": "integer", "minimum": 1},
            "last_t": _num("recording time of the last repeat [s]"),
        },
        "required": ["timestamp", "kind", "data", "count"],
    },
}

# topic suffix -> schema name (a non-first engine's topics are /<engine><suffix>)
TOPICS = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/base": "foxglove.PoseInFrame",
    "/tf": "foxglove.FrameTransform",
    "/contacts": "lab.Contacts",
    "/contact_scene": "foxglove.SceneUpdate",
    "/command": "lab.Command",
}
SERVICE_TOPICS = {"/metrics": "lab.Metrics", "/event": "lab.Event"}


def extra_topics(runner) -> dict:
    """The JSON topics ``runner`` records beside the standard ones: its ``record_topics`` attribute ({topic:
    JSON schema with a ``title``}), or none. A title that names a standard schema is refused."""
    topics = dict(getattr(runner, "record_topics", None) or {})
    for topic, schema in topics.items():
        title = schema.get("title")
        if not isinstance(title, str) or not title or title in SCHEMAS or topic in {**TOPICS, **SERVICE_TOPICS}:
            raise ValueError(f"record topic {topic!r} needs a JSON schema of its own with a title, got {title!r}")
    return topics


def stamp(ns: int) -> dict:
    """A Foxglove time ``{sec, nsec}`` of ``ns`` nanoseconds."""
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


def dumps(msg: dict) -> bytes:
    """One JSON message, compact (orjson: numpy arrays and scalars as lists and numbers, a NaN as null; about
    20 times faster than the standard library's encoder, which was most of the writer process's time)."""
    return orjson.dumps(msg, option=orjson.OPT_SERIALIZE_NUMPY)


# ---- the binary layouts ------------------------------------------------------------------------
def encode_keyframe(k: int, sim_time: float, kind: int, state: np.ndarray) -> bytes:
    return _KEY_HEAD.pack(k, sim_time, kind) + np.ascontiguousarray(state, dtype="<f8").tobytes()


def decode_keyframe(data: bytes) -> tuple:
    """``(k, sim_time [s], kind, state (nstate,))`` of a ``/mujoco/keyframe`` message."""
    k, t, kind = _KEY_HEAD.unpack_from(data)
    return k, t, kind, np.frombuffer(data, dtype="<f8", offset=_KEY_HEAD.size).copy()


def encode_inputs(k0: int, rows: np.ndarray, nu: int, nv: int) -> bytes:
    """One ``/mujoco/inputs`` block from ``rows`` (n, nu + nv + nbody*6): the INPUT_SPEC state of each step."""
    ctrl, qfrc, xfrc = rows[:, :nu], rows[:, nu : nu + nv], rows[:, nu + nv :]
    qi = np.flatnonzero(qfrc.any(axis=1)).astype("<u4")
    xi = np.flatnonzero(xfrc.any(axis=1)).astype("<u4")
    parts = [_BLOCK_HEAD.pack(k0, len(rows), len(qi), len(xi)), np.ascontiguousarray(ctrl, dtype="<f8").tobytes()]
    parts += [qi.tobytes(), np.ascontiguousarray(qfrc[qi], dtype="<f8").tobytes()]
    parts += [xi.tobytes(), np.ascontiguousarray(xfrc[xi], dtype="<f8").tobytes()]
    return b"".join(parts)


def decode_inputs(data: bytes, nu: int, nv: int, nx: int) -> tuple:
    """``(k0, rows (n, nu + nv + nx))`` of a ``/mujoco/inputs`` message, zeros where a row was left out."""
    k0, n, nq_rows, nx_rows = _BLOCK_HEAD.unpack_from(data)
    off = _BLOCK_HEAD.size
    rows = np.zeros((n, nu + nv + nx))
    rows[:, :nu] = np.frombuffer(data, "<f8", n * nu, off).reshape(n, nu)
    off += 8 * n * nu
    for lo, width, count in ((nu, nv, nq_rows), (nu + nv, nx, nx_rows)):
        idx = np.frombuffer(data, "<u4", count, off)
        off += 4 * count
        rows[idx, lo : lo + width] = np.frombuffer(data, "<f8", count * width, off).reshape(count, width)
        off += 8 * count * width
    return k0, rows
