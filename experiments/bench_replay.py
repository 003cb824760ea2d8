"""Benchmark: how long a seek in a 10-minute recording takes on the replay page's two paths.

A ``--long-s`` (600 s) recording of the push mode is made offline (``SimSession.advance`` while recording,
as the Lab records), then the real Lab serves it on a free loopback port and each seek goes to a random
time of it:

1. HTTP: ``GET /api/recordings/<id>/state?t=T`` (the exact qpos at T): the request's round trip, and the
   server's own seek time (``seek_ms``: the keyframe before T through the MCAP chunk index, then up to 1 s
   of recorded steps);
2. WebSocket: ``{"type": "replay", "t": T}`` on ``/ws/replay?id=ID`` until the frame showing T arrives (its
   header's ``sim_time`` is the recording time it shows): seek + render + JPEG + send, as a viewer waits.

Target: < 200 ms per seek (issue 13). Prints one JSON line and writes it to ``<out>/bench_replay.json``.

    python experiments/bench_replay.py [--long-s 600] [--seeks 40] [--seed 0] [--out results/bench_replay]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.record.store import Recordings  # noqa: E402
from lab.robots.model import load_robot  # noqa: E402
from lab.runtime.session import SimSession  # noqa: E402

TARGET_MS = 200.0
PACE_S = 0.1  # [s] left to the recording's writer after each second recorded


def record(robot, seconds: float, folder: Path) -> tuple[str, float]:
    """A ``seconds`` recording of the push mode in ``folder``; its id and the wall time it took [s].

    Offline ``advance`` outruns the writer thread on a busy machine (the recording then ends failed: "the
    writer fell behind"), so it advances 1 s at a time and leaves the writer :data:`PACE_S` after each."""
    s = SimSession(robot, mode="push")
    store = Recordings(folder, "lab")
    info = store.start(s, label="bench replay", max_s=seconds + 1.0)
    t0 = time.perf_counter()
    done = 0.0
    while done < seconds:
        step = min(1.0, seconds - done)
        s.advance(step)
        done += step
        time.sleep(PACE_S)
        if store.info(info["id"])["state"] == "failed":
            break
    end = store.stop(info["id"])
    if end["state"] != "done" or abs(end["duration_s"] - seconds) > 1e-6:
        raise SystemExit(f"the recording ended {end['state']} at {end['duration_s']} s: {end['reason']}")
    return info["id"], time.perf_counter() - t0


def stats(ms: list) -> dict:
    a = np.array(ms)
    return {
        "n": len(ms),
        "median_ms": round(float(np.median(a)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
        "max_ms": round(float(a.max()), 2),
        "target_ms": TARGET_MS,
        "ok": bool(a.max() < TARGET_MS),
    }


def http_seeks(base: str, rid: str, times) -> dict:
    import requests

    session = requests.Session()
    session.get(f"{base}/api/recordings/{rid}/state?t=0", timeout=30)  # opens the file once
    wall, server = [], []
    for t in times:
        t0 = time.perf_counter()
        r = session.get(f"{base}/api/recordings/{rid}/state?t={t:.3f}", timeout=30)
        wall.append((time.perf_counter() - t0) * 1e3)
        r.raise_for_status()
        server.append(r.json()["seek_ms"])
    return {"round_trip": stats(wall), "server_seek": stats(server)}


def ws_seeks(base: str, rid: str, times, dt: float) -> dict:
    import websocket

    ws = websocket.create_connection(base.replace("http", "ws") + f"/ws/replay?id={rid}", timeout=30)
    header = None

    def until(pred):
        """Read messages (acknowledging frames) until ``pred(frame header)``."""
        nonlocal header
        while True:
            op, data = ws.recv_data()
            if op == websocket.ABNF.OPCODE_TEXT:
                msg = json.loads(data)
                if msg.get("type") == "frame":
                    header = msg
            elif header is not None:
                ws.send(json.dumps({"type": "ack", "view": header["view"], "seq": header["seq"]}))
                if pred(header):
                    return

    try:
        until(lambda h: True)  # the first frame: the renderer is up
        out = []
        for t in times:
            want = round(round(t / dt) * dt, 6)
            t0 = time.perf_counter()
            ws.send(json.dumps({"type": "replay", "t": want}))
            until(lambda h, want=want: abs(h["sim_time"] - want) < 1e-6)
            out.append((time.perf_counter() - t0) * 1e3)
    finally:
        ws.close()
    return stats(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long-s", type=float, default=600.0, help="recording length [s]")
    ap.add_argument("--seeks", type=int, default=40, help="seeks per path")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_replay")
    args = ap.parse_args()

    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    robot = load_robot()
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp)
        rid, rec_s = record(robot, args.long_s, results / "recordings")
        size_mb = (results / "recordings" / f"{rid}.mcap").stat().st_size / 1e6
        app = create_lab_app(results_dir=results, remote_url="", start=False)
        with ServerThread(app) as srv:
            times = rng.uniform(0.0, args.long_s, args.seeks)
            http = http_seeks(srv.url, rid, times)
            ws = ws_seeks(srv.url, rid, rng.uniform(0.0, args.long_s, args.seeks), robot.model.opt.timestep)
    out = {
        "recording_s": args.long_s,
        "recording_mb": round(size_mb, 2),
        "recorded_in_s": round(rec_s, 1),
        "seeks": args.seeks,
        "seed": args.seed,
        "http_state": http,
        "ws_frame": ws,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_replay.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
