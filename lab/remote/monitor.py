"""The Lab's monitor of a remote state server: an honest connection state, and the link that feeds it.

:class:`MonitorState` is the state machine; it is told what happened (``on_state``, ``on_error``)
and when (a monotonic ``now`` [s]), so it is the same whether fed by a thread or by a test:

- ``CONNECTED``: a fresh state (sequence advanced, or a new instance) arrived within
  ``stale_after`` (1 s) and the link is up;
- ``STALE``: states were received, but none fresh for more than 1 s, or the link just failed
  (the last state is kept, marked);
- ``DISCONNECTED``: nothing received yet, or the link has been down for ``disconnect_after`` (5 s);
- ``MISMATCH``: the server runs another model (identity or array lengths differ); its state is
  refused, never shown as live.

Events (newest last): "connected", "instance changed", "connection lost", "connection recovered",
"sequence went backwards", "model mismatch". :class:`RemoteMonitor` runs one link thread that
reads the server's WebSocket stream (or polls ``GET /api/v1/state``) and reconnects by itself.
"""

import json
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass

import websocket

from lab.remote.client import StateClient, describe_error, normalize_url, stream_url
from lab.remote.protocol import check_state, order

CONNECTED, STALE, DISCONNECTED, MISMATCH = "CONNECTED", "STALE", "DISCONNECTED", "MISMATCH"
STALE_AFTER_S = 1.0
DISCONNECT_AFTER_S = 5.0
RETRY_S = 0.2  # pause between reconnection attempts [s]


@dataclass(frozen=True)
class Event:
    """Something a person should know happened: ``t`` [s, Unix wall clock], ``kind``, ``text``."""

    t: float
    kind: str
    text: str


