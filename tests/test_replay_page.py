"""The replay page (lab/web/replay_page.py) in Debian's Chromium, on a real recording of a real push run:
scrubbing changes the frame, an event marker seeks to its event, play runs the cursor on; and its WebSocket
and HTTP API with a real client (the exact state at a time, bad cursor messages, a missing recording)."""

import json

import numpy as np
import pytest
import requests

from lab.record import open_recording
from tests.conftest import SCREENSHOTS, WsClient, free_port, record_offline, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def recorded(robot, tmp_path_factory):
    """A results folder with one 3 s recording of the push mode (its first push at 1 s), made offline."""
    results = tmp_path_factory.mktemp("replay")
    return results, record_offline(robot, results, "push", 3.0, "replay test")


@pytest.fixture(scope="module")
def lab(recorded):
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    results, rid = recorded
    app = create_lab_app(remote_url=f"http://127.0.0.1:{free_port()}", results_dir=results)
    with ServerThread(app) as srv:
        wait_until(lambda: requests.get(srv.url + "/api/recordings", timeout=5).json()["recordings"], 10)
        yield srv.url, rid


def test_the_state_at_a_time_over_http_is_the_exact_recorded_state(lab, recorded):
    base, rid = lab
    got = requests.get(f"{base}/api/recordings/{rid}/state?t=1.2346", timeout=10).json()
    with open_recording(recorded[0] / "recordings" / f"{rid}.mcap") as rec:
        _, d = rec.state_at(1.2346)
        assert got["k"] == 1235 and got["t"] == pytest.approx(1.235)
        assert np.max(np.abs(np.array(got["qpos"]) - d.qpos)) < 1e-8
    r = requests.get(f"{base}/api/recordings/{rid}/state?t=soon", timeout=5)
    assert r.status_code == 400 and "t must be a number" in r.json()["error"] and r.json()["hint"]


def test_the_timeline_has_the_metrics_series_and_the_push_event(lab):
    base, rid = lab
    tl = requests.get(f"{base}/api/recordings/{rid}/timeline", timeout=10).json()
    assert tl["duration_s"] == pytest.approx(3.0) and tl["frame_dt"] == pytest.approx(0.04) and tl["exact"]
    assert len(tl["series"]["t"]) == len(tl["series"]["pelvis_z"]) >= 70
    pushes = [e for e in tl["events"] if e["kind"] == "push"]
    assert pushes and pushes[0]["t"] == pytest.approx(1.0)


def test_the_replay_socket_moves_the_cursor_and_says_what_is_wrong(lab):
    base, rid = lab
    ws = WsClient(base.replace("http", "ws") + f"/ws/replay?id={rid}")
    try:
        hello = ws.recv()
        assert hello["type"] == "hello" and hello["recording"]["duration_s"] == pytest.approx(3.0)
        ws.ws.send(json.dumps({"type": "replay", "speed": 9}))
        ws.ws.send(json.dumps({"type": "replay", "t": 2.0}))
        seen = {}
        while "error" not in seen or "frame" not in seen:
            m = ws.recv()
            if isinstance(m, bytes):
                ws.ack()
            elif m["type"] == "error":
                seen["error"] = m
            elif m["type"] == "frame" and m["sim_time"] == pytest.approx(2.0):
                seen["frame"] = m
        assert seen["error"]["about"] == "replay" and "speed 9 is outside [0.1, 4]" in seen["error"]["error"]
    finally:
        ws.close()
    ws = WsClient(base.replace("http", "ws") + "/ws/replay?id=20000101-000000-abcd")
    try:
        m = ws.recv()
        assert m["type"] == "error" and m["about"] == "open" and "no recording" in m["error"]
    finally:
        ws.close()


def test_scrub_event_click_and_play_on_the_replay_page(lab, page):
    base, rid = lab
    page.goto(f"{base}/replay?id={rid}")
    page.wait_for_function(
        "typeof window.replay?.shown === 'function' && window.replay.shown() === 0 && window.replay.timeline()",
        timeout=30000,
    )
    first = page.evaluate("window.replay.view.snapshot()")

    # scrub: the scrubber to 2.4 s (on its grid of frames), as a drag ends
    page.evaluate(
        "(() => { const s = document.getElementById('scrub'); s.value = '2.4'; s.dispatchEvent(new Event('change')); })()"
    )
    page.wait_for_function("Math.abs(window.replay.shown() - 2.4) < 1e-6", timeout=15000)
    assert page.evaluate("window.replay.view.snapshot()") != first
    assert "0:02.400" in page.inner_text("#clock")

    # the push event's marker on the timeline: the view goes to the push (1.0 s), with the overlays on
    page.evaluate("window.labView3d.setOverlays(['contacts', 'com', 'support', 'cop', 'push'])")
    page.wait_for_function("window.labView3d.on.size === 5", timeout=10000)
    page.click(".event-mark[data-kind='push']")
    page.wait_for_function("Math.abs(window.replay.shown() - 1.0) < 1e-6", timeout=15000)
    assert "push" in page.get_attribute(".event-mark[data-kind='push']", "title")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(1200)  # the following camera eases in (a picture for people; nothing is asserted on it)
    page.screenshot(path=str(SCREENSHOTS / "replay_push_event.png"), full_page=True)

    # one frame forward, then play: the cursor runs on from there
    page.click("#step-fwd")
    page.wait_for_function("Math.abs(window.replay.shown() - 1.04) < 1e-6", timeout=15000)
    page.click("#play")
    page.wait_for_function("window.replay.cursor().playing && window.replay.shown() > 1.3", timeout=15000)
    page.click("#play")
    page.wait_for_function("!window.replay.cursor().playing", timeout=10000)
    assert not page.errors, page.errors


def test_the_recordings_list_links_to_the_replay_and_the_nav_has_it(lab, page):
    base, rid = lab
    page.goto(base + "/")
    page.click("#record-list-box summary")
    page.wait_for_selector(f"#record-rows tr[data-id='{rid}'] a.rec-replay", timeout=15000)
    with page.expect_navigation():
        page.click(f"#record-rows tr[data-id='{rid}'] a.rec-replay")
    assert page.evaluate("document.body.dataset.page") == "replay"
    assert page.evaluate("document.querySelector('header nav a.active').dataset.nav") == "replay"
    assert page.input_value("#pick") == rid
