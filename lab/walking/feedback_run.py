"""Running the feedback walker headless: :func:`run_feedback_walk` plays the ``walk`` mode
(``controller="feedback"``) through the Lab's :class:`~lab.control.rollout.Rollout` in MuJoCo or
PyBullet, commands a velocity until ``steps`` steps have landed, then zero and waits for the robot to
stand; an optional push is applied on the way. It records a 100 Hz trace, judges the run by the robot's
fall rule and writes ``summary.json``, ``walk_trace.csv`` and ``walk_curves.png``.
"""

import math
import time
from pathlib import Path

import numpy as np

from lab.robots.model import FALL_TILT_DEG, load_robot
from lab.sim.engines import make_engine
from lab.walking.dcm import FeedbackParams
from lab.walking.mode import Walk
from lab.walking.run import own_stepper, write_summary_and_trace

TRACE_COLUMNS = (
    "t_s",
    "phase",
    "step",
    "support",
    "com_x_m",
    "com_y_m",
    "dcm_x_m",
    "dcm_y_m",
    "dcm_ref_x_m",
    "dcm_ref_y_m",
    "zmp_cmd_x_m",
    "zmp_cmd_y_m",
    "zmp_plan_x_m",
    "zmp_plan_y_m",
    "cop_x_m",
    "cop_y_m",
    "pelvis_x_m",
    "pelvis_y_m",
    "pelvis_z_m",
    "pitch_deg",
    "roll_deg",
    "saturated",
    "step_adjust_x_m",
    "step_adjust_y_m",
)


def run_feedback_walk(
    robot=None,
    engine: str = "mujoco",
    vx: float = 0.15,
    vy: float = 0.0,
    yaw_rate: float = 0.0,
    steps: int = 30,
    params: FeedbackParams | None = None,
    push: dict | None = None,
    stand_s: float = 0.5,
    settle_s: float = 1.5,
    max_s: float | None = None,
    turn_to_deg: float | None = None,
    seed: int = 0,
    out_dir=None,
    stepper=None,
) -> dict:
    """Walk ``steps`` steps at (``vx``, ``vy``, ``yaw_rate``) [m/s, m/s, rad/s] after ``stand_s`` [s] of standing.

    ``push``: ``{"t_s", "fx_n", "fy_n", "duration_s"}``, a horizontal force on the torso (world frame) from
    ``t_s`` [s]. ``turn_to_deg``: stop turning once the heading has turned this far (a turn on the spot).
    The run ends ``settle_s`` after the robot stands again, at a fall (+0.5 s), or at ``max_s``.
    Deterministic (``seed`` seeds numpy and is recorded). Summary keys carry their unit. ``stepper``: as
    :func:`lab.walking.run.run_walk` takes it (default a bare :class:`~lab.control.rollout.Rollout`).
    """
    np.random.seed(seed)
    robot = robot if robot is not None else load_robot()
    prm = params or FeedbackParams()
    eng = make_engine(engine, robot)
    try:
        return _run(
            robot,
            eng,
            engine,
            vx,
            vy,
            yaw_rate,
            steps,
            prm,
            push,
            stand_s,
            settle_s,
            max_s,
            turn_to_deg,
            seed,
            out_dir,
            stepper or own_stepper,
        )
    finally:
        eng.close()


