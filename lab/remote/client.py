"""Client of the state server: HTTP (health, state, control) and the WebSocket state stream.

Errors a person must read come out as :class:`RemoteError` with a short reason
("Connection refused", "timed out", "HTTP 404: no endpoint GET /api/v1/nope").
"""

import ipaddress
import json
import re
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import requests
import websocket

from lab.errors import LabError
from lab.remote.protocol import API

DEFAULT_URL = "http://127.0.0.1:8766"


class RemoteError(LabError):
    """The state server could not be reached or answered something unusable; ``reason``: the short cause."""

    def __init__(self, message: str, hint: str = "", status: int = 502, reason: str | None = None):
        super().__init__(message, hint, status)
        self.reason = reason or message


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: ``status`` code and the JSON ``body`` (a dict)."""

    status: int
    body: dict


def describe_error(exc: BaseException) -> str:
    """One short line for a transport error, the words a person expects ("Connection refused")."""
    seen, e = set(), exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError):
            return "Connection refused"
        if isinstance(e, (ConnectionResetError, BrokenPipeError)):
            return "Connection reset by peer"
        if isinstance(e, (socket.timeout, TimeoutError, requests.Timeout, websocket.WebSocketTimeoutException)):
            return "timed out"
        if isinstance(e, websocket.WebSocketConnectionClosedException):
            return "connection closed by server"
        if isinstance(e, socket.gaierror):
            return f"unknown host ({e.strerror or e})"
        if isinstance(e, RemoteError):
            return e.reason
        nxt = e.__cause__ or e.__context__
        if nxt is None and e.args and isinstance(e.args[0], BaseException):
            nxt = e.args[0]
        if nxt is None and hasattr(e, "reason") and isinstance(e.reason, BaseException):
            nxt = e.reason
        e = nxt
    text = str(exc)
    for key, words in (
        ("Connection refused", "Connection refused"),
        ("timed out", "timed out"),
        ("Connection reset", "Connection reset by peer"),
        ("RemoteDisconnected", "connection closed by server"),
        ("Connection aborted", "connection closed by server"),
    ):
        if key in text:
            return words
    return f"{type(exc).__name__}: {text[:160]}"


def normalize_url(url: str) -> str:
    """``host:port`` or ``http://host:port/`` -> ``http://host:port`` (scheme required to be http/https)."""
    url = (url or "").strip()
    if not url:
        raise RemoteError("empty state-server URL", f"e.g. {DEFAULT_URL}")
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. "http://[" (Invalid IPv6 URL)
        raise RemoteError(f"not an http URL: {url!r} ({exc})", f"e.g. {DEFAULT_URL}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteError(f"not an http URL: {url!r}", f"e.g. {DEFAULT_URL}")
    if not _valid_host(parts.hostname):
        shown = parts.hostname if len(parts.hostname) <= 40 else parts.hostname[:40] + "..."
        raise RemoteError(
            f"not a host name or address: {shown!r}",
            f"labels of letters, digits and '-', at most 63 characters each and 253 in all; e.g. {DEFAULT_URL}",
        )
    try:
        parts.port  # noqa: B018  (raises ValueError for a port out of range)
    except ValueError:
        raise RemoteError(f"bad port in URL {url!r}", f"e.g. {DEFAULT_URL}") from None
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def _valid_host(host: str) -> bool:
    """A DNS name (RFC 1123 labels) or an IPv4/IPv6 address."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return len(host) <= 253 and all(_LABEL.match(label) for label in host.rstrip(".").split("."))


def stream_url(url: str, hz: float | None = None) -> str:
    parts = urlsplit(normalize_url(url))
    scheme = "wss" if parts.scheme == "https" else "ws"
    query = f"hz={hz:g}" if hz else ""
    return urlunsplit((scheme, parts.netloc, parts.path + f"{API}/stream", query, ""))


class StateClient:
    """HTTP client of one state server. ``token``: bearer token for control (None: none sent)."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, timeout: float = 2.0):
        self.url = normalize_url(url)
        self.token = token
        self.timeout = timeout
        self.session = requests.Session()

    def close(self) -> None:
        self.session.close()

    def _request(self, method: str, path: str, **kw) -> Answer:
        headers = kw.pop("headers", {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            r = self.session.request(method, self.url + path, headers=headers, timeout=self.timeout, **kw)
        except (requests.RequestException, ValueError) as exc:  # urllib3 refuses some URLs with a ValueError
            why = describe_error(exc)
            raise RemoteError(f"cannot reach {self.url}: {why}", "is the state server running?", reason=why) from exc
        try:
            body = r.json()
        except ValueError:
            raise RemoteError(
                f"{method} {path} answered HTTP {r.status_code} with non-JSON ({r.headers.get('Content-Type')})",
                "is this URL a state server?",
            ) from None
        return Answer(r.status_code, body if isinstance(body, dict) else {"value": body})

    def _get_ok(self, path: str) -> dict:
        a = self._request("GET", path)
        if a.status != 200:
            raise RemoteError(f"GET {path}: HTTP {a.status}: {a.body.get('error', a.body)}", a.body.get("hint", ""))
        return a.body

    def health(self) -> dict:
        return self._get_ok(f"{API}/health")

    def state(self) -> dict:
        return self._get_ok(f"{API}/state")

    def control(self, actuator: str, value, duration_s) -> Answer:
        """POST a command; the answer as it came (202 accepted, 4xx rejected with error and hint)."""
        body = {"actuator": actuator, "value": value, "duration_s": duration_s}
        return self._request(
            "POST", f"{API}/control", data=json.dumps(body), headers={"Content-Type": "application/json"}
        )

    def post_raw(self, data: bytes | str, content_type: str = "application/json") -> Answer:
        """POST ``data`` verbatim to the control endpoint (tests, fuzzing)."""
        return self._request("POST", f"{API}/control", data=data, headers={"Content-Type": content_type})

    def stop(self) -> Answer:
        return self._request("POST", f"{API}/control/stop")

    def stream(self, hz: float | None = None, timeout: float = 2.0) -> "StateStream":
        return StateStream(stream_url(self.url, hz), timeout)


class StateStream:
    """The WebSocket state stream; iterate for state dicts, ``recv()`` for one; ``close()`` when done."""

    def __init__(self, ws_url: str, timeout: float = 2.0):
        self.ws_url = ws_url
        try:
            self.ws = websocket.create_connection(ws_url, timeout=timeout, enable_multithread=True)
        except (OSError, websocket.WebSocketException) as exc:
            why = describe_error(exc)
            raise RemoteError(f"cannot open {ws_url}: {why}", "is the state server running?", reason=why) from exc

    def recv(self) -> dict:
        """The next state; raises on timeout or close (see :func:`describe_error`)."""
        msg = self.ws.recv()
        if not msg:
            raise websocket.WebSocketConnectionClosedException("connection closed by server")
        return json.loads(msg)

    def __iter__(self):
        while True:
            yield self.recv()

    def close(self) -> None:
        try:
            self.ws.close(timeout=0.2)
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_ready(url: str, timeout: float = 20.0, proc=None) -> dict:
    """Poll ``GET /api/v1/health`` until it answers (the health dict); RemoteError after ``timeout`` [s]
    or as soon as ``proc`` (a Popen of the server, optional) has exited."""
    client = StateClient(url, timeout=1.0)
    deadline, why = time.monotonic() + timeout, "no answer"
    try:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RemoteError(f"state server at {url} exited with code {proc.returncode}", "see its log")
            try:
                return client.health()
            except RemoteError as err:
                why = err.reason
            time.sleep(0.05)
    finally:
        client.close()
    raise RemoteError(f"state server at {url} not ready after {timeout:g} s: {why}", "see its log", reason=why)
