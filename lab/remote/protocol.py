"""The state server's wire protocol, in one place: state message shape, checks on a received state
(identity, array lengths, instance, sequence) and the validation of a control request.

No web framework here: the server, the client, the CLI and the Lab's monitor all import this
module, so a rule (the demo limit, the order of the checks, the words of a message) is written once.

State message (``GET /api/v1/state``, and each text message of ``WS /api/v1/stream``)::

    {"type": "state", "sequence": 1234, "simulation_time": 6.17, "wall_time": 1.7e9,
     "server_instance_id": "9f0c...", "model": {"sha256", "short", "file", "mujoco", "nq", "nv", "nu"},
     "mode": "stand", "qpos": [nq floats], "qvel": [nv floats], "ctrl": [nu floats],
     "active_control": null | {"actuator", "value", "duration_s", "start_time", "expires_at", "id"}}

``sequence`` counts published snapshots of one server instance (it restarts at 0 in a new
instance); ``simulation_time`` [s] is the server's ``MjData.time``; ``wall_time`` [s, Unix] is when
the snapshot was taken (on the server's clock).
"""

import math
from dataclasses import dataclass

from lab.errors import LabError

API = "/api/v1"
DEMO_LIMIT = 2.0  # |value| <= DEMO_LIMIT [N·m]: the demo policy, narrower than the model's ctrlrange
MAX_DURATION_S = 0.25  # 0 < duration_s <= MAX_DURATION_S [s of simulation time]
DEFAULT_ALLOWED = ("motor_left_elbow",)
CONTROL_FIELDS = ("actuator", "value", "duration_s")
MAX_BODY_BYTES = 4096  # a control body is ~80 bytes; anything bigger is refused (413)
STATE_FIELDS = ("sequence", "simulation_time", "server_instance_id", "model", "qpos", "qvel", "active_control")
EXAMPLE_BODY = '{"actuator": "motor_left_elbow", "value": 2.0, "duration_s": 0.25}'
# the state server's runtime actions (the Lab passes them through as POST /api/remote/runtime/<action>):
# action -> (its path on the state server, whether the token gates it; a stop never is)
RUNTIME_ACTIONS = {
    "arm": (f"{API}/arm", True),
    "start": (f"{API}/runtime/start", True),
    "faults": (f"{API}/runtime/faults", True),
    "estop/clear": (f"{API}/estop/clear", True),
    "stop": (f"{API}/runtime/stop", False),
    "estop": (f"{API}/estop", False),
}


class ControlRejected(LabError):
    """A control request the server refuses; ``status`` is the HTTP code (400, 401, 409, 413)."""

    def to_dict(self) -> dict:
        return {"status": "rejected", "error": self.message, "hint": self.hint}


@dataclass(frozen=True)
class ControlRequest:
    """A validated command: ``value`` [N·m] on actuator ``index`` for ``duration_s`` [s, simulation time]."""

    actuator: str
    index: int
    value: float
    duration_s: float
    ctrlrange: tuple  # (lo, hi) of the model [N·m]; (-inf, inf) when the actuator is not ctrl-limited


