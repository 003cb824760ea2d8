"""Foot IK: damped least squares converges on every swing target; a truncated pseudo-inverse does not.

For both legs, with the pelvis at its standing pose, every validation target (lift to 100 mm,
reach forward 30 and 60 mm, back, their combinations, a toe-out and a rolled foot) is solved by
:class:`lab.walking.ik.LegIK` (damped least squares on the MuJoCo Jacobian, lambda 1e-6, clamped
step, flat-foot knee seeds, converged when the end-effector error is below 2 mm). The same
targets are then given to the pitfall: a pseudo-inverse truncated at rcond 0.05, run for the
same number of iterations from one seed, which returns without complaint. The figures show the
errors per target, the convergence histories, the smallest-to-largest singular value ratio of
the leg Jacobian against the knee angle (why the truncation drops the vertical direction) and
the solved leg poses. Writes ``summary.json``, ``ik_targets.csv``, ``ik_errors.png``,
``ik_convergence.png`` and ``ik_poses.png``.

    python experiments/02_foot_ik.py [--model PATH] [--seed 0] [--out results/02_foot_ik]
"""

import argparse
import csv
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lab.robots.model import load_robot  # noqa: E402
from lab.walking.geometry import SIDES, measure_geometry  # noqa: E402
from lab.walking.ik import VALIDATION_TARGETS, IKConfig, LegIK, flat_seed, target_pose  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="URDF/MJCF (default: the built-in Q1)")
    ap.add_argument("--seed", type=int, default=0, help="recorded; the solver is deterministic")
    ap.add_argument("--out", default=str(HERE.parent / "results" / "02_foot_ik"))
    args = ap.parse_args(argv)
    np.random.seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    robot = load_robot(args.model)
    geo = measure_geometry(robot)
    cfg = IKConfig()
    ik = LegIK(robot, geo, cfg)
    ik.set_pelvis(robot.init_qpos[:3], robot.init_qpos[3:7])
    q_stand = [robot.q_nominal[list(leg.act)] for leg in geo.legs]
    straight_knee = cfg.seeds_knee[0]

    rows, hist, poses = [], {}, []
    dls_s = 0.0
    for side, leg in enumerate(geo.legs):
        for tgt in VALIDATION_TARGETS:
            p, quat = target_pose(geo, side, tgt)
            h_dls, h_pinv = [], []
            t0 = time.perf_counter()
            dls = ik.solve(leg, p, quat, history=h_dls)
            dls_s += time.perf_counter() - t0
            pinv_s = ik.solve(leg, p, quat, q0=flat_seed(leg, straight_knee), method="pinv", history=h_pinv)
            pinv_n = ik.solve(leg, p, quat, q0=q_stand[side], method="pinv")
            if side == 0:
                hist[tgt.name] = (h_dls, h_pinv)
                poses.append((tgt, p, dls.q, ik.foot_pose(leg, pinv_s.q)[0]))
            rows.append(
                {
                    "leg": SIDES[side],
                    "target": tgt.name,
                    "dx_mm": round(1000 * tgt.dx, 1),
                    "dy_mm": round(1000 * tgt.dy, 1),
                    "dz_mm": round(1000 * tgt.dz, 1),
                    "yaw_deg": round(float(np.degrees(tgt.yaw)), 2),
                    "roll_deg": round(float(np.degrees(tgt.roll)), 2),
                    "dls_error_mm": round(dls.error_mm, 6),
                    "dls_converged": dls.converged,
                    "dls_iters": dls.iters,
                    "dls_seed_knee_rad": cfg.seeds_knee[dls.seed] if dls.seed >= 0 else None,
                    "dls_knee_rad": round(float(dls.q[leg.knee]), 4),
                    "pinv_straight_error_mm": round(pinv_s.error_mm, 4),
                    "pinv_stand_error_mm": round(pinv_n.error_mm, 4),
                }
            )

    # why the truncation fails: smallest / largest singular value of the 6x6 leg Jacobian
    knees = np.linspace(0.02, 2.0, 100)
    ratio = []
    leg = geo.legs[0]
    for k in knees:
        ik._fk(leg, flat_seed(leg, k))
        s = np.linalg.svd(ik._jacobian(leg), compute_uv=False)
        ratio.append(s[-1] / s[0])
    ratio = np.array(ratio)
    above = knees[ratio >= cfg.rcond]
    knee_rcond = float(above[0]) if len(above) else None

    dls_err = np.array([r["dls_error_mm"] for r in rows])
    lift_rows = [r for r in rows if r["dz_mm"] > 0]
    pinv_fail = [r for r in rows if r["pinv_straight_error_mm"] >= 1000 * cfg.tol]
    summary = {
        "robot": robot.identity_dict(),
        "seed": args.seed,
        "targets": len(rows),
        "tol_mm": 1000 * cfg.tol,
        "damping": cfg.damping,
        "max_step_rad": cfg.max_step,
        "max_error_mm": round(float(dls_err.max()), 6),
        "all_converged": all(r["dls_converged"] for r in rows),
        "dls_iters_max": max(r["dls_iters"] for r in rows),
        "dls_iters_median": float(np.median([r["dls_iters"] for r in rows])),
        "dls_solve_ms_mean": round(1000 * dls_s / len(rows), 3),
        "pinv_rcond": cfg.rcond,
        "pinv_seed_knee_rad": straight_knee,
        "pinv_failed": len(pinv_fail),
        "pinv_failed_lift_targets": sum(1 for r in lift_rows if r["pinv_straight_error_mm"] >= 1000 * cfg.tol),
        "lift_targets": len(lift_rows),
        "pinv_max_error_mm": round(max(r["pinv_straight_error_mm"] for r in rows), 3),
        "pinv_from_standing_failed_lift_targets": sum(
            1 for r in lift_rows if r["pinv_stand_error_mm"] >= 1000 * cfg.tol
        ),
        "sigma_ratio_at_seed_knee": round(float(np.interp(straight_knee, knees, ratio)), 5),
        "sigma_ratio_at_standing_knee": round(float(np.interp(abs(q_stand[0][leg.knee]), knees, ratio)), 5),
        "knee_where_sigma_ratio_reaches_rcond_rad": None if knee_rcond is None else round(knee_rcond, 3),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with open(out / "ik_targets.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot_errors(out / "ik_errors.png", rows, cfg)
    plot_convergence(out / "ik_convergence.png", hist, knees, ratio, cfg, summary)
    plot_poses(out / "ik_poses.png", robot, geo, ik, poses)
    print(json.dumps({k: v for k, v in summary.items() if k != "robot"}, indent=2))
    return summary


def plot_errors(path, rows, cfg) -> None:
    left = [r for r in rows if r["leg"] == "left"]
    right = [r for r in rows if r["leg"] == "right"]
    names = [r["target"] for r in left]
    y = np.arange(len(names))
    floor = 1e-7  # [mm] so that a zero error still shows on the log axis
    fig, ax = plt.subplots(figsize=(11, 6.5))
    h = 0.2
    ax.barh(y - 1.5 * h, [max(r["dls_error_mm"], floor) for r in left], h, color="C0", label="DLS, left leg")
    ax.barh(y - 0.5 * h, [max(r["dls_error_mm"], floor) for r in right], h, color="C9", label="DLS, right leg")
    ax.barh(
        y + 0.5 * h,
        [max(r["pinv_straight_error_mm"], floor) for r in left],
        h,
        color="C3",
        label=f"pinv rcond {cfg.rcond}, knee seed {cfg.seeds_knee[0]} rad",
    )
    ax.barh(
        y + 1.5 * h,
        [max(r["pinv_stand_error_mm"], floor) for r in left],
        h,
        color="C1",
        label=f"pinv rcond {cfg.rcond}, from the standing pose",
    )
    ax.axvline(1000 * cfg.tol, color="k", ls="--", lw=1, label=f"converged below {1000 * cfg.tol:g} mm")
    ax.set_xscale("log")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("end-effector error (largest sole-corner distance) [mm]")
    ax.set_title(
        f"foot IK on {len(rows)} targets: DLS max {max(r['dls_error_mm'] for r in rows):.1e} mm; "
        f"pinv fails {sum(r['pinv_straight_error_mm'] >= 1000 * cfg.tol for r in rows)} of {len(rows)}"
    )
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_convergence(path, hist, knees, ratio, cfg, summary) -> None:
    fig, ax = plt.subplots(1, 2, figsize=(13, 4.8))
    a = ax[0]
    for i, name in enumerate(
        ("lift 100 mm", "forward 60 mm", "forward 60 + lift 100", "lift 50, out 20 mm, roll 5 deg")
    ):
        h_dls, h_pinv = hist[name]
        a.semilogy(np.maximum(1000 * np.array(h_dls), 1e-8), "o-", color=f"C{i}", ms=3, label=f"DLS: {name}")
        a.semilogy(np.maximum(1000 * np.array(h_pinv), 1e-8), "--", color=f"C{i}", lw=1, label=f"pinv: {name}")
    a.axhline(1000 * cfg.tol, color="k", ls=":", lw=1)
    a.set_xlabel("iteration")
    a.set_ylabel("end-effector error [mm]")
    a.set_title("convergence (left leg): DLS reaches < 1e-3 mm; pinv stalls")
    a.legend(fontsize=7)
    a.grid(alpha=0.3)
    a = ax[1]
    a.semilogy(knees, ratio, "C0", label="sigma_min / sigma_max of the 6x6 leg Jacobian")
    a.axhline(cfg.rcond, color="C3", ls="--", label=f"rcond {cfg.rcond}: below it pinv drops the direction")
    a.axvline(summary["pinv_seed_knee_rad"], color="0.5", ls=":", label="pinv seed knee")
    if summary["knee_where_sigma_ratio_reaches_rcond_rad"] is not None:
        a.axvline(summary["knee_where_sigma_ratio_reaches_rcond_rad"], color="C3", ls=":", lw=1)
    a.set_xlabel("knee bend, flat foot [rad]")
    a.set_ylabel("singular value ratio")
    a.set_title("near the straight knee the vertical direction is nearly singular")
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_poses(path, robot, geo, ik, poses) -> None:
    m = robot.model
    leg = geo.legs[0]
    jid = [int(m.dof_jntid[leg.dof[i]]) for i in (leg.hip_pitch, leg.knee)]
    shown = ("stand", "lift 100 mm", "forward 60 mm", "back 30 + lift 50", "forward 60 + lift 100")
    fig, ax = plt.subplots(figsize=(10, 6.5))
    i = -1
    for tgt, p, q, p_pinv in poses:
        if tgt.name not in shown:
            continue
        i += 1
        ik._fk(leg, q)
        d = ik.data
        pts = np.array([d.xanchor[jid[0]], d.xanchor[jid[1]], d.xpos[leg.foot_body]])
        R = d.xmat[leg.foot_body].reshape(3, 3)
        heel = d.xpos[leg.foot_body] + R @ (-geo.heel_offset, 0, -geo.sole_depth)
        toe = d.xpos[leg.foot_body] + R @ (geo.toe_offset, 0, -geo.sole_depth)
        c = f"C{i % 10}"
        ax.plot(pts[:, 0], pts[:, 2], "o-", color=c, lw=2, ms=4, label=tgt.name)
        ax.plot([heel[0], toe[0]], [heel[2], toe[2]], "-", color=c, lw=3)
        ax.plot(p[0], p[2], "+", color="k", ms=10)
        ax.plot(p_pinv[0], p_pinv[2], "x", color="C3", ms=7)
    ax.plot([], [], "k+", label="target ankle")
    ax.plot([], [], "x", color="C3", label="where pinv left the ankle")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("z [m]")
    ax.set_title("left leg: DLS solutions (side view), pelvis at the standing pose")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
