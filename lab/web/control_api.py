"""The control routes the Lab and Sim2Sim share, in front of one runner.

A runner is a :class:`~lab.runtime.session.SimSession` (the Lab) or a :class:`~lab.runtime.lockstep.Lockstep`
(Sim2Sim): both have ``set_mode(name, push)``, ``set_push(params)``, ``reset()``, ``pause(bool)`` and
``history_since(t)``. Zero input and pause are never blocked by the token; every other change needs it
when the service was started with ``--token``.
"""

from flask import Blueprint, jsonify, request

from lab.errors import LabError
from lab.web import messages
from lab.web.common import json_body, require_token

PUSH_FIELDS = ("force_n", "duration_s", "period_s", "first_s")


def push_dict(push) -> dict:
    return {k: getattr(push, k) for k in PUSH_FIELDS}


def _token_unless_stop(is_stop: bool):
    return None if is_stop else require_token(lambda: None)()


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
        try:
            since = float(request.args.get("since", "-1"))
        except ValueError as exc:
            raise LabError(f"since must be a number, got {request.args.get('since')!r}", "sim time in seconds") from exc
        return jsonify({"samples": messages.finite(runner().history_since(since))})

    @bp.post("/api/mode")
    def api_mode():
        body = json_body()
        denied = _token_unless_stop(body.get("mode") == "zero")
        if denied:
            return denied
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
        paused = json_body().get("paused")
        if not isinstance(paused, bool):
            raise LabError(
                f"'paused' must be true or false, got {paused!r}", 'send {"paused": true} or {"paused": false}'
            )
        denied = _token_unless_stop(paused)
        if denied:
            return denied
        runner().pause(paused)
        return jsonify(status())

    return bp
