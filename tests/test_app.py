"""``python app.py`` with no sub-command: three services up, three URLs printed, Ctrl+C stops all."""

import signal
import subprocess
import sys

import requests

from tests.conftest import ROOT, free_port, wait_until


def test_app_starts_all_three_services_and_stops_them_on_ctrl_c():
    lab, state, s2s = free_port(), free_port(), free_port()
    p = subprocess.Popen(
        [sys.executable, "app.py", "--lab-port", str(lab), "--state-port", str(state), "--sim2sim-port", str(s2s)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{lab}/api/status", timeout=2).ok, 90, 0.5)
        wait_until(lambda: requests.get(f"http://127.0.0.1:{state}/api/v1/health", timeout=2).ok, 90, 0.5)
        wait_until(lambda: requests.get(f"http://127.0.0.1:{s2s}/api/status", timeout=2).ok, 90, 0.5)
        # the Lab's monitor watches this state server out of the box
        wait_until(
            lambda: requests.get(f"http://127.0.0.1:{lab}/api/remote/status", timeout=2).json()["state"] == "CONNECTED",
            20,
            0.5,
        )
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, out
    for port in (lab, state, s2s):
        assert f":{port}/" in out
    assert "all services stopped" in out
    for port in (lab, state, s2s):
        try:
            requests.get(f"http://127.0.0.1:{port}/", timeout=1)
            raise AssertionError(f"port {port} still answers")
        except requests.ConnectionError:
            pass


def stop(p: subprocess.Popen) -> str:
    """Ctrl+C, then the output; killed if it does not stop within 30 s."""
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return out


def test_lab_writes_a_scan_started_over_http_under_the_results_folder_given_by_results(tmp_path):
    lab, nothing = free_port(), free_port()
    results = tmp_path / "my results"
    p = subprocess.Popen(
        [sys.executable, "app.py", "lab", "--port", str(lab), "--state-port", str(nothing), "--results", str(results)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{lab}"
    try:
        wait_until(lambda: requests.get(f"{url}/api/status", timeout=2).ok, 90, 0.5)
        r = requests.post(f"{url}/api/scans", json={"kind": "probe", "grid": {"work_s": [0, 0.01]}}, timeout=30)
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        done = wait_until(
            lambda: (s := requests.get(f"{url}/api/scans/{sid}", timeout=5).json())["status"] == "done" and s, 60, 0.3
        )
        assert done["done"] == 2
    finally:
        out = stop(p)
    assert p.returncode == 0, out
    scan = results / "scans" / sid
    assert (scan / "scan.json").is_file()
    assert (scan / "points" / "00000").is_dir() and (scan / "points" / "00001").is_dir()
    assert not (ROOT / "results" / "scans" / sid).exists()  # not the default folder
