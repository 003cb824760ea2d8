"""Serving a Flask app: a threaded WSGI server, bind checks, and one place where resources stop."""

import ipaddress
import logging
import signal
import socket
import threading

from werkzeug.serving import make_server

from lab.errors import LabError

log = logging.getLogger("lab")


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(a[4][0]).is_loopback for a in socket.getaddrinfo(host, None))
        except OSError:
            return False


def check_token(token: str | None) -> None:
    """A token is a word a client can send: not blank, no surrounding whitespace, printable ASCII."""
    if token is None:
        return
    if not token.strip():
        raise LabError(
            "the token is blank", "pass --token TOKEN (or LAB_TOKEN) with a non-blank word, or leave it unset"
        )
    if token != token.strip() or not all(33 <= ord(c) < 127 for c in token):
        raise LabError(
            "the token has spaces or characters an HTTP header cannot carry",
            'use letters, digits and punctuation only, e.g. --token "$(openssl rand -hex 16)"',
        )


def check_bind(host: str, token: str | None) -> None:
    """Binding anything but loopback requires a token; a token given must be usable (:func:`check_token`)."""
    check_token(token)
    if not is_loopback(host) and not token:
        raise LabError(
            f"refusing to bind {host} without a token",
            "pass --token TOKEN (or set LAB_TOKEN); clients then send 'Authorization: Bearer TOKEN' to change state",
        )


def on_stop(app, fn) -> None:
    """Register ``fn()`` to run when the app's server stops (simulation threads, hubs, children)."""
    app.extensions.setdefault("lab_stop", []).append(fn)


def stop_resources(app) -> None:
    for fn in reversed(app.extensions.get("lab_stop", [])):
        try:
            fn()
        except Exception:  # keep stopping the rest
            log.exception("while stopping")
    app.extensions["lab_stop"] = []


class ServerThread:
    """``app`` served on ``host:port`` (0 picks a free port) in a background thread; for tests and benchmarks."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0):
        self.app = app
        self.server = make_server(host, port, app, threaded=True)
        app.config["LAB_BIND_HOST"] = host  # the request guard answers this name too
        self.port = self.server.server_port
        self.url = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(5)
        stop_resources(self.app)


def serve(app, host: str, port: int, name: str = "lab") -> None:
    """Serve until SIGINT/SIGTERM, then stop every registered resource."""
    try:
        server = make_server(host, port, app, threaded=True)
    except OSError as exc:
        raise LabError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            "another process uses that port; stop it or pass --port",
        ) from exc
    app.config["LAB_BIND_HOST"] = host  # the request guard answers this name too
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    stopping = threading.Event()

    def _stop(signum, frame):
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    print(f"{name}: serving on http://{host}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    finally:
        stop_resources(app)
        print(f"{name}: stopped", flush=True)
