"""OpenAPI 3.0.3 descriptions of the four services' HTTP APIs, served at ``GET /api/openapi.json``.

One dict per service, built by :func:`build_spec` from the same constants the handlers check (push
limits, real-time factor range, control limits, render presets, scan kinds), so a limit changed in
the code changes here too. ``register(app)`` adds the route; :func:`lab.web.common.register_common`
calls it for every app it sets up. The service is found when the spec is asked for: the app's
``LAB_SERVICE`` config key, else the app's name when it is one of :data:`SERVICES`, else what the
app holds (``extensions["state_sim"]``: the state server, ``"sim2sim"``, ``"lab"``).

Every error is ``{"error": str, "hint": str}`` (the state server adds ``"status": "rejected"`` to a
refused control; the Lab's remote proxy adds ``remote_url``/``remote_status``). Statuses other
engineers' request checks may answer on any route are described too: 401 (missing or wrong bearer
token, only when the service was started with ``--token``), 403 (Origin/Host refused), 413 (body too
large), 415 (a body that is not ``application/json``). WebSocket routes are not HTTP operations;
they are listed under ``x-websockets``.
"""

import copy

from flask import current_app, jsonify

OPENAPI_PATH = "/api/openapi.json"
SERVICES = ("lab", "sim2sim", "state-server", "policy-server")
TITLES = {
    "lab": "Humanoid Sim Lab: the Lab (:8765)",
    "sim2sim": "Sim2Sim (:8767)",
    "state-server": "State server (:8766)",
    "policy-server": "Policy server (:8768)",
}

JSON = "application/json"
NUM = {"type": "number"}
NUM_N = {"type": "number", "nullable": True}
INT = {"type": "integer"}
INT_N = {"type": "integer", "nullable": True}
STR = {"type": "string"}
STR_N = {"type": "string", "nullable": True}
BOOL = {"type": "boolean"}
OBJ = {"type": "object"}
OBJ_N = {"type": "object", "nullable": True}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(props: dict, required=None, extra: bool = True, nullable: bool = False) -> dict:
    """An object schema; ``required`` defaults to every listed property."""
    s = {"type": "object", "properties": props, "required": list(props) if required is None else list(required)}
    if not s["required"]:
        del s["required"]
    if not extra:
        s["additionalProperties"] = False
    if nullable:
        s["nullable"] = True
    return s


def arr(items: dict, n: int | None = None, nullable: bool = False) -> dict:
    s = {"type": "array", "items": items}
    if n is not None:
        s["minItems"] = s["maxItems"] = n
    if nullable:
        s["nullable"] = True
    return s


def rng(lo: float, hi: float, **kw) -> dict:
    return {"type": "number", "minimum": lo, "maximum": hi, **kw}


# ---------------------------------------------------------------- components shared by every service

ERROR_STATUSES = {
    400: "bad input: malformed JSON, not an object, a missing/unknown field, a value outside its range",
    401: "missing or wrong bearer token (only when the service was started with --token)",
    403: "request refused: Origin or Host not allowed",
    404: "no such route or resource",
    405: "method not allowed on this path",
    409: "conflict with the current state",
    413: "request body too large",
    429: "too much at once: exports waiting or replay views open (the message says which)",
    415: "unsupported media type: send Content-Type: application/json",
    502: "the state server cannot be reached",
    503: "the service is stopping",
    507: "the results folder cannot be written (permissions, disk full)",
}
RESPONSE_NAMES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "PayloadTooLarge",
    429: "TooManyRequests",
    415: "UnsupportedMediaType",
    502: "BadGateway",
    503: "Unavailable",
    507: "InsufficientStorage",
}


def _common_components() -> dict:
    error = obj({"error": STR, "hint": STR}, extra=True)
    error["description"] = "Every refusal: what was wrong and what to do."
    return {
        "schemas": {
            "Error": error,
            "Identity": obj(
                {
                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    "short": STR,
                    "file": STR,
                    "mujoco": STR,
                    "nq": INT,
                    "nv": INT,
                    "nu": INT,
                }
            ),
            "SimInfo": obj(
                {
                    "state": {"type": "string", "enum": ["running", "paused", "error", "diverged"]},
                    "error": STR_N,
                    "at": NUM_N,
                    "resets": INT,
                }
            ),
        },
        "responses": {
            RESPONSE_NAMES[c]: {"description": d, "content": {JSON: {"schema": ref("Error")}}}
            for c, d in ERROR_STATUSES.items()
        },
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "the --token value"}},
    }


def _errors(*codes) -> dict:
    return {str(c): {"$ref": f"#/components/responses/{RESPONSE_NAMES[c]}"} for c in codes}


def _json_ok(schema: dict, description: str = "OK", status: int = 200) -> dict:
    return {str(status): {"description": description, "content": {JSON: {"schema": schema}}}}


def _body(schema: dict, required: bool = True) -> dict:
    return {"required": required, "content": {JSON: {"schema": schema}}}


def op(
    summary: str,
    responses: dict,
    *,
    body=None,
    params=None,
    token: bool = False,
    post: bool = False,
    op_id: str = "",
    tags=(),
) -> dict:
    """One operation; every one may answer 403 and 405, a POST also 413/415, a guarded one 401."""
    codes = [403, 405]
    if post:
        codes += [413, 415]
    if token:
        codes.append(401)
    out = {"summary": summary, "operationId": op_id, "responses": {**responses, **_errors(*codes)}}
    if tags:
        out["tags"] = list(tags)
    if body is not None:
        out["requestBody"] = body
    if params:
        out["parameters"] = params
    if token:
        out["security"] = [{}, {"bearer": []}]
    return out


def _sort_responses(spec: dict) -> dict:
    for item in spec["paths"].values():
        for o in item.values():
            o["responses"] = dict(sorted(o["responses"].items()))
    return spec


def _html(summary: str, op_id: str) -> dict:
    return {
        "get": op(
            summary,
            {"200": {"description": "the page", "content": {"text/html": {"schema": STR}}}},
            op_id=op_id,
            tags=["pages"],
        )
    }


# ---------------------------------------------------------------- the Lab and Sim2Sim control API


def _push_props() -> dict:
    from lab.control.modes import PushParams

    units = {
        "force_n": "N along +x on the torso",
        "duration_s": "s",
        "period_s": "s",
        "first_s": "s after the mode starts",
    }
    return {k: rng(lo, hi, description=units[k]) for k, (lo, hi) in PushParams.LIMITS.items()}


def _metrics_schema(engine_extra: bool = False) -> dict:
    props = {
        "sim_time": NUM,
        "pelvis_z": NUM_N,
        "forward_x": NUM_N,
        "pitch_deg": NUM_N,
        "roll_deg": NUM_N,
        "max_joint_err": NUM_N,
        "com": arr(NUM_N, nullable=True),
        "cop": arr(NUM_N, nullable=True),
        "support": {"type": "string", "enum": ["none", "left", "right", "double"]},
        "margin": NUM_N,
        "pelvis_z_target": NUM_N,
        "push": BOOL,
    }
    s = obj(props, required=["sim_time", "pelvis_z", "support"])
    s["properties"]["extras"] = OBJ
    if engine_extra:
        s["properties"]["fall_time"] = NUM_N
    return s


def _stream_stats() -> dict:
    return obj(
        {
            "view": STR,
            "fps": NUM,
            "fps_target": NUM,
            "renders": INT,
            "render_ms": NUM_N,
            "encode_ms": NUM_N,
            "subscribers": INT,
            "error": STR_N,
        }
    )


def _control_paths(service: str, modes: list, status_ref: dict, metrics_schema: dict) -> dict:
    from lab.render.renderer import PRESETS

    push = _push_props()
    push_obj = obj(dict(push), required=[], extra=False)
    mode_body = obj(
        {"mode": {"type": "string", "enum": list(modes)}, **copy.deepcopy(push)}, required=["mode"], extra=False
    )
    mode_body["description"] = "a mode, optionally with new push settings; duration_s must be shorter than period_s"
    push_obj["description"] = "any subset of the push settings; duration_s must be shorter than period_s"
    t = [service]
    paths = {
        "/api/status": {"get": op("status", _json_ok(status_ref), op_id=f"{service}_status", tags=t)},
        "/api/metrics": {
            "get": op("latest metrics sample", _json_ok(metrics_schema), op_id=f"{service}_metrics", tags=t)
        },
        "/api/history": {
            "get": op(
                "samples after sim time `since`",
                {**_json_ok(obj({"samples": arr(OBJ)})), **_errors(400)},
                params=[
                    {"name": "since", "in": "query", "required": False, "description": "sim time [s]", "schema": NUM}
                ],
                op_id=f"{service}_history",
                tags=t,
            )
        },
        "/api/mode": {
            "post": op(
                "switch mode (zero is never blocked by the token)",
                {**_json_ok(status_ref), **_errors(400)},
                body=_body(mode_body),
                token=True,
                post=True,
                op_id=f"{service}_mode",
                tags=t,
            )
        },
        "/api/push": {
            "post": op(
                "change the push",
                {**_json_ok(obj({"push": obj(push)})), **_errors(400)},
                body=_body(push_obj),
                token=True,
                post=True,
                op_id=f"{service}_push",
                tags=t,
            )
        },
        "/api/reset": {
            "post": op(
                "back to the start state, time 0",
                _json_ok(status_ref),
                token=True,
                post=True,
                op_id=f"{service}_reset",
                tags=t,
            )
        },
        "/api/pause": {
            "post": op(
                "pause or resume (pausing is never blocked by the token)",
                {**_json_ok(status_ref), **_errors(400)},
                body=_body(obj({"paused": BOOL}, extra=True)),
                token=True,
                post=True,
                op_id=f"{service}_pause",
                tags=t,
            )
        },
        "/api/render": {
            "post": op(
                "render quality preset",
                {**_json_ok(status_ref), **_errors(400)},
                body=_body(obj({"preset": {"type": "string", "enum": list(PRESETS)}}, extra=True)),
                token=True,
                post=True,
                op_id=f"{service}_render",
                tags=t,
            )
        },
    }
    return paths


