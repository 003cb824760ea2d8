"""experiments/bench_walk.py --quick as a real process: it writes its JSON with every figure a finite
positive number, and the walker walked (offline and in the live Lab) without falling. No speed is
asserted here: the targets are the benchmark's to judge, on a full run."""

import json
import math
import subprocess
import sys

from tests.conftest import ROOT

OFFLINE_FIGURES = (
    "walker_update_ms_mean",
    "walker_update_ms_p95",
    "walker_us_per_tick",
    "walk_tick_us_median",
    "stand_tick_us_median",
    "walk_over_stand_ratio_median",
    "walk_rtf_median",
    "walk_rtf_min",
)
LIVE_FIGURES = ("rtf_median", "rtf_min", "rtf_window", "client_fps", "sim_time_advanced_s", "window_s")


def positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def test_the_quick_walk_benchmark_writes_finite_figures_and_the_walker_walks_without_falling(tmp_path):
    cmd = [sys.executable, str(ROOT / "experiments" / "bench_walk.py"), "--quick", "--out", str(tmp_path)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    s = json.loads((tmp_path / "bench_walk.json").read_text())
    assert s["quick"] is True
    assert len(s["load_average_start"]) == len(s["load_average_end"]) == 3

    (o,) = s["offline"]
    assert o["engine"] == "mujoco"
    for k in OFFLINE_FIGURES:
        assert positive(o[k]), (k, o[k])
    assert o["walker_updates"] > 0 and o["walker_update_every_ticks"] == 10
    assert o["walk_steps_taken"] > 0 and o["fell"] is False and o["sim_state"] == "running"

    lv = s["live"]
    for k in LIVE_FIGURES:
        assert positive(lv[k]), (k, lv[k])
    assert lv["mode"] == "walk" and lv["walking"] is True and lv["sim_state"] == "running"
    assert lv["steps"] > 0 and lv["steps_in_window"] > 0
    assert lv["fell"] is False and lv["fall_time"] is None
    assert lv["client_error"] is None

    for k in ("rtf_target", "fps_target", "live_rtf_median_ge_0.95", "live_fps_ge_50", "pass"):
        assert k in s["targets"]
    assert "bench_walk.json" in r.stdout