def _run(
    robot,
    eng,
    engine,
    vx,
    vy,
    yaw_rate,
    steps,
    prm,
    push,
    stand_s,
    settle_s,
    max_s,
    turn_to_deg,
    seed,
    out_dir,
    stepper,
):
    mode = Walk(robot, controller="feedback", feedback=prm, command=(0.0, 0.0, 0.0))
    rollout, tick = stepper(eng, mode)
    ctl = mode.controller
    dt = eng.dt
    every = max(1, int(round(prm.dt / dt)))
    walking = steps > 0 and (abs(vx) + abs(vy) + abs(yaw_rate)) > 0
    max_s = max_s or (stand_s + max(steps, 1) * prm.period * 1.5 + 6.0 + (2.0 if push else 0.0))
    push_on = False
    rows, fall_t, stood_t, stop_t = [], None, None, None
    x0 = eng.base_pose()[0].copy()
    yaw0 = base_yaw(eng)
    stop_step = None
    heading0 = None
    t_wall = time.perf_counter()
    i = 0
    n_max = int(round(max_s / dt))
    while i <= n_max:
        t = i * dt
        if walking and stop_t is None and i == int(round(stand_s / dt)):
            mode.set_command(vx, vy, yaw_rate)
        if push is not None:
            t0, t1 = float(push["t_s"]), float(push["t_s"]) + float(push["duration_s"])
            on = t0 - 1e-9 <= t < t1 - 1e-9
            if on != push_on:
                eng.set_push(
                    np.array([float(push.get("fx_n", 0.0)), float(push.get("fy_n", 0.0)), 0.0]) if on else None
                )
                push_on = on
        if i:
            tick()
        if i % every == 0:
            row = _row(ctl, rollout, eng, x0)
            rows.append(row)
            if heading0 is None and ctl.state:
                heading0 = ctl.heading
            if fall_t is None and robot.has_fallen(row["pelvis_z_m"], row["pitch_deg"], row["roll_deg"]):
                fall_t = t
            if stop_t is None and walking:
                left = None
                if turn_to_deg is not None and ctl.phase != "stand":  # turn by an angle: slow down toward it
                    left = math.radians(turn_to_deg) - abs(_wrap(base_yaw(eng) - yaw0))
                    rate = float(np.clip(left / (2.0 * prm.period), 0.1, 1.0)) * abs(yaw_rate)
                    mode.set_command(vx, vy, math.copysign(rate, yaw_rate))
                if ctl.step >= steps or (left is not None and left < math.radians(2.0)):
                    mode.set_command(0.0, 0.0, 0.0)
                    stop_t, stop_step = t, ctl.step
            if stood_t is None and (stop_t is not None or not walking) and ctl.phase == "stand" and t > stand_s + 0.5:
                stood_t = t
            if fall_t is not None and t >= fall_t + 0.5 - 1e-9:
                break
            if (
                stood_t is not None
                and t >= stood_t + settle_s - 1e-9
                and (push is None or t > float(push["t_s"]) + 2.0)
            ):
                break
        i += 1
    wall = time.perf_counter() - t_wall
    cost = list(ctl.costs)
    summary = _summary(
        robot,
        engine,
        prm,
        rows,
        ctl,
        vx,
        vy,
        yaw_rate,
        steps,
        push,
        fall_t,
        stood_t,
        stop_t,
        heading0,
        cost,
        wall,
        seed,
    )
    summary["heading_change_deg"] = round(math.degrees(_wrap(base_yaw(eng) - yaw0)), 2)
    summary["steps_commanded"] = stop_step if stop_step is not None else summary["steps_completed"]
    if out_dir is not None:
        write_outputs(Path(out_dir), summary, rows)
    return summary


def base_yaw(eng) -> float:
    """Heading of the robot's root [rad] from its quaternion (w, x, y, z)."""
    w, x, y, z = (float(v) for v in eng.base_pose()[1])
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def _row(ctl, rollout, eng, x0) -> dict:
    m = rollout.metrics()
    ex = ctl.extras() if ctl.state else {}
    pos = eng.base_pose()[0]
    cop = m.cop if m.cop is not None else (float("nan"), float("nan"))
    g = ex.get
    return {
        "t_s": m.sim_time,
        "phase": ctl.phase,
        "step": ctl.step,
        "support": ctl.support,
        "com_x_m": m.com[0],
        "com_y_m": m.com[1],
        "dcm_x_m": g("dcm_x", float("nan")),
        "dcm_y_m": g("dcm_y", float("nan")),
        "dcm_ref_x_m": g("dcm_ref_x", float("nan")),
        "dcm_ref_y_m": g("dcm_ref_y", float("nan")),
        "zmp_cmd_x_m": g("zmp_cmd_x", float("nan")),
        "zmp_cmd_y_m": g("zmp_cmd_y", float("nan")),
        "zmp_plan_x_m": g("zmp_plan_x", float("nan")),
        "zmp_plan_y_m": g("zmp_plan_y", float("nan")),
        "cop_x_m": cop[0],
        "cop_y_m": cop[1],
        "pelvis_x_m": float(pos[0] - x0[0]),
        "pelvis_y_m": float(pos[1] - x0[1]),
        "pelvis_z_m": float(pos[2]),
        "pitch_deg": m.pitch_deg,
        "roll_deg": m.roll_deg,
        "saturated": int(ctl.saturated),
        "step_adjust_x_m": float(ctl.adjust[0]),
        "step_adjust_y_m": float(ctl.adjust[1]),
    }