def _runner_status_props(modes: list) -> dict:
    return {
        "service": STR,
        "mode": {"type": "string", "enum": list(modes)},
        "modes": arr(STR),
        "sim": ref("SimInfo"),
        "paused": BOOL,
        "sim_time": NUM,
        "rtf": NUM,
        "rtf_target": NUM,
        "push": obj(_push_props()),
        "identity": ref("Identity"),
        "model": obj({"file": STR, "nq": INT, "nv": INT, "nu": INT}, extra=True),
        "auth": BOOL,
    }


def lab_spec(modes: list, remote: bool = True, scans: bool = True, app=None) -> dict:
    from lab.runtime.realtime import RTF_RANGE

    comps = _common_components()
    status_props = _runner_status_props(modes)
    status_props.update(
        fall_time=NUM_N,
        render=obj(
            {
                "width": INT,
                "height": INT,
                "preset": STR,
                "presets": arr(STR),
                "default_preset": STR,
                "gl": obj({"renderer": STR_N, "software": BOOL}, extra=True),
                "fps": NUM,
                "renders": INT,
                "render_ms": NUM_N,
                "encode_ms": NUM_N,
                "subscribers": INT,
            }
        ),
        links=OBJ,
    )
    comps["schemas"]["LabStatus"] = obj(status_props)
    metrics = _metrics_schema()
    metrics["properties"].update(rtf=NUM, mode=STR, paused=BOOL, fall_time=NUM_N, sim=ref("SimInfo"))
    metrics["required"] += ["rtf", "mode", "paused", "sim"]
    status_ref = ref("LabStatus")
    paths = {"/": _html("the Lab page", "lab_page")}
    paths.update(_control_paths("lab", modes, status_ref, metrics))
    paths.update(_parity_paths("lab"))  # GET /api/pybullet_notes
    lo, hi = RTF_RANGE
    paths["/api/rtf"] = {
        "post": op(
            "real-time factor the simulation is paced to",
            {**_json_ok(status_ref), **_errors(400)},
            body=_body(obj({"rtf": rng(lo, hi)}, extra=True)),
            token=True,
            post=True,
            op_id="lab_rtf",
            tags=["lab"],
        )
    }
    if remote:
        paths.update(_remote_paths(comps))
    if scans:
        paths.update(_scan_paths(comps, app))
    if app is None or "robot" in app.blueprints:
        paths.update(_robot_paths(comps, app))
    paths.update(_walk_paths("lab"))  # GET/POST /api/walk
    if app is None or "lab_models" in app.blueprints:
        paths.update(_models_paths(comps, "lab"))
    if app is None or "signals" in app.blueprints:
        paths.update(_signals_paths())  # GET /api/signals
    if app is None or "recordings" in app.blueprints:
        paths.update(_recordings_paths(comps, "lab"))  # /api/recordings (lab/web/recordings_api.py)
    if app is None or "replay" in app.blueprints:
        paths.update(_replay_paths(comps))  # /replay, timeline, state, exports (lab/web/replay_page.py)
    ws = {"/ws": "frames (binary JPEG after a text header), metrics at 25 Hz, status (lab/web/messages.py)"}
    if app is None or "signals" in app.blueprints:
        ws["/ws"] += (
            '; {"type": "signals", "names": [...]} picks signals of GET /api/signals (answered signals_picked'
            ' {names, units, hz} or an error about signals), then {"type": "signals", "t", "names", "values"}'
            " at 25 Hz (lab/web/signals.py)"
        )
    if remote:
        ws["/ws/remote"] = "frames of the remote robot and the monitor status at 10 Hz"
    if app is None or "replay" in app.blueprints:
        ws["/ws/replay?id=ID"] = (
            "frames of a recording at this viewer's cursor (a header's sim_time: the recording time shown), the"
            ' cursor {t, playing, speed, duration_s, seek_ms} as metrics at 20 Hz; {"type": "replay", "t"?,'
            ' "playing"?, "speed"? (0.1..4), "step"? (frames)} moves it (answered cursor); camera, overlays, pick'
        )
    return _spec("lab", paths, comps, ws)


def sim2sim_spec(modes: list) -> dict:
    comps = _common_components()
    status_props = _runner_status_props(modes)
    engine = obj({"name": STR, "version": STR, "dt": NUM, "total_mass": NUM_N, "sim_time": NUM, "label": STR})
    status_props.update(
        engines={"type": "object", "additionalProperties": engine},
        mass_warning=STR_N,
        error=STR_N,
        control=obj({"law": STR, "gravity_ff": BOOL, "gravity_ff_requested": BOOL, "tick_s": NUM}),
        render=obj(
            {
                "width": INT,
                "height": INT,
                "fps": NUM,
                "preset": STR,
                "presets": arr(STR),
                "default_preset": STR,
                "gl": OBJ,
                "views": {"type": "object", "additionalProperties": _stream_stats()},
                "labels": {"type": "object", "additionalProperties": STR},
            }
        ),
    )
    comps["schemas"]["Sim2SimStatus"] = obj(status_props)
    metrics = obj(
        {
            "sim_time": NUM,
            "mode": STR,
            "push": BOOL,
            "engines": {"type": "object", "additionalProperties": _metrics_schema(engine_extra=True)},
            "divergence": obj(
                {
                    "sim_time": NUM,
                    "pelvis_dz": NUM_N,
                    "joint_rms": NUM_N,
                    "joint_max": NUM_N,
                    "base_dxy": NUM_N,
                    "pitch_diff_deg": NUM_N,
                }
            ),
            "rtf": NUM,
            "paused": BOOL,
            "resets": INT,
            "sim": ref("SimInfo"),
            "fps": {"type": "object", "additionalProperties": NUM},
        }
    )
    paths = {"/": _html("the Sim2Sim page", "sim2sim_page")}
    paths.update(_control_paths("sim2sim", modes, ref("Sim2SimStatus"), metrics))
    paths.update(_parity_paths("sim2sim"))  # GET /api/parity
    paths.update(_sim2sim_walk_paths())  # GET/POST /api/walk, GET /api/steps
    paths.update(_models_paths(comps, "sim2sim"))
    paths.update(_recordings_paths(comps, "sim2sim"))  # /api/recordings (lab/web/recordings_api.py)
    ws = {"/ws?views=mujoco,pybullet[,overlay]": "frames tagged by view, metrics at 25 Hz; unknown view -> error"}
    return _spec("sim2sim", paths, comps, ws)


# ---------------------------------------------------------------- the model picker (Lab and Sim2Sim)


def _models_paths(comps: dict, service: str) -> dict:
    """``GET /api/models``, ``POST /api/model`` and ``POST /api/models/upload`` (lab/web/models_api.py)."""
    entry = obj(
        {
            "id": {**STR, "description": "builtin, startup (the --model file) or the path inside the models folder"},
            "name": STR,
            "file": STR,
            "kind": {"type": "string", "enum": ["urdf", "mjcf"]},
            "size": {**INT, "description": "bytes of the model file"},
            "usable": {**BOOL, "description": "this service can run it (Sim2Sim: URDF only)"},
            "current": BOOL,
        }
    )
    comps["schemas"]["ModelEntry"] = entry
    t = [f"{service}-models"]
    listing = obj(
        {
            "models": arr(ref("ModelEntry")),
            "current": STR,
            "folder": STR,
            "service": STR,
            "max_upload": {**INT, "description": "bytes"},
        }
    )
    switched = obj({"current": STR, "model": ref("ModelEntry"), "identity": ref("Identity")})
    zip_body = {"type": "string", "format": "binary", "description": "the zip of a robot folder"}
    upload_body = {
        "required": True,
        "content": {
            "application/zip": {"schema": zip_body},
            "multipart/form-data": {
                "schema": obj(
                    {"file": zip_body, "model": {**STR, "description": "which model file, when the zip has several"}},
                    required=["file"],
                )
            },
        },
    }
    return {
        "/api/models": {
            "get": op("the models this service may switch to", _json_ok(listing), op_id=f"{service}_models", tags=t)
        },
        "/api/model": {
            "post": op(
                "switch the running robot (loaded and checked first; a failing model leaves the running one alone)",
                {**_json_ok(switched), **_errors(400, 409)},
                body=_body(obj({"id": STR}, extra=True)),
                token=True,
                post=True,
                op_id=f"{service}_model",
                tags=t,
            )
        },
        "/api/models/upload": {
            "post": op(
                "upload a zipped robot folder: extracted safely, its model loaded to check it, then listed",
                {**_json_ok(obj({"model": ref("ModelEntry")}), "uploaded and listed", 201), **_errors(400, 409)},
                body=upload_body,
                token=True,
                post=True,
                op_id=f"{service}_models_upload",
                tags=t,
            )
        },
    }


# ---------------------------------------------------------------- the robot panel (on the Lab)


