"""Frame streaming: one render and one JPEG encode per frame, shared by every client.

A :class:`FrameHub` owns a producer thread that renders only while someone watches, publishes
the newest encoded frame, and wakes its subscribers. Each client (:func:`ws_loop`) sends only the
newest frame it has not sent yet, so a slow client skips frames and never grows a queue.
"""

import collections
import contextlib
import hmac
import itertools
import math
import socket
import threading
import time
from dataclasses import dataclass

from lab.errors import LabError
from lab.render.camera import ViewCamera
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


MAX_CHANNELS = 16  # cameras (with their overlays) one hub renders at once; one more is refused (429)
DEFAULT_KEY = (None, frozenset())  # the channel key of a hub's shared default camera without overlays


class Channel:
    """One camera of a :class:`FrameHub` and the overlays drawn with it: its newest frame and its subscribers.

    ``camera`` is a :class:`~lab.render.camera.ViewCamera`, or None for the hub's shared default
    camera; ``overlays`` a frozenset of overlay names. Every subscriber of a channel gets the same renders.
    """

    def __init__(self, hub: "FrameHub", key, camera, overlays: frozenset):
        self.hub, self.key, self.camera, self.overlays = hub, key, camera, overlays
        self.latest: Frame | None = None
        self.renders = 0
        self.subs: set = set()
        self.times = collections.deque(maxlen=120)  # perf_counter() of recent publishes

    def subscribe(self, event: threading.Event) -> None:
        self.hub._subscribe(self, event)

    def unsubscribe(self, event: threading.Event) -> None:
        self.hub._unsubscribe(self, event)


def channel_fps(ch: Channel) -> float:
    """Frames per second ``ch`` has been published at over its recent frames (0 when it has stopped)."""
    t = ch.times
    if len(t) < 2 or time.perf_counter() - t[-1] > 1.0:
        return 0.0
    return (len(t) - 1) / (t[-1] - t[0])


