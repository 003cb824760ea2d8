"""What every service's web layer shares: JSON errors, the app-wide request guard (Host, Origin, body
size, content type), strict JSON bodies, the bearer token, vendored JS.

The guard (:func:`guard_request`, a ``before_request`` hook of every app that :func:`register_common`
sets up, so every blueprint is covered) looks at each state-changing request (POST, PUT, PATCH, DELETE)
and each WebSocket upgrade before any body is read:

- ``403`` a ``Host`` that is not this server: without a token only loopback names are answered
  (``localhost``, ``127.0.0.0/8``, ``[::1]``, and the host the server was bound as), so a page of
  another site cannot reach a loopback service through DNS rebinding; with a token any ``Host`` (the
  token protects);
- ``403`` an ``Origin`` whose scheme, host and port are not the ``Host`` asked for (``Origin: null`` too);
- ``413`` a ``Content-Length`` over the service's limit (``LAB_MAX_BODY``: 64 KiB, the state
  server 4 KiB); a chunked body is cut off at the limit while it is read (413 again), never read whole;
- ``415`` a ``Content-Type`` other than ``application/json`` (parameters such as ``charset`` allowed).
  A request without a ``Content-Type`` is read as JSON (``curl --data-binary``, ``requests(data=...)``):
  the types a browser may send cross-site without a preflight (``text/plain``, form types) are what is
  refused, and a browser sends ``Origin`` with any cross-site request, which the previous check refuses.
  An empty body is not checked for its type (``POST /api/reset``, ``curl -d '' .../control/stop``): the
  type describes a body, and there is none; a route that needs a body says ``request body is empty`` (400).

Reading (``GET``) stays open. Tokens are checked by the routes (:func:`require_token`), before they read
a body.
"""

import functools
import hmac
import ipaddress
import json
import math
from pathlib import Path
from urllib.parse import urlsplit

import plotly
from flask import Blueprint, Flask, current_app, jsonify, request, send_file
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from lab.errors import LabError
from lab.web import openapi

MAX_BODY = 64 * 1024  # [bytes] largest JSON body any endpoint takes (the state server: 4 KiB)
MAX_DEPTH = 32  # nesting levels of a JSON body
MAX_INT = 2**53  # |integer| beyond this is refused: JSON numbers are doubles, and 400-digit integers cost
STATE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost."})
JSON_HINT = "send a JSON object with Content-Type: application/json"
TOKEN_ERROR = "missing or wrong bearer token"
TOKEN_HINT = "send 'Authorization: Bearer <token>' (the --token value)"


def error(message: str, hint: str = "", status: int = 400, **extra):
    return jsonify({"error": message, "hint": hint, **extra}), status


# --- strict JSON ---------------------------------------------------------------------------------


class _Refused:
    """A number the parser refuses, kept in place so that the message can name its field."""

    __slots__ = ("text", "kind")

    def __init__(self, text: str, kind: str):
        self.text, self.kind = text, kind


def _parse_int(text: str):
    if len(text.lstrip("-")) > 16 or abs(int(text)) > MAX_INT:  # the length test first: int() of 5000 digits raises
        return _Refused(text, "int")
    return int(text)


def _parse_float(text: str):
    v = float(text)  # never raises for JSON's number syntax; 1e999 -> inf
    return v if math.isfinite(v) else _Refused(text, "overflow")


def _parse_constant(text: str):
    return _Refused(text, "constant")  # NaN, Infinity, -Infinity: Python's json reads them, JSON has none


def _shown(text: str, unit: str = "characters") -> str:
    """A number's text as a message shows it: whole when short, else its head and its length."""
    n = len(text.lstrip("-"))
    return text if n <= 24 else f"{text[:6]}... ({n} {unit})"


def _refusal(bad: _Refused, where: str) -> LabError:
    if bad.kind == "constant":
        shown = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(bad.text, bad.text)
        return LabError(f"{where} {shown} is not a finite number", "JSON has no NaN or Infinity: send a finite number")
    if bad.kind == "overflow":
        return LabError(
            f"{where} {_shown(bad.text)} is not a finite number (it overflows a double)", "send a finite number"
        )
    return LabError(
        f"{where} {_shown(bad.text, 'digits')} is too large: integers beyond ±2**53 are refused",
        "send a number of ordinary size",
    )


