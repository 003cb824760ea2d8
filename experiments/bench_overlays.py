"""Benchmark: what the drawn overlays cost per rendered frame.

Three figures per situation (``stand``, ``push`` while the push acts, ``walk`` in single support), on the
built-in robot:

1. :func:`lab.runtime.overlay_state.capture` [µs] under the runner's lock (the render source calls it
   once per rendered frame, up to 60 Hz, so it holds the simulation thread for that long), in MuJoCo and
   in PyBullet (Sim2Sim's runner);
2. :func:`lab.render.overlays.draw` [µs] with every overlay on (geoms added to the scene);
3. a whole ``Renderer.render`` at 640 x 480 in the ``fast`` preset [ms], without and with every overlay.

Each is the median and p95 of ``--repeats`` calls. The machine is shared: the load average is recorded.

    python experiments/bench_overlays.py [--repeats 300] [--seed 0] [--out results/bench_overlays]
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lab  # noqa: E402, F401  (chooses EGL before anything imports mujoco)
from lab.render import overlays  # noqa: E402
from lab.render.renderer import Renderer, gl_info  # noqa: E402
from lab.robots.model import load_robot  # noqa: E402
from lab.runtime.lockstep import Lockstep  # noqa: E402
from lab.runtime.overlay_state import capture  # noqa: E402
from lab.runtime.session import SimSession  # noqa: E402

SITUATIONS = {"stand": ("stand", 0.5), "push": ("push", 1.05), "walk": ("walk", 1.5)}  # mode, seconds in


def timed(fn, repeats: int) -> dict:
    """Median and p95 wall time of ``fn()`` [µs]."""
    fn()
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    us = np.array(t) * 1e6
    return {"median_us": round(float(np.median(us)), 1), "p95_us": round(float(np.percentile(us, 95)), 1)}


def under_lock(runner, name):
    def f():
        with runner._lock:
            return capture(runner, name)

    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0, help="unused: every run is deterministic; kept for the convention")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_overlays")
    a = ap.parse_args()
    import mujoco  # after lab, which chooses EGL

    np.random.seed(a.seed)
    robot = load_robot()
    ren = Renderer(robot.model, 640, 480, "fast")
    everything = frozenset(overlays.OVERLAYS)
    out = {"renderer": gl_info()["renderer"], "load_avg": os.getloadavg(), "repeats": a.repeats, "situations": {}}
    for label, (mode, seconds) in SITUATIONS.items():
        s = SimSession(robot, mode)
        s.advance(seconds)
        ls = Lockstep(robot, mode)
        ls.advance(seconds)
        q, _ = s.snapshot()
        state = under_lock(s, s.engine.name)()
        d = mujoco.MjData(robot.model)
        d.qpos[:] = q
        mujoco.mj_kinematics(robot.model, d)
        mujoco.mj_comPos(robot.model, d)
        scene = mujoco.MjvScene(robot.model, maxgeom=2000)
        opt, cam = mujoco.MjvOption(), mujoco.MjvCamera()
        mujoco.mjv_updateScene(robot.model, d, opt, None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene)
        n0 = scene.ngeom

        def draw_all():
            scene.ngeom = n0
            overlays.draw(scene, robot.model, d, everything, state, ren.size)

        draw_all()
        row = {
            "keys": sorted(state),
            "geoms_added": scene.ngeom - n0,
            "capture_mujoco": timed(under_lock(s, s.engine.name), a.repeats),
            "capture_pybullet": timed(under_lock(ls, "pybullet"), a.repeats),
            "draw_all": timed(draw_all, a.repeats),
            "render_off": timed(lambda: ren.render(q), a.repeats // 3),
            "render_all": timed(lambda: ren.render(q, overlays=everything, overlay_state=state), a.repeats // 3),
        }
        out["situations"][label] = row
        s.close()
        ls.close()
        print(
            f"{label:6s} capture MuJoCo {row['capture_mujoco']['median_us']:7.1f} µs  PyBullet "
            f"{row['capture_pybullet']['median_us']:7.1f} µs  draw {row['draw_all']['median_us']:7.1f} µs "
            f"({row['geoms_added']} geoms)  render {row['render_off']['median_us'] / 1e3:5.1f} -> "
            f"{row['render_all']['median_us'] / 1e3:5.1f} ms"
        )
    ren.close()
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "summary.json").write_text(json.dumps(out, indent=2))
    print(f"wrote {a.out / 'summary.json'}")


if __name__ == "__main__":
    main()
