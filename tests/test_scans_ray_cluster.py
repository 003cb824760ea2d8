"""Scans on a real Ray cluster: a head node started apart (``ray start --head``, its own ports and temp folder),
a Lab server process that joins it with ``"address"``; a scan completes, a cancel returns with its points
stopped, and a scan survives the Lab restarting while the cluster keeps running (resume picks it up)."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, wait_until
from tests.test_scans_hardening import nothing_left, point_pids, start_lab

RAY = str(Path(sys.executable).with_name("ray"))
RAY_PORTS = range(6390, 6400)  # this test's GCS port is the first free one
# The head runs without token auth, so the Lab joining it must too: an earlier ray.init() in this test process
# (a local Ray instance) leaves RAY_AUTH_MODE=token in os.environ, which the Lab would inherit.
NO_AUTH = {"RAY_AUTH_MODE": "disabled"}
PORT_BASE = 21100  # the head's other ports: 21100 .. 21199, outside the 10002-19999 worker ports of any other Ray here


def free_in(ports) -> int:
    for p in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
            return p
    pytest.skip(f"no free port in {ports}")


def started_by(folder: str) -> list[int]:
    """The processes whose command line names ``folder`` (the head's own temp folder): the head's processes."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and folder in (d / "cmdline").read_bytes().decode("utf-8", "replace"):
                out.append(int(d.name))
        except OSError:
            continue
    return out


@pytest.fixture(scope="module")
def cluster():
    port = free_in(RAY_PORTS)
    folder = tempfile.mkdtemp(prefix="h14a-ray-", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    ports = {
        "--node-manager-port": PORT_BASE,
        "--object-manager-port": PORT_BASE + 1,
        "--metrics-export-port": PORT_BASE + 3,
        "--dashboard-agent-listen-port": PORT_BASE + 4,
        "--dashboard-agent-grpc-port": PORT_BASE + 5,
        "--runtime-env-agent-port": PORT_BASE + 6,
        "--min-worker-port": PORT_BASE + 10,
        "--max-worker-port": PORT_BASE + 99,
    }
    cmd = [RAY, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=2"]
    cmd += ["--include-dashboard=false"]
    cmd += [f"--temp-dir={folder}", "--disable-usage-stats", *(f"{k}={v}" for k, v in ports.items())]
    # no token auth: the Lab (the driver) joins with the address alone (see /tmp/h14a_readme.md for a token)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    try:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        yield f"127.0.0.1:{port}"
    finally:
        for pid in started_by(folder):  # only this head's processes: `ray stop` would stop every Ray here
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(folder, ignore_errors=True)


def post(url, body=None):
    return requests.post(url, json=body, timeout=120)


def scan(url, sid) -> dict:
    return requests.get(f"{url}/api/scans/{sid}", timeout=10).json()


def test_a_scan_on_a_separate_ray_head_completes_cancels_and_survives_the_lab_restarting(cluster, tmp_path):
    ray = {"executor": "ray", "address": cluster}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    lab = start_lab(port, tmp_path, tmp_path / "lab.log", env=NO_AUTH)
    try:
        r = post(f"{url}/api/scans", {"kind": "probe", "grid": {"work_s": [0, 0.01, 0.02]}, "workers": 2, **ray})
        assert r.status_code == 201, r.text
        done = wait_until(lambda: (s := scan(url, r.json()["id"]))["status"] not in ("queued", "running") and s, 120)
        assert done["status"] == "done" and done["counts"]["done"] == 3, done["error"] or done["points"]
        assert done["executor"] == "ray" and done["address"] == cluster

        sid = post(f"{url}/api/scans", {"kind": "probe", "grid": {"sleep_s": [60, 61]}, "workers": 2, **ray}).json()
        scan_dir = tmp_path / "scans" / sid["id"]
        wait_until(lambda: all((scan_dir / "points" / f"{i:05d}" / "pids.json").exists() for i in (0, 1)), 120)
        pids = [point_pids(scan_dir, i) for i in (0, 1)]
        c = post(f"{url}/api/scans/{sid['id']}/cancel").json()  # returns once both are recorded
        assert c["status"] == "cancelled" and [p["status"] for p in c["points"]] == ["cancelled", "cancelled"]
        for p in pids:  # the actors' workers, the points' children, the guards: all stopped
            wait_until(lambda p=p: nothing_left(p), 30)

        grid = {"sleep_s": [0, 4]}  # the second point is running when the Lab stops
        sid = post(f"{url}/api/scans", {"kind": "probe", "grid": grid, "workers": 1, **ray}).json()["id"]
        wait_until((tmp_path / "scans" / sid / "points" / "00001" / "pids.json").exists, 120)
        lab.send_signal(signal.SIGTERM)  # a Lab joined to Ray ends on Ray's own SIGTERM handler: no clean stop
        lab.wait(timeout=60)
    finally:
        if lab.poll() is None:
            lab.kill()

    lab = start_lab(port, tmp_path, tmp_path / "lab.log", env=NO_AUTH)  # a new Lab, the same results
    try:
        s = scan(url, sid)
        assert s["status"] == "interrupted" and [p["status"] for p in s["points"]] == ["done", "interrupted"]
        assert post(f"{url}/api/scans/{sid}/resume").status_code == 200
        s = wait_until(lambda: (s := scan(url, sid))["status"] not in ("queued", "running") and s, 120)
        assert s["status"] == "done", s["error"] or s["points"]
        assert [p["attempts"] for p in s["points"]] == [1, 2]  # only the unfinished point ran again
    finally:
        lab.send_signal(signal.SIGTERM)
        lab.wait(timeout=60)
