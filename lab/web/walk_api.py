"""The feedback walker's velocity command: ``POST /api/walk {"vx", "vy", "yaw_rate"}`` and ``GET /api/walk``.

A command is checked whole before anything is applied: each given field must be a finite number inside
the walker's bounds (:class:`~lab.walking.dcm.FeedbackParams`), unknown fields are refused, missing ones
keep their value. In any mode other than ``walk`` the command selects ``walk`` first. The walker replans
its footsteps from the next step on (the step in the air finishes where the DCM needs it).
"""

import math

from flask import Blueprint, jsonify

from lab.errors import LabError
from lab.runtime.realtime import WALK_COMMAND
from lab.walking.dcm import FeedbackParams
from lab.web.common import json_body, require_token

_P = FeedbackParams()
BOUNDS = {"vx": _P.vx_max, "vy": _P.vy_max, "yaw_rate": _P.yaw_rate_max}  # |value| at most [m/s, m/s, rad/s]
UNITS = {"vx": "m/s", "vy": "m/s", "yaw_rate": "rad/s"}
EXAMPLE = '{"vx": 0.15, "vy": 0.0, "yaw_rate": 0.0}'


def check_command(body) -> dict:
    """The fields of a walk command, as floats; a 400 :class:`LabError` names the first bad one."""
    if not isinstance(body, dict) or not body:
        raise LabError("a walk command is a JSON object with vx, vy and/or yaw_rate", f"send e.g. {EXAMPLE}")
    extra = sorted(k for k in body if k not in WALK_COMMAND)
    if extra:
        raise LabError(f"unknown walk field(s): {', '.join(map(str, extra[:8]))}", f"fields: {', '.join(WALK_COMMAND)}")
    out = {}
    for k, v in body.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise LabError(f"'{k}' must be a finite number, got {str(v)[:40]!r}", f"send e.g. {EXAMPLE}")
        if abs(float(v)) > BOUNDS[k] + 1e-12:
            raise LabError(
                f"'{k}' = {float(v):g} {UNITS[k]} is beyond the walker's bound ±{BOUNDS[k]:g} {UNITS[k]}",
                "bounds: " + ", ".join(f"|{n}| <= {b:g} {UNITS[n]}" for n, b in BOUNDS.items()),
            )
        out[k] = float(v)
    return out


def walk_blueprint(name: str, runner) -> Blueprint:
    """``GET/POST /api/walk`` in front of ``runner()`` (the Lab's session or Sim2Sim's lockstep: both have
    ``set_walk`` and ``walk_state``)."""
    bp = Blueprint(f"{name}_walk", __name__)

    @bp.get("/api/walk")
    def api_walk_state():
        state = runner().walk_state()
        return jsonify({"walking": state is not None, **(state or {}), "bounds": BOUNDS})

    @bp.post("/api/walk")
    @require_token
    def api_walk():
        command = check_command(json_body())
        held = runner().set_walk(command)
        return jsonify({"mode": "walk", "command": held, "bounds": BOUNDS})

    return bp
