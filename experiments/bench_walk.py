"""Benchmark: the feedback walk loop against real time, offline and in the live Lab with a client streaming.

Two parts, one run:

1. **Offline (this process).** The Lab's own runner (:class:`SimSession`, a ``RealtimeRunner``) in mode
   ``walk`` (the feedback walker, started at 0.15 m/s) and a second one in mode ``stand``, stepped
   alternately in chunks of ``--chunk`` 1 ms steps (walk, stand, walk, stand, ...) so that a busy
   machine slows both alike; each chunk is one ``advance`` (PD + mode + physics, the fall check, the
   metrics sample, the state copy for the renderer). Figures: the walker's own wall time per update
   (every 10 ms; ``FeedbackWalker.costs``), mean and p95, and that amortised per 1 ms tick; the Lab tick
   per 1 ms step walking and standing and their ratio (median over rounds); the walk loop's offline
   real-time factor (simulated seconds / wall seconds). ``--engine mujoco,pybullet`` adds PyBullet.
2. **Live.** The Lab (``python app.py lab``) as a child process; ``POST /api/mode {"mode": "walk"}``; one
   real WebSocket client that acknowledges each frame (like the page after drawing) for ``--seconds``.
   Figures: the session's measured RTF (``GET /api/metrics`` polled, median and min), the RTF over the
   whole window (simulated time advanced / wall time, from the metrics stream), the frames/s the client
   received, the steps the walker took (``GET /api/walk``) and whether the robot fell
   (``GET /api/status`` ``fall_time``).

Target (docs/CONTRACT.md): the engine holds real time while frames stream: RTF >= 0.95 with the live
view >= 50 frames/s. The machine is shared: the load average is recorded with the result.

    python experiments/bench_walk.py [--seconds 20] [--rounds 7] [--steps 5000] [--engine mujoco]
                                     [--quick] [--out results/bench_walk]
"""

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lab  # noqa: E402, F401  (chooses EGL before anything imports mujoco)
from lab.robots.model import load_robot  # noqa: E402
from lab.runtime.session import SimSession  # noqa: E402
from lab.walking.feedback_run import make_engine  # noqa: E402

