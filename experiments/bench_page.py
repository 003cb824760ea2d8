"""Benchmark: the Lab page's displayed frames/s in a real Chromium, frames drawn on the main thread vs in
the frame worker (static/js/frame_worker.js, an OffscreenCanvas), with and without a busy main thread.

Starts the Lab (``python app.py lab``) as a child process and opens its page in Debian's Chromium
(Playwright) once per drawer (``?draw=main`` | ``?draw=worker``) and main-thread load:

- ``none``: the page as it is (its four Plotly strip charts redraw at 4 Hz, one chart per tick);
- ``charts``: besides, every chart redrawn (``Plotly.redraw``) ``--chart-hz`` times a second;
- ``busy``: besides, a busy loop of ``--busy-ms`` every ``--busy-period-ms`` (this script's only).

Over the same window it reads the page's own counters: frames drawn per second (``FrameView.frames``,
what ``FrameView.fps()`` shows), requestAnimationFrame callbacks per second (the page's own frame rate),
the frame age p95 at the page (``StreamSocket.frameAgeP95``: draw-side lag included, since frames wait
for the ack), and the share of the window the main thread spent in long tasks (> 50 ms).

    python experiments/bench_page.py [--seconds 8] [--warmup 3] [--out results/bench_page]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import requests
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]

# counters the page does not keep itself: rAF callbacks and long-task time [ms]
PROBE = """() => {
  window.bench = { raf: 0, longMs: 0 };
  const tick = () => { window.bench.raf += 1; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  new PerformanceObserver((l) => { for (const e of l.getEntries()) window.bench.longMs += e.duration; })
    .observe({ entryTypes: ['longtask'] });
}"""
LOADS = {
    "none": None,
    "charts": """(hz) => setInterval(() => document.querySelectorAll('.plots .plot').forEach((el) => Plotly.redraw(el)),
                                      1000 / hz)""",
    "busy": """([ms, period]) => setInterval(() => { const t = performance.now(); while (performance.now() - t < ms); },
                                               period)""",
}
SAMPLE = """() => ({ t: performance.now(), frames: window.labView.frames, raf: window.bench.raf,
                     longMs: window.bench.longMs, drawer: window.labView.info().drawer,
                     age: window.labSocket.frameAgeP95() })"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(fps: float) -> tuple[subprocess.Popen, str, dict]:
    """The Lab as a child process; (process, base URL, its GET /api/status)."""
    port = free_port()
    cmd = [sys.executable, str(ROOT / "app.py"), "lab", "--port", str(port), "--fps", str(fps)]
    cmd += ["--remote-url", f"http://127.0.0.1:{free_port()}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            return proc, base, requests.get(base + "/api/status", timeout=2).json()
        except requests.RequestException:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit(f"the Lab did not start: {proc.stderr.read().decode()[-2000:]}") from None
            time.sleep(0.3)


def measure(browser, base: str, draw: str, load: str, args) -> dict:
    """One page, one drawer, one load: the page's rates over ``args.seconds`` after ``args.warmup``."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    try:
        page.goto(f"{base}/?draw={draw}")
        page.wait_for_function("window.labView && window.labView.frames > 0", timeout=30000)
        page.evaluate(PROBE)
        if load == "charts":
            page.evaluate(LOADS[load], args.chart_hz)
        elif load == "busy":
            page.evaluate(LOADS[load], [args.busy_ms, args.busy_period_ms])
        time.sleep(args.warmup)
        s0 = page.evaluate(SAMPLE)
        time.sleep(args.seconds)
        s1 = page.evaluate(SAMPLE)
    finally:
        ctx.close()
    dt = (s1["t"] - s0["t"]) / 1000
    return {
        "draw": s1["drawer"],
        "load": load,
        "displayed_fps": round((s1["frames"] - s0["frames"]) / dt, 1),
        "raf_per_s": round((s1["raf"] - s0["raf"]) / dt, 1),
        "frame_age_ms_p95": None if s1["age"] is None else round(s1["age"]),
        "long_task_share": round((s1["longMs"] - s0["longMs"]) / 1000 / dt, 2),
    }


def median_row(rows: list[dict]) -> dict:
    """Each measured field's median over repeated rows of one (load, drawer)."""
    out = {"draw": rows[0]["draw"], "load": rows[0]["load"], "rounds": len(rows)}
    for k in ("displayed_fps", "raf_per_s", "frame_age_ms_p95", "long_task_share"):
        vals = [r[k] for r in rows if r[k] is not None]
        out[k] = statistics.median(vals) if vals else None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="measuring window per row [s]")
    ap.add_argument("--warmup", type=float, default=3.0, help="after the first frame, before the window [s]")
    ap.add_argument("--fps", type=float, default=60, help="the Lab's stream frame-rate cap [frames/s]")
    ap.add_argument("--loads", default="none,charts,busy")
    ap.add_argument("--chart-hz", type=float, default=10, help="`charts` load: redraws of every chart per second")
    ap.add_argument("--busy-ms", type=float, default=40, help="`busy` load: one busy loop [ms] ...")
    ap.add_argument("--busy-period-ms", type=float, default=50, help="... every this many ms")
    ap.add_argument("--repeats", type=int, default=1, help="rounds of every row, interleaved (a busy machine drifts)")
    ap.add_argument("--seed", type=int, default=0, help="unused: nothing random")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_page")
    args = ap.parse_args()
    proc, base, status = start_lab(args.fps)
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(args.repeats):
                for load in args.loads.split(","):
                    for draw in ("main", "worker"):
                        rows.append(measure(browser, base, draw, load, args))
                        print(json.dumps(rows[-1]), flush=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)
    medians = [
        median_row([r for r in rows if (r["load"], r["draw"]) == key])
        for key in dict.fromkeys((r["load"], r["draw"]) for r in rows)
    ]
    print(f"\nmedians over {args.repeats} round(s); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'load':<8}{'draw':<8}{'displayed fps':>14}{'rAF/s':>8}{'age p95 ms':>12}{'long tasks':>12}")
    for r in medians:
        print(
            f"{r['load']:<8}{r['draw']:<8}{r['displayed_fps']:>14}{r['raf_per_s']:>8}"
            f"{r['frame_age_ms_p95']!s:>12}{r['long_task_share']:>12.0%}"
        )
    summary = {
        "renderer": status["render"]["gl"]["renderer"],
        "preset": status["render"]["preset"],
        "size": [status["render"]["width"], status["render"]["height"]],
        "fps_cap": args.fps,
        "seconds": args.seconds,
        "chart_hz": args.chart_hz,
        "busy_ms_per_period": [args.busy_ms, args.busy_period_ms],
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "medians": medians,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"wrote {args.out / 'summary.json'}")


if __name__ == "__main__":
    main()
