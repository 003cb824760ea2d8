"""The built-in scan kinds: ``walk_stability``, ``push_recovery`` and ``probe``.

Each is a point function (run in a child process: ``point(params, out_dir, model) -> dict``) and
one :class:`~lab.scans.kinds.ScanKind` constant; :func:`builtin_kinds` lists them, and
:mod:`lab.scans.registry` builds the name -> kind table from that list. Importing this module
registers nothing. A point falls by the robot's one rule, :meth:`lab.robots.model.Robot.has_fallen`.
"""

import csv
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from lab.scans.kinds import Metric, Param, ScanKind, write_json

# ---------------------------------------------------------------- walk_stability


def walk_point(params: dict, out_dir: Path, model: str | None = None) -> dict:
    """One closed-loop walk (``lab.walking.run.run_walk``); it writes summary.json, walk_trace.csv, walk_curves.png."""
    from lab.walking.run import run_walk

    robot = None
    if model:
        from lab.robots.model import load_robot

        robot = load_robot(model)
    summary = run_walk(
        step_len=float(params["step_len"]),
        step_height=float(params["step_height"]),
        steps=int(params["steps"]),
        seed=int(params["seed"]),
        out_dir=out_dir,
        robot=robot,
    )
    return {k: v for k, v in summary.items() if isinstance(v, (int, float, bool, str)) or v is None}


def summarize_walk(points: list[dict]) -> dict:
    done = [p for p in points if p.get("status") == "done"]
    stable = [p for p in done if p.get("metrics", {}).get("stable")]
    out = {
        "points_done": len(done),
        "stable": len(stable),
        "stable_fraction": (len(stable) / len(done)) if done else None,
    }
    pitches = [p["metrics"]["pitch_max_deg"] for p in done if _finite(p.get("metrics", {}).get("pitch_max_deg"))]
    if pitches:
        out["pitch_max_deg_range"] = [min(pitches), max(pitches)]
    return out


WALK_STABILITY = ScanKind(
    name="walk_stability",
    title="Walk stability: step length x step height",
    description="The closed-loop walk of 03_walk.py at each step length and step height; a point is stable "
    "when the robot never falls by its one rule (pelvis above its fall height, pitch and roll within 45 deg).",
    params=(
        Param("step_len", 0.04, 0.0, 0.15, "m", description="forward step length"),
        Param("step_height", 0.035, 0.0, 0.10, "m", description="swing foot lift"),
        Param("steps", 6, 1, 40, "", integer=True, description="number of steps"),
        Param("seed", 0, 0, 2**31 - 1, "", integer=True, description="random seed"),
    ),
    point=walk_point,
    metrics=(
        Metric("pitch_max_deg", "peak pitch", "deg"),
        Metric("z_min", "lowest pelvis", "m"),
        Metric("stable", "stable"),
        Metric("fell", "fell"),
    ),
    heat_metric="pitch_max_deg",
    pass_key="stable",
    summarize=summarize_walk,
    timeout_s=600.0,
    requires="lab.walking.run",
    artifacts=("walk_curves.png", "summary.json", "walk_trace.csv"),
    example={"step_len": "0.02, 0.04", "step_height": "0.02, 0.04", "steps": "6"},
)


# ---------------------------------------------------------------- push_recovery

PUSH_FIRST_S = 0.5  # [s] of quiet standing before the push