def _summary(
    robot, engine, prm, rows, ctl, vx, vy, yaw_rate, steps, push, fall_t, stood_t, stop_t, heading0, cost, wall, seed
):
    t = np.array([r["t_s"] for r in rows])
    upto = t <= (fall_t if fall_t is not None else np.inf)
    pitch = np.array([abs(r["pitch_deg"]) for r in rows])[upto]
    roll = np.array([abs(r["roll_deg"]) for r in rows])[upto]
    z = np.array([r["pelvis_z_m"] for r in rows])[upto]
    ev = [e for e in ctl.events if fall_t is None or e["t_s"] <= fall_t]
    walked = [e for e in ev if stop_t is None or e["t_s"] <= stop_t + 1e-9]  # the steps taken under the command
    fell = fall_t is not None
    # speed: the feet's midpoint from the first touchdown to the last, along the heading at the start
    speed, dist = None, 0.0
    if len(walked) >= 4:  # the feet's midpoint, from the first two landings to the last two, along the start heading
        h = heading0 or 0.0
        m0 = 0.5 * (np.array(walked[0]["landed"]) + np.array(walked[1]["landed"]))
        m1 = 0.5 * (np.array(walked[-1]["landed"]) + np.array(walked[-2]["landed"]))
        d = m1 - m0
        along = d[0] * math.cos(h) + d[1] * math.sin(h)
        dt = 0.5 * (walked[-1]["t_s"] + walked[-2]["t_s"]) - 0.5 * (walked[0]["t_s"] + walked[1]["t_s"])
        speed, dist = (along / dt if dt > 0 else None), float(np.hypot(*d))
    sat = np.array([r["saturated"] for r in rows])[upto]
    adjusts = [e for e in ev if math.hypot(*e["adjust"]) > 0.01]
    sim_s = float(t[-1]) if len(t) else 0.0
    return {
        "controller": "feedback",
        "engine": engine,
        "robot": robot.identity_dict(),
        "seed": int(seed),
        "command": {"vx": vx, "vy": vy, "yaw_rate": yaw_rate},
        "steps": int(steps),
        "step_height_m": prm.step_height,
        "single_support_s": prm.ss,
        "double_support_s": prm.ds,
        "push": push,
        "steps_completed": len(ev),
        "fell": fell,
        "stable": not fell,
        "fall_time_s": round(float(fall_t), 6) if fell else None,
        "stood_after_s": round(float(stood_t - stop_t), 3) if (stood_t is not None and stop_t is not None) else None,
        "stands_at_end": (not fell) and ctl.phase == "stand",
        "mean_speed_mps": round(float(speed), 4) if speed is not None else None,
        "distance_m": round(dist, 4),
        "heading_change_deg": round(math.degrees(ctl.heading - (heading0 or 0.0)), 2),
        "max_pitch_deg": round(float(pitch.max()), 3) if len(pitch) else None,
        "pitch_max_deg": round(float(pitch.max()), 3) if len(pitch) else None,
        "max_roll_deg": round(float(roll.max()), 3) if len(roll) else None,
        "z_min": round(float(z.min()), 5) if len(z) else None,
        "saturated_fraction": round(float(sat.mean()), 4) if len(sat) else 0.0,
        "step_adjustments": len(adjusts),
        "largest_adjust_m": round(max((math.hypot(*e["adjust"]) for e in ev), default=0.0), 4),
        "captures": ctl.captures,
        "pelvis_limit_m": round(robot.fall_height, 6),
        "pitch_limit_deg": FALL_TILT_DEG,
        "controller_ms_mean": round(1000 * float(np.mean(cost)), 4) if cost else None,
        "controller_ms_p95": round(1000 * float(np.percentile(cost, 95)), 4) if cost else None,
        "sim_duration_s": round(sim_s, 4),
        "wall_s": round(wall, 3),
        "rtf": round(sim_s / wall, 3) if wall > 0 else None,
        "touchdowns": [
            {
                "step": e["step"],
                "side": "left" if e["side"] == 0 else "right",
                "t_s": round(e["t_s"], 4),
                "planned_m": [round(v, 4) for v in e["planned"]],
                "landed_m": [round(v, 4) for v in e["landed"]],
                "adjust_m": [round(v, 4) for v in e["adjust"]],
                "cut": e["cut"],
            }
            for e in ev
        ],
        "trace_rows": len(rows),
    }