def fmt_num(v) -> str:
    """A number the way a person writes it: 23.0 -> '23', 0.25 -> '0.25', nan -> 'nan'."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        s = str(v) if abs(v) < 10**15 else f"{str(v)[:6]}... ({len(str(abs(v)))} digits)"
        return s
    f = float(v)
    if math.isfinite(f) and f == int(f) and abs(f) < 1e15:
        return str(int(f))
    return repr(f)


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _shown(v) -> str:
    t = _json_type(v)
    if t == "string":
        return f"string {v[:40]!r}" + ("..." if len(v) > 40 else "")
    return t


def _number(body: dict, name: str, hint: str) -> float:
    """The field ``name`` as a float: present, a JSON number (not a boolean), not NaN or infinite.

    An integer too large for a float (hundreds of digits) is finite: it comes back as +-inf so that
    the range checks reject it with its own digits in the message."""
    if name not in body:
        raise ControlRejected(f"missing field '{name}'", f"body: {EXAMPLE_BODY}")
    v = body[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ControlRejected(f"{name} must be a number, got {_shown(v)}", hint)
    try:
        f = float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf
    if not math.isfinite(f):
        raise ControlRejected(f"{name} {fmt_num(f)} is not a finite number", hint)
    return f


def validate_control(body, actuator_names, ctrlranges, allowed) -> ControlRequest:
    """Check a control body in the contract's order; return the request or raise :class:`ControlRejected`.

    Order: a JSON object with only the known fields; a known, allowed actuator; a finite number;
    inside the model ctrlrange; inside the demo limit; ``0 < duration_s <= 0.25``. (The last check,
    no command already active -> 409, needs the server's state and is made by the server.)
    ``actuator_names`` (nu,) and ``ctrlranges`` (nu, 2) with ``None``/inf for unlimited; ``allowed``: names.
    """
    if not isinstance(body, dict):
        raise ControlRejected(f"control body must be a JSON object, got {_shown(body)}", f"body: {EXAMPLE_BODY}")
    extra = [k for k in body if k not in CONTROL_FIELDS]
    if extra:
        raise ControlRejected(
            f"unknown field '{str(extra[0])[:40]}' in control body", f"fields: {', '.join(CONTROL_FIELDS)}"
        )
    allowed_s = ", ".join(allowed) or "none"
    if "actuator" not in body:
        raise ControlRejected("missing field 'actuator'", f"body: {EXAMPLE_BODY}")
    name = body["actuator"]
    if not isinstance(name, str):
        raise ControlRejected(f"actuator must be a string, got {_shown(name)}", f"allowed: {allowed_s}")
    if name not in actuator_names:
        raise ControlRejected(
            f"unknown actuator '{name[:60]}'", f"allowed: {allowed_s} (the model has {len(actuator_names)} actuators)"
        )
    if name not in allowed:
        raise ControlRejected(f"actuator '{name}' is not allowed", f"allowed: {allowed_s}")
    index = list(actuator_names).index(name)
    lo, hi = ctrlranges[index]
    lo = -math.inf if lo is None else float(lo)
    hi = math.inf if hi is None else float(hi)
    value = _number(body, "value", f"a torque [N·m] in [{fmt_num(-DEMO_LIMIT)}, {fmt_num(DEMO_LIMIT)}]")
    shown = fmt_num(body["value"])
    if not lo <= value <= hi:
        raise ControlRejected(
            f"value {shown} is outside model ctrlrange [{fmt_num(lo)}, {fmt_num(hi)}]",
            f"the demo policy allows [{fmt_num(-DEMO_LIMIT)}, {fmt_num(DEMO_LIMIT)}]",
        )
    if abs(value) > DEMO_LIMIT:
        raise ControlRejected(
            f"value {shown} is outside demo limit [{fmt_num(-DEMO_LIMIT)}, {fmt_num(DEMO_LIMIT)}]",
            f"the model allows [{fmt_num(lo)}, {fmt_num(hi)}]; this server's demo policy allows |value| <= "
            f"{fmt_num(DEMO_LIMIT)}",
        )
    duration = _number(body, "duration_s", f"seconds of simulation time in (0, {fmt_num(MAX_DURATION_S)}]")
    if not 0.0 < duration <= MAX_DURATION_S:
        raise ControlRejected(
            f"duration_s {fmt_num(body['duration_s'])} is outside (0, {fmt_num(MAX_DURATION_S)}]",
            f"a command lasts at most {fmt_num(MAX_DURATION_S)} s of simulation time",
        )
    return ControlRequest(name, index, value, duration, (lo, hi))


# --- received state: what a client checks before it believes a state ---------------------------


@dataclass(frozen=True)
class StateCheck:
    """The verdict on one received state: ``ok``; ``mismatch`` (another model); ``reason`` in words."""

    ok: bool
    mismatch: bool = False
    reason: str = ""


def check_state(state, expected_identity: str | None = None, nq: int | None = None, nv: int | None = None):
    """Shape, lengths and identity of a received state. ``expected_identity``: the SHA-256 hex the
    client's own model has (None: accept any model, but still check ``qpos``/``qvel`` against the
    ``nq``/``nv`` the state itself reports)."""
    if not isinstance(state, dict):
        return StateCheck(False, reason=f"state is not a JSON object ({_json_type(state)})")
    missing = [k for k in STATE_FIELDS if k not in state]
    if missing:
        return StateCheck(False, reason=f"state lacks field(s): {', '.join(missing)}")
    model = state["model"]
    if not isinstance(model, dict) or not isinstance(model.get("sha256"), str):
        return StateCheck(False, reason="state.model has no sha256 identity")
    if expected_identity is not None and model["sha256"] != expected_identity:
        return StateCheck(
            False,
            mismatch=True,
            reason=f"model identity {model['sha256'][:12]} ({model.get('file', '?')}, nq={model.get('nq')}) "
            f"differs from the local model {expected_identity[:12]}",
        )
    nq = model.get("nq") if nq is None else nq
    nv = model.get("nv") if nv is None else nv
    for key, n in (("qpos", nq), ("qvel", nv)):
        arr = state[key]
        if not isinstance(arr, list) or len(arr) != n:
            got = len(arr) if isinstance(arr, list) else _json_type(arr)
            return StateCheck(
                False, mismatch=expected_identity is not None, reason=f"{key} has {got} values, expected {n}"
            )
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in arr):
            return StateCheck(False, reason=f"{key} holds a value that is not a finite number")
    seq, t = state["sequence"], state["simulation_time"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return StateCheck(False, reason=f"sequence must be a non-negative integer, got {seq!r}")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
        return StateCheck(False, reason=f"simulation_time must be a finite number, got {t!r}")
    if not isinstance(state["server_instance_id"], str) or not state["server_instance_id"]:
        return StateCheck(False, reason="server_instance_id is missing or empty")
    return StateCheck(True)


def order(prev: dict | None, state: dict) -> str:
    """How ``state`` follows ``prev``: 'first', 'new_instance', 'advanced', 'repeated' or 'backwards'."""
    if prev is None:
        return "first"
    if state["server_instance_id"] != prev["server_instance_id"]:
        return "new_instance"
    if state["sequence"] > prev["sequence"]:
        return "advanced"
    if state["sequence"] == prev["sequence"]:
        return "repeated"
    return "backwards"
