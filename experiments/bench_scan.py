"""Benchmark of the scan engine: warm workers against the cold path (a fresh process per point), side by side.

The same push_recovery grid (``--points`` points of ``--seconds`` simulated seconds, about 0.2 s of
simulation wall time each, all recovering so each simulates the whole time) runs through
:class:`lab.scans.manager.ScanManager` on ``--workers`` workers, the old way (``LAB_SCANS_WARM=0``:
a new Python process per point that imports MuJoCo, loads the model and, as it did, draws its figure)
and on the warm pool, interleaved ``--repeats`` times; the fastest run of each counts. The pool is
warmed once before (a Lab keeps its workers); its first run with the start of the workers is
recorded too.

- ``fixed_cost_s_per_point``: what a point costs besides its simulation, from the scan's wall time:
  ``T x workers / points - mean simulation wall time`` (dispatch, result, files; target <= 0.25 s);
- ``speedup_vs_cold``: points/s warm over points/s cold (target >= 4);
- ``cancel_latency_s``: how long a cancel of two running points takes to return (their workers killed);
- with ``--ray ADDRESS``: the same grid on a Ray cluster's actors, and the cancel latency there.

Writes ``summary.json``, ``points.csv`` and ``bench_scan.png`` under ``--out``. The machine may be
shared: the load average before and after is recorded beside the figures.

    python experiments/bench_scan.py --out /tmp/bench_scan          # 12 points of 4 s, 2 workers, twice
    python experiments/bench_scan.py --ray 127.0.0.1:6390           # also on a running Ray cluster
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
from tests.conftest import wait_until  # noqa: E402

FIXED_TARGET_S = 0.25
SPEEDUP_TARGET = 4.0


def run(manager: ScanManager, spec: dict, warm: bool) -> tuple[float, dict]:
    """One scan, the cold or the warm way; (its wall time [s], its description)."""
    os.environ["LAB_SCANS_WARM"] = "1" if warm else "0"
    try:
        t0 = time.perf_counter()
        s = manager.wait(manager.create(spec)["id"])
        wall = time.perf_counter() - t0
    finally:
        os.environ.pop("LAB_SCANS_WARM", None)
    if s["status"] != "done" or s["counts"]["error"]:
        errors = [p["error"] for p in s["points"] if p["error"]]
        raise SystemExit(f"scan {s['id']} ended {s['status']} with {s['counts']['error']} errors: {errors}")
    return wall, s


def cold_with_figures(manager: ScanManager, spec: dict) -> tuple[float, dict]:
    """The cold path as it landed: each point also drew its figure (now drawn when first asked for)."""
    t, s = run(manager, spec, warm=False)
    t_fig = time.perf_counter()
    for p in s["points"]:
        manager.open_point_file(s["id"], p["index"], "push_curves.png")[0].close()
    return t + (time.perf_counter() - t_fig) / spec["workers"], s  # the figures drawn on every worker at once


def cancel_latency(manager: ScanManager, extra: dict) -> float:
    """Seconds a cancel of two running probe points takes to return (both recorded cancelled)."""
    s = manager.create({"kind": "probe", "grid": {"sleep_s": [60, 61]}, "workers": 2, **extra})
    wait_until(lambda: manager.get(s["id"], points=False)["counts"]["running"] == 2, 120)
    time.sleep(0.5)  # both points inside their sleep
    t0 = time.perf_counter()
    c = manager.cancel(s["id"])
    dt = time.perf_counter() - t0
    assert c["status"] == "cancelled", c["status"]
    return dt


def fixed_cost(t: float, s: dict, workers: int) -> float:
    sim = np.mean([p["metrics"]["sim_wall_s"] for p in s["points"]])
    return float(t * workers / len(s["points"]) - sim)


def measure(a, tmp: str) -> dict:
    forces = list(np.linspace(10.0, 30.0, a.points).round(3))
    spec = {
        "kind": "push_recovery",
        "grid": {"force_n": forces, "duration_s": [0.1], "seconds": [a.seconds]},
        "workers": a.workers,
    }
    out = {"cold": [], "warm": []}
    manager = ScanManager(tmp, max_running=1)
    try:
        out["warm_first"] = run(manager, spec, warm=True)  # starts the pool's workers
        for _ in range(a.repeats):  # interleaved, so a change in the machine's load hits both alike
            out["cold"].append(cold_with_figures(manager, spec))
            out["warm"].append(run(manager, spec, warm=True))
        out["cancel_latency_s"] = cancel_latency(manager, {})
        if a.ray:
            out["ray"] = run(manager, {**spec, "executor": "ray", "address": a.ray}, warm=True)
            out["ray_cancel_latency_s"] = cancel_latency(manager, {"executor": "ray", "address": a.ray})
    finally:
        manager.shutdown()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=12, help="points per scan (default 12)")
    ap.add_argument("--seconds", type=float, default=4.0, help="simulated seconds per point (default 4: ~0.2 s wall)")
    ap.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved cold / warm runs (default 2)")
    ap.add_argument("--ray", default=None, metavar="ADDRESS", help="also run on the Ray cluster at ADDRESS")
    ap.add_argument("--seed", type=int, default=0, help="recorded; these points are deterministic")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_scan")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        r = measure(a, tmp)
    load1 = os.getloadavg()
    t_cold, s_cold = min(r["cold"], key=lambda x: x[0])
    t_warm, s_warm = min(r["warm"], key=lambda x: x[0])
    fixed_warm, fixed_cold = fixed_cost(t_warm, s_warm, a.workers), fixed_cost(t_cold, s_cold, a.workers)
    speedup = t_cold / t_warm
    sim = float(np.mean([p["metrics"]["sim_wall_s"] for p in s_warm["points"]]))
    summary = {
        "script": "bench_scan.py",
        "points": a.points,
        "seconds_per_point": a.seconds,
        "sim_wall_s_per_point": round(sim, 4),
        "workers": a.workers,
        "cores": os.cpu_count(),
        "repeats": a.repeats,
        "seed": a.seed,
        "t_cold_s": round(t_cold, 3),
        "t_warm_s": round(t_warm, 3),
        "t_cold_runs_s": [round(t, 3) for t, _ in r["cold"]],
        "t_warm_runs_s": [round(t, 3) for t, _ in r["warm"]],
        "t_warm_first_run_s": round(r["warm_first"][0], 3),
        "points_per_s_cold": round(a.points / t_cold, 3),
        "points_per_s_warm": round(a.points / t_warm, 3),
        "speedup_vs_cold": round(speedup, 3),
        "fixed_cost_s_per_point": round(fixed_warm, 4),
        "fixed_cost_s_per_point_cold": round(fixed_cold, 4),
        "point_wall_s_warm": round(float(np.mean([p["wall_s"] for p in s_warm["points"]])), 4),
        "point_wall_s_cold": round(float(np.mean([p["wall_s"] for p in s_cold["points"]])), 4),
        "cancel_latency_s": round(r["cancel_latency_s"], 3),
        "targets": {"fixed_cost_s_per_point": FIXED_TARGET_S, "speedup_vs_cold": SPEEDUP_TARGET},
        "pass": bool(fixed_warm <= FIXED_TARGET_S and speedup >= SPEEDUP_TARGET),
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in load1],
        "figures": ["bench_scan.png"],
    }
    if a.ray:
        t_ray, s_ray = r["ray"]
        summary.update(
            ray_address=a.ray,
            t_ray_s=round(t_ray, 3),
            points_per_s_ray=round(a.points / t_ray, 3),
            fixed_cost_s_per_point_ray=round(fixed_cost(t_ray, s_ray, a.workers), 4),
            ray_cancel_latency_s=round(r["ray_cancel_latency_s"], 3),
        )
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    with open(a.out / "points.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "index", "wall_s", "compute_s", "sim_wall_s"])
        for name, (_, s) in (("cold", (t_cold, s_cold)), ("warm", (t_warm, s_warm))):
            for p in s["points"]:
                w.writerow([name, p["index"], p["wall_s"], p["compute_s"], p["metrics"]["sim_wall_s"]])

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    ax = axes[0]
    ax.bar(
        ["cold (process per point)", "warm workers"], [a.points / t_cold, a.points / t_warm], color=["#999", "#44a06a"]
    )
    ax.set_ylabel("points / s")
    ax.set_title(f"{a.points} push points of ~{sim:.2f} s on {a.workers} workers: x{speedup:.1f} (target x4)")
    ax.grid(axis="y", alpha=0.3)
    ax = axes[1]
    ax.bar(["cold", "warm"], [sim, sim], color="#5f7ea8", label="simulation")
    ax.bar(["cold", "warm"], [fixed_cold, fixed_warm], bottom=[sim, sim], color="#f39a2e", label="fixed cost")
    ax.axhline(sim + FIXED_TARGET_S, color="k", ls="--", lw=1, label=f"target: fixed <= {FIXED_TARGET_S} s")
    ax.set_ylabel("scan wall time x workers / points [s]")
    ax.set_title(f"fixed cost per point: {fixed_cold:.2f} s cold, {fixed_warm:.3f} s warm")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(a.out / "bench_scan.png", dpi=100)
    plt.close(fig)
    print(json.dumps(summary, indent=1))
    verdict = "PASS" if summary["pass"] else "FAIL"
    print(
        f"{verdict}: x{speedup:.2f} points/s, fixed cost {fixed_warm:.3f} s/point (cold {fixed_cold:.2f} s);", end=" "
    )
    print(f"cancel {summary['cancel_latency_s']:.2f} s; load {load0[0]:.1f} -> {load1[0]:.1f}; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
