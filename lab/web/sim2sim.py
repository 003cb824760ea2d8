"""Sim2Sim on :8767: the same humanoid in MuJoCo and PyBullet, side by side, in lockstep.

One :class:`~lab.runtime.lockstep.Lockstep` steps both engines; one :class:`~lab.web.stream.FrameHub`
per view renders it (``mujoco``, ``pybullet``, and ``overlay``: MuJoCo solid with PyBullet drawn
translucent over it). A hub renders only while a client watches it, so the overlay costs nothing
until the page turns it on.

API (as the Lab's, with an entry per engine):
- ``GET /api/status``: mode, paused, sim time, model identity, ``engines`` (name, version, dt,
  total mass each engine sees), render size, fps and renderer, per-view stream stats;
- ``GET /api/metrics``: the latest sample: ``engines.<name>`` metrics, ``divergence``, real-time factor;
- ``GET /api/history?since=T``: the samples after sim time ``T`` [s];
- ``POST /api/mode {"mode", [push params]}``, ``POST /api/push {...}``, ``POST /api/reset``,
  ``POST /api/pause {"paused"}``, ``POST /api/render {"preset"}``;
- ``GET/POST /api/walk``: the feedback walker's velocity command, in both engines (lab/web/walk_api.py);
- ``GET /api/steps?last=N``: the walk's footsteps paired by step index: touchdown time and foothold
  differences per step, and their summary (also in every metrics sample as ``steps``);
- ``WS /ws?views=mujoco,pybullet[,overlay]``: frames tagged by ``view``, metrics as JSON.
"""

import os
import threading
import time

from flask import Blueprint, current_app, jsonify, render_template, request

from lab.errors import LabError
from lab.render.overlays import OVERLAYS
from lab.render.renderer import PRESETS, Renderer, check_preset, default_preset, gl_info
from lab.settings import Settings
from lab.web import (
    make_flask,
    messages,
    models_api,
    parity_api,
    recordings_api,
    settings_for,
    use_settings,
    walk_api,
)
from lab.web.common import json_body, require_token
from lab.web.control_api import control_blueprint, push_dict
from lab.web.server import on_stop
from lab.web.stream import FrameHub, merge_extensions, ws_loop
from lab.web.view_api import view_extension

bp = Blueprint("sim2sim", __name__)
VIEWS = ("mujoco", "pybullet", "overlay")
DEFAULT_VIEWS = ("mujoco", "pybullet")
LABELS = {"mujoco": "MuJoCo", "pybullet": "PyBullet"}
RENDER_NICE = 5  # niceness added to the render threads


class LockstepSource:
    """Frames of one engine of a :class:`Lockstep` (``ghost``: a second engine drawn translucent)."""

    def __init__(self, lockstep, engine: str, width: int, height: int, preset: str, ghost: str | None = None):
        self.lockstep, self.engine, self.ghost = lockstep, engine, ghost
        self.width, self.height, self.preset = width, height, preset
        self.renderer = None

    def open(self):
        # Frames yield to physics when the CPUs are short: this producer thread (and the llvmpipe
        # threads it starts) run at a lower priority than the lockstep thread, which must hold real time.
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + RENDER_NICE)
        except (AttributeError, OSError):
            pass
        self.renderer = Renderer(self.lockstep.robot.model, self.width, self.height, self.preset)

    def frame(self, channel):
        qpos, sim_time, state = self.lockstep.frame_state(self.engine, overlays=bool(channel.overlays))
        ghost = self.lockstep.snapshot(self.ghost)[0] if self.ghost else None
        t_wall = time.time()
        rgb = self.renderer.render(qpos, ghost, camera=channel.camera, overlays=channel.overlays, overlay_state=state)
        return rgb, {"sim_time": sim_time, "t_wall": t_wall}

    def close(self):
        if self.renderer is not None:
            self.renderer.close()


