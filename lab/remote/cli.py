"""The state server's command line: flags, serving until a signal, and starting it as a child process."""

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from lab.errors import LabError
from lab.remote.protocol import DEFAULT_ALLOWED
from lab.remote.server import _ensure_logging, create_state_app
from lab.web.server import is_loopback

log = logging.getLogger("lab.remote.server")


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The state server's flags (shared by ``python -m lab.remote serve`` and ``app.py state-server``)."""
    p.add_argument("--model", default=None, help="URDF or MJCF file (default: the built-in Q1)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8766, help="port (default 8766; 0 picks a free one)")
    p.add_argument("--token", default=None, help="bearer token for control (required beyond loopback; or LAB_TOKEN)")
    p.add_argument(
        "--allow-actuator",
        action="append",
        dest="allow_actuators",
        metavar="NAME",
        help="actuator a client may command (repeatable; default motor_left_elbow)",
    )
    p.add_argument("--mode", default="stand", help="Lab mode the server runs (stand, squat, push, zero)")
    return p


def run(args: argparse.Namespace) -> int:
    """Start the state server from parsed ``args``; blocks until SIGINT/SIGTERM; returns an exit code."""
    _ensure_logging()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    token = args.token or os.environ.get("LAB_TOKEN") or None
    if not is_loopback(args.host) and not token:
        log.error("binding %s needs --token TOKEN (or LAB_TOKEN): control would be open to the network", args.host)
        return 2
    try:
        app = create_state_app(
            args.model, token=token, allow_actuators=tuple(args.allow_actuators or DEFAULT_ALLOWED), mode=args.mode
        )
    except LabError as err:
        log.error("%s (%s)", err.message, err.hint)
        return 2
    sim = app.extensions["state_sim"]
    from werkzeug.serving import make_server

    try:
        srv = make_server(args.host, args.port, app, threaded=True)
    except OSError as exc:
        sim.stop()
        log.error("cannot listen on %s:%s: %s", args.host, args.port, exc.strerror or exc)
        return 2
    log.info("listening on http://%s:%d", args.host, srv.server_port)

    def _stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        sim.stop()
        srv.server_close()
        log.info("state server stopped at simulation time %.3f s", float(sim.data.time))
    return 0


def main(argv=None) -> int:
    p = add_arguments(argparse.ArgumentParser(prog="state-server", description="The headless MuJoCo state server."))
    return run(p.parse_args(argv))


def spawn_state_server(
    port: int,
    host: str = "127.0.0.1",
    model=None,
    token: str | None = None,
    mode: str | None = None,
    allow_actuators=(),
    log_path=None,
    entry: str = "app",
) -> subprocess.Popen:
    """Start a state server as a child process; the caller stops it (``terminate()`` then ``wait()``).

    ``entry``: "app" runs ``python app.py state-server`` (falls back to the module when app.py is
    absent), "module" runs ``python -m lab.remote serve``; both take the same flags. Its log goes to
    ``log_path`` (default: discarded). Wait for it with :func:`lab.remote.client.wait_ready`."""
    root = Path(__file__).resolve().parents[2]
    if entry == "app" and (root / "app.py").exists():
        cmd = [sys.executable, str(root / "app.py"), "state-server"]
    else:
        cmd = [sys.executable, "-m", "lab.remote", "serve"]
    cmd += ["--host", host, "--port", str(port)]
    if model is not None:
        cmd += ["--model", str(model)]
    if token:
        cmd += ["--token", token]
    if mode:
        cmd += ["--mode", mode]
    for name in allow_actuators:
        cmd += ["--allow-actuator", name]
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 (the child owns it)
    try:
        return subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT)
    finally:
        if log_path:
            out.close()


def stop_child(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """Stop a child started by :func:`spawn_state_server`: SIGTERM, then SIGKILL after ``timeout`` [s]."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
