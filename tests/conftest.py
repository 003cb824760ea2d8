"""Shared fixtures: the real model loaded once, real servers on free ports, real Chromium."""

import json
import socket
import sys
import time
from pathlib import Path

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
import lab  # noqa: E402, F401  (chooses EGL, the one place that does, before any test imports mujoco)

SCREENSHOTS = ROOT / "results" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="session")
def robot():
    from lab.robots.model import load_robot

    return load_robot()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab_server():
    """The real Lab app served on a free loopback port for this test module."""
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(remote_url=f"http://127.0.0.1:{free_port()}")
    with ServerThread(app) as srv:
        wait_until(lambda: srv_get(srv.url, "/api/metrics")["sim_time"] > 0.05, 10)
        yield srv


@pytest.fixture(scope="module")
def s2s():
    """The real Sim2Sim app (both engines, 30 fps views) on a free loopback port for this test module."""
    import requests

    from lab.web.server import ServerThread
    from lab.web.sim2sim import create_sim2sim_app

    app = create_sim2sim_app(fps=30)
    with ServerThread(app) as srv:
        wait_until(lambda: requests.get(srv.url + "/api/metrics", timeout=5).json()["sim_time"] > 0.05, 15)
        yield srv


def record_offline(robot, results: Path, mode: str, seconds: float, label: str) -> str:
    """A recording of ``seconds`` [s] of ``mode``, made offline (``SimSession.advance``) into
    ``results/recordings``; its id."""
    from lab.record.store import Recordings
    from lab.runtime.session import SimSession

    s = SimSession(robot, mode=mode)
    store = Recordings(results / "recordings", "lab")
    info = store.start(s, label=label)
    s.advance(seconds)
    store.stop(info["id"])
    s.close()
    return info["id"]


def srv_get(base: str, path: str) -> dict:
    import requests

    return requests.get(base + path, timeout=5).json()


def wait_until(pred, timeout: float, interval: float = 0.05):
    """Poll ``pred`` until it returns truthy; the value, or an AssertionError after ``timeout`` [s]."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as exc:  # the server may be starting
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s (last error: {last_exc})")


class WsClient:
    """A real WebSocket client (websocket-client) that splits text JSON and binary frames."""

    def __init__(self, url: str, timeout: float = 10):
        import websocket

        self.ws = websocket.create_connection(url, timeout=timeout)

    def recv(self):
        """The next message: a dict for JSON text, bytes for a frame (remember to :meth:`ack` it)."""
        import websocket

        op, data = self.ws.recv_data()
        if op == websocket.ABNF.OPCODE_TEXT:
            msg = json.loads(data.decode())
            if isinstance(msg, dict) and msg.get("type") == "frame":
                self.last_header = msg
            return msg
        return data

    def ack(self):
        """Acknowledge the last frame received (the stream's flow control)."""
        h = self.last_header
        self.ws.send(json.dumps({"type": "ack", "view": h["view"], "seq": h["seq"]}))

    last_header = None

    def close(self):
        self.ws.close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (scripts/install_system.sh)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    ctx.close()
