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
