"""What every service's web layer shares: JSON errors, request bodies, the bearer token, vendored JS."""

import functools
import hmac
import json
from pathlib import Path

import plotly
from flask import Blueprint, Flask, current_app, jsonify, request, send_file
from werkzeug.exceptions import HTTPException

from lab.errors import LabError

MAX_BODY = 64 * 1024  # [bytes] largest JSON body any endpoint takes


def error(message: str, hint: str = "", status: int = 400, **extra):
    return jsonify({"error": message, "hint": hint, **extra}), status


def json_body(required: bool = True) -> dict:
    """The request's JSON object; a clear :class:`LabError` for anything else."""
    raw = request.get_data(cache=True)
    if len(raw) > MAX_BODY:
        raise LabError(f"request body is {len(raw)} bytes, more than {MAX_BODY}", "send a small JSON object", 413)
    if not raw.strip():
        if required:
            raise LabError("request body is empty", 'send a JSON object, e.g. {"mode": "stand"}')
        return {}
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LabError(f"malformed JSON: {exc}", "send a JSON object with Content-Type: application/json") from exc
    if not isinstance(obj, dict):
        raise LabError(
            f"expected a JSON object, got {type(obj).__name__}", 'send a JSON object, e.g. {"mode": "stand"}'
        )
    return obj


def require_token(fn):
    """Bearer-token check for state-changing routes when the service was started with ``--token``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = current_app.config.get("LAB_TOKEN")
        if token:
            got = request.headers.get("Authorization", "")
            if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
                return error(
                    "missing or wrong bearer token", "send 'Authorization: Bearer <token>' (the --token value)", 401
                )
        return fn(*args, **kwargs)

    return wrapper


vendor_bp = Blueprint("vendor", __name__)
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@vendor_bp.route("/vendor/plotly.min.js")
def plotly_js():
    return send_file(PLOTLY_JS, mimetype="text/javascript", max_age=3600)


def register_common(app: Flask) -> None:
    """JSON errors for the API, the vendored Plotly, WebSocket keep-alive pings."""
    app.config.setdefault("SOCK_SERVER_OPTIONS", {"ping_interval": 15, "max_message_size": 64 * 1024})
    app.config.setdefault("MAX_CONTENT_LENGTH", 4 * 1024 * 1024)
    if "vendor" not in app.blueprints:
        app.register_blueprint(vendor_bp)

    @app.errorhandler(LabError)
    def _lab_error(exc: LabError):
        return error(exc.message, exc.hint, exc.status)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if request.path.startswith("/api/") or request.accept_mimetypes.best == "application/json":
            hints = {
                404: "see README.md for the API of this service",
                405: f"allowed methods: {', '.join(sorted(getattr(exc, 'valid_methods', None) or []))}",
                413: "send a smaller body",
            }
            resp = error(f"{exc.code} {exc.name}: {request.method} {request.path}", hints.get(exc.code, ""), exc.code)
            return resp
        return exc

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):  # a bug, not bad input: still JSON, and logged
        app.logger.exception("unhandled error")
        return error(f"internal error: {type(exc).__name__}: {exc}", "this is a bug; see the server log", 500)
