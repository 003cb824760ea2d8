"""``/api/recordings`` on a real Lab server (and Sim2Sim), over real HTTP, and the record button in real Chromium."""

import io
import resource

import pytest
import requests
from mcap.reader import make_reader

from tests.conftest import free_port, wait_until
from tests.test_recording import writer_processes

MCAP_MAGIC = b"\x89MCAP0\r\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    results = tmp_path_factory.mktemp("results")
    app = create_lab_app(remote_url=f"http://127.0.0.1:{free_port()}", results_dir=results)
    with ServerThread(app) as srv:
        wait_until(lambda: requests.get(srv.url + "/api/metrics", timeout=5).json()["sim_time"] > 0.05, 10)
        srv.results = results
        yield srv


def _one(base, rid):
    return requests.get(f"{base}/api/recordings/{rid}", timeout=10).json()


def test_record_stop_download_and_delete_over_http(lab):
    base = lab.url
    r = requests.post(base + "/api/recordings", json={"label": "api test", "max_s": 60}, timeout=10)
    assert r.status_code == 201, r.text
    rec = r.json()
    rid = rec["id"]
    assert rec["state"] == "recording" and rec["label"] == "api test" and rec["service"] == "lab"
    again = requests.post(base + "/api/recordings", timeout=10)
    assert again.status_code == 409 and rid in again.json()["error"] and "stop" in again.json()["hint"]
    assert requests.delete(f"{base}/api/recordings/{rid}", timeout=10).status_code == 409
    assert requests.get(f"{base}/api/recordings/{rid}/file", timeout=10).status_code == 409
    wait_until(lambda: _one(base, rid)["duration_s"] > 0.3, 15)
    listed = requests.get(base + "/api/recordings", timeout=10).json()["recordings"]
    assert listed[0]["id"] == rid and listed[0]["state"] == "recording"
    done = requests.post(f"{base}/api/recordings/{rid}/stop", timeout=30).json()
    assert done["state"] == "done" and done["reason"] == "stopped" and done["duration_s"] > 0.3
    f = requests.get(f"{base}/api/recordings/{rid}/file", timeout=10)
    assert f.status_code == 200 and f.content.startswith(MCAP_MAGIC) and f.content.endswith(MCAP_MAGIC)
    assert len(f.content) == done["bytes"] and (lab.results / "recordings" / f"{rid}.mcap").is_file()
    assert requests.delete(f"{base}/api/recordings/{rid}", timeout=10).json() == {"deleted": rid}
    gone = requests.get(f"{base}/api/recordings/{rid}", timeout=10)
    assert gone.status_code == 404 and gone.json()["hint"]


def test_an_unwritable_folder_is_a_507_that_says_why_and_what_to_do(lab):
    folder = lab.results / "recordings"
    aside = lab.results / "recordings.aside"
    if folder.exists():
        folder.rename(aside)
    folder.write_text("a file where the folder should be")
    try:
        r = requests.post(lab.url + "/api/recordings", json={}, timeout=30)
    finally:
        folder.unlink()
        if aside.exists():
            aside.rename(folder)
    assert r.status_code == 507, r.text
    assert f"cannot write recordings to {folder}" in r.json()["error"] and "writable" in r.json()["hint"]
    listed = requests.get(lab.url + "/api/recordings", timeout=10).json()["recordings"]
    assert all(rec["state"] != "recording" for rec in listed)


def test_a_full_disk_stops_the_recording_with_its_reason_and_a_finished_file(lab):
    """The writer process's file may not grow (RLIMIT_FSIZE, binding for root too), as on a full disk."""
    base = lab.url
    rid = requests.post(base + "/api/recordings", json={"label": "disk full"}, timeout=10).json()["id"]
    (pid,) = writer_processes()
    size = (lab.results / "recordings" / f"{rid}.mcap").stat().st_size
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (size + 100_000, resource.RLIM_INFINITY))
    wait_until(lambda: _one(base, rid)["state"] != "recording", 120)
    wait_until(lambda: writer_processes() == [], 30)
    info = _one(base, rid)
    assert info["state"] == "failed" and "File too large" in info["reason"], info
    assert "the file is finished" in info["reason"]
    f = requests.get(f"{base}/api/recordings/{rid}/file", timeout=30)
    assert f.status_code == 200 and f.content.endswith(MCAP_MAGIC)
    summary = make_reader(io.BytesIO(f.content)).get_summary()
    assert summary is not None and summary.statistics.message_count > 0
    requests.delete(f"{base}/api/recordings/{rid}", timeout=10)


