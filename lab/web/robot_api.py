"""The robot panel's API: every actuated joint live, its gains and nominal pose changed without a
restart, the sidecar file that keeps them, and the ``pose`` mode's joint targets.

- ``GET /api/robot``: the robot and one row per actuated joint, in actuator order;
- ``POST /api/robot {"gains": {joint: [kp, kd]}, "nominal": {joint: angle}}`` (either or both): checked
  whole before anything is applied, then applied to the running simulation;
- ``GET /api/robot/sidecar``: the gains and nominal pose now, as ``<model>.lab.json`` (the sidecar
  :func:`lab.robots.config.load_config` reads beside a ``--model`` file);
- ``POST /api/pose {"q": {joint: angle}}``: targets of the ``pose`` mode (409 in any other mode).

The robot and the session are read from ``current_app.extensions["lab"]`` on each request (the model
picker may swap them while the Lab runs).
"""

import json
import re

import numpy as np
from flask import Blueprint, Response, current_app, jsonify

from lab.control.pose import GAIN_MAX, check_angles, finite_number, joint_index, joint_ranges
from lab.errors import LabError
from lab.web import messages
from lab.web.common import json_body, require_token

bp = Blueprint("robot", __name__)

SATURATED = 0.999  # |tau| at or beyond this fraction of the limit counts as saturated
ROBOT_FIELDS = ("gains", "nominal")


def _lab():
    c = current_app.extensions["lab"]
    return c["robot"], c["session"]


def _num(v: float, digits: int = 6):
    v = float(v)
    return round(v, digits) if np.isfinite(v) else None


def robot_dict(robot, session) -> dict:
    """The robot and its joints as ``GET /api/robot`` answers."""
    live = session.joint_table()
    lower, upper = joint_ranges(robot)
    q, target, tau, kp, kd = live["q"], live["target"], live["tau"], live["kp"], live["kd"]
    notes = getattr(robot, "gain_notes", None)
    if notes is not None and len(notes) != len(robot.joint_names):
        notes = None
    joints = []
    for i, name in enumerate(robot.joint_names):
        limit = float(robot.tau_limit[i])
        row = {
            "name": name,
            "actuator": robot.actuator_names[i],
            "lower": _num(lower[i]),
            "upper": _num(upper[i]),
            "tau_limit": _num(limit),
            "kp": float(kp[i]),
            "kd": float(kd[i]),
            "nominal": float(robot.q_nominal[i]),
            "q": _num(q[i]),
            "target": _num(target[i]),
            "error": _num(target[i] - q[i]),
            "tau": _num(tau[i], 4),
            "saturated": bool(abs(tau[i]) >= SATURATED * limit),
        }
        if notes is not None:
            row["gain_note"] = None if notes[i] is None else str(notes[i])
        joints.append(row)
    m = robot.model_dict()
    return messages.finite(
        {
            "file": m["file"],
            "kind": m["kind"],
            "builtin": m["builtin"],
            "nu": m["nu"],
            "total_mass": m["total_mass"],
            "standing_height": m["standing_height"],
            "gains_source": str(getattr(robot, "gain_method", "names")),
            "mode": live["mode"],
            "sim_time": round(live["sim_time"], 6),
            "gain_max": GAIN_MAX,
            "joints": joints,
        }
    )


def check_gains(robot, raw) -> dict:
    """``{joint: [kp, kd]}`` checked whole: index -> (kp, kd), each finite in [0, GAIN_MAX]."""
    if not isinstance(raw, dict) or not raw:
        raise LabError(
            "'gains' must be a non-empty object of joint name -> [kp, kd]",
            f'e.g. {{"gains": {{"{robot.joint_names[0]}": [150, 12]}}}}',
        )
    out = {}
    for name, value in raw.items():
        i = joint_index(robot, name)
        if not isinstance(value, list) or len(value) != 2:
            shown = f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__
            raise LabError(f"gains of {name}: expected [kp, kd], got {shown}", "kp [N·m/rad] and kd [N·m·s/rad]")
        out[i] = (
            finite_number(value[0], f"kp of {name}", 0.0, GAIN_MAX),
            finite_number(value[1], f"kd of {name}", 0.0, GAIN_MAX),
        )
    return out


@bp.get("/api/robot")
def api_robot():
    robot, session = _lab()
    return jsonify(robot_dict(robot, session))


@bp.post("/api/robot")
@require_token
def api_robot_change():
    """Change gains and/or the nominal pose of the running simulation; nothing is applied unless all is valid."""
    body = json_body()
    robot, session = _lab()
    unknown = sorted(k for k in body if k not in ROBOT_FIELDS)
    if unknown:
        raise LabError(f"unknown field '{str(unknown[0])[:40]}'", "accepted: gains, nominal")
    if not any(k in body for k in ROBOT_FIELDS):
        raise LabError("nothing to change", 'send {"gains": {joint: [kp, kd]}} and/or {"nominal": {joint: angle}}')
    gains = check_gains(robot, body["gains"]) if "gains" in body else None
    nominal = check_angles(robot, body["nominal"], "nominal") if "nominal" in body else None
    if gains:
        kp, kd = session.gains.kp.copy(), session.gains.kd.copy()
        for i, (p, d) in gains.items():
            kp[i], kd[i] = p, d
        session.set_gains(kp, kd)
    if nominal:
        q = robot.q_nominal.copy()
        for i, v in nominal.items():
            q[i] = v
        session.set_nominal(q)
    return jsonify(robot_dict(robot, session))


def sidecar_dict(robot, session) -> dict:
    """The gains and nominal pose now, in the format of ``<model>.lab.json`` (one exact pattern per joint)."""
    kp, kd = session.gains.kp, session.gains.kd
    names = robot.joint_names
    return {
        "gains": {f"^{re.escape(n)}$": [float(kp[i]), float(kd[i])] for i, n in enumerate(names)},
        "nominal": {f"^{re.escape(n)}$": float(robot.q_nominal[i]) for i, n in enumerate(names)},
    }


def sidecar_text(doc: dict) -> str:
    """``doc`` as JSON a person can read and edit: one joint per line."""
    parts = []
    for key, table in doc.items():
        rows = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in table.items())
        parts.append(f"  {json.dumps(key)}: {{\n{rows}\n  }}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


@bp.get("/api/robot/sidecar")
def api_robot_sidecar():
    robot, session = _lab()
    filename = re.sub(r"[^A-Za-z0-9._-]", "_", robot.path.name) + ".lab.json"
    return Response(
        sidecar_text(sidecar_dict(robot, session)),
        mimetype="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@bp.post("/api/pose")
@require_token
def api_pose():
    """Targets for some joints in ``pose`` mode (the rest hold); 409 in any other mode."""
    body = json_body()
    robot, session = _lab()
    unknown = sorted(k for k in body if k != "q")
    if unknown:
        raise LabError(f"unknown field '{str(unknown[0])[:40]}'", 'send {"q": {joint: angle [rad]}}')
    if "q" not in body:
        raise LabError("missing field 'q'", f'send {{"q": {{"{robot.joint_names[0]}": 0.1}}}}')
    targets = check_angles(robot, body["q"], "q")
    held = session.set_pose(targets)
    return jsonify({"mode": "pose", "targets": {n: float(held[i]) for i, n in enumerate(robot.joint_names)}})
