"""Benchmark of the remote link: how many states per second the Lab's monitor receives from a real
state server process, over HTTP polling and over the WebSocket stream, and how old they are.

State age = the monitor's clock when a fresh state arrived - the server's clock when it took the
snapshot (same machine, same clock). Also measured: how long the monitor takes to report STALE or
DISCONNECTED after the server is killed (SIGKILL), and CONNECTED after a new server answers.
Targets (docs/CONTRACT.md): >= 50 states/s over the stream; STALE within 1.5 s; CONNECTED within 1.5 s.

    python experiments/bench_remote.py [--seconds 5] [--restarts 3] [--out results/bench_remote]
"""

import argparse
import csv
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from lab.remote.cli import spawn_state_server  # noqa: E402
from lab.remote.client import wait_ready  # noqa: E402
from lab.remote.monitor import CONNECTED, DISCONNECTED, STALE, RemoteMonitor  # noqa: E402
from lab.robots.model import load_robot  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_rate(url, robot, transport, seconds, poll_s):
    """Fresh states received in ``seconds``: rows (t since start [s], sequence, age [ms])."""
    rows, t0 = [], [None]

    def on_fresh(state):
        now = time.time()
        if t0[0] is None:
            return
        rows.append((now - t0[0], state["sequence"], (now - state["wall_time"]) * 1e3))

    mon = RemoteMonitor(
        url, robot.identity, robot.model.nq, robot.model.nv, transport=transport, poll_s=poll_s, on_fresh=on_fresh
    )
    mon.start()
    try:
        deadline = time.monotonic() + 10
        while mon.status()["state"] != CONNECTED:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{transport}: monitor never connected: {mon.status()['last_error']}")
            time.sleep(0.01)
        time.sleep(0.5)  # settle
        t0[0] = time.time()
        time.sleep(seconds)
        t0[0] = None
    finally:
        mon.stop()
    ages = np.array([r[2] for r in rows])
    seqs = [r[1] for r in rows]
    return rows, {
        "transport": transport,
        "seconds": seconds,
        "states": len(rows),
        "updates_per_s": round(len(rows) / seconds, 1),
        "age_ms_p50": round(float(np.percentile(ages, 50)), 2) if len(ages) else None,
        "age_ms_p95": round(float(np.percentile(ages, 95)), 2) if len(ages) else None,
        "age_ms_max": round(float(ages.max()), 2) if len(ages) else None,
        "sequence_skipped": int(sum(b - a - 1 for a, b in zip(seqs, seqs[1:]))),
    }


