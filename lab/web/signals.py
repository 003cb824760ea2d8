"""Any signal of the Lab's simulation, picked by name and streamed live over ``WS /ws``.

A :class:`Catalog` names every signal one engine of a :class:`~lab.runtime.realtime.RealtimeRunner`
offers, with its unit, in groups:

- ``q/<joint>`` [rad], ``q_target/<joint>`` [rad] (what the mode asks now), ``qd/<joint>`` [rad/s],
  ``tau/<joint>`` [N·m] (the commanded torque): every actuated joint (``robot.joint_names``);
- ``base/x|y|z`` [m] and ``base/roll|pitch|yaw`` [deg] (ZYX Euler) of the root link in the world;
  ``base/vx|vy|vz`` [m/s] (world frame) and ``base/wx|wy|wz`` [rad/s] (root link frame, what a gyro
  reads), from MuJoCo's free joint;
- ``foot/<left|right>/fz`` [N] (normal force) and ``foot/<side>/cop_x|cop_y`` [m] (centre of pressure,
  null while the foot is off the floor), from ``engine.foot_contacts()``;
- ``contact/<body>/fx|fy|fz`` [N]: the total contact force on each body that has collision geoms,
  world frame, summed over every MuJoCo contact it is in (floor and self-contacts);
- ``metric/<field>``: every numeric field of a :class:`~lab.control.metrics.Metrics` sample
  (``com``/``cop`` split into ``_x``, ``_y``, ``_z``; ``push`` is 1 while a push acts).

Wire (``WS /ws``, :func:`init_app` adds both to the Lab's stream):

- client ``{"type": "signals", "names": [...]}`` picks at most :data:`MAX_PICK` names (``[]`` stops);
  answered ``{"type": "signals_picked", "names", "units", "hz"}``; a bad pick is answered with
  ``{"type": "error", "about": "signals", ...}`` and the previous pick goes on streaming;
- server ``{"type": "signals", "t", "names", "values"}`` at the metrics rate (25 Hz), only to clients
  that picked something, only when the simulation time moved; ``t`` [s] is the simulation time of
  the state read, ``values`` follow ``names`` (null where a value is undefined or not finite).

One sample per tick, not every physics step batched: the values are read between two chunks of the
simulation thread under the runner's lock (one :meth:`~RealtimeRunner.read`, so every value of a
sample is of the same state), which costs the simulation one short hold of the lock per client per
tick and nothing per physics step. Batching every step would need a hook in the simulation's inner
loop (a copy per step, 1 kHz) for a chart that shows 10 s across a few hundred pixels; a 25 Hz
sample of each signal is what the page can draw, and a signal faster than 12.5 Hz shows aliased.
After a model switch (``POST /api/model``) a pick is re-resolved on the new model's catalog; names
it lacks are dropped and the client is told (``signals_picked`` with ``dropped``).
"""

import difflib
import math
import threading
from dataclasses import dataclass, fields
from typing import Callable

import mujoco
import numpy as np
from flask import Blueprint, current_app, jsonify

from lab.control.metrics import Metrics
from lab.errors import LabError
from lab.sim.engine import quat_pitch_deg, quat_roll_deg
from lab.sim.mujoco_engine import MujocoEngine

PICK, PICKED = "signals", "signals_picked"  # client -> server; server -> client (the data is PICK too)
MAX_PICK = 16  # signals one client may stream at once
HZ = 25.0  # the Lab stream's metrics rate, at which the ticker sends [Hz]
PICK_HINT = (
    'send {"type": "signals", "names": ["q/<joint>", "metric/pelvis_z"]} ([] stops); GET /api/signals lists every name'
)

# Metrics fields offered as signals, with their units; the others are not numbers (support) or are the time
METRIC_UNITS = {
    "pelvis_z": "m",
    "forward_x": "m",
    "pitch_deg": "deg",
    "roll_deg": "deg",
    "max_joint_err": "rad",
    "com": "m",
    "cop": "m",
    "margin": "m",
    "pelvis_z_target": "m",
    "push": "on/off",
}
METRIC_PARTS = {"com": ("x", "y", "z"), "cop": ("x", "y")}  # tuple fields, one signal per part
NOT_SIGNALS = ("sim_time", "support")


