"""Benchmark of the scan engine: parallel efficiency of 2 workers against 1, and the fixed cost of a point.

The same push_recovery grid (``--points`` points of ``--seconds`` simulated seconds each) runs
through :class:`lab.scans.manager.ScanManager` with 1 worker and with ``--workers`` (default: one
per core), interleaved ``--repeats`` times, the fastest run of each counting; parallel
efficiency = T(1) / (workers x T(workers)), target >= 0.8. The fixed cost of a point:

- ``fixed_cost_per_point_s``: point wall time minus the wall time of its simulation (process
  start, imports of MuJoCo and matplotlib, loading the model, trace CSV, figure, result);
- ``process_overhead_s``: the part of it outside the point function (new Python process, result);
- ``empty_point_s``: the wall time of a ``probe`` point that does nothing (the machinery alone);
- ``scan_overhead_s``: T(1) minus the sum of its points' wall times (scheduling, bookkeeping).

Writes ``summary.json``, ``points.csv`` and ``bench_scan.png`` under ``--out``. The machine may be
shared: the load average before and after is recorded beside the figures.

    python experiments/bench_scan.py                      # 6 points of 2 s, 1 vs 2 workers, twice
    python experiments/bench_scan.py --executor ray
"""

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lab.scans.manager import ScanManager  # noqa: E402


def run(manager: ScanManager, spec: dict) -> tuple[float, dict]:
    t0 = time.perf_counter()
    s = manager.wait(manager.create(spec)["id"])
    wall = time.perf_counter() - t0
    if s["status"] != "done" or s["counts"]["error"]:
        errors = [p["error"] for p in s["points"] if p["error"]]
        raise SystemExit(f"scan {s['id']} ended {s['status']} with {s['counts']['error']} errors: {errors}")
    return wall, s


def measure(a) -> dict:
    forces = list(np.linspace(10.0, 30.0, a.points).round(3))  # all recover: every point simulates the full time
    base = {"kind": "push_recovery", "grid": {"force_n": forces, "duration_s": [0.1], "seconds": [a.seconds]}}
    base["executor"] = a.executor
    empty = {"kind": "probe", "grid": {"work_s": [round(i * 1e-4, 4) for i in range(a.points)]}, "workers": 1}
    empty["executor"] = a.executor
    out = {"t1": [], "tn": []}
    with tempfile.TemporaryDirectory() as tmp:
        manager = ScanManager(tmp)
        ray = None
        if a.executor == "ray":  # one Ray instance for every run, so its start-up is not counted
            import ray

            env = {"env_vars": {"PYTHONPATH": str(ROOT)}}
            ray.init(num_cpus=a.workers, include_dashboard=False, log_to_driver=False, runtime_env=env)
            run(manager, {**empty, "workers": a.workers})  # start its workers
        try:
            for _ in range(a.repeats):  # interleaved, so a change in the machine's load hits both alike
                t, out["s1"] = run(manager, {**base, "workers": 1})
                out["t1"].append(t)
                t, out["sn"] = run(manager, {**base, "workers": a.workers})
                out["tn"].append(t)
            _, out["se"] = run(manager, empty)
        finally:
            manager.shutdown()
            if ray is not None:
                ray.shutdown()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=6, help="points per scan (default 6)")
    ap.add_argument("--seconds", type=float, default=2.0, help="simulated seconds per push point (default 2)")
    ap.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="workers of the parallel run (default: cores)"
    )
    ap.add_argument("--repeats", type=int, default=2, help="interleaved 1-worker / n-worker runs (default 2)")
    ap.add_argument("--executor", choices=["local", "ray"], default="local")
    ap.add_argument("--seed", type=int, default=0, help="recorded; these points are deterministic")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_scan")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    r = measure(a)
    load1 = os.getloadavg()
    t1, tn = min(r["t1"]), min(r["tn"])
    s1, sn, se = r["s1"], r["sn"], r["se"]
    eff = t1 / (a.workers * tn)

    runs = (("1 worker", s1), (f"{a.workers} workers", sn), ("empty probe", se))
    with open(a.out / "points.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "index", "wall_s", "compute_s", "sim_wall_s"])
        for name, s in runs:
            for p in s["points"]:
                w.writerow([name, p["index"], p["wall_s"], p["compute_s"], p["metrics"].get("sim_wall_s", "")])
    walls1 = np.array([p["wall_s"] for p in s1["points"]])
    sim1 = np.array([p["metrics"]["sim_wall_s"] for p in s1["points"]])
    outside1 = np.array([p["wall_s"] - p["compute_s"] for p in s1["points"]])
    summary = {
        "script": "bench_scan.py",
        "executor": a.executor,
        "points": a.points,
        "seconds_per_point": a.seconds,
        "workers": a.workers,
        "cores": os.cpu_count(),
        "repeats": a.repeats,
        "seed": a.seed,
        "t_1_worker_s": round(t1, 3),
        "t_n_workers_s": round(tn, 3),
        "t_1_worker_runs_s": [round(t, 3) for t in r["t1"]],
        "t_n_workers_runs_s": [round(t, 3) for t in r["tn"]],
        "speedup": round(t1 / tn, 3),
        "parallel_efficiency": round(eff, 3),
        "target_efficiency": 0.8,
        "pass": bool(eff >= 0.8),
        "point_wall_s_1_worker": round(float(walls1.mean()), 3),
        "point_wall_s_n_workers": round(float(np.mean([p["wall_s"] for p in sn["points"]])), 3),
        "sim_wall_s_1_worker": round(float(sim1.mean()), 3),
        "fixed_cost_per_point_s": round(float((walls1 - sim1).mean()), 3),
        "process_overhead_s": round(float(outside1.mean()), 3),
        "empty_point_s": round(float(np.mean([p["wall_s"] for p in se["points"]])), 3),
        "scan_overhead_s": round(r["t1"][-1] - float(walls1.sum()), 3),
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in load1],
        "figures": ["bench_scan.png"],
    }
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    ax = axes[0]
    ax.bar(
        ["1 worker", f"{a.workers} workers", "ideal"], [t1, tn, t1 / a.workers], color=["#5f7ea8", "#44a06a", "#bbb"]
    )
    ax.set_ylabel("scan wall time [s]")
    ax.set_title(f"{a.points} push points of {a.seconds:g} s: efficiency {eff:.2f} (target 0.8)")
    ax.grid(axis="y", alpha=0.3)
    ax = axes[1]
    idx = np.arange(a.points)
    inside_fixed = walls1 - outside1 - sim1
    ax.bar(idx, sim1, label="simulation", color="#5f7ea8")
    ax.bar(idx, inside_fixed, bottom=sim1, label="imports, model, trace, figure", color="#9bb7d4")
    ax.bar(idx, outside1, bottom=sim1 + inside_fixed, label="process start, result", color="#f39a2e")
    ax.axhline(
        summary["empty_point_s"], color="k", ls="--", lw=1, label=f"empty point {summary['empty_point_s']:.2f} s"
    )
    ax.set_xlabel("point (1 worker)")
    ax.set_ylabel("wall time [s]")
    ax.set_title(f"fixed cost per point {summary['fixed_cost_per_point_s']:.2f} s (all but the simulation)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(a.out / "bench_scan.png", dpi=100)
    plt.close(fig)
    print(json.dumps(summary, indent=1))
    verdict = "PASS" if eff >= 0.8 else "FAIL"
    print(f"parallel efficiency {eff:.2f} ({verdict}, target 0.8); fixed cost per point", end=" ")
    print(f"{summary['fixed_cost_per_point_s']:.2f} s; load average {load0[0]:.1f} -> {load1[0]:.1f}; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
