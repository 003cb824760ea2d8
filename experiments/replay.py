"""Replay a recording bit-exactly: MuJoCo re-simulated from the recorded start state with the recorded inputs.

Every physics step of the recording is taken again on the recorded model (the ``model.mjb.zst`` attachment,
or ``--model PATH``), resets where the run was reset, and the replayed ``qpos`` is compared with every
keyframe (one per second of recording and the end). On the same machine and MuJoCo version the largest
difference is exactly 0.0. A MuJoCo version or model identity that differs from the recorded one is
printed and ends the script with exit code 3 (a non-zero difference: exit code 1).

    python experiments/replay.py FILE.mcap [--model PATH] [--out results/replay]

A replay has no randomness (no seed). The last line printed is JSON: ``{"max_qpos_diff": ..., "steps": ..., ...}``.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.errors import LabError  # noqa: E402
from lab.record import open_recording  # noqa: E402
from lab.record.replay import replay  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="a recording (.mcap) of the Lab or Sim2Sim")
    ap.add_argument("--model", default=None, help="replay on this model file instead of the attached one")
    ap.add_argument("--out", type=Path, default=None, help="write the result as <out>/replay.json")
    args = ap.parse_args(argv)
    try:
        with open_recording(args.file) as rec:
            model = None
            if args.model is not None:
                from lab.robots.model import load_robot

                robot = load_robot(args.model)
                model = robot.model
            t0 = time.perf_counter()
            out = replay(rec, model)
            out["replay_s"] = round(time.perf_counter() - t0, 3)
            if args.model is not None:
                out["identity_model"] = robot.identity
                out["identity_match"] = robot.identity == out["identity_recorded"]
                out["ok"] = out["ok"] and out["identity_match"]
    except LabError as exc:
        print(f"error: {exc.message} ({exc.hint})", file=sys.stderr)
        return 2
    print(f"{args.file.name}: {out['steps']} steps ({out['duration_s']:g} s), {out['keyframes']} keyframes compared")
    print(
        f"largest qpos difference: {out['max_qpos_diff']!r}" + ("  (bit-exact)" if out["max_qpos_diff"] == 0.0 else "")
    )
    if not out["version_match"]:
        print(f"MISMATCH: recorded with MuJoCo {out['mujoco_recorded']}, replayed with {out['mujoco_now']}")
    if not out["identity_match"]:
        print(
            f"MISMATCH: model identity {out.get('identity_model') or out['identity_attached']} != recorded {out['identity_recorded']}"
        )
    if out["incomplete"]:
        print(f"incomplete: {out['incomplete']}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "replay.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out))
    if not (out["version_match"] and out["identity_match"]):
        return 3
    return 0 if out["max_qpos_diff"] == 0.0 and not out["incomplete"] else 1


if __name__ == "__main__":
    sys.exit(main())
