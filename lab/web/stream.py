"""Frame streaming: one render and one JPEG encode per frame, shared by every client.

A :class:`FrameHub` owns a producer thread that renders only while someone watches, publishes
the newest encoded frame, and wakes its subscribers. Each client (:func:`ws_loop`) sends only the
newest frame it has not sent yet, so a slow client skips frames and never grows a queue.
"""

import collections
import contextlib
import math
import socket
import threading
import time
from dataclasses import dataclass

from lab.errors import LabError
from lab.render.jpeg import encode_jpeg
from lab.web import messages
from lab.web.common import parse_json


@dataclass(frozen=True)
class Frame:
    seq: int
    jpeg: bytes
    t_wall: float  # time.time() when the state was captured [s]
    sim_time: float
    width: int
    height: int


class FrameHub:
    """Renders ``source`` at up to ``fps`` frames/s while it has subscribers.

    Rendering (one thread, which owns the GL context) and JPEG encoding (a second thread) overlap:
    frame n is encoded while frame n+1 renders. Every rendered frame is encoded once and published.

    ``source`` has ``open()`` (called in the producer thread, where the GL context lives),
    ``frame() -> (rgb (h, w, 3) uint8, {"sim_time": ..., "t_wall": ...})`` and ``close()``.
    """

    def __init__(self, source, fps: float = 60.0, quality: int = 80, name: str = "main", linger_s: float = 2.0):
        self.source, self.fps, self.quality, self.name = source, float(fps), int(quality), name
        self.linger_s = linger_s
        self.latest: Frame | None = None
        self.renders = 0  # frames rendered and encoded (one per published frame)
        self._subs: set = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._calls = collections.deque()
        self._times = collections.deque(maxlen=120)
        self.render_ms = collections.deque(maxlen=120)
        self.encode_ms = collections.deque(maxlen=120)
        self.error: str | None = None
        self._slot = None  # a rendered frame waiting for the encoder
        self._slot_cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"hub-{name}", daemon=True)
        self._thread.start()

    # --- subscribers -------------------------------------------------------------------------
    def subscribe(self, event: threading.Event) -> None:
        with self._lock:
            self._subs.add(event)
        self._wake.set()

    def unsubscribe(self, event: threading.Event) -> None:
        with self._lock:
            self._subs.discard(event)

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    def submit(self, fn) -> None:
        """Run ``fn(source)`` in the producer thread before the next frame (GL calls belong there)."""
        self._calls.append(fn)
        self._wake.set()

    # --- producer: render in this thread, encode in the next, so the two overlap -------------------
    def _run(self) -> None:
        try:
            self.source.open()
        except Exception as exc:
            self.error = f"renderer failed to start: {exc}"
            return
        encoder = threading.Thread(target=self._encode_loop, name=f"jpeg-{self.name}", daemon=True)
        encoder.start()
        next_t = time.perf_counter()
        last_watch = 0.0
        try:
            while not self._stop.is_set():
                while self._calls:
                    self._calls.popleft()(self.source)
                now = time.perf_counter()
                if self._subs:
                    last_watch = now
                elif now - last_watch > self.linger_s:
                    self._wake.clear()
                    self._wake.wait(0.5)
                    next_t = time.perf_counter()
                    continue
                if now < next_t:
                    time.sleep(next_t - now)
                period = 1.0 / self.fps  # read each frame: the rate may be changed while running
                next_t = max(next_t + period, time.perf_counter() - period)
                t0 = time.perf_counter()
                rgb, meta = self.source.frame()
                self.render_ms.append((time.perf_counter() - t0) * 1e3)
                with self._slot_cv:  # hand over; wait if the encoder still holds the previous frame
                    while self._slot is not None and not self._stop.is_set():
                        self._slot_cv.wait(0.1)
                    self._slot = (rgb, meta)
                    self._slot_cv.notify_all()
        except Exception as exc:  # keep the reason visible in /api/status
            self.error = f"renderer stopped: {exc}"
        finally:
            self._stop.set()
            with self._slot_cv:
                self._slot_cv.notify_all()
            encoder.join(1.0)
            self.source.close()

    def _encode_loop(self) -> None:
        seq = 0
        while True:
            with self._slot_cv:
                while self._slot is None and not self._stop.is_set():
                    self._slot_cv.wait(0.1)
                if self._slot is None:
                    return
                rgb, meta = self._slot
            t1 = time.perf_counter()
            jpeg = encode_jpeg(rgb, self.quality)
            t2 = time.perf_counter()
            with self._slot_cv:
                self._slot = None
                self._slot_cv.notify_all()
            seq += 1
            self.latest = Frame(
                seq, jpeg, meta.get("t_wall", time.time()), meta.get("sim_time", 0.0), rgb.shape[1], rgb.shape[0]
            )
            self.renders += 1
            self.encode_ms.append((t2 - t1) * 1e3)
            self._times.append(t2)
            with self._lock:
                subs = list(self._subs)
            for ev in subs:
                ev.set()

    def measured_fps(self) -> float:
        t = self._times
        if len(t) < 2 or time.perf_counter() - t[-1] > 1.0:
            return 0.0
        return (len(t) - 1) / (t[-1] - t[0])

    def stats(self) -> dict:
        def avg(q):
            return round(sum(q) / len(q), 3) if q else None

        return {
            "view": self.name,
            "fps": round(self.measured_fps(), 2),
            "fps_target": self.fps,
            "renders": self.renders,
            "render_ms": avg(self.render_ms),
            "encode_ms": avg(self.encode_ms),
            "subscribers": self.subscribers,
            "error": self.error,
        }

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)


