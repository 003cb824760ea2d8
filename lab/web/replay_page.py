"""The Lab's replay page (``/replay``): open a recording, scrub, play, step; its 3D view, charts and exports.

Each viewer has a cursor of its own and a :class:`~lab.web.stream.FrameHub` of its own (its renderer, at
most :data:`MAX_VIEWERS` at once), whose :class:`ReplaySource` draws the exact recorded state at the
cursor (:class:`lab.record.player.Player`: MuJoCo stepped from the keyframe before, never free-running),
with the viewer's camera and overlays (the recorded contacts, support polygon, CoP and push; CoM and
frames from the kinematics) through the 3D view's own messages (:func:`lab.web.view_api.view_extension`).

Routes:

- ``GET /replay[?id=ID]``: the page (the newest finished recording without ``id``); ``?scan=SID&point=I``: the
  recording a scan point kept, id ``scan:SID:I`` (served by :mod:`lab.web.scan_recordings`, registered with
  :func:`add_source`; every route below takes such an id, read-only);
- ``WS /ws/replay?id=ID``: frames of the recording at the cursor (a frame header's ``sim_time`` is the
  recording time it shows) and the cursor as ``metrics`` at :data:`CURSOR_HZ`; the client moves it with
  ``{"type": "replay", "t"?, "playing"?, "speed"?, "step"?}`` (:data:`REPLAY_HINT`), answered
  ``{"type": "cursor", ...}``; plus camera, overlays and pick;
- ``GET /api/recordings/<id>/timeline``: duration, the frame step, the /metrics series the charts draw
  (pelvis height, pitch, max joint error) and the events;
- ``GET /api/recordings/<id>/state?t=T``: the exact qpos at recording time T [s];
- ``POST /api/recordings/<id>/export`` ``{"t0", "t1", "format", "width", "height", "fps", "overlays",
  "stamp"}`` (:mod:`lab.record.export`): 202 with the job; ``GET /api/exports/<job>``: its progress;
  ``GET /api/exports/<job>/file``: the MP4 or GIF; ``DELETE /api/exports/<job>``: cancel it (a finished one: remove it).
"""

import collections
import math
import threading
import time

import numpy as np
from flask import Blueprint, current_app, jsonify, render_template, request, send_file
from flask_sock import Sock

from lab.errors import LabError
from lab.record import format as fmt
from lab.record.export import Exports, check_request
from lab.record.player import REPLAY_OVERLAYS, Player
from lab.record.reader import file_info, open_recording
from lab.render.renderer import Renderer
from lab.web import messages
from lab.web.common import json_body, require_token
from lab.web.server import on_stop
from lab.web.stream import FrameHub, merge_extensions, ws_loop
from lab.web.view_api import view_extension

bp = Blueprint("replay", __name__)
_sock = Sock()
REPLAY_FPS = 30.0  # frames/s of a replay view
CURSOR_HZ = 20.0  # cursor messages/s on WS /ws/replay
SPEEDS = (0.1, 4.0)  # playback speed range (x real time)
MAX_STEP = 100  # frames one step message may move
MAX_VIEWERS = 6  # replay views rendered at once (each its own renderer); one more is refused (429)
SETTLE_FRAMES = 30  # frames re-rendered after the state changed, while a following camera eases in
SERIES = ("pelvis_z", "pitch_deg", "max_joint_err")  # /metrics fields the charts draw
MAX_POINTS = 4000  # points per chart series (a longer recording is thinned evenly)
REPLAY_HINT = '{"type": "replay", "t": 1.5, "playing": true, "speed": 1.0, "step": 1} (any of them)'
SCAN_PREFIX = "scan:"  # the ids of scan points' recordings: scan:<scan id>:<point> (lab.web.scan_recordings)