def _robot_paths(comps: dict, app=None) -> dict:
    """``/api/robot``, ``/api/robot/sidecar`` and ``/api/pose`` (lab/web/robot_api.py)."""
    from lab.control.pose import GAIN_MAX

    joint = obj(
        {
            "name": STR,
            "actuator": STR,
            "lower": {**NUM_N, "description": "joint range [rad]; null when unlimited"},
            "upper": NUM_N,
            "tau_limit": {**NUM_N, "description": "N·m"},
            "kp": {**NUM, "description": "N·m/rad"},
            "kd": {**NUM, "description": "N·m·s/rad"},
            "nominal": {**NUM, "description": "rad"},
            "q": NUM_N,
            "target": NUM_N,
            "error": {**NUM_N, "description": "target - q [rad]"},
            "tau": {**NUM_N, "description": "last commanded torque [N·m]"},
            "saturated": BOOL,
        }
    )
    joint["properties"]["gain_note"] = STR_N
    comps["schemas"]["RobotJoint"] = joint
    comps["schemas"]["Robot"] = obj(
        {
            "file": STR,
            "kind": STR,
            "builtin": BOOL,
            "nu": INT,
            "total_mass": NUM,
            "standing_height": NUM,
            "gains_source": STR,
            "mode": STR,
            "sim_time": NUM,
            "gain_max": NUM,
            "joints": arr(ref("RobotJoint")),
        }
    )
    names = []
    if app is not None and app.extensions.get("lab", {}).get("robot") is not None:
        names = list(app.extensions["lab"]["robot"].joint_names)
    pair = arr(rng(0, GAIN_MAX), 2)
    pair["description"] = "[kp N·m/rad, kd N·m·s/rad]"

    def by_joint(value: dict, description: str) -> dict:
        s = {"type": "object", "minProperties": 1, "additionalProperties": value, "description": description}
        if names:
            s["properties"] = {n: copy.deepcopy(value) for n in names}
        return s

    angle = {**NUM, "description": "rad, inside the joint range"}
    change = obj(
        {
            "gains": by_joint(pair, "actuated joint name -> [kp, kd]"),
            "nominal": by_joint(angle, "actuated joint name -> nominal angle"),
        },
        required=[],
        extra=False,
    )
    change["description"] = "gains and/or nominal angles, checked whole before any is applied"
    sidecar = obj(
        {
            "gains": {"type": "object", "additionalProperties": arr(NUM, 2)},
            "nominal": {"type": "object", "additionalProperties": NUM},
        }
    )
    pose = obj({"q": by_joint(angle, "actuated joint name -> target angle")}, extra=False)
    held = obj(
        {"mode": {"type": "string", "enum": ["pose"]}, "targets": {"type": "object", "additionalProperties": NUM}}
    )
    t = ["robot"]
    return {
        "/api/robot": {
            "get": op(
                "the robot and every actuated joint, live (actuator order)",
                _json_ok(ref("Robot")),
                op_id="robot",
                tags=t,
            ),
            "post": op(
                "change PD gains and/or the nominal pose of the running simulation",
                {**_json_ok(ref("Robot")), **_errors(400)},
                body=_body(change),
                token=True,
                post=True,
                op_id="robot_change",
                tags=t,
            ),
        },
        "/api/robot/sidecar": {
            "get": op(
                "the gains and nominal pose now as <model>.lab.json (an attachment)",
                {
                    "200": {
                        "description": "the sidecar file (Content-Disposition: attachment)",
                        "headers": {"Content-Disposition": {"schema": STR}},
                        "content": {JSON: {"schema": sidecar}},
                    }
                },
                op_id="robot_sidecar",
                tags=t,
            )
        },
        "/api/pose": {
            "post": op(
                "joint targets of the pose mode (the other joints hold); 409 in any other mode",
                {**_json_ok(held), **_errors(400, 409)},
                body=_body(pose),
                token=True,
                post=True,
                op_id="pose",
                tags=t,
            )
        },
        "/api/events": {
            "get": op(
                "what viewers did to the simulation (the mouse pulls of the 3D view), newest last",
                _json_ok(obj({"events": arr(OBJ)})),
                op_id="events",
                tags=t,
            )
        },
    }


# ---------------------------------------------------------------- the remote monitor (on the Lab)


def _control_body(allowed, duration_max: float, demo: float) -> dict:
    s = obj(
        {
            "actuator": {"type": "string", "enum": list(allowed)} if allowed else STR,
            "value": rng(-demo, demo, description="torque [N·m], inside the model ctrlrange and the demo limit"),
            "duration_s": {
                "type": "number",
                "minimum": 0,
                "exclusiveMinimum": True,
                "maximum": duration_max,
                "description": "seconds of simulation time",
            },
        },
        extra=False,
    )
    s["description"] = "one self-expiring actuator command"
    return s


def _accepted_schema() -> dict:
    return obj(
        {
            "status": {"type": "string", "enum": ["accepted"]},
            "id": INT,
            "actuator": STR,
            "value": NUM,
            "duration_s": NUM,
            "start_time": NUM,
            "expires_at": NUM,
            "model_range": arr(NUM_N, 2),
            "demo_range": arr(NUM, 2),
            "server_instance_id": STR,
        }
    )


def _command_schema(nullable: bool = True) -> dict:
    return obj(
        {"id": INT, "actuator": STR, "value": NUM, "duration_s": NUM, "start_time": NUM, "expires_at": NUM},
        nullable=nullable,
    )


def _remote_paths(comps: dict) -> dict:
    from lab.remote.protocol import DEFAULT_ALLOWED, DEMO_LIMIT, MAX_DURATION_S

    states = ["CONNECTED", "STALE", "DISCONNECTED", "MISMATCH"]
    comps["schemas"]["RemoteStatus"] = obj(
        {
            "state": {"type": "string", "enum": states},
            "url": STR_N,
            "state_age_s": NUM_N,
            "sequence": INT_N,
            "simulation_time": NUM_N,
            "server_instance_id": STR_N,
            "model": OBJ_N,
            "local_identity": ref("Identity"),
            "mode": STR_N,
            "active_control": OBJ_N,
            "last_error": STR_N,
            "mismatch": STR_N,
            "sequence_backwards": INT,
            "updates_per_s": NUM,
            "events": arr(obj({"t": NUM, "kind": STR, "text": STR})),
            "live": BOOL,
            "local_dynamics": {"type": "string", "enum": ["disabled"]},
            "allowed_actuators": arr(STR),
            "demo_range": arr(NUM, 2),
            "max_duration_s": NUM,
            "render": _stream_stats(),
        }
    )
    proxied = {"remote_url": STR, "remote_status": INT}
    remote_error = copy.deepcopy(comps["schemas"]["Error"])
    remote_error["properties"].update(proxied)
    comps["schemas"]["RemoteError"] = remote_error
    accepted = _accepted_schema()
    accepted["properties"].update(proxied)
    accepted["required"] += list(proxied)

    def proxied_error(code):
        return {
            str(code): {
                "description": f"{ERROR_STATUSES[code]} (the state server's answer, or the Lab's own)",
                "content": {JSON: {"schema": ref("RemoteError")}},
            }
        }

    stopped = obj({"status": {"type": "string", "enum": ["stopped"]}, "cancelled": _command_schema(), **proxied})
    t = ["remote"]
    paths = {
        "/remote": _html("the remote monitor page", "remote_page"),
        "/api/remote/status": {
            "get": op(
                "the monitor's view of the state server", _json_ok(ref("RemoteStatus")), op_id="remote_status", tags=t
            )
        },
        "/api/remote/connect": {
            "post": op(
                "watch another state server",
                {**_json_ok(ref("RemoteStatus")), **_errors(400)},
                body=_body(
                    obj({"url": {"type": "string", "minLength": 1, "example": "http://127.0.0.1:8766"}}, extra=True)
                ),
                token=True,
                post=True,
                op_id="remote_connect",
                tags=t,
            )
        },
        "/api/remote/control": {
            "post": op(
                "forward a command to the state server (its status code and answer come back)",
                {
                    "202": {"description": "accepted by the state server", "content": {JSON: {"schema": accepted}}},
                    **proxied_error(400),
                    **proxied_error(409),
                    **proxied_error(413),
                    **_errors(502),
                },
                body=_body(_control_body(DEFAULT_ALLOWED, MAX_DURATION_S, DEMO_LIMIT)),
                token=True,
                post=True,
                op_id="remote_control",
                tags=t,
            )
        },
        "/api/remote/stop": {
            "post": op(
                "cancel the state server's active command (never blocked by the token)",
                {**_json_ok(stopped), **_errors(409, 502)},
                post=True,
                op_id="remote_stop",
                tags=t,
            )
        },
    }
    paths.update(_remote_runtime_paths(comps))
    return paths


def _remote_runtime_paths(comps: dict) -> dict:
    """The Lab's pass-through to the state server's runtime (``lab.remote.protocol.RUNTIME_ACTIONS``): the
    state server's status code and answer come back as they are."""
    from lab.remote.protocol import RUNTIME_ACTIONS

    _runtime_components(comps)
    bodies = _runtime_bodies()
    fields = {}
    for action, b in bodies.items():
        for k, v in b["properties"].items():
            fields[k] = {**v, "description": f"{action}: " + v.get("description", k)}
    body = obj(fields, required=[])
    body["description"] = "sent on as it is; each action reads its own fields: " + "; ".join(
        f"{a}: {', '.join(b['properties'])}" for a, b in bodies.items()
    )
    gated = [a for a, (_, g) in RUNTIME_ACTIONS.items() if g]
    action = {
        "name": "action",
        "in": "path",
        "required": True,
        "description": "; ".join(f"{a} -> POST {path}" for a, (path, _) in RUNTIME_ACTIONS.items())
        + f" (on the state server); the token gates {', '.join(gated)}, never a stop",
        "schema": {"type": "string", "enum": list(RUNTIME_ACTIONS)},
    }

    def passed(*codes):
        return {
            str(c): {
                "description": f"{ERROR_STATUSES[c]} (the state server's answer, or the Lab's own)",
                "content": {JSON: {"schema": ref("Error")}},
            }
            for c in codes
        }

    answer = {"oneOf": [ref("RuntimeStatus"), ref("Arming")], "description": "arm: Arming; else RuntimeStatus"}
    t = ["remote"]
    return {
        "/api/remote/runtime": {
            "get": op(
                "the state server's runtime (GET /api/v1/runtime), passed through",
                {**_json_ok(ref("RuntimeStatus")), **passed(404, 409), **_errors(502)},
                op_id="remote_runtime",
                tags=t,
            )
        },
        "/api/remote/runtime/{action}": {
            "post": op(
                "one of the state server's runtime actions, passed through (409: no state server connected)",
                {**_json_ok(answer), **passed(400, 401, 404, 409, 413), **_errors(502)},
                params=[action],
                body=_body(body, required=False),
                token=True,
                post=True,
                op_id="remote_runtime_action",
                tags=t,
            )
        },
    }