class FrameHub:
    """Renders ``source`` at up to ``fps`` frames/s per camera while it has subscribers.

    Each distinct camera (with its overlays) is a :class:`Channel`; the hub's own is the shared
    default (``hub.subscribe``/``hub.latest``), and :meth:`channel` gives the one for a client's own
    camera. Rendering (one thread, which owns the GL context) and JPEG encoding (a second thread)
    overlap: frame n is encoded while frame n+1 renders. Every rendered frame is encoded once and
    published to its channel.

    ``source`` has ``open()`` (called in the producer thread, where the GL context lives),
    ``frame(channel) -> (rgb (h, w, 3) uint8, {"sim_time": ..., "t_wall": ...})`` (draw with the
    channel's ``camera`` and ``overlays``) and ``close()``.
    """

    def __init__(self, source, fps: float = 60.0, quality: int = 80, name: str = "main", linger_s: float = 2.0):
        self.source, self.fps, self.quality, self.name = source, float(fps), int(quality), name
        self.linger_s = linger_s
        self.renders = 0  # frames rendered and encoded (one per published frame), every channel
        self._lock = threading.Lock()
        self.default = Channel(self, DEFAULT_KEY, None, frozenset())
        self._channels = {DEFAULT_KEY: self.default}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._calls = collections.deque()
        self.render_ms = collections.deque(maxlen=120)
        self.encode_ms = collections.deque(maxlen=120)
        self.error: str | None = None
        self._slot = None  # a rendered frame waiting for the encoder
        self._slot_cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"hub-{name}", daemon=True)
        self._thread.start()

    # --- channels and subscribers ------------------------------------------------------------------
    @property
    def latest(self) -> "Frame | None":
        return self.default.latest

    def subscribe(self, event: threading.Event) -> None:
        self._subscribe(self.default, event)

    def unsubscribe(self, event: threading.Event) -> None:
        self._unsubscribe(self.default, event)

    def join(self, event: threading.Event, camera_spec, overlays=frozenset(), like: Channel | None = None) -> Channel:
        """Subscribe ``event`` to the channel drawing ``camera_spec`` (a :class:`~lab.render.camera.CameraSpec`,
        None: the shared default camera) with ``overlays``, and return it: the existing one when another
        client has the same camera, else a new one (starting where ``like``'s camera looks now). A 429
        :class:`LabError` past :data:`MAX_CHANNELS` cameras (nothing changes)."""
        key = (None if camera_spec is None else camera_spec.key(), frozenset(overlays))
        with self._lock:
            ch = self._channels.get(key)
            if ch is None:
                if len(self._channels) >= MAX_CHANNELS:
                    raise LabError(
                        f"the {self.name} view already renders {MAX_CHANNELS} cameras",
                        "share a camera with another viewer (reset the view) or close a tab",
                        429,
                    )
                cam = None
                if camera_spec is not None:
                    start = like.camera.lookat if like is not None and like.camera is not None else None
                    cam = ViewCamera(camera_spec, start)
                ch = self._channels[key] = Channel(self, key, cam, frozenset(overlays))
            ch.subs.add(event)
        self._wake.set()
        return ch

    def _subscribe(self, ch: Channel, event: threading.Event) -> None:
        with self._lock:
            ch.subs.add(event)
        self._wake.set()

    def _unsubscribe(self, ch: Channel, event: threading.Event) -> None:
        with self._lock:
            ch.subs.discard(event)
            if not ch.subs and ch is not self.default and self._channels.get(ch.key) is ch:
                del self._channels[ch.key]

    @property
    def subscribers(self) -> int:
        with self._lock:
            return sum(len(c.subs) for c in self._channels.values())

    @property
    def cameras(self) -> int:
        """Channels rendered now (cameras with at least one viewer)."""
        with self._lock:
            return sum(1 for c in self._channels.values() if c.subs)

    def submit(self, fn) -> None:
        """Run ``fn(source)`` in the producer thread before the next frame (GL calls belong there)."""
        self._calls.append(fn)
        self._wake.set()

    def call(self, fn, timeout: float = 2.0):
        """``fn(source)`` run in the producer thread (GL calls belong there), its result; a 503
        :class:`LabError` when the renderer does not answer within ``timeout`` [s]."""
        done, out = threading.Event(), {}

        def run(src):
            try:
                out["value"] = fn(src)
            except Exception as exc:  # handed to the caller's thread
                out["error"] = exc
            done.set()

        self.submit(run)
        if not done.wait(timeout):
            raise LabError(f"the {self.name} renderer did not answer in {timeout:g} s", "try again", 503)
        if "error" in out:
            raise out["error"]
        return out.get("value")

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
                with self._lock:
                    watched = [c for c in self._channels.values() if c.subs]
                if watched:
                    last_watch = now
                elif now - last_watch > self.linger_s:
                    self._wake.clear()
                    self._wake.wait(0.5)
                    next_t = time.perf_counter()
                    continue
                else:
                    watched = [self.default]  # keep the default camera warm a moment after the last viewer
                if now < next_t:
                    time.sleep(next_t - now)
                period = 1.0 / self.fps  # read each frame: the rate may be changed while running
                next_t = max(next_t + period, time.perf_counter() - period)
                for ch in watched:  # every camera once per period
                    t0 = time.perf_counter()
                    rgb, meta = self.source.frame(ch)
                    self.render_ms.append((time.perf_counter() - t0) * 1e3)
                    with self._slot_cv:  # hand over; wait if the encoder still holds the previous frame
                        while self._slot is not None and not self._stop.is_set():
                            self._slot_cv.wait(0.1)
                        self._slot = (rgb, meta, ch)
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
        while True:
            with self._slot_cv:
                while self._slot is None and not self._stop.is_set():
                    self._slot_cv.wait(0.1)
                if self._slot is None:
                    return
                rgb, meta, ch = self._slot
            t1 = time.perf_counter()
            jpeg = encode_jpeg(rgb, self.quality)
            t2 = time.perf_counter()
            with self._slot_cv:
                self._slot = None
                self._slot_cv.notify_all()
            seq = (ch.latest.seq if ch.latest is not None else 0) + 1
            ch.latest = Frame(
                seq, jpeg, meta.get("t_wall", time.time()), meta.get("sim_time", 0.0), rgb.shape[1], rgb.shape[0]
            )
            ch.renders += 1
            self.renders += 1
            self.encode_ms.append((t2 - t1) * 1e3)
            ch.times.append(t2)
            with self._lock:
                subs = list(ch.subs)
            for ev in subs:
                ev.set()

    def measured_fps(self) -> float:
        """Frames per second of the best-served camera now (every camera is rendered once per period)."""
        with self._lock:
            chans = list(self._channels.values())
        return max(channel_fps(c) for c in chans)

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
            "cameras": self.cameras,
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