class Cursor:
    """Where one viewer is in a recording of ``duration_s`` [s]: a time that runs on at ``speed`` while playing.
    Set from the WebSocket thread, read from the render thread."""

    def __init__(self, duration_s: float, frame_dt: float):
        self.duration_s, self.frame_dt = duration_s, frame_dt
        self._lock = threading.Lock()
        self._t, self._wall, self.playing, self.speed = 0.0, time.perf_counter(), False, 1.0

    def now(self) -> float:
        """The cursor time [s]; playing stops at the end."""
        with self._lock:
            if self.playing:
                wall = time.perf_counter()
                self._t = min(self.duration_s, self._t + (wall - self._wall) * self.speed)
                self._wall = wall
                if self._t >= self.duration_s:
                    self.playing = False
            return self._t

    def apply(self, msg: dict) -> None:
        """``{"t"?, "playing"?, "speed"?, "step"?}`` (checked first; a bad one changes nothing): seek to
        ``t`` [s], play or pause, set the speed, step ``step`` frames (pauses)."""
        t, playing, speed, step = msg.get("t"), msg.get("playing"), msg.get("speed"), msg.get("step")
        if t is not None and (not _is_number(t) or not math.isfinite(t)):
            raise LabError(f"t must be a number of seconds, got {str(t)[:20]}", REPLAY_HINT)
        if playing is not None and not isinstance(playing, bool):
            raise LabError(f"playing must be true or false, got {str(playing)[:20]}", REPLAY_HINT)
        if speed is not None and (not _is_number(speed) or not SPEEDS[0] <= speed <= SPEEDS[1]):
            raise LabError(f"speed {str(speed)[:20]} is outside [{SPEEDS[0]:g}, {SPEEDS[1]:g}]", REPLAY_HINT)
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or abs(step) > MAX_STEP):
            raise LabError(f"step must be an integer of frames in [-{MAX_STEP}, {MAX_STEP}]", REPLAY_HINT)
        now = self.now()
        with self._lock:
            self._wall = time.perf_counter()
            if t is not None:
                now = float(t)
            if step is not None:
                self.playing = False
                now = round(now / self.frame_dt) * self.frame_dt + step * self.frame_dt
            self._t = min(max(now, 0.0), self.duration_s)
            if speed is not None:
                self.speed = float(speed)
            if playing is not None:
                self.playing = playing
                if playing and self._t >= self.duration_s:  # play at the end: from the start
                    self._t = 0.0

    def to_dict(self) -> dict:
        t = self.now()
        return {"t": round(t, 6), "playing": self.playing, "speed": self.speed, "duration_s": self.duration_s}


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def frame_dt_of(rec) -> float:
    """The recording's frame step [s]: its sample period (the /metrics rate), a whole number of physics steps."""
    n = rec.topics.get("/metrics", {}).get("count", 0)
    if n < 2 or rec.duration_s <= 0:
        return rec.dt
    return max(1, round(rec.duration_s / (n - 1) / rec.dt)) * rec.dt


class ReplaySource:
    """Frames of one recording at a :class:`Cursor`, for a :class:`FrameHub` (everything here runs in its
    thread: the renderer's GL context and the recording's file are that thread's)."""

    def __init__(self, rec, cursor: Cursor, width: int, height: int, preset: str | None):
        self.rec, self.cursor = rec, cursor
        self.model = rec.model()
        self.width, self.height, self.preset = width, height, preset
        self.renderer = self.player = None
        self.seek_ms: float | None = None
        self._last = {}  # channel -> (state key, rgb, frames since the state changed)

    def open(self):
        self.player = Player(self.rec)
        self.renderer = Renderer(self.model, self.width, self.height, self.preset)

    def frame(self, channel):
        d = self.player.at(self.cursor.now())
        self.seek_ms = self.player.seek_ms
        key = (self.player.k, channel.key)
        last = self._last.get(channel)
        if last is None or last[0] != key or last[2] < SETTLE_FRAMES:
            state = self.player.overlay_state() if channel.overlays else None
            rgb = self.renderer.render(d.qpos, camera=channel.camera, overlays=channel.overlays, overlay_state=state)
            if len(self._last) > 64:  # channels come and go with the viewers' cameras
                self._last.clear()
            last = self._last[channel] = (key, rgb, 0 if last is None or last[0] != key else last[2] + 1)
        return last[1], {"sim_time": round(self.player.k * self.rec.dt, 6), "t_wall": time.time()}

    def close(self):
        if self.renderer is not None:
            self.renderer.close()
        self.rec.close()


def _ctx() -> dict:
    return current_app.extensions["replay"]


