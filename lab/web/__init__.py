"""The Lab's web layer: the app factory. Each page is a blueprint; each resource with a lifetime
(simulation thread, frame hub, remote monitor, scan workers) is started here and stopped through
:func:`lab.web.server.on_stop`."""

from pathlib import Path

from flask import Flask, request
from flask_sock import Sock

from lab.settings import Settings
from lab.web.common import MAX_BODY, register_common
from lab.web.server import on_stop

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES, STATIC = ROOT / "templates", ROOT / "static"


def make_flask(name: str, token: str | None, max_body: int = MAX_BODY) -> tuple[Flask, Sock]:
    """Every service's Flask app, built one way: its token, the request guard and the body limit
    (``max_body`` bytes), JSON errors, the vendored JS and the OpenAPI route
    (:func:`lab.web.common.register_common`), and a WebSocket route maker."""
    app = Flask(name, template_folder=str(TEMPLATES), static_folder=str(STATIC))
    app.config["LAB_TOKEN"] = token or None
    app.json.sort_keys = False
    register_common(app, max_body=max_body)
    return app, Sock(app)


def settings_for(settings: Settings | None, overrides: dict) -> Settings:
    """``settings`` (default: ``Settings()``) with ``overrides`` (Settings field names) applied."""
    settings = settings if settings is not None else Settings()
    if not isinstance(settings, Settings):
        raise TypeError(f"settings must be a lab.settings.Settings, got {type(settings).__name__}")
    return settings.replace(**overrides) if overrides else settings


def use_settings(app: Flask, settings: Settings, service: str) -> None:
    """Keep ``settings`` on ``app`` and give every template ``settings``, ``service`` and ``nav``: the
    navigation links, each with its ``href`` (another service's link keeps the host the browser used,
    so the links work over an SSH tunnel or a LAN address too)."""
    app.extensions["settings"] = settings

    @app.context_processor
    def _settings_context():
        host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        nav = []
        for link in settings.nav(service):
            href = link["path"] if link["local"] else f"//{host}:{link['port']}{link['path']}"
            nav.append({**link, "href": href})
        return {"settings": settings, "service": service, "nav": nav}


def create_lab_app(
    settings: Settings | None = None, *, modes: dict | None = None, start: bool = True, **overrides
) -> Flask:
    """The Lab (``settings.lab_port``): one live MuJoCo session, its stream and API, the remote monitor
    and scans (under ``settings.results_dir/scans``).

    ``overrides``: Settings fields for this app (``create_lab_app(token="x", remote_url=URL)``);
    ``modes``: the mode registry the session offers (default the Lab's, ``lab.runtime.modes.LAB_MODES``);
    ``start=False``: the simulation thread is not started.
    """
    from lab.robots.model import load_robot
    from lab.runtime.session import SimSession
    from lab.web import lab_page, remote_page, scans_page

    settings = settings_for(settings, overrides)
    robot = load_robot(settings.model)
    app, sock = make_flask("lab", settings.token)
    use_settings(app, settings, "lab")
    session = SimSession(robot, mode=settings.mode, modes=modes)
    lab_page.init_app(
        app,
        sock,
        robot,
        session,
        fps=settings.fps,
        width=settings.width,
        height=settings.height,
        preset=settings.preset,
    )
    if start:
        session.start()
    on_stop(app, session.stop)

    remote_page.init_app(app, settings.monitor_url, robot)
    scans_page.init_app(app, settings.results_dir, model=settings.model)
    return app
