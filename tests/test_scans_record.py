"""Scan points that keep their recording (``"record": true``, lab/scans/recording.py) on the real Lab app over
real HTTP, with real warm workers on the real model: each point of a 2-point push scan leaves a recording that
replays bit-exactly and gives the same numbers as the point run without it; the replay routes open a point's
recording by its id (lab/web/scan_recordings.py), anything else is a 404 that says why; a scan without the
option keeps none; a 1-point feedback walk_stability scan keeps one too, and its walk gives the same numbers as
without. In Chromium: the drill-down's Replay link opens the replay page with the timeline loaded."""

import os

import numpy as np
import pytest
import requests

from lab.record import open_recording
from lab.record.replay import replay
from tests.conftest import free_port, wait_until

PUSH = {"duration_s": [0.1], "seconds": [1.5]}  # 1.5 s points: the push at 0.5 s, 1 s watched after it


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    """The Lab app (no simulation thread) with a finished 2-point push scan kept with its recordings and a
    1-point scan of the same push at 90 N without: (url, results, recorded scan, plain scan)."""
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    results = tmp_path_factory.mktemp("scans_record")
    app = create_lab_app(results_dir=results, start=False, remote_url=f"http://127.0.0.1:{free_port()}")
    with ServerThread(app) as srv:
        url = srv.url
        body = {"kind": "push_recovery", "grid": {**PUSH, "force_n": [20, 90]}, "workers": 2, "record": True}
        rec = requests.post(f"{url}/api/scans", json=body, timeout=30).json()
        body = {"kind": "push_recovery", "grid": {**PUSH, "force_n": [90]}, "workers": 1}
        plain = requests.post(f"{url}/api/scans", json=body, timeout=30).json()
        for s in (rec, plain):
            wait_until(lambda s=s: requests.get(f"{url}/api/scans/{s['id']}", timeout=5).json()["status"] == "done", 90)
        yield url, results, rec["id"], plain["id"]


def test_each_point_keeps_a_bit_exact_recording_that_the_replay_routes_serve_and_nothing_else(scans):
    url, results, sid, plain = scans
    assert requests.get(f"{url}/api/scans/{sid}", timeout=5).json()["record"] is True
    for i, force in enumerate((20.0, 90.0)):
        p = requests.get(f"{url}/api/scans/{sid}/points/{i}", timeout=5).json()
        assert p["status"] == "done" and p["params"]["force_n"] == force
        assert "recording.mcap" in p["files"]
        path = results / "scans" / sid / "points" / f"{i:05d}" / "recording.mcap"
        with open_recording(path) as rec:
            out = replay(rec)
            assert rec.meta["mode"] == "push" and f"force_n={force}" in rec.meta["label"]
            assert [e["t"] for e in rec.events() if e["kind"] == "push"] == [0.5]
            _, d = rec.state_at(0.7)
            qpos = d.qpos.copy()
        assert out["max_qpos_diff"] == 0.0 and out["ok"] and out["steps"] == 1500, out

        rid = f"scan:{sid}:{i}"  # the replay routes open it through the same code as a stored recording
        tl = requests.get(f"{url}/api/recordings/{rid}/timeline", timeout=10).json()
        assert tl["duration_s"] == 1.5 and tl["exact"] and len(tl["series"]["t"]) > 30
        assert [e["kind"] for e in tl["events"]] == ["start", "push", "stop"]
        st = requests.get(f"{url}/api/recordings/{rid}/state?t=0.7", timeout=10).json()
        assert st["t"] == 0.7 and np.allclose(st["qpos"], qpos, atol=1e-9)
        got = requests.get(f"{url}/api/scans/{sid}/points/{i}/recording.mcap", timeout=10)
        assert got.status_code == 200 and got.content == path.read_bytes()
        page = requests.get(f"{url}/replay", params={"scan": sid, "point": i}, timeout=10)
        assert page.status_code == 200 and f'data-rid="{rid}"' in page.text

    # the recording changes nothing: the 90 N point without it gives the same numbers
    def numbers(s, i):
        m = requests.get(f"{url}/api/scans/{s}/points/{i}", timeout=5).json()["metrics"]
        return {k: v for k, v in m.items() if k != "sim_wall_s"}

    assert numbers(plain, 0) == numbers(sid, 1) and numbers(plain, 0)["fell"]

    # a scan without the option keeps none; a link planted there is never followed
    folder = results / "scans" / plain / "points" / "00000"
    assert not [f for f in os.listdir(folder) if f.endswith(".mcap")]
    assert "recording.mcap" not in requests.get(f"{url}/api/scans/{plain}/points/0", timeout=5).json()["files"]
    os.symlink(results / "scans" / sid / "points" / "00000" / "recording.mcap", folder / "recording.mcap")
    for rid, error, hint in (
        (f"scan:{plain}:0", f"point 0 of scan '{plain}' has no recording", 'launched without "record"'),
        (f"scan:{sid}:7", f"scan '{sid}' has no point 7", "points are 0 .. 1"),
        ("scan:nope:0", "no scan 'nope'", "GET /api/scans"),
        (f"scan:{sid}:x", "no scan point recording", "scan:<scan id>:<point>"),
    ):
        for route in ("timeline", "state?t=0"):
            r = requests.get(f"{url}/api/recordings/{rid}/{route}", timeout=10)
            assert r.status_code == 404, (rid, route, r.text)
            assert error in r.json()["error"] and hint in r.json()["hint"], r.json()
    page = requests.get(f"{url}/replay", params={"scan": "nope", "point": 0}, timeout=10)
    assert "no scan &#39;nope&#39;" in page.text and "data-rid" not in page.text

    # the option is checked like the others
    for body, error, hint in (
        ({"kind": "push_recovery", "grid": {"force_n": [20]}, "record": "yes"}, "record must be true or false", ""),
        ({"kind": "probe", "grid": {"work_s": [0]}, "record": True}, "'probe' keeps no recording", "push_recovery"),
    ):
        r = requests.post(f"{url}/api/scans", json=body, timeout=10)
        assert r.status_code == 400 and error in r.json()["error"] and hint in r.json()["hint"], r.json()


