"""07 — push recovery by bisection: the feedback walker against the joint-PD baselines.

Runs two ``push_threshold`` scans through the scan engine the /scans page uses (``lab.scans``; each trial
is an independent simulation, a 0.1 s push on the torso, bisected to ``--tolerance`` N):

1. **situations x directions**: stand_feedback (ankle/CoM feedback only), stand_step (a capture step
   allowed), walk (walking at 0.15 m/s, pushed after 3 s of walking), pd_stand and pd_walk (the baselines)
   x forward, backward, left, right;
2. **the gait phase of a push while walking**: walk x the four directions x ``--phases`` push times across
   one gait cycle (two steps, 0.9 s), since a push toward the stance foot early in single support is the
   hardest.

Writes ``DIR/summary.json`` (both tables: impulse [N s], delta-v [m/s], force [N]; per direction the
minimum and median over the phases), ``DIR/push_table.md`` and ``DIR/walk_phase.png``.

    python experiments/07_push_recovery.py --out results/07_push_recovery [--tolerance 2] [--phases 10]
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.scans.manager import ScanManager  # noqa: E402

SITUATIONS = ("stand_feedback", "stand_step", "walk", "pd_stand", "pd_walk")
DIRECTIONS = ("forward", "backward", "left", "right")
CYCLE_S = 0.9  # two steps of the feedback walker [s]


def run_scan(manager: ScanManager, grid: dict, label: str) -> list:
    scan = manager.create({"kind": "push_threshold", "grid": grid})
    print(f"{label}: scan {scan['id']}, {scan['total']} points", flush=True)
    last = -1
    while scan["status"] in ("queued", "running"):
        scan = manager.wait(scan["id"], timeout=2.0)
        if scan["done"] != last:
            last = scan["done"]
            print(f"  {scan['done']}/{scan['total']}", flush=True)
    if scan["status"] != "done":
        raise SystemExit(f"error: scan {scan['id']} ended {scan['status']}")
    return manager.get(scan["id"], points=True)["points"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/07_push_recovery")
    ap.add_argument("--tolerance", type=float, default=2.0, help="bisection bracket [N] (default 2)")
    ap.add_argument("--phases", type=int, default=10, help="push times across one gait cycle (0: skip)")
    a = ap.parse_args(argv)
    if not 0.1 <= a.tolerance <= 100:
        ap.error("--tolerance must be in [0.1, 100] N")
    if not 0 <= a.phases <= 40:
        ap.error("--phases must be in 0..40")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    manager = ScanManager(out)
    t0 = time.perf_counter()
    try:
        table = run_scan(
            manager,
            {"situation": list(SITUATIONS), "direction": list(DIRECTIONS), "tolerance_n": [a.tolerance]},
            "situations x directions",
        )
        phase = []
        if a.phases:
            times = [round(3.0 + CYCLE_S * i / a.phases, 3) for i in range(a.phases)]
            phase = run_scan(
                manager,
                {
                    "situation": ["walk"],
                    "direction": list(DIRECTIONS),
                    "walk_before_s": times,
                    "tolerance_n": [a.tolerance],
                },
                "walk x gait phase",
            )
    finally:
        manager.shutdown()
    cells = {}
    for p in table:
        m, prm = p.get("metrics") or {}, p["params"]
        cells[f"{prm['situation']}/{prm['direction']}"] = {
            "impulse_ns": m.get("impulse_ns"),
            "delta_v_mps": m.get("delta_v_mps"),
            "threshold_force_n": m.get("threshold_force_n"),
            "first_fall_force_n": m.get("first_fall_force_n"),
            "monotonic": m.get("monotonic"),
            "note": m.get("note"),
        }
    by_dir = {}
    for p in phase:
        m, prm = p.get("metrics") or {}, p["params"]
        by_dir.setdefault(prm["direction"], []).append((float(prm["walk_before_s"]), m.get("impulse_ns")))
    phase_summary = {
        d: {
            "push_after_walking_s": [t for t, _ in sorted(v)],
            "impulse_ns": [i for _, i in sorted(v)],
            "min_impulse_ns": min(i for _, i in v if i is not None),
            "median_impulse_ns": statistics.median(i for _, i in v if i is not None),
        }
        for d, v in by_dir.items()
    }
    summary = {
        "script": "07_push_recovery.py",
        "push_duration_s": 0.1,
        "tolerance_n": a.tolerance,
        "situations_x_directions": cells,
        "walk_phase": phase_summary,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = ["| situation | " + " | ".join(DIRECTIONS) + " |", "|---" * (len(DIRECTIONS) + 1) + "|"]
    for s in SITUATIONS:
        row = []
        for d in DIRECTIONS:
            c = cells.get(f"{s}/{d}", {})
            imp, dv = c.get("impulse_ns"), c.get("delta_v_mps")
            row.append("–" if imp is None else f"{imp:.2f} N·s / {dv:.2f} m/s")
        lines.append(f"| {s} | " + " | ".join(row) + " |")
    if phase_summary:
        lines += ["", "| walking, over the gait phase | " + " | ".join(DIRECTIONS) + " |", "|---" * 5 + "|"]
        lines.append(
            "| min / median impulse [N·s] | "
            + " | ".join(
                f"{phase_summary[d]['min_impulse_ns']:.2f} / {phase_summary[d]['median_impulse_ns']:.2f}"
                if d in phase_summary
                else "–"
                for d in DIRECTIONS
            )
            + " |"
        )
    (out / "push_table.md").write_text("\n".join(lines) + "\n")
    if phase_summary:
        plot_phase(out / "walk_phase.png", phase_summary)
    print("\n".join(lines))
    print(f"wrote {out / 'summary.json'} ({summary['wall_s']} s)")
    return 0


def plot_phase(path: Path, phase: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4), constrained_layout=True)
    for d, v in phase.items():
        ax.plot(v["push_after_walking_s"], v["impulse_ns"], "o-", label=d)
    ax.axhline(2.5, color="k", ls="--", lw=1, label="2.5 N·s")
    ax.set_xlabel("push after walking [s] (one gait cycle = two steps = 0.9 s)")
    ax.set_ylabel("threshold impulse [N·s] (0.1 s push)")
    ax.set_title("feedback walker at 0.15 m/s: push threshold over the gait phase")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
