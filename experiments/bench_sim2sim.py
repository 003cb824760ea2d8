"""Benchmark: Sim2Sim holds real time while both views stream, and each engine's stepping rate vs MuJoCo's.

Part 1, throughput (in this process, before the server starts): the robot stepped by
- raw MuJoCo (``mj_step`` replaying the PD torques of its own standing run),
- raw PyBullet (``setJointMotorControlArray(TORQUE_CONTROL)`` + ``stepSimulation``, replaying its own),
- each engine through the lab's ``Engine`` interface with the PD law (``Rollout.step``),
- the lockstep runner (both engines, PD, metrics at 50 Hz): the most real time it can reach,
interleaved round by round so that a busy machine slows all alike; figures are medians.

Part 2, live (twice: at the 30 frames/s cap, then at ``--fps-low`` to show what real time needs):
``app.py sim2sim`` in its own process, one (or ``--clients``) real WebSocket client
taking both views at 640 x 480 and acknowledging each frame as the page does; over ``--seconds``
it measures frames/s received per view, frame age, and the real-time factor of each engine
(simulation time advanced per wall second, from ``/api/status``). Targets (docs/CONTRACT.md): each
engine >= 1.0 x real time while both views stream >= 30 frames/s each.

    python experiments/bench_sim2sim.py [--seconds 10] [--rounds 5] [--steps 2000] [--out results/bench_sim2sim]
"""

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lab  # noqa: E402, F401  (EGL is chosen there, before anything imports mujoco)

# isort: split
import mujoco  # noqa: E402
import pybullet as pb  # noqa: E402

from lab.control.modes import get_mode  # noqa: E402
from lab.control.pd import PDGains  # noqa: E402
from lab.control.rollout import Rollout  # noqa: E402
from lab.remote.cli import stop_child  # noqa: E402
from lab.runtime.lockstep import Lockstep, load_sim2sim_robot  # noqa: E402
from lab.sim.mujoco_engine import MujocoEngine  # noqa: E402
from lab.sim.pybullet_engine import PybulletEngine  # noqa: E402


# ---- part 1: stepping throughput ---------------------------------------------------------------
def record_torques(robot, cls, steps: int) -> np.ndarray:
    """The PD torques (steps, nu) an engine's own standing run applies, for an open-loop replay of the same motion."""
    eng = cls(robot)
    out = np.empty((steps, robot.model.nu))
    step, k = eng.step, [0]

    def recording_step(tau):
        out[k[0]] = tau
        k[0] += 1
        step(tau)

    eng.step = recording_step
    ro = Rollout(eng, PDGains.for_robot(robot), get_mode("stand", robot))
    for _ in range(steps):
        ro.step()
    if hasattr(eng, "close"):
        eng.close()
    return out


def raw_mujoco(robot, ctrl) -> float:
    m, d = robot.model, mujoco.MjData(robot.model)
    d.qpos[:] = robot.init_qpos
    mujoco.mj_forward(m, d)
    t0 = time.perf_counter()
    for u in ctrl:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
    return len(ctrl) / (time.perf_counter() - t0)


def raw_pybullet(robot, ctrl) -> float:
    eng = PybulletEngine(robot)  # set up (motors off, timestep, ...) by the engine, then stepped directly
    try:
        body, idx, cid = eng._body, eng._idx, eng._cid
        torque, step, send = pb.TORQUE_CONTROL, pb.stepSimulation, pb.setJointMotorControlArray
        rows = ctrl.tolist()
        t0 = time.perf_counter()
        for u in rows:
            send(body, idx, torque, forces=u, physicsClientId=cid)
            step(physicsClientId=cid)
        return len(rows) / (time.perf_counter() - t0)
    finally:
        eng.close()


def engine_loop(robot, cls, steps: int) -> float:
    eng = cls(robot)
    try:
        ro = Rollout(eng, PDGains.for_robot(robot), get_mode("stand", robot))
        t0 = time.perf_counter()
        for _ in range(steps):
            ro.step()
        return steps / (time.perf_counter() - t0)
    finally:
        if hasattr(eng, "close"):
            eng.close()


def lockstep_loop(robot, steps: int) -> float:
    ls = Lockstep(robot, "stand")
    try:
        t0 = time.perf_counter()
        ls.advance(steps * ls.dt)
        return steps / (time.perf_counter() - t0)
    finally:
        ls.close()


