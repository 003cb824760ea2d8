"""Running the closed-loop walk headless: :func:`run_walk` plays the ``walk`` mode through the Lab's
:class:`~lab.control.rollout.Rollout` (the same control tick as the live page), records a 100 Hz
trace, judges the run by the robot's fall rule and writes ``summary.json``, ``walk_trace.csv`` and
``walk_curves.png``."""

import csv
import json
import time
from pathlib import Path

import numpy as np

from lab.control.pd import PDGains
from lab.control.rollout import Rollout
from lab.robots.model import load_robot
from lab.sim.mujoco_engine import MujocoEngine
from lab.walking.mode import Walk
from lab.walking.planner import GaitParams
from lab.walking.walk import WalkController, WalkParams, stability_limits

TRACE_COLUMNS = [
    "t_s",
    "phase",
    "step",
    "com_plan_x_m",
    "com_plan_y_m",
    "zmp_plan_x_m",
    "zmp_plan_y_m",
    "com_x_m",
    "com_y_m",
    "com_z_m",
    "cop_x_m",
    "cop_y_m",
    "pelvis_x_m",
    "pelvis_y_m",
    "pelvis_z_m",
    "pitch_deg",
    "roll_deg",
    "support",
    "foot_l_plan_x_m",
    "foot_l_plan_z_m",
    "foot_l_x_m",
    "foot_l_z_m",
    "foot_r_plan_x_m",
    "foot_r_plan_z_m",
    "foot_r_x_m",
    "foot_r_z_m",
    "com_corr_x_m",
    "com_corr_y_m",
    "ik_error_mm",
    "max_joint_err_rad",
]


def run_walk(step_len=0.04, step_height=0.035, steps=6, seed=0, out_dir=None, robot=None, stepper=None) -> dict:
    """Walk ``steps`` steps of ``step_len`` [m] lifting ``step_height`` [m] in MuJoCo; return the summary.

    The run is deterministic (``seed`` seeds numpy and is recorded; nothing random is drawn by
    default). It stops 0.5 s after a fall. With ``out_dir`` it writes ``summary.json``,
    ``walk_trace.csv`` and ``walk_curves.png`` there. Summary keys carry their unit.

    ``stepper(engine, mode) -> (rollout, tick)`` steps the walk instead of a bare :class:`Rollout` (default
    :func:`own_stepper`): a :class:`Rollout` of ``mode`` on ``engine`` with the robot's PD gains, and ``tick()``,
    one physics step of it (a scan point's recorder, :class:`lab.scans.recording.PointRecording`).
    """
    np.random.seed(seed)
    robot = robot if robot is not None else load_robot()
    params = WalkParams(gait=GaitParams(step_len=float(step_len), step_height=float(step_height), steps=int(steps)))
    engine = MujocoEngine(robot)
    mode = Walk(robot, walk=params, loop=False, controller="pd")
    mode.bind(engine)
    rollout, tick = (stepper or own_stepper)(engine, mode)
    z_lim, pitch_lim = stability_limits(robot)
    dt = engine.dt
    every = int(round(params.gait.dt / dt))
    n = int(round(params.gait.duration / dt))
    rows, fall_t, t_wall = [], None, time.perf_counter()
    x0 = float(engine.base_pose()[0][0])
    ctl = mode.controller
    joint_err = np.zeros(robot.model.nu)  # largest |target - actual| per joint before the fall [rad]
    for i in range(n + 1):
        if i:
            tick()  # the tick: the mode's command (IK at 100 Hz) -> PD -> one physics step
        if i % every == 0:
            m = rollout.metrics()  # the state after the tick, against the command that produced it
            if fall_t is None:
                joint_err = np.maximum(joint_err, np.abs(rollout.command.q_target - engine.joint_state()[0]))
            feet = ctl.measured(engine.mj_qpos())
            rows.append(_trace_row(ctl, m, engine.base_pose()[0] - (x0, 0.0, 0.0), feet))
            if fall_t is None and robot.has_fallen(m.pelvis_z, m.pitch_deg, m.roll_deg):
                fall_t = m.sim_time
            if fall_t is not None and m.sim_time >= fall_t + 0.5 - 1e-6:
                break
    wall = time.perf_counter() - t_wall
    summary = _summary(robot, params, seed, rows, fall_t, x0, z_lim, pitch_lim, ctl, wall, joint_err)
    if out_dir is not None:
        write_outputs(Path(out_dir), summary, rows)
    return summary


def own_stepper(engine, mode) -> tuple:
    """``(rollout, tick)``: a bare :class:`Rollout` of ``mode`` on ``engine`` with the robot's PD gains, and its
    ``step`` (how the walks step when nobody hands them a ``stepper``)."""
    rollout = Rollout(engine, PDGains.for_robot(mode.robot), mode)
    return rollout, rollout.step