@pytest.mark.e2e
def test_the_drill_down_offers_replay_and_it_opens_the_points_recording(scans, page):
    url, _, sid, _ = scans
    page.goto(f"{url}/scans#scan={sid}")
    page.wait_for_function("document.getElementById('d-status').textContent === 'done'", timeout=20000)
    xy = page.evaluate(
        """() => { const el = document.getElementById('heatmap'), fl = el._fullLayout, r = el.getBoundingClientRect();
                   return [r.left + fl._size.l + fl.xaxis.l2p(1), r.top + fl._size.t + fl.yaxis.l2p(0)]; }"""
    )
    page.mouse.click(*xy)  # the 90 N point
    page.wait_for_selector("#p-replay:not([hidden])", timeout=15000)
    assert "force_n=90" in page.text_content("#p-title")
    assert page.get_attribute("#p-replay", "href") == f"/replay?scan={sid}&point=1"
    with page.expect_navigation():
        page.click("#p-replay")
    page.wait_for_function(
        "typeof window.replay?.timeline === 'function' && window.replay.timeline() && window.replay.shown() === 0",
        timeout=30000,
    )
    assert page.evaluate("window.replay.timeline().duration_s") == 1.5
    assert page.input_value("#pick") == f"scan:{sid}:1"
    assert page.locator(".event-mark[data-kind='push']").count() == 1
    assert page.get_attribute("#replay-scan", "href") == f"/scans#scan={sid}"  # the way back to the scan
    assert not page.errors, page.errors


def test_a_walk_point_keeps_a_bit_exact_recording_and_the_same_numbers(scans):
    url, results, _, _ = scans
    grid = {"step_len": [0.04], "steps": [2], "controller": ["feedback"]}
    rec, plain = (
        requests.post(f"{url}/api/scans", json={"kind": "walk_stability", "grid": grid, **extra}, timeout=30).json()
        for extra in ({"record": True}, {})
    )
    points = {}
    for s in (rec["id"], plain["id"]):
        wait_until(lambda s=s: requests.get(f"{url}/api/scans/{s}", timeout=5).json()["status"] == "done", 60)
        points[s] = requests.get(f"{url}/api/scans/{s}/points/0", timeout=5).json()
    p = points[rec["id"]]
    assert p["status"] == "done" and "recording.mcap" in p["files"]
    assert "recording.mcap" not in points[plain["id"]]["files"]
    with open_recording(results / "scans" / rec["id"] / "points" / "00000" / "recording.mcap") as r:
        out = replay(r)
        assert r.meta["mode"] == "walk" and "controller=feedback" in r.meta["label"]
    assert out["max_qpos_diff"] == 0.0 and out["ok"] and out["steps"] == round(p["metrics"]["sim_duration_s"] / 1e-3)

    timing = {"wall_s", "rtf", "controller_ms_mean", "controller_ms_p95", "sim_wall_s"}  # the machine's, not the walk's
    numbers = {s: {k: v for k, v in q["metrics"].items() if k not in timing} for s, q in points.items()}
    assert numbers[rec["id"]] == numbers[plain["id"]] and numbers[plain["id"]]["steps_completed"] >= 2