@dataclass(frozen=True)
class Group:
    """Signals read together: ``names`` and ``units`` in the order ``grab()`` returns their values.
    ``grab`` runs under the runner's lock and returns a sequence of floats (nan: undefined)."""

    id: str
    label: str
    doc: str
    names: tuple
    units: tuple
    labels: tuple  # what the picker shows: the joint, body or field
    grab: Callable

    def to_dict(self) -> dict:
        sigs = [{"name": n, "unit": u, "label": lb} for n, u, lb in zip(self.names, self.units, self.labels)]
        return {"id": self.id, "label": self.label, "doc": self.doc, "signals": sigs}


@dataclass(frozen=True)
class Pick:
    """A validated pick on ``catalog``: ``names``/``units`` in the client's order; ``plan`` is
    ``((group index, (position in the group, ...)), ...)`` and ``order`` maps the plan's values back."""

    catalog: "Catalog"
    names: tuple
    units: tuple
    plan: tuple
    order: tuple


class Catalog:
    """Every signal of engine ``engine`` (default: the first) of ``runner``, and consistent reads of a pick."""

    def __init__(self, runner, engine: str | None = None):
        self.runner = runner
        self.engine_name = engine or runner.names[0]
        eng, ro = runner.engines[self.engine_name], runner.rollouts[self.engine_name]
        robot = runner.robot
        joints = tuple(robot.joint_names)
        groups = [
            _joint_group("q", "joint angle q", "rad", joints, lambda: eng.joint_state()[0]),
            _joint_group("q_target", "joint target q*", "rad", joints, lambda: ro.command.q_target),
            _joint_group("qd", "joint velocity q̇", "rad/s", joints, lambda: eng.joint_state()[1]),
        ]
        tau = eng.torque_buffer()  # what the rollout writes its torques into (MuJoCo: data.ctrl)
        if tau is not None:
            groups.append(_joint_group("tau", "joint torque τ (commanded)", "N·m", joints, lambda: tau))
        groups.append(_base_group(eng))
        if isinstance(eng, MujocoEngine):
            vel = _base_velocity_group(eng, robot)
            if vel is not None:
                groups.append(vel)
        groups.append(_foot_group(eng))
        if isinstance(eng, MujocoEngine):
            groups.append(_contact_group(eng))
        groups.append(_metric_group(ro))
        self.groups = groups
        self.index = {n: (gi, k) for gi, g in enumerate(groups) for k, n in enumerate(g.names)}
        self.units = {n: u for g in groups for n, u in zip(g.names, g.units)}

    def __len__(self) -> int:
        return len(self.index)

    def to_dict(self) -> dict:
        """What ``GET /api/signals`` returns."""
        return {
            "engine": self.engine_name,
            "count": len(self),
            "max_pick": MAX_PICK,
            "hz": HZ,
            "groups": [g.to_dict() for g in self.groups],
        }

    def pick(self, names) -> Pick:
        """``names`` checked (a list of known names, at most :data:`MAX_PICK`; repeats are kept once)."""
        if not isinstance(names, list):
            raise LabError(f'"names" must be a list of signal names, got {_kind(names)}', PICK_HINT)
        bad = [n for n in names if not isinstance(n, str)]
        if bad:
            raise LabError(f"signal names are strings, got {_kind(bad[0])} {str(bad[0])[:40]}", PICK_HINT)
        names = list(dict.fromkeys(names))
        if len(names) > MAX_PICK:
            raise LabError(
                f"{len(names)} signals picked; at most {MAX_PICK} stream at once", "pick fewer (drop some chips)"
            )
        unknown = [n for n in names if n not in self.index]
        if unknown:
            raise LabError(self._unknown_message(unknown), f"GET /api/signals lists all {len(self)} names")
        by_group: dict = {}
        for pos, n in enumerate(names):
            gi, k = self.index[n]
            by_group.setdefault(gi, []).append((k, pos))
        plan = tuple((gi, tuple(k for k, _ in ks)) for gi, ks in sorted(by_group.items()))
        order = tuple(pos for _, ks in sorted(by_group.items()) for _, pos in ks)
        return Pick(self, tuple(names), tuple(self.units[n] for n in names), plan, order)

    def _unknown_message(self, unknown: list) -> str:
        first = unknown[0][:80]
        near = difflib.get_close_matches(first, list(self.index), n=3, cutoff=0.6)
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        tip = f"; did you mean {', '.join(near)}?" if near else ""
        return f"unknown signal {first!r}{more}{tip}"

    def read(self, pick: Pick) -> tuple[float, list]:
        """``(t [s], values)`` of ``pick``, all of one state: one hold of the runner's lock."""
        groups = self.groups
        eng = self.runner.engines[self.engine_name]

        def grab(_runner):  # under the lock: the engines' arrays are views that the next step changes
            flat = []
            for gi, ks in pick.plan:
                vals = groups[gi].grab()
                flat += [float(vals[k]) for k in ks]
            return eng.time, flat

        t, flat = self.runner.read(grab)
        values = [None] * len(flat)
        for pos, v in zip(pick.order, flat):
            values[pos] = v if math.isfinite(v) else None
        return t, values


