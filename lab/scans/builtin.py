"""The built-in scan kinds: ``walk_stability``, ``push_recovery``, ``push_threshold`` and ``probe``.

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
from lab.scans.recording import RECORDING, PointRecording, point_label, recorded_run, wants_recording

# ---------------------------------------------------------------- walk_stability

CONTROLLERS = ("feedback", "pd")


def _robot(model: str | None):
    from lab.robots.model import load_robot

    return load_robot(model)


def _flat(summary: dict, drop=()) -> dict:
    return {k: v for k, v in summary.items() if k not in drop and (isinstance(v, (int, float, bool, str)) or v is None)}


def walk_point(params: dict, out_dir: Path, model: str | None = None) -> dict:
    """One walk; it writes summary.json, walk_trace.csv, walk_curves.png.

    ``controller`` "feedback": the DCM feedback walker (``lab.walking.feedback_run.run_feedback_walk``)
    commanded ``vx = step_len / FeedbackParams().period`` for ``steps`` steps, lifting ``step_height``;
    "pd": the joint-PD closed loop of 03_walk (``lab.walking.run.run_walk``). A point without the
    parameter (a scan made before it existed) is a "pd" point, as it was then. With the recording flag the same
    walk is stepped with the Lab's recorder attached (lab.scans.recording) and leaves recording.mcap."""
    robot = _robot(model) if model else None
    if not wants_recording(params):
        return _walk(params, robot, out_dir, None)
    with PointRecording(robot or _robot(model), out_dir, point_label(params)) as rec:
        return _walk(params, rec.robot, out_dir, rec.stepper)


def _walk(params: dict, robot, out_dir: Path, stepper) -> dict:
    """The walk of :func:`walk_point` on ``robot`` (None: the default one), stepped by ``stepper`` (None: its own)."""
    controller = params.get("controller", "pd")
    if controller == "pd":
        from lab.walking.run import run_walk

        summary = run_walk(
            step_len=float(params["step_len"]),
            step_height=float(params["step_height"]),
            steps=int(params["steps"]),
            seed=int(params["seed"]),
            out_dir=out_dir,
            robot=robot,
            stepper=stepper,
        )
        out = _flat(summary, drop=("controller",))
        out["steps_completed"] = summary.get("steps_before_fall")
        return out
    from lab.walking.dcm import FeedbackParams
    from lab.walking.feedback_run import run_feedback_walk

    prm = FeedbackParams(step_height=float(params["step_height"]))
    vx = float(params["step_len"]) / prm.period
    summary = run_feedback_walk(
        robot=robot,
        vx=vx,
        steps=int(params["steps"]),
        params=prm,
        seed=int(params["seed"]),
        out_dir=out_dir,
        stepper=stepper,
    )
    out = _flat(summary, drop=("controller",))
    out["vx_cmd_mps"] = round(vx, 6)  # before the walker's own bound (vx_max)
    out["roll_max_deg"] = summary.get("max_roll_deg")  # the name the pd summary uses
    return out


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
    controllers = sorted({p.get("params", {}).get("controller", "pd") for p in done})
    if len(controllers) > 1:
        for c in controllers:
            mine = [p for p in done if p.get("params", {}).get("controller", "pd") == c]
            out[f"stable_{c}"] = f"{sum(bool(p['metrics'].get('stable')) for p in mine)}/{len(mine)}"
    return out


WALK_STABILITY = ScanKind(
    name="walk_stability",
    title="Walk stability: step length x step height",
    description="A walk at each step length and step height; a point is stable when the robot never falls by "
    "its one rule (pelvis above its fall height, pitch and roll within 45 deg). controller feedback: the DCM "
    "feedback walker at vx = step_len / 0.45 s (its step period; capped at its 0.3 m/s, and step_len 0 "
    "stands); pd: the joint-PD closed loop of 03_walk.py.",
    params=(
        Param("step_len", 0.04, 0.0, 0.15, "m", description="forward step length"),
        Param("step_height", 0.035, 0.0, 0.10, "m", description="swing foot lift"),
        Param("steps", 6, 1, 40, "", integer=True, description="number of steps"),
        Param("seed", 0, 0, 2**31 - 1, "", integer=True, description="random seed"),
        Param("controller", "feedback", choices=CONTROLLERS, description="feedback walker or joint-PD walk"),
    ),
    point=walk_point,
    metrics=(
        Metric("pitch_max_deg", "peak pitch", "deg", better="low"),
        Metric("z_min", "lowest pelvis", "m", better="high"),
        Metric("stable", "stable"),
        Metric("fell", "fell"),
        Metric("steps_completed", "steps completed", better="high"),
        Metric("mean_speed_mps", "mean speed", "m/s"),
    ),
    heat_metric="pitch_max_deg",
    pass_key="stable",
    summarize=summarize_walk,
    timeout_s=600.0,
    requires="lab.walking.run",
    artifacts=("walk_curves.png", "summary.json", "walk_trace.csv", RECORDING),  # RECORDING: with "record"
    example={"step_len": "0.02, 0.04", "step_height": "0.02, 0.04", "steps": "6", "controller": "feedback"},
)


