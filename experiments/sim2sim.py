"""Sim2Sim: the same humanoid, PD law, gains and targets in MuJoCo and PyBullet, headless.

For each mode asked for, both engines start from the same state and advance in lockstep (one
physics step of 1 ms each, the same PD torque law on each engine's own state). The script writes
``summary.json`` (per engine: steady-state tracking error, time to fall; divergence between the
engines: pelvis height difference and joint-angle RMS difference over time), one CSV per mode
with every 10 ms sample, and one PNG per mode. In ``walk`` (the feedback walker in both engines) the
summary also holds the per-step divergence (touchdowns paired by step index: touchdown Δt, foothold
Δx/Δy/Δxy, upright; ``Lockstep.step_divergence``), also written as ``sim2sim_walk_steps.csv``.

    python experiments/sim2sim.py                       # every mode (stand squat push zero walk), 10 s each
    python experiments/sim2sim.py --mode zero --seconds 3 --out /tmp/s2s
    python experiments/sim2sim.py --mode walk --seconds 8

``--init-noise`` adds the same random joint-angle offsets (from ``--seed``) to both engines' start
state, to see whether they stay together from a perturbed start.
"""

import argparse
import csv
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.runtime.lockstep import Lockstep, load_sim2sim_robot  # noqa: E402
from lab.runtime.modes import SIM2SIM_MODES as MODES  # noqa: E402  (stand, squat, push, zero, walk)

SAMPLE_HZ = 100.0
ENGINE_KEYS = ("pelvis_z", "forward_x", "pitch_deg", "roll_deg", "max_joint_err", "support")
DIV_KEYS = ("pelvis_dz", "joint_rms", "joint_max", "base_dxy", "pitch_diff_deg")
STEP_COLUMNS = ("step", "side", "paired", "dt_s", "contact_dt_s", "dx_m", "dy_m", "dxy_m")


def run_mode(robot, mode: str, seconds: float) -> tuple[list, dict, float]:
    """One lockstep run: (samples, engine info (+ ``steps``: the walk's per-step divergence), wall time [s])."""
    ls = Lockstep(robot, mode, sample_hz=SAMPLE_HZ, history_s=seconds + 1.0)
    try:
        t0 = time.perf_counter()
        ls.advance(seconds)
        wall = time.perf_counter() - t0
        info = {"engines": ls.engine_info(), "mass_warning": ls.masses["mass_warning"]}
        if mode == "walk":
            info["steps"] = ls.step_divergence()
        return list(ls.history), info, wall
    finally:
        ls.close()


def _stats(x: np.ndarray) -> dict:
    return {"mean": float(np.mean(x)), "max": float(np.max(x)), "final": float(x[-1])}


def summarize(samples: list, robot, mode: str, seconds: float) -> dict:
    t = np.array([s["sim_time"] for s in samples])
    steady = t >= seconds / 2  # steady state: the second half of the run
    out = {"engines": {}, "steady_state_window_s": [float(t[steady][0]), float(t[-1])]}
    for eng in samples[0]["engines"]:
        series = {k: np.array([s["engines"][eng][k] for s in samples]) for k in ENGINE_KEYS if k != "support"}
        err = series["max_joint_err"][steady]
        out["engines"][eng] = {
            "steady_state_max_joint_err_rad": {"mean": float(err.mean()), "max": float(err.max())},
            "steady_state_pelvis_z_m": float(series["pelvis_z"][steady].mean()),
            "steady_state_pitch_deg": float(series["pitch_deg"][steady].mean()),
            "pelvis_z_drop_max_m": float(robot.standing_height - series["pelvis_z"].min()),
            "forward_x_final_m": float(series["forward_x"][-1]),
            "time_to_fall_s": samples[-1]["engines"][eng]["fall_time"],
        }
    div = {k: np.array([s["divergence"][k] for s in samples]) for k in DIV_KEYS}
    out["divergence"] = {
        "pelvis_dz_m": {**_stats(np.abs(div["pelvis_dz"])), "final_signed": float(div["pelvis_dz"][-1])},
        "joint_rms_rad": _stats(div["joint_rms"]),
        "joint_max_rad": _stats(div["joint_max"]),
        "base_dxy_m": _stats(div["base_dxy"]),
        "pitch_diff_deg": _stats(np.abs(div["pitch_diff_deg"])),
    }
    every = max(1, int(round(0.5 * SAMPLE_HZ)))  # divergence over time, every 0.5 s
    out["divergence_over_time"] = [
        {"t": float(t[i]), "pelvis_dz_m": float(div["pelvis_dz"][i]), "joint_rms_rad": float(div["joint_rms"][i])}
        for i in range(0, len(t), every)
    ]
    return out


def write_csv(path: Path, samples: list) -> None:
    engines = list(samples[0]["engines"])
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sim_time"] + [f"{e}_{k}" for e in engines for k in ENGINE_KEYS] + [f"div_{k}" for k in DIV_KEYS])
        for s in samples:
            row = [s["sim_time"]]
            row += [s["engines"][e][k] for e in engines for k in ENGINE_KEYS]
            row += [s["divergence"][k] for k in DIV_KEYS]
            w.writerow(row)


def write_steps_csv(path: Path, rows: list) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        engines = list(rows[0]["t_s"]) if rows else []
        w.writerow(list(STEP_COLUMNS) + [f"{e}_{k}" for e in engines for k in ("t_s", "contact_s", "upright")])
        for r in rows:
            w.writerow(
                [r[k] for k in STEP_COLUMNS]
                + [v for e in engines for v in (r["t_s"][e], r["contact_s"][e], r["upright"][e])]
            )


def _ms(v) -> str:
    return "-" if v is None else f"{v * 1000:.1f}"