def wait_state(mon, want, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if mon.status()["state"] in want:
            return time.monotonic() - t0
        time.sleep(0.005)
    return None


def measure_restarts(port, robot, restarts, logdir):
    """SIGKILL -> STALE/DISCONNECTED and new server ready -> CONNECTED latencies [s], stream transport."""
    url = f"http://127.0.0.1:{port}"
    procs = [spawn_state_server(port, log_path=logdir / "restart0.log")]
    wait_ready(url, timeout=30, proc=procs[0])
    mon = RemoteMonitor(url, robot.identity, robot.model.nq, robot.model.nv).start()
    stale, connected, start_s = [], [], []
    try:
        assert wait_state(mon, {CONNECTED}, 10) is not None
        for i in range(restarts):
            os.kill(procs[-1].pid, signal.SIGKILL)
            procs[-1].wait()
            stale.append(wait_state(mon, {STALE, DISCONNECTED}, 5))
            t = time.monotonic()
            procs.append(spawn_state_server(port, log_path=logdir / f"restart{i + 1}.log"))
            wait_ready(url, timeout=30, proc=procs[-1])
            start_s.append(time.monotonic() - t)
            connected.append(wait_state(mon, {CONNECTED}, 5))
        events = [e["kind"] for e in mon.status()["events"]]
    finally:
        mon.stop()
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(5)
    return {
        "restarts": restarts,
        "stale_after_kill_s": [round(x, 3) if x is not None else None for x in stale],
        "connected_after_ready_s": [round(x, 3) if x is not None else None for x in connected],
        "server_start_s": [round(x, 2) for x in start_s],
        "instance_changed_events": events.count("instance changed"),
        "connection_recovered_events": events.count("connection recovered"),
    }


def figure(rows_by_transport, summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for name, rows in rows_by_transport.items():
        ages = [r[2] for r in rows]
        s = summary["transports"][name]
        a1.hist(
            ages,
            bins=np.logspace(-0.5, 3, 60),
            alpha=0.6,
            label=f"{name}: p50 {s['age_ms_p50']} ms, p95 {s['age_ms_p95']} ms",
        )
        t = np.array([r[0] for r in rows])
        if len(t):
            edges = np.arange(0, summary["seconds"] + 0.25, 0.25)
            counts, _ = np.histogram(t, edges)
            a2.plot(edges[:-1], counts / 0.25, label=f"{name}: {s['updates_per_s']} states/s")
    a1.set_xscale("log")
    a1.set_xlabel("state age at the monitor [ms] (log scale)")
    a1.set_ylabel("states")
    a1.legend()
    a1.set_title("age of received states")
    a2.axhline(50, color="k", ls=":", lw=1, label="target 50/s")
    a2.set_xlabel("time [s]")
    a2.set_ylabel("fresh states per second (0.25 s bins)")
    a2.set_ylim(bottom=0)
    a2.legend()
    a2.set_title("update rate received by the monitor")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="measurement time per transport [s]")
    p.add_argument("--poll-s", type=float, default=0.01, help="HTTP polling period [s] (0: as fast as it answers)")
    p.add_argument("--restarts", type=int, default=3, help="SIGKILL/restart cycles to time")
    p.add_argument("--seed", type=int, default=0, help="(no randomness here; kept for the experiments' convention)")
    p.add_argument("--out", type=Path, default=HERE.parent / "results" / "bench_remote")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    robot = load_robot()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = spawn_state_server(port, log_path=args.out / "server.log")
    rows_by, transports = {}, {}
    try:
        health = wait_ready(url, timeout=30, proc=proc)
        for transport in ("poll", "stream"):
            rows, s = measure_rate(url, robot, transport, args.seconds, args.poll_s)
            rows_by[transport], transports[transport] = rows, s
            print(
                f"{transport:6s}: {s['updates_per_s']:6.1f} states/s, age p50 {s['age_ms_p50']} ms, "
                f"p95 {s['age_ms_p95']} ms, skipped sequences {s['sequence_skipped']}"
            )
    finally:
        proc.terminate()
        proc.wait(5)
    restarts = measure_restarts(free_port(), robot, args.restarts, args.out)
    print(
        f"SIGKILL -> STALE/DISCONNECTED: {restarts['stale_after_kill_s']} s; "
        f"new server ready -> CONNECTED: {restarts['connected_after_ready_s']} s"
    )
    st = transports["stream"]
    stale_ok = all(x is not None and x <= 1.5 for x in restarts["stale_after_kill_s"])
    conn_ok = all(x is not None and x <= 1.5 for x in restarts["connected_after_ready_s"])
    summary = {
        "what": "state updates received by the Lab's remote monitor from a real state server process",
        "machine": {"cpus": os.cpu_count(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "server": {"publish_hz": health["publish_hz"], "stream_hz": health["stream_hz"], "mujoco": health["mujoco"]},
        "seconds": args.seconds,
        "poll_s": args.poll_s,
        "transports": transports,
        "restarts": restarts,
        "targets": {
            "stream_updates_per_s_ge_50": st["updates_per_s"] >= 50,
            "stale_within_1_5_s": stale_ok,
            "connected_within_1_5_s": conn_ok,
        },
        "command": "python experiments/bench_remote.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    with open(args.out / "states.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["transport", "t_s", "sequence", "age_ms"])
        for name, rows in rows_by.items():
            for r in rows:
                w.writerow([name, f"{r[0]:.4f}", r[1], f"{r[2]:.3f}"])
    figure(rows_by, summary, args.out / "state_rate_age.png")
    summary["figures"] = ["state_rate_age.png"]
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"targets: {summary['targets']}; wrote {args.out / 'summary.json'}")
    return 0 if all(summary["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
