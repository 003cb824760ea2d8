"""Exporting a time range of a real recording over HTTP (lab/record/export.py, lab/web/replay_page.py): the
MP4 and GIF decode (PyAV, Pillow) to duration x fps frames of the asked size; bad requests say why."""

import io

import pytest
import requests

from tests.conftest import free_port, record_offline, wait_until


@pytest.fixture(scope="module")
def lab(robot, tmp_path_factory):
    """The Lab over a results folder holding one 2 s recording of the squat mode, made offline."""
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    results = tmp_path_factory.mktemp("export")
    rid = record_offline(robot, results, "squat", 2.0, "export test")
    app = create_lab_app(remote_url=f"http://127.0.0.1:{free_port()}", results_dir=results, start=False)
    with ServerThread(app) as srv:
        yield srv.url, rid


def export(base: str, rid: str, body: dict) -> bytes:
    r = requests.post(f"{base}/api/recordings/{rid}/export", json=body, timeout=10)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    info = wait_until(
        lambda: (j := requests.get(f"{base}/api/exports/{job}", timeout=5).json())["state"] in ("done", "failed") and j,
        60,
        0.2,
    )
    assert info["state"] == "done", info
    assert info["frames_done"] == info["frames"] and info["progress"] == 1.0
    f = requests.get(base + info["file"], timeout=10)
    assert f.status_code == 200
    return f.content


def test_one_second_exports_to_mp4_with_fps_frames_of_the_asked_size(lab):
    import av

    base, rid = lab
    data = export(base, rid, {"t0": 0.5, "t1": 1.5, "format": "mp4", "width": 320, "height": 240, "fps": 12})
    with av.open(io.BytesIO(data)) as box:
        stream = box.streams.video[0]
        frames = list(box.decode(stream))
        assert stream.codec_context.name in ("h264", "mpeg4")
    assert len(frames) == 12
    assert (frames[0].width, frames[0].height) == (320, 240)


def test_one_second_exports_to_gif_with_fps_frames_of_the_asked_size(lab):
    from PIL import Image

    base, rid = lab
    data = export(
        base,
        rid,
        {
            "t0": 1.0,
            "t1": 2.0,
            "format": "gif",
            "width": 160,
            "height": 120,
            "fps": 10,
            "overlays": ["com", "contacts"],
        },
    )
    img = Image.open(io.BytesIO(data))
    assert img.n_frames == 10 and img.size == (160, 120)


@pytest.mark.parametrize(
    "body, words",
    [
        ({"t0": 1.5, "t1": 1.0}, "is not inside the recording"),
        ({"t0": 0, "t1": 9}, "is not inside the recording"),
        ({"format": "avi"}, "format must be mp4 or gif"),
        ({"width": 641}, "width 641 is outside [64, 1920], even"),
        ({"fps": 0}, "fps 0 is outside [1, 60]"),
        ({"t1": 2, "fps": 60, "format": "gif", "width": 640, "height": 480, "stamp": "yes"}, "stamp must be"),
        ({"overlays": ["dcm"]}, "overlays must be a list of overlay names"),
        ({"speed": 2}, "unknown field(s): speed"),
    ],
)
def test_a_bad_export_request_is_a_400_that_says_why(lab, body, words):
    base, rid = lab
    r = requests.post(f"{base}/api/recordings/{rid}/export", json=body, timeout=10)
    assert r.status_code == 400 and words in r.json()["error"] and r.json()["hint"], r.text


def test_an_unknown_export_or_recording_is_a_404(lab):
    base, _ = lab
    assert requests.get(f"{base}/api/exports/0123456789ab", timeout=5).status_code == 404
    assert requests.get(f"{base}/api/exports/nope/file", timeout=5).status_code == 404
    r = requests.post(f"{base}/api/recordings/20000101-000000-abcd/export", json={}, timeout=5)
    assert r.status_code == 404 and r.json()["hint"]


def test_an_export_is_cancelled_while_it_runs_and_a_finished_one_is_removed(lab):
    base, rid = lab
    body = {"t0": 0, "t1": 2, "format": "mp4", "width": 640, "height": 480, "fps": 60}  # 120 frames
    job = requests.post(f"{base}/api/recordings/{rid}/export", json=body, timeout=10).json()["job"]
    wait_until(lambda: requests.get(f"{base}/api/exports/{job}", timeout=5).json()["frames_done"] > 0, 60, 0.05)
    r = requests.delete(f"{base}/api/exports/{job}", timeout=30)
    assert r.status_code == 200, r.text
    info = r.json()
    assert info["state"] == "cancelled" and info["error"] == "cancelled while it ran"
    assert 0 < info["frames_done"] < info["frames"] and info["file"] is None
    f = requests.get(f"{base}/api/exports/{job}/file", timeout=5)
    assert f.status_code == 409 and "cancelled while it ran" in f.json()["error"]
    # a finished job: DELETE removes it and its file
    small = {"t0": 0, "t1": 0.5, "format": "gif", "width": 64, "height": 64, "fps": 4}
    done = requests.post(f"{base}/api/recordings/{rid}/export", json=small, timeout=10).json()["job"]
    wait_until(lambda: requests.get(f"{base}/api/exports/{done}", timeout=5).json()["state"] == "done", 60, 0.1)
    gone = requests.delete(f"{base}/api/exports/{done}", timeout=10).json()
    assert gone["deleted"] and gone["state"] == "done"
    assert requests.get(f"{base}/api/exports/{done}/file", timeout=5).status_code == 404
    assert requests.delete(f"{base}/api/exports/{done}", timeout=5).status_code == 404
