"""Benchmark: the Lab's live view while a 2-worker scan runs beside it (issue 14, "Fairness").

Starts the Lab (``python app.py lab``, default view settings: 640 x 480, the renderer's default
preset, the 60 frames/s cap) as a child process with an empty results folder, connects one real
WebSocket client that acknowledges each frame as it arrives (as the page does after drawing, see
``bench_stream.py``) and measures, in windows of ``--seconds``:

- ``idle``: the view alone: delivered frames/s, the real-time factor of the simulation (sim time
  advanced / wall time, from the metrics stream), frame age at the client;
- ``while_scan``: the same while a push_recovery scan (``--workers`` workers, ``--scan-seconds``
  simulated per point) runs through ``POST /api/scans``; the window opens once a point is done
  (the workers are warm), the scan is cancelled after it and resumed for the next repeat. Also
  the scan's points/s in the window.

Idle and scan windows alternate ``--repeats`` times, so a change in the machine's load hits both;
the targets (fps >= 50 and RTF >= 0.95 while the scan runs) are judged on the medians. Each window
also says who used the cores [CPU s per wall s, from /proc]: the Lab process, its scan workers,
this script, and ``others`` (the rest of the machine: on a shared machine, other people's jobs),
with the 1-minute load average at its start and end.

``--worker-nice N`` is the ablation that says why the view keeps its rate: after each scan window it
renices every thread of the workers to N (0: the Lab's own priority, instead of
:data:`lab.scans.pool.NICE`) and measures ``while_scan_worker_nice_N`` (lowering a niceness needs
root or CAP_SYS_NICE).

    python experiments/bench_scan_fairness.py --out results/bench_scan_fairness [--seconds 10] [--repeats 2]
    python experiments/bench_scan_fairness.py --out /tmp/fairness_nice0 --worker-nice 0
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import requests
import websocket

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from lab.scans.pool import NICE  # noqa: E402

FPS_TARGET = 50.0
RTF_TARGET = 0.95
TICK = os.sysconf("SC_CLK_TCK")  # /proc cpu times are in clock ticks [1/s]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client(threading.Thread):
    """A real WebSocket client that acknowledges each frame as it arrives (like the page after drawing)."""

    def __init__(self, url: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.url, self.stop = url, stop
        self.frames: list[tuple[float, float]] = []  # (receive time, capture time t_wall) [s]
        self.metrics: list[tuple[float, float]] = []  # (receive time, sim_time) [s]

    def run(self):
        ws = websocket.create_connection(self.url, timeout=10)
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
                        self.metrics.append((now, msg["sim_time"]))
                elif header is not None:
                    self.frames.append((now, header["t_wall"]))
                    ws.send(json.dumps({"type": "ack", "view": header["view"], "seq": header["seq"]}))
                    header = None
        finally:
            ws.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads) [s]; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the scan workers, their guards and what a point started)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def renice(pids: list[int], nice: int) -> None:
    """Set the niceness of every thread of ``pids`` (Linux keeps one per thread)."""
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                os.setpriority(os.PRIO_PROCESS, int(task.name), nice)
            except (ProcessLookupError, FileNotFoundError):
                continue


def machine_busy_seconds() -> float:
    """CPU time every core of the machine spent busy (not idle, not waiting on I/O) since boot [s]."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK


