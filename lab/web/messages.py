"""The WebSocket and HTTP message shapes, in one place. ``static/js/socket.js`` uses the same names.

WebSocket ``/ws`` (server -> browser):
- text ``{"type": "hello", "service", "views": [...], "width", "height", "fps", "identity": {...}}`` once;
- text ``{"type": "frame", "view", "seq", "t_wall", "sim_time", "width", "height", "bytes"}`` then, as the very
  next message, one **binary** message holding that frame's JPEG;
- text ``{"type": "metrics", ...}`` at ``metrics_hz`` (>= 20 Hz): the latest sample, real-time factor, fps;
- text ``{"type": "status", ...}`` when mode / paused / preset change.
Browser -> server: text ``{"type": "ack", "view", "seq"}`` after each frame it has taken (flow control:
at most 2 unacknowledged frames per view are in flight, so a slow client skips frames instead of
queueing them); ``{"type": "ping", "t": ...}`` answered with ``{"type": "pong", "t": ...}``; anything
else is ignored. ``t_wall`` is the server's ``time.time()`` when the frame's state was captured; on
loopback the browser's ``Date.now()/1000 - t_wall`` is the frame age.
"""

import json
import math

HELLO, FRAME, METRICS, STATUS, PING, PONG, ACK = "hello", "frame", "metrics", "status", "ping", "pong", "ack"
AUTH = "auth"


def dumps(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, default=_default)


def _default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def hello(service: str, views: list, width: int, height: int, fps: float, identity: dict, **extra) -> str:
    return dumps(
        {
            "type": HELLO,
            "service": service,
            "views": views,
            "width": width,
            "height": height,
            "fps": fps,
            "identity": identity,
            **extra,
        }
    )


def frame_header(view: str, seq: int, t_wall: float, sim_time: float, width: int, height: int, nbytes: int) -> str:
    return dumps(
        {
            "type": FRAME,
            "view": view,
            "seq": seq,
            "t_wall": t_wall,
            "sim_time": sim_time,
            "width": width,
            "height": height,
            "bytes": nbytes,
        }
    )


def metrics(sample: dict) -> str:
    return dumps({"type": METRICS, **finite(sample)})


def status(state: dict) -> str:
    return dumps({"type": STATUS, **finite(state)})


def finite(d):
    """NaN/inf -> None so the JSON stays valid."""
    if isinstance(d, dict):
        return {k: finite(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [finite(v) for v in d]
    if isinstance(d, float) and not math.isfinite(d):
        return None
    return d
