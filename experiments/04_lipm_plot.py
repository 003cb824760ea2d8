"""The bounded LIPM solution for the whole gait plan, against naive backward integration.

The footstep planner's ZMP reference for the walk (steps, step length and timing as in
``03_walk.py``) is turned into a centre-of-mass trajectory for x and y by two stable sweeps
(capture point backward from the final ZMP, CoM forward). The same reference integrated naively
backward (``x'' = omega^2 (x - p)`` from the final ZMP at rest) diverges as
``e^(omega (T - t))``. The summary gives, for the naive method, the fraction of samples that left
the ZMP range by more than 10 mm and how far they went; for the bounded one, its range against
the ZMP range, its final value against the final ZMP, and its error against the closed-form
solution of a single ZMP step. Writes ``summary.json``, ``lipm_plan.csv``,
``lipm_divergence.png`` (symlog axis) and ``gait_plan.png``.

    python experiments/04_lipm_plot.py [--steps 6] [--step-len 0.04] [--seed 0] [--out results/04_lipm_plot]
"""

import argparse
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from lab.robots.model import load_robot  # noqa: E402
from lab.walking.geometry import measure_geometry  # noqa: E402
from lab.walking.lipm import analytic_step, bounded_com, naive_backward, omega  # noqa: E402
from lab.walking.planner import FootstepPlanner, GaitParams  # noqa: E402

DIVERGED_M = 0.010  # a naive sample "diverged" when it is this far outside the ZMP range [m]


def single_step_check(z_c: float, dt: float) -> dict:
    """Bounded sweeps vs the closed form for a ZMP stepping 0 -> 0.1 m at 2 s (4 s horizon)."""
    t = np.arange(0.0, 4.0 + dt / 2, dt)
    p = np.where(t < 2.0, 0.0, 0.1)
    xa = analytic_step(t, 2.0, 0.0, 0.1, z_c)
    x, _, _ = bounded_com(p, dt, z_c, x0=xa[0])
    return {"t": t, "p": p, "analytic": xa, "bounded": x, "max_error_mm": float(1000 * np.abs(x - xa).max())}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="URDF/MJCF (default: the built-in Q1)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--step-len", type=float, default=0.04, help="[m]")
    ap.add_argument("--step-height", type=float, default=0.035, help="[m] (only recorded: the LIPM is planar)")
    ap.add_argument("--seed", type=int, default=0, help="recorded; nothing random is drawn")
    ap.add_argument("--out", default=str(HERE.parent / "results" / "04_lipm_plot"))
    args = ap.parse_args(argv)
    np.random.seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    robot = load_robot(args.model)
    geo = measure_geometry(robot)
    gait = GaitParams(step_len=args.step_len, step_height=args.step_height, steps=args.steps)
    com0 = np.array(geo.com_offset[:2]) + robot.init_qpos[:2]
    plan = FootstepPlanner(geo, gait, np.array(geo.ankle_xyz), com0)
    t, zmp, com, xi, dt, z_c = plan.t, plan.zmp, plan.com, plan.xi, gait.dt, plan.z_c
    naive = naive_backward(zmp, dt, z_c)

    lo, hi = zmp.min(0), zmp.max(0)
    outside = np.maximum(lo - naive, naive - hi)  # > 0 outside the ZMP range [m]
    finite = np.isfinite(naive)
    diverged = (~finite) | (outside > DIVERGED_M)
    b_out = np.maximum(lo - com, com - hi)
    step = single_step_check(z_c, dt)
    feet = np.array([plan.reference(tt).feet[:, :2] for tt in t])  # (n, 2, 2)

    summary = {
        "robot": robot.identity_dict(),
        "seed": args.seed,
        "steps": gait.steps,
        "step_len_m": gait.step_len,
        "plan_duration_s": round(gait.duration, 4),
        "dt_s": dt,
        "z_c_m": round(z_c, 6),
        "omega_per_s": round(omega(z_c), 6),
        "samples": len(t),
        "zmp_range_x_m": [round(float(lo[0]), 6), round(float(hi[0]), 6)],
        "zmp_range_y_m": [round(float(lo[1]), 6), round(float(hi[1]), 6)],
        "bounded_range_x_m": [round(float(com[:, 0].min()), 6), round(float(com[:, 0].max()), 6)],
        "bounded_range_y_m": [round(float(com[:, 1].min()), 6), round(float(com[:, 1].max()), 6)],
        "bounded_within_zmp_range": bool((b_out <= 1e-9).all()),
        "bounded_final_minus_final_zmp_mm": [round(float(1000 * v), 6) for v in com[-1] - zmp[-1]],
        "bounded_final_equals_final_zmp": bool(np.abs(com[-1] - zmp[-1]).max() < 1e-3),
        "bounded_max_speed_m_per_s": round(float(np.linalg.norm(plan.vel, axis=1).max()), 5),
        "naive_diverged_fraction_x": round(float(diverged[:, 0].mean()), 4),
        "naive_diverged_fraction_y": round(float(diverged[:, 1].mean()), 4),
        "naive_max_abs_m": [float(f"{v:.4g}") for v in np.nanmax(np.abs(np.where(finite, naive, np.nan)), axis=0)],
        "naive_diverged_from_s_before_end": round(float(t[-1] - t[diverged.any(1)].max()), 3)
        if diverged.any()
        else None,
        "naive_nonfinite_samples": int((~finite).sum()),
        "single_step_max_error_mm": round(step["max_error_mm"], 6),
        "single_step_within_1mm": step["max_error_mm"] < 1.0,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with open(out / "lipm_plan.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "t_s",
                "phase",
                "zmp_x_m",
                "zmp_y_m",
                "com_x_m",
                "com_y_m",
                "xi_x_m",
                "xi_y_m",
                "naive_x_m",
                "naive_y_m",
                "foot_l_x_m",
                "foot_l_y_m",
                "foot_r_x_m",
                "foot_r_y_m",
            ]
        )
        for k in range(len(t)):
            w.writerow(
                [
                    f"{t[k]:.3f}",
                    plan.phase_at(t[k]).kind,
                    *(f"{v:.6g}" for v in (*zmp[k], *com[k], *xi[k], *naive[k], *feet[k, 0], *feet[k, 1])),
                ]
            )
    plot_divergence(out / "lipm_divergence.png", t, zmp, com, naive, step, summary)
    plot_plan(out / "gait_plan.png", t, zmp, com, feet, geo, plan, summary)
    print(json.dumps({k: v for k, v in summary.items() if k != "robot"}, indent=2))
    return summary


