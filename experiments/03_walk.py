"""The closed-loop walk in MuJoCo: does joint-position PD carry the planned gait?

Runs :func:`lab.walking.walk.run_walk`: footstep state machine (double support 0.40 s, single
0.55 s, double 0.35 s), ZMP on the support foot's balance point, bounded LIPM CoM, cosine swing
with sine lift, footholds re-placed from the measured support foot, online foot IK at 100 Hz
(warm-started), CoM correction clipped at 3 cm, and the 22-joint PD at 1 kHz with the robot's
gains. Writes ``summary.json`` (``z_min`` [m], ``pitch_max_deg``, planned and actual forward
displacement [m], ``fell``, ``fall_time_s``, ``stable`` by the rule pelvis >= 0.35 m and
|pitch| <= 45 deg scaled to the model's standing height, the IK error, the CoM tracking error and
where each swing foot really landed), ``walk_trace.csv`` (100 Hz) and ``walk_curves.png``.

    python experiments/03_walk.py --steps 6 --step-len 0.04 --step-height 0.035 [--seed 0] [--out results/03_walk]
"""

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from lab.robots.model import load_robot  # noqa: E402
from lab.walking.run import run_walk  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="URDF/MJCF (default: the built-in Q1)")
    ap.add_argument("--steps", type=int, default=6, help="number of steps (the last closes the feet)")
    ap.add_argument("--step-len", type=float, default=0.04, help="swing lands this far ahead of the support foot [m]")
    ap.add_argument("--step-height", type=float, default=0.035, help="swing apex [m]")
    ap.add_argument("--seed", type=int, default=0, help="seeds numpy; the simulation itself is deterministic")
    ap.add_argument("--out", default=str(HERE.parent / "results" / "03_walk"))
    args = ap.parse_args(argv)
    if args.steps < 1 or args.step_len < 0 or args.step_height < 0:
        ap.error("--steps must be >= 1, --step-len and --step-height >= 0")
    robot = load_robot(args.model) if args.model else None
    summary = run_walk(
        step_len=args.step_len,
        step_height=args.step_height,
        steps=args.steps,
        seed=args.seed,
        out_dir=Path(args.out),
        robot=robot,
    )
    print(json.dumps({k: v for k, v in summary.items() if k != "robot"}, indent=2))
    print(f"wrote {Path(args.out) / 'summary.json'}, walk_trace.csv, walk_curves.png")
    return summary


if __name__ == "__main__":
    main()