def init_app(app, width: int = 640, height: int = 480, preset_fn=None) -> None:
    """The replay page and its API on the Lab; the recordings of ``app.extensions["recordings"]`` (register
    :mod:`lab.web.recordings_api` first). ``preset_fn()``: the render preset a new view starts with."""
    store = app.extensions["recordings"]["store"]
    exports = Exports(store.folder.parent / "exports")
    ctx = {
        "store": store,
        "exports": exports,
        "width": width,
        "height": height,
        "preset_fn": preset_fn or (lambda: None),
        "viewers": set(),  # the hubs of the open replay views
        "lock": threading.Lock(),
        "players": collections.OrderedDict(),  # (rid, size, mtime) -> (lock, Recording, Player), for GET state
        "timelines": {},  # (rid, size, mtime) -> the timeline dict
        "sources": {},  # id prefix -> resolve(rid) -> Path: recordings kept elsewhere (add_source)
    }
    app.extensions["replay"] = ctx
    on_stop(app, exports.close)
    on_stop(app, lambda: [hub.close() for hub in list(ctx["viewers"])])
    on_stop(app, lambda: [rec.close() for _, rec, _ in ctx["players"].values()])
    app.register_blueprint(bp)


def add_source(app, prefix: str, resolve) -> None:
    """Recordings kept outside the store, read-only: an id starting with ``prefix`` is the file
    ``resolve(rid)`` returns (a :class:`LabError` 404 that says why when there is none)."""
    app.extensions["replay"]["sources"][prefix] = resolve


def recording_path(rid: str):
    """The finished file of recording ``rid``: one a source resolves (:func:`add_source`), else the store's."""
    c = _ctx()
    for prefix, resolve in c["sources"].items():
        if rid.startswith(prefix):
            return resolve(rid)
    return c["store"].path(rid)


def _file_key(rid: str) -> tuple:
    path = recording_path(rid)
    st = path.stat()
    return path, (rid, st.st_size, st.st_mtime_ns)


def _finished(store) -> list:
    return [r for r in store.list() if r["state"] != "recording"]


@bp.route("/replay")
def page():
    c = _ctx()
    recordings = _finished(c["store"])
    rid = request.args.get("id")
    if "scan" in request.args:  # a scan point's recording
        rid = f"{SCAN_PREFIX}{request.args['scan']}:{request.args.get('point', '')}"
    rid = rid or (recordings[0]["id"] if recordings else None)
    problem = None
    if rid is not None:
        try:
            path = recording_path(rid)
            if any(rid.startswith(p) for p in c["sources"]):  # listed first, so the picker shows it
                recordings = [{"id": rid, **file_info(path)}, *recordings]
            else:
                c["store"].info(rid)
        except LabError as exc:
            problem, rid = f"{exc.message} — {exc.hint}", None
    return render_template(
        "replay.html",
        page="replay",
        recordings=recordings,
        rid=rid,
        problem=problem,
        speeds=SPEEDS,
        overlays=REPLAY_OVERLAYS,
    )


@bp.get("/api/recordings/<rid>/timeline")
def api_timeline(rid):
    c = _ctx()
    path, key = _file_key(rid)
    out = c["timelines"].get(key)
    if out is None:
        with open_recording(path) as rec:
            out = _timeline(rec, rid)
        with c["lock"]:
            c["timelines"] = {k: v for k, v in c["timelines"].items() if k[0] != rid} | {key: out}
    return jsonify(out)


def _timeline(rec, rid: str) -> dict:
    """What the page draws under the view: the /metrics series over the whole recording and the events."""
    t, cols = [], {name: [] for name in SERIES}
    if "/metrics" in rec.topics:
        for ts, m in rec.read("/metrics"):
            t.append(round(ts, 6))
            for name in SERIES:
                v = m.get(name)
                cols[name].append(v if isinstance(v, (int, float)) and math.isfinite(v) else None)
    keep = slice(None, None, max(1, math.ceil(len(t) / MAX_POINTS)))
    return {
        "id": rid,
        "label": rec.meta.get("label", ""),
        "service": rec.meta.get("service"),
        "duration_s": round(rec.duration_s, 6),
        "dt": rec.dt,
        "frame_dt": round(frame_dt_of(rec), 6),
        "exact": fmt.KEYFRAME_TOPIC in rec.topics,
        "series": {"t": t[keep], **{name: v[keep] for name, v in cols.items()}},
        "events": [{k: e.get(k) for k in ("t", "kind", "data", "count", "last_t")} for e in rec.events()],
    }


