"""Benchmark: what recording costs the Lab, how fast the file grows, and how fast a 10-minute recording seeks.

1. Throughput: the Lab loop (``SimSession.advance``, PD + mode + metrics, one MuJoCo engine) with and
   without a recording, alternating rounds (A, B, A, B, ...) in one process so a busy machine slows both
   alike, with a pause after each round in which the writer process catches up (its work is then not charged
   to the next round); the figure is the median over rounds of the ratio of the step rates (``ratio``), and
   beside it the ratio of each loop's fastest round (``ratio_best``: the rounds the machine's other load
   disturbed least). Target: recording costs <= 10 % (ratio >= 0.90), in the cheapest loop (``stand``: the
   largest relative cost). The file is
   written meanwhile by the recording's writer process (lab/record/writer.py), on another core when one is free:
   the machine's load average and core count are printed beside the figure. Beside it, the CPU the loop takes
   per step (this process, all threads) plain and recording, the recording's with its writer process's CPU
   added: ``cpu_ratio`` (what a saturated machine would see, unmoved by how the scheduler shares the cores).
2. Real time: the live Lab session (its own thread, paced at rtf 1) recording for ``--live-s``: the
   measured real-time factor, clock slips (``lag_drops``) and the recording's simulated time per wall second.
3. File rate on a walk (mode ``walk``, the feedback walker at 0.15 m/s): MB per second of recording with
   zstd chunks, without the model attachments (counted apart). Target <= 1 MB/s.
4. Seeks in a ``--long-s`` (600 s) recording: ``Recording.state_at(t)`` at random times (the keyframe at or
   before t through the MCAP chunk index, then up to 1 s of recorded steps), and ``read('/joint_states')``
   over 1 s windows. Target < 200 ms per seek.

    python experiments/bench_record.py [--rounds 15] [--steps 5000] [--live-s 10] [--walk-s 20] [--long-s 600]
        [--seeks 30] [--seed 0] [--out results/bench_record]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.record import open_recording  # noqa: E402
from lab.record.store import Recordings  # noqa: E402
from lab.robots.model import load_robot  # noqa: E402
from lab.runtime.session import SimSession  # noqa: E402

TARGET_RATIO = 0.90  # recording costs <= 10 % of the loop's throughput
TARGET_MB_S = 1.0  # file rate on a walk
TARGET_SEEK_MS = 200.0


def _writer_cpu_s() -> float:
    """The CPU time [s] of this process's recording writer processes (``lab.record.writer``) so far."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmd = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"lab.record.writer" in cmd:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def throughput(robot, mode: str, steps: int, rounds: int, folder: Path, pause_s: float = 0.2) -> dict:
    """Steps/s of two sessions, one recording, in alternating rounds; the median ratio; CPU per step."""
    plain, rec = SimSession(robot, mode=mode), SimSession(robot, mode=mode)
    store = Recordings(folder, "lab")
    info = store.start(rec, label="bench throughput", max_s=3600)
    time.sleep(pause_s)
    writer0 = _writer_cpu_s()  # its start (imports, the file's head) is not per step
    seconds = steps * plain.dt
    rates = {"plain": [], "recording": []}
    cpu = {"plain": 0.0, "recording": 0.0}
    for _ in range(rounds):
        for name, s in (("plain", plain), ("recording", rec)):
            c0, t0 = time.process_time(), time.perf_counter()
            s.advance(seconds)
            rates[name].append(steps / (time.perf_counter() - t0))
            cpu[name] += time.process_time() - c0
            time.sleep(pause_s)  # the writer catches up
    writer_s = _writer_cpu_s() - writer0
    store.stop(info["id"])
    ratios = [b / a for a, b in zip(rates["plain"], rates["recording"])]
    n = steps * rounds
    plain_us, rec_us, writer_us = (1e6 * v / n for v in (cpu["plain"], cpu["recording"], writer_s))
    return {
        "mode": mode,
        "steps_per_round": steps,
        "rounds": rounds,
        "plain_steps_s": round(float(np.median(rates["plain"])), 1),
        "recording_steps_s": round(float(np.median(rates["recording"])), 1),
        "ratio": round(float(np.median(ratios)), 4),
        "ratio_min": round(float(np.min(ratios)), 4),
        "ratio_max": round(float(np.max(ratios)), 4),
        "ratio_best": round(float(np.max(rates["recording"]) / np.max(rates["plain"])), 4),
        "cost_pct": round(100 * (1 - float(np.median(ratios))), 2),
        "target_ratio": TARGET_RATIO,
        "cpu_us_per_step": {
            "plain": round(plain_us, 2),
            "recording": round(rec_us, 2),
            "writer_process": round(writer_us, 2),
        },
        "cpu_ratio": round(plain_us / (rec_us + writer_us), 4),
        "cpus": os.cpu_count(),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def live(robot, seconds: float, folder: Path) -> dict:
    """The threaded Lab session at rtf 1 while recording."""
    s = SimSession(robot, mode="push").start()
    time.sleep(1.0)
    store = Recordings(folder, "lab")
    drops0 = s.lag_drops
    info = store.start(s, label="bench live")
    t0, k0 = time.perf_counter(), s.sim_time
    rtfs = []
    while time.perf_counter() - t0 < seconds:
        time.sleep(0.5)
        rtfs.append(s.measured_rtf())
    wall = time.perf_counter() - t0
    sim = s.sim_time - k0
    end = store.stop(info["id"])
    s.close()
    return {
        "wall_s": round(wall, 2),
        "sim_s": round(sim, 3),
        "sim_per_wall": round(sim / wall, 4),
        "rtf_median": round(float(np.median(rtfs)), 3),
        "rtf_min": round(float(np.min(rtfs)), 3),
        "lag_drops": s.lag_drops - drops0,
        "recorded_s": end["duration_s"],
        "state": end["state"],
    }


def file_rate(robot, seconds: float, folder: Path) -> dict:
    s = SimSession(robot, mode="walk")
    store = Recordings(folder, "lab")
    info = store.start(s, label="bench walk")
    head = info["bytes"]  # header, schemas, metadata, the model attachments
    s.advance(seconds)
    end = store.stop(info["id"])
    rate = (end["bytes"] - head) / end["duration_s"] / 1e6
    return {
        "mode": "walk",
        "duration_s": end["duration_s"],
        "bytes": end["bytes"],
        "head_bytes": head,
        "mb_per_s": round(rate, 4),
        "fell": s.fell_at(),
        "target_mb_s": TARGET_MB_S,
    }


def seeks(robot, seconds: float, n: int, seed: int, folder: Path) -> dict:
    s = SimSession(robot, mode="push")
    store = Recordings(folder, "lab")
    info = store.start(s, label="bench long", max_s=seconds + 1)
    t0 = time.perf_counter()
    s.advance(seconds)
    make_s = time.perf_counter() - t0
    end = store.stop(info["id"])
    rng = np.random.default_rng(seed)
    times = rng.uniform(0, end["duration_s"], n)
    state_ms, read_ms = [], []
    with open_recording(store.path(info["id"])) as rec:
        t0 = time.perf_counter()
        rec.state_at(0.0)  # the model is read once
        first_ms = (time.perf_counter() - t0) * 1e3
        for t in times:
            t0 = time.perf_counter()
            rec.state_at(float(t))
            state_ms.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            msgs = list(rec.read("/joint_states", float(t), float(t) + 1.0))
            read_ms.append((time.perf_counter() - t0) * 1e3)
        chunks = len(rec.summary.chunk_indexes)
    return {
        "duration_s": end["duration_s"],
        "bytes": end["bytes"],
        "chunks": chunks,
        "made_in_s": round(make_s, 1),
        "first_state_at_ms": round(first_ms, 1),
        "state_at_ms_median": round(float(np.median(state_ms)), 2),
        "state_at_ms_max": round(float(np.max(state_ms)), 2),
        "read_1s_ms_median": round(float(np.median(read_ms)), 2),
        "read_1s_messages": len(msgs),
        "seeks": n,
        "target_ms": TARGET_SEEK_MS,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=5000, help="physics steps per round and loop")
    ap.add_argument("--mode", default="stand", help="mode of the throughput rounds")
    ap.add_argument("--live-s", type=float, default=10.0)
    ap.add_argument("--walk-s", type=float, default=20.0)
    ap.add_argument("--long-s", type=float, default=600.0)
    ap.add_argument("--seeks", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0, help="the random seek times")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_record")
    args = ap.parse_args(argv)
    robot = load_robot()
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench_record_") as tmp:
        folder = Path(tmp)
        out["throughput"] = throughput(robot, args.mode, args.steps, args.rounds, folder)
        print("throughput", json.dumps(out["throughput"]), flush=True)
        out["live"] = live(robot, args.live_s, folder)
        print("live", json.dumps(out["live"]), flush=True)
        out["file_rate"] = file_rate(robot, args.walk_s, folder)
        print("file_rate", json.dumps(out["file_rate"]), flush=True)
        out["seek"] = seeks(robot, args.long_s, args.seeks, args.seed, folder)
        print("seek", json.dumps(out["seek"]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_record.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
