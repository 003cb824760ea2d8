"""Benchmark: the Lab page plotting N picked signals live (8 at 25 Hz by default) for many minutes.

Starts the Lab (``python app.py lab``) as a child process in ``squat`` (the signals move), opens the
Lab page in a real Chromium (Playwright, ``/usr/bin/chromium``), picks ``--traces`` signals through
the page's picker module and then, every ``--every`` seconds, records:

- the page's frame rate: ``requestAnimationFrame`` callbacks per second of wall time (a counter
  injected before the page's scripts);
- the chart's redraw time (``performance.mark``/``measure`` around each redraw in static/js/signals.js:
  p50/p95/max of the last 256) and its samples per second (the stream's rate as the page gets it);
- the live view's displayed frames/s (the page's own counter);
- the JS heap in use after a forced garbage collection and the DOM node count (CDP
  ``Runtime.getHeapUsage``, ``Memory.getDOMCounters``);
- the server's resident memory (``/proc/<pid>/status`` VmRSS) and its real-time factor.

Before that it measures the page's frame rate for ``--baseline`` seconds with nothing picked, what a
Plotly chart of the same shape costs per redraw (``Plotly.react``, 8 traces x 250 points, in the same
page: the reason the page draws on its own canvas), and the server-side cost of one read of the pick
(:meth:`lab.web.signals.Catalog.read`, in this process, on the same model). Nothing is random.

    python experiments/bench_signals.py [--minutes 10] [--traces 8] [--every 30] [--out results/bench_signals]

Prints a table and writes ``bench_signals.json`` under ``--out``. Memory is judged bounded when the
heap and the RSS after the first minute grow by less than a few MB over the rest of the run.
"""

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-sync"]
PICK = [  # a mix of every kind; --traces takes the first N
    "q/left_knee_joint",
    "q_target/left_knee_joint",
    "tau/left_knee_joint",
    "qd/left_hip_pitch_joint",
    "foot/left/fz",
    "foot/right/fz",
    "base/pitch",
    "metric/pelvis_z",
    "base/z",
    "tau/right_knee_joint",
    "contact/left_foot_link/fx",
    "foot/left/cop_x",
    "base/vx",
    "base/wy",
    "metric/com_x",
    "metric/margin",
]
RAF_COUNTER = "window.__raf = 0; (function tick() { window.__raf += 1; requestAnimationFrame(tick); })();"
PLOTLY_PROBE = """async ([traces, points, rounds]) => {
  const div = document.createElement('div');
  div.style.cssText = 'width: 900px; height: 400px';
  document.body.append(div);
  const xs = Array.from({ length: points }, (_, i) => i * 0.04);
  const data = (shift) => Array.from({ length: traces }, (_, k) =>
    ({ x: xs.map((x) => x + shift), y: xs.map((x) => Math.sin(x + shift + k)), mode: 'lines' }));
  Plotly.newPlot(div, data(0), { margin: { t: 20 } }, { displayModeBar: false, staticPlot: true });
  const ms = [];
  for (let r = 1; r <= rounds; r++) {
    const t0 = performance.now();
    Plotly.react(div, data(r * 0.04), { margin: { t: 20 } });
    ms.push(performance.now() - t0);
    await new Promise((ok) => requestAnimationFrame(ok));
  }
  Plotly.purge(div);
  div.remove();
  ms.sort((a, b) => a - b);
  return { mean: ms.reduce((a, b) => a + b, 0) / ms.length, p50: ms[ms.length >> 1], p95: ms[Math.floor(0.95 * ms.length)] };
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def start_lab(port: int) -> subprocess.Popen:
    cmd = [sys.executable, str(ROOT / "app.py"), "lab", "--port", str(port), "--state-port", str(free_port())]
    proc = subprocess.Popen([*cmd, "--mode", "squat"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 90
    while True:
        try:
            requests.get(f"http://127.0.0.1:{port}/api/status", timeout=2).raise_for_status()
            return proc
        except requests.RequestException:
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit(f"the Lab did not start: {proc.stderr.read().decode()[-2000:]}") from None
            time.sleep(0.3)


def read_cost(names: list, reads: int = 5000) -> dict:
    """Microseconds per :meth:`Catalog.read` of ``names`` on a session of the built-in robot (no thread)."""
    from lab.robots.model import load_robot
    from lab.runtime.session import SimSession
    from lab.web.signals import Catalog

    session = SimSession(load_robot(), mode="squat")
    session.advance(1.0)
    cat = Catalog(session)
    pick = cat.pick(names)
    t0 = time.perf_counter()
    for _ in range(reads):
        cat.read(pick)
    us = (time.perf_counter() - t0) / reads * 1e6
    steps = 2000  # the physics step on the same session, for scale
    t0 = time.perf_counter()
    session.advance(steps * session.dt)
    step_us = (time.perf_counter() - t0) / steps * 1e6
    session.close()
    # the simulation waits for the lock during each read: 25 reads/s per client
    return {"read_us": round(us, 2), "step_us": round(step_us, 2), "lock_share_per_client": round(us * 25 / 1e6, 6)}


def sample(page, cdp, proc, base, t_start, prev) -> dict:
    now = time.time()
    raf = page.evaluate("window.__raf")
    st = page.evaluate("window.labSignals.stats()")
    cdp.send("HeapProfiler.collectGarbage")
    heap = cdp.send("Runtime.getHeapUsage")
    dom = cdp.send("Memory.getDOMCounters")
    view_fps = page.evaluate("window.labView ? window.labView.fps() : null")
    status = requests.get(base + "/api/status", timeout=5).json()
    dt = now - prev["wall"]
    row = {
        "t_s": round(now - t_start, 1),
        "page_fps": round((raf - prev["raf"]) / dt, 1),
        "view_fps": view_fps,
        "samples_hz": round((st["samples"] - prev["samples"]) / dt, 1),
        "redraws_hz": round((st["redraws"] - prev["redraws"]) / dt, 1),
        "redraw_p50_ms": round(st["redraw_ms"]["p50"], 2),
        "redraw_p95_ms": round(st["redraw_ms"]["p95"], 2),
        "redraw_max_ms": round(st["redraw_ms"]["max"], 2),
        "heap_mb": round(heap["usedSize"] / 2**20, 2),
        "dom_nodes": dom["nodes"],
        "buffered": st["buffered"],
        "server_rss_mb": round(rss_mb(proc.pid), 1),
        "rtf": status["rtf"],
    }
    prev.update(wall=now, raf=raf, samples=st["samples"], redraws=st["redraws"])
    return row


def growth(rows: list, key: str) -> float | None:
    """Growth of ``key`` from the first row after the first minute to the last row (MB)."""
    later = [r for r in rows if r["t_s"] >= 60]
    if len(later) < 2:
        return None
    return round(later[-1][key] - later[0][key], 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--traces", type=int, default=8, choices=range(1, len(PICK) + 1), metavar=f"1..{len(PICK)}")
    ap.add_argument("--every", type=float, default=30.0, help="seconds between rows")
    ap.add_argument("--baseline", type=float, default=20.0, help="seconds of page frame rate with nothing picked")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_signals"))
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    names = PICK[: args.traces]
    cost = read_cost(names)
    print(f"server read of {len(names)} signals: {cost['read_us']} us (a physics step: {cost['step_us']} us)")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_lab(port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, "--enable-precise-memory-info"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(RAF_COUNTER)
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(base + "/")
            page.wait_for_function("window.labSignals && document.querySelectorAll('.sig-item').length > 0")
            page.locator("#signals-panel").scroll_into_view_if_needed()
            cdp = page.context.new_cdp_session(page)
            for domain in ("Runtime", "HeapProfiler"):
                cdp.send(f"{domain}.enable")
            plotly = page.evaluate(PLOTLY_PROBE, [len(names), 250, 40])
            print(
                f"Plotly.react, {len(names)} traces x 250 points: p50 {plotly['p50']:.1f} ms, p95 {plotly['p95']:.1f} ms"
            )
            raf0, w0 = page.evaluate("window.__raf"), time.time()
            time.sleep(args.baseline)
            baseline_fps = round((page.evaluate("window.__raf") - raf0) / (time.time() - w0), 1)
            print(f"page frame rate with nothing picked: {baseline_fps} /s")
            page.evaluate("(names) => window.labSignals.pick(names)", names)
            page.wait_for_function(
                f"window.labSignals.stats().traces === {len(names)} && window.labSignals.stats().samples > 0"
            )
            st = page.evaluate("window.labSignals.stats()")
            t_start = time.time()
            prev = {
                "wall": t_start,
                "raf": page.evaluate("window.__raf"),
                "samples": st["samples"],
                "redraws": st["redraws"],
            }
            rows = []
            cols = [
                "t_s",
                "page_fps",
                "view_fps",
                "samples_hz",
                "redraws_hz",
                "redraw_p50_ms",
                "redraw_p95_ms",
                "redraw_max_ms",
                "heap_mb",
                "dom_nodes",
                "server_rss_mb",
                "rtf",
            ]
            print(" ".join(f"{c:>13}" for c in cols))
            while time.time() - t_start < args.minutes * 60:
                time.sleep(min(args.every, max(0.5, args.minutes * 60 - (time.time() - t_start))))
                row = sample(page, cdp, proc, base, t_start, prev)
                rows.append(row)
                print(" ".join(f"{row[c]!s:>13}" for c in cols), flush=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)
    summary = {
        "traces": names,
        "minutes": args.minutes,
        "baseline_page_fps": baseline_fps,
        "page_fps_min": min(r["page_fps"] for r in rows),
        "samples_hz_mean": round(sum(r["samples_hz"] for r in rows) / len(rows), 2),
        "redraw_p95_ms_max": max(r["redraw_p95_ms"] for r in rows),
        "redraw_max_ms_max": max(r["redraw_max_ms"] for r in rows),
        "heap_growth_after_1min_mb": growth(rows, "heap_mb"),
        "rss_growth_after_1min_mb": growth(rows, "server_rss_mb"),
        "dom_nodes_range": [min(r["dom_nodes"] for r in rows), max(r["dom_nodes"] for r in rows)],
        "plotly_react_ms": {k: round(v, 2) for k, v in plotly.items()},
        "server_read": cost,
        "page_errors": errors,
    }
    print(json.dumps(summary, indent=1))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_signals.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    print(f"wrote {out / 'bench_signals.json'}")


if __name__ == "__main__":
    main()