RTF_TARGET = 0.95  # the Lab's real-time factor while a walker walks with frames streaming (docs/CONTRACT.md)
FPS_TARGET = 50.0  # the live view [frames/s] meanwhile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- 1. offline ------------------------------------------------------------------------------------
def offline(robot, engine_name, rounds, steps, chunk, warmup_s):
    """Walk and stand sessions alternating in chunks; per-round step times and the walker's update costs."""
    walk = SimSession(robot, mode="walk", engine=make_engine(engine_name, robot))
    stand = SimSession(robot, mode="stand", engine=make_engine(engine_name, robot))
    try:
        dt = walk.dt
        ctl = walk.rollout.mode.controller
        every = max(1, int(round(ctl.params.dt / dt)))  # physics ticks per walker update
        walk.advance(warmup_s)  # the weight shift and first steps, outside the timed rounds
        stand.advance(warmup_s)
        ctl.costs.clear()
        steps0 = ctl.step
        per_round = []
        for r in range(rounds):
            t_walk = t_stand = 0.0
            for start in range(0, steps, chunk):
                n = min(chunk, steps - start)
                t0 = time.perf_counter()
                walk.advance(n * dt)
                t1 = time.perf_counter()
                stand.advance(n * dt)
                t2 = time.perf_counter()
                t_walk += t1 - t0
                t_stand += t2 - t1
            row = {
                "walk_tick_us": 1e6 * t_walk / steps,
                "stand_tick_us": 1e6 * t_stand / steps,
                "ratio": t_walk / t_stand,
                "walk_rtf": steps * dt / t_walk,
            }
            per_round.append(row)
            print(
                f"  {engine_name} round {r + 1}: walk {row['walk_tick_us']:7.1f} us/step   stand "
                f"{row['stand_tick_us']:7.1f} us/step   ratio {row['ratio']:.2f}   walk RTF {row['walk_rtf']:.2f}",
                flush=True,
            )
        costs = np.array(ctl.costs)
        mean_ms = 1e3 * float(costs.mean())
        walk_us = float(np.median([r["walk_tick_us"] for r in per_round]))
        stand_us = float(np.median([r["stand_tick_us"] for r in per_round]))
        info = walk.sim_info()
        return {
            "engine": engine_name,
            "dt_s": dt,
            "walker_update_every_ticks": every,
            "rounds": rounds,
            "steps_per_round": steps,
            "chunk_steps": chunk,
            "warmup_s": warmup_s,
            "walker_updates": int(len(costs)),
            "walker_update_ms_mean": round(mean_ms, 4),
            "walker_update_ms_p95": round(1e3 * float(np.percentile(costs, 95)), 4),
            "walker_update_ms_max": round(1e3 * float(costs.max()), 4),
            "walker_us_per_tick": round(1e3 * mean_ms / every, 2),  # the update amortised over its 10 ticks
            "walk_tick_us_median": round(walk_us, 2),
            "stand_tick_us_median": round(stand_us, 2),
            "walk_over_stand_ratio_median": round(float(np.median([r["ratio"] for r in per_round])), 3),
            "walker_share_of_walk_tick": round(1e3 * mean_ms / every / walk_us, 3),
            "walk_rtf_median": round(float(np.median([r["walk_rtf"] for r in per_round])), 3),
            "walk_rtf_min": round(float(min(r["walk_rtf"] for r in per_round)), 3),
            "walk_steps_taken": int(ctl.step - steps0),
            "walk_sim_s": round(walk.sim_time, 3),
            "fell": walk.fell_at() is not None,
            "fall_time_s": walk.fell_at(),
            "sim_state": info["state"],
            "per_round": [{k: round(v, 3) for k, v in r.items()} for r in per_round],
        }
    finally:
        walk.close()
        stand.close()


# ---- 2. live ---------------------------------------------------------------------------------------
class Client(threading.Thread):
    """A real WebSocket client that acknowledges each frame as it arrives (like the page after drawing)."""

    def __init__(self, url, stop):
        super().__init__(daemon=True)
        self.url, self.stop = url, stop
        self.frames = []  # recv times [s]
        self.metrics = []  # (recv_time, sim_time, rtf)
        self.error = None

    def run(self):
        import websocket

        try:
            ws = websocket.create_connection(self.url, timeout=10)
        except Exception as exc:  # noqa: BLE001  (reported in the result, never hidden)
            self.error = f"{type(exc).__name__}: {exc}"
            return
        header = None
        try:
            while not self.stop.is_set():
                op, data = ws.recv_data()
                now = time.time()
                if op == websocket.ABNF.OPCODE_TEXT:
                    msg = json.loads(data)
                    if msg["type"] == "frame":
                        header = msg
                    elif msg["type"] == "metrics":
                        self.metrics.append((now, msg.get("sim_time"), msg.get("rtf")))
                elif header is not None:
                    self.frames.append(now)
                    ws.send(json.dumps({"type": "ack", "view": header["view"], "seq": header["seq"]}))
                    header = None
        except Exception as exc:  # noqa: BLE001
            if not self.stop.is_set():
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            ws.close()


def start_lab(log):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "LAB_TOKEN"}  # loopback, open: the bench changes the mode
    cmd = [sys.executable, str(ROOT / "app.py"), "lab", "--port", str(port)]
    cmd += ["--remote-url", f"http://127.0.0.1:{free_port()}"]  # nothing there: the monitor stays idle
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    return proc, f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/ws"