# ---------------------------------------------------------------- push_recovery

PUSH_FIRST_S = 0.5  # [s] of quiet standing before the push
DIRECTIONS = {"forward": (1.0, 0.0), "backward": (-1.0, 0.0), "left": (0.0, 1.0), "right": (0.0, -1.0)}


def _push_mode(robot, push, direction: str):
    """The push mode with its push along ``direction`` (forward: the mode itself, +x)."""
    import numpy as np

    from lab.control.modes import Command, Push

    class DirectedPush(Push):
        def __init__(self, robot, **kw):
            super().__init__(robot, **kw)
            ux, uy = DIRECTIONS[direction]
            f = self.push_params.force_n
            self._pushed = Command(self.q_nominal, push=np.array([f * ux, f * uy, 0.0]))

    return (Push if direction == "forward" else DirectedPush)(robot, push=push)


def push_point(params: dict, out_dir: Path, model: str | None = None) -> dict:
    """Stand, push the torso once with ``force_n`` [N] along ``direction`` (default forward, +x) for ``duration_s``
    [s], watch for ``seconds`` [s]."""
    import numpy as np

    from lab.control.modes import PushParams
    from lab.control.pd import PDGains
    from lab.control.rollout import Rollout, simulate
    from lab.robots.model import FALL_TILT_DEG, load_robot
    from lab.sim.mujoco_engine import MujocoEngine

    out_dir = Path(out_dir)
    robot = load_robot(model)
    force, duration, seconds = float(params["force_n"]), float(params["duration_s"]), float(params["seconds"])
    push = PushParams(force_n=force, duration_s=duration, period_s=60.0, first_s=PUSH_FIRST_S).validated()
    direction = params.get("direction", "forward")
    mode = _push_mode(robot, push, direction)
    t_sim = time.perf_counter()
    if wants_recording(params):  # the same run, stepped with the Lab's recorder attached (lab.scans.recording)
        samples = recorded_run(robot, mode, seconds, out_dir, point_label(params), sample_dt=0.01)
    else:
        samples = simulate(Rollout(MujocoEngine(robot), PDGains.for_robot(robot), mode), seconds, sample_dt=0.01)
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
        "direction": direction,
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
    return summary  # push_curves.png is drawn when first asked for (draw_push_figure), off the scan's path


def first_fall_time(robot, samples) -> float | None:
    """Sim time [s] of the first Metrics sample for which ``robot.has_fallen`` holds (pelvis, pitch, roll), or None."""
    for m in samples:
        if robot.has_fallen(m.pelvis_z, m.pitch_deg, m.roll_deg):
            return round(float(m.sim_time), 6)
    return None