def _kind(v) -> str:
    return "null" if v is None else type(v).__name__


def _joint_group(gid: str, label: str, unit: str, joints: tuple, grab) -> Group:
    names = tuple(f"{gid}/{j}" for j in joints)
    return Group(gid, label, f"every actuated joint [{unit}]", names, (unit,) * len(joints), joints, grab)


def _yaw_deg(quat) -> float:
    """Yaw [deg] of a w, x, y, z quaternion (ZYX Euler)."""
    w, x, y, z = (float(v) for v in quat)
    return math.degrees(math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def _base_group(eng) -> Group:
    def grab():
        pos, quat = eng.base_pose()
        return (*pos.tolist(), quat_roll_deg(quat), quat_pitch_deg(quat), _yaw_deg(quat))

    parts = ("x", "y", "z", "roll", "pitch", "yaw")
    units = ("m", "m", "m", "deg", "deg", "deg")
    doc = "root link position in the world [m], orientation as ZYX Euler angles [deg]"
    return Group("base", "base pose", doc, tuple(f"base/{p}" for p in parts), units, parts, grab)


def _base_velocity_group(eng: MujocoEngine, robot) -> Group | None:
    m = robot.model
    jnt = int(m.body_jntadr[robot.root_body])
    if jnt < 0 or m.jnt_type[jnt] != mujoco.mjtJoint.mjJNT_FREE:
        return None  # a fixed or constrained base has no free-joint velocity to show
    a = int(m.jnt_dofadr[jnt])
    qvel = eng.data.qvel

    def grab():
        return qvel[a : a + 6].tolist()

    parts = ("vx", "vy", "vz", "wx", "wy", "wz")
    units = ("m/s",) * 3 + ("rad/s",) * 3
    doc = "root link linear velocity, world frame [m/s]; angular velocity, root link frame (a gyro) [rad/s]"
    return Group("base_vel", "base velocity", doc, tuple(f"base/{p}" for p in parts), units, parts, grab)


def _foot_group(eng) -> Group:
    def grab():
        fz, mx, my = [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]
        for c in eng.foot_contacts():
            x, y = float(c.pos[0]), float(c.pos[1])
            fz[c.side] += c.fz
            mx[c.side] += c.fz * x
            my[c.side] += c.fz * y
        out = []
        for s in (0, 1):
            cop = fz[s] > 1e-6
            out += [fz[s], mx[s] / fz[s] if cop else math.nan, my[s] / fz[s] if cop else math.nan]
        return out

    names, units, labels = [], [], []
    for side in ("left", "right"):
        for p, u in (("fz", "N"), ("cop_x", "m"), ("cop_y", "m")):
            names.append(f"foot/{side}/{p}")
            units.append(u)
            labels.append(f"{side} {p}")
    doc = "per foot: normal force from the floor [N]; centre of pressure in the world [m], null when unloaded"
    return Group("foot", "foot contact", doc, tuple(names), tuple(units), tuple(labels), grab)


def _contact_group(eng: MujocoEngine) -> Group:
    m, d = eng.model, eng.data
    bodies = sorted({int(m.geom_bodyid[g]) for g in range(m.ngeom) if m.geom_contype[g] or m.geom_conaffinity[g]} - {0})
    row = {b: i for i, b in enumerate(bodies)}
    geom_row = [row.get(int(b), -1) for b in m.geom_bodyid]
    f6 = np.zeros(6)
    out = np.zeros((len(bodies), 3))

    def grab():
        out[:] = 0.0
        if d.ncon == 0:
            return out.ravel().tolist()
        con = d.contact
        g1, g2, frames = con.geom1.tolist(), con.geom2.tolist(), con.frame
        for i in range(d.ncon):
            r1, r2 = geom_row[g1[i]], geom_row[g2[i]]
            if r1 < 0 and r2 < 0:
                continue
            mujoco.mj_contactForce(m, d, i, f6)
            f = frames[i].reshape(3, 3).T @ f6[:3]  # world frame: the force geom1 exerts on geom2
            if r2 >= 0:
                out[r2] += f
            if r1 >= 0:
                out[r1] -= f
        return out.ravel().tolist()

    names, labels = [], []
    for b in bodies:
        for p in ("fx", "fy", "fz"):
            names.append(f"contact/{m.body(b).name}/{p}")
            labels.append(f"{m.body(b).name} {p}")
    doc = "total contact force on each body with collision geoms (floor and self-contacts), world frame [N]"
    return Group("contact", "contact force", doc, tuple(names), ("N",) * len(names), tuple(labels), grab)


def _metric_group(rollout) -> Group:
    keys, names, units = [], [], []
    for f in fields(Metrics):
        if f.name in NOT_SIGNALS:
            continue
        unit = METRIC_UNITS[f.name]  # a new Metrics field needs its unit here (tests/test_signals.py checks)
        for k, part in enumerate(METRIC_PARTS.get(f.name, (None,))):
            keys.append((f.name, k if part else None))
            names.append(f"metric/{f.name}_{part}" if part else f"metric/{f.name}")
            units.append(unit)

    def grab():
        m = rollout.metrics()
        out = []
        for name, k in keys:
            v = getattr(m, name)
            if k is not None:
                v = v[k] if v is not None else None
            out.append(math.nan if v is None else float(v))
        return out

    doc = "the metrics sample (lab/control/metrics.py) of the same state: heights, tilt, CoM, CoP, margin"
    labels = tuple(n.split("/", 1)[1] for n in names)
    return Group("metric", "metrics", doc, tuple(names), tuple(units), labels, grab)


# ---------------------------------------------------------------- the Lab's route and stream extension

bp = Blueprint("signals", __name__)
_build_lock = threading.Lock()


def current(app) -> Catalog:
    """The catalog of the Lab's session as of now (a model switch makes a new session, hence a new catalog)."""
    session = app.extensions["lab"]["session"]
    cat = app.extensions.get("signals")
    if cat is None or cat.runner is not session:
        with _build_lock:
            cat = app.extensions.get("signals")
            if cat is None or cat.runner is not session:
                cat = app.extensions["signals"] = Catalog(session)
    return cat


@bp.get("/api/signals")
def api_signals():
    return jsonify(current(current_app).to_dict())


def init_app(app) -> None:
    """``GET /api/signals`` and the ``signals`` pick and stream on the Lab's ``WS /ws``."""
    app.register_blueprint(bp)
    app.extensions["lab"]["ws_ext"].append(stream_ext)


def stream_ext(app) -> tuple[dict, list]:
    """The ``signals`` handler and ticker for one ``WS /ws`` client (``lab_page``'s extension hook)."""

    def on_pick(client, msg):
        extra = set(msg) - {"type", "names"}
        if extra:
            raise LabError(f"unknown field(s) in a signals pick: {', '.join(sorted(extra))}", PICK_HINT)
        if "names" not in msg:
            raise LabError('a signals pick needs "names"', PICK_HINT)
        pick = current(app).pick(msg["names"])
        _keep(client, pick)

    def tick(client, now):
        pick = client.state.get("signals.pick")
        if pick is None:
            return
        cat = current(app)
        if pick.catalog is not cat:  # the model was switched: the same names on the new one, where they exist
            kept = [n for n in pick.names if n in cat.index]
            pick = _keep(client, cat.pick(kept), dropped=[n for n in pick.names if n not in cat.index])
            if pick is None:
                return
        t, values = cat.read(pick)
        if t == client.state.get("signals.t"):
            return  # paused or stopped: nothing new to send
        client.state["signals.t"] = t
        client.send({"type": PICK, "t": t, "names": pick.names, "values": values})

    return {PICK: on_pick}, [tick]


def _keep(client, pick: Pick, dropped=()) -> Pick | None:
    """Hold ``pick`` for ``client`` (an empty one stops its stream) and confirm it."""
    held = pick if pick.names else None
    client.state["signals.pick"] = held
    client.state["signals.t"] = None  # the next tick sends, even while paused
    msg = {"type": PICKED, "names": list(pick.names), "units": list(pick.units), "hz": HZ}
    if dropped:
        msg["dropped"] = list(dropped)
    client.send(msg)
    return held
