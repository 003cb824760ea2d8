"""The Sim2Sim API and stream over real HTTP and real WebSocket clients, and `app.py sim2sim` itself."""

import os
import signal
import subprocess
import sys
import time

import pytest
import requests
import simplejpeg

from lab.errors import LabError
from lab.remote.cli import stop_child
from lab.web.server import ServerThread
from lab.web.sim2sim import create_sim2sim_app
from tests.conftest import ROOT, WsClient, free_port, wait_until
from tests.test_pybullet_engine import write_mesh_humanoid

ENGINES = {"mujoco", "pybullet"}


def get(srv, path):
    r = requests.get(srv.url + path, timeout=10)
    return r.status_code, r.json()


def post(srv, path, body=None, headers=None, data=None):
    r = requests.post(srv.url + path, json=body, data=data, headers=headers or {}, timeout=10)
    return r.status_code, r.json()


def collect(srv, seconds, views=None):
    """What one acknowledging client receives in ``seconds``: hello, (header, jpeg) per view, metrics."""
    q = f"?views={views}" if views else ""
    ws = WsClient(srv.url.replace("http", "ws") + "/ws" + q)
    out = {"hello": None, "frames": {}, "metrics": [], "other": []}
    pending = None
    t_end = time.monotonic() + seconds
    try:
        while time.monotonic() < t_end:
            msg = ws.recv()
            if isinstance(msg, bytes):
                out["frames"].setdefault(pending["view"], []).append((pending, msg))
                ws.ack()
            elif msg["type"] == "hello":
                out["hello"] = msg
            elif msg["type"] == "frame":
                pending = msg
            elif msg["type"] == "metrics":
                out["metrics"].append(msg)
            else:
                out["other"].append(msg)
                if msg["type"] == "error":
                    break
    finally:
        ws.close()
    return out


def test_status_has_an_entry_per_engine_with_its_version_and_mass(s2s):
    code, st = get(s2s, "/api/status")
    assert code == 200 and st["service"] == "sim2sim"
    assert set(st["engines"]) == ENGINES
    assert st["engines"]["mujoco"]["label"].startswith("MuJoCo ") and st["engines"]["pybullet"]["label"].startswith(
        "PyBullet "
    )
    assert st["engines"]["pybullet"]["version"] == "3.2.7"
    masses = [e["total_mass"] for e in st["engines"].values()]
    assert abs(masses[0] - masses[1]) < 1e-3 * masses[0] and st["mass_warning"] is None
    assert st["identity"]["nu"] == 22 and len(st["identity"]["sha256"]) == 64
    assert st["render"]["width"] == 640 and st["render"]["height"] == 480 and st["render"]["fps"] == 30
    assert st["render"]["gl"]["renderer"] and st["render"]["preset"] in st["render"]["presets"]
    assert set(st["render"]["views"]) == {"mujoco", "pybullet", "overlay"}
    assert set(st["modes"]) >= {"stand", "squat", "push", "zero"}


def test_metrics_hold_each_engine_and_their_divergence(s2s):
    code, m = get(s2s, "/api/metrics")
    assert code == 200 and set(m["engines"]) == ENGINES
    for e in m["engines"].values():
        assert {"pelvis_z", "forward_x", "pitch_deg", "max_joint_err", "sim_time"} <= set(e)
    assert {"pelvis_dz", "joint_rms"} <= set(m["divergence"])
    assert m["rtf"] >= 0 and set(m["fps"]) == {"mujoco", "pybullet", "overlay"}


def test_stream_carries_frames_of_both_engines_tagged_by_view(s2s):
    got = collect(s2s, 2.5)
    assert got["hello"]["service"] == "sim2sim" and got["hello"]["views"] == ["mujoco", "pybullet"]
    assert set(got["hello"]["labels"]) == {"mujoco", "pybullet", "overlay"}
    assert set(got["frames"]) == ENGINES
    for view, frames in got["frames"].items():
        assert len(frames) >= 5, f"{view}: {len(frames)} frames"
        header, jpeg = frames[-1]
        assert header["view"] == view and header["bytes"] == len(jpeg)
        img = simplejpeg.decode_jpeg(jpeg)
        assert img.shape == (480, 640, 3) and img.std() > 10
    assert len(got["metrics"]) >= 20
    assert set(got["metrics"][-1]["engines"]) == ENGINES


