"""The warm workers with real processes: points run on long-lived workers; a point that crashes, hangs or leaks
is an error with its output and its worker is killed with its process group and replaced; a cancel stops the
points in flight; two scans share the workers point by point; a point's figure is drawn when first asked for; a scan that comes
while idle workers retire gets workers."""

import os
import re
import time

import pytest

from lab.scans import pool
from lab.scans.builtin import PROBE, PUSH_RECOVERY
from lab.scans.isolation import group_members
from lab.scans.manager import ScanManager
from lab.scans.pool import LEAK_MB
from lab.scans.registry import make_kinds
from tests.conftest import wait_until
from tests.fault_modes import FAULTS, LEAK_BYTES
from tests.test_scans_engine import alive
from tests.test_scans_hardening import nothing_left, point_pids

KINDS = make_kinds(PUSH_RECOVERY, PROBE, FAULTS)


@pytest.fixture(scope="module")
def manager(tmp_path_factory):
    m = ScanManager(tmp_path_factory.mktemp("pool"), kinds=KINDS, max_running=2)
    yield m
    m.shutdown()


def worker_pid(point: dict) -> int:
    return int(re.search(r"in process (\d+)", point["output_tail"]).group(1))


def test_a_point_that_crashes_hangs_or_leaks_is_an_error_with_its_output_and_its_worker_is_replaced(manager):
    s = manager.create({"kind": "faults", "grid": {"mode": ["crash", "hang", "leak"]}, "timeout_s": 2, "workers": 2})
    s = manager.wait(s["id"], 60)
    assert [p["status"] for p in s["points"]] == ["error"] * 3
    crash, hang, leak = (manager.point(s["id"], i) for i in range(3))
    assert crash["error"] == f"killed by signal SIGSEGV: fault point: crash in process {worker_pid(crash)}"
    assert hang["error"] == f"timed out after 2 s: fault point: hang in process {worker_pid(hang)}"
    grown = LEAK_BYTES / 2**20
    assert leak["error"].startswith("leaked: the worker's memory grew by ")
    assert int(leak["error"].split("grew by ")[1].split(" ")[0]) >= grown - 20 > LEAK_MB
    for p in (crash, hang, leak):
        log = manager.open_point_file(s["id"], p["index"], "output.log")[0].read().decode()
        assert f"fault point: {p['params']['mode']} in process" in log and log.strip() in p["output_tail"]
    dead = {worker_pid(p) for p in (crash, hang, leak)}
    wait_until(lambda: not any(alive(pid) or group_members(pid) for pid in dead), 15)

    ok = manager.wait(manager.create({"kind": "faults", "grid": {"n": "0:5:1"}, "workers": 2})["id"], 60)
    assert ok["counts"]["done"] == 6, [p["error"] for p in ok["points"]]
    pids = [p["metrics"]["pid"] for p in ok["points"]]
    assert not dead & set(pids)  # new workers took the place of the killed ones
    assert len(set(pids)) < len(pids)  # and each ran several points: warm, not a process per point


def test_a_cancel_kills_the_workers_of_the_points_in_flight_and_records_them_cancelled(manager):
    s = manager.create({"kind": "probe", "grid": {"sleep_s": [60, 61]}, "workers": 2})
    scan_dir = manager.store.root / s["id"]
    wait_until(lambda: all((scan_dir / "points" / f"{i:05d}" / "pids.json").exists() for i in (0, 1)), 60)
    pids = [point_pids(scan_dir, i) for i in (0, 1)]
    c = manager.cancel(s["id"])
    assert c["status"] == "cancelled" and [p["status"] for p in c["points"]] == ["cancelled", "cancelled"]
    for p in pids:  # the worker, the point's child and the worker's guard
        wait_until(lambda p=p: nothing_left(p), 15)


def test_two_running_scans_share_the_workers_point_by_point_so_the_later_one_is_not_starved(manager):
    long = manager.create({"kind": "probe", "grid": {"work_s": "0.2:0.3:0.01"}, "workers": 2})  # 11 points
    short = manager.create({"kind": "probe", "grid": {"work_s": [0.2, 0.21]}, "workers": 2})
    a, b = manager.wait(long["id"], 60), manager.wait(short["id"], 60)
    assert a["status"] == b["status"] == "done"
    end_short = max(p.finished_at for p in manager.store.read_points(short["id"]).values())
    started_after = [p for p in manager.store.read_points(long["id"]).values() if p.started_at > end_short]
    assert len(started_after) >= 3  # the short scan finished while the long one still had points to run


def test_a_push_points_figure_is_drawn_when_first_asked_for_not_while_the_scan_runs(manager):
    s = manager.create({"kind": "push_recovery", "grid": {"force_n": [20], "seconds": [1]}})
    s = manager.wait(s["id"], 60)
    assert s["status"] == "done", s["points"][0]["error"]
    png = manager.store.root / s["id"] / "points" / "00000" / "push_curves.png"
    assert not png.exists()
    point = manager.point(s["id"], 0)
    assert point["figure"] == "push_curves.png" and "push_curves.png" in point["files"]
    f, _ = manager.open_point_file(s["id"], 0, "push_curves.png")
    with f:
        assert f.read(4) == b"\x89PNG"
    assert png.is_file() and not list(png.parent.glob(".*"))  # drawn once, nothing half-written left


def test_a_scan_that_comes_while_idle_workers_retire_still_gets_workers(manager, monkeypatch):
    """Slots retire under the pool's lock: a run arriving while one retires (its worker being killed) starts
    its own, instead of waiting forever on a slot that is going."""
    monkeypatch.setattr(pool, "IDLE_S", 0.3)
    for pause in (0.9, 1.0, 1.1):  # the idle slots look at the time about once a second
        time.sleep(pause)
        s = manager.create({"kind": "probe", "grid": {"work_s": [0.0, 0.01]}, "workers": 2})
        assert manager.wait(s["id"], 60)["status"] == "done"


def test_killing_a_worker_twice_leaves_the_files_that_reused_its_pipes_numbers_open():
    w = pool.Worker()
    numbers = {w._jobs, w._replies}
    w.kill()
    r, wr = os.pipe()  # the lowest free numbers: most likely the ones the worker's pipes just gave back
    try:
        w.kill()  # (the timeout and cancel paths kill a worker, then its slot kills it again)
        for fd in (r, wr):
            os.fstat(fd)  # still open
        assert numbers & {r, wr}, "the test's premise: a new pipe reuses a killed worker's numbers"
    finally:
        os.close(r)
        os.close(wr)