class MonitorState:
    """The connection state machine. ``expected_identity``: SHA-256 of the local model (None: any);
    ``nq``/``nv``: the local model's sizes (None: as the state reports)."""

    def __init__(
        self,
        expected_identity: str | None = None,
        nq: int | None = None,
        nv: int | None = None,
        stale_after: float = STALE_AFTER_S,
        disconnect_after: float = DISCONNECT_AFTER_S,
        max_events: int = 50,
    ):
        self.expected_identity, self.nq, self.nv = expected_identity, nq, nv
        self.stale_after, self.disconnect_after = stale_after, disconnect_after
        self._lock = threading.Lock()
        self.events = deque(maxlen=max_events)
        self.reset()

    def reset(self, url: str | None = None) -> None:
        """Forget everything (a new URL)."""
        with self._lock:
            self.url = url
            self.last = None  # the last accepted state (dict)
            self.fresh_at = None  # monotonic time the last fresh state arrived [s]
            self.fresh_wall = None  # wall time of the same [s, Unix]
            self.link_up = False
            self.down_since = None
            self.lost = False  # the connection was lost (error or staleness) and has not recovered yet
            self.last_error = None
            self.last_error_at = None
            self.mismatch = None  # reason, while the server's model differs
            self.mismatch_state = None
            self.backwards = 0
            self.sequence_flag = None
            self.received = 0
            self.fresh_count = 0
            self._rate = deque(maxlen=400)  # monotonic times of fresh states (updates/s)
            self.events.clear()

    def _event(self, kind: str, text: str) -> None:
        self.events.append(Event(time.time(), kind, text))

    def _error(self, text: str, now: float) -> None:
        self.last_error, self.last_error_at = text, now

    # --- what the link reports -------------------------------------------------------------

    def on_state(self, state, now: float) -> bool:
        """A state came in at ``now``; True if it was fresh and accepted."""
        with self._lock:
            self.received += 1
            if self.down_since is not None or not self.link_up:
                self.link_up, self.down_since = True, None
            check = check_state(state, self.expected_identity, self.nq, self.nv)
            if not check.ok:
                if check.mismatch:
                    if self.mismatch != check.reason:
                        self._event("model mismatch", check.reason)
                    self.mismatch, self.mismatch_state = check.reason, state
                elif self.last_error != f"invalid state: {check.reason}":
                    self._event("invalid state", check.reason)
                self._error(check.reason if check.mismatch else f"invalid state: {check.reason}", now)
                return False
            if self.mismatch is not None:
                self._event("model matches", f"model identity {state['model']['sha256'][:12]} matches the local model")
                self.mismatch = self.mismatch_state = None
            rel = order(self.last, state)
            if rel == "repeated":
                return False
            if rel == "first":
                self._event(
                    "connected", f"connected to {self.url or 'server'} (instance {state['server_instance_id'][:8]})"
                )
            elif rel == "new_instance":
                self._event(
                    "instance changed",
                    f"instance changed: {self.last['server_instance_id'][:8]} -> {state['server_instance_id'][:8]} "
                    f"(sequence restarts at {state['sequence']})",
                )
                self.sequence_flag = None
            elif rel == "backwards":
                self.backwards += 1
                self.sequence_flag = (
                    f"sequence went backwards: {self.last['sequence']} -> {state['sequence']} "
                    f"within instance {state['server_instance_id'][:8]}"
                )
                self._event("sequence went backwards", self.sequence_flag)
                self._error(self.sequence_flag, now)
            if self.lost:
                gap = now - self.fresh_at if self.fresh_at is not None else 0.0
                self._event("connection recovered", f"connection recovered after {gap:.1f} s without fresh state")
                self.lost = False
            self.last = state
            self.fresh_at, self.fresh_wall = now, time.time()
            self.fresh_count += 1
            self._rate.append(now)
            return True

    def on_error(self, error: str, now: float) -> None:
        """The link failed at ``now`` (refused, closed, timed out, bad answer)."""
        with self._lock:
            self._error(error, now)
            if self.link_up or self.down_since is None:
                self.link_up, self.down_since = False, now
            if self.last is not None and not self.lost:
                self.lost = True
                self._event("connection lost", f"connection lost: {error}")

    def _update(self, now: float) -> str:
        if self.mismatch is not None and (self.link_up or now - (self.down_since or now) < self.disconnect_after):
            return MISMATCH
        if self.last is None:
            return DISCONNECTED
        age = now - self.fresh_at
        if self.link_up and age <= self.stale_after:
            return CONNECTED
        if not self.lost:
            self.lost = True
            self._event("connection lost", f"connection lost: no fresh state for {age:.1f} s")
        if not self.link_up and self.down_since is not None and now - self.down_since >= self.disconnect_after:
            return DISCONNECTED
        return STALE

    def status(self, now: float | None = None) -> dict:
        """What ``GET /api/remote/status`` answers (JSON-ready)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            state = self._update(now)
            last = self.last
            recent = [t for t in self._rate if now - t <= 1.0]
            return {
                "state": state,
                "url": self.url,
                "state_age_s": round(now - self.fresh_at, 3) if self.fresh_at is not None else None,
                "sequence": last["sequence"] if last else None,
                "simulation_time": last["simulation_time"] if last else None,
                "server_instance_id": last["server_instance_id"] if last else None,
                "model": (self.mismatch_state or last or {}).get("model"),
                "expected_identity": self.expected_identity,
                "mode": last.get("mode") if last else None,
                "active_control": last.get("active_control") if last else None,
                "last_error": self.last_error,
                "last_error_age_s": round(now - self.last_error_at, 3) if self.last_error_at is not None else None,
                "mismatch": self.mismatch,
                "sequence_backwards": self.backwards,
                "sequence_flag": self.sequence_flag,
                "updates_per_s": len(recent),
                "received": self.received,
                "fresh": self.fresh_count,
                "live": state == CONNECTED,
                "events": [asdict(e) for e in list(self.events)[-20:]],
            }

    def latest(self) -> dict | None:
        """The last accepted state (kept while STALE; None before any, and never a mismatched one)."""
        with self._lock:
            return self.last


class RemoteMonitor:
    """Watches one state server from a background thread; ``set_url`` switches server.

    ``transport``: "stream" (WebSocket, default) or "poll" (``GET /api/v1/state`` every ``poll_s``).
    ``on_fresh(state)``: optional callback for each fresh state (called in the link thread).
    """

    def __init__(
        self,
        url: str | None,
        expected_identity: str | None = None,
        nq: int | None = None,
        nv: int | None = None,
        transport: str = "stream",
        stream_hz: float | None = None,
        poll_s: float = 0.01,
        on_fresh=None,
        **state_kw,
    ):
        if transport not in ("stream", "poll"):
            raise ValueError(f"unknown transport '{transport}'; available: stream, poll")
        self.state = MonitorState(expected_identity, nq, nv, **state_kw)
        self.transport, self.stream_hz, self.poll_s = transport, stream_hz, poll_s
        self.on_fresh = on_fresh
        self._url = None
        self._generation = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = None
        if url:
            self.set_url(url)

    @property
    def url(self) -> str | None:
        return self._url

    def set_url(self, url: str | None) -> str | None:
        """Watch ``url`` from now on (normalized; RemoteError for a malformed one); None stops watching."""
        url = normalize_url(url) if url else None
        self._url = url
        self._generation += 1
        self.state.reset(url)
        self._wake.set()
        return url

    def start(self) -> "RemoteMonitor":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="remote-monitor", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def status(self) -> dict:
        out = self.state.status()
        out["transport"] = self.transport
        return out

    def latest(self) -> dict | None:
        return self.state.latest()

    # --- the link thread -----------------------------------------------------------------------

    def _alive(self, gen: int) -> bool:
        return not self._stop.is_set() and gen == self._generation

    def _feed(self, state, gen: int) -> None:
        if gen != self._generation:
            return
        if self.state.on_state(state, time.monotonic()) and self.on_fresh is not None:
            self.on_fresh(state)

    def _run(self) -> None:
        while not self._stop.is_set():
            url, gen = self._url, self._generation
            if url is None:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            try:
                if self.transport == "stream":
                    self._run_stream(url, gen)
                else:
                    self._run_poll(url, gen)
            except Exception as exc:  # every failure is a status, never a dead thread
                if gen == self._generation:
                    self.state.on_error(describe_error(exc), time.monotonic())
            if self._alive(gen):
                self._wake.wait(RETRY_S)
            self._wake.clear()

    def _run_stream(self, url: str, gen: int) -> None:
        ws = websocket.create_connection(stream_url(url, self.stream_hz), timeout=0.5)
        try:
            while self._alive(gen):
                try:
                    msg = ws.recv()
                except websocket.WebSocketTimeoutException:
                    continue  # no state for 0.5 s: the state machine turns STALE by itself
                if not msg:
                    raise websocket.WebSocketConnectionClosedException("connection closed by server")
                try:
                    state = json.loads(msg)
                except ValueError:
                    self.state.on_error("server sent a message that is not JSON", time.monotonic())
                    continue
                self._feed(state, gen)
        finally:
            try:
                ws.close(timeout=0.1)
            except Exception:
                pass

    def _run_poll(self, url: str, gen: int) -> None:
        client = StateClient(url, timeout=0.5)
        try:
            while self._alive(gen):
                t0 = time.monotonic()
                self._feed(client.state(), gen)
                pause = self.poll_s - (time.monotonic() - t0)
                if pause > 0:
                    self._stop.wait(pause)
        finally:
            client.close()