def parse_json(raw: bytes | str, label: str = "request body"):
    """``raw`` (UTF-8) as JSON, strictly: :class:`LabError` (400) for text that is not UTF-8 or not JSON,
    for ``NaN``/``Infinity``, for floats that overflow a double, for integers beyond ±2**53 and for
    nesting deeper than :data:`MAX_DEPTH`. Never another exception (``RecursionError``, ``OverflowError``,
    int conversion limits). ``label`` names the text in messages (``request body``, ``control body``)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise LabError(f"{label} is not UTF-8 text", JSON_HINT) from None
    try:
        obj = json.loads(raw, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except RecursionError:
        raise LabError(
            f"{label} is nested too deeply (more than {MAX_DEPTH} levels)", "send a flat JSON object"
        ) from None
    except ValueError as exc:
        raise LabError(f"malformed JSON in {label}: {exc}", JSON_HINT) from None
    _check_tree(obj, label)
    return obj


def _check_tree(obj, label: str) -> None:
    """Refused numbers (named by their field) and the depth, without recursion."""
    stack = [(obj, 0, label)]
    while stack:
        v, depth, where = stack.pop()
        if isinstance(v, _Refused):
            raise _refusal(v, where)
        if isinstance(v, (dict, list)):
            if depth >= MAX_DEPTH:
                raise LabError(
                    f"{label} is nested too deeply (more than {MAX_DEPTH} levels)", "send a flat JSON object"
                )
            items = v.items() if isinstance(v, dict) else ((f"{where}[{i}]", x) for i, x in enumerate(v))
            stack.extend((x, depth + 1, str(k)[:40]) for k, x in items)


def _json_type(v) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {dict: "object", list: "array", str: "string", type(None): "null"}.get(type(v), type(v).__name__)


def body_limit() -> int:
    """[bytes] the longest request body this service reads."""
    return current_app.config.get("LAB_MAX_BODY") or MAX_BODY


def too_large(length: int | None, limit: int) -> LabError:
    got = f"{length} bytes" if length is not None else f"longer than {limit} bytes"
    return LabError(f"request body is {got}; at most {limit} accepted", "send a small JSON object", 413)


def json_body(required: bool = True, label: str = "request body", want_object: bool = True):
    """The request's JSON body (an object unless ``want_object=False``); a clear :class:`LabError` for
    anything else (see :func:`parse_json`). Reads at most the service's limit: a longer body is a 413."""
    limit = body_limit()
    length = request.content_length
    if length is not None and length > limit:
        raise too_large(length, limit)
    try:
        raw = request.get_data(cache=True)
    except RequestEntityTooLarge:  # a chunked body went past the limit while being read
        raise too_large(None, limit) from None
    if len(raw) > limit:  # only a body without Content-Length gets here: limit + 1 bytes were read
        raise too_large(None, limit)
    if not raw.strip():
        if required:
            raise LabError(f"{label} is empty", 'send a JSON object, e.g. {"mode": "stand"}')
        return {}
    obj = parse_json(raw, label)
    if want_object and not isinstance(obj, dict):
        raise LabError(f"expected a JSON object, got {_json_type(obj)}", 'send a JSON object, e.g. {"mode": "stand"}')
    return obj


# --- the bearer token ----------------------------------------------------------------------------


def token_ok() -> bool:
    """True when the service has no token or the request carries exactly ``Authorization: Bearer <token>``."""
    token = current_app.config.get("LAB_TOKEN")
    if not token:
        return True
    got = request.headers.get("Authorization", "")
    return hmac.compare_digest(got.encode("utf-8", "replace"), f"Bearer {token}".encode())


def check_token(message: str = TOKEN_ERROR, hint: str = TOKEN_HINT, exc: type = LabError) -> None:
    """Raise ``exc(message, hint, 401)`` unless :func:`token_ok`."""
    if not token_ok():
        raise exc(message, hint, 401)


def require_token(fn=None, *, message: str = TOKEN_ERROR, hint: str = TOKEN_HINT, exc: type = LabError):
    """Bearer-token check for state-changing routes when the service was started with ``--token``; made
    before the route reads its body. ``@require_token`` or ``@require_token(message=..., exc=...)``."""

    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            check_token(message, hint, exc)
            return f(*args, **kwargs)

        return wrapper

    return decorate(fn) if fn is not None else decorate


# --- the app-wide request guard ------------------------------------------------------------------


def _hostname(netloc: str) -> str | None:
    try:
        return urlsplit(f"//{netloc}").hostname
    except ValueError:
        return None


