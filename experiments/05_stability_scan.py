"""Stability scan of the closed-loop walk: step length x step height.

Every grid point is a separate walk in its own process with a timeout, through the same scan engine
the Lab's /scans page uses (``lab.scans``: kind ``walk_stability``, local process pool or Ray):
``--controller feedback`` (default) the DCM feedback walker (``lab.walking.feedback_run``) at
vx = step length / its 0.45 s step period, ``--controller pd`` the joint-PD closed loop of 03_walk
(``lab.walking.run.run_walk``). Writes under ``--out``:

- ``stability_scan.csv`` / ``stability_scan.json``: one row per point (parameters, metrics, wall time);
- ``heatmap_pitch.png``: peak pitch per cell with PASS/FAIL (stable = pelvis >= 0.35 m and
  pitch <= 45 deg, scaled to the robot), beside the lowest pelvis height;
- ``metrics_bars.png``: peak pitch and roll, lowest pelvis, time of fall, and planned vs actual travel
  (pd) or commanded vs measured speed (feedback);
- ``trajectories.png``: pelvis height, pitch and roll over time of representative points;
- ``summary.json``: every number above, the scan id and where each point's own files are.

    python experiments/05_stability_scan.py --step-lens 0.02,0.04 --step-heights 0.02,0.04
    python experiments/05_stability_scan.py --controller pd            # the joint-PD baseline
    python experiments/05_stability_scan.py --executor ray            # local Ray instance
    python experiments/05_stability_scan.py --executor ray --ray-address auto
"""

import argparse
import csv
import json
import shutil
import sys
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


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def read_trace(path: Path) -> dict:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    cols = ("t_s", "pelvis_z_m", "pitch_deg", "roll_deg", "pelvis_x_m", "com_plan_x_m")
    return {c: np.array([float(r[c]) for r in rows]) for c in cols if rows and c in rows[0]}