def push_point(params: dict, out_dir: Path, model: str | None = None) -> dict:
    """Stand, push the torso once with ``force_n`` [N] for ``duration_s`` [s], watch for ``seconds`` [s]."""
    import numpy as np

    from lab.control.modes import PushParams, get_mode
    from lab.control.pd import PDGains
    from lab.control.rollout import Rollout, simulate
    from lab.robots.model import FALL_TILT_DEG, load_robot
    from lab.sim.mujoco_engine import MujocoEngine

    out_dir = Path(out_dir)
    robot = load_robot(model)
    force, duration, seconds = float(params["force_n"]), float(params["duration_s"]), float(params["seconds"])
    push = PushParams(force_n=force, duration_s=duration, period_s=60.0, first_s=PUSH_FIRST_S).validated()
    rollout = Rollout(MujocoEngine(robot), PDGains.for_robot(robot), get_mode("push", robot, push=push))
    t_sim = time.perf_counter()
    samples = simulate(rollout, seconds, sample_dt=0.01)
    sim_wall = time.perf_counter() - t_sim
    t = np.array([m.sim_time for m in samples])
    z = np.array([m.pelvis_z for m in samples])
    pitch = np.array([m.pitch_deg for m in samples])
    roll = np.array([m.roll_deg for m in samples])
    x = np.array([m.forward_x for m in samples])
    fall_time = first_fall_time(robot, samples)
    fell = fall_time is not None
    after = t >= PUSH_FIRST_S
    summary = {
        "force_n": force,
        "duration_s": duration,
        "impulse_ns": force * duration,
        "seconds": seconds,
        "recovered": not fell,
        "fell": fell,
        "fall_time": fall_time,  # [s] sim time of the first sample the robot's fall rule calls fallen, or None
        "t_fall_s": fall_time,  # the same, under the name results.csv has always used
        "pitch_max_deg": float(np.max(np.abs(pitch))),
        "roll_max_deg": float(np.max(np.abs(roll))),
        "pitch_peak_after_push_deg": float(np.max(np.abs(pitch[after]))) if after.any() else 0.0,
        "z_min": float(z.min()),
        "z_final": float(z[-1]),
        "forward_max_m": float(np.max(np.abs(x))),
        "fall_z_m": robot.fall_height,
        "fall_tilt_deg": FALL_TILT_DEG,
        "model_identity": robot.identity,
        "sim_wall_s": round(sim_wall, 4),  # wall time of the simulation alone [s]
    }
    write_json(out_dir / "summary.json", summary)
    with open(out_dir / "push_trace.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sim_time", "pelvis_z", "forward_x", "pitch_deg", "roll_deg", "push", "support"])
        for m in samples:
            w.writerow(
                [
                    f"{m.sim_time:.3f}",
                    f"{m.pelvis_z:.5f}",
                    f"{m.forward_x:.5f}",
                    f"{m.pitch_deg:.3f}",
                    f"{m.roll_deg:.3f}",
                    int(m.push),
                    m.support,
                ]
            )
    _push_figure(out_dir / "push_curves.png", t, z, pitch, roll, x, summary)
    return summary


def first_fall_time(robot, samples) -> float | None:
    """Sim time [s] of the first Metrics sample for which ``robot.has_fallen`` holds (pelvis, pitch, roll), or None."""
    for m in samples:
        if robot.has_fallen(m.pelvis_z, m.pitch_deg, m.roll_deg):
            return round(float(m.sim_time), 6)
    return None


def _push_figure(path: Path, t, z, pitch, roll, x, s: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(6.4, 5.2), sharex=True, constrained_layout=True)
    verdict = "FELL" if s["fell"] else "RECOVERED"
    fig.suptitle(
        f"push {s['force_n']:g} N for {s['duration_s']:g} s: {verdict}", color="#b00020" if s["fell"] else "#1b7f3b"
    )
    for ax, ys, label, limit in (
        (axes[0], [("pelvis", z)], "pelvis z [m]", s["fall_z_m"]),
        (axes[1], [("pitch", pitch), ("roll", roll)], "tilt [deg]", s["fall_tilt_deg"]),
        (axes[2], [("forward", x)], "forward x [m]", None),
    ):
        ax.axvspan(PUSH_FIRST_S, PUSH_FIRST_S + s["duration_s"], color="#f4b400", alpha=0.3, label="push")
        for (name, y), colour in zip(ys, ("#1f77b4", "#9467bd")):
            ax.plot(t, y, color=colour, label=name if len(ys) > 1 else None)
        if limit is not None:
            ax.axhline(limit, color="#b00020", ls="--", lw=1, label="fall limit")
            if label.startswith("tilt"):
                ax.axhline(-limit, color="#b00020", ls="--", lw=1)
                ax.legend(loc="lower left", fontsize=8)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if s["fall_time"] is not None:
        for ax in axes:
            ax.axvline(s["fall_time"], color="#b00020", lw=1)
    axes[0].legend(loc="lower left", fontsize=8)
    axes[-1].set_xlabel("time [s]")
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def push_thresholds(points: list[dict]) -> list[dict]:
    """Per push duration: the largest force recovered from, the smallest that fell, and the threshold between.

    ``threshold_n`` is the midpoint of the first recovered -> fell transition in force order
    (None while either side is missing); ``monotonic`` says whether every recovery lies below every fall.
    """
    by_dur: dict[float, list] = {}
    for p in points:
        m = p.get("metrics") or {}
        if p.get("status") != "done" or "recovered" not in m:
            continue
        by_dur.setdefault(float(p["params"]["duration_s"]), []).append(
            (float(p["params"]["force_n"]), bool(m["recovered"]))
        )
    out = []
    for d in sorted(by_dur):
        rows = sorted(by_dur[d])
        rec = [f for f, ok in rows if ok]
        fell = [f for f, ok in rows if not ok]
        first_fall = fell[0] if fell else None
        below = [f for f in rec if first_fall is None or f < first_fall]
        threshold = (below[-1] + first_fall) / 2 if (below and first_fall is not None) else None
        out.append(
            {
                "duration_s": d,
                "max_recovered_n": max(rec) if rec else None,
                "min_fell_n": first_fall,
                "threshold_n": threshold,
                "threshold_impulse_ns": threshold * d if threshold is not None else None,
                "monotonic": not rec or not fell or max(rec) < min(fell),
                "points": len(rows),
            }
        )
    return out