def _trace_row(ctl: WalkController, m, pelvis, feet) -> dict:
    ref, st = ctl.ref, ctl.state
    cop = m.cop if m.cop is not None else (float("nan"), float("nan"))
    return {
        "t_s": m.sim_time,
        "phase": ref.phase.kind,
        "step": ref.phase.step,
        "com_plan_x_m": ref.com[0],
        "com_plan_y_m": ref.com[1],
        "zmp_plan_x_m": ref.zmp[0],
        "zmp_plan_y_m": ref.zmp[1],
        "com_x_m": m.com[0],
        "com_y_m": m.com[1],
        "com_z_m": m.com[2],
        "cop_x_m": cop[0],
        "cop_y_m": cop[1],
        "pelvis_x_m": float(pelvis[0]),  # since the start [m]
        "pelvis_y_m": float(pelvis[1]),
        "pelvis_z_m": m.pelvis_z,
        "pitch_deg": m.pitch_deg,
        "roll_deg": m.roll_deg,
        "support": m.support,
        "foot_l_plan_x_m": ref.feet[0, 0],
        "foot_l_plan_z_m": ref.feet[0, 2],
        "foot_l_x_m": feet[0, 0],
        "foot_l_z_m": feet[0, 2],
        "foot_r_plan_x_m": ref.feet[1, 0],
        "foot_r_plan_z_m": ref.feet[1, 2],
        "foot_r_x_m": feet[1, 0],
        "foot_r_z_m": feet[1, 2],
        "com_corr_x_m": st["corr"][0],
        "com_corr_y_m": st["corr"][1],
        "ik_error_mm": 1000.0 * st["ik_error"],
        "max_joint_err_rad": m.max_joint_err,
    }


def _summary(robot, params, seed, rows, fall_t, x0, z_lim, pitch_lim, ctl, wall, joint_err) -> dict:
    z = np.array([r["pelvis_z_m"] for r in rows])
    pitch = np.array([abs(r["pitch_deg"]) for r in rows])
    roll = np.array([abs(r["roll_deg"]) for r in rows])
    t = np.array([r["t_s"] for r in rows])
    upto = t <= (fall_t if fall_t is not None else np.inf)
    dc = np.hypot(
        np.array([r["com_plan_x_m"] - r["com_x_m"] for r in rows]),
        np.array([r["com_plan_y_m"] - r["com_y_m"] for r in rows]),
    )
    done_steps = sum(
        1 for ph in ctl.planner.phases if ph.kind == "ss" and ph.t1 <= (fall_t if fall_t is not None else t[-1])
    )
    worst = int(np.argmax(joint_err))
    g = params.gait
    fell = fall_t is not None
    return {
        "robot": robot.identity_dict(),
        "seed": int(seed),
        "step_len_m": g.step_len,
        "step_height_m": g.step_height,
        "steps": g.steps,
        "plan_duration_s": round(g.duration, 6),
        "sim_duration_s": round(float(t[-1]), 6),
        "z_min": round(float(z.min()), 6),
        "pitch_max_deg": round(float(pitch.max()), 4),
        "roll_max_deg": round(float(roll.max()), 4),
        "forward_planned_m": round(float(ctl.planner.planned_com_travel[0]), 6),
        "forward_actual_m": round(float(rows[-1]["pelvis_x_m"]), 6),
        "feet_forward_planned_m": round(g.planned_forward, 6),
        "forward_at_fall_m": round(float(rows[int(np.argmax(t >= fall_t - 1e-9))]["pelvis_x_m"]), 6) if fell else None,
        "fell": fell,
        "fall_time_s": round(float(fall_t), 6) if fell else None,
        "stable": not fell,
        "pelvis_limit_m": round(z_lim, 6),
        "pitch_limit_deg": pitch_lim,
        "steps_before_fall": done_steps,  # single supports that ended before the fall (or the end)
        "com_track_rms_m": round(float(np.sqrt(np.mean(dc[upto] ** 2))), 6),
        "com_track_max_m": round(float(dc[upto].max()), 6),
        "com_corr_clipped_fraction": round(
            float(
                np.mean(
                    [
                        max(abs(r["com_corr_x_m"]), abs(r["com_corr_y_m"])) >= 0.999 * ctl.params.com_clip
                        for r, u in zip(rows, upto)
                        if u
                    ]
                )
            ),
            4,
        ),
        "ik_max_error_mm": round(float(max(r["ik_error_mm"] for r, u in zip(rows, upto) if u)), 4),
        "ik_unconverged_ticks": int(
            sum(1 for r, u in zip(rows, upto) if u and r["ik_error_mm"] >= 1000 * ctl.params.ik.tol)
        ),
        "max_joint_err_rad": round(float(max(r["max_joint_err_rad"] for r, u in zip(rows, upto) if u)), 4),
        "worst_joint": robot.joint_names[worst],
        "leg_joint_err_max_rad": {
            robot.joint_names[a]: round(float(joint_err[a]), 4) for leg in ctl.legs for a in leg.act
        },
        "landing_error_mm": [
            {
                "step": int(d["step"]),
                "side": "left" if d["side"] == 0 else "right",
                "dx_mm": round(1000 * float(d["dx_m"]), 2),
                "dy_mm": round(1000 * float(d["dy_m"]), 2),
                "dz_mm": round(1000 * float(d["dz_m"]), 2),
            }
            for d in ctl.landings
        ],
        "replans": ctl.planner.replans,
        "wall_s": round(wall, 3),
        "trace_rows": len(rows),
    }


