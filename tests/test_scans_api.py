"""The scans API on the real Lab app (create_lab_app) over real HTTP, with real point processes:
bad input, a 2 x 2 walk_stability scan to done, cancel mid-way, the token, and a real restart of
the Lab (``python app.py lab``) that leaves a scan interrupted and resumable."""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT, free_port, wait_until
from tests.test_scans_engine import alive


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The real Lab app (simulation thread not started: scans only) on a free port; (url, results dir)."""
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    results = tmp_path_factory.mktemp("scans_api")
    app = create_lab_app(results_dir=results, start=False, remote_url=f"http://127.0.0.1:{free_port()}")
    with ServerThread(app) as srv:
        yield srv.url, results


def post(url, body=None, **kw):
    return requests.post(url, json=body, timeout=60, **kw)


def wait_status(url, sid, statuses, timeout):
    return wait_until(
        lambda: (s := requests.get(f"{url}/api/scans/{sid}", timeout=5).json())["status"] in statuses and s,
        timeout,
        0.2,
    )


@pytest.mark.parametrize(
    ("body", "message", "hint"),
    [
        ({"kind": "walk_stability", "grid": {}}, "empty grid", "step_len [m]: number in [0, 0.15]"),
        (
            {"kind": "walk_stability", "grid": {"step_len": "0:0.15:0.001", "step_height": "0:0.1:0.001"}},
            "grid has 15,251 points",
            "at most 10,000 points",
        ),
        (
            {"kind": "walk_stability", "grid": {"step_len": ["long"]}},
            "step_len: value 'long' is not a number",
            "values as a list",
        ),
        (
            {"kind": "walk_stability", "grid": {"stride": [0.1]}},
            "unknown parameter 'stride'",
            "parameters of walk_stability: step_len",
        ),
        ({"kind": "run", "grid": {"x": [1]}}, "unknown scan kind 'run'", "available: walk_stability, push_recovery"),
        (
            {"kind": "walk_stability", "grid": {"steps": [2]}, "workers": 0},
            "workers must be an integer in [1, 256]",
            "one worker per core",
        ),
        ([1, 2], "expected a JSON object", ""),
    ],
)
def test_bad_scan_requests_get_400_with_a_hint_listing_what_is_accepted(lab, body, message, hint):
    url, _ = lab
    r = post(f"{url}/api/scans", body)
    assert r.status_code == 400
    err = r.json()
    assert message in err["error"]
    assert hint in err["hint"]


def test_unknown_scans_and_points_are_404_in_json(lab):
    url, _ = lab
    r = requests.get(f"{url}/api/scans/nope", timeout=5)
    assert r.status_code == 404 and r.json()["error"] == "no scan 'nope'"
    assert post(f"{url}/api/scans/nope/cancel").status_code == 404


def test_kinds_list_parameters_with_defaults_and_limits(lab):
    url, _ = lab
    kinds = {k["name"]: k for k in requests.get(f"{url}/api/scans/kinds", timeout=5).json()["kinds"]}
    assert kinds["walk_stability"]["available"] is True
    step_len = kinds["walk_stability"]["params"][0]
    assert step_len == {
        "name": "step_len",
        "default": 0.04,
        "min": 0.0,
        "max": 0.15,
        "unit": "m",
        "integer": False,
        "description": "forward step length",
    }
    assert kinds["push_recovery"]["pass_key"] == "recovered"


def test_a_2x2_walk_stability_scan_runs_to_done_and_its_csv_has_4_rows_with_values(lab):
    url, _ = lab
    r = post(
        f"{url}/api/scans",
        {
            "kind": "walk_stability",
            "grid": {"step_len": [0.02, 0.04], "step_height": [0.02, 0.04], "steps": [2]},
            "workers": 2,
        },
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    assert r.json()["total"] == 4
    assert sid in [s["id"] for s in requests.get(f"{url}/api/scans", timeout=5).json()["scans"]]
    s = wait_status(url, sid, ("done", "failed", "cancelled"), 240)
    assert s["status"] == "done" and s["done"] == s["total"] == 4 and s["progress"] == 1.0
    assert s["counts"]["done"] == 4, [p["error"] for p in s["points"]]

    text = requests.get(f"{url}/api/scans/{sid}/results.csv", timeout=5).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 4
    assert [(float(r["step_len"]), float(r["step_height"])) for r in rows] == [
        (0.02, 0.02),
        (0.02, 0.04),
        (0.04, 0.02),
        (0.04, 0.04),
    ]
    for row in rows:
        assert row["status"] == "done"
        assert float(row["pitch_max_deg"]) >= 0 and float(row["z_min"]) > 0
        assert row["stable"] in ("true", "false") and row["fell"] in ("true", "false")
    table = requests.get(f"{url}/api/scans/{sid}/results.json", timeout=5).json()
    assert len(table["rows"]) == 4 and table["summary"]["points_done"] == 4

    point = requests.get(f"{url}/api/scans/{sid}/points/3", timeout=5).json()
    assert point["params"]["step_len"] == 0.04 and point["figure"] == "walk_curves.png"
    assert {"summary.json", "walk_trace.csv", "walk_curves.png"} <= set(point["files"])
    png = requests.get(f"{url}/api/scans/{sid}/points/3/walk_curves.png", timeout=5)
    assert png.headers["Content-Type"] == "image/png" and png.content[:4] == b"\x89PNG"
    summary = requests.get(f"{url}/api/scans/{sid}/points/3/summary.json", timeout=5).json()
    assert summary["pitch_max_deg"] == pytest.approx(float(rows[3]["pitch_max_deg"]), rel=1e-5)
    assert requests.get(f"{url}/api/scans/{sid}/points/3/..%2Fscan.json", timeout=5).status_code == 404


def test_a_scan_cancelled_mid_way_stops_its_running_points_and_keeps_the_finished_ones(lab):
    url, results = lab
    r = post(f"{url}/api/scans", {"kind": "probe", "grid": {"sleep_s": [0.1, 0.2, 60, 61]}, "workers": 2})
    sid = r.json()["id"]
    pid_files = [results / "scans" / sid / "points" / f"{i:05d}" / "pids.json" for i in (2, 3)]

    def running():
        s = requests.get(f"{url}/api/scans/{sid}", timeout=5).json()
        return s["counts"]["done"] == 2 and s["counts"]["running"] == 2 and all(f.exists() for f in pid_files) and s

    s = wait_until(running, 60, 0.1)
    assert s["status"] == "running" and s["eta_s"] is not None
    pids = [json.loads(f.read_text()) for f in pid_files]
    assert all(alive(p["point"]) and alive(p["child"]) for p in pids)

    t0 = time.monotonic()
    r = post(f"{url}/api/scans/{sid}/cancel")
    assert r.status_code == 200
    assert time.monotonic() - t0 < 10
    s = r.json()
    assert s["status"] == "cancelled"
    assert [p["status"] for p in s["points"]] == ["done", "done", "cancelled", "cancelled"]
    wait_until(
        lambda: not any(alive(p["point"]) or alive(p["child"]) for p in pids), 10
    )  # the points and their children
    rows = list(csv.DictReader(io.StringIO(requests.get(f"{url}/api/scans/{sid}/results.csv", timeout=5).text)))
    assert [r["status"] for r in rows] == ["done", "done", "cancelled", "cancelled"]
    assert rows[0]["value"] == "0.1" and rows[1]["value"] == "0.2"
    assert post(f"{url}/api/scans/{sid}/cancel").status_code == 409


def test_state_changing_scan_routes_need_the_bearer_token_when_one_is_set(tmp_path):
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(
        results_dir=tmp_path, start=False, token="s3cret", remote_url=f"http://127.0.0.1:{free_port()}"
    )
    with ServerThread(app) as srv:
        body = {"kind": "probe", "grid": {"work_s": [0]}}
        r = post(f"{srv.url}/api/scans", body)
        assert r.status_code == 401 and "bearer token" in r.json()["error"]
        r = post(f"{srv.url}/api/scans", body, headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 201
        sid = r.json()["id"]
        assert requests.get(f"{srv.url}/api/scans/{sid}", timeout=5).status_code == 200  # reading is open
        assert post(f"{srv.url}/api/scans/{sid}/resume").status_code == 401


def start_lab(port: int, results: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "LAB_RESULTS": str(results)}
    cmd = [
        sys.executable,
        str(ROOT / "app.py"),
        "lab",
        "--port",
        str(port),
        "--remote-url",
        f"http://127.0.0.1:{free_port()}",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    wait_until(
        lambda: proc.poll() is None and requests.get(f"http://127.0.0.1:{port}/api/scans", timeout=2).ok, 60, 0.2
    )
    return proc


def stop_lab(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_scan_interrupted_by_stopping_the_lab_resumes_after_a_real_restart_without_rerunning_finished_points(
    tmp_path,
):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "lab.log"
    proc = start_lab(port, tmp_path, log)
    try:
        # 6 s of simulation per point (~1 s wall on a warm worker): the Lab stops while some are still to run
        grid = {"duration_s": [0.1], "force_n": [5, 10, 15, 20, 90, 100], "seconds": [6.0]}
        sid = post(f"{url}/api/scans", {"kind": "push_recovery", "grid": grid, "workers": 1}).json()["id"]
        wait_until(lambda: requests.get(f"{url}/api/scans/{sid}", timeout=5).json()["counts"]["done"] >= 2, 90, 0.1)
    finally:
        stop_lab(proc)
    assert proc.returncode == 0, log.read_text()[-2000:]
    before = {
        int(p.parent.name): json.loads(p.read_text())
        for p in (tmp_path / "scans" / sid / "points").glob("*/point.json")
    }
    finished = {i for i, rec in before.items() if rec["status"] == "done"}
    assert 2 <= len(finished) < 6

    proc = start_lab(port, tmp_path, log)
    try:
        s = requests.get(f"{url}/api/scans/{sid}", timeout=5).json()
        assert s["status"] == "interrupted"
        assert {p["index"] for p in s["points"] if p["status"] == "done"} == finished
        r = post(f"{url}/api/scans/{sid}/resume")
        assert r.status_code == 200 and r.json()["status"] in ("queued", "running")
        s = wait_status(url, sid, ("done", "failed", "cancelled", "interrupted"), 120)
        assert s["status"] == "done" and s["counts"]["done"] == 6
        for p in s["points"]:
            if p["index"] in finished:  # not run again: one attempt, the same record as before the restart
                assert p["attempts"] == 1
                rec = json.loads((tmp_path / "scans" / sid / "points" / f"{p['index']:05d}" / "point.json").read_text())
                assert rec["finished_at"] == before[p["index"]]["finished_at"]
        assert (
            len(s["runs"]) == 2
            and s["runs"][0]["status"] == "interrupted"
            and s["runs"][1]["points"] == 6 - len(finished)
        )
        rows = list(csv.DictReader(io.StringIO(requests.get(f"{url}/api/scans/{sid}/results.csv", timeout=5).text)))
        assert [r["recovered"] for r in rows] == ["true"] * 4 + ["false"] * 2
    finally:
        stop_lab(proc)
