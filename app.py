"""Humanoid Sim Lab — command line.

    python app.py                   # all services: Lab :8765, state server :8766, Sim2Sim :8767
    python app.py lab [--model PATH] [--remote-url URL] [--results DIR]
    python app.py sim2sim [--model URDF]
    python app.py state-server [--model PATH] [--allow-actuator NAME ...] [--mode stand|zero]
    python app.py policy-server [--model PATH] [--port 8768] [--cycles N]
    python app.py mcp [--state-url URL] [--audit FILE]     # MCP server (stdio) for agents; token in LAB_TOKEN

Every sub-command takes --host (default 127.0.0.1), --port (its own) and --model, and the ports
of the other services (--lab-port, --state-port, --sim2sim-port: the pages link to them, the
Lab's monitor watches the state server); binding anything but loopback needs --token (or
LAB_TOKEN). The command line becomes one :class:`lab.settings.Settings`, handed to every app.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lab  # noqa: F401  (first: lab/__init__.py chooses EGL before anything imports mujoco)
from lab.settings import DEFAULT_PORTS, PRESETS, Settings

# sub-command -> the service it runs (a key of Settings.ports)
SERVICE = {"lab": "lab", "state-server": "state", "sim2sim": "sim2sim"}


def _common(p: argparse.ArgumentParser, own: str | None) -> None:
    """--host, --model, --token and the three ports; ``own``: the service whose port --port also sets."""
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--model", default=None, help="URDF or MJCF file (default: the built-in Q1 humanoid)")
    p.add_argument("--token", default=os.environ.get("LAB_TOKEN"), help="bearer token required to change state")
    p.add_argument("--models", default=None, metavar="DIR", help="models the pages offer; uploads go to DIR/uploads/")
    for svc, flag in (("lab", "--lab-port"), ("state", "--state-port"), ("sim2sim", "--sim2sim-port")):
        flags = ["--port", flag] if svc == own else [flag]
        what = "this service's port" if svc == own else PORT_HELP[svc]
        p.add_argument(
            *flags,
            dest=f"{svc}_port",
            type=int,
            metavar="PORT",
            default=DEFAULT_PORTS[svc],
            help=f"{what} (default %(default)s)",
        )


PORT_HELP = {
    "lab": "the Lab's port (the pages link to it)",
    "state": "the state server's port (the Lab's monitor watches it)",
    "sim2sim": "Sim2Sim's port (the pages link to it)",
}


def _lab_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fps", type=float, default=60.0, help="Lab stream frame rate cap [frames/s] (default 60)")
    p.add_argument("--preset", choices=PRESETS, default=None, help="render preset (default: by renderer)")
    p.add_argument("--mode", default="stand", help="the Lab's first mode (default stand)")
    p.add_argument(
        "--results", default=None, help="folder for scans: DIR/scans/<id>/ (default results/, or LAB_RESULTS)"
    )


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="app.py", description="Humanoid Sim Lab: headless humanoid simulation in the browser"
    )
    sub = ap.add_subparsers(dest="cmd")
    lab_p = sub.add_parser("lab", help="the Lab on :8765")
    _common(lab_p, "lab")
    _lab_options(lab_p)
    lab_p.add_argument(
        "--remote-url", default=None, help="state server the remote monitor watches (default: --state-port)"
    )
    s2s = sub.add_parser("sim2sim", help="Sim2Sim on :8767")
    _common(s2s, "sim2sim")
    s2s.add_argument("--fps", dest="sim2sim_fps", type=float, default=30.0, help="frame rate cap per view (default 30)")
    st = sub.add_parser("state-server", help="the headless state server on :8766")
    _common(st, "state")
    st.add_argument(
        "--allow-actuator",
        action="append",
        default=None,
        metavar="NAME",
        help="actuator a client may command (repeatable; default motor_left_elbow)",
    )
    st.add_argument(
        "--mode",
        dest="state_mode",
        default="stand",
        help="Lab mode the server runs (default stand; zero: the seed's case)",
    )
    pol = sub.add_parser("policy-server", help="the stateless policy server on :8768 (POST /predict)")
    _common(pol, None)
    pol.add_argument("--port", dest="policy_port", type=int, default=8768, help="this service's port (default 8768)")
    pol.add_argument("--cycles", type=int, default=1, help="squat cycles the built-in policy drives, then stand")
    mcp_p = sub.add_parser(
        "mcp",
        help="the MCP server (stdio) for agents, in front of a state server's runtime",
        description="MCP server over stdio (an MCP client starts it): the state server's remote-control runtime as "
        "tools. Read-only tools are open; motion tools need arm_motion; estop is never gated; clear_estop needs "
        "confirm=true. The state server's token, if it has one, comes from LAB_TOKEN (never the command line).",
    )
    mcp_p.add_argument(
        "--state-url",
        default=f"http://127.0.0.1:{DEFAULT_PORTS['state']}",
        metavar="URL",
        help="the state server (default %(default)s)",
    )
    mcp_p.add_argument(
        "--audit", default=None, metavar="FILE", help="also append the audit log to this JSON-lines file"
    )
    allp = sub.add_parser("all", help="all three services (the default)")
    _common(allp, None)
    _lab_options(allp)
    allp.add_argument("--no-state-server", action="store_true", help="do not start a state server")
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["all", *argv]  # no sub-command: all services
    return ap.parse_args(argv)


def settings_from_args(args) -> Settings:
    """The one :class:`Settings` of this command line (flags a sub-command lacks keep their defaults)."""
    a = vars(args)
    fields = {k: a[k] for k in ("host", "model", "token", "lab_port", "state_port", "sim2sim_port")}
    for k in ("fps", "preset", "mode", "remote_url", "sim2sim_fps", "state_mode"):
        if k in a:
            fields[k] = a[k]
    if a.get("results"):
        fields["results_dir"] = Path(a["results"]).expanduser().resolve()
    if a.get("models"):
        fields["models_dir"] = Path(a["models"]).expanduser().resolve()
    if a.get("allow_actuator"):
        fields["allow_actuators"] = tuple(a["allow_actuator"])
    if "no_state_server" in a:
        fields["state_server"] = not a["no_state_server"]
    return Settings(**fields)


def child_argv(settings: Settings, cmd: str) -> list[str]:
    """The command line (after ``app.py``) that runs sub-command ``cmd`` with ``settings``; the token
    is not on it (it goes by environment: a command line shows in ``ps``)."""
    s = settings
    argv = [cmd, "--host", s.host]
    argv += ["--lab-port", str(s.lab_port), "--state-port", str(s.state_port), "--sim2sim-port", str(s.sim2sim_port)]
    if s.model:
        argv += ["--model", s.model]
    if s.models_dir is not None:
        argv += ["--models", str(s.models_dir)]
    elif cmd == "sim2sim":  # Sim2Sim has no --results: it is told the Lab's models folder itself
        argv += ["--models", str(s.models_folder)]
    if cmd == "lab":
        argv += ["--fps", f"{s.fps:g}", "--mode", s.mode, "--results", str(s.results_dir)]
        if s.preset:
            argv += ["--preset", s.preset]
        if s.remote_url is not None:
            argv += ["--remote-url", s.remote_url]
    elif cmd == "sim2sim":
        argv += ["--fps", f"{s.sim2sim_fps:g}"]
    elif cmd == "state-server":
        argv += ["--mode", s.state_mode]
        for name in s.allow_actuators:
            argv += ["--allow-actuator", name]
    return argv


def run_lab(args) -> None:
    from lab.web import create_lab_app
    from lab.web.server import check_bind, serve

    settings = settings_from_args(args)
    check_bind(settings.host, settings.token)
    serve(create_lab_app(settings), settings.host, settings.lab_port, "lab")


def run_sim2sim(args) -> None:
    from lab.web.server import check_bind, serve
    from lab.web.sim2sim import create_sim2sim_app

    settings = settings_from_args(args)
    check_bind(settings.host, settings.token)
    serve(create_sim2sim_app(settings), settings.host, settings.sim2sim_port, "sim2sim")


def run_state_server(args) -> None:
    from lab.web.server import check_bind, serve
    from lab.web.state_server import create_state_app

    settings = settings_from_args(args)
    check_bind(settings.host, settings.token)
    serve(create_state_app(settings), settings.host, settings.state_port, "state-server")


def run_policy_server(args) -> None:
    from lab.remote.policy import TaskParams
    from lab.web.policy_server import create_policy_app
    from lab.web.server import check_bind, serve

    settings = settings_from_args(args)
    check_bind(settings.host, settings.token)
    app = create_policy_app(settings.model, TaskParams(cycles=args.cycles), settings.token)
    serve(app, settings.host, args.policy_port, "policy-server")


def run_mcp(args) -> None:
    """The MCP server on stdin/stdout until the client closes it (nothing else may write to stdout)."""
    from lab.remote.mcp_server import RuntimeTools, make_server

    audit = Path(args.audit).expanduser() if args.audit else None
    make_server(RuntimeTools(args.state_url, os.environ.get("LAB_TOKEN"), audit)).run("stdio")


def run_all(args) -> int:
    """Each service in its own process (each has its own physics and render threads); Ctrl+C stops all."""
    from lab.web.server import check_bind

    settings = settings_from_args(args)
    check_bind(settings.host, settings.token)
    cmds = [n for n in ("state-server", "lab", "sim2sim") if n != "state-server" or settings.state_server]
    procs = []
    env = {k: v for k, v in os.environ.items() if k != "LAB_TOKEN"}
    if settings.token:
        env["LAB_TOKEN"] = settings.token  # by environment: a command line shows in `ps`
    for name in cmds:
        procs.append((name, subprocess.Popen([sys.executable, __file__, *child_argv(settings, name)], env=env)))
        if name == "state-server":
            time.sleep(0.3)
    ports = settings.ports
    shown = "localhost" if settings.host in ("127.0.0.1", "0.0.0.0") else settings.host
    print("\nHumanoid Sim Lab is starting:")
    print(f"  Lab           http://{shown}:{ports['lab']}/   (remote monitor /remote, scans /scans)")
    if settings.state_server:
        print(f"  State server  http://{shown}:{ports['state']}/api/v1/state")
    print(f"  Sim2Sim       http://{shown}:{ports['sim2sim']}/")
    print(f"  Scans are written under {settings.results_dir / 'scans'}")
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
        elif args.cmd == "policy-server":
            run_policy_server(args)
        elif args.cmd == "mcp":
            run_mcp(args)
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