@pytest.mark.parametrize(
    "body, words",
    [
        ({"max_s": -1}, "max_s -1 is outside"),
        ({"max_mb": "big"}, "max_mb 'big' is outside"),
        ({"label": 3}, "label must be a string"),
        ({"frames": 1}, "unknown field(s): frames"),
    ],
)
def test_a_bad_start_body_is_a_400_that_says_why(lab, body, words):
    r = requests.post(lab.url + "/api/recordings", json=body, timeout=10)
    assert r.status_code == 400 and words in r.json()["error"] and r.json()["hint"]


@pytest.mark.parametrize("rid", ["20990101-000000-abcd", "nope", "x" * 300])
def test_an_unknown_recording_is_a_404(lab, rid):
    for method, path in (("get", ""), ("get", "/file"), ("post", "/stop"), ("delete", "")):
        r = requests.request(method, f"{lab.url}/api/recordings/{rid}{path}", timeout=10)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]


def test_sim2sim_records_too(tmp_path):
    from lab.web.server import ServerThread
    from lab.web.sim2sim import create_sim2sim_app

    app = create_sim2sim_app(fps=10, results_dir=tmp_path)
    with ServerThread(app) as srv:
        wait_until(lambda: requests.get(srv.url + "/api/status", timeout=5).json()["sim_time"] > 0.05, 20)
        rid = requests.post(srv.url + "/api/recordings", json={}, timeout=10).json()["id"]
        wait_until(lambda: _one(srv.url, rid)["duration_s"] > 0.2, 20)
        done = requests.post(f"{srv.url}/api/recordings/{rid}/stop", timeout=30).json()
    assert done["state"] == "done" and done["service"] == "sim2sim"
    from lab.record import open_recording

    with open_recording(tmp_path / "recordings" / f"{rid}.mcap") as rec:
        assert "/pybullet/joint_states" in rec.topics and rec.exact == "mujoco"


def test_stopping_the_lab_finishes_the_recording_and_its_writer_process(tmp_path):
    from lab.record import open_recording
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(remote_url=f"http://127.0.0.1:{free_port()}", results_dir=tmp_path)
    with ServerThread(app) as srv:
        rid = requests.post(srv.url + "/api/recordings", json={}, timeout=10).json()["id"]
        assert len(writer_processes()) == 1
        wait_until(lambda: _one(srv.url, rid)["duration_s"] > 0.2, 20)
    assert writer_processes() == []  # the service's stop ended it, waited for the file, reaped the process
    with open_recording(tmp_path / "recordings" / f"{rid}.mcap") as rec:
        assert rec.result["state"] == "done" and rec.duration_s > 0.2


@pytest.mark.e2e
def test_the_record_button_shows_time_and_size_and_lists_the_file(lab, page):
    page.goto(lab.url + "/")
    page.fill("#record-label", "from the page")
    page.click("#record-btn")
    page.wait_for_selector("#record-panel[data-state='recording']", timeout=10_000)
    page.wait_for_function("document.querySelector('#record-time').textContent >= '0:01.0'", timeout=20_000)
    assert "kB" in page.text_content("#record-size") or "MB" in page.text_content("#record-size")
    page.click("#record-list-box summary")
    page.screenshot(path="/tmp/recorder_lab.png", full_page=False)
    page.click("#record-btn")
    page.wait_for_selector("#record-panel[data-state='idle']", timeout=20_000)
    msg = page.text_content("#record-msg")
    assert "done: stopped" in msg
    row = page.locator("#record-rows tr").first
    assert "from the page" in row.text_content() and row.locator("a", has_text="download").count() == 1
    assert not page.errors