def live(seconds, warmup, poll_s):
    import requests

    get = lambda base, path: requests.get(base + path, timeout=5).json()  # noqa: E731
    with tempfile.TemporaryFile() as log:
        proc, base, ws_url = start_lab(log)
        stop = threading.Event()
        client = None
        try:
            deadline = time.time() + 60
            while True:
                try:
                    status = get(base, "/api/status")
                    break
                except requests.RequestException:
                    if time.time() > deadline or proc.poll() is not None:
                        log.seek(0)
                        raise SystemExit(f"the Lab did not start: {log.read().decode()[-2000:]}") from None
                    time.sleep(0.3)
            requests.post(base + "/api/mode", json={"mode": "walk"}, timeout=5).raise_for_status()
            client = Client(ws_url, stop)
            client.start()
            time.sleep(warmup)
            walk0 = get(base, "/api/walk")
            s0 = get(base, "/api/status")
            polled = []
            t0 = time.time()
            while time.time() - t0 < seconds:
                m = get(base, "/api/metrics")
                polled.append(m["rtf"])
                time.sleep(poll_s)
            t1 = time.time()
            walk1 = get(base, "/api/walk")
            s1 = get(base, "/api/status")
        finally:
            stop.set()
            if client is not None:
                client.join(5)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    window = t1 - t0
    frames = [f for f in client.frames if t0 <= f < t1]
    m = [x for x in client.metrics if t0 <= x[0] < t1 and x[1] is not None]
    rtf_window = (m[-1][1] - m[0][1]) / (m[-1][0] - m[0][0]) if len(m) > 1 else float("nan")
    stream_rtf = [x[2] for x in m if x[2] is not None]
    polled = np.array(polled, float)
    return {
        "window_s": round(window, 2),
        "warmup_s": warmup,
        "mode": s1["mode"],
        "sim_state": s1["sim"]["state"],
        "renderer": status["render"]["gl"]["renderer"],
        "fps_cap": status["render"]["fps_target"],
        "rtf_polls": int(len(polled)),
        "rtf_median": round(float(np.median(polled)), 3),
        "rtf_min": round(float(polled.min()), 3),
        "rtf_window": round(float(rtf_window), 3),
        "rtf_stream_median": round(float(np.median(stream_rtf)), 3) if stream_rtf else None,
        "rtf_stream_min": round(float(min(stream_rtf)), 3) if stream_rtf else None,
        "sim_time_advanced_s": round(s1["sim_time"] - s0["sim_time"], 3),
        "client_fps": round(len(frames) / window, 2),
        "server_fps": s1["render"]["fps"],
        "render_ms": s1["render"]["render_ms"],
        "encode_ms": s1["render"]["encode_ms"],
        "walking": bool(walk1.get("walking")),
        "phase": walk1.get("phase"),
        "steps": int(walk1.get("steps", 0)),
        "steps_in_window": int(walk1.get("steps", 0)) - int(walk0.get("steps", 0)),
        "command": walk1.get("command"),
        "fall_time": s1["fall_time"],
        "fell": s1["fall_time"] is not None,
        "client_error": client.error,
    }


