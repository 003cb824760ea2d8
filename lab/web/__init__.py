"""The Lab's web layer: the app factory. Each page is a blueprint; each resource with a lifetime
(simulation thread, frame hub, remote monitor, scan workers) is started here and stopped through
:func:`lab.web.server.on_stop`."""

import os
from pathlib import Path

from lab.render.renderer import ensure_egl

ensure_egl()

from flask import Flask  # noqa: E402
from flask_sock import Sock  # noqa: E402

from lab.web.common import register_common  # noqa: E402
from lab.web.server import on_stop  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES, STATIC = ROOT / "templates", ROOT / "static"


def make_flask(name: str, token: str | None) -> tuple[Flask, Sock]:
    app = Flask(name, template_folder=str(TEMPLATES), static_folder=str(STATIC))
    app.config["LAB_TOKEN"] = token or None
    app.json.sort_keys = False
    register_common(app)
    return app, Sock(app)


def create_lab_app(
    model: str | None = None,
    token: str | None = None,
    fps: float = 60.0,
    width: int = 640,
    height: int = 480,
    preset: str | None = None,
    mode: str = "stand",
    remote_url: str | None = None,
    results_dir: str | Path | None = None,
    start: bool = True,
    links: dict | None = None,
) -> Flask:
    """The Lab on :8765: one live MuJoCo session, its stream and API, the remote monitor and scans."""
    from lab.robots.model import load_robot
    from lab.runtime.session import SimSession
    from lab.web import lab_page, remote_page, scans_page

    robot = load_robot(model)
    app, sock = make_flask("lab", token)
    app.config["LAB_LINKS"] = links or {}
    session = SimSession(robot, mode=mode)
    lab_page.init_app(app, sock, robot, session, fps=fps, width=width, height=height, preset=preset)
    if start:
        session.start()
    on_stop(app, session.stop)

    remote_page.init_app(app, remote_url, robot)
    scans_page.init_app(app, Path(results_dir or os.environ.get("LAB_RESULTS", ROOT / "results")), model=model)
    return app