def _is_loopback_name(name: str | None) -> bool:
    if not name:
        return False
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_port(netloc: str, scheme: str) -> tuple | None:
    """``(hostname, port)`` of ``host[:port]`` with the scheme's default port; None when it does not parse."""
    try:
        parts = urlsplit(f"//{netloc}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.hostname, port or (443 if scheme in ("https", "wss") else 80)


def _foreign_host():
    host = request.host
    if current_app.config.get("LAB_TOKEN"):
        return None  # the token protects: the service may be reached by any name (LAN address, tunnel)
    name = _hostname(host)
    bound = current_app.config.get("LAB_BIND_HOST")
    if _is_loopback_name(name) or (bound and name == str(bound).strip("[]").lower()):
        return None
    return error(
        f"Host '{host[:100]}' is not this server",
        "without --token this service answers only loopback names (localhost, 127.0.0.1, [::1]); "
        "open it as http://127.0.0.1:PORT, or start it with --token TOKEN to be reached by other names",
        403,
    )


def _foreign_origin():
    origin = request.headers.get("Origin")
    if origin is None:
        return None  # not a browser, or a same-origin GET: nothing to compare
    try:
        parts = urlsplit(origin)
    except ValueError:
        parts = None
    own = _host_port(request.host, request.scheme)
    if parts is not None and parts.scheme in ("http", "https") and parts.netloc:
        theirs = _host_port(parts.netloc, parts.scheme)
        if theirs is not None and theirs == own and parts.scheme == request.scheme:
            return None
    return error(
        f"cross-origin request from Origin '{origin[:100]}' refused; this server is {request.scheme}://{request.host}",
        "use this service's own page, or call the API from a non-browser client (curl, requests)",
        403,
    )


def _wrong_content_type():
    """A body must say it is JSON: text/plain, a form or no type at all is refused (a page elsewhere can send
    those without asking the browser's permission)."""
    if request.mimetype == "application/json":
        return None
    ctype = request.headers.get("Content-Type")
    got = f"'{ctype[:100]}'" if ctype is not None else "a body with no Content-Type"
    return error(f"expected Content-Type application/json, got {got}", JSON_HINT, 415)


def body_rule(app, path: str, check) -> None:
    """Route ``path`` checks its own body: after Host and Origin, :func:`guard_request` returns ``check()``
    (None to go on, or an error response) in place of the JSON size and type checks."""
    app.extensions.setdefault("lab_body_rules", {})[path] = check


def guard_request():
    """The ``before_request`` hook of every service: Host and Origin (403) for state changes and WebSocket
    upgrades; then, for state changes, the body's declared size (413) and type (415); nothing is read."""
    upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
    if request.method not in STATE_METHODS and not upgrade:
        return None
    refused = _foreign_host() or _foreign_origin()
    if refused or upgrade:
        return refused
    own = current_app.extensions.get("lab_body_rules", {}).get(request.path)
    if own is not None:  # a route with its own body type and size (an upload)
        return own()
    limit = body_limit()
    length = request.content_length
    if length is not None and length > limit:
        exc = too_large(length, limit)
        return error(exc.message, exc.hint, 413)
    if not length and "chunked" not in request.headers.get("Transfer-Encoding", "").lower():
        return None  # no body: no type to check (``curl -X POST``, ``curl -d ''`` to a stop)
    return _wrong_content_type()


# --- registration --------------------------------------------------------------------------------

vendor_bp = Blueprint("vendor", __name__)
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@vendor_bp.route("/vendor/plotly.min.js")
def plotly_js():
    return send_file(PLOTLY_JS, mimetype="text/javascript", max_age=3600)


def register_common(app: Flask, max_body: int = MAX_BODY) -> None:
    """The request guard, the body limit (``max_body`` bytes), JSON errors for the API, the vendored
    Plotly, the OpenAPI description, WebSocket keep-alive pings."""
    app.config["LAB_MAX_BODY"] = max_body
    # Flask holds None here (setdefault would keep it, and a body would be read whole). One byte more than
    # the limit: werkzeug stops a chunked body quietly at MAX_CONTENT_LENGTH, so reading limit + 1 bytes
    # is how json_body tells "too long" from "exactly the limit".
    app.config["MAX_CONTENT_LENGTH"] = max_body + 1
    app.config.setdefault("SOCK_SERVER_OPTIONS", {"ping_interval": 15, "max_message_size": 64 * 1024})
    if guard_request not in app.before_request_funcs.setdefault(None, []):
        app.before_request_funcs[None].insert(0, guard_request)  # first: before any other hook reads anything
    if "vendor" not in app.blueprints:
        app.register_blueprint(vendor_bp)
    openapi.register(app)  # GET /api/openapi.json (lab/web/openapi.py)

    @app.errorhandler(LabError)
    def _lab_error(exc: LabError):
        return jsonify(exc.to_dict()), exc.status

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if request.path.startswith("/api/") or request.accept_mimetypes.best == "application/json":
            method, path = request.method, request.path[:200]
            messages = {
                404: (f"404 Not Found: no endpoint {method} {path}", app.config.get("LAB_API_HINT") or ""),
                405: (
                    f"405 Method Not Allowed: {method} is not allowed on {path}",
                    f"allowed methods: {', '.join(sorted(getattr(exc, 'valid_methods', None) or []))}",
                ),
                413: (f"request body is longer than {body_limit()} bytes", "send a small JSON object"),
            }
            msg, hint = messages.get(exc.code, (f"{exc.code} {exc.name}: {method} {path}", exc.description or ""))
            return error(msg, hint or "see README.md for the API of this service", exc.code)
        return exc

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):  # a bug, not bad input: still JSON, and logged
        app.logger.exception("unhandled error")
        return error(f"internal error: {type(exc).__name__}: {exc}", "this is a bug; see the server log", 500)