def _cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def cpu_budget(robot, frames: int, fps: float, width: int, height: int) -> dict:
    """CPU seconds (all threads of this process, llvmpipe's included) per frame and per simulated second."""
    from lab.render.jpeg import encode_jpeg
    from lab.render.renderer import Renderer, default_preset

    r = Renderer(robot.model, width, height, default_preset())
    try:
        for _ in range(5):
            r.render(robot.init_qpos)
        c0 = _cpu_s()
        for _ in range(frames):
            encode_jpeg(r.render(robot.init_qpos), 80)
        frame_cpu = (_cpu_s() - c0) / frames
    finally:
        r.close()
    ls = Lockstep(robot, "stand")
    try:
        c0 = _cpu_s()
        ls.advance(2.0)
        physics_cpu = (_cpu_s() - c0) / 2.0
    finally:
        ls.close()
    need = physics_cpu + 2 * fps * frame_cpu
    return {
        "render_encode_cpu_ms_per_frame": frame_cpu * 1e3,
        "lockstep_cpu_s_per_sim_s": physics_cpu,
        "cores_needed_for_targets": need,
        "cores": os.cpu_count(),
        "note": f"real time + 2 views x {fps:g} fps needs {need:.2f} of {os.cpu_count()} cores, "
        "before the WebSocket server, JSON metrics and the client",
    }


def throughput(robot, steps: int, rounds: int) -> dict:
    ctrl_mj = record_torques(robot, MujocoEngine, steps)
    ctrl_pb = record_torques(robot, PybulletEngine, steps)
    loops = {
        "mujoco_raw": lambda: raw_mujoco(robot, ctrl_mj),
        "pybullet_raw": lambda: raw_pybullet(robot, ctrl_pb),
        "mujoco_engine_pd": lambda: engine_loop(robot, MujocoEngine, steps),
        "pybullet_engine_pd": lambda: engine_loop(robot, PybulletEngine, steps),
        "lockstep_both": lambda: lockstep_loop(robot, steps),
    }
    rates = {k: [] for k in loops}
    for _ in range(rounds):
        for k, fn in loops.items():
            rates[k].append(fn())
    med = {k: float(np.median(v)) for k, v in rates.items()}
    ref = med["mujoco_raw"]
    return {
        "steps_per_round": steps,
        "rounds": rounds,
        "steps_per_s_median": med,
        "steps_per_s_all": rates,
        "ratio_to_mujoco_raw": {k: v / ref for k, v in med.items()},
        "realtime_factor_possible": {k: v * robot.model.opt.timestep for k, v in med.items()},
    }


