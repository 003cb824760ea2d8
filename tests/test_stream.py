"""WS /ws with real WebSocket clients: JPEG frames, metrics, one render per frame, slow clients."""

import threading
import time

import simplejpeg

from tests.conftest import WsClient


def ws_url(srv):
    return srv.url.replace("http", "ws") + "/ws"


def collect(srv, seconds, delay=0.0):
    """Everything one client receives in ``seconds``; ``delay`` [s] sleeps after each binary frame (a slow client)."""
    ws = WsClient(ws_url(srv))
    out = {"hello": None, "headers": [], "jpegs": [], "metrics": []}
    pending = None
    t_end = time.monotonic() + seconds
    try:
        while time.monotonic() < t_end:
            msg = ws.recv()
            if isinstance(msg, bytes):
                out["headers"].append(pending)
                out["jpegs"].append(msg)
                pending = None
                if delay:
                    time.sleep(delay)
                ws.ack()
            elif msg["type"] == "hello":
                out["hello"] = msg
            elif msg["type"] == "frame":
                pending = msg
            elif msg["type"] == "metrics":
                out["metrics"].append(msg)
    finally:
        ws.close()
    return out


def test_client_receives_640x480_jpeg_frames_and_advancing_metrics(lab_server):
    got = collect(lab_server, 2.0)
    assert got["hello"]["width"] == 640 and got["hello"]["identity"]["nu"] == 22
    assert len(got["jpegs"]) >= 10
    for h, jpeg in zip(got["headers"], got["jpegs"]):
        assert h is not None and h["bytes"] == len(jpeg)
        hgt, w, _, _ = simplejpeg.decode_jpeg_header(jpeg)
        assert (w, hgt) == (640, 480)
    img = simplejpeg.decode_jpeg(got["jpegs"][-1])
    assert img.shape == (480, 640, 3) and img.std() > 10  # a picture, not a blank
    times = [m["sim_time"] for m in got["metrics"]]
    assert len(times) >= 20 * 2 * 0.8, f"{len(times)} metrics in 2 s"
    assert times[-1] > times[0]
    assert all(b >= a for a, b in zip(times, times[1:]))


def test_every_client_shares_one_render_per_frame(lab_server):
    hub = lab_server.app.extensions["lab"]["hub"]
    results = [None] * 3

    def worker(i):
        results[i] = collect(lab_server, 2.0)

    r0 = hub.renders
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rendered = hub.renders - r0
    seqs = [[h["seq"] for h in r["headers"]] for r in results]
    union = set().union(*map(set, seqs))
    # every frame any client saw was rendered once: the union of sequence numbers fits in the renders
    assert len(union) <= rendered + 1
    assert max(len(s) for s in seqs) > 10
    common = set(seqs[0]) & set(seqs[1]) & set(seqs[2])
    assert len(common) >= 0.5 * min(len(s) for s in seqs), "clients receive the same shared frames"


def test_a_slow_client_skips_frames_instead_of_queueing_them(lab_server):
    fast_result = {}
    t = threading.Thread(target=lambda: fast_result.update(collect(lab_server, 3.0)))
    t.start()
    slow = collect(lab_server, 3.0, delay=0.25)
    t.join()
    slow_seqs = [h["seq"] for h in slow["headers"]]
    fast_seqs = [h["seq"] for h in fast_result["headers"]]
    assert len(slow_seqs) <= 3.0 / 0.25 + 2
    gaps = [b - a for a, b in zip(slow_seqs, slow_seqs[1:])]
    assert max(gaps) > 3, "the slow client jumped ahead to newer frames"
    # the slow client's last frame is recent, not a stale backlog
    assert fast_seqs[-1] - slow_seqs[-1] < 30
    assert len(fast_seqs) > 2 * len(slow_seqs)


def test_ping_is_answered_with_pong(lab_server):
    import json

    ws = WsClient(ws_url(lab_server))
    try:
        ws.ws.send(json.dumps({"type": "ping", "t": 123}))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            msg = ws.recv()
            if isinstance(msg, dict) and msg["type"] == "pong":
                assert msg["t"] == 123
                return
        raise AssertionError("no pong")
    finally:
        ws.close()