def plot_divergence(path, t, zmp, com, naive, step, s) -> None:
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.8))
    for i, axis in enumerate("xy"):
        a = ax[i]
        a.plot(t, naive[:, i], "C3", label="naive backward integration")
        a.plot(t, com[:, i], "C0", lw=2, label="bounded (two sweeps)")
        a.plot(t, zmp[:, i], "k--", lw=1, label="ZMP reference")
        a.set_yscale("symlog", linthresh=0.1)
        a.set_xlabel("time [s]")
        a.set_ylabel(f"CoM {axis} [m] (symlog, linear within 0.1 m)")
        a.set_title(
            f"{axis}: naive diverged on {100 * s[f'naive_diverged_fraction_{axis}']:.0f} % of samples, "
            f"up to {s['naive_max_abs_m'][i]:.3g} m",
            fontsize=9,
        )
        a.legend(fontsize=8, loc="upper right")
        a.grid(alpha=0.3)
    a = ax[2]
    a.plot(step["t"], step["p"], "k--", lw=1, label="ZMP step 0 -> 0.1 m")
    a.plot(step["t"], step["analytic"], "C2", lw=4, alpha=0.5, label="closed form")
    a.plot(step["t"], step["bounded"], "C0", lw=1.2, label="bounded sweeps")
    a.set_xlabel("time [s]")
    a.set_ylabel("x [m]")
    a.set_title(f"single ZMP step: max error {step['max_error_mm']:.2e} mm", fontsize=9)
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_plan(path, t, zmp, com, feet, geo, plan, s) -> None:
    fig = plt.figure(figsize=(14, 8))
    gs = fig.add_gridspec(2, 2, width_ratios=[1.4, 1.0])
    for i, axis in enumerate("xy"):
        a = fig.add_subplot(gs[i, 0])
        a.plot(t, zmp[:, i], "k-", lw=1.2, label="ZMP reference")
        a.plot(t, com[:, i], "C0", lw=2, label="CoM (bounded LIPM)")
        a.plot(t, feet[:, 0, i], "C4", lw=1, alpha=0.8, label="left ankle")
        a.plot(t, feet[:, 1, i], "C5", lw=1, alpha=0.8, label="right ankle")
        for ph in plan.phases:
            if ph.kind == "ss":
                a.axvspan(ph.t0, ph.t1, color="0.92", zorder=0)
        a.set_ylabel(f"{axis} [m]")
        a.grid(alpha=0.3)
        if i == 0:
            a.set_title(f"gait plan: {s['steps']} steps x {s['step_len_m'] * 100:.1f} cm (shaded: single support)")
            a.legend(fontsize=8, loc="upper left")
        else:
            a.set_xlabel("time [s]")
    a = fig.add_subplot(gs[:, 1])
    holds = [(side, plan.start[side]) for side in (0, 1)]
    holds += [(1 - plan.support_of(i), plan.holds[i]) for i in range(plan.p.steps)]
    for n, (side, (x, y)) in enumerate(holds):
        c = "C4" if side == 0 else "C5"
        a.add_patch(
            Rectangle(
                (x - geo.heel_offset, y - geo.foot_width / 2), geo.foot_length, geo.foot_width, fc="none", ec=c, lw=1.2
            )
        )
        a.plot(x, y, "+", color=c, ms=8)
        a.text(
            x, y + (0.03 if side == 0 else -0.035), "start" if n < 2 else f"{n - 1}", color=c, fontsize=8, ha="center"
        )
    a.plot(zmp[:, 0], zmp[:, 1], "k-", lw=1, label="ZMP")
    a.plot(com[:, 0], com[:, 1], "C0", lw=2, label="CoM")
    a.set_aspect("equal")
    a.set_xlabel("x [m]")
    a.set_ylabel("y [m]")
    a.set_ylim(-0.15, 0.15)
    a.set_title("from above: footholds (+ ankle, step no.), ZMP, CoM", fontsize=10)
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
