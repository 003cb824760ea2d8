"""06 — the feedback walker: 30 steps forward, stop and stand, a 90 deg turn on the spot, a side-step.

Runs :func:`lab.walking.feedback_run.run_feedback_walk` (DCM tracking, ZMP feedback, step adjustment,
the joint PD innermost) in MuJoCo or PyBullet, or, with ``--controller pd``, the joint-PD baseline walk of
03_walk.py (MuJoCo; it falls). Writes ``DIR/summary.json`` (at least ``controller``, ``engine``,
``steps_completed``, ``fell``, ``mean_speed_mps``, ``max_pitch_deg``; with the feedback walker also each
scenario under ``scenarios``), and per scenario ``DIR/<scenario>/{summary.json, walk_trace.csv,
walk_curves.png}``.

    python experiments/06_feedback_walk.py --out results/06_feedback_walk [--controller feedback|pd]
        [--engine mujoco|pybullet] [--steps 30] [--vx 0.15] [--scenarios walk,turn,side]
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.errors import LabError  # noqa: E402

SCENARIOS = ("walk", "turn", "side")
KEYS = ("controller", "engine", "steps_completed", "fell", "mean_speed_mps", "max_pitch_deg")


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--controller", default="feedback", choices=("feedback", "pd"))
    ap.add_argument("--engine", default="mujoco", choices=("mujoco", "pybullet"))
    ap.add_argument("--steps", type=int, default=30, help="steps of the forward walk (default 30)")
    ap.add_argument("--vx", type=float, default=0.15, help="forward speed command [m/s] (default 0.15)")
    ap.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"comma list of {', '.join(SCENARIOS)} (feedback only)"
    )
    ap.add_argument("--model", default=None, help="robot model file (default: the built-in Q1)")
    a = ap.parse_args(argv)
    if not 1 <= a.steps <= 500:
        ap.error(f"--steps must be in 1..500, got {a.steps}")
    if not -0.3 <= a.vx <= 0.3:
        ap.error(f"--vx must be within +-0.3 m/s (the walker's bound), got {a.vx}")
    a.scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    bad = [s for s in a.scenarios if s not in SCENARIOS]
    if bad or not a.scenarios:
        ap.error(f"unknown scenario(s) {bad or a.scenarios}; choose from {', '.join(SCENARIOS)}")
    if a.controller == "pd" and a.engine != "mujoco":
        ap.error("the PD baseline walk (03_walk.py) runs in MuJoCo only; use --engine mujoco")
    return a


def run_feedback(a, robot, out: Path) -> dict:
    from lab.walking.feedback_run import run_feedback_walk

    runs = {}
    if "walk" in a.scenarios:  # forward, then a zero command: stop and stand
        runs["walk"] = run_feedback_walk(robot, a.engine, vx=a.vx, steps=a.steps, out_dir=out / "walk")
    if "turn" in a.scenarios:  # yaw rate until the heading has turned 90 deg, then stop
        runs["turn"] = run_feedback_walk(
            robot, a.engine, vx=0.0, yaw_rate=0.5, steps=60, turn_to_deg=90.0, out_dir=out / "turn"
        )
    if "side" in a.scenarios:  # 10 steps to the left at 0.05 m/s
        runs["side"] = run_feedback_walk(robot, a.engine, vx=0.0, vy=0.05, steps=10, out_dir=out / "side")
    main = runs.get("walk") or next(iter(runs.values()))
    summary = {k: main[k] for k in KEYS}
    summary.update(
        {
            "stands_at_end": main["stands_at_end"],
            "max_roll_deg": main["max_roll_deg"],
            "command": main["command"],
            "controller_ms_mean": main["controller_ms_mean"],
            "rtf": main["rtf"],
            "scenarios": {
                name: {
                    **{k: s[k] for k in KEYS},
                    "stands_at_end": s["stands_at_end"],
                    "heading_change_deg": s["heading_change_deg"],
                    "distance_m": s["distance_m"],
                    "max_roll_deg": s["max_roll_deg"],
                    "command": s["command"],
                }
                for name, s in runs.items()
            },
        }
    )
    return summary


def run_pd(a, robot, out: Path) -> dict:
    from lab.walking.run import run_walk

    period = 0.55 + 0.35  # the baseline's single + double support [s]
    s = run_walk(step_len=a.vx * period / 2, step_height=0.035, steps=a.steps, robot=robot, out_dir=out / "walk")
    walked = s["fall_time_s"] if s["fell"] else s["sim_duration_s"]
    return {
        "controller": "pd",
        "engine": "mujoco",
        "steps_completed": s["steps_before_fall"],
        "fell": s["fell"],
        "mean_speed_mps": round(s["forward_actual_m"] / walked, 4) if walked else None,
        "max_pitch_deg": s["pitch_max_deg"],
        "fall_time_s": s["fall_time_s"],
        "step_len_m": s["step_len_m"],
    }


def main(argv=None) -> int:
    a = parse(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from lab.robots.model import load_robot

    t0 = time.perf_counter()
    try:
        robot = load_robot(a.model)
        summary = run_feedback(a, robot, out) if a.controller == "feedback" else run_pd(a, robot, out)
    except LabError as exc:
        print(f"error: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""), file=sys.stderr)
        return 2
    summary["wall_s"] = round(time.perf_counter() - t0, 2)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"{summary['controller']} walk in {summary['engine']}: {summary['steps_completed']} steps, "
        f"{'FELL' if summary['fell'] else 'no fall'}, mean speed {summary['mean_speed_mps']} m/s, "
        f"|pitch| max {summary['max_pitch_deg']} deg"
    )
    for name, s in summary.get("scenarios", {}).items():
        print(
            f"  {name:5s} {s['steps_completed']:3d} steps  fell={s['fell']}  stands={s['stands_at_end']}"
            f"  speed={s['mean_speed_mps']}  turned={s['heading_change_deg']} deg  moved={s['distance_m']} m"
        )
    print(f"wrote {out / 'summary.json'} ({summary['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
