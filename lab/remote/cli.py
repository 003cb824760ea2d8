"""Starting and stopping a state server as a child process (``python app.py state-server``)."""

import os
import signal
import subprocess
import sys
from pathlib import Path


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
        ``log_path`` (default: discarded). The token goes to the child in its environment (``LAB_TOKEN``),
    never on its command line, where ``ps`` would show it. Wait for it with :func:`lab.remote.client.wait_ready`."""
    root = Path(__file__).resolve().parents[2]
    if entry == "app" and (root / "app.py").exists():
        cmd = [sys.executable, str(root / "app.py"), "state-server"]
    else:
        cmd = [sys.executable, "-m", "lab.remote", "serve"]
    cmd += ["--host", host, "--port", str(port)]
    if model is not None:
        cmd += ["--model", str(model)]
    if mode:
        cmd += ["--mode", mode]
    for name in allow_actuators:
        cmd += ["--allow-actuator", name]
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 (the child owns it)
    try:
        env = {**os.environ, "LAB_TOKEN": token} if token else {k: v for k, v in os.environ.items() if k != "LAB_TOKEN"}
        return subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env)
    finally:
        if log_path:
            out.close()


def stop_child(proc: subprocess.Popen, timeout: float = 5.0, sig: int = signal.SIGTERM) -> None:
    """Stop a child process (a state server, or ``python app.py``): ``sig`` (SIGTERM; SIGINT is Ctrl+C),
    then SIGKILL after ``timeout`` [s]; returns once it has exited."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