# ---- main ------------------------------------------------------------------------------------------
def table(offline_rows, lv):
    lines = ["", "offline (this process, alternating walk/stand rounds, medians):"]
    lines.append(
        f"  {'engine':9s} {'update ms mean/p95':>18s} {'us/tick':>8s} {'walk us':>8s} {'stand us':>8s} {'ratio':>6s} {'RTF':>6s}"
    )
    for o in offline_rows:
        lines.append(
            f"  {o['engine']:9s} {o['walker_update_ms_mean']:8.3f}/{o['walker_update_ms_p95']:<9.3f} "
            f"{o['walker_us_per_tick']:8.1f} {o['walk_tick_us_median']:8.1f} {o['stand_tick_us_median']:8.1f} "
            f"{o['walk_over_stand_ratio_median']:6.2f} {o['walk_rtf_median']:6.2f}"
            f"   steps {o['walk_steps_taken']}, fell {o['fell']}"
        )
    if lv is not None:
        lines.append(f"live Lab, walk mode, 1 client, {lv['window_s']:.1f} s window:")
        lines.append(
            f"  RTF median {lv['rtf_median']:.3f}  min {lv['rtf_min']:.3f}  window {lv['rtf_window']:.3f}   "
            f"client {lv['client_fps']:.1f} fps (server {lv['server_fps']})   steps {lv['steps']} "
            f"(+{lv['steps_in_window']} in window)   fell {lv['fell']}"
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="live streaming window [s]")
    ap.add_argument("--warmup", type=float, default=3.0, help="live: streaming before the window opens [s]")
    ap.add_argument("--poll", type=float, default=0.25, help="live: GET /api/metrics every this [s]")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=5000, help="offline: 1 ms steps per round per loop")
    ap.add_argument("--chunk", type=int, default=250, help="offline: steps per alternation between walk and stand")
    ap.add_argument("--offline-warmup", type=float, default=1.0, help="offline: walk before the timed rounds [s]")
    ap.add_argument("--engine", default="mujoco", help="offline engines, comma-separated: mujoco, pybullet")
    ap.add_argument("--no-live", action="store_true", help="skip the live Lab part")
    ap.add_argument("--quick", action="store_true", help="a short run (a few seconds each part), for the test")
    ap.add_argument("--seed", type=int, default=0, help="unused: the simulation is deterministic")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_walk")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.rounds, args.steps, args.offline_warmup = 4.0, 1.5, 3, 1000, 0.5
    load0 = os.getloadavg()
    robot = load_robot()
    offline_rows = []
    for name in (e.strip() for e in args.engine.split(",") if e.strip()):
        print(f"offline: {name}, {args.rounds} rounds x {args.steps} steps", flush=True)
        offline_rows.append(offline(robot, name, args.rounds, args.steps, args.chunk, args.offline_warmup))
    lv = None
    if not args.no_live:
        print(f"live: the Lab in walk mode, 1 client, {args.seconds:g} s", flush=True)
        lv = live(args.seconds, args.warmup, args.poll)
    load1 = os.getloadavg()
    mj = next((o for o in offline_rows if o["engine"] == "mujoco"), offline_rows[0] if offline_rows else None)
    targets = {"rtf_target": RTF_TARGET, "fps_target": FPS_TARGET}
    if lv is not None:
        targets.update(
            {
                "live_rtf_median_ge_0.95": lv["rtf_median"] >= RTF_TARGET,
                "live_rtf_window_ge_0.95": lv["rtf_window"] >= RTF_TARGET,
                "live_fps_ge_50": lv["client_fps"] >= FPS_TARGET,
                "walked_without_falling": lv["steps_in_window"] > 0 and not lv["fell"],
            }
        )
        targets["pass"] = all(v for k, v in targets.items() if k.startswith(("live_", "walked_")))
    if mj is not None:
        targets["offline_walk_rtf_ge_1"] = mj["walk_rtf_min"] >= 1.0
    summary = {
        "quick": bool(args.quick),
        "cpu_count": os.cpu_count(),
        "load_average_start": [round(x, 2) for x in load0],
        "load_average_end": [round(x, 2) for x in load1],
        "offline": offline_rows,
        "live": lv,
        "targets": targets,
        "command": " ".join(["python", "experiments/bench_walk.py", *(argv if argv is not None else sys.argv[1:])]),
    }
    summary = _finite(summary)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_walk.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(table(offline_rows, lv))
    print(f"load average (1, 5, 15 min): start {summary['load_average_start']}  end {summary['load_average_end']}")
    print(json.dumps(targets, indent=2))
    print(f"wrote {args.out / 'bench_walk.json'}")
    return summary


def _finite(d):
    """NaN/inf -> None so the JSON stays valid."""
    if isinstance(d, dict):
        return {k: _finite(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [_finite(v) for v in d]
    if isinstance(d, float) and not math.isfinite(d):
        return None
    return d


if __name__ == "__main__":
    main()
