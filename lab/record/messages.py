"""The JSON messages of one metrics sample (built in the recording's writer process, :mod:`lab.record.writer`).

From an engine's snapshot (:meth:`lab.record.recorder.Recorder._snapshot`: raw float64 numbers and the foot
contacts) :func:`snapshot_messages` makes the messages of the topics of :data:`lab.record.format.TOPICS`:
``/joint_states``, ``/base``, ``/tf``, ``/contacts``, ``/contact_scene`` and ``/command``, shaped after their JSON
schemas (:data:`lab.record.format.SCHEMAS`). Numbers go to orjson as numpy views; the constant parts of a contact
scene are JSON made once (orjson fragments).
"""

from typing import NamedTuple

import numpy as np
import orjson

from lab.record import format as fmt


class _Sample(NamedTuple):
    """One engine at one metrics sample: ``sim_time`` [s]; ``q``, ``qd``, ``tau``, ``q_target`` (nu,); base ``pos``
    (3,) [m] and ``quat`` (4,) w x y z; the foot-floor contacts: ``sides`` (k,) 0 left | 1 right, ``points`` (k, 3)
    [m], ``forces`` (k,) normal forces [N]; ``push`` (3,) [N] or None."""

    prefix: str
    sim_time: float
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    q_target: np.ndarray
    pos: np.ndarray
    quat: np.ndarray
    sides: tuple
    points: np.ndarray
    forces: tuple
    enabled: bool
    push: np.ndarray | None


def _sample(snap: tuple) -> _Sample:
    prefix, t, sizes, numbers, enabled, push, contacts = snap
    parts = np.split(np.frombuffer(numbers, "<f8"), np.cumsum(sizes))
    sides, points, forces = zip(*contacts, strict=True) if contacts else ((), (), ())
    push = None if push is None else np.frombuffer(push, "<f8")
    return _Sample(prefix, t, *parts, sides, np.array(points, dtype=float).reshape(-1, 3), forces, enabled, push)


def snapshot_messages(snap: tuple, names, mode: str, ns: int, weight: float) -> list:
    """``(topic, message)`` of one engine's snapshot (see :meth:`lab.record.recorder.Recorder._snapshot`) at
    recording time ``ns`` [ns], its numbers rounded to :data:`~lab.record.format.DIGITS` decimals; ``names``
    the joint names (a list, or their JSON as an orjson fragment), ``weight`` [N] the robot's."""
    s = _sample(snap)
    n = fmt.DIGITS
    flat = np.round(np.concatenate((s.q, s.qd, s.tau, s.q_target, s.pos, s.quat)), n)
    nu = len(s.q)
    q, qd, tau, q_target = (flat[i * nu : (i + 1) * nu] for i in range(4))  # views: orjson writes them as lists
    (x, y, z), (qw, qx, qy, qz) = flat[4 * nu : 4 * nu + 3].tolist(), flat[4 * nu + 3 :].tolist()
    t = round(s.sim_time, 6)
    ts = fmt.stamp(ns)
    position, orientation = {"x": x, "y": y, "z": z}, {"x": qx, "y": qy, "z": qz, "w": qw}
    contacts = [
        (_SIDES[side], {"x": x, "y": y, "z": z}, round(fz, 3))
        for side, (x, y, z), fz in zip(s.sides, np.round(s.points, n).tolist(), s.forces, strict=True)
    ]
    p = s.prefix
    return [
        (
            p + "/joint_states",
            {
                "header": {"stamp": {"sec": ts["sec"], "nanosec": ts["nsec"]}, "frame_id": ""},
                "name": names,
                "position": q,
                "velocity": qd,
                "effort": tau,
                "sim_time": t,
            },
        ),
        (
            p + "/base",
            {
                "timestamp": ts,
                "frame_id": "world",
                "pose": {"position": position, "orientation": orientation},
                "sim_time": t,
            },
        ),
        (
            p + "/tf",
            {
                "timestamp": ts,
                "parent_frame_id": "world",
                "child_frame_id": p.strip("/") + "/base" if p else "base",
                "translation": position,
                "rotation": orientation,
            },
        ),
        (
            p + "/contacts",
            {
                "timestamp": ts,
                "sim_time": t,
                "contacts": [{"side": side, "position": pt, "force_n": fz} for side, pt, fz in contacts],
            },
        ),
        (p + "/contact_scene", _contact_scene(contacts, ts, weight)),
        (
            p + "/command",
            {
                "timestamp": ts,
                "sim_time": t,
                "mode": mode,
                "enabled": s.enabled,
                "q_target": q_target,
                "tau": tau,
                "push": None if s.push is None else np.round(s.push, n),
            },
        ),
    ]


_SIDES = ("left", "right")
# constant parts of a contact scene, JSON made once (orjson fragments)
_FLAT = orjson.Fragment(orjson.dumps({"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}))
_UP = orjson.Fragment(orjson.dumps({"x": 0.0, "y": -0.707107, "z": 0.0, "w": 0.707107}))  # an arrow's +x to +z
_SIZE = orjson.Fragment(orjson.dumps(dict.fromkeys("xyz", fmt.CONTACT_SPHERE_M)))
_COLORS = {side: orjson.Fragment(orjson.dumps(c)) for side, c in fmt.CONTACT_COLORS.items()}
_NONE = orjson.Fragment(b"[]")


def _contact_scene(contacts: list, ts: dict, weight: float) -> dict:
    """A ``foxglove.SceneUpdate`` of ``contacts`` ``[(side, point {x, y, z} [m], normal force [N])]``: the entity
    ``contacts``, a sphere of :data:`~lab.record.format.CONTACT_SPHERE_M` at each point (left blue, right orange)
    and an arrow up of :data:`~lab.record.format.CONTACT_ARROW_M` per body weight of force."""
    spheres, arrows = [], []
    size = fmt.CONTACT_SPHERE_M
    for side, pt, fz in contacts:
        color = _COLORS[side]
        spheres.append({"pose": {"position": pt, "orientation": _FLAT}, "size": _SIZE, "color": color})
        length = round(fmt.CONTACT_ARROW_M * fz / weight, 4) if weight > 0 else 0.0
        if length > 0:
            arrows.append(
                {
                    "pose": {"position": pt, "orientation": _UP},
                    "shaft_length": length,
                    "shaft_diameter": size / 2,
                    "head_length": size,
                    "head_diameter": size,
                    "color": color,
                }
            )
    entity = {
        "timestamp": ts,
        "frame_id": "world",
        "id": "contacts",
        "lifetime": {"sec": 0, "nsec": 0},
        "frame_locked": False,
        "metadata": _NONE,
        "arrows": arrows,
        "spheres": spheres,
        **dict.fromkeys(("cubes", "cylinders", "lines", "triangles", "texts", "models"), _NONE),
    }
    return {"deletions": _NONE, "entities": [entity]}