def window(base: str, client: Client, lab_pid: int, seconds: float, scan_id: str | None = None) -> dict:
    """fps, RTF, frame age and CPU use [s per wall s] over the next ``seconds`` [s]: of the Lab, of its
    scan workers, of this script, and of everything else on the machine (``others``: other people's
    jobs on a shared machine); with ``scan_id`` the scan's points/s too."""

    def done() -> int:
        s = requests.get(f"{base}/api/scans/{scan_id}?points=0", timeout=10).json()
        return s["counts"]["done"] + s["counts"]["error"]

    kids0 = {p: cpu_seconds(p) for p in children(lab_pid)}
    lab0, r0 = cpu_seconds(lab_pid), requests.get(base + "/api/status", timeout=5).json()["render"]
    n0 = done() if scan_id else 0
    me0, busy0, load0 = cpu_seconds(os.getpid()), machine_busy_seconds(), os.getloadavg()[0]
    t0 = time.time()
    time.sleep(seconds)
    t1 = time.time()
    me1, busy1 = cpu_seconds(os.getpid()), machine_busy_seconds()
    n1 = done() if scan_id else 0
    lab1, r1 = cpu_seconds(lab_pid), requests.get(base + "/api/status", timeout=5).json()["render"]
    kids = children(lab_pid)
    workers_cpu = sum(cpu_seconds(p) - kids0.get(p, 0.0) for p in kids)  # a worker started meanwhile counts whole
    frames = [f for f in client.frames if t0 <= f[0] < t1]
    ages = [(now - cap) * 1e3 for now, cap in frames]
    m = [x for x in client.metrics if t0 <= x[0] < t1]
    rtf = (m[-1][1] - m[0][1]) / (m[-1][0] - m[0][0]) if len(m) > 1 else float("nan")
    wall = t1 - t0
    lab_cpu, me = (lab1 - lab0) / wall, (me1 - me0) / wall
    out = {
        "fps": round(len(frames) / wall, 2),
        "rtf": round(rtf, 3),
        "frame_age_ms_p50": round(float(np.percentile(ages, 50)), 1) if ages else None,
        "frame_age_ms_p95": round(float(np.percentile(ages, 95)), 1) if ages else None,
        "renders_per_s": round((r1["renders"] - r0["renders"]) / wall, 2),
        "render_ms": r1["render_ms"],
        "encode_ms": r1["encode_ms"],
        "cpu_per_s": {
            "lab": round(lab_cpu, 3),
            "workers": round(workers_cpu / wall, 3),
            "bench_client": round(me, 3),
            "others": round(max(0.0, (busy1 - busy0) / wall - lab_cpu - workers_cpu / wall - me), 3),
        },
        "load_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "worker_processes": len(kids),
    }
    if scan_id:
        out["scan_points_per_s"] = round((n1 - n0) / wall, 3)
    return out


def wait_done(base: str, sid: str, more_than: int) -> int:
    """Wait (up to 120 s) until the scan has more than ``more_than`` points finished (its workers are warm)."""
    deadline = time.time() + 120
    while True:
        c = requests.get(f"{base}/api/scans/{sid}?points=0", timeout=10).json()["counts"]
        if c["done"] + c["error"] > more_than:
            return c["done"] + c["error"]
        if time.time() > deadline:
            raise SystemExit(f"scan {sid}: no point finished in 120 s")
        time.sleep(0.2)


def median(rows: list[dict]) -> dict:
    return {k: round(float(np.median([r[k] for r in rows])), 3) for k in ("fps", "rtf")}


