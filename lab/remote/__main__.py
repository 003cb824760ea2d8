"""Command line of the remote pieces.

    python -m lab.remote serve [--port 8766] [--model PATH] [--token T] [--allow-actuator NAME] [--mode stand]
    python -m lab.remote probe [--url URL] [--model PATH | --any-model]
    python -m lab.remote send --value 2.0 --duration 0.25 [--url URL] [--actuator NAME] [--token T]

Each exits 0 on success and non-zero with the reason on failure.
"""

import argparse
import math
import os
import sys
import time
from pathlib import Path

from lab.errors import LabError
from lab.remote.client import DEFAULT_URL, StateClient
from lab.remote.protocol import check_state, fmt_num, order

PROBE_STATES = 5


def _fail(msg: str) -> int:
    print(f"FAILED: {msg}", file=sys.stderr)
    return 1


def probe(args) -> int:
    """Read health and five states; check identity, array lengths, and that sequence and time advance."""
    expected = None
    if not args.any_model:
        from lab.robots.model import load_robot

        robot = load_robot(args.model)
        expected = robot.identity
    client = StateClient(args.url, timeout=args.timeout)
    try:
        health = client.health()
        ident = health.get("model", {})
        print(
            f"health: {health.get('status')}, instance {health.get('server_instance_id')}, MuJoCo {health.get('mujoco')}, "
            f"model {ident.get('file')} {ident.get('short')}, nq={health.get('nq')} nv={health.get('nv')} "
            f"nu={health.get('nu')}, timestep {health.get('timestep')} s, mode {health.get('mode')}"
        )
        if expected is not None and ident.get("sha256") != expected:
            return _fail(
                f"model identity {str(ident.get('sha256'))[:12]} ({ident.get('file')}) differs from the local model "
                f"{expected[:12]}; pass --model PATH for the server's model, or --any-model"
            )
        states = []
        for i in range(PROBE_STATES):
            if i:
                time.sleep(args.interval)
            states.append(client.state())
    except LabError as err:
        return _fail(err.message)
    finally:
        client.close()
    for i, s in enumerate(states):
        check = check_state(s, expected, health.get("nq"), health.get("nv"))
        if not check.ok:
            return _fail(f"state {i + 1}: {check.reason}")
        if s["model"]["sha256"] != ident.get("sha256"):
            return _fail(f"state {i + 1}: model identity differs from the one health reported")
        if i:
            prev = states[i - 1]
            rel = order(prev, s)
            if rel != "advanced":
                return _fail(
                    f"state {i + 1}: sequence {prev['sequence']} -> {s['sequence']} ({rel}, instance "
                    f"{prev['server_instance_id'][:8]} -> {s['server_instance_id'][:8]}); expected it to increase"
                )
            if not s["simulation_time"] > prev["simulation_time"]:
                return _fail(
                    f"state {i + 1}: simulation_time {prev['simulation_time']} -> {s['simulation_time']}; "
                    "expected it to increase"
                )
    a, b = states[0], states[-1]
    print(
        f"probe passed: {len(states)} states, sequence {a['sequence']} -> {b['sequence']}, simulation time "
        f"{a['simulation_time']:.3f} -> {b['simulation_time']:.3f} s, qpos {len(b['qpos'])}, qvel {len(b['qvel'])}, "
        f"identity {ident.get('short')} ({'matches the local model' if expected else 'not compared'})"
    )
    return 0