def test_overlay_view_streams_on_request_and_unknown_views_are_refused(s2s):
    got = collect(s2s, 2.5, views="overlay")
    assert set(got["frames"]) == {"overlay"} and len(got["frames"]["overlay"]) >= 2
    seqs = [h["seq"] for h, _ in got["frames"]["overlay"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    bad = collect(s2s, 1.0, views="mujoco,gazebo")
    assert bad["other"][0] == {
        "type": "error",
        "error": "unknown view(s) gazebo",
        "hint": "views: mujoco, pybullet, overlay",
    }


def test_mode_switches_both_engines_and_unknown_mode_lists_modes(s2s):
    code, st = post(s2s, "/api/mode", {"mode": "squat"})
    assert code == 200 and st["mode"] == "squat"
    assert get(s2s, "/api/metrics")[1]["mode"] == "squat"
    code, err = post(s2s, "/api/mode", {"mode": "moonwalk"})
    assert code == 400 and err["error"] == "unknown mode 'moonwalk'" and "stand" in err["hint"]
    code, err = post(s2s, "/api/mode", {"mode": "push", "force_n": 1e6})
    assert code == 400 and "force_n" in err["error"]
    assert post(s2s, "/api/mode", {"mode": "stand"})[0] == 200


def test_sim2sim_offers_walk_and_refuses_the_labs_pose(s2s):
    assert get(s2s, "/api/status")[1]["modes"] == ["stand", "squat", "push", "zero", "walk"]
    code, err = post(s2s, "/api/mode", {"mode": "pose"})
    assert code == 400
    assert err == {
        "error": "mode 'pose' is not available in Sim2Sim",
        "hint": "available: stand, squat, push, zero, walk",
    }


def test_push_parameters_apply_to_both_engines(s2s):
    code, r = post(s2s, "/api/push", {"force_n": 40, "period_s": 2.0})
    assert code == 200 and r["push"]["force_n"] == 40 and r["push"]["period_s"] == 2.0
    assert get(s2s, "/api/status")[1]["push"]["force_n"] == 40
    code, err = post(s2s, "/api/push", {"force": 40})
    assert code == 400 and "unknown push parameter" in err["error"]
    code, err = post(s2s, "/api/push", {"first_s": "soon"})
    assert code == 400 and err["error"] == "push first_s must be a finite number, got 'soon'"
    assert get(s2s, "/api/status")[1]["error"] is None  # the simulation thread is still running


def test_pause_holds_both_engines_and_resume_continues(s2s):
    code, st = post(s2s, "/api/pause", {"paused": True})
    assert code == 200 and st["paused"] is True
    t = get(s2s, "/api/status")[1]["engines"]
    time.sleep(0.3)
    assert get(s2s, "/api/status")[1]["engines"] == t
    assert t["mujoco"]["sim_time"] == t["pybullet"]["sim_time"]
    post(s2s, "/api/pause", {"paused": False})
    wait_until(lambda: get(s2s, "/api/status")[1]["sim_time"] > t["mujoco"]["sim_time"], 5)


def test_reset_brings_both_engines_back_to_the_start(s2s):
    wait_until(lambda: get(s2s, "/api/metrics")[1]["sim_time"] > 0.3, 10)
    code, st = post(s2s, "/api/reset")
    assert code == 200 and st["sim_time"] < 0.3
    _, h = get(s2s, "/api/history?since=-1")
    assert h["samples"][0]["sim_time"] == 0.0
    assert h["samples"][0]["divergence"]["joint_rms"] == 0.0


def test_bad_requests_get_json_errors_with_hints(s2s):
    code, err = post(s2s, "/api/mode", data="{not json", headers={"Content-Type": "application/json"})
    assert code == 400 and "malformed JSON" in err["error"]
    code, err = post(s2s, "/api/mode", {"fast": True})
    assert code == 400 and err["error"] == "missing field 'mode'"
    code, err = post(s2s, "/api/pause", {"paused": "yes"})
    assert code == 400 and "'paused' must be true or false" in err["error"]
    code, err = post(s2s, "/api/render", {"preset": "ultra"})
    assert code == 400 and "unknown render preset" in err["error"] and "fast" in err["hint"]
    code, err = get(s2s, "/api/history?since=abc")
    assert code == 400 and "since must be a number" in err["error"]
    assert get(s2s, "/api/nothing")[0] == 404
    r = requests.get(s2s.url + "/api/reset", timeout=5)
    assert r.status_code == 405 and "error" in r.json()


def test_render_preset_changes_for_every_view(s2s):
    code, st = post(s2s, "/api/render", {"preset": "fast"})
    assert code == 200 and st["render"]["preset"] == "fast"


def test_page_is_served_with_both_engine_labels(s2s):
    r = requests.get(s2s.url + "/", timeout=10)
    assert r.status_code == 200
    assert "MuJoCo 4.0.0" in r.text and "PyBullet 3.2.7" in r.text and "js/sim2sim.js" in r.text
    assert requests.get(s2s.url + "/static/js/sim2sim.js", timeout=5).status_code == 200
    assert requests.get(s2s.url + "/vendor/plotly.min.js", timeout=5).status_code == 200


def test_token_guards_changes_but_never_pause_or_zero(tmp_path):
    app = create_sim2sim_app(token="s3cret", start=False)
    with ServerThread(app) as srv:
        code, err = post(srv, "/api/reset")
        assert code == 401 and "bearer token" in err["error"]
        assert post(srv, "/api/mode", {"mode": "squat"})[0] == 401
        assert post(srv, "/api/reset", headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert post(srv, "/api/pause", {"paused": True})[0] == 200
        assert post(srv, "/api/mode", {"mode": "zero"})[0] == 200
        assert get(srv, "/api/status")[0] == 200


def test_app_refuses_a_model_only_mujoco_can_load_naming_pybullet(tmp_path):
    path = write_mesh_humanoid(tmp_path / "msh", mesh_file="meshes/foot.msh")
    with pytest.raises(LabError, match=r"^PyBullet cannot load mini.urdf: mesh 'meshes/foot.msh'"):
        create_sim2sim_app(model=str(path), start=False)


def _app_py(*args, **kw):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, str(ROOT / "app.py"), "sim2sim", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_app_py_sim2sim_serves_another_urdf_with_relative_stl_meshes(tmp_path):
    path = write_mesh_humanoid(tmp_path / "mini")
    port = free_port()
    proc = _app_py("--model", str(path), "--port", str(port))
    try:
        url = f"http://127.0.0.1:{port}"
        st = wait_until(lambda: requests.get(url + "/api/status", timeout=2).json(), 30)
        assert st["model"]["file"] == "mini.urdf" and st["model"]["nu"] == 11
        assert set(st["engines"]) == ENGINES and st["mass_warning"] is None
        wait_until(lambda: requests.get(url + "/api/metrics", timeout=2).json()["sim_time"] > 0.2, 15)
    finally:
        stop_child(proc, 10, signal.SIGINT)
    assert proc.returncode == 0, proc.stderr.read()[-2000:]


def test_app_py_sim2sim_exits_with_a_line_naming_the_engine_that_cannot_load(tmp_path):
    path = write_mesh_humanoid(tmp_path / "dummy", dummy_link="revolute")
    proc = _app_py("--model", str(path), "--port", str(free_port()))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "error: MuJoCo cannot load mini.urdf: mass and inertia of moving bodies" in err
