"""Exporting a time range of a recording as a video: MP4 (H.264 through PyAV) or GIF (Pillow), rendered
offscreen from the exact recorded state (:class:`lab.record.player.Player`).

- :func:`check_request` checks ``{"t0", "t1", "format", "width", "height", "fps", "overlays", "stamp"}``
  against the recording and :data:`LIMITS`; a :class:`LabError` says what is wrong and what would do;
- :func:`render_video` renders frame ``i`` at recording time ``t0 + i / fps`` for ``i < round((t1 - t0) * fps)``
  and encodes it; it makes its own :class:`~lab.render.renderer.Renderer`, so call it in the thread that
  renders (a GL context belongs to the thread that made it);
- :class:`Exports` runs the jobs of one service one after the other in its own thread, with progress, and
  keeps each file in ``<folder>/<job>.mp4|gif`` (the last :data:`KEEP_JOBS` jobs); :meth:`Exports.cancel` stops
  a queued or running job (``DELETE /api/exports/<job>``) or removes a finished one with its file.

Each frame says its recording time in its top left corner (``stamp``, default on), so a frame of a still
robot differs from the one before it (GIF writers fold identical frames into one).
"""

import collections
import contextlib
import queue
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.errors import LabError
from lab.record.player import REPLAY_OVERLAYS, Player
from lab.record.reader import open_recording

FORMATS = ("mp4", "gif")
H264 = ("libx264", "h264")  # the encoder names PyAV may have for H.264; mpeg4 when it has none
FALLBACK_CODEC = "mpeg4"
LIMITS = {"width": (64, 1920), "height": (64, 1080), "fps": (1, 60)}  # [px], [px], [frames/s]
MAX_FRAMES = {"mp4": 3600, "gif": 600}  # a minute at 60 fps; a GIF of 600 frames is already tens of MB
MAX_GIF_PIXELS = 640 * 480  # per frame
MAX_QUEUED = 4  # jobs waiting; one more is a 429
KEEP_JOBS = 20  # the newest jobs kept (their files too)
JOB_RE = re.compile(r"^[0-9a-f]{12}$")
FIELDS = ("t0", "t1", "format", "width", "height", "fps", "overlays", "stamp")
EXAMPLE = '{"t0": 0, "t1": 2, "format": "mp4", "width": 640, "height": 480, "fps": 30}'


@dataclass(frozen=True)
class ExportRequest:
    """A checked export: the range [s of recording time], the format, the size [px], the rate [frames/s]."""

    t0: float
    t1: float
    format: str = "mp4"
    width: int = 640
    height: int = 480
    fps: int = 30
    overlays: tuple = ()
    stamp: bool = True

    @property
    def frames(self) -> int:
        return int(round((self.t1 - self.t0) * self.fps))


def h264_codec() -> str:
    """The H.264 encoder of the installed PyAV (``libx264``), else :data:`FALLBACK_CODEC`."""
    import av

    for name in H264:
        with contextlib.suppress(Exception):  # av.codec.codec.UnknownCodecError
            av.codec.Codec(name, "w")
            return name
    return FALLBACK_CODEC


def _number(body: dict, key: str, default, integer: bool):
    v = body.get(key, default)
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok or not np.isfinite(v):
        kind = "an integer" if integer else "a number"
        raise LabError(f"{key} must be {kind}, got {str(v)[:40]!r}", f"e.g. {EXAMPLE}")
    return v