# ---------------------------------------------------------------- scans (on the Lab)


def scan_kinds(app=None) -> dict:
    """name -> ScanKind: the app's scan manager's table if it has one, else the built-in registry."""
    manager = app.extensions.get("scans") if app is not None else None
    for attr in ("kinds", "_kinds"):
        table = getattr(manager, attr, None)
        if isinstance(table, dict) and table:
            return table
    try:
        from lab.scans.registry import KINDS
    except ImportError:
        from lab.scans.kinds import KINDS
    return KINDS


def _scan_paths(comps: dict, app=None) -> dict:
    from lab.scans import kinds as kinds_mod
    from lab.scans.manager import INLINE_POINTS, MAX_PAGE
    from lab.scans.points import STATUS_CODES, PointStatus, ScanStatus
    from lab.scans.search import MAX_STEPS, RESOLUTION

    table = scan_kinds(app)
    max_points = getattr(kinds_mod, "MAX_POINTS", 10_000)
    kinds = list(table)
    param_names = sorted({p.name for k in table.values() for p in k.params})
    number_params = sorted({p.name for k in table.values() for p in k.params if not p.is_choice})
    values = {
        "oneOf": [
            {"type": "array", "items": {"oneOf": [NUM, STR]}, "minItems": 1},
            NUM,
            {"type": "string", "description": 'a list "a, b, c" or a range "start:stop:step"'},
        ]
    }
    search = obj(
        {
            "param": {"type": "string", "enum": number_params, "description": "a number parameter of the kind"},
            "bisect": {**arr(NUM, 2), "description": "[lo, hi] inside the parameter's range, lo < hi"},
            "tol": {
                "type": "number",
                "minimum": RESOLUTION * 10,
                "description": f"the bracket's width at the end, in the parameter's unit (>= 1 for an integer one;"
                f" at most {MAX_STEPS} halvings)",
            },
        },
        extra=False,
    )
    search["description"] = (
        "bisect param on [lo, hi] per line of the grid's other parameters until the last PASS and the first FAIL"
        " are at most tol apart (kinds with a PASS/FAIL result; param is not in the grid)"
    )
    create = obj(
        {
            "kind": {"type": "string", "enum": kinds},
            "grid": {
                "type": "object",
                "properties": {n: values for n in param_names},
                "additionalProperties": False,
                "description": f"parameter -> values; at most {max_points} points; "
                "the parameters of the kind (GET /api/scans/kinds); with search: the other parameters, "
                "one line per combination (empty or left out: one line)",
            },
            "search": search,
            "executor": {"type": "string", "enum": ["local", "ray"]},
            "workers": {"type": "integer", "minimum": 1, "maximum": 256},
            "address": {"type": "string", "minLength": 1, "description": "ray only: 'auto' or 'ray://head:10001'"},
            "timeout_s": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 86400},
            "record": {
                **BOOL,
                "description": "each point keeps recording.mcap (kinds that list it as an artifact); default false",
            },
        },
        required=["kind"],
        extra=False,
    )
    create["anyOf"] = [{"required": ["grid"]}, {"required": ["search"]}]
    comps["schemas"]["ScanCreate"] = create
    point_status = {"type": "string", "enum": [s.value for s in PointStatus]}
    counts = obj({s.value: INT for s in PointStatus}, extra=True)
    run = obj(
        {
            "started_at": NUM,
            "finished_at": NUM_N,
            "status": {"type": "string", "enum": [s.value for s in ScanStatus]},
            "points": INT,
            "executor": STR,
            "workers": INT_N,
        }
    )
    metric = obj({"key": STR, "label": STR, "unit": STR, "better": STR_N})
    brief = obj(
        {
            "id": STR,
            "kind": STR,
            "title": STR,
            "status": {"type": "string", "enum": [s.value for s in ScanStatus]},
            "grid": {"type": "object", "additionalProperties": arr({}), "description": "axis -> its values"},
            "fixed": {**OBJ, "description": "parameter -> the one value it keeps"},
            "search": {**copy.deepcopy(search), "nullable": True},
            "executor": STR,
            "workers": INT_N,
            "address": STR_N,
            "timeout_s": NUM,
            "record": BOOL,
            "model": STR_N,
            "axes": arr(STR),
            "metrics": arr(metric),
            "heat_metric": STR,
            "pass_key": STR,
            "counts": counts,
            "done": {**INT, "description": "points done or in error"},
            "total": INT,
            "progress": {**rng(0, 1), "description": "a search: lines finished / lines"},
            "eta_s": NUM_N,
            "elapsed_s": NUM_N,
            "queue_position": {**INT_N, "description": "1: the next queued scan to start; null unless queued"},
            "max_running": INT,
            "created_at": NUM,
            "started_at": NUM_N,
            "finished_at": NUM_N,
            "runs": arr(run),
            "error": STR,
            "lines": obj({"total": INT, "done": INT}),
        },
        required=["id", "kind", "status", "grid", "fixed", "executor", "counts", "done", "total", "progress"]
        + ["eta_s", "elapsed_s", "queue_position", "max_running", "created_at", "runs"],
    )
    brief["properties"]["lines"]["description"] = "a search scan only: its lines, and those finished"
    comps["schemas"]["ScanBrief"] = brief
    point_rec = obj(
        {
            "index": INT,
            "params": OBJ,
            "status": point_status,
            "metrics": OBJ,
            "wall_s": NUM_N,
            "compute_s": NUM_N,
            "error": STR,
            "attempts": INT,
        },
        extra=True,
    )
    comps["schemas"]["ScanPoint"] = point_rec
    codes = "".join(STATUS_CODES.values())
    point_table = obj(
        {
            "n": INT,
            "axes": arr(STR),
            "values": {"type": "object", "additionalProperties": arr({}), "description": "parameter -> sorted values"},
            "coords": {
                "type": "object",
                "additionalProperties": arr(INT),
                "description": "axis -> per point the position of its value in values[axis] (-1: none)",
            },
            "status": {"type": "string", "pattern": f"^[{codes}]*$", "description": "one letter per point: " + codes},
            "pass": {"type": "string", "pattern": "^[01-]*$", "description": "per point: 1 PASS, 0 FAIL, - unknown"},
            "metrics": {
                "type": "object",
                "additionalProperties": arr(NUM_N),
                "description": "metric -> per point (booleans as 1/0, 6 significant digits, null where missing)",
            },
        }
    )
    point_table["description"] = "every point as columns (what the heatmap draws)"
    threshold = obj(
        {
            "params": OBJ,
            "param": STR,
            "bracket": {**arr(NUM_N, 2), "description": "[last PASS, first FAIL]; null where the range gave none"},
            "tol": NUM,
            "unit": STR,
            "points": INT,
            "status": {"type": "string", "enum": ["bracketed", "passes_at_hi", "fails_at_lo", "searching", "error"]},
            "label": STR,
        }
    )
    full = copy.deepcopy(brief)
    full["properties"].update(
        summary=OBJ,
        table=point_table,
        thresholds={**arr(threshold), "description": "a search scan only: one bracket per line"},
        points={
            **arr(ref("ScanPoint")),
            "description": f"every point of a scan of at most {INLINE_POINTS} points, else only when asked"
            " (?points=1: the page)",
        },
        points_page=obj({"offset": INT, "limit": INT, "total": INT}),
        added={**INT, "description": "refine only: the points it added"},
    )
    full["properties"]["points_page"]["description"] = "with ?points=1 (or offset/limit): which page points holds"
    full["required"] += ["summary", "table"]
    comps["schemas"]["Scan"] = full
    point = copy.deepcopy(point_rec)
    point["properties"].update(
        output_tail=STR,
        exit_code=INT_N,
        started_at=NUM_N,
        finished_at=NUM_N,
        files={**arr(STR), "description": "the point's files (recording.mcap: a scan launched with record)"},
        figure=STR_N,
    )
    point["required"] += ["files", "figure"]
    kind_schema = obj(
        {
            "name": STR,
            "title": STR,
            "description": STR,
            "params": arr(
                obj(
                    {
                        "name": STR,
                        "default": {"oneOf": [NUM, STR]},
                        "min": NUM_N,
                        "max": NUM_N,
                        "unit": STR,
                        "integer": BOOL,
                    },
                    extra=True,
                )
            ),
            "metrics": arr(metric),
            "heat_metric": STR,
            "pass_key": STR,
            "available": BOOL,
            "unavailable_reason": STR,
            "hidden": BOOL,
            "timeout_s": NUM,
            "artifacts": arr(STR),
        },
        extra=True,
    )
    sid = {"name": "scan_id", "in": "path", "required": True, "schema": STR}
    idx = {"name": "index", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}
    name = {"name": "name", "in": "path", "required": True, "schema": STR}
    page = [
        {
            "name": "points",
            "in": "query",
            "required": False,
            "description": f"1: a page of points; 0: none; left out: every point of a scan of at most {INLINE_POINTS}",
            "schema": {"type": "string", "enum": ["0", "1", "true", "false"]},
        },
        {
            "name": "offset",
            "in": "query",
            "required": False,
            "description": "the page's first point (implies points=1)",
            "schema": {"type": "integer", "minimum": 0, "maximum": max_points},
        },
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "description": f"points in the page (default and most {MAX_PAGE}; implies points=1)",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
        },
    ]
    refine = obj(
        {"axes": {**arr(STR), "minItems": 1, "description": "number axes of the scan (default: every one)"}},
        required=[],
        extra=False,
    )
    t = ["scans"]
    files = {
        m: {"schema": STR} for m in ("image/png", "text/csv", "text/plain", "text/html", "application/octet-stream")
    }
    files[JSON] = {"schema": {}}
    return {
        "/scans": _html("the scans page", "scans_page"),
        "/api/scans/kinds": {
            "get": op(
                "scan kinds: parameters with defaults and limits, metrics",
                _json_ok(
                    obj({"kinds": arr(kind_schema), "max_points": INT, "executors": arr(STR), "max_running": INT})
                ),
                op_id="scan_kinds",
                tags=t,
            )
        },
        "/api/scans": {
            "get": op(
                "every scan, newest first: counts and progress, no points, no table",
                _json_ok(obj({"scans": arr(ref("ScanBrief"))})),
                op_id="scan_list",
                tags=t,
            ),
            "post": op(
                "launch a scan (each point in a worker process): a grid of points, or a search per line",
                {**_json_ok(ref("Scan"), "created", 201), **_errors(400, 503)},
                body=_body(ref("ScanCreate")),
                token=True,
                post=True,
                op_id="scan_create",
                tags=t,
            ),
        },
        "/api/scans/{scan_id}": {
            "get": op(
                "one scan: counts, ETA, summary, the points as columns, a search's thresholds; points on request",
                {**_json_ok(ref("Scan")), **_errors(400, 404)},
                params=[sid, *page],
                op_id="scan_get",
                tags=t,
            )
        },
        "/api/scans/{scan_id}/cancel": {
            "post": op(
                "stop a queued or running scan",
                {**_json_ok(ref("Scan")), **_errors(404, 409)},
                params=[sid],
                token=True,
                post=True,
                op_id="scan_cancel",
                tags=t,
            )
        },
        "/api/scans/{scan_id}/refine": {
            "post": op(
                "add and run points along an ended sweep's PASS/FAIL boundary: the midpoint of each two neighbouring"
                " done points, one PASS and one FAIL (409: a search, still running, or no such boundary)",
                {**_json_ok(ref("Scan")), **_errors(400, 404, 409, 503)},
                params=[sid],
                body=_body(refine, required=False),
                token=True,
                post=True,
                op_id="scan_refine",
                tags=t,
            )
        },
        "/api/scans/{scan_id}/resume": {
            "post": op(
                "run the unfinished points again",
                {**_json_ok(ref("Scan")), **_errors(400, 404, 409)},
                params=[sid],
                body=_body(
                    obj(
                        {
                            "retry_errors": BOOL,
                            "executor": {"type": "string", "enum": ["local", "ray"]},
                            "workers": {"type": "integer", "minimum": 1, "maximum": 256},
                            "address": STR,
                        },
                        required=[],
                        extra=False,
                    ),
                    required=False,
                ),
                token=True,
                post=True,
                op_id="scan_resume",
                tags=t,
            )
        },
        "/api/scans/{scan_id}/results.csv": {
            "get": op(
                "the aggregated table as CSV",
                {"200": {"description": "CSV", "content": {"text/csv": {"schema": STR}}}, **_errors(404)},
                params=[sid],
                op_id="scan_results_csv",
                tags=t,
            )
        },
        "/api/scans/{scan_id}/results.json": {
            "get": op(
                "the aggregated table as JSON",
                {
                    **_json_ok(obj({"id": STR, "kind": STR, "columns": arr(STR), "rows": arr(OBJ)}, extra=True)),
                    **_errors(404),
                },
                params=[sid],
                op_id="scan_results_json",
                tags=t,
            )
        },
        "/api/scans/{scan_id}/points/{index}": {
            "get": op(
                "one point's record, its files and output tail",
                {**_json_ok(point), **_errors(404)},
                params=[sid, idx],
                op_id="scan_point",
                tags=t,
            )
        },
        "/api/scans/{scan_id}/points/{index}/{name}": {
            "get": op(
                "one of a point's files (recording.mcap: replayed at /replay?scan={scan_id}&point={index})",
                {"200": {"description": "the file", "content": files}, **_errors(404)},
                params=[sid, idx, name],
                op_id="scan_point_file",
                tags=t,
            )
        },
    }