def create_sim2sim_app(
    settings: Settings | None = None, *, mode: str = "stand", modes: dict | None = None, start: bool = True, **overrides
):
    """The Sim2Sim service (``settings.sim2sim_port``): a URDF humanoid (``settings.model``; None = built-in
    Q1) in both engines, its page and API. ``overrides``: Settings fields for this app; ``fps`` is
    accepted for ``sim2sim_fps``. ``mode``: the first mode; ``modes``: the mode registry (default
    Sim2Sim's, ``lab.runtime.modes.SIM2SIM_MODES``).

    Raises :class:`LabError` naming the engine when only one engine can load the model.
    """
    from lab.runtime.lockstep import Lockstep, load_sim2sim_robot

    if "fps" in overrides:
        overrides["sim2sim_fps"] = overrides.pop("fps")
    settings = settings_for(settings, overrides)
    robot = load_sim2sim_robot(settings.model)
    lockstep = Lockstep(robot, mode=mode, modes=modes)
    app, sock = make_flask("sim2sim", settings.token)
    use_settings(app, settings, "sim2sim")
    try:
        init_app(
            app,
            sock,
            lockstep,
            fps=settings.sim2sim_fps,
            width=settings.width,
            height=settings.height,
            preset=settings.preset,
        )
    except Exception:
        lockstep.close()
        raise
    if start:
        lockstep.start()
    return app


def init_app(app, sock, lockstep, fps=30.0, width=640, height=480, preset=None):
    preset = check_preset(preset or default_preset())
    a, b = lockstep.names[:2]
    sources = {
        a: LockstepSource(lockstep, a, width, height, preset),
        b: LockstepSource(lockstep, b, width, height, preset),
        "overlay": LockstepSource(lockstep, a, width, height, preset, ghost=b),
    }
    hubs = {v: FrameHub(src, fps=fps, name=v) for v, src in sources.items()}
    app.extensions["sim2sim"] = {
        "lockstep": lockstep,
        "hubs": hubs,
        "sources": sources,
        "fps": fps,
        "width": width,
        "height": height,
        "preset": preset,
    }
    for hub in hubs.values():
        on_stop(app, hub.close)
    on_stop(app, lockstep.close)
    app.register_blueprint(bp)
    # the mass/inertia parity table and the model picker register here (one line each)
    app.register_blueprint(parity_api.sim2sim_bp)  # GET /api/parity
    models_api.init_app(app, "sim2sim")
    # GET/POST /api/walk: the feedback walker's velocity command, both engines at once
    app.register_blueprint(walk_api.walk_blueprint("sim2sim", lambda: app.extensions["sim2sim"]["lockstep"]))
    recordings_api.init_app(app, "sim2sim", lambda: app.extensions["sim2sim"]["lockstep"])  # /api/recordings
    app.register_blueprint(
        control_blueprint(
            "sim2sim", lambda: app.extensions["sim2sim"]["lockstep"], status_dict, metrics_sample, tuple(lockstep.modes)
        )
    )

    @sock.route("/ws")
    def ws(ws):
        c = app.extensions["sim2sim"]
        try:
            views = parse_views(request.args.get("views"))
        except LabError as exc:
            ws.send(messages.dumps({"type": "error", **exc.to_dict()}))
            return
        ls = c["lockstep"]
        hello = messages.hello(
            "sim2sim",
            list(views),
            width,
            height,
            fps,
            ls.robot.identity_dict(),
            modes=list(ls.modes),
            engines=ls.engine_info(),
            labels=view_labels(ls),
            overlays=list(OVERLAYS),
        )
        handlers, tickers = merge_extensions([view_extension(lambda: ls.robot.model)])
        ws_loop(
            ws,
            {v: c["hubs"][v] for v in views},
            metrics_sample,
            hello,
            metrics_hz=25,
            status_fn=status_small,
            handlers=handlers,
            tickers=tickers,
            token=current_app.config.get("LAB_TOKEN"),
        )