def plot(path: Path, samples: list, mode: str, robot, info: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.array([s["sim_time"] for s in samples])
    engines = list(samples[0]["engines"])
    colors = {"mujoco": "#1f77b4", "pybullet": "#d62728"}
    fig, ax = plt.subplots(3, 1, figsize=(9, 8.5), sharex=True)
    for e in engines:
        label = f"{e} {info['engines'][e]['version']}"
        ax[0].plot(t, [s["engines"][e]["max_joint_err"] for s in samples], color=colors.get(e), label=label, lw=1.2)
        ax[1].plot(t, [s["engines"][e]["pelvis_z"] for s in samples], color=colors.get(e), label=label, lw=1.2)
    pushes = t[[s["push"] for s in samples]]
    for a in ax:
        for tp in pushes:
            a.axvline(tp, color="#f0a020", alpha=0.08, lw=2)
    ax[1].axhline(robot.standing_height, color="grey", ls=":", lw=1, label="standing height")
    ax[0].set_ylabel("max |q* - q| [rad]")
    ax[0].set_yscale("log" if mode != "zero" else "linear")
    ax[1].set_ylabel("pelvis z [m]")
    ax[0].legend(loc="upper right", fontsize=8)
    ax[1].legend(loc="lower left", fontsize=8)
    ax[2].plot(
        t,
        [s["divergence"]["pelvis_dz"] * 1000 for s in samples],
        color="#444",
        label="pelvis z (PyBullet - MuJoCo) [mm]",
    )
    ax[2].set_ylabel("pelvis dz [mm]")
    r = ax[2].twinx()
    r.plot(
        t, [s["divergence"]["joint_rms"] for s in samples], color="#2ca02c", label="joint-angle RMS difference [rad]"
    )
    r.set_ylabel("joint RMS diff [rad]", color="#2ca02c")
    h1, l1 = ax[2].get_legend_handles_labels()
    h2, l2 = r.get_legend_handles_labels()
    ax[2].legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    ax[2].set_xlabel("simulation time [s]")
    ax[0].set_title(f"Sim2Sim, mode '{mode}': {robot.path.name}, same PD law and targets in both engines")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", nargs="+", default=["all"], help=f"{', '.join(MODES)} or all (default)")
    ap.add_argument("--seconds", type=float, default=10.0, help="simulated time per mode [s]")
    ap.add_argument("--seed", type=int, default=0, help="seed of --init-noise")
    ap.add_argument(
        "--init-noise", type=float, default=0.0, help="std of start joint-angle offsets [rad], same in both"
    )
    ap.add_argument("--model", default=None, help="URDF humanoid (default: built-in Q1)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "sim2sim")
    args = ap.parse_args(argv)
    modes = list(MODES) if args.mode == ["all"] else args.mode
    unknown = [m for m in modes if m not in MODES]
    if unknown or not args.seconds > 0:
        ap.error(f"unknown mode(s) {unknown}; available: {', '.join(MODES)}" if unknown else "--seconds must be > 0")

    robot = load_sim2sim_robot(args.model)
    if args.init_noise > 0:
        rng = np.random.default_rng(args.seed)
        q0 = robot.init_qpos.copy()
        q0[robot.qadr] += rng.normal(0.0, args.init_noise, len(robot.qadr))
        robot = dataclasses.replace(robot, init_qpos=q0)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "model": robot.identity_dict(),
        "seconds": args.seconds,
        "seed": args.seed,
        "init_noise_rad": args.init_noise,
        "sample_hz": SAMPLE_HZ,
        "modes": {},
        "files": [],
    }
    for mode in modes:
        samples, info, wall = run_mode(robot, mode, args.seconds)
        s = summarize(samples, robot, mode, args.seconds)
        s["engine_info"] = info["engines"]
        s["mass_warning"] = info["mass_warning"]
        s["wall_s"] = wall
        s["lockstep_rtf"] = args.seconds / wall
        summary["modes"][mode] = s
        write_csv(args.out / f"sim2sim_{mode}.csv", samples)
        plot(args.out / f"sim2sim_{mode}.png", samples, mode, robot, info)
        summary["files"] += [f"sim2sim_{mode}.csv", f"sim2sim_{mode}.png"]
        if "steps" in info:  # the walk: touchdowns paired by step index
            s["steps"], s["steps_summary"] = info["steps"]["steps"], info["steps"]["summary"]
            write_steps_csv(args.out / f"sim2sim_{mode}_steps.csv", s["steps"])
            summary["files"].append(f"sim2sim_{mode}_steps.csv")
        e = s["engines"]
        print(
            f"{mode:6s} "
            + "  ".join(
                f"{n}: err {v['steady_state_max_joint_err_rad']['mean']:.4f} rad, fall {v['time_to_fall_s']}"
                for n, v in e.items()
            )
            + f"  | div: dz max {s['divergence']['pelvis_dz_m']['max'] * 1000:.1f} mm,"
            f" joint RMS max {s['divergence']['joint_rms_rad']['max']:.4f} rad  ({wall:.1f} s wall)"
        )
        if "steps" in info:
            st = s["steps_summary"]
            print(
                f"{mode:6s} steps: {st['paired']} paired ({', '.join(f'{n} {k}' for n, k in st['steps'].items())}),"
                f" touchdown |dt| mean {_ms(st['mean_dt_s'])} / max {_ms(st['max_dt_s'])} ms,"
                f" foothold dxy mean {_ms(st['mean_dxy_m'])} / max {_ms(st['max_dxy_m'])} mm,"
                f" upright {st['upright']}"
            )
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False))
    print(f"wrote {args.out / 'summary.json'}")
    return summary


if __name__ == "__main__":
    main()