def summarize_push(points: list[dict]) -> dict:
    done = [p for p in points if p.get("status") == "done"]
    rec = [p for p in done if (p.get("metrics") or {}).get("recovered")]
    return {"points_done": len(done), "recovered": len(rec), "thresholds": push_thresholds(points)}


PUSH_RECOVERY = ScanKind(
    name="push_recovery",
    title="Push recovery: push force x push duration",
    description=f"Stand, then one horizontal push on the torso at t = {PUSH_FIRST_S:g} s; a point records "
    "whether the robot recovered or fell and its peak pitch; the scan reports the threshold force per duration.",
    params=(
        Param("duration_s", 0.1, 0.01, 1.0, "s", description="push duration"),
        Param("force_n", 40.0, 0.0, 200.0, "N", description="push force along +x"),
        Param("seconds", 3.0, 1.0, 20.0, "s", description="simulated time per point"),
    ),
    point=push_point,
    metrics=(
        Metric("pitch_max_deg", "peak pitch", "deg"),
        Metric("z_min", "lowest pelvis", "m"),
        Metric("recovered", "recovered"),
        Metric("fall_time", "time of fall", "s"),
        Metric("forward_max_m", "largest forward travel", "m"),
    ),
    heat_metric="pitch_max_deg",
    pass_key="recovered",
    summarize=summarize_push,
    timeout_s=300.0,
    artifacts=("push_curves.png", "summary.json", "push_trace.csv"),
    example={"duration_s": "0.05:0.2:0.05", "force_n": "20:100:20"},
)


# ---------------------------------------------------------------- probe (the machinery's own check)


def probe_point(params: dict, out_dir: Path, model: str | None = None) -> dict:
    """Burn CPU for ``work_s``, sleep ``sleep_s`` (with one sleeping child process), then exit as ``fail`` says.

    ``fail``: 0 returns normally, 1 raises an exception, 2 ends the process with exit status 3.
    The pids of this process, its child and its guard go to ``pids.json`` first, so a test can check they die.
    """
    out_dir = Path(out_dir)
    child = None
    if params["sleep_s"] > 0:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    write_json(
        out_dir / "pids.json",
        {"point": os.getpid(), "child": child.pid if child else None, "guard": os.environ.get("LAB_POINT_GUARD")},
    )
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < params["work_s"]:
        n += sum(i * i for i in range(1000))
    time.sleep(params["sleep_s"])
    if child is not None:
        child.kill()
        child.wait()
    print(f"probe point: worked {params['work_s']:g} s, slept {params['sleep_s']:g} s", flush=True)
    if params["fail"] == 1:
        raise RuntimeError(f"probe point asked to fail (fail=1, work_s={params['work_s']:g})")
    if params["fail"] == 2:
        print("probe point exits with status 3", file=sys.stderr, flush=True)
        os._exit(3)
    summary = {
        "work_s": params["work_s"],
        "sleep_s": params["sleep_s"],
        "value": params["work_s"] + params["sleep_s"],
        "ok": True,
    }
    write_json(out_dir / "summary.json", summary)
    return summary


PROBE = ScanKind(
    name="probe",
    title="Probe: the scan machinery's own check",
    description="Each point burns CPU for work_s, sleeps sleep_s, and crashes when fail is 1 (exception) or 2 "
    "(exit status 3). Measures the fixed cost of a point and exercises error, timeout and cancel paths.",
    params=(
        Param("work_s", 0.0, 0.0, 600.0, "s", description="CPU-bound work"),
        Param("sleep_s", 0.0, 0.0, 3600.0, "s", description="idle wait (with one child process)"),
        Param("fail", 0, 0, 2, "", integer=True, description="0 ok, 1 raise, 2 exit status 3"),
    ),
    point=probe_point,
    metrics=(Metric("value", "work + sleep", "s"), Metric("ok", "ok")),
    heat_metric="value",
    pass_key="ok",
    timeout_s=3600.0,
    hidden=True,
    artifacts=("summary.json",),
    example={"work_s": "0.5", "fail": "0, 1"},
)


def builtin_kinds() -> tuple[ScanKind, ...]:
    """The built-in kinds, in the order the page offers them."""
    return (WALK_STABILITY, PUSH_RECOVERY, PROBE)