# ---- part 2: live service with real WebSocket clients ----------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client(threading.Thread):
    """A WebSocket client taking frames like the page: acknowledges each frame once received."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.frames, self.stop = url, [], threading.Event()

    def run(self):
        import websocket

        ws = websocket.create_connection(self.url, timeout=10)
        header = None
        try:
            while not self.stop.is_set():
                op, data = ws.recv_data()
                if op == websocket.ABNF.OPCODE_TEXT:
                    msg = json.loads(data)
                    if msg.get("type") == "frame":
                        header = msg
                elif header is not None:
                    self.frames.append((time.time(), header["view"], header["t_wall"], len(data)))
                    ws.send(json.dumps({"type": "ack", "view": header["view"], "seq": header["seq"]}))
                    header = None
        except Exception:
            pass
        finally:
            ws.close()


def live(seconds: float, warmup: float, clients: int, fps: float, width: int, height: int) -> dict:
    import requests

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "app.py"), "sim2sim", "--port", str(port), "--fps", str(fps)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 60
        while True:
            try:
                requests.get(url + "/api/status", timeout=2).raise_for_status()
                break
            except Exception:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"sim2sim did not start: {proc.stderr.read()[-2000:]}") from None
                time.sleep(0.3)
        cs = [Client(url.replace("http", "ws") + "/ws?views=mujoco,pybullet") for _ in range(clients)]
        for c in cs:
            c.start()
        time.sleep(warmup)
        polls = []
        load0 = os.getloadavg()[0]
        t_start = time.time()
        while time.time() - t_start < seconds:
            st = requests.get(url + "/api/status", timeout=5).json()
            polls.append((time.time(), {n: e["sim_time"] for n, e in st["engines"].items()}, st["rtf"]))
            time.sleep(0.5)
        t_end = time.time()
        st = requests.get(url + "/api/status", timeout=5).json()
        polls.append((time.time(), {n: e["sim_time"] for n, e in st["engines"].items()}, st["rtf"]))
        load1 = os.getloadavg()[0]
        for c in cs:
            c.stop.set()
    finally:
        stop_child(proc, 10, signal.SIGINT)

    wall = polls[-1][0] - polls[0][0]
    rtf = {n: (polls[-1][1][n] - polls[0][1][n]) / wall for n in polls[0][1]}
    # real-time factor over each ~1 s window (the worst window shows stalls)
    win = []
    for i in range(2, len(polls), 2):
        a, b = polls[i - 2], polls[i]
        win.append(min((b[1][n] - a[1][n]) / (b[0] - a[0]) for n in a[1]))
    per_client = []
    for c in cs:
        got = [f for f in c.frames if t_start <= f[0] <= t_end]
        views = {}
        for v in ("mujoco", "pybullet"):
            fv = [f for f in got if f[1] == v]
            ages = np.array([(f[0] - f[2]) * 1000 for f in fv]) if fv else np.array([np.nan])
            views[v] = {
                "frames": len(fv),
                "fps": len(fv) / (t_end - t_start),
                "age_ms_p50": float(np.median(ages)),
                "age_ms_p95": float(np.percentile(ages, 95)),
                "kbytes_mean": float(np.mean([f[3] for f in fv]) / 1024) if fv else None,
            }
        per_client.append(views)
    series = {
        v: np.histogram(
            [f[0] - t_start for f in cs[0].frames if f[1] == v and t_start <= f[0] <= t_end],
            bins=int(seconds),
            range=(0, int(seconds)),
        )[0].tolist()
        for v in ("mujoco", "pybullet")
    }
    return {
        "seconds": seconds,
        "clients": clients,
        "fps_cap": fps,
        "width": width,
        "height": height,
        "rtf_per_engine": rtf,
        "rtf_worst_1s_window": float(min(win)) if win else None,
        "rtf_reported_by_server_last": polls[-1][2],
        "views_per_client": per_client,
        "fps_per_second_client0": series,
        "rtf_series": [(p[0] - polls[0][0], p[2]) for p in polls],
        "render": {
            v: {k: s[k] for k in ("render_ms", "encode_ms", "renders", "fps")} for v, s in st["render"]["views"].items()
        },
        "renderer": st["render"]["gl"]["renderer"],
        "preset": st["render"]["preset"],
        "loadavg_1min": [load0, load1],
    }


def plot(path: Path, live_res: dict, thr: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(12, 4.8))
    for v, c in (("mujoco", "#1f77b4"), ("pybullet", "#d62728")):
        s = live_res["fps_per_second_client0"][v]
        ax[0].step(np.arange(len(s)) + 1, s, where="post", color=c, label=f"{v} view, frames received per s")
    ax[0].axhline(30, color="grey", ls=":", label="target 30 fps per view")
    t, r = zip(*live_res["rtf_series"])
    a2 = ax[0].twinx()
    a2.plot(t, r, color="#2ca02c", label="real-time factor (server)")
    a2.axhline(1.0, color="#2ca02c", ls=":", lw=0.8)
    a2.set_ylim(0, max(1.3, max(r) * 1.1))
    a2.set_ylabel("real-time factor", color="#2ca02c")
    ax[0].set_ylim(0, max(40, max(max(s) for s in live_res["fps_per_second_client0"].values()) * 1.15))
    ax[0].set_xlabel("wall time [s]")
    ax[0].set_ylabel("frames / s")
    h1, l1 = ax[0].get_legend_handles_labels()
    h2, l2 = a2.get_legend_handles_labels()
    ax[0].legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    ax[0].set_title("live: both views at 640x480, both engines in lockstep")
    names = list(thr["steps_per_s_median"])
    vals = [thr["steps_per_s_median"][k] * 1e-3 for k in names]
    bars = ax[1].barh(names, vals, color=["#1f77b4", "#d62728", "#6baed6", "#fc9272", "#9467bd"])
    for b, k in zip(bars, names):
        ax[1].text(
            b.get_width(),
            b.get_y() + b.get_height() / 2,
            f" {thr['ratio_to_mujoco_raw'][k]:.2f}x",
            va="center",
            fontsize=9,
        )
    ax[1].axvline(1.0, color="grey", ls=":", label="real time (1000 steps/s)")
    ax[1].set_xlabel("k steps / s (ratio to raw MuJoCo)")
    ax[1].legend(fontsize=8, loc="lower right")
    ax[1].invert_yaxis()
    ax[1].set_title("stepping throughput on the robot")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="live measurement window [s]")
    ap.add_argument("--warmup", type=float, default=3.0, help="live warm-up before measuring [s]")
    ap.add_argument("--clients", type=int, default=1, help="WebSocket clients, each taking both views")
    ap.add_argument("--fps", type=float, default=30.0, help="frame rate cap per view")
    ap.add_argument("--fps-low", type=float, default=10.0, help="second live run at this cap (0: skip)")
    ap.add_argument("--steps", type=int, default=2000, help="physics steps per throughput round")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved throughput rounds")
    ap.add_argument("--seed", type=int, default=0, help="unused by the physics (deterministic); recorded")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_sim2sim")
    args = ap.parse_args(argv)
    robot = load_sim2sim_robot(None)
    thr = throughput(robot, args.steps, args.rounds)
    budget = cpu_budget(robot, 60, args.fps, 640, 480)
    liv = live(args.seconds, args.warmup, args.clients, args.fps, 640, 480)
    low = live(args.seconds, args.warmup, args.clients, args.fps_low, 640, 480) if args.fps_low > 0 else None
    fps_min = min(v["fps"] for c in liv["views_per_client"] for v in c.values())
    rtf_min = min(liv["rtf_per_engine"].values())
    summary = {
        "machine": {"cpus": os.cpu_count(), "loadavg_1min_during_live": liv["loadavg_1min"]},
        "targets": {"rtf_each_engine_min": 1.0, "fps_each_view_min": 30.0},
        "result": {
            "rtf_each_engine": liv["rtf_per_engine"],
            "fps_each_view_min": fps_min,
            "rtf_ok": rtf_min >= 0.99,
            "fps_ok": fps_min >= 30.0 * 0.97,
            "pybullet_raw_to_mujoco_raw": thr["ratio_to_mujoco_raw"]["pybullet_raw"],
            "pybullet_pd_to_mujoco_pd": thr["steps_per_s_median"]["pybullet_engine_pd"]
            / thr["steps_per_s_median"]["mujoco_engine_pd"],
        },
        "throughput": thr,
        "cpu_budget": budget,
        "live": liv,
        "live_low_fps": low,
        "seed": args.seed,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(args.out / "bench_sim2sim.png", liv, thr)
    r = summary["result"]
    med = thr["steps_per_s_median"]
    fps_txt = ", ".join(f"{v} {d['fps']:.1f}" for v, d in liv["views_per_client"][0].items())
    print(
        "throughput [steps/s]: "
        + ", ".join(f"{k} {v:.0f} ({thr['ratio_to_mujoco_raw'][k]:.2f}x)" for k, v in med.items())
    )
    print(
        f"live: rtf {', '.join(f'{n} {v:.3f}' for n, v in r['rtf_each_engine'].items())}; "
        f"fps per view {fps_txt}; "
        f"age p95 {max(d['age_ms_p95'] for d in liv['views_per_client'][0].values()):.0f} ms; "
        f"load {liv['loadavg_1min'][0]:.1f}/{liv['loadavg_1min'][1]:.1f}"
    )
    print(
        f"targets: rtf >= 1 {'OK' if r['rtf_ok'] else 'MISSED'}, >= 30 fps per view {'OK' if r['fps_ok'] else 'MISSED'}"
    )
    if low:
        print(
            f"live at {args.fps_low:g} fps cap: rtf {min(low['rtf_per_engine'].values()):.3f}; fps per view "
            + ", ".join(f"{v} {d['fps']:.1f}" for v, d in low["views_per_client"][0].items())
        )
    print(f"cpu: {budget['note']}")
    print(f"wrote {args.out / 'summary.json'}")
    return summary


if __name__ == "__main__":
    main()