def heatmap(ax, values, xs, ys, title, unit, points, cmap):
    img = ax.imshow(values, origin="lower", cmap=cmap, aspect="auto")
    plt.colorbar(img, ax=ax, label=unit, fraction=0.046)
    ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs])
    ax.set_yticks(range(len(ys)), [f"{y:g}" for y in ys])
    ax.set_xlabel("step length [m]")
    ax.set_ylabel("step height [m]")
    ax.set_title(title)
    for p in points:
        xi, yi = xs.index(p["params"]["step_len"]), ys.index(p["params"]["step_height"])
        m = p["metrics"]
        if p["status"] != "done":
            label, colour = "ERROR", "#b00020"
        else:
            ok = bool(m.get("stable"))
            label, colour = "PASS" if ok else "FAIL", "#1b7f3b" if ok else "#b00020"
        v = values[yi, xi]
        text = f"{v:.3g}\n{label}" if np.isfinite(v) else label
        ax.text(
            xi,
            yi,
            text,
            ha="center",
            va="center",
            fontsize=10,
            fontweight="bold",
            color="white",
            bbox={"boxstyle": "round", "fc": colour, "alpha": 0.85},
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--step-lens", type=floats, default=floats("0.02,0.04"), help="step lengths [m], comma separated")
    ap.add_argument(
        "--step-heights", type=floats, default=floats("0.02,0.04"), help="step heights [m], comma separated"
    )
    ap.add_argument("--steps", type=int, default=6, help="steps per walk (default 6)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--controller",
        choices=["feedback", "pd"],
        default="feedback",
        help="feedback walker (default) or joint-PD walk",
    )
    ap.add_argument("--executor", choices=["local", "ray"], default="local")
    ap.add_argument("--ray-address", default=None, help="join this Ray cluster (default: a local Ray instance)")
    ap.add_argument("--workers", type=int, default=None, help="points at a time (default: one per core)")
    ap.add_argument("--timeout", type=float, default=600.0, help="per point [s]")
    ap.add_argument("--model", default=None, help="robot file (default: the built-in Q1)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "05_stability_scan")
    a = ap.parse_args(argv)
    out = a.out
    out.mkdir(parents=True, exist_ok=True)

    spec = {
        "kind": "walk_stability",
        "grid": {
            "step_len": a.step_lens,
            "step_height": a.step_heights,
            "steps": [a.steps],
            "seed": [a.seed],
            "controller": [a.controller],
        },
        "executor": a.executor,
        "workers": a.workers,
        "timeout_s": a.timeout,
    }
    if a.ray_address:
        spec["address"] = a.ray_address
    manager = ScanManager(out, model=a.model)
    t0 = time.perf_counter()
    scan = manager.create(spec)
    print(
        f"scan {scan['id']}: {scan['total']} points on {a.executor}, results in {out / 'scans' / scan['id']}",
        flush=True,
    )
    last = -1
    while True:
        scan = manager.wait(scan["id"], timeout=2.0)
        if scan["done"] != last:
            last = scan["done"]
            eta = f", ETA {scan['eta_s']:.0f} s" if scan.get("eta_s") is not None else ""
            print(f"  {scan['done']}/{scan['total']} points finished{eta}", flush=True)
        if scan["status"] not in ("queued", "running"):
            break
    wall = time.perf_counter() - t0
    manager.shutdown()
    sid = scan["id"]
    scan_dir = out / "scans" / sid
    shutil.copyfile(scan_dir / "results.csv", out / "stability_scan.csv")
    shutil.copyfile(scan_dir / "results.json", out / "stability_scan.json")

    xs, ys = sorted(a.step_lens), sorted(a.step_heights)
    points = scan["points"]
    pitch = np.full((len(ys), len(xs)), np.nan)
    zmin = np.full((len(ys), len(xs)), np.nan)
    for p in points:
        if p["status"] == "done":
            xi, yi = xs.index(p["params"]["step_len"]), ys.index(p["params"]["step_height"])
            pitch[yi, xi] = p["metrics"].get("pitch_max_deg", np.nan)
            zmin[yi, xi] = p["metrics"].get("z_min", np.nan)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), constrained_layout=True)
    heatmap(axes[0], pitch, xs, ys, "peak pitch [deg] (PASS = stable)", "deg", points, "YlOrRd")
    heatmap(axes[1], zmin, xs, ys, "lowest pelvis height [m]", "m", points, "viridis")
    who = "feedback walker (DCM)" if a.controller == "feedback" else "joint-PD closed loop"
    fig.suptitle(f"walk stability, {a.steps} steps, Q1 {who} ({sid})")
    fig.savefig(out / "heatmap_pitch.png", dpi=100)
    plt.close(fig)

    done = [p for p in points if p["status"] == "done"]
    labels = [f"{p['params']['step_len']:g}/{p['params']['step_height']:g}" for p in done]
    bars = [
        ("pitch_max_deg", "peak pitch [deg]"),
        ("roll_max_deg", "peak roll [deg]"),
        ("z_min", "lowest pelvis [m]"),
        ("fall_time_s", "time of fall [s]"),
    ]
    fig, axes = plt.subplots(1, 5, figsize=(17, 3.8), constrained_layout=True)
    colours = ["#1b7f3b" if p["metrics"].get("stable") else "#b00020" for p in done]
    for ax, (key, title) in zip(axes, bars):
        vals = [p["metrics"].get(key) for p in done]
        bar = [np.nan if v is None else v for v in vals]
        no_fall = key == "fall_time_s"  # a point that never fell has no time of fall: a labelled empty bar
        ax.bar(labels, [0.0 if no_fall and np.isnan(y) else y for y in bar], color=colours)
        if no_fall:
            for i, y in enumerate(bar):
                if np.isnan(y):
                    ax.text(i, 0, "no fall", ha="center", va="bottom", fontsize=8, rotation=90, color="#1b7f3b")
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=45)
        ax.grid(axis="y", alpha=0.3)
    axes[0].axhline(45, color="k", ls="--", lw=1)
    if done:
        axes[2].axhline(done[0]["metrics"].get("pelvis_limit_m", 0.35), color="k", ls="--", lw=1)
    x = np.arange(len(done))
    planned, actual, title = ("forward_planned_m", "forward_actual_m", "forward travel [m]")
    if a.controller == "feedback":
        planned, actual, title = ("vx_cmd_mps", "mean_speed_mps", "forward speed [m/s]")

    def values(key):
        return [np.nan if p["metrics"].get(key) is None else p["metrics"][key] for p in done]

    axes[4].bar(
        x - 0.2, values(planned), 0.4, label="commanded" if a.controller == "feedback" else "planned", color="#888"
    )
    axes[4].bar(
        x + 0.2, values(actual), 0.4, label="measured" if a.controller == "feedback" else "actual", color=colours
    )
    axes[4].set_xticks(x, labels, rotation=45)
    axes[4].set_title(title)
    axes[4].legend(fontsize=8)
    fig.supxlabel("step length / step height [m]  (green: stable, red: fell)")
    fig.savefig(out / "metrics_bars.png", dpi=100)
    plt.close(fig)

    ranked = sorted(done, key=lambda p: p["metrics"].get("pitch_max_deg", 0.0))
    shown = ranked if len(ranked) <= 6 else [ranked[0], ranked[len(ranked) // 2], ranked[-1]]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True, constrained_layout=True)
    for p in shown:
        tr = read_trace(scan_dir / "points" / f"{p['index']:05d}" / "walk_trace.csv")
        if "t_s" not in tr:
            continue
        lab = f"{p['params']['step_len']:g} m / {p['params']['step_height']:g} m" + (
            "" if p["metrics"].get("stable") else " (fell)"
        )
        (line,) = axes[0].plot(tr["t_s"], tr["pelvis_z_m"], label=lab)
        axes[1].plot(tr["t_s"], tr["pitch_deg"], color=line.get_color())
        axes[2].plot(tr["t_s"], tr["roll_deg"], color=line.get_color())
    if done:
        axes[0].axhline(done[0]["metrics"].get("pelvis_limit_m", 0.35), color="k", ls="--", lw=1, label="fall limit")
    for ax, lab in zip(axes, ("pelvis z [m]", "pitch [deg]", "roll [deg]")):
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    axes[1].axhline(45, color="k", ls="--", lw=1)
    axes[1].axhline(-45, color="k", ls="--", lw=1)
    axes[0].legend(fontsize=8, ncol=2)
    axes[-1].set_xlabel("time [s]")
    fig.suptitle("representative trajectories (best to worst peak pitch)")
    fig.savefig(out / "trajectories.png", dpi=100)
    plt.close(fig)

    walls = [p["wall_s"] for p in points if p["wall_s"] is not None]
    summary = {
        "script": "05_stability_scan.py",
        "scan_id": sid,
        "scan_dir": str(scan_dir),
        "status": scan["status"],
        "executor": a.executor,
        "workers": scan["workers"],
        "seed": a.seed,
        "controller": a.controller,
        "steps": a.steps,
        "step_lens_m": xs,
        "step_heights_m": ys,
        "points": len(points),
        "points_done": len(done),
        "points_error": scan["counts"]["error"],
        "stable": sum(bool(p["metrics"].get("stable")) for p in done),
        "fell": sum(bool(p["metrics"].get("fell")) for p in done),
        "pitch_max_deg": {"min": float(np.nanmin(pitch)), "max": float(np.nanmax(pitch))} if done else None,
        "z_min_m": {"min": float(np.nanmin(zmin)), "max": float(np.nanmax(zmin))} if done else None,
        "wall_s": round(wall, 2),
        "point_wall_s": {"mean": float(np.mean(walls)), "max": float(np.max(walls))} if walls else None,
        "csv": "stability_scan.csv",
        "json": "stability_scan.json",
        "figures": ["heatmap_pitch.png", "metrics_bars.png", "trajectories.png"],
        "per_point": [
            {
                "step_len": p["params"]["step_len"],
                "step_height": p["params"]["step_height"],
                "status": p["status"],
                "error": p["error"],
                **{
                    k: p["metrics"].get(k)
                    for k in (
                        "pitch_max_deg",
                        "roll_max_deg",
                        "z_min",
                        "fell",
                        "fall_time_s",
                        "stable",
                        "forward_actual_m",
                        "steps_completed",
                        "mean_speed_mps",
                    )
                },
            }
            for p in points
        ],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(
        f"{summary['points_done']}/{summary['points']} points done, {summary['stable']} stable, {summary['fell']} fell, {summary['points_error']} errors, {wall:.1f} s"
    )
    for r in summary["per_point"]:
        verdict = "ERROR" if r["status"] != "done" else ("PASS" if r["stable"] else "FAIL")
        print(
            f"  step_len {r['step_len']:.3f} m, step_height {r['step_height']:.3f} m: peak pitch {r['pitch_max_deg']}, z_min {r['z_min']}, {verdict}"
        )
    print(f"wrote {out}")
    return 0 if scan["status"] == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