def draw_push_figure(out_dir: Path, path: Path) -> None:
    """``push_curves.png`` of a finished push point into ``path``, from its ``summary.json`` and ``push_trace.csv``."""
    import json

    import numpy as np

    out_dir = Path(out_dir)
    s = json.loads((out_dir / "summary.json").read_text())
    with open(out_dir / "push_trace.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    t, z, pitch, roll, x = (
        np.array([float(r[c]) for r in rows]) for c in ("sim_time", "pelvis_z", "pitch_deg", "roll_deg", "forward_x")
    )
    _push_figure(path, t, z, pitch, roll, x, s)


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
    """Per push direction and duration: the bracket [last recovered, first fell] of the force, never a midpoint.

    ``bracket[1]`` (``first_fail_n``) is the smallest force that fell, ``bracket[0]`` (``last_pass_n``) the
    largest recovered below it; ``tol_n`` = their gap, how well this grid knows the threshold. None where
    the grid has no such force: ``[max recovered, None]`` when every force was recovered from (the threshold
    lies above), ``[None, min fell]`` when every force fell (below). ``monotonic`` says whether every
    recovery lies below every fall; ``label`` says all of it in words.
    """
    by_line: dict[tuple, list] = {}
    for p in points:
        m = p.get("metrics") or {}
        if p.get("status") != "done" or "recovered" not in m:
            continue
        line = (p["params"].get("direction", "forward"), float(p["params"]["duration_s"]))
        by_line.setdefault(line, []).append((float(p["params"]["force_n"]), bool(m["recovered"])))
    out = []
    for direction, d in sorted(by_line, key=lambda k: (list(DIRECTIONS).index(k[0]), k[1])):
        rows = sorted(by_line[(direction, d)])
        rec = [f for f, ok in rows if ok]
        fell = [f for f, ok in rows if not ok]
        first_fall = fell[0] if fell else None
        below = [f for f in rec if first_fall is None or f < first_fall]
        last = below[-1] if below else None
        if last is not None and first_fall is not None:
            label = f"threshold in [{last:g}, {first_fall:g}] N (tol {first_fall - last:g} N)"
        elif first_fall is None:
            label = f"recovered at every force up to {last:g} N: the threshold is above"
        else:
            label = f"fell at every force, from {first_fall:g} N: the threshold is below"
        out.append(
            {
                "direction": direction,
                "duration_s": d,
                "bracket": [last, first_fall],
                "last_pass_n": last,
                "first_fail_n": first_fall,
                "tol_n": round(first_fall - last, 6) if last is not None and first_fall is not None else None,
                "impulse_bracket_ns": [round(f * d, 6) if f is not None else None for f in (last, first_fall)],
                "max_recovered_n": max(rec) if rec else None,
                "min_fell_n": first_fall,
                "monotonic": not rec or not fell or max(rec) < min(fell),
                "points": len(rows),
                "label": label,
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
    "whether the robot recovered or fell and its peak pitch; the scan reports the force bracket "
    "[last recovered, first fell] per direction and duration. A search bisects the force instead of sweeping it.",
    params=(
        Param("duration_s", 0.1, 0.01, 1.0, "s", description="push duration"),
        Param("force_n", 40.0, 0.0, 200.0, "N", description="push force"),
        Param("seconds", 3.0, 1.0, 20.0, "s", description="simulated time per point"),
        Param("direction", "forward", choices=tuple(DIRECTIONS), description="+x, -x, +y, -y on the torso"),
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
    artifacts=("push_curves.png", "summary.json", "push_trace.csv", RECORDING),  # RECORDING: with "record"
    figures={"push_curves.png": draw_push_figure},
    example={"duration_s": "0.05:0.2:0.05", "force_n": "20:100:20"},
)


# ---------------------------------------------------------------- push_threshold

PT_STAND_S = 1.0  # [s] of standing before a push (and before walking starts)
PT_WALK_MPS = 0.15  # [m/s] the walking situation's forward speed
PT_WALK_BEFORE_S = 3.0  # [s] of walking before the push (mid-walk: about 6 steps in)
SITUATIONS = ("stand_feedback", "stand_step", "walk", "pd_stand", "pd_walk")
SITUATION_TEXT = {
    "stand_feedback": "feedback walker standing, ankle/CoM feedback only (capture_step off)",
    "stand_step": "feedback walker standing, capture steps on",
    "walk": f"feedback walker walking at {PT_WALK_MPS:g} m/s, pushed after {PT_WALK_BEFORE_S:g} s of walking",
    "pd_stand": "joint-PD stand (the push mode's stand), the baseline",
    "pd_walk": "joint-PD walk of 03_walk.py, the baseline (it falls by itself)",
}
PLANE = {"forward": "sagittal", "backward": "sagittal", "left": "lateral", "right": "lateral"}


def push_trial(
    robot,
    situation: str,
    direction: str,
    force_n: float,
    duration_s: float,
    judge_s: float,
    walk_before_s: float = PT_WALK_BEFORE_S,
) -> dict:
    """One independent simulation: ``situation``, a push of ``force_n`` [N] along ``direction`` on the torso for
    ``duration_s`` [s], watched ``judge_s`` [s] after the push ends; ``recovered`` = no fall by ``robot.has_fallen``.

    Standing situations stand :data:`PT_STAND_S` before the push; ``walk`` stands as long, then walks at
    :data:`PT_WALK_MPS` and is pushed after ``walk_before_s`` [s] of walking (the gait phase of the push), still
    walking when the window ends."""
    ux, uy = DIRECTIONS[direction]
    fx, fy = force_n * ux, force_n * uy
    if situation == "pd_stand":
        return _pd_stand_trial(robot, fx, fy, duration_s, judge_s)
    if situation == "pd_walk":
        raise ValueError("pd_walk takes no push: run_walk has no push input (see pd_walk_baseline)")
    from lab.walking.dcm import FeedbackParams
    from lab.walking.feedback_run import run_feedback_walk

    walking = situation == "walk"
    t_push = PT_STAND_S + (walk_before_s if walking else 0.0)
    end = t_push + duration_s + judge_s
    prm = FeedbackParams(capture_step=situation != "stand_feedback")
    steps = math.ceil((end - PT_STAND_S) / prm.period) + 4 if walking else 0  # never stops inside the window
    s = run_feedback_walk(
        robot=robot,
        vx=PT_WALK_MPS if walking else 0.0,
        steps=steps,
        params=prm,
        push={"t_s": t_push, "fx_n": fx, "fy_n": fy, "duration_s": duration_s},
        stand_s=PT_STAND_S,
        settle_s=end,
        max_s=end,
    )
    return {
        "recovered": not s["fell"],
        "fall_time_s": s["fall_time_s"],
        "push_t_s": t_push,
        "peak_pitch_deg": s["max_pitch_deg"],
        "peak_roll_deg": s["max_roll_deg"],
        "steps_completed": s["steps_completed"],
        "captures": s["captures"],
        "sim_s": s["sim_duration_s"],
    }


def _pd_stand_trial(robot, fx: float, fy: float, duration_s: float, judge_s: float) -> dict:
    """The push mode's PD stand (nominal pose, the same gains), pushed once at :data:`PT_STAND_S` along (fx, fy)."""
    import numpy as np

    from lab.control.modes import get_mode
    from lab.control.pd import PDGains
    from lab.control.rollout import Rollout
    from lab.sim.mujoco_engine import MujocoEngine

    eng = MujocoEngine(robot)
    try:
        rollout = Rollout(eng, PDGains.for_robot(robot), get_mode("stand", robot))
        dt = eng.dt
        every = max(1, int(round(0.01 / dt)))
        end = PT_STAND_S + duration_s + judge_s
        force = np.array([fx, fy, 0.0])
        on = False
        fall_t, pitch, roll, t = None, 0.0, 0.0, 0.0
        for i in range(1, int(round(end / dt)) + 1):
            t0 = (i - 1) * dt  # the step from t0 to t0 + dt
            want = PT_STAND_S - 1e-9 <= t0 < PT_STAND_S + duration_s - 1e-9
            if want != on:
                eng.set_push(force if want else None)
                on = want
            rollout.step()
            if i % every == 0:
                m = rollout.metrics()
                t = i * dt
                pitch, roll = max(pitch, abs(m.pitch_deg)), max(roll, abs(m.roll_deg))
                if robot.has_fallen(m.pelvis_z, m.pitch_deg, m.roll_deg):
                    fall_t = round(t, 6)
                    break  # the verdict is in
    finally:
        eng.close()
    return {
        "recovered": fall_t is None,
        "fall_time_s": fall_t,
        "push_t_s": PT_STAND_S,
        "peak_pitch_deg": round(pitch, 3),
        "peak_roll_deg": round(roll, 3),
        "steps_completed": 0,
        "captures": 0,
        "sim_s": round(t, 4),
    }


def pd_walk_baseline(robot, out_dir: Path | None = None) -> dict:
    """The joint-PD walk of 03_walk.py (``run_walk`` defaults), once, without a push: does it fall by itself?"""
    import shutil
    import tempfile

    from lab.walking.run import run_walk

    with tempfile.TemporaryDirectory() as tmp:
        s = run_walk(robot=robot, out_dir=tmp)
        if out_dir is not None and (Path(tmp) / "walk_curves.png").exists():
            shutil.copyfile(Path(tmp) / "walk_curves.png", Path(out_dir) / "pd_walk_curves.png")
    return {
        "recovered": not s["fell"],
        "fall_time_s": s["fall_time_s"],
        "push_t_s": None,
        "peak_pitch_deg": s.get("pitch_max_deg"),
        "peak_roll_deg": s.get("roll_max_deg"),
        "steps_completed": s.get("steps_before_fall"),
        "captures": 0,
        "sim_s": s.get("sim_duration_s"),
    }


def probe_forces(lo: float, hi: float, n: int, max_force_n: float) -> list[float]:
    """``n`` check forces around a bisection's bracket [``lo``, ``hi``]: half below ``lo`` (-10 %, -20 %, ...),
    half above ``hi`` (+10 %, +20 %, ...), within (0, ``max_force_n``]."""
    below = [round(lo * (1 - 0.1 * k), 4) for k in range(1, (n + 1) // 2 + 1)]
    above = [round(hi * (1 + 0.1 * k), 4) for k in range(1, n // 2 + 1)]
    return [f for f in below + above if 0 < f <= max_force_n]


def bisect_force(trial, max_force_n: float, tolerance_n: float, probes: int = 0) -> dict:
    """The largest push force recovered from, by bisection on [0, ``max_force_n``] down to a bracket <= ``tolerance_n``.

    ``trial(force_n) -> dict`` with ``recovered``. 0 N is tried first (a robot that falls unpushed has
    threshold 0), then ``max_force_n`` (recovered: the threshold is at least that), then midpoints.
    Bisection assumes the outcome is monotonic in force; ``probes`` more trials (:func:`probe_forces`)
    check that around the bracket. Over every trial: ``first_fall_n`` is the smallest force that fell,
    ``threshold_n`` the largest recovered below it, ``monotonic`` whether every recovery lies below every
    fall; ``bisection`` keeps the bisection's own bracket. ``outcome``: "bracketed" | "above_max" |
    "falls_unpushed"; ``trials`` in the order run, each with its ``force_n`` and ``probe``."""
    trials = []

    def run(force: float, probe: bool = False) -> bool:
        r = trial(force)
        trials.append({"force_n": force, "probe": probe, **r})
        return bool(r["recovered"])

    if not run(0.0):
        outcome, lo, hi = "falls_unpushed", 0.0, 0.0
    elif run(float(max_force_n)):
        outcome, lo, hi = "above_max", float(max_force_n), None
    else:
        outcome, lo, hi = "bracketed", 0.0, float(max_force_n)
        while hi - lo > tolerance_n:
            mid = round((lo + hi) / 2, 4)
            if not lo < mid < hi:  # below the resolution of forces
                break
            if run(mid):
                lo = mid
            else:
                hi = mid
        tried = {t["force_n"] for t in trials}
        for f in probe_forces(lo, hi, probes, max_force_n):
            if f not in tried:
                run(f, probe=True)
    rec = [t["force_n"] for t in trials if t["recovered"]]
    fell = [t["force_n"] for t in trials if not t["recovered"]]
    first = min(fell) if fell else None
    return {
        "threshold_n": max((f for f in rec if first is None or f < first), default=0.0),
        "first_fall_n": first,
        "largest_recovered_n": max(rec, default=None),
        "monotonic": first is None or all(f < first for f in rec),
        "bisection": {"threshold_n": lo, "first_fall_n": hi},
        "outcome": outcome,
        "trials": trials,
    }


def push_threshold_point(params: dict, out_dir: Path, model: str | None = None) -> dict:
    """Bisect the push force of one (situation, direction); writes summary.json, trials.csv, trials.png."""
    out_dir = Path(out_dir)
    robot = _robot(model)
    situation, direction = params["situation"], params["direction"]
    duration, judge = float(params["duration_s"]), float(params["judge_s"])
    walk_before = float(params.get("walk_before_s", PT_WALK_BEFORE_S))
    tol, fmax = float(params["tolerance_n"]), float(params["max_force_n"])
    t_wall = time.perf_counter()
    if situation == "pd_walk":
        base = pd_walk_baseline(robot, out_dir)
        trials = [{"force_n": 0.0, "probe": False, **base}]
        res = {"monotonic": True, "bisection": None, "trials": trials}
        if base["recovered"]:
            res.update(threshold_n=None, first_fall_n=None, largest_recovered_n=None, outcome="not_measured")
            note = "the PD walk did not fall unpushed, but run_walk takes no push: no bisection"
        else:
            res.update(threshold_n=0.0, first_fall_n=0.0, largest_recovered_n=None, outcome="falls_unpushed")
            note = f"the PD walk falls without a push (at {base['fall_time_s']:.2f} s): threshold 0, no bisection"
    else:

        def trial(force_n: float) -> dict:
            return push_trial(robot, situation, direction, force_n, duration, judge, walk_before)

        res = bisect_force(trial, fmax, tol, int(params.get("probes", 0)))
        note = {
            "bracketed": "",
            "above_max": f"recovered from the largest force tried ({fmax:g} N): the threshold is above it",
            "falls_unpushed": "falls without a push: threshold 0",
        }[res["outcome"]]
        if not res["monotonic"]:
            note = (
                f"not monotonic in force: recovered at {res['largest_recovered_n']:.4g} N, above a fall at "
                f"{res['first_fall_n']:.4g} N; threshold = the largest force recovered below every fall"
            )
    mass = float(robot.total_mass)
    thr, first = res["threshold_n"], res["first_fall_n"]
    impulse = thr * duration if thr is not None else None
    summary = {
        "situation": situation,
        "situation_text": SITUATION_TEXT[situation],
        "direction": direction,
        "plane": PLANE[direction],
        "push_vector": list(DIRECTIONS[direction]),
        "duration_s": duration,
        "judge_s": judge,
        "tolerance_n": tol,
        "max_force_n": fmax,
        "threshold_force_n": thr,
        "first_fall_force_n": first,
        "bracket_n": round(first - thr, 4) if (first is not None and thr is not None) else None,
        "monotonic": res["monotonic"],
        "largest_recovered_n": res["largest_recovered_n"],
        "bisection_threshold_n": res["bisection"]["threshold_n"] if res["bisection"] else None,
        "bisection_first_fall_n": res["bisection"]["first_fall_n"] if res["bisection"] else None,
        "n_probes": sum(t["probe"] for t in res["trials"]),
        "impulse_ns": round(impulse, 6) if impulse is not None else None,
        "delta_v_mps": round(impulse / mass, 6) if impulse is not None else None,
        "first_fall_impulse_ns": round(first * duration, 6) if first is not None else None,
        "total_mass_kg": round(mass, 6),
        "outcome": res["outcome"],
        "note": note,
        "n_trials": len(res["trials"]),
        "trials_text": " ".join(
            f"{'probe ' if t['probe'] else ''}{t['force_n']:g}:{'ok' if t['recovered'] else 'fell'}"
            for t in res["trials"]
        ),
        "trial_sim_s": round(sum(t["sim_s"] or 0.0 for t in res["trials"]), 3),
        "fall_rule": {"pelvis_below_m": round(robot.fall_height, 6), "tilt_beyond_deg": 45.0},
        "model_identity": robot.identity,
        "wall_s": round(time.perf_counter() - t_wall, 3),
        "trials": res["trials"],
    }
    write_json(out_dir / "summary.json", summary)
    cols = ("force_n", "probe", "recovered", "fall_time_s", "push_t_s", "peak_pitch_deg", "peak_roll_deg")
    cols = (*cols, "steps_completed")
    with open(out_dir / "trials.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trial", *cols, "captures", "sim_s"])
        for i, t in enumerate(res["trials"]):
            w.writerow([i, *("" if t[c] is None else t[c] for c in cols), t["captures"], t["sim_s"]])
    shown = ("trials", "push_vector", "fall_rule", *params)  # the parameters are the point's own columns already
    return {k: v for k, v in summary.items() if k not in shown}


def draw_threshold_figure(out_dir: Path, path: Path) -> None:
    """``trials.png`` of a finished push_threshold point into ``path``, from its ``summary.json`` (every trial)."""
    import json

    _threshold_figure(path, json.loads((Path(out_dir) / "summary.json").read_text()))


def _threshold_figure(path: Path, s: dict) -> None:
    """Left: the force of each trial in the order run (the bisection); right: each trial's outcome against its force."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = s["trials"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True)
    ok = [(i, t) for i, t in enumerate(trials) if t["recovered"]]
    bad = [(i, t) for i, t in enumerate(trials) if not t["recovered"]]
    thr, first = s["threshold_force_n"], s["first_fall_force_n"]
    a.plot(range(len(trials)), [t["force_n"] for t in trials], color="#888", lw=0.8, zorder=0)
    a.plot([i for i, _ in ok], [t["force_n"] for _, t in ok], "o", color="#1b7f3b", ms=8, label="recovered")
    a.plot([i for i, _ in bad], [t["force_n"] for _, t in bad], "X", color="#b00020", ms=9, label="fell")
    n_probe = sum(bool(t.get("probe")) for t in trials)
    if n_probe:
        a.axvspan(len(trials) - n_probe - 0.5, len(trials) - 0.5, color="#4a90d9", alpha=0.12, label="check trials")
    if s["outcome"] == "bracketed":
        a.axhline(
            thr, color="#1b7f3b", ls="--", lw=1, label=f"threshold {thr:.4g} N (largest recovered below every fall)"
        )
        a.axhline(first, color="#b00020", ls=":", lw=1, label=f"first fall {first:.4g} N")
    a.set_xlabel("trial (in the order run)")
    a.set_ylabel("push force [N]")
    a.set_xticks(range(len(trials)))
    title = "bisection" if len(trials) > 1 else "one trial, no bisection"
    if n_probe:
        title += f", then {n_probe} check trials" + ("" if s["monotonic"] else ": NOT monotonic")
    a.set_title(title, fontsize=9, color="#b00020" if not s["monotonic"] else "black")
    top = max([t["force_n"] for t in trials] + [10.0])
    a.set_ylim(-0.04 * top, 1.06 * top)
    a.grid(alpha=0.3)
    a.legend(fontsize=8, loc="upper right")
    fell_y = 52.0  # where a fallen trial is drawn (its tilt past the fall rule is not a number to compare)
    for _, t in ok:
        b.plot(t["force_n"], max(t["peak_pitch_deg"] or 0, t["peak_roll_deg"] or 0), "o", color="#1b7f3b", ms=7)
    for _, t in bad:
        b.plot(t["force_n"], fell_y, "X", color="#b00020", ms=8)
    b.axhline(45.0, color="#b00020", ls="--", lw=1, label="fall rule: tilt 45 deg")
    b.set_yticks([0, 10, 20, 30, 40, fell_y], ["0", "10", "20", "30", "40", "fell"])
    b.set_ylim(-2, fell_y + 5)
    b.set_xlim(-0.04 * top, 1.06 * top)
    b.set_xlabel("push force [N]")
    b.set_ylabel("peak |pitch|, |roll| [deg]")
    b.set_title("outcome of each trial", fontsize=9)
    b.grid(alpha=0.3)
    b.legend(fontsize=8, loc="center right")
    if s["outcome"] == "bracketed" and s["monotonic"]:
        verdict = (
            f"threshold {thr:.4g} N (first fall {first:.4g} N): impulse {s['impulse_ns']:.3g} N·s, "
            f"Δv {s['delta_v_mps']:.3g} m/s on {s['total_mass_kg']:.3g} kg"
        )
    else:
        verdict = s["note"]
    n = f"{s['n_trials']} trial{'s' if s['n_trials'] != 1 else ''}"
    if s["situation"] == "pd_walk":
        head = f"pd_walk · no push: the baseline walk run once · {n}"
    else:
        head = f"{s['situation']} · push {s['direction']} for {s['duration_s']:g} s · {n}"
    fig.suptitle(f"{head}\n{verdict}", fontsize=10)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def summarize_threshold(points: list[dict]) -> dict:
    """The table situation x direction -> threshold force, impulse and Δv, and the weakest plane per situation."""
    done = [p for p in points if p.get("status") == "done" and "threshold_force_n" in (p.get("metrics") or {})]
    order = {s: i for i, s in enumerate(SITUATIONS)}
    dirs = {d: i for i, d in enumerate(DIRECTIONS)}
    rows = []
    for p in sorted(
        done,
        key=lambda p: (
            order.get(p["params"].get("situation"), 99),
            float(p["params"].get("duration_s", 0)),
            dirs.get(p["params"].get("direction"), 99),
        ),
    ):
        m = p["metrics"]
        rows.append(
            {
                "situation": p["params"].get("situation"),
                "direction": p["params"].get("direction"),
                "plane": PLANE.get(p["params"].get("direction")),
                "duration_s": p["params"].get("duration_s"),
                "threshold_force_n": m.get("threshold_force_n"),
                "first_fall_force_n": m.get("first_fall_force_n"),
                "impulse_ns": m.get("impulse_ns"),
                "delta_v_mps": m.get("delta_v_mps"),
                "outcome": m.get("outcome"),
                "monotonic": m.get("monotonic"),
                "largest_recovered_n": m.get("largest_recovered_n"),
                "note": m.get("note", ""),
                "trials": m.get("n_trials"),
            }
        )
    weakest = []
    for sit in sorted({r["situation"] for r in rows}, key=lambda s: order.get(s, 99)):
        item = {"situation": sit}
        for plane in ("sagittal", "lateral"):
            vals = [r["impulse_ns"] for r in rows if r["situation"] == sit and r["plane"] == plane]
            vals = [v for v in vals if v is not None]
            item[f"{plane}_min_impulse_ns"] = min(vals) if vals else None
        weakest.append(item)
    masses = {p["metrics"].get("total_mass_kg") for p in done}
    return {
        "points_done": len(done),
        "total_mass_kg": masses.pop() if len(masses) == 1 else None,
        "push_thresholds": rows,
        "weakest_plane": weakest,
    }


PUSH_THRESHOLD = ScanKind(
    name="push_threshold",
    title="Push threshold: situation x direction (bisection)",
    description="Each point bisects the force of one push (duration_s on the torso) on [0, max_force_n] until "
    "the bracket is at most tolerance_n; each trial is its own simulation: stand 1 s (walk: then walk at "
    "0.15 m/s for 3 s), push, watch judge_s after it. Recovered = no fall by the robot's rule. Reports the "
    "largest force recovered from, the impulse and the change of velocity it gives the whole robot. "
    "probes more trials around the bracket check that the outcome is monotonic in force (a capture step can "
    "save a harder push); the threshold is the largest force recovered below every fall seen. "
    "pd_walk falls without a push, so it is reported as 0 without bisection.",
    params=(
        Param("situation", "stand_feedback", choices=SITUATIONS, description="what is pushed"),
        Param("direction", "forward", choices=tuple(DIRECTIONS), description="+x, -x, +y, -y"),
        Param("duration_s", 0.1, 0.01, 1.0, "s", description="push duration"),
        Param("tolerance_n", 2.0, 0.1, 100.0, "N", description="bisection stops at this bracket"),
        Param("max_force_n", 300.0, 1.0, 2000.0, "N", description="upper end of the bisection"),
        Param("judge_s", 3.0, 0.5, 10.0, "s", description="watched after the push"),
        Param(
            "walk_before_s",
            PT_WALK_BEFORE_S,
            0.5,
            10.0,
            "s",
            description="walk: seconds of walking before the push (sweep it for the gait phase; a step is 0.45 s)",
        ),
        Param(
            "probes", 4, 0, 10, "", integer=True, description="check trials at -10 %, -20 %, +10 %, ... of the bracket"
        ),
    ),
    point=push_threshold_point,
    metrics=(
        Metric("impulse_ns", "threshold impulse", "N·s", better="high"),
        Metric("threshold_force_n", "threshold force", "N", better="high"),
        Metric("delta_v_mps", "threshold Δv", "m/s", better="high"),
        Metric("first_fall_force_n", "first fall force", "N", better="high"),
        Metric("n_trials", "trials"),
    ),
    heat_metric="impulse_ns",
    summarize=summarize_threshold,
    timeout_s=900.0,
    requires="lab.walking.feedback_run",
    artifacts=("trials.png", "summary.json", "trials.csv", "pd_walk_curves.png"),
    figures={"trials.png": draw_threshold_figure},
    example={
        "situation": "stand_feedback, stand_step, walk, pd_stand, pd_walk",
        "direction": "forward, backward, left, right",
    },
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


# ---------------------------------------------------------------- boundary_probe (search, refine and scale checks)


def boundary_value(x: float, y: float) -> float:
    """Where boundary_probe's PASS/FAIL boundary runs along x at a given y: 50 + 20 sin(y / 15)."""
    return 50.0 + 20.0 * math.sin(y / 15.0)


def boundary_point(params: dict, out_dir: Path, model: str | None = None) -> dict:
    """PASS (``ok``) when ``x`` lies below :func:`boundary_value` at ``y``; returns at once and writes nothing."""
    x, y = float(params["x"]), float(params["y"])
    edge = boundary_value(x, y)
    return {"margin": round(edge - x, 6), "ok": x < edge}


# Not in builtin_kinds(): tests and benchmarks add it to a table, make_kinds(*builtin_kinds(), BOUNDARY_PROBE).
BOUNDARY_PROBE = ScanKind(
    name="boundary_probe",
    title="Boundary probe: a known PASS/FAIL boundary, no simulation",
    description="PASS when x < 50 + 20 sin(y / 15); a point returns at once. Checks search, refine and "
    "10,000-point scans against a boundary known exactly.",
    params=(
        Param("x", 0.0, 0.0, 100.0, "", description="searched or swept across the boundary"),
        Param("y", 0.0, 0.0, 100.0, "", description="moves the boundary"),
    ),
    point=boundary_point,
    metrics=(Metric("margin", "distance to the boundary", better="high"), Metric("ok", "ok")),
    heat_metric="margin",
    pass_key="ok",
    timeout_s=60.0,
    hidden=True,
    example={"x": "0:100:10", "y": "0:100:10"},
)


def builtin_kinds() -> tuple[ScanKind, ...]:
    """The built-in kinds, in the order the page offers them."""
    return (WALK_STABILITY, PUSH_RECOVERY, PUSH_THRESHOLD, PROBE)