def start_lab(port: int, results: Path, log) -> subprocess.Popen:
    cmd = [sys.executable, str(ROOT / "app.py"), "lab", "--port", str(port), "--results", str(results)]
    cmd += ["--remote-url", f"http://127.0.0.1:{free_port()}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 90
    while True:
        try:
            requests.get(f"http://127.0.0.1:{port}/api/status", timeout=2).raise_for_status()
            return proc
        except requests.RequestException:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit(f"the Lab did not start (see {log.name})") from None
            time.sleep(0.3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="each measuring window [s]")
    ap.add_argument("--repeats", type=int, default=2, help="idle and scan windows, alternated, this many times")
    ap.add_argument("--warmup", type=float, default=3.0, help="streaming before the first window [s]")
    ap.add_argument("--workers", type=int, default=2, help="the scan's workers")
    ap.add_argument("--scan-seconds", type=float, default=3.0, help="simulated time per scan point [s]")
    ap.add_argument("--port", type=int, default=None, help="the Lab's port (default: a free one)")
    ap.add_argument("--worker-nice", type=int, default=None, help="ablation: renice the workers, measure again")
    ap.add_argument("--seed", type=int, default=0, help="unused: nothing random")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_scan_fairness")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = args.port or free_port()
    base, load_before = f"http://127.0.0.1:{port}", os.getloadavg()
    rows = {"idle": [], "while_scan": [], f"while_scan_worker_nice_{args.worker_nice}": []}
    with tempfile.TemporaryDirectory(prefix="bench_scan_fairness_") as tmp, open(args.out / "lab.log", "wb") as log:
        proc = start_lab(port, Path(tmp), log)
        stop = threading.Event()
        client = Client(f"ws://127.0.0.1:{port}/ws", stop)
        try:
            status = requests.get(base + "/api/status", timeout=5).json()
            client.start()
            time.sleep(args.warmup)
            # 2000 points of gentle pushes (all recover): more than the windows need (~10 points/s on 2 idle
            # cores); cancelled after each scan window, resumed for the next
            grid = {"force_n": "0:19.99:0.01", "duration_s": [0.1], "seconds": [args.scan_seconds]}
            sid, finished = None, 0
            for _ in range(args.repeats):
                rows["idle"].append(window(base, client, proc.pid, args.seconds))
                print("idle", json.dumps(rows["idle"][-1]), flush=True)
                if sid is None:
                    spec = {"kind": "push_recovery", "grid": grid, "workers": args.workers}
                    r = requests.post(base + "/api/scans", json=spec, timeout=30)
                    r.raise_for_status()
                    sid = r.json()["id"]
                else:
                    requests.post(f"{base}/api/scans/{sid}/resume", timeout=30).raise_for_status()
                finished = wait_done(base, sid, finished)
                rows["while_scan"].append(window(base, client, proc.pid, args.seconds, sid))
                print("scan", json.dumps(rows["while_scan"][-1]), flush=True)
                if args.worker_nice is not None:
                    renice(children(proc.pid), args.worker_nice)
                    row = window(base, client, proc.pid, args.seconds, sid)
                    rows[f"while_scan_worker_nice_{args.worker_nice}"].append(row)
                    print(f"scan, workers at nice {args.worker_nice}", json.dumps(row), flush=True)
                    renice(children(proc.pid), NICE)
                r = requests.post(f"{base}/api/scans/{sid}/cancel", timeout=60)
                if r.status_code != 200:  # it ended by itself: its last window ran short of points
                    raise SystemExit(f"the scan ended before its windows closed ({r.text[:200]}): use fewer repeats")
                finished = r.json()["counts"]["done"] + r.json()["counts"]["error"]
        finally:
            stop.set()
            client.join(5)
            proc.terminate()
            proc.wait(30)
    rows = {k: v for k, v in rows.items() if v}
    busy = median(rows["while_scan"])
    summary = {
        "renderer": status["render"]["gl"]["renderer"],
        "preset": status["render"]["preset"],
        "width": status["render"]["width"],
        "height": status["render"]["height"],
        "fps_cap": 60.0,
        "cpu_count": os.cpu_count(),
        "worker_nice": NICE,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "scan": {"kind": "push_recovery", "workers": args.workers, "seconds_per_point": args.scan_seconds},
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "median": {k: median(v) for k, v in rows.items()}
        | {"scan_points_per_s": float(np.median([r["scan_points_per_s"] for r in rows["while_scan"]]))},
        "windows": rows,
        "targets": {
            "fps_ge_50_while_scan": busy["fps"] >= FPS_TARGET,
            "rtf_ge_0_95_while_scan": busy["rtf"] >= RTF_TARGET,
        },
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(
        json.dumps(
            {k: summary[k] for k in ("load_average_before", "load_average_after", "median", "targets")}, indent=2
        )
    )


if __name__ == "__main__":
    main()
