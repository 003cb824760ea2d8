"""The control routes the Lab and Sim2Sim share, in front of one runner.

A runner is a :class:`~lab.runtime.session.SimSession` (the Lab) or a :class:`~lab.runtime.lockstep.Lockstep`
(Sim2Sim): both have ``set_mode(name, push)``, ``set_push(params)``, ``reset()``, ``pause(bool)`` and
``history_since(t)``. When the service was started with ``--token``, every change needs it, checked
before the body is read, except a stop: zero input and pause are never blocked by the token.

A stop without the token is exactly ``{"mode": "zero"}`` or ``{"paused": true}`` (at most
:data:`STOP_BODY_MAX` bytes, so nothing larger is read to find out). A stop that carries anything
else (``{"mode": "zero", "force_n": 200}``) is refused with 401 and nothing of it is applied: the
push settings are a change, and a change needs the token; with the token it applies all of it.
"""

import math

from flask import Blueprint, jsonify, request

from lab.errors import LabError
from lab.web import messages
from lab.web.common import TOKEN_ERROR, json_body, require_token, token_ok

PUSH_FIELDS = ("force_n", "duration_s", "period_s", "first_s")


def push_dict(push) -> dict:
    return {k: getattr(push, k) for k in PUSH_FIELDS}


STOP_BODY_MAX = 128  # [bytes] the longest body a token-less stop may have ({"mode": "zero"} is 16)
STOP_HINT = "send 'Authorization: Bearer <token>' (the --token value); without it only a bare stop is accepted: {}"


def _stop_without_token(stop: dict) -> None:
    """Without a valid token, accept only the body ``stop``; raise 401 for anything else, reading no
    more than :data:`STOP_BODY_MAX` bytes to find out."""
    hint = STOP_HINT.format(messages.dumps(stop))
    length = request.content_length
    if length is None or length > STOP_BODY_MAX:  # no length (chunked) or longer than a stop: not read at all
        raise LabError(TOKEN_ERROR, hint, 401)
    try:
        body = json_body()
    except LabError:
        raise LabError(TOKEN_ERROR, hint, 401) from None
    if body != stop or any(type(body[k]) is not type(v) for k, v in stop.items()):
        extra = ", ".join(sorted(k for k in body if k not in stop)[:8])
        raise LabError(
            f"{TOKEN_ERROR}: only a bare stop is accepted without it" + (f" (refused: {extra})" if extra else ""),
            hint,
            401,
        )


def control_blueprint(name: str, runner, status, metrics, modes=None) -> Blueprint:
    """``GET /api/status|metrics|history``, ``POST /api/mode|push|reset|pause`` for the runner ``runner()``.

    ``modes``: the mode names this service offers (default: every registered mode)."""
    bp = Blueprint(f"{name}_control", __name__)

    @bp.get("/api/status")
    def api_status():
        return jsonify(status())

    @bp.get("/api/metrics")
    def api_metrics():
        return jsonify(messages.finite(metrics()))

    @bp.get("/api/history")
    def api_history():
        raw = request.args.get("since", "-1")
        try:
            since, why = float(raw), " (not finite)"
        except ValueError:
            since, why = math.nan, ""
        if not math.isfinite(since):
            raise LabError(f"since must be a number, got {raw[:40]!r}{why}", "sim time in seconds, e.g. ?since=0")
        return jsonify({"samples": messages.finite(runner().history_since(since))})

    @bp.post("/api/mode")
    def api_mode():
        """Switch mode (with optional push fields). Without the token: only ``{"mode": "zero"}``."""
        if not token_ok():
            _stop_without_token({"mode": "zero"})
            runner().set_mode("zero")
            return jsonify(status())
        body = json_body()
        if "mode" not in body:
            raise LabError("missing field 'mode'", f'send {{"mode": ...}} with one of: {", ".join(runner().modes)}')
        push = {k: v for k, v in body.items() if k != "mode"}
        runner().set_mode(body["mode"], push or None)
        return jsonify(status())

    @bp.post("/api/push")
    @require_token
    def api_push():
        return jsonify({"push": push_dict(runner().set_push(json_body()))})

    @bp.post("/api/reset")
    @require_token
    def api_reset():
        runner().reset()
        return jsonify(status())

    @bp.post("/api/pause")
    def api_pause():
        """Pause or resume. Without the token: only ``{"paused": true}``."""
        if not token_ok():
            _stop_without_token({"paused": True})
            runner().pause(True)
            return jsonify(status())
        paused = json_body().get("paused")
        if not isinstance(paused, bool):
            raise LabError(
                f"'paused' must be true or false, got {str(paused)[:40]!r}",
                'send {"paused": true} or {"paused": false}',
            )
        runner().pause(paused)
        return jsonify(status())

    return bp