# ---------------------------------------------------------------- remote control: the runtime (state server, Lab)


def _runtime_components(comps: dict) -> None:
    """``RuntimeStatus`` and ``Arming`` (lab/remote/state_sim.py, lab/remote/runtime.py) into ``comps``."""
    from lab.remote.runtime import ESTOP, HOLD, IDLE, REASONS, STREAMING

    comps["schemas"]["Arming"] = obj(
        {
            "armed": BOOL,
            "reason": {**STR_N, "description": "why the robot may move; null when not armed"},
            "expires_in_s": {**NUM, "minimum": 0, "description": "s of wall time left; 0 when not armed"},
        }
    )
    event = obj({"kind": STR, "t": NUM, "count": INT, "detail": STR, "text": STR})
    chunk = obj(
        {
            "id": STR,
            "observed_at": NUM,
            "age_ms": NUM,
            "arrival_age_ms": NUM,
            "actions_left": INT,
            "horizon": INT,
        },
        nullable=True,
    )
    chunk["description"] = "the chunk being followed; null before the first"
    states = [IDLE, STREAMING, HOLD, ESTOP, "breaker_open", "stopped"]
    status = obj(
        {
            "state": {
                "type": "string",
                "enum": states,
                "description": "estop while latched; stopped once a runtime ran and stopped; idle before any",
            },
            "running": BOOL,
            "estopped": BOOL,
            "arming": ref("Arming"),
            "faults": obj({"profile": STR, "seed": INT, "description": STR, "started_at": NUM}),
            "policy_url": STR_N,
            "events": {
                **arr(event),
                "description": "the runtime's last 40 events, repeats collapsed (t: s since start)",
            },
            "runtime_state": {"type": "string", "enum": [IDLE, STREAMING, HOLD, ESTOP]},
            "breaker": {"type": "string", "enum": ["closed", "open", "half_open"]},
            "hold_s": {**NUM, "description": "s spent holding in all"},
            "hold_for_s": {**NUM, "description": "s the current hold has lasted"},
            "phase": {**NUM, "description": "task phase executed [s]"},
            "lead_ms": NUM,
            "in_flight": INT,
            "chunk": chunk,
            "max_age_ms": NUM,
            "latency_ms": arr(NUM),
            "latency_p95_ms": NUM_N,
            "rejected": obj({r: INT for r in REASONS}),
            "counts": {"type": "object", "additionalProperties": INT},
            "invalid_sent": INT,
        },
        required=["state", "running", "estopped", "arming", "faults", "policy_url", "events"],
    )
    status["description"] = "the runtime following a policy server (its fields once one has run), arming, faults"
    comps["schemas"]["RuntimeStatus"] = status


def _runtime_bodies() -> dict:
    """The state server's runtime request bodies, by action (the Lab's pass-through names)."""
    from lab.remote.faults import PROFILES
    from lab.remote.state_sim import MAX_ARM_S

    arm = obj(
        {
            "reason": {"type": "string", "pattern": r"\S", "description": "why the robot may move (words)"},
            "expires_s": {
                "type": "number",
                "minimum": 0,
                "exclusiveMinimum": True,
                "maximum": MAX_ARM_S,
                "description": "s of wall time the arming lasts (default 60)",
            },
        },
        required=["reason"],
    )
    start = obj(
        {"policy_url": {"type": "string", "pattern": "^https?://", "example": "http://127.0.0.1:8768"}},
    )
    faults = obj(
        {
            "profile": {"type": "string", "enum": list(PROFILES)},
            "seed": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1, "description": "default 0"},
        },
        required=["profile"],
    )
    faults["description"] = "; ".join(f"{p.name}: {p.description}" for p in PROFILES.values())
    clear = obj({"confirm": {"type": "boolean", "enum": [True]}})
    return {"arm": arm, "start": start, "faults": faults, "estop/clear": clear}


def _runtime_paths(api: str) -> dict:
    """The state server's remote-control routes (lab/web/state_server.py): runtime, arm, start/stop, e-stop, faults."""
    bodies = _runtime_bodies()
    status = ref("RuntimeStatus")
    t = ["state-server-runtime"]

    def post(summary, op_id, body=None, token=True, codes=(400,)):
        return {
            "post": op(
                summary,
                {**_json_ok(status), **_errors(*codes)},
                body=_body(body) if body is not None else None,
                token=token,
                post=True,
                op_id=op_id,
                tags=t,
            )
        }

    arm = post("arm motion for expires_s with a reason", "runtime_arm", bodies["arm"])
    arm["post"]["responses"]["200"] = _json_ok(ref("Arming"))["200"]
    return {
        f"{api}/runtime": {
            "get": op("the runtime, arming, faults", _json_ok(status), op_id="runtime_status", tags=t),
        },
        f"{api}/arm": arm,
        f"{api}/runtime/start": post(
            "follow the policy server at policy_url (409 unless armed and no e-stop latched)",
            "runtime_start",
            bodies["start"],
            codes=(400, 409),
        ),
        f"{api}/runtime/stop": post(
            "stop following, back to stand (never gated, never refused)", "runtime_stop", token=False, codes=()
        ),
        f"{api}/estop": post(
            "latch the e-stop: every torque replaced with damping (never gated, never refused)",
            "estop",
            token=False,
            codes=(),
        ),
        f"{api}/estop/clear": post(
            'clear a latched e-stop: only with {"confirm": true}', "estop_clear", bodies["estop/clear"]
        ),
        f"{api}/runtime/faults": post(
            "inject a seeded fault profile between the runtime and the policy", "runtime_faults", bodies["faults"]
        ),
    }