@bp.get("/api/recordings/<rid>/state")
def api_state(rid):
    raw = request.args.get("t", "0")
    try:
        t = float(raw)
    except ValueError:
        t = math.nan
    if not math.isfinite(t):
        raise LabError(f"t must be a number of seconds, got {raw[:20]!r}", f"/api/recordings/{rid}/state?t=1.5")
    c = _ctx()
    path, key = _file_key(rid)
    with c["lock"]:
        entry = c["players"].pop(key, None)
        if entry is None:
            rec = open_recording(path)
            entry = (threading.Lock(), rec, Player(rec))
        c["players"][key] = entry  # the newest last
        while len(c["players"]) > 4:
            _, (_, old, _) = c["players"].popitem(last=False)
            old.close()
    lock, rec, player = entry
    with lock:
        d = player.at(t)
        return jsonify(
            {
                "id": rid,
                "t": round(player.k * rec.dt, 6),
                "k": player.k,
                "sim_time": float(d.time),
                "qpos": np.round(d.qpos, 9).tolist(),
                "seek_ms": round(player.seek_ms or 0.0, 3),
            }
        )


@bp.post("/api/recordings/<rid>/export")
@require_token
def api_export(rid):
    c = _ctx()
    path = recording_path(rid)
    body = json_body(required=False)
    with open_recording(path) as rec:
        req = check_request(body, rec.duration_s)
    job = c["exports"].submit(path, rid, req)
    return jsonify(_job_out(job)), 202


def _job_out(info: dict) -> dict:
    return {**info, "file": f"/api/exports/{info['job']}/file" if info["state"] == "done" else None}


@bp.get("/api/exports/<job>")
def api_export_job(job):
    return jsonify(_job_out(_ctx()["exports"].info(job)))


@bp.delete("/api/exports/<job>")
@require_token
def api_export_cancel(job):
    return jsonify(_job_out(_ctx()["exports"].cancel(job)))


@bp.get("/api/exports/<job>/file")
def api_export_file(job):
    c = _ctx()
    path = c["exports"].file(job)
    info = c["exports"].info(job)
    mime = "video/mp4" if info["format"] == "mp4" else "image/gif"
    return send_file(
        path, mimetype=mime, as_attachment=True, download_name=f"{info['recording']}_{job}.{info['format']}"
    )


def _open_view(rid: str):
    """``(source, hub)`` of a new replay view of ``rid``; 404 for no such recording, 429 past MAX_VIEWERS."""
    c = _ctx()
    with c["lock"]:
        if len(c["viewers"]) >= MAX_VIEWERS:
            raise LabError(f"{MAX_VIEWERS} replay views are open already", "close a replay tab", 429)
    rec = open_recording(recording_path(rid))
    try:
        cursor = Cursor(round(rec.duration_s, 6), frame_dt_of(rec))
        source = ReplaySource(rec, cursor, c["width"], c["height"], c["preset_fn"]())
    except LabError:
        rec.close()
        raise
    hub = FrameHub(source, fps=REPLAY_FPS, name=f"replay {rid}", linger_s=0.0)
    with c["lock"]:
        c["viewers"].add(hub)
    return source, hub


@_sock.route("/ws/replay", bp=bp)
def ws_replay(ws):
    c = _ctx()
    rid = request.args.get("id", "")
    try:
        source, hub = _open_view(rid)
    except LabError as exc:
        ws.send(messages.dumps({"type": "error", "about": "open", **exc.to_dict()}))
        return
    try:
        rec = source.rec
        hello = messages.hello(
            "replay",
            ["replay"],
            source.width,
            source.height,
            hub.fps,
            rec.identity,
            overlays=list(REPLAY_OVERLAYS),
            recording={"id": rid, "duration_s": source.cursor.duration_s, "frame_dt": source.cursor.frame_dt},
        )

        def cursor_dict():
            return {**source.cursor.to_dict(), "seek_ms": source.seek_ms, "render": hub.stats()}

        def on_replay(client, msg):
            source.cursor.apply(msg)
            client.send({"type": "cursor", **source.cursor.to_dict()})

        handlers, tickers = merge_extensions(
            [view_extension(lambda: source.model), lambda *_: ({"replay": on_replay}, [])]
        )
        ws_loop(ws, {"replay": hub}, cursor_dict, hello, metrics_hz=CURSOR_HZ, handlers=handlers, tickers=tickers)
    finally:
        hub.close()
        with c["lock"]:
            c["viewers"].discard(hub)
