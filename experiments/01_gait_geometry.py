"""Gait geometry measured from the model: foot, stance, leg and centre of mass.

Shows that the numbers a gait is planned with (foot length and width, heel and toe offsets from
the ankle, lateral ankle spacing, upright pelvis height, leg length, CoM height and its offset
from the pelvis) come out of the compiled MuJoCo model, not out of a spec sheet, and compares
them with the built-in Q1's definition. Writes ``summary.json``, ``geometry.csv`` and
``gait_geometry.png`` (the foot from below and the stance from above and from the side).

    python experiments/01_gait_geometry.py [--model PATH] [--seed 0] [--out results/01_gait_geometry]
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
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Circle, Rectangle  # noqa: E402

from lab.robots.model import load_robot  # noqa: E402
from lab.walking.geometry import SCALAR_FIELDS, measure_geometry  # noqa: E402

# The built-in Q1's definition (lab/robots/q1/make_urdf.py and docs/CONTRACT.md) [m]
Q1_SPEC = {
    "foot_length": 0.145,
    "foot_width": 0.046,
    "heel_offset": 0.050,
    "toe_offset": 0.095,
    "sole_depth": 0.035,
    "ankle_spacing": 0.181,
    "leg_length": 0.400,
    "thigh": 0.200,
    "shank": 0.200,
}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="URDF/MJCF (default: the built-in Q1)")
    ap.add_argument("--seed", type=int, default=0, help="recorded; the measurement draws nothing random")
    ap.add_argument("--out", default=str(HERE.parent / "results" / "01_gait_geometry"))
    args = ap.parse_args(argv)
    np.random.seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    robot = load_robot(args.model)
    geo = measure_geometry(robot)
    rows = []
    for key in SCALAR_FIELDS:
        v = float(getattr(geo, key))
        spec = Q1_SPEC.get(key) if robot.builtin else None
        rows.append(
            {
                "quantity": key,
                "measured_m": round(v, 6),
                "defined_m": spec,
                "diff_mm": None if spec is None else round(1000 * (v - spec), 4),
            }
        )
    for axis, v in zip("xyz", geo.com_offset):
        rows.append({"quantity": f"com_offset_{axis}", "measured_m": round(v, 6), "defined_m": None, "diff_mm": None})
    checked = [r for r in rows if r["diff_mm"] is not None]
    summary = {
        "robot": robot.identity_dict(),
        "seed": args.seed,
        **geo.to_dict(),
        "total_mass_kg": round(robot.total_mass, 4),
        "max_abs_diff_from_definition_mm": round(max(abs(r["diff_mm"]) for r in checked), 4) if checked else None,
        "matches_definition_within_1mm": all(abs(r["diff_mm"]) <= 1.0 for r in checked) if checked else None,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with open(out / "geometry.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(out / "gait_geometry.png", robot, geo)
    print(json.dumps({k: v for k, v in summary.items() if k != "robot"}, indent=2))
    return summary


def plot(path: Path, robot, geo) -> None:
    m = robot.model
    d = mujoco.MjData(m)
    d.qpos[:] = robot.init_qpos
    mujoco.mj_forward(m, d)
    fig, ax = plt.subplots(1, 3, figsize=(15, 5.2), gridspec_kw={"width_ratios": [1.1, 1.0, 0.9]})

    # 1) the left foot from below, in its ankle frame
    a = ax[0]
    a.add_patch(
        Rectangle(
            (-geo.heel_offset, -geo.foot_width / 2),
            geo.foot_length,
            geo.foot_width,
            fc="0.85",
            ec="k",
            lw=1.2,
            label="sole",
        )
    )
    foot = geo.legs[0].foot_body
    R_f, p_f = d.xmat[foot].reshape(3, 3), d.xpos[foot]
    for g in range(m.ngeom):  # the foot's collision geoms, drawn where the model puts them
        if m.geom_bodyid[g] != foot or not (m.geom_contype[g] or m.geom_conaffinity[g]):
            continue
        c = (d.geom_xpos[g] - p_f) @ R_f
        a.add_patch(Circle((c[0], c[1]), float(m.geom_rbound[g]), fc="C1", ec="k", lw=0.6))
    a.plot(0, 0, "k+", ms=14, mew=2, label="ankle")
    a.plot(geo.balance_x, 0, "C2o", ms=8, label=f"balance point (+{geo.balance_x * 1000:.1f} mm)")
    a.annotate("", (geo.toe_offset, -0.034), (-geo.heel_offset, -0.034), arrowprops={"arrowstyle": "<->"})
    a.text(geo.balance_x, -0.04, f"{geo.foot_length * 1000:.1f} mm", ha="center", va="top")
    a.annotate("", (-0.058, geo.foot_width / 2), (-0.058, -geo.foot_width / 2), arrowprops={"arrowstyle": "<->"})
    a.text(-0.061, 0, f"{geo.foot_width * 1000:.1f} mm", rotation=90, ha="right", va="center")
    a.annotate("", (0, 0.031), (-geo.heel_offset, 0.031), arrowprops={"arrowstyle": "<->"})
    a.text(-geo.heel_offset / 2, 0.033, f"heel {geo.heel_offset * 1000:.1f}", ha="center", va="bottom", fontsize=8)
    a.annotate("", (geo.toe_offset, 0.031), (0, 0.031), arrowprops={"arrowstyle": "<->"})
    a.text(geo.toe_offset / 2, 0.033, f"toe {geo.toe_offset * 1000:.1f}", ha="center", va="bottom", fontsize=8)
    a.set_xlim(-0.08, 0.11)
    a.set_ylim(-0.085, 0.05)
    a.set_aspect("equal")
    a.set_title("left foot sole in its ankle frame; contact spheres in orange")
    a.set_xlabel("x [m]")
    a.set_ylabel("y [m]")
    a.legend(loc="lower right", fontsize=8)

    # 2) the stance from above
    a = ax[1]
    for side, leg in enumerate(geo.legs):
        p = np.array(geo.ankle_xyz[side])
        a.add_patch(
            Rectangle(
                (p[0] - geo.heel_offset, p[1] - geo.foot_width / 2), geo.foot_length, geo.foot_width, fc="0.85", ec="k"
            )
        )
        a.plot(p[0], p[1], "k+", ms=12, mew=2)
        a.plot(p[0] + geo.balance_x, p[1], "C2o", ms=6)
    com = d.subtree_com[robot.root_body]
    pel = d.xpos[robot.root_body]
    a.plot(pel[0], pel[1], "s", color="C0", ms=9, label="pelvis")
    a.plot(com[0], com[1], "*", color="C3", ms=14, label="CoM")
    ya, yb = geo.ankle_xyz[0][1], geo.ankle_xyz[1][1]
    a.annotate("", (-0.07, ya), (-0.07, yb), arrowprops={"arrowstyle": "<->"})
    a.text(-0.075, 0, f"ankles {geo.ankle_spacing * 1000:.1f} mm apart", rotation=90, ha="right", va="center")
    a.set_xlim(-0.12, 0.14)
    a.set_ylim(-0.15, 0.15)
    a.set_aspect("equal")
    a.set_title("stance from above (standing pose)")
    a.set_xlabel("x [m]")
    a.set_ylabel("y [m]")
    a.legend(loc="lower right", fontsize=8)

    # 3) the left leg from the side
    a = ax[2]
    leg = geo.legs[0]
    jid = [int(m.dof_jntid[leg.dof[i]]) for i in (leg.hip_pitch, leg.knee)]
    hip, knee, ankle = d.xanchor[jid[0]], d.xanchor[jid[1]], d.xpos[leg.foot_body]
    a.plot([hip[0], knee[0], ankle[0]], [hip[2], knee[2], ankle[2]], "o-", color="0.3", lw=3, ms=7)
    a.plot([ankle[0] - geo.heel_offset, ankle[0] + geo.toe_offset], [ankle[2] - geo.sole_depth] * 2, "k-", lw=4)
    a.plot([pel[0]], [pel[2]], "s", color="C0", ms=10, label=f"pelvis z {pel[2]:.4f} m")
    a.plot([com[0]], [com[2]], "*", color="C3", ms=14, label=f"CoM z {com[2]:.4f} m")
    a.axhline(0, color="k", lw=0.8)
    a.text(knee[0] + 0.01, (hip[2] + knee[2]) / 2, f"thigh {geo.thigh * 1000:.0f} mm", fontsize=8)
    a.text(knee[0] + 0.01, (knee[2] + ankle[2]) / 2, f"shank {geo.shank * 1000:.0f} mm", fontsize=8)
    a.text(ankle[0] + 0.02, ankle[2] - 0.02, f"sole {geo.sole_depth * 1000:.0f} mm below ankle", fontsize=8)
    a.set_xlim(-0.15, 0.2)
    a.set_ylim(-0.02, 0.5)
    a.set_aspect("equal")
    a.set_title("left leg from the side (nominal pose)")
    a.set_xlabel("x [m]")
    a.set_ylabel("z [m]")
    a.legend(loc="upper right", fontsize=8)
    fig.suptitle(f"{robot.path.name}: gait geometry measured from the model ({robot.total_mass:.2f} kg)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