def send(args) -> int:
    """Read the state, send one command, wait past its expiry in simulation time, read again."""
    client = StateClient(args.url, token=args.token or os.environ.get("LAB_TOKEN"), timeout=args.timeout)
    try:
        health = client.health()
        info = next((a for a in health.get("allowed_actuators", []) if a["name"] == args.actuator), None)
        before = client.state()
        answer = client.control(args.actuator, args.value, args.duration)
        if answer.status != 202:
            hint = answer.body.get("hint")
            return _fail(f"HTTP {answer.status}: {answer.body.get('error')}" + (f" ({hint})" if hint else ""))
        acc = answer.body
        print(
            f"accepted: {acc['actuator']} value {fmt_num(acc['value'])} N·m for {fmt_num(acc['duration_s'])} s, "
            f"model range [{fmt_num(acc['model_range'][0])}, {fmt_num(acc['model_range'][1])}], demo range "
            f"[{fmt_num(acc['demo_range'][0])}, {fmt_num(acc['demo_range'][1])}], simulation time "
            f"{acc['start_time']:.3f} -> expires at {acc['expires_at']:.3f} s"
        )
        during, deadline = None, time.monotonic() + max(5.0, 20 * float(acc["duration_s"]))
        while True:
            after = client.state()
            if after.get("active_control") and after["active_control"].get("id") == acc["id"]:
                during = after
            if after["simulation_time"] > acc["expires_at"] and after.get("active_control") is None:
                break
            if time.monotonic() > deadline:
                return _fail(
                    f"simulation time {after['simulation_time']:.3f} s, command still active "
                    f"({after.get('active_control')}); it should clear by itself at {acc['expires_at']:.3f} s"
                )
            time.sleep(0.01)
    except LabError as err:
        return _fail(err.message)
    finally:
        client.close()
    if info is not None:
        qi, ai, name = info["qpos_index"], info["index"], info["joint"]
        print(
            f"{name}: before {before['qpos'][qi]:+.4f} rad, ctrl {before['ctrl'][ai]:+.3f} N·m at t={before['simulation_time']:.3f} s"
        )
        if during is not None:
            print(
                f"{name}: during {during['qpos'][qi]:+.4f} rad, ctrl {during['ctrl'][ai]:+.3f} N·m at t={during['simulation_time']:.3f} s"
            )
        print(
            f"{name}: after  {after['qpos'][qi]:+.4f} rad, ctrl {after['ctrl'][ai]:+.3f} N·m at t={after['simulation_time']:.3f} s"
        )
        print(f"{name}: moved {math.degrees(after['qpos'][qi] - before['qpos'][qi]):+.2f} deg")
    print(f"active_control: {after.get('active_control')}  (t={after['simulation_time']:.3f} s)")
    last = after.get("last_control")
    if last:
        print(f"last_control: id {last.get('id')} {last.get('ended')} at t={last.get('ended_at')} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.remote", description="State server, probe and limited control.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve", help="run the state server: the same as `python app.py state-server ARGS`")
    sv.add_argument("args", nargs=argparse.REMAINDER, help="the flags of `python app.py state-server`")
    pr = sub.add_parser("probe", help="read five states and check identity, lengths, sequence and time")
    pr.add_argument("--url", default=DEFAULT_URL)
    pr.add_argument("--model", default=None, help="local model to compare identity with (default: built-in Q1)")
    pr.add_argument("--any-model", action="store_true", help="do not compare the identity with a local model")
    pr.add_argument("--interval", type=float, default=0.05, help="seconds between the states read")
    pr.add_argument("--timeout", type=float, default=3.0)
    se = sub.add_parser("send", help="send one limited command and show that it clears itself")
    se.add_argument("--url", default=DEFAULT_URL)
    se.add_argument("--actuator", default="motor_left_elbow")
    se.add_argument("--value", type=float, required=True, help="torque [N·m], |value| <= 2")
    se.add_argument("--duration", type=float, default=0.25, help="[s] of simulation time, <= 0.25")
    se.add_argument("--token", default=None, help="bearer token (or LAB_TOKEN)")
    se.add_argument("--timeout", type=float, default=3.0)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:  # the server is a web service: app.py serves it (this package imports no web layer)
        app_py = Path(__file__).resolve().parents[2] / "app.py"
        os.execv(sys.executable, [sys.executable, str(app_py), "state-server", *argv[1:]])
    args = build_parser().parse_args(argv)
    if args.cmd == "probe":
        return probe(args)
    return send(args)


if __name__ == "__main__":
    sys.exit(main())