# ---------------------------------------------------------------- the state server


def state_server_spec(allowed=None, actuator_names=None, recordings: bool = True) -> dict:
    from lab.remote.protocol import API, DEFAULT_ALLOWED, DEMO_LIMIT, MAX_BODY_BYTES, MAX_DURATION_S

    allowed = list(DEFAULT_ALLOWED if allowed is None else allowed)
    comps = _common_components()
    rejected = copy.deepcopy(comps["schemas"]["Error"])
    rejected["properties"]["status"] = {"type": "string", "enum": ["rejected"]}
    comps["schemas"]["Rejected"] = rejected

    def rej(code, extra=""):
        return {
            str(code): {"description": ERROR_STATUSES[code] + extra, "content": {JSON: {"schema": ref("Rejected")}}}
        }

    ident = ref("Identity")
    health = obj(
        {
            "status": {"type": "string", "enum": ["ok", "stopped", "error", "diverged"]},
            "sim": ref("SimInfo"),
            "server_instance_id": STR,
            "model": ident,
            "mujoco": STR,
            "nq": INT,
            "nv": INT,
            "nu": INT,
            "timestep": NUM,
            "mode": STR,
            "simulation_time": NUM,
            "sequence": INT,
            "real_time_factor": NUM_N,
            "actuator_names": arr(STR),
            "allowed_actuators": arr(
                obj(
                    {
                        "name": STR,
                        "index": INT,
                        "joint": STR,
                        "qpos_index": INT,
                        "dof_index": INT,
                        "ctrlrange": arr(NUM_N, 2),
                        "demo_range": arr(NUM, 2),
                    }
                )
            ),
            "demo_range": arr(NUM, 2),
            "max_duration_s": NUM,
            "publish_hz": NUM,
            "stream_hz": NUM,
        }
    )
    last = obj(
        {
            "id": INT,
            "actuator": STR,
            "value": NUM,
            "duration_s": NUM,
            "start_time": NUM,
            "expires_at": NUM,
            "ended_at": NUM,
            "ended": STR,
        },
        extra=True,
        nullable=True,
    )
    state = obj(
        {
            "type": {"type": "string", "enum": ["state"]},
            "sequence": {"type": "integer", "minimum": 0},
            "simulation_time": NUM,
            "wall_time": NUM,
            "server_instance_id": STR,
            "model": ident,
            "mode": STR,
            "qpos": arr(NUM),
            "qvel": arr(NUM),
            "ctrl": arr(NUM),
            "active_control": _command_schema(),
            "last_control": last,
        },
        required=[
            "type",
            "sequence",
            "simulation_time",
            "wall_time",
            "server_instance_id",
            "model",
            "mode",
            "qpos",
            "qvel",
            "ctrl",
            "active_control",
        ],
    )
    stopped = obj({"status": {"type": "string", "enum": ["stopped"]}, "cancelled": _command_schema()})
    body = _control_body(allowed, MAX_DURATION_S, DEMO_LIMIT)
    body["description"] += f"; a body over {MAX_BODY_BYTES} bytes is refused (413)"
    t = ["state-server"]
    paths = {
        f"{API}/health": {"get": op("health, identity, limits", _json_ok(health), op_id="health", tags=t)},
        f"{API}/state": {"get": op("the latest published state", _json_ok(state), op_id="state", tags=t)},
        f"{API}/control": {
            "post": op(
                "one limited, self-expiring actuator command",
                {
                    "202": {"description": "accepted", "content": {JSON: {"schema": _accepted_schema()}}},
                    **rej(400),
                    **rej(401),
                    **rej(409, ": a command is already active"),
                    **rej(413),
                },
                body=_body(body),
                token=True,
                post=True,
                op_id="control",
                tags=t,
            )
        },
        f"{API}/reset": {
            "post": op(
                "back to the start pose at t=0 under the server's mode; clears an error or a divergence",
                _json_ok(health),
                token=True,
                post=True,
                op_id="reset",
                tags=t,
            )
        },
        f"{API}/control/stop": {
            "post": op(
                "cancel the active command at once (never needs the token)",
                _json_ok(stopped),
                post=True,
                op_id="control_stop",
                tags=t,
            )
        },
    }
    _runtime_components(comps)
    paths.update(_runtime_paths(API))
    if recordings:
        paths.update(_recordings_paths(comps, "state-server"))  # /api/recordings (lab/web/recordings_api.py)
    ws = {f"{API}/stream?hz=100": "one text message per state (the GET state shape) at hz (1..200)"}
    return _spec("state-server", paths, comps, ws)


# ---------------------------------------------------------------- the policy server


def policy_server_spec(robot=None) -> dict:
    """The policy server (lab/web/policy_server.py, lab/remote/policy.py); with ``robot``, the observation's
    model identity and vector lengths are its own."""
    from lab.remote.policy import CONTROL_DT, MAX_HORIZON

    comps = _common_components()
    nu = nq = nv = None
    sha = {"type": "string", "description": "the model's sha256 (GET /health model.sha256)"}
    if robot is not None:
        nu, nq, nv = len(robot.joint_names), int(robot.model.nq), int(robot.model.nv)
        sha["enum"] = [robot.identity]

    def vec(n, what):
        return {**arr(NUM, n), "description": what}

    base = obj(
        {
            "pos": vec(3, "m, world"),
            "quat": vec(4, "w, x, y, z"),
            "vel": vec(3, "m/s"),
            "ang_vel": vec(3, "rad/s"),
        },
        required=[],
    )
    observation = obj(
        {
            "observed_at": {**NUM, "description": "the robot's clock when it sensed this [s]; the chunk's stamp"},
            "phase": {**NUM, "minimum": 0, "description": "task time the robot has executed [s]"},
            "model": {"oneOf": [obj({"sha256": sha}), sha]},
            "q": vec(nu, "actuated joint angles [rad], joint_names order"),
            "dq": vec(nu, "rad/s"),
            "qpos": vec(nq, "instead of q/dq: the full MuJoCo qpos"),
            "qvel": vec(nv, "and qvel"),
            "base": base,
            "horizon": {"type": "integer", "minimum": 1, "maximum": MAX_HORIZON, "description": "actions (default 20)"},
        },
        required=["observed_at", "phase", "model"],
    )
    observation["anyOf"] = [{"required": ["q", "dq"]}, {"required": ["qpos", "qvel"]}]
    observation["description"] = "one observation, checked whole (every fault a 400 that says which)"
    chunk = obj(
        {
            "chunk_id": {
                "type": "string",
                "pattern": "^[0-9a-f]{12}$",
                "description": "the same for the same observation",
            },
            "observed_at": NUM,
            "phase": NUM,
            "model": ref("Identity"),
            "dt": {**NUM, "description": f"s between actions ({CONTROL_DT:g} for the built-in policy)"},
            "horizon": INT,
            "joint_names": arr(STR, nu),
            "actions": {
                **arr(arr(NUM, nu)),
                "description": "horizon joint-target vectors [rad]; action k is due at observed_at + k * dt",
            },
        }
    )
    health = obj(
        {
            "status": {"type": "string", "enum": ["ok"]},
            "service": {"type": "string", "enum": ["policy-server"]},
            "model": ref("Identity"),
            "joint_names": arr(STR, nu),
            "dt": NUM,
            "horizon": {**INT, "description": "actions per chunk by default"},
            "task": obj(
                {
                    "kind": {"type": "string", "enum": ["squat_then_stand"]},
                    "cycles": INT,
                    "period_s": NUM,
                    "depth_m": NUM,
                    "duration_s": NUM,
                }
            ),
        }
    )
    t = ["policy-server"]
    paths = {
        "/health": {"get": op("the model and task it serves", _json_ok(health), op_id="policy_health", tags=t)},
        "/predict": {
            "post": op(
                "one observation in, one chunk of joint targets out (stateless: no token)",
                {**_json_ok(chunk), **_errors(400)},
                body=_body(observation),
                post=True,
                op_id="policy_predict",
                tags=t,
            )
        },
    }
    return _spec("policy-server", paths, comps, {})


# ---------------------------------------------------------------- assembly and serving


def _vendor() -> dict:
    return {
        "get": op(
            "Plotly, from the installed package",
            {"200": {"description": "JavaScript", "content": {"text/javascript": {"schema": STR}}}},
            op_id="vendor_plotly",
            tags=["pages"],
        )
    }


def _static() -> dict:
    types = ("text/javascript", "text/css", "image/png", "image/svg+xml", "text/plain", "application/octet-stream")
    found = {"description": "the file", "content": {t: {"schema": STR} for t in types}}
    missing = {
        "description": "no such file (an HTML page, or JSON when the client accepts only JSON)",
        "content": {"text/html": {"schema": STR}, JSON: {"schema": ref("Error")}},
    }
    params = [{"name": "filename", "in": "path", "required": True, "schema": STR}]
    return {
        "get": op(
            "the pages' scripts and styles",
            {"200": found, "404": missing},
            params=params,
            op_id="static",
            tags=["pages"],
        )
    }


