"""Benchmark: wall time from starting the Lab (``python app.py lab``) to its first answered ``/api/status``.

Each run starts a fresh process on a free port (no state server, so only the Lab's own start is timed:
imports, model load, the first metrics sample, the server socket), polls ``GET /api/status`` every 20 ms,
and stops the process. Target (docs/CONTRACT.md): <= 2 s.

    python experiments/bench_startup.py [--runs 5] [--out results/bench_startup]
"""

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_start(timeout_s: float = 60.0) -> float:
    port = free_port()
    cmd = [sys.executable, str(ROOT / "app.py"), "lab", "--port", str(port), "--remote-url", ""]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - t0 < timeout_s:
            try:
                if requests.get(f"http://127.0.0.1:{port}/api/status", timeout=1).ok:
                    return time.perf_counter() - t0
            except requests.RequestException:
                pass
            if proc.poll() is not None:
                raise SystemExit(f"error: the Lab exited with code {proc.returncode} before answering")
            time.sleep(0.02)
        raise SystemExit(f"error: no /api/status within {timeout_s:g} s")
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0, help="unused: nothing random is drawn")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_startup")
    args = ap.parse_args()
    times = [one_start() for _ in range(args.runs)]
    for i, t in enumerate(times):
        print(f"run {i + 1}: first /api/status after {t:.3f} s", flush=True)
    times_sorted = sorted(times)
    summary = {
        "runs": args.runs,
        "startup_s": [round(t, 3) for t in times],
        "startup_s_median": round(times_sorted[len(times) // 2], 3),
        "startup_s_max": round(max(times), 3),
        "target_s": TARGET_S,
        "pass": max(times) <= TARGET_S,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