def check_request(body: dict, duration_s: float) -> ExportRequest:
    """The export ``body`` asks for, checked against a recording of ``duration_s`` [s] and :data:`LIMITS`."""
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise LabError(f"unknown field(s): {', '.join(unknown)[:80]}", f"accepted: {', '.join(FIELDS)}")
    fmt_ = body.get("format", "mp4")
    if fmt_ not in FORMATS:
        raise LabError(f"format must be mp4 or gif, got {str(fmt_)[:20]!r}", f"e.g. {EXAMPLE}")
    t0 = float(_number(body, "t0", 0.0, False))
    t1 = float(_number(body, "t1", min(duration_s, t0 + 5.0), False))
    if not 0 <= t0 < t1 <= duration_s + 1e-9:
        raise LabError(
            f"the range t0={t0:g} .. t1={t1:g} s is not inside the recording (0 .. {duration_s:g} s) with t0 < t1",
            f'e.g. {{"t0": 0, "t1": {min(duration_s, 2.0):g}}}',
        )
    size = {}
    for key, default in (("width", 640), ("height", 480), ("fps", 30)):
        v = _number(body, key, default, True)
        lo, hi = LIMITS[key]
        if not lo <= v <= hi or (key != "fps" and v % 2):
            even = "" if key == "fps" else ", even"
            raise LabError(f"{key} {v} is outside [{lo}, {hi}]{even}", f"e.g. {EXAMPLE}")
        size[key] = v
    overlays = body.get("overlays", [])
    if not isinstance(overlays, list) or not all(isinstance(n, str) and n in REPLAY_OVERLAYS for n in overlays):
        raise LabError("overlays must be a list of overlay names", f"names: {', '.join(REPLAY_OVERLAYS)}")
    stamp = body.get("stamp", True)
    if not isinstance(stamp, bool):
        raise LabError("stamp must be true or false", "true: the recording time in the top left corner")
    req = ExportRequest(t0, t1, fmt_, size["width"], size["height"], size["fps"], tuple(sorted(set(overlays))), stamp)
    n = req.frames
    if n < 1:
        raise LabError(f"{t1 - t0:g} s at {req.fps} frames/s is no frame", "a longer range or a higher fps")
    if n > MAX_FRAMES[fmt_]:
        raise LabError(
            f"{n} frames is more than the {MAX_FRAMES[fmt_]} a {fmt_} export may have",
            "a shorter range or a lower fps",
        )
    if fmt_ == "gif" and req.width * req.height > MAX_GIF_PIXELS:
        raise LabError(f"a GIF of {req.width}x{req.height} px is larger than 640x480", "MP4 for a larger video")
    return req


def render_video(path: Path, out: Path, req: ExportRequest, preset=None, progress=None) -> dict:
    """Render ``req`` of the recording at ``path`` into ``out``; ``progress(frames done, frames)`` after
    each frame (returns False to stop: a LabError). ``{"frames", "codec", "bytes"}``."""
    from lab.render.renderer import Renderer

    with open_recording(path) as rec:
        player = Player(rec)
        renderer = Renderer(player.model, req.width, req.height, preset)
        on = frozenset(req.overlays)
        try:
            frames = (_frame(renderer, player, req.t0 + i / req.fps, on, req.stamp) for i in range(req.frames))
            if req.format == "mp4":
                codec = _write_mp4(out, frames, req, progress)
            else:
                codec = _write_gif(out, frames, req, progress)
        finally:
            renderer.close()
    return {"frames": req.frames, "codec": codec, "bytes": out.stat().st_size}


def _frame(renderer, player: Player, t: float, on: frozenset, stamp: bool) -> np.ndarray:
    d = player.at(t)
    rgb = renderer.render(d.qpos, overlays=on, overlay_state=player.overlay_state() if on else None)
    if stamp:
        from PIL import Image, ImageDraw

        img = Image.fromarray(rgb)
        draw = ImageDraw.Draw(img)
        text = f"t = {t:.2f} s"
        draw.rectangle((4, 4, 8 + 7 * len(text), 20), fill=(0, 0, 0))
        draw.text((7, 6), text, fill=(235, 235, 235))
        rgb = np.asarray(img)
    return rgb


def _tick(progress, i: int, n: int) -> None:
    if progress is not None and progress(i, n) is False:
        raise LabError("the export was stopped", "the service is stopping", 503)


def _write_mp4(out: Path, frames, req: ExportRequest, progress) -> str:
    import av

    codec = h264_codec()
    with av.open(str(out), mode="w") as box:
        stream = box.add_stream(codec, rate=req.fps)
        stream.width, stream.height, stream.pix_fmt = req.width, req.height, "yuv420p"
        if codec != FALLBACK_CODEC:
            stream.options = {"crf": "23", "preset": "veryfast"}
        for i, rgb in enumerate(frames):
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                box.mux(packet)
            _tick(progress, i + 1, req.frames)
        for packet in stream.encode():
            box.mux(packet)
    return codec


def _write_gif(out: Path, frames, req: ExportRequest, progress) -> str:
    from PIL import Image

    images = []
    for i, rgb in enumerate(frames):
        images.append(Image.fromarray(rgb).quantize(256, method=Image.Quantize.FASTOCTREE))
        _tick(progress, i + 1, req.frames)
    # GIF delays are in 1/100 s: a frame lasts round(100 / fps) of them
    images[0].save(out, save_all=True, append_images=images[1:], duration=1000.0 / req.fps, loop=0)
    return "gif"