def _spec(service: str, paths: dict, comps: dict, websockets: dict) -> dict:
    paths[OPENAPI_PATH] = {
        "get": op("this description (OpenAPI 3.0.3)", _json_ok(OBJ), op_id=f"{service}_openapi", tags=["meta"])
    }
    spec = {
        "openapi": "3.0.3",
        "info": {
            "title": TITLES[service],
            "version": "1",
            "description": 'All JSON. Errors are 4xx {"error", "hint"}. With --token, state changes need '
            "'Authorization: Bearer TOKEN' (stopping never does). WebSocket routes: see x-websockets.",
        },
        "paths": paths,
        "components": comps,
        "x-service": service,
        "x-websockets": websockets,
    }
    return _sort_responses(spec)


def service_of(app) -> str:
    """``lab``, ``sim2sim``, ``state-server`` or ``policy-server`` for ``app``."""
    svc = app.config.get("LAB_SERVICE")
    if svc in SERVICES:
        return svc
    if app.name in SERVICES:
        return app.name
    if "state_sim" in app.extensions:
        return "state-server"
    if "sim2sim" in app.extensions or app.name == "sim2sim":
        return "sim2sim"
    if "lab" in app.extensions or app.name == "lab":
        return "lab"
    return "state-server" if "state_server" in app.name else app.name


def build_spec(service: str, app=None) -> dict:
    """The OpenAPI dict of ``service``; with ``app``, enums (modes, actuators) and routes are the app's own."""
    spec = _build(service, app)
    if app is None or "vendor" in app.blueprints:  # register_common serves Plotly on every service
        spec["paths"]["/vendor/plotly.min.js"] = _vendor()
    if app is None or "static" in app.view_functions:
        spec["paths"]["/static/{filename}"] = _static()
    return spec


def _build(service: str, app=None) -> dict:
    ext = app.extensions if app is not None else {}
    if service == "lab":
        from lab.runtime.modes import LAB_MODES

        session = ext.get("lab", {}).get("session")
        modes = list(session.modes) if session is not None else list(LAB_MODES)
        bps = app.blueprints if app is not None else {"remote": 1, "scans": 1}
        return lab_spec(modes, remote="remote" in bps, scans="scans" in bps, app=app)
    if service == "sim2sim":
        from lab.runtime.lockstep import LOCKSTEP_MODES

        return sim2sim_spec(list(LOCKSTEP_MODES))
    if service == "state-server":
        sim = ext.get("state_sim")
        recordings = app is None or "recordings" in app.blueprints
        return state_server_spec(list(sim.allowed) if sim is not None else None, recordings=recordings)
    if service == "policy-server":
        policy = ext.get("policy")
        return policy_server_spec(policy.robot if policy is not None else None)
    raise ValueError(f"unknown service {service!r}; one of {', '.join(SERVICES)}")


def _openapi_json():
    app = current_app._get_current_object()
    spec = app.extensions.get("lab_openapi_spec")
    if spec is None:
        spec = app.extensions["lab_openapi_spec"] = build_spec(service_of(app), app)
    return jsonify(spec)


def register(app) -> None:
    """Serve ``GET /api/openapi.json`` on ``app`` (once; calling again does nothing)."""
    if "openapi_json" not in app.view_functions:
        app.add_url_rule(OPENAPI_PATH, "openapi_json", _openapi_json, methods=["GET"])


def _parity_paths(service: str) -> dict:
    """``GET /api/pybullet_notes`` (the Lab) or ``GET /api/parity`` (Sim2Sim) of lab/web/parity_api.py."""
    if service == "lab":
        notes = obj(
            {
                "applicable": BOOL,
                "notes": arr(STR),
                "error": STR_N,
                "total": obj({"mujoco": NUM, "pybullet_raw": NUM, "pybullet": NUM}, nullable=True),
            },
            required=["applicable"],
        )
        return {
            "/api/pybullet_notes": {
                "get": op(
                    "what PyBullet makes of the robot's URDF (missing inertials, unnamed materials, load errors)",
                    _json_ok(notes),
                    op_id="lab_pybullet_notes",
                    tags=["lab"],
                )
            }
        }
    arr3 = arr(NUM_N, nullable=True)
    row = obj(
        {
            "link": STR,
            "mujoco_mass": NUM_N,
            "pybullet_mass": NUM_N,
            "rel_diff": NUM_N,
            "inertia_rel_diff": NUM_N,
            "mujoco_inertia": arr3,
            "pybullet_inertia": arr3,
            "com_diff": NUM_N,
            "merged": BOOL,
            "disagrees": BOOL,
        }
    )
    summary = obj({"links": {"type": "integer"}, "merged": arr(STR), "disagree": arr(STR), "max_diff": NUM})
    body = obj(
        {
            "applicable": BOOL,
            "rows": arr(row),
            "after": arr(row),
            "corrected": arr(STR),
            "total": obj({"mujoco": NUM, "pybullet_raw": NUM, "pybullet": NUM}, nullable=True),
            "summary": obj({"before": summary, "after": summary}),
            "notes": arr(STR),
        },
        required=["applicable", "rows", "corrected", "total", "notes"],
    )
    return {
        "/api/parity": {
            "get": op(
                "per-link mass/inertia of MuJoCo against PyBullet's raw values at load, and what was corrected",
                _json_ok(body),
                op_id="sim2sim_parity",
                tags=["sim2sim"],
            )
        }
    }


def _sim2sim_walk_paths() -> dict:
    """Sim2Sim's walk: ``GET/POST /api/walk`` (lab/web/walk_api.py) and ``GET /api/steps`` (the per-step
    divergence, :meth:`lab.runtime.lockstep.Lockstep.step_divergence`)."""
    from lab.runtime.lockstep import STEP_ROWS

    t = ["sim2sim"]
    per_engine = {"type": "object", "additionalProperties": NUM_N}
    per_engine_bool = {"type": "object", "additionalProperties": {"type": "boolean", "nullable": True}}
    row = obj(
        {
            "step": INT,
            "side": {"type": "string", "enum": ["left", "right"]},
            "t_s": per_engine,
            "dt_s": NUM_N,
            "contact_s": per_engine,
            "contact_dt_s": NUM_N,
            "landed": {"type": "object", "additionalProperties": arr(NUM, n=2, nullable=True)},
            "dx_m": NUM_N,
            "dy_m": NUM_N,
            "dxy_m": NUM_N,
            "early": per_engine_bool,
            "upright": {"type": "object", "additionalProperties": BOOL},
            "paired": BOOL,
        }
    )
    summary = obj(
        {
            "paired": INT,
            "max_dt_s": NUM_N,
            "mean_dt_s": NUM_N,
            "bias_dt_s": NUM_N,
            "max_dxy_m": NUM_N,
            "mean_dxy_m": NUM_N,
            "contact_timed": INT,
            "contact_max_dt_s": NUM_N,
            "contact_mean_dt_s": NUM_N,
            "steps": {"type": "object", "additionalProperties": INT},
            "upright": {"type": "object", "additionalProperties": BOOL},
            "engines": arr(STR),
        },
        nullable=True,
    )
    summary["description"] = "over every step of the walk; |Δt| for max/mean, signed for bias (PyBullet − MuJoCo)"
    lo, hi, default = STEP_ROWS
    return {
        **_walk_paths("sim2sim"),
        "/api/steps": {
            "get": op(
                "the walk's touchdowns paired by step index: Δt [s] and foothold Δxy [m], PyBullet − MuJoCo",
                {
                    **_json_ok(obj({"walking": BOOL, "steps": arr(row), "summary": summary})),
                    **_errors(400),
                },
                params=[
                    {
                        "name": "last",
                        "in": "query",
                        "required": False,
                        "description": f"rows: the last N steps (default {default})",
                        "schema": {"type": "integer", "minimum": lo, "maximum": hi},
                    }
                ],
                op_id="sim2sim_steps",
                tags=t,
            )
        },
    }


def _walk_paths(service: str) -> dict:
    """``GET/POST /api/walk`` (lab/web/walk_api.py): the feedback walker's velocity command for ``service``."""
    from lab.walking.dcm import FeedbackParams

    p = FeedbackParams()  # the bounds lab/web/walk_api.py checks
    limit = {"vx": p.vx_max, "vy": p.vy_max, "yaw_rate": p.yaw_rate_max}
    unit = {"vx": "m/s", "vy": "m/s", "yaw_rate": "rad/s"}
    t = [service]
    cmd_props = {k: rng(-b, b, description=unit[k]) for k, b in limit.items()}
    command = obj({k: NUM for k in limit})
    bounds = obj({k: NUM for k in limit})
    body = obj(copy.deepcopy(cmd_props), required=[], extra=False)
    body["minProperties"] = 1
    body["description"] = "any of vx, vy [m/s], yaw_rate [rad/s]; missing ones keep their value; selects walk"
    where = "both engines" if service == "sim2sim" else "the Lab"
    return {
        "/api/walk": {
            "get": op(
                "the walker's velocity command and phase (walking: false outside the walk)",
                _json_ok(
                    obj(
                        {"walking": BOOL, "command": command, "phase": STR, "steps": INT, "bounds": bounds},
                        required=["walking", "bounds"],
                    )
                ),
                op_id=f"{service}_walk_state",
                tags=t,
            ),
            "post": op(
                f"velocity command for the feedback walker in {where} (selects walk)",
                {**_json_ok(obj({"mode": STR, "command": command, "bounds": bounds})), **_errors(400, 409)},
                body=_body(body),
                token=True,
                post=True,
                op_id=f"{service}_walk",
                tags=t,
            ),
        },
    }


