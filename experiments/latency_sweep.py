"""How the remote-control runtime degrades as the link to the policy gets worse, and what each mitigation buys.

Each run is ``--duration`` s (default 6) of the robot on the real model following the built-in policy
(one 2 s squat, then stand) through a fault profile (healthy, lossy, congested, outage, corrupt,
wrong-robot), on the virtual clock: the policy is called in-process through the seeded fault link, so
the runtime sees only the latency the profile asks for and a run takes a fraction of its robot time.
The same runs are repeated with each mitigation switched off (``--ablations``): staleness, ordering,
validation, retries, breaker, hold release, adaptive lead. Per profile and variant:

- ``success_rate``: the task done (the squat executed), never fell, never sent an invalid target;
- ``safe_end_rate``: never fell and never sent an invalid target (non-finite, outside the joint limits);
- ``hold_s``: mean time in the protective hold [s]; ``cycle_time_s``: mean robot time to finish the task [s];
- ``stale_rejected``: mean stale chunks rejected per run; ``estops``: e-stops over all runs; ``requests``.

``verdicts`` says for each mitigation and profile whether removing it made things worse ("pays"), changed
nothing ("does not pay") or made them better ("costs"). ``summary.json`` is reproducible bit for bit from
``--seed`` (wall time is in ``timing.json``).

    python experiments/latency_sweep.py --seeds 25 --ablations [--out results/latency_sweep] [--jobs 2]
"""

import argparse
import json
import sys
import time
from multiprocessing import Pool
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import lab  # noqa: E402, F401
from lab.remote.episode import ablated, run_episode  # noqa: E402
from lab.remote.faults import PROFILES  # noqa: E402
from lab.remote.runtime import MITIGATIONS  # noqa: E402

_ROBOT = None


def _run(job):
    variant, profile, seed, duration = job
    global _ROBOT
    if _ROBOT is None:
        from lab.robots.model import load_robot

        _ROBOT = load_robot()
    r = run_episode(_ROBOT, profile, seed, ablated(variant), duration)
    return job, (r.success, r.safe, r.hold_s, r.done_at, r.stale_rejected, r.estops, r.requests, r.invalid_sent)


def summarize(rows: list) -> dict:
    n = len(rows)
    done = [r[3] for r in rows if r[0]]
    return {
        "runs": n,
        "success_rate": round(sum(r[0] for r in rows) / n, 4),
        "safe_end_rate": round(sum(r[1] for r in rows) / n, 4),
        "hold_s": round(sum(r[2] for r in rows) / n, 4),
        "cycle_time_s": round(sum(done) / len(done), 4) if done else None,
        "stale_rejected": round(sum(r[4] for r in rows) / n, 3),
        "estops": sum(r[5] for r in rows),
        "requests": round(sum(r[6] for r in rows) / n, 2),
        "invalid_sent": sum(r[7] for r in rows),
    }


def verdict(full: dict, without: dict) -> str:
    """ "pays" if removing the mitigation made a run less safe, less successful, longer in hold or slower."""
    worse = (
        without["safe_end_rate"] < full["safe_end_rate"]
        or without["success_rate"] < full["success_rate"]
        or without["hold_s"] > full["hold_s"] + 0.02
        or (without["cycle_time_s"] or 0) > (full["cycle_time_s"] or 0) + 0.02
    )
    better = (
        without["success_rate"] > full["success_rate"]
        or without["hold_s"] < full["hold_s"] - 0.02
        or (full["cycle_time_s"] or 0) > (without["cycle_time_s"] or 0) + 0.02
    )
    if worse:
        return "pays"
    return "costs" if better else "does not pay"


def sweep(seeds: int, seed: int, profiles: list, variants: list, duration: float, jobs: int) -> dict:
    work = [(v, p, seed + i, duration) for v in variants for p in profiles for i in range(seeds)]
    if jobs > 1:
        with Pool(jobs) as pool:
            out = pool.map(_run, work, chunksize=4)
    else:
        out = [_run(j) for j in work]
    by = {}
    for (v, p, _, _), res in out:
        by.setdefault(v, {}).setdefault(p, []).append(res)
    table = {v: {p: summarize(by[v][p]) for p in profiles} for v in variants}
    summary = {
        "seeds": seeds,
        "seed": seed,
        "duration_s": duration,
        "profiles": table["full"],
        "ablations": {v: table[v] for v in variants if v != "full"},
    }
    summary["verdicts"] = {
        v: {p: verdict(table["full"][p], table[v][p]) for p in profiles} for v in summary["ablations"]
    }
    for word in ("does not pay", "costs"):
        summary[word.replace(" ", "_")] = sorted(
            f"{v} on {p}" for v, ps in summary["verdicts"].items() for p, w in ps.items() if w == word
        )
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=25, help="runs per profile and variant (default 25)")
    ap.add_argument("--seed", type=int, default=0, help="first seed (runs use seed..seed+seeds-1)")
    ap.add_argument("--ablations", action="store_true", help="also run with each mitigation switched off")
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    ap.add_argument("--duration", type=float, default=6.0, help="robot time per run [s] (default 6)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--out", type=Path, default=HERE.parent / "results" / "latency_sweep")
    args = ap.parse_args(argv)
    variants = ["full", *(MITIGATIONS if args.ablations else ())]
    t0 = time.perf_counter()
    summary = sweep(args.seeds, args.seed, args.profiles, variants, args.duration, args.jobs)
    wall = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    runs = args.seeds * len(args.profiles) * len(variants)
    timing = {"wall_s": round(wall, 2), "runs": runs, "robot_s": runs * args.duration, "jobs": args.jobs}
    (args.out / "timing.json").write_text(json.dumps(timing, indent=2) + "\n")
    cols = ("success_rate", "safe_end_rate", "hold_s", "cycle_time_s", "stale_rejected", "estops", "requests")
    print(f"{'variant':<14}{'profile':<13}" + "".join(f"{c:>15}" for c in cols))
    for v in variants:
        rows = summary["profiles"] if v == "full" else summary["ablations"][v]
        for p, m in rows.items():
            print(f"{v:<14}{p:<13}" + "".join(f"{str(m[c]):>15}" for c in cols))
    if summary["does_not_pay"]:
        print("mitigations that do not pay (removed, nothing got worse): " + ", ".join(summary["does_not_pay"]))
    if summary["costs"]:
        print("mitigations that cost (removed, something got better): " + ", ".join(summary["costs"]))
    print(f"{runs} runs, {runs * args.duration:g} s of robot time in {wall:.1f} s wall ({args.jobs} jobs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