class Exports:
    """The export jobs of one service: queued, run one at a time in a worker thread, their files in ``folder``.

    A job is a dict: ``job``, ``recording``, ``state`` queued | running | done | failed | cancelled, ``progress``
    [0..1], ``frames``, ``frames_done``, the request's fields, ``codec``, ``bytes``, ``error`` and ``seconds``.
    """

    FINISHED = ("done", "failed", "cancelled")

    def __init__(self, folder: Path, preset=None):
        self.folder = Path(folder)
        self.preset = preset
        self._jobs: collections.OrderedDict = collections.OrderedDict()  # job id -> info dict
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._cancelled: set = set()  # jobs asked to stop (lock held)
        self._thread = threading.Thread(target=self._run, name="exports", daemon=True)
        self._thread.start()

    def submit(self, path: Path, rid: str, req: ExportRequest) -> dict:
        """Queue ``req`` of recording ``rid`` (its file ``path``); the job. 429 past :data:`MAX_QUEUED` waiting."""
        with self._lock:
            waiting = sum(1 for j in self._jobs.values() if j["state"] == "queued")
            if waiting >= MAX_QUEUED:
                raise LabError(f"{waiting} exports are already waiting", "wait for one to finish", 429)
            job = secrets.token_hex(6)
            info = {
                "job": job,
                "recording": rid,
                "state": "queued",
                "progress": 0.0,
                "frames": req.frames,
                "frames_done": 0,
                **{k: getattr(req, k) for k in FIELDS if k != "overlays"},
                "overlays": list(req.overlays),
                "codec": None,
                "bytes": None,
                "error": None,
                "seconds": None,
            }
            self._jobs[job] = info
            self._forget_old()
        self._queue.put((job, path, req))
        return dict(info)

    def _forget_old(self) -> None:
        while len(self._jobs) > KEEP_JOBS:
            old = next((j for j, i in self._jobs.items() if i["state"] in self.FINISHED), None)
            if old is None:
                return
            info = self._jobs.pop(old)
            with contextlib.suppress(OSError):
                self.file_of(info).unlink(missing_ok=True)

    def file_of(self, info: dict) -> Path:
        return self.folder / f"{info['job']}.{info['format']}"

    def info(self, job: str) -> dict:
        """The job ``job``; 404 for none."""
        with self._lock:
            info = self._jobs.get(job) if JOB_RE.match(job or "") else None
            if info is None:
                raise LabError(f"no export {job[:40]!r}", "POST /api/recordings/<id>/export starts one", 404)
            return dict(info)

    def cancel(self, job: str, wait_s: float = 10.0) -> dict:
        """Cancel job ``job``: a queued one never runs; a running one stops at its next frame (waited for, at most
        ``wait_s`` [s]) and its partial file is removed; a finished one is forgotten and its file removed. The job
        as it ends (``state`` cancelled, or ``deleted`` true for a finished one); 404 for none."""
        with self._lock:
            info = self._jobs.get(job) if JOB_RE.match(job or "") else None
            if info is None:
                raise LabError(f"no export {job[:40]!r}", "GET /api/exports/<job> of a job you started", 404)
            if info["state"] in self.FINISHED:
                self._jobs.pop(job)
                with contextlib.suppress(OSError):
                    self.file_of(info).unlink(missing_ok=True)
                return {**info, "deleted": True}
            self._cancelled.add(job)
            if info["state"] == "queued":
                info.update(state="cancelled", error="cancelled before it ran")
        deadline = time.monotonic() + wait_s
        while self.info(job)["state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.info(job)

    def file(self, job: str) -> Path:
        """The file of finished job ``job``; 409 while it runs or when it failed."""
        info = self.info(job)
        if info["state"] != "done":
            why = info["error"] or f"it is {info['state']} ({100 * info['progress']:.0f} %)"
            raise LabError(f"export {job} has no file: {why}", f"GET /api/exports/{job} says when it is done", 409)
        return self.file_of(info)

    def _update(self, job: str, **changes) -> None:
        with self._lock:
            self._jobs[job].update(changes)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                job, path, req = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            with self._lock:
                if job in self._cancelled:  # cancelled while it waited
                    continue
            t0 = time.perf_counter()
            self._update(job, state="running")

            def progress(i, n, job=job):
                self._update(job, frames_done=i, progress=round(i / n, 4))
                return not self._stop.is_set() and job not in self._cancelled

            out = None
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                out = self.folder / f"{job}.{req.format}"
                done = render_video(path, out, req, self.preset, progress)
                self._update(job, state="done", codec=done["codec"], bytes=done["bytes"], progress=1.0)
            except Exception as exc:  # a failed job says why; the next one runs
                msg = exc.message if isinstance(exc, LabError) else f"{type(exc).__name__}: {exc}"
                if job in self._cancelled:
                    self._update(job, state="cancelled", error="cancelled while it ran")
                else:
                    self._update(job, state="failed", error=msg)
                if out is not None:
                    with contextlib.suppress(OSError):
                        out.unlink(missing_ok=True)
            self._update(job, seconds=round(time.perf_counter() - t0, 3))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
