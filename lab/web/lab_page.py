"""The Lab page and its API: status, metrics, mode, push, pause, reset, render preset, and ``WS /ws``."""

import time

from flask import Blueprint, current_app, jsonify, render_template

from lab.render.overlays import OVERLAYS
from lab.render.renderer import PRESETS, Renderer, check_preset, default_preset, gl_info
from lab.web import messages, models_api, parity_api, recordings_api, replay_page, robot_api, signals, walk_api
from lab.web.common import json_body, require_token
from lab.web.control_api import control_blueprint, push_dict
from lab.web.server import on_stop
from lab.web.stream import FrameHub, merge_extensions, ws_loop
from lab.web.view_api import view_extension

bp = Blueprint("lab", __name__)


class SessionSource:
    """Frames of a :class:`~lab.runtime.session.SimSession`: copy the state under its lock, render outside it."""

    def __init__(self, session, width, height, preset):
        self.session, self.width, self.height, self.preset = session, width, height, preset
        self.renderer = None

    def open(self):
        self.renderer = Renderer(self.session.robot.model, self.width, self.height, self.preset)

    def frame(self, channel):
        qpos, sim_time, state = self.session.frame_state(overlays=bool(channel.overlays))
        t_wall = time.time()
        rgb = self.renderer.render(qpos, camera=channel.camera, overlays=channel.overlays, overlay_state=state)
        return rgb, {"sim_time": sim_time, "t_wall": t_wall}

    def close(self):
        if self.renderer is not None:
            self.renderer.close()


def _ctx():
    return current_app.extensions["lab"]


def init_app(app, sock, robot, session, fps=60.0, width=640, height=480, preset=None):
    preset = check_preset(preset or default_preset())
    source = SessionSource(session, width, height, preset)
    hub = FrameHub(source, fps=fps, name="lab")
    # ws_ext: callables fn(app) -> (handlers, tickers) that add message types to WS /ws (signals, camera)
    app.extensions["lab"] = {"robot": robot, "session": session, "hub": hub, "source": source, "ws_ext": []}
    on_stop(app, hub.close)
    app.register_blueprint(bp)
    # the 3D view: each viewer's camera, overlays, picking and the mouse pull (lab/web/view_api.py)
    app.extensions["lab"]["ws_ext"].append(
        view_extension(lambda: app.extensions["lab"]["robot"].model, lambda: app.extensions["lab"]["session"])
    )

    def latest():  # the session as of this call: POST /api/model switches it
        return app.extensions["lab"]["session"].latest()

    app.register_blueprint(
        control_blueprint(
            "lab",
            lambda: app.extensions["lab"]["session"],
            status_dict,
            latest,
        )
    )

    # the robot panel, the model picker and the PyBullet notes register here (one line each)
    app.register_blueprint(parity_api.lab_bp)  # GET /api/pybullet_notes
    models_api.init_app(app, "lab")
    app.register_blueprint(robot_api.bp)  # GET/POST /api/robot, /api/robot/sidecar, POST /api/pose
    app.register_blueprint(
        walk_api.walk_blueprint("lab", lambda: app.extensions["lab"]["session"])
    )  # GET/POST /api/walk
    signals.init_app(app)  # GET /api/signals, {"type": "signals"} on WS /ws
    recordings_api.init_app(app, "lab", lambda: app.extensions["lab"]["session"])  # /api/recordings (lab/record)
    replay_page.init_app(app, width, height, lambda: app.extensions["lab"]["source"].preset)  # /replay, exports

    @sock.route("/ws")
    def ws(ws):
        c = app.extensions["lab"]  # robot and session as of now (POST /api/model switches them)
        hello = messages.hello(
            "lab",
            ["lab"],
            width,
            height,
            fps,
            c["robot"].identity_dict(),
            modes=list(c["session"].modes),
            overlays=list(OVERLAYS),
        )
        handlers, tickers = merge_extensions(c["ws_ext"], app)
        ws_loop(
            ws,
            {"lab": c["hub"]},
            latest,
            hello,
            metrics_hz=25,
            status_fn=status_small,
            handlers=handlers,
            tickers=tickers,
            token=current_app.config.get("LAB_TOKEN"),
        )

    def status_small():
        c = app.extensions["lab"]
        s = c["session"]
        return {
            "mode": s.mode_name,
            "paused": s.paused,
            "preset": c["source"].preset,
            "resets": s.resets,
            "sim": s.sim_info(),
            "fall_time": s.fell_at(),
        }


def status_dict() -> dict:
    c = _ctx()
    s, robot, hub, src = c["session"], c["robot"], c["hub"], c["source"]
    return {
        "service": "lab",
        "mode": s.mode_name,
        "modes": list(s.modes),
        "sim": s.sim_info(),
        "fall_time": s.fell_at(),
        "paused": s.paused,
        "sim_time": round(s.sim_time, 6),
        "rtf": round(s.measured_rtf(), 3),
        "rtf_target": s.rtf,
        "push": push_dict(s.push),
        "identity": robot.identity_dict(),
        "model": robot.model_dict(),
        "render": {
            "width": src.width,
            "height": src.height,
            "preset": src.preset,
            "presets": list(PRESETS),
            "default_preset": default_preset(),
            "gl": gl_info(),
            **hub.stats(),
        },
        "auth": bool(current_app.config.get("LAB_TOKEN")),
        "links": current_app.extensions["settings"].links(),
    }


@bp.route("/")
def index():
    return render_template("lab.html", status=status_dict(), page="lab")


@bp.get("/api/events")
def api_events():
    """What happened in the session that a viewer caused (the mouse pull), newest last."""
    return jsonify({"events": _ctx()["session"].events()})


@bp.post("/api/rtf")
@require_token
def api_rtf():
    body = json_body()
    _ctx()["session"].set_rtf(body.get("rtf"))
    return jsonify(status_dict())


@bp.post("/api/render")
@require_token
def api_render():
    body = json_body()
    name = check_preset(body.get("preset"))
    c = _ctx()
    c["source"].preset = name
    c["hub"].submit(lambda src: src.renderer.set_preset(name))
    return jsonify(status_dict())
