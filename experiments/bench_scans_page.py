"""The scans page and the server while a 10,000-point scan fills: update time in Chromium and the server's memory.

Serves the real Lab app (no simulation thread) with ``boundary_probe`` added to its kinds (a point that
returns at once, so the scan fills as fast as the workers hand points out), launches a 100 x 100 sweep,
opens the scans page on it in real Chromium and reads the page's own timings (``window.scanTimings``,
``performance.now`` around each detail update: fetch = request to parsed JSON, render = everything
drawn) while it fills and once it is done. The server's RSS is read before the scan, when it is done,
and after 20 detail requests; the size of one detail response is measured too.

    python experiments/bench_scans_page.py --out results/bench_scans_page

Writes ``OUT/summary.json``; the last line printed is the same JSON.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb() -> float:
    """This process's resident memory [MB] (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stats(xs: list) -> dict:
    if not xs:
        return {"n": 0}
    xs = sorted(xs)
    return {
        "n": len(xs),
        "median_ms": round(statistics.median(xs), 2),
        "p95_ms": round(xs[min(len(xs) - 1, int(0.95 * len(xs)))], 2),
        "max_ms": round(xs[-1], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_scans_page")
    ap.add_argument("--side", type=int, default=100, help="the grid is side x side points")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="unused: the scan is deterministic")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    from lab.scans.builtin import BOUNDARY_PROBE, builtin_kinds
    from lab.scans.registry import make_kinds
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    results = Path(tempfile.mkdtemp(prefix="bench_scans_page_"))
    app = create_lab_app(results_dir=results, start=False, remote_url="http://127.0.0.1:9")
    app.extensions["scans"].kinds = make_kinds(*builtin_kinds(), BOUNDARY_PROBE)
    step = 100 / a.side
    with ServerThread(app) as srv, sync_playwright() as p:
        url = srv.url
        requests.get(f"{url}/api/scans", timeout=10)
        rss_before = rss_mb()
        body = {
            "kind": "boundary_probe",
            "grid": {"x": f"0:{100 - step}:{step}", "y": f"0:{100 - step}:{step}"},
            "workers": a.workers,
        }
        t0 = time.perf_counter()
        sid = requests.post(f"{url}/api/scans", json=body, timeout=60).json()["id"]
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/scans#scan={sid}")
        filling, samples = [], []
        while True:
            s = requests.get(f"{url}/api/scans/{sid}?points=0", timeout=30).json()
            samples.append((round(time.perf_counter() - t0, 2), s["done"]))
            if s["status"] != "running" and s["status"] != "queued":
                break
            time.sleep(0.5)
        fill_s = time.perf_counter() - t0
        filling = page.evaluate("JSON.parse(JSON.stringify(window.scanTimings))")
        page.wait_for_function("document.getElementById('d-status').textContent === 'done'", timeout=60000)
        page.wait_for_timeout(6000)  # a done scan is polled every 5 s: at least one more update
        done = page.evaluate("JSON.parse(JSON.stringify(window.scanTimings))")
        page.screenshot(path=str(a.out / "scans_10k.png"), full_page=True)
        rss_done = rss_mb()
        sizes, fetch_s = [], []
        for _ in range(20):
            t = time.perf_counter()
            r = requests.get(f"{url}/api/scans/{sid}", timeout=30)
            fetch_s.append(1000 * (time.perf_counter() - t))
            sizes.append(len(r.content))
        rss_after = rss_mb()
        full = requests.get(f"{url}/api/scans/{sid}?points=1&limit=1000", timeout=30)
        browser.close()
    n = s["total"]
    summary = {
        "points": n,
        "workers": a.workers,
        "status": s["status"],
        "fill_s": round(fill_s, 2),
        "points_per_s": round(n / fill_s, 1),
        "page_update_while_filling": {
            "fetch": stats(filling["fetch"]),
            "render": stats(filling["render"]),
            "heatmap": stats(filling["heatmap"]),
        },
        "page_update_done": {"render": stats(done["render"][len(filling["render"]) :] or done["render"][-1:])},
        "detail_bytes": sizes[0],
        "detail_request_ms": stats(fetch_s),
        "page_of_1000_points_bytes": len(full.content),
        "server_rss_mb": {
            "before": round(rss_before, 1),
            "done": round(rss_done, 1),
            "after_20_details": round(rss_after, 1),
            "scan_delta": round(rss_after - rss_before, 1),
        },
        "page_errors": errors,
        "progress_samples": samples[:: max(1, len(samples) // 10)],
        "note": "the server runs in this process (ServerThread): its RSS includes Playwright's client, not Chromium",
    }
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