def _signals_paths() -> dict:
    """``GET /api/signals`` (lab/web/signals.py): every signal the Lab streams on request, with units."""
    from lab.web.signals import HZ, MAX_PICK

    signal = obj({"name": STR, "unit": STR, "label": STR})
    group = obj({"id": STR, "label": STR, "doc": STR, "signals": arr(signal)})
    catalog = obj(
        {
            "engine": STR,
            "count": INT,
            "max_pick": {"type": "integer", "enum": [MAX_PICK]},
            "hz": {"type": "number", "enum": [HZ]},
            "groups": arr(group),
        }
    )
    catalog["description"] = (
        "groups q, q_target, qd, tau (every actuated joint), base, base_vel, foot, contact (MuJoCo), metric;"
        " names such as q/<joint>, base/pitch, foot/left/fz, metric/pelvis_z; pick them on WS /ws"
    )
    return {
        "/api/signals": {
            "get": op("the signal catalog: groups, names, units", _json_ok(catalog), op_id="lab_signals", tags=["lab"])
        }
    }


def _recordings_paths(comps: dict, service: str) -> dict:
    """``/api/recordings`` (lab/web/recordings_api.py, lab/record/store.py): record the run to MCAP files."""
    from lab.record.store import LABEL_MAX, MAX_MB_RANGE, MAX_S_RANGE

    t = [service]
    comps["schemas"]["Recording"] = obj(
        {
            "id": STR,
            "service": STR_N,
            "label": STR_N,
            "started": STR_N,
            "file": STR,
            "duration_s": NUM,
            "bytes": INT,
            "state": {"type": "string", "enum": ["recording", "done", "failed"]},
            "reason": STR_N,
        },
        required=["id", "duration_s", "bytes", "state", "reason"],
    )
    rec = ref("Recording")
    start = obj(
        {
            "max_s": rng(*MAX_S_RANGE, description="s of recording time (default 600)"),
            "max_mb": rng(*MAX_MB_RANGE, description="MB of file (default 500)"),
            "label": {"type": "string", "maxLength": LABEL_MAX},
        },
        required=[],
        extra=False,
    )
    rid = [{"name": "rid", "in": "path", "required": True, "schema": STR}]
    mcap = {
        "description": "the MCAP file",
        "content": {"application/octet-stream": {"schema": {**STR, "format": "binary"}}},
    }
    return {
        "/api/recordings": {
            "get": op(
                "every recording, newest first",
                _json_ok(obj({"recordings": arr(rec)})),
                op_id=f"{service}_recordings",
                tags=t,
            ),
            "post": op(
                "start recording the simulation to <results>/recordings/<id>.mcap (one at a time)",
                {**_json_ok(rec, "recording", 201), **_errors(400, 409, 507)},
                body=_body(start, required=False),
                token=True,
                post=True,
                op_id=f"{service}_recording_start",
                tags=t,
            ),
        },
        "/api/recordings/{rid}": {
            "get": op(
                "one recording", {**_json_ok(rec), **_errors(404)}, params=rid, op_id=f"{service}_recording", tags=t
            ),
            "delete": op(
                "remove a finished recording",
                {**_json_ok(obj({"deleted": STR})), **_errors(404, 409)},
                params=rid,
                token=True,
                op_id=f"{service}_recording_delete",
                tags=t,
            ),
        },
        "/api/recordings/{rid}/stop": {
            "post": op(
                "stop recording and finish the file (a finished recording is left as it is)",
                {**_json_ok(rec), **_errors(404)},
                params=rid,
                token=True,
                post=True,
                op_id=f"{service}_recording_stop",
                tags=t,
            )
        },
        "/api/recordings/{rid}/file": {
            "get": op(
                "download the .mcap (409 while it is being written)",
                {"200": mcap, **_errors(404, 409)},
                params=rid,
                op_id=f"{service}_recording_file",
                tags=t,
            )
        },
    }


def _replay_paths(comps: dict) -> dict:
    """The replay page and its API (lab/web/replay_page.py): timeline, exact state, exports (lab/record/export.py)."""
    from lab.record.export import FIELDS, FORMATS, LIMITS, MAX_FRAMES
    from lab.record.player import REPLAY_OVERLAYS

    t = ["replay"]
    rid = [
        {
            "name": "rid",
            "in": "path",
            "required": True,
            "description": "a stored recording's id, or scan:<scan id>:<point> (the recording a scan point kept:"
            " lab/web/scan_recordings.py)",
            "schema": STR,
        }
    ]
    job_id = [{"name": "job", "in": "path", "required": True, "schema": STR}]
    event = obj({"t": NUM, "kind": STR, "data": OBJ, "count": INT, "last_t": NUM_N}, required=["t", "kind"])
    timeline = obj(
        {
            "id": STR,
            "label": STR_N,
            "service": STR_N,
            "duration_s": NUM,
            "dt": {**NUM, "description": "physics step [s]"},
            "frame_dt": {**NUM, "description": "one frame of the page's step buttons: the sample period [s]"},
            "exact": BOOL,
            "series": obj(
                {"t": arr(NUM), "pelvis_z": arr(NUM_N), "pitch_deg": arr(NUM_N), "max_joint_err": arr(NUM_N)}
            ),
            "events": arr(event),
        }
    )
    state = obj({"id": STR, "t": NUM, "k": INT, "sim_time": NUM, "qpos": arr(NUM), "seek_ms": NUM})
    size = {k: {"type": "integer", "minimum": lo, "maximum": hi} for k, (lo, hi) in LIMITS.items()}
    for k in ("width", "height"):
        size[k]["multipleOf"] = 2
    request = obj(
        {
            "t0": {**NUM, "minimum": 0, "description": "start [s of recording time] (default 0)"},
            "t1": {**NUM, "minimum": 0, "description": "end [s], after t0, inside the recording (default t0 + 5)"},
            "format": {"type": "string", "enum": list(FORMATS)},
            **size,
            "overlays": arr({"type": "string", "enum": list(REPLAY_OVERLAYS)}),
            "stamp": {**BOOL, "description": "the recording time in the top left corner (default true)"},
        },
        required=[],
        extra=False,
    )
    request["description"] = (
        f"round((t1 - t0) * fps) frames, at most {MAX_FRAMES['mp4']} (MP4) or {MAX_FRAMES['gif']} (GIF,"
        " at most 640x480); fields: " + ", ".join(FIELDS)
    )
    job_fields = {
        "job": STR,
        "recording": STR,
        "state": {"type": "string", "enum": ["queued", "running", "done", "failed", "cancelled"]},
        "progress": rng(0, 1),
        "frames": INT,
        "frames_done": INT,
        "t0": NUM,
        "t1": NUM,
        "format": {"type": "string", "enum": list(FORMATS)},
        "width": INT,
        "height": INT,
        "fps": INT,
        "overlays": arr(STR),
        "stamp": BOOL,
        "codec": {**STR_N, "description": "libx264 (H.264), mpeg4 where PyAV has no H.264 encoder, or gif"},
        "bytes": INT_N,
        "error": STR_N,
        "seconds": NUM_N,
        "file": {**STR_N, "description": "GET it once done"},
        "deleted": {**BOOL, "description": "DELETE of a finished job: it and its file were removed"},
    }
    comps["schemas"]["ExportJob"] = obj(job_fields, required=[k for k in job_fields if k != "deleted"])
    job = ref("ExportJob")
    video = {
        "description": "the video",
        "content": {m: {"schema": {**STR, "format": "binary"}} for m in ("video/mp4", "image/gif")},
    }
    return {
        "/replay": {
            "get": op(
                "the replay page (the newest finished recording without id; a scan point's with scan and point)",
                {"200": {"description": "the page", "content": {"text/html": {"schema": STR}}}},
                params=[
                    {"name": "id", "in": "query", "required": False, "schema": STR},
                    {"name": "scan", "in": "query", "required": False, "description": "a scan's id", "schema": STR},
                    {
                        "name": "point",
                        "in": "query",
                        "required": False,
                        "description": "with scan: the point whose recording (id scan:<scan>:<point>)",
                        "schema": STR,
                    },
                ],
                op_id="replay_page",
                tags=["pages"],
            )
        },
        "/api/recordings/{rid}/timeline": {
            "get": op(
                "duration, frame step, the /metrics series the charts draw, and the events",
                {**_json_ok(timeline), **_errors(404, 409)},
                params=rid,
                op_id="replay_timeline",
                tags=t,
            )
        },
        "/api/recordings/{rid}/state": {
            "get": op(
                "the exact recorded qpos at recording time t (clamped to the recording)",
                {**_json_ok(state), **_errors(400, 404, 409)},
                params=rid + [{"name": "t", "in": "query", "required": False, "description": "[s]", "schema": NUM}],
                op_id="replay_state",
                tags=t,
            )
        },
        "/api/recordings/{rid}/export": {
            "post": op(
                "render a time range to MP4 (H.264) or GIF in the background; the job (poll GET /api/exports/{job})",
                {**_json_ok(job, "queued", 202), **_errors(400, 404, 409, 429)},
                body=_body(request, required=False),
                params=rid,
                token=True,
                post=True,
                op_id="replay_export",
                tags=t,
            )
        },
        "/api/exports/{job}": {
            "get": op(
                "an export's progress",
                {**_json_ok(job), **_errors(404)},
                params=job_id,
                op_id="replay_export_job",
                tags=t,
            ),
            "delete": op(
                "cancel an export (queued: it never runs; running: it stops, its file removed); a finished one is "
                "removed with its file",
                {**_json_ok(job), **_errors(404)},
                params=job_id,
                token=True,
                op_id="replay_export_cancel",
                tags=t,
            ),
        },
        "/api/exports/{job}/file": {
            "get": op(
                "the exported video (409 until it is done, or when it failed)",
                {"200": video, **_errors(404, 409)},
                params=job_id,
                op_id="replay_export_file",
                tags=t,
            )
        },
    }