def write_outputs(out: Path, summary: dict, rows: list) -> None:
    """``summary.json``, ``walk_trace.csv`` and ``walk_curves.png`` under ``out``."""
    write_summary_and_trace(out, summary, rows, TRACE_COLUMNS)
    plot_walk(out / "walk_curves.png", summary, rows)


def write_summary_and_trace(out: Path, summary: dict, rows: list, columns) -> None:
    """``summary.json`` and ``walk_trace.csv`` (``columns``, floats to 6 significant digits) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with open(out / "walk_trace.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def plot_walk(path: Path, summary: dict, rows: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    col = {
        k: np.array([r[k] for r in rows], dtype=float if k not in ("phase", "support") else object)
        for k in TRACE_COLUMNS
    }
    t = col["t_s"].astype(float)
    fig, ax = plt.subplots(4, 1, figsize=(10, 11), sharex=True)
    a = ax[0]
    a.plot(t, col["zmp_plan_x_m"], "k--", lw=1, label="ZMP plan")
    a.plot(t, col["com_plan_x_m"], "C0", label="CoM plan")
    a.plot(t, col["com_x_m"], "C1", label="CoM actual")
    a.plot(t, col["cop_x_m"], "C2", lw=0.7, alpha=0.7, label="CoP actual")
    a.plot(t, col["foot_l_x_m"], "C4", lw=0.8, alpha=0.6, label="left ankle")
    a.plot(t, col["foot_r_x_m"], "C5", lw=0.8, alpha=0.6, label="right ankle")
    a.set_ylabel("x [m]")
    a.legend(loc="upper left", fontsize=8, ncol=3)
    a = ax[1]
    a.plot(t, col["zmp_plan_y_m"], "k--", lw=1, label="ZMP plan")
    a.plot(t, col["com_plan_y_m"], "C0", label="CoM plan")
    a.plot(t, col["com_y_m"], "C1", label="CoM actual")
    a.plot(t, col["cop_y_m"], "C2", lw=0.7, alpha=0.7, label="CoP actual")
    a.set_ylabel("y [m]")
    a.legend(loc="upper left", fontsize=8, ncol=4)
    a = ax[2]
    a.plot(t, col["pelvis_z_m"], "C1", label="pelvis z")
    a.axhline(summary["pelvis_limit_m"], color="r", ls=":", label=f"fall line {summary['pelvis_limit_m']:.3f} m")
    a2 = a.twinx()
    a2.plot(t, col["foot_l_plan_z_m"], "C4--", lw=0.8, label="left ankle z plan")
    a2.plot(t, col["foot_l_z_m"], "C4", lw=0.8, label="left ankle z")
    a2.plot(t, col["foot_r_plan_z_m"], "C5--", lw=0.8, label="right ankle z plan")
    a2.plot(t, col["foot_r_z_m"], "C5", lw=0.8, label="right ankle z")
    a2.set_ylabel("ankle z [m]")
    a.set_ylabel("pelvis z [m]")
    a.legend(loc="lower left", fontsize=8)
    a2.legend(loc="upper right", fontsize=7, ncol=2)
    a = ax[3]
    a.plot(t, col["pitch_deg"], "C3", label="torso pitch")
    a.plot(t, col["roll_deg"], "C9", label="torso roll")
    a.axhline(summary["pitch_limit_deg"], color="r", ls=":")
    a.axhline(-summary["pitch_limit_deg"], color="r", ls=":")
    a.set_ylabel("angle [deg]")
    a.set_xlabel("time [s]")
    a.legend(loc="upper left", fontsize=8)
    for a in ax:
        if summary["fell"]:
            a.axvline(summary["fall_time_s"], color="r", lw=1, alpha=0.6)
        a.grid(alpha=0.3)
    verdict = f"FELL at {summary['fall_time_s']:.2f} s" if summary["fell"] else "STABLE"
    ax[0].set_title(
        f"closed-loop walk: {summary['steps']} steps x {summary['step_len_m'] * 100:.1f} cm, lift {summary['step_height_m'] * 100:.1f} cm"
        f" — {verdict}; z_min {summary['z_min']:.3f} m, |pitch| max {summary['pitch_max_deg']:.1f} deg,"
        f" forward {summary['forward_actual_m'] * 100:.1f}/{summary['forward_planned_m'] * 100:.1f} cm",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