_client_ids = itertools.count(1)


class Client:
    """One WebSocket client of :func:`ws_loop`, as the message handlers and tickers see it.

    ``id`` is unique in this process; ``trusted`` says the client may change the simulation through the
    stream (the service has no token, or the client sent it: ``{"type": "auth", "token"}``); ``state`` is
    a dict the handlers keep per client; ``hubs`` (view -> :class:`FrameHub`) are the client's views and
    ``views`` (view -> :class:`Channel`) what the loop streams of each: the hub's default camera until a
    handler moves the client to a camera of its own (:meth:`FrameHub.join`). ``send`` takes a dict
    (sent as JSON) or ``bytes``; it is only ever called from the client's own loop thread.
    """

    def __init__(self, ws, hubs: dict, trusted: bool):
        self.ws, self.hubs, self.trusted = ws, dict(hubs), trusted
        self.views = {view: hub.default for view, hub in hubs.items()}
        self.id = next(_client_ids)
        self.state: dict = {}

    def send(self, msg) -> None:
        self.ws.send(msg if isinstance(msg, (bytes, str)) else messages.dumps(msg))


def ws_loop(
    ws,
    hubs: dict,
    metrics_fn,
    hello: str,
    metrics_hz: float = 25.0,
    status_fn=None,
    handlers: dict | None = None,
    tickers=(),
    token: str | None = None,
) -> None:
    """Serve one WebSocket client until it goes away: frames from ``hubs`` (view -> FrameHub), metrics JSON.

    Flow control: the client acknowledges each frame (``{"type": "ack", "view", "seq"}``); at most
    :data:`MAX_INFLIGHT` frames per view are unacknowledged, so a slow client is sent the newest
    frame when it is ready for one and skips the rest, and nothing queues in the socket.

    ``handlers`` (message type -> ``fn(client, msg)``) answer the client's other messages; a handler's
    :class:`LabError` is sent back as ``{"type": "error", "error", "hint", "about": TYPE}`` and the stream
    goes on. ``tickers`` (each ``fn(client, now)``) run at ``metrics_hz`` after the metrics are sent;
    they send what they have. ``token``: the service's bearer token; a client that has not sent it
    (``{"type": "auth", "token"}``) is not :attr:`Client.trusted`. ``fn(client)`` of a handler named
    ``"close"`` runs when the client goes away.
    """
    from simple_websocket import ConnectionClosed

    sock = getattr(ws, "sock", None)
    if sock is not None:  # small JSON messages must not wait for Nagle's algorithm
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    handlers = dict(handlers or {})
    on_close = handlers.pop("close", None)
    client = Client(ws, hubs, trusted=not token)
    client.state["_token"] = token
    handlers.setdefault(messages.AUTH, _auth)
    event = threading.Event()
    client.state["_event"] = event
    for ch in client.views.values():
        ch.subscribe(event)
    sent = {view: (None, 0) for view in hubs}  # view -> (source of the last frame sent, its seq)
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
                _answer(client, msg, inflight, handlers)
            now = time.perf_counter()
            blocked = False
            for view, ch in client.views.items():
                q = inflight[view]
                while q and now - q[0] > ACK_TIMEOUT_S:
                    q.popleft()
                f = ch.latest
                if f is None or sent[view] == (ch, f.seq):
                    continue
                if len(q) >= MAX_INFLIGHT:
                    blocked = True
                    continue
                ws.send(messages.frame_header(view, f.seq, f.t_wall, f.sim_time, f.width, f.height, len(f.jpeg)))
                ws.send(f.jpeg)
                sent[view] = (ch, f.seq)
                q.append(now)
            now = time.perf_counter()
            if now >= next_metrics:
                ws.send(messages.metrics(metrics_fn()))
                if status_fn is not None:
                    st = status_fn()
                    if st != last_status:
                        ws.send(messages.status(st))
                        last_status = st
                for tick in tickers:
                    tick(client, now)
                next_metrics = max(next_metrics + period, now)
            wait = max(0.0, next_metrics - time.perf_counter())
            if blocked:  # waiting for an ack: look at the socket again soon
                msg = ws.receive(timeout=min(wait, 0.02))
                if msg is not None:
                    _answer(client, msg, inflight, handlers)
            else:
                event.wait(wait)
    except (ConnectionClosed, OSError):  # the client went away (closed tab, reset, broken pipe)
        pass
    finally:
        for ch in client.views.values():
            ch.unsubscribe(event)
        if on_close is not None:
            on_close(client)