def write_outputs(out: Path, summary: dict, rows: list) -> None:
    """``summary.json``, ``walk_trace.csv`` and ``walk_curves.png`` under ``out``."""
    write_summary_and_trace(out, summary, rows, TRACE_COLUMNS)
    plot_feedback_walk(out / "walk_curves.png", summary, rows)


def plot_feedback_walk(path: Path, summary: dict, rows: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    col = {k: np.array([r[k] for r in rows], dtype=float) for k in TRACE_COLUMNS if k != "phase"}
    t = col["t_s"]
    fig = plt.figure(figsize=(11, 12.5))
    gs = fig.add_gridspec(5, 1, height_ratios=(1, 1, 0.7, 0.8, 1.3))
    axes = [fig.add_subplot(gs[i, 0]) for i in range(4)]
    for a in axes[1:]:
        a.sharex(axes[0])
    for a, k in zip(axes[:2], ("x", "y")):
        a.plot(t, col[f"zmp_plan_{k}_m"], "k--", lw=0.9, label="ZMP plan (support sole)")
        a.plot(t, col[f"zmp_cmd_{k}_m"], "C3", lw=0.8, label="ZMP command p*")
        a.plot(t, col[f"cop_{k}_m"], "C2", lw=0.6, alpha=0.7, label="ZMP measured (CoP)")
        a.plot(t, col[f"dcm_ref_{k}_m"], "C0--", lw=1.0, label="DCM reference")
        a.plot(t, col[f"dcm_{k}_m"], "C0", lw=1.2, label="DCM measured")
        a.plot(t, col[f"com_{k}_m"], "C1", lw=1.0, label="CoM")
        a.set_ylabel(f"{k} [m]")
        a.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=7, ncol=3)
    a = axes[2]
    a.plot(t, col["pelvis_z_m"], "C1", label="pelvis z")
    a.axhline(summary["pelvis_limit_m"], color="r", ls=":", label="fall line")
    a.set_ylabel("pelvis z [m]")
    a.legend(loc="lower left", fontsize=7)
    a.grid(alpha=0.3)
    a = axes[3]
    a.plot(t, col["pitch_deg"], "C3", label="pitch")
    a.plot(t, col["roll_deg"], "C9", label="roll")
    a.fill_between(t, 0, 10 * col["saturated"], color="C3", alpha=0.15, step="post", label="ZMP saturated")
    a.set_ylabel("angle [deg]")
    a.set_xlabel("time [s]")
    a.legend(loc="upper left", fontsize=7)
    a.grid(alpha=0.3)
    top = fig.add_subplot(gs[4, 0])
    top.plot(col["com_x_m"], col["com_y_m"], "C1", lw=0.8, label="CoM")
    top.plot(col["dcm_x_m"], col["dcm_y_m"], "C0", lw=0.6, alpha=0.7, label="DCM")
    for i, e in enumerate(summary["touchdowns"]):
        px, py = e["planned_m"]
        lx, ly = e["landed_m"]
        colour = "C4" if e["side"] == "left" else "C5"
        top.plot([px], [py], "x", color=colour, ms=5, label="planned" if i < 2 else None)
        top.plot([lx], [ly], "o", color=colour, ms=4, mfc="none", label="landed" if i < 2 else None)
    top.set_aspect("equal", adjustable="datalim")
    top.set_xlabel("x [m]")
    top.set_ylabel("y [m]")
    top.set_title("top view: footholds (x planned, o landed)", fontsize=9)
    top.legend(loc="upper left", fontsize=7, ncol=3)
    top.grid(alpha=0.3)
    for a in axes:
        if summary["fell"]:
            a.axvline(summary["fall_time_s"], color="r", lw=1, alpha=0.6)
    verdict = f"FELL at {summary['fall_time_s']:.2f} s" if summary["fell"] else "no fall"
    speed = summary["mean_speed_mps"]
    axes[0].set_title(
        f"feedback walk ({summary['engine']}): {summary['steps_completed']} steps, "
        f"mean speed {speed if speed is not None else float('nan'):.3f} m/s — {verdict}; "
        f"|pitch| max {summary['max_pitch_deg']:.1f} deg",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
