"""Humanoid Sim Lab — command line.

    python app.py                   # all services: Lab :8765, state server :8766, Sim2Sim :8767
    python app.py lab [--model PATH] [--remote-url URL] [--no-state-server]
    python app.py sim2sim [--model URDF]
    python app.py state-server [--model PATH] [--allow-actuator NAME ...] [--mode stand|zero]

Every sub-command takes --host (default 127.0.0.1), --port and --model; binding anything but
loopback needs --token (or LAB_TOKEN).
"""

import argparse
import os
import signal
import subprocess
import sys
import time

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco
if os.environ["MUJOCO_GL"] == "egl":
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

PORTS = {"lab": 8765, "state-server": 8766, "sim2sim": 8767}


def _common(p: argparse.ArgumentParser, service: str) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=PORTS[service], help=f"port (default {PORTS[service]})")
    p.add_argument("--model", default=None, help="URDF or MJCF file (default: the built-in Q1 humanoid)")
    p.add_argument("--token", default=os.environ.get("LAB_TOKEN"), help="bearer token required to change state")


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="app.py", description="Humanoid Sim Lab: headless humanoid simulation in the browser"
    )
    sub = ap.add_subparsers(dest="cmd")
    lab = sub.add_parser("lab", help="the Lab on :8765")
    _common(lab, "lab")
    lab.add_argument("--remote-url", default=None, help="state server the remote monitor connects to")
    lab.add_argument("--no-state-server", action="store_true", help="(with no sub-command) do not start a state server")
    lab.add_argument("--fps", type=float, default=60.0, help="stream frame rate cap (default 60)")
    lab.add_argument("--preset", choices=["fast", "nice"], default=None, help="render preset (default: by renderer)")
    lab.add_argument("--mode", default="stand", help="initial mode")
    lab.add_argument("--results", default=None, help="folder for scans (default results/, or LAB_RESULTS)")
    s2s = sub.add_parser("sim2sim", help="Sim2Sim on :8767")
    _common(s2s, "sim2sim")
    s2s.add_argument("--fps", type=float, default=30.0, help="frame rate cap per view (default 30)")
    st = sub.add_parser("state-server", help="the headless state server on :8766")
    _common(st, "state-server")
    st.add_argument(
        "--allow-actuator",
        action="append",
        default=None,
        metavar="NAME",
        help="actuator a client may command (repeatable; default motor_left_elbow)",
    )
    st.add_argument("--mode", default="stand", help="Lab mode the server runs (default stand; zero: the seed's case)")
    allp = sub.add_parser("all", help="all three services (the default)")
    allp.add_argument("--host", default="127.0.0.1")
    allp.add_argument("--model", default=None)
    allp.add_argument("--token", default=os.environ.get("LAB_TOKEN"))
    allp.add_argument("--no-state-server", action="store_true")
    allp.add_argument("--lab-port", type=int, default=PORTS["lab"])
    allp.add_argument("--state-port", type=int, default=PORTS["state-server"])
    allp.add_argument("--sim2sim-port", type=int, default=PORTS["sim2sim"])
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["all", *argv]  # no sub-command: all services
    return ap.parse_args(argv)


def run_lab(args) -> None:
    from lab.web import create_lab_app
    from lab.web.server import check_bind, serve

    check_bind(args.host, args.token)
    remote = args.remote_url or f"http://127.0.0.1:{PORTS['state-server']}"
    app = create_lab_app(
        model=args.model, token=args.token, fps=args.fps, preset=args.preset, mode=args.mode, remote_url=remote
    )
    serve(app, args.host, args.port, "lab")


def run_sim2sim(args) -> None:
    from lab.web.server import check_bind, serve
    from lab.web.sim2sim import create_sim2sim_app

    check_bind(args.host, args.token)
    app = create_sim2sim_app(model=args.model, token=args.token, fps=args.fps)
    serve(app, args.host, args.port, "sim2sim")


def run_state_server(args) -> None:
    from lab.web.server import check_bind, serve
    from lab.web.state_server import create_state_app

    check_bind(args.host, args.token)
    app = create_state_app(
        model=args.model,
        token=args.token,
        allow_actuators=tuple(args.allow_actuator or ("motor_left_elbow",)),
        mode=args.mode,
    )
    serve(app, args.host, args.port, "state-server")


def run_all(args) -> int:
    """Each service in its own process (each has its own physics and render threads); Ctrl+C stops all."""
    from lab.web.server import check_bind

    check_bind(args.host, args.token)
    extra = []
    if args.model:
        extra += ["--model", args.model]
    host = ["--host", args.host]
    cmds = []
    ports = {"lab": args.lab_port, "state-server": args.state_port, "sim2sim": args.sim2sim_port}
    if not args.no_state_server:
        cmds.append(
            (
                "state-server",
                [sys.executable, __file__, "state-server", *host, "--port", str(ports["state-server"]), *extra],
            )
        )
    remote = f"http://127.0.0.1:{ports['state-server']}"
    cmds.append(
        ("lab", [sys.executable, __file__, "lab", *host, "--port", str(ports["lab"]), "--remote-url", remote, *extra])
    )
    cmds.append(("sim2sim", [sys.executable, __file__, "sim2sim", *host, "--port", str(ports["sim2sim"]), *extra]))
    procs = []
    env = {k: v for k, v in os.environ.items() if k != "LAB_TOKEN"}
    if args.token:
        env["LAB_TOKEN"] = args.token  # by environment: a command line shows in `ps`
    for name, cmd in cmds:
        procs.append((name, subprocess.Popen(cmd, env=env)))
        if name == "state-server":
            time.sleep(0.3)
    shown = "localhost" if args.host in ("127.0.0.1", "0.0.0.0") else args.host
    print("\nHumanoid Sim Lab is starting:")
    print(f"  Lab           http://{shown}:{ports['lab']}/   (remote monitor /remote, scans /scans)")
    if not args.no_state_server:
        print(f"  State server  http://{shown}:{ports['state-server']}/api/v1/state")
    print(f"  Sim2Sim       http://{shown}:{ports['sim2sim']}/")
    print("Press Ctrl+C to stop all three.\n", flush=True)

    stopping = False

    def stop(signum=None, frame=None):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    rc = 0
    while not stopping:
        for name, p in procs:
            if p.poll() is not None:
                print(f"{name} exited with code {p.returncode}; stopping the others", file=sys.stderr)
                rc = p.returncode or 1
                stopping = True
                break
        time.sleep(0.2)
    for _, p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.time() + 5
    for _, p in procs:
        try:
            p.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
    print("all services stopped")
    return rc


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    from lab.errors import LabError

    try:
        if args.cmd == "lab":
            run_lab(args)
        elif args.cmd == "sim2sim":
            run_sim2sim(args)
        elif args.cmd == "state-server":
            run_state_server(args)
        else:
            return run_all(args)
    except LabError as exc:
        print(f"error: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