def parse_views(raw: str | None) -> tuple:
    if not raw:
        return DEFAULT_VIEWS
    views = tuple(dict.fromkeys(v.strip() for v in raw.split(",") if v.strip()))
    unknown = [v for v in views if v not in VIEWS]
    if unknown or not views:
        raise LabError(f"unknown view(s) {', '.join(unknown) or '(none)'}", f"views: {', '.join(VIEWS)}")
    return views


def view_labels(lockstep) -> dict:
    info = lockstep.engine_info()
    labels = {n: f"{LABELS.get(n, n)} {i['version']}" for n, i in info.items()}
    a, b = lockstep.names[:2]
    labels["overlay"] = f"Overlay: {labels[a]} solid, {labels[b]} translucent"
    return labels


def _ctx():
    return current_app.extensions["sim2sim"]


def metrics_sample() -> dict:
    c = _ctx()
    ls, hubs = c["lockstep"], c["hubs"]
    return {**ls.latest(), "fps": {v: round(h.measured_fps(), 2) for v, h in hubs.items()}}


def status_small() -> dict:
    c = _ctx()
    ls = c["lockstep"]
    return {"mode": ls.mode_name, "paused": ls.paused, "preset": c["preset"], "resets": ls.resets, "sim": ls.sim_info()}


def status_dict() -> dict:
    c = _ctx()
    ls, hubs = c["lockstep"], c["hubs"]
    robot = ls.robot
    engines = ls.engine_info()
    for n, e in engines.items():
        e["sim_time"] = round(ls.engines[n].time, 6)
        e["label"] = f"{LABELS.get(n, n)} {e['version']}"
    return {
        "service": "sim2sim",
        "mode": ls.mode_name,
        "modes": list(ls.modes),
        "paused": ls.paused,
        "sim_time": round(ls.sim_time, 6),
        "rtf": round(ls.measured_rtf(), 3),
        "rtf_target": ls.rtf,
        "push": push_dict(ls.push),
        "engines": engines,
        "mass_warning": ls.masses["mass_warning"],
        "error": ls.error,
        "sim": ls.sim_info(),
        "walk": ls.walk_state(),
        "control": {
            "law": "tau = clip(kp (q* - q) - kd qd)",
            "gravity_ff": ls.gravity_ff_requested,
            "gravity_ff_requested": ls.gravity_ff_requested,
            "tick_s": ls.dt,
        },
        "identity": robot.identity_dict(),
        "model": robot.model_dict(),
        "render": {
            "width": c["width"],
            "height": c["height"],
            "fps": c["fps"],
            "preset": c["preset"],
            "presets": list(PRESETS),
            "default_preset": default_preset(),
            "gl": gl_info(),
            "views": {v: h.stats() for v, h in hubs.items()},
            "labels": view_labels(ls),
        },
        "auth": bool(current_app.config.get("LAB_TOKEN")),
        "links": current_app.extensions["settings"].links(),
    }


@bp.route("/")
def index():
    return render_template("sim2sim.html", status=status_dict(), page="sim2sim")


@bp.post("/api/render")
@require_token
def api_render():
    body = json_body()
    name = check_preset(body.get("preset"))
    c = _ctx()
    c["preset"] = name
    for v, hub in c["hubs"].items():
        c["sources"][v].preset = name
        hub.submit(lambda src, name=name: src.renderer.set_preset(name))
    return jsonify(status_dict())


@bp.get("/api/steps")
def api_steps():
    """The walk's per-step divergence (:meth:`Lockstep.step_divergence`): the last ``last`` rows."""
    from lab.runtime.lockstep import STEP_ROWS

    lo, hi, default = STEP_ROWS  # GET /api/steps?last=N: least, most, default rows
    raw = request.args.get("last")
    last = default
    if raw is not None:
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and lo <= int(raw) <= hi):
            raise LabError(
                f"last must be an integer in [{lo}, {hi}], got {raw[:40]!r}", f"e.g. /api/steps?last={default}"
            )
        last = int(raw)
    return jsonify(_ctx()["lockstep"].step_divergence(last))