MAX_INFLIGHT = 2  # frames per view sent but not yet acknowledged by the client
MAX_MESSAGES_PER_TURN = 64  # client messages read per turn of the send loop
MAX_CLIENT_MESSAGE = 4096  # [characters] a longer client message is refused (the WebSocket layer closes at 64 KiB)
CLIENT_HINT = 'send {"type": "ack", "view": VIEW, "seq": N} after each frame, or {"type": "ping", "t": T}'
ACK_TIMEOUT_S = 2.0  # an unacknowledged frame older than this is forgiven [s]


def ws_loop(ws, hubs: dict, metrics_fn, hello: str, metrics_hz: float = 25.0, status_fn=None) -> None:
    """Serve one WebSocket client until it goes away: frames from ``hubs`` (view -> FrameHub), metrics JSON.

    Flow control: the client acknowledges each frame (``{"type": "ack", "view", "seq"}``); at most
    :data:`MAX_INFLIGHT` frames per view are unacknowledged, so a slow client is sent the newest
    frame when it is ready for one and skips the rest, and nothing queues in the socket.
    """
    from simple_websocket import ConnectionClosed

    sock = getattr(ws, "sock", None)
    if sock is not None:  # small JSON messages must not wait for Nagle's algorithm
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    event = threading.Event()
    for hub in hubs.values():
        hub.subscribe(event)
    sent = {view: 0 for view in hubs}
    inflight = {view: collections.deque() for view in hubs}  # send times of unacknowledged frames
    period = 1.0 / metrics_hz
    next_metrics = time.perf_counter()
    last_status = None
    try:
        ws.send(hello)
        while True:
            event.clear()
            for _ in range(MAX_MESSAGES_PER_TURN):  # a flood of messages cannot hold back the frames
                msg = ws.receive(timeout=0)
                if msg is None:
                    break
                _answer(ws, msg, inflight)
            now = time.perf_counter()
            blocked = False
            for view, hub in hubs.items():
                q = inflight[view]
                while q and now - q[0] > ACK_TIMEOUT_S:
                    q.popleft()
                f = hub.latest
                if f is None or f.seq == sent[view]:
                    continue
                if len(q) >= MAX_INFLIGHT:
                    blocked = True
                    continue
                ws.send(messages.frame_header(view, f.seq, f.t_wall, f.sim_time, f.width, f.height, len(f.jpeg)))
                ws.send(f.jpeg)
                sent[view] = f.seq
                q.append(now)
            now = time.perf_counter()
            if now >= next_metrics:
                ws.send(messages.metrics(metrics_fn()))
                if status_fn is not None:
                    st = status_fn()
                    if st != last_status:
                        ws.send(messages.status(st))
                        last_status = st
                next_metrics = max(next_metrics + period, now)
            wait = max(0.0, next_metrics - time.perf_counter())
            if blocked:  # waiting for an ack: look at the socket again soon
                msg = ws.receive(timeout=min(wait, 0.02))
                if msg is not None:
                    _answer(ws, msg, inflight)
            else:
                event.wait(wait)
    except (ConnectionClosed, OSError):  # the client went away (closed tab, reset, broken pipe)
        pass
    finally:
        for hub in hubs.values():
            hub.unsubscribe(event)


def _answer(ws, msg, inflight) -> None:
    """One client message: an ack frees a frame slot, a ping is answered; anything else (not text, not
    JSON, not an object, an unknown type, an unknown view) is answered with ``{"type": "error", ...}``
    and changes nothing. Nothing a client sends may end the stream."""
    obj = _client_problem(msg, inflight)
    if isinstance(obj, str):
        ws.send(messages.dumps({"type": "error", "error": obj, "hint": CLIENT_HINT}))
        return
    if obj["type"] == messages.ACK:
        q = inflight[obj["view"]]
        if q:
            q.popleft()
    else:
        t = obj.get("t")
        t = t if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) else None
        ws.send(messages.dumps({"type": messages.PONG, "t": t, "server_t": time.time()}))


def _client_problem(msg, inflight):
    """The message as a dict when it is a well-formed ack or ping; else what is wrong with it (a string)."""
    if not isinstance(msg, str):
        return "binary messages are not expected from a client"
    if len(msg) > MAX_CLIENT_MESSAGE:
        return f"message of {len(msg)} characters; at most {MAX_CLIENT_MESSAGE} expected"
    try:
        obj = parse_json(msg, "message")
    except LabError as exc:
        return exc.message
    if not isinstance(obj, dict):
        return "expected a JSON object"
    kind = obj.get("type")
    if kind == messages.PING:
        return obj
    if kind != messages.ACK:
        return f"unknown message type {str(kind)[:40]!r}"
    view, seq = obj.get("view"), obj.get("seq")
    if not isinstance(view, str) or view not in inflight:
        return f"ack for unknown view {str(view)[:40]!r}; views of this stream: {', '.join(inflight)}"
    if not isinstance(seq, int) or isinstance(seq, bool):
        return f"ack seq must be the frame's integer seq, got {str(seq)[:40]!r}"
    return obj