def merge_extensions(extensions, *args) -> tuple[dict, list]:
    """``(handlers, tickers)`` for :func:`ws_loop` from ``extensions``, each ``fn(*args) -> (handlers, tickers)``;
    every extension's ``"close"`` handler runs when the client goes away."""
    handlers, tickers, closes = {}, [], []
    for ext in extensions:
        h, t = ext(*args)
        h = dict(h)
        if "close" in h:
            closes.append(h.pop("close"))
        handlers.update(h)
        tickers.extend(t)
    if closes:
        handlers["close"] = lambda client: [fn(client) for fn in closes]
    return handlers, tickers


def _auth(client: Client, msg: dict) -> None:
    """``{"type": "auth", "token"}``: the service's token makes the client trusted; a wrong one is refused."""
    token = client.state.get("_token")
    got = msg.get("token")
    if token and not (isinstance(got, str) and hmac.compare_digest(got.encode("utf-8", "replace"), token.encode())):
        client.trusted = False
        raise LabError("wrong token", "send the --token value the service was started with", 401)
    client.trusted = True
    client.send({"type": messages.AUTH, "trusted": True})


def _answer(client: Client, msg, inflight, handlers: dict) -> None:
    """One client message: an ack frees a frame slot, a ping is answered, a type in ``handlers`` goes to
    its handler; anything else (not text, not JSON, not an object, an unknown type, an unknown view) is
    answered with ``{"type": "error", ...}`` and changes nothing. Nothing a client sends may end the stream."""
    obj = _client_problem(msg, inflight, handlers)
    if isinstance(obj, str):
        client.send({"type": "error", "error": obj, "hint": CLIENT_HINT})
        return
    kind = obj["type"]
    if kind == messages.ACK:
        q = inflight[obj["view"]]
        if q:
            q.popleft()
    elif kind == messages.PING:
        t = obj.get("t")
        t = t if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) else None
        client.send({"type": messages.PONG, "t": t, "server_t": time.time()})
    else:
        try:
            handlers[kind](client, obj)
        except LabError as exc:
            client.send({"type": "error", "about": kind, **exc.to_dict()})


def _client_problem(msg, inflight, handlers: dict):
    """The message as a dict when it is a well-formed ack, a ping or a handled type; else what is wrong with it (a string)."""
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
    if kind == messages.PING or (isinstance(kind, str) and kind in handlers):
        return obj
    if kind != messages.ACK:
        known = ", ".join(sorted({messages.ACK, messages.PING, *handlers}))
        return f"unknown message type {str(kind)[:40]!r}; this stream takes: {known}"
    view, seq = obj.get("view"), obj.get("seq")
    if not isinstance(view, str) or view not in inflight:
        return f"ack for unknown view {str(view)[:40]!r}; views of this stream: {', '.join(inflight)}"
    if not isinstance(seq, int) or isinstance(seq, bool):
        return f"ack seq must be the frame's integer seq, got {str(seq)[:40]!r}"
    return obj
