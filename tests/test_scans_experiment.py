"""experiments/05_stability_scan.py as a real process: the 2 x 2 scan through the scan engine writes its
CSV with 4 rows, its JSON, summary and figures (issue 5's done-when item)."""

import csv
import json
import subprocess
import sys

from tests.conftest import ROOT


def test_the_2x2_stability_scan_writes_its_csv_with_4_rows_and_its_figures(tmp_path):
    cmd = [sys.executable, str(ROOT / "experiments" / "05_stability_scan.py"), "--step-lens", "0.02,0.04"]
    cmd += ["--step-heights", "0.02,0.04", "--steps", "2", "--workers", "2", "--out", str(tmp_path)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    with open(tmp_path / "stability_scan.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert {(r["step_len"], r["step_height"]) for r in rows} == {
        ("0.02", "0.02"),
        ("0.02", "0.04"),
        ("0.04", "0.02"),
        ("0.04", "0.04"),
    }
    assert all(r["status"] == "done" and float(r["pitch_max_deg"]) >= 0 and float(r["z_min"]) > 0 for r in rows)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["points"] == summary["points_done"] == 4 and summary["points_error"] == 0
    assert summary["stable"] + summary["fell"] == 4
    assert len(json.loads((tmp_path / "stability_scan.json").read_text())["rows"]) == 4
    for name in summary["figures"]:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert "4/4 points done" in r.stdout
