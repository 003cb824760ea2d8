"""Benchmark: the Lab's stepping loop (PD + mode + metrics) against raw ``mj_step`` on the same model.

Both loops run in this one process, alternating every 250 steps (A, B, A, B, ...) so that a busy
machine slows both alike; the figure is the median over rounds of the ratio of their step rates. The raw loop replays
the torques the Lab loop computed, so both integrate the same motion with the same contacts.
Target (docs/CONTRACT.md): Lab loop >= 0.85 x raw mj_step (0.75 landed in the first round).

    python experiments/bench_sim.py [--steps 5000] [--rounds 7] [--mode stand] [--out results/bench_sim]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mujoco  # noqa: E402

from lab.control.modes import get_mode  # noqa: E402
from lab.control.pd import PDGains  # noqa: E402
from lab.control.rollout import Rollout  # noqa: E402
from lab.robots.model import load_robot  # noqa: E402
from lab.runtime.session import SimSession  # noqa: E402
from lab.sim.mujoco_engine import MujocoEngine  # noqa: E402

TARGET = 0.85  # Lab loop / raw mj_step (docs/CONTRACT.md)


def record_ctrl(robot, mode, steps):
    """The torques the Lab loop applies at each step (an untimed run), for the raw replay."""
    eng = MujocoEngine(robot)
    ro = Rollout(eng, PDGains.for_robot(robot), get_mode(mode, robot))
    ctrl = np.empty((steps, robot.model.nu))
    for i in range(steps):
        ro.step()
        ctrl[i] = eng.data.ctrl
    return ctrl


def one_round(robot, mode, ctrl, chunk, sample_every):
    """Lab loop and raw loop, alternating in chunks of ``chunk`` steps; returns their step rates.

    The Lab loop is the Lab's own runner (:class:`SimSession`, a ``RealtimeRunner``): each chunk is one
    ``advance``, the code its thread runs under the lock (ticks, the sample every ``sample_every`` steps,
    the divergence check and the state copy for the renderer)."""
    sess = SimSession(robot, mode=mode)
    eng = sess.engine
    m = robot.model
    d = mujoco.MjData(m)
    d.qpos[:] = robot.init_qpos
    mujoco.mj_forward(m, d)
    step, dctrl = mujoco.mj_step, d.ctrl
    t_lab = t_raw = 0.0
    n = len(ctrl)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        t0 = time.thread_time()
        sess.advance((stop - start) * eng.dt)
        t1 = time.thread_time()
        for i in range(start, stop):
            dctrl[:] = ctrl[i]
            step(m, d)
        t2 = time.thread_time()
        t_lab += t1 - t0
        t_raw += t2 - t1
    assert np.allclose(d.qpos, eng.data.qpos), "the raw replay must follow the same trajectory"
    assert sess.sim_info()["state"] == "running" and len(sess.history) > 0
    return n / t_lab, n / t_raw


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--chunk", type=int, default=250, help="steps per alternation between the two loops")
    ap.add_argument("--mode", default="stand")
    ap.add_argument("--seed", type=int, default=0, help="unused: the simulation is deterministic")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_sim")
    args = ap.parse_args()
    robot = load_robot()
    sample_every = SimSession(robot)._every  # the Lab's metrics rate
    ctrl = record_ctrl(robot, args.mode, args.steps)
    lab_rates, raw_rates = [], []
    for r in range(args.rounds):
        lab, raw = one_round(robot, args.mode, ctrl, args.chunk, sample_every)
        lab_rates.append(lab)
        raw_rates.append(raw)
        print(
            f"round {r + 1}: lab {lab:8.0f} steps/s   raw mj_step {raw:8.0f} steps/s   ratio {lab / raw:.3f}",
            flush=True,
        )
    ratios = np.array(lab_rates) / np.array(raw_rates)
    summary = {
        "mode": args.mode,
        "steps_per_round": args.steps,
        "rounds": args.rounds,
        "metrics_every_steps": sample_every,
        "lab_steps_per_s_median": float(np.median(lab_rates)),
        "raw_mj_step_per_s_median": float(np.median(raw_rates)),
        "ratio_median": float(np.median(ratios)),
        "ratio_min": float(ratios.min()),
        "realtime_headroom_x": float(np.median(lab_rates) * robot.model.opt.timestep),
        "target_ratio": TARGET,
        "pass": bool(np.median(ratios) >= TARGET),
        "mujoco": mujoco.__version__,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
