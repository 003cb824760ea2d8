"""The scan machinery under stress, with real processes and a real Lab: typed point records, an explicit
kind registry without import cycles, the robot's one fall rule, a queue of scans behind a cap, running
scans sharing the workers so none starves another, clean stops (SIGTERM) and hard kills (SIGKILL) that
leave nothing behind, symlinks never served, and malformed numbers answered with a 400."""

import ast
import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

from lab.errors import LabError
from lab.scans.isolation import group_members
from tests.conftest import ROOT, free_port, wait_until
from tests.test_scans_engine import alive


def point_pids(scan_dir: Path, index: int) -> dict:
    return json.loads((scan_dir / "points" / f"{index:05d}" / "pids.json").read_text())


def nothing_left(pids: dict) -> bool:
    """The point, its child and its guard are gone, and so is anything else in the point's process group."""
    return not any(alive(int(p)) for p in pids.values() if p) and not group_members(pids["point"])


# ---------------------------------------------------------------- 2. typed point records


def test_a_point_record_round_trips_through_json_with_the_fields_point_json_always_had(tmp_path):
    from lab.scans.points import Outcome, Point, PointStatus

    p = Point(3, {"force_n": 20.0})
    assert p.status is PointStatus.PENDING and p.to_dict()["status"] == "pending"
    running = p.started()
    assert running.status is PointStatus.RUNNING and running.attempts == 1 and p.attempts == 0  # frozen
    done = running.ended(Outcome("done", metrics={"ok": True, "trace": [1, 2]}, wall_s=1.5))
    d = done.to_dict()
    assert set(d) == {
        "index", "params", "status", "metrics", "attempts", "wall_s", "compute_s", "error", "output_tail",
        "exit_code", "started_at", "finished_at",
    }  # fmt: skip
    assert d["metrics"] == {"ok": True}  # only flat numbers are kept
    assert Point.from_dict(json.loads(json.dumps(d))) == done
    with pytest.raises(ValueError):
        Point.from_dict({**d, "status": "exploded"})
    assert [s.value for s in PointStatus] == ["pending", "running", "done", "error", "cancelled", "interrupted"]


def test_no_scan_module_builds_point_records_as_plain_dicts():
    """Every record goes through lab.scans.points: no module writes the record's keys in a dict literal."""
    for f in (ROOT / "lab" / "scans").glob("*.py"):
        if f.name == "points.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                assert not {"status", "output_tail"} <= keys, f"{f.name}:{node.lineno} builds a point record by hand"


# ---------------------------------------------------------------- 3. explicit registry, no import cycle


def _imports(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lab.scans"):
            mods.add(node.module)
        elif isinstance(node, ast.Import):
            mods |= {a.name for a in node.names if a.name.startswith("lab.scans")}
    return mods


def test_the_scan_modules_import_each_other_without_a_cycle():
    graph = {f"lab.scans.{f.stem}": _imports(f) for f in (ROOT / "lab" / "scans").glob("*.py") if f.stem != "__init__"}

    def visit(mod, stack):
        assert mod not in stack, f"import cycle: {' -> '.join([*stack, mod])}"
        for dep in graph.get(mod, ()):
            visit(dep, [*stack, mod])

    for mod in graph:
        visit(mod, [])


def test_importing_the_kind_types_registers_nothing_and_the_table_is_built_in_one_place():
    code = (
        "import sys; import lab.scans.kinds as k; "
        "assert 'lab.scans.builtin' not in sys.modules, 'kinds imported builtin'; "
        "assert not hasattr(k, 'KINDS') and not hasattr(k, 'register'); "
        "from lab.scans.registry import KINDS; print(','.join(KINDS))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "walk_stability,push_recovery,push_threshold,probe"


def test_a_manager_given_its_own_kind_table_offers_and_runs_only_those_kinds(tmp_path):
    from lab.scans.builtin import PROBE
    from lab.scans.manager import ScanManager
    from lab.scans.registry import make_kinds

    m = ScanManager(tmp_path, kinds=make_kinds(PROBE))
    try:
        with pytest.raises(LabError) as e:
            m.create({"kind": "push_recovery", "grid": {"force_n": [20]}})
        assert e.value.message == "unknown scan kind 'push_recovery'" and e.value.hint == "available: probe"
        s = m.wait(m.create({"kind": "probe", "grid": {"work_s": [0]}})["id"], 60)
        assert s["status"] == "done"
    finally:
        m.shutdown()
    with pytest.raises(ValueError, match="two scan kinds are named 'probe'"):
        make_kinds(PROBE, PROBE)


# ---------------------------------------------------------------- 4. the robot's one fall rule


def test_the_push_kind_has_no_fall_rule_of_its_own():
    text = (ROOT / "lab" / "scans" / "builtin.py").read_text()
    assert "FALL_Z_FRACTION" not in text and "def fall_rule" not in text and "has_fallen" in text


def test_the_first_fall_time_is_the_first_sample_the_robots_rule_calls_fallen_roll_included(robot):
    from lab.scans.builtin import first_fall_time

    up = robot.standing_height
    samples = [
        SimpleNamespace(sim_time=0.0, pelvis_z=up, pitch_deg=0.0, roll_deg=0.0),
        SimpleNamespace(sim_time=0.01, pelvis_z=up, pitch_deg=10.0, roll_deg=44.0),
        SimpleNamespace(sim_time=0.02, pelvis_z=up, pitch_deg=10.0, roll_deg=46.0),  # sideways only
        SimpleNamespace(sim_time=0.03, pelvis_z=0.0, pitch_deg=90.0, roll_deg=90.0),
    ]
    assert first_fall_time(robot, samples) == 0.02
    assert first_fall_time(robot, samples[:2]) is None


def test_a_push_point_reports_fall_time_at_the_first_fallen_sample_of_its_trace(tmp_path, robot):
    from lab.scans.manager import ScanManager

    m = ScanManager(tmp_path)
    try:
        grid = {"duration_s": [0.1], "force_n": [20, 80], "seconds": [1.5]}
        s = m.wait(m.create({"kind": "push_recovery", "grid": grid, "workers": 2})["id"], 120)
    finally:
        m.shutdown()
    assert s["status"] == "done", [p["error"] for p in s["points"]]
    gentle, hard = (p["metrics"] for p in s["points"])
    assert gentle["fall_time"] is None and gentle["fell"] is False and gentle["recovered"] is True
    assert hard["fell"] is True and hard["recovered"] is False and 0.5 < hard["fall_time"] < 1.5
    with open(tmp_path / "scans" / s["id"] / "points" / "00001" / "push_trace.csv") as f:
        rows = list(csv.DictReader(f))  # every metrics sample, 0.01 s apart
    first = next(
        float(r["sim_time"])
        for r in rows
        if robot.has_fallen(float(r["pelvis_z"]), float(r["pitch_deg"]), float(r["roll_deg"]))
    )
    assert hard["fall_time"] == pytest.approx(first, abs=1e-3)
    assert hard["t_fall_s"] == hard["fall_time"] and hard["fall_z_m"] == pytest.approx(robot.fall_height)


# ---------------------------------------------------------------- 1. Ray cancel records every running point


@pytest.mark.slow
def test_a_ray_cancel_at_any_moment_returns_with_every_started_point_cancelled_and_no_process_left(tmp_path):
    import ray

    from lab.scans.manager import ScanManager

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    m = ScanManager(tmp_path)
    try:
        # right after the submit (tasks pushed, not started), while points start, mid-run
        for delay in (0.0, 0.3, 0.8, None):
            s = m.create({"kind": "probe", "grid": {"sleep_s": [0.1, 60, 61]}, "executor": "ray", "workers": 3})
            scan_dir = tmp_path / "scans" / s["id"]
            if delay is None:
                wait_until((scan_dir / "points" / "00002" / "pids.json").exists, 60)
            else:
                time.sleep(delay)
            t0 = time.monotonic()
            c = m.cancel(s["id"])
            assert time.monotonic() - t0 < 30
            assert c["status"] == "cancelled", (delay, c["status"])
            started = [p["status"] for p in c["points"] if p["attempts"]]  # a point never started stays pending
            assert set(started) <= {"done", "cancelled"}, (delay, c["points"])
            assert c["counts"]["running"] == 0
            on_disk = {
                int(f.parent.name): json.loads(f.read_text())["status"] for f in scan_dir.glob("points/*/point.json")
            }
            assert all(v in ("done", "cancelled") for v in on_disk.values()), on_disk
            assert json.loads((scan_dir / "scan.json").read_text())["status"] == "cancelled"
            for f in scan_dir.glob("points/*/pids.json"):
                pids = json.loads(f.read_text())
                wait_until(lambda pids=pids: nothing_left(pids), 15)
    finally:
        m.shutdown()
        ray.shutdown()


class DeafExecutor:
    """The local pool, but its points never hear the cancel: a Ray task whose interrupt got lost."""

    name = "local"

    def run(self, jobs, on_start, on_finish, cancel):
        from lab.scans.executors import LocalExecutor

        LocalExecutor(len(jobs)).run(jobs, on_start, on_finish, threading.Event())


def test_a_cancel_whose_executor_does_not_stop_still_returns_with_its_running_points_cancelled(tmp_path, monkeypatch):
    import lab.scans.manager as manager_module

    monkeypatch.setattr(manager_module, "STOP_JOIN_S", 2.0)
    monkeypatch.setattr(manager_module, "make_executor", lambda *a: DeafExecutor())
    m = manager_module.ScanManager(tmp_path, max_running=1)
    pids = []
    try:
        s = m.create({"kind": "probe", "grid": {"sleep_s": [0.1, 60]}})
        scan_dir = tmp_path / "scans" / s["id"]
        wait_until(lambda: m.get(s["id"])["counts"]["done"] == 1 and (scan_dir / "points/00001/pids.json").exists(), 60)
        pids.append(point_pids(scan_dir, 1))
        queued = m.create({"kind": "probe", "grid": {"work_s": [0]}})
        t0 = time.monotonic()
        c = m.cancel(s["id"])
        assert time.monotonic() - t0 < 10
        assert c["status"] == "cancelled" and [p["status"] for p in c["points"]] == ["done", "cancelled"]
        assert json.loads((scan_dir / "points/00001/point.json").read_text())["status"] == "cancelled"
        assert json.loads((scan_dir / "scan.json").read_text())["status"] == "cancelled"
        assert m.wait(queued["id"], 60)["status"] == "done"  # the slot was freed for the next scan
    finally:
        for p in pids:
            os.killpg(p["point"], signal.SIGKILL)
        m.shutdown()


# ---------------------------------------------------------------- the Lab over HTTP


@pytest.fixture()
def lab(tmp_path):
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(results_dir=tmp_path, start=False, remote_url=f"http://127.0.0.1:{free_port()}")
    with ServerThread(app) as srv:
        yield srv.url, tmp_path


def post(url, body=None):
    return requests.post(url, json=body, timeout=90)


def scan(url, sid) -> dict:
    return requests.get(f"{url}/api/scans/{sid}", timeout=10).json()


def test_scans_beyond_the_cap_wait_queued_with_their_place_start_by_themselves_and_cancel_cleanly(lab):
    from lab.web.scans_page import MAX_RUNNING

    url, results = lab
    assert MAX_RUNNING > 1 and requests.get(f"{url}/api/scans/kinds", timeout=10).json()["max_running"] == MAX_RUNNING
    ids = []
    for _ in range(MAX_RUNNING + 2):  # the cap runs, two queue; a 60 s point holds a worker until cancelled
        r = post(f"{url}/api/scans", {"kind": "probe", "grid": {"sleep_s": [60]}, "workers": 1})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    running, (second, third) = ids[:MAX_RUNNING], ids[MAX_RUNNING:]
    wait_until(lambda: all(scan(url, i)["status"] == "running" for i in running), 30)  # each run's thread is up
    holder = wait_until(lambda: next((i for i in running if scan(url, i)["counts"]["running"] == 1), None), 30)
    assert [scan(url, i)["status"] for i in ids] == ["running"] * MAX_RUNNING + ["queued", "queued"]
    assert [scan(url, i)["queue_position"] for i in ids] == [None] * MAX_RUNNING + [1, 2]
    listed = {s["id"]: s for s in requests.get(f"{url}/api/scans", timeout=10).json()["scans"]}
    assert listed[third]["status"] == "queued" and listed[third]["queue_position"] == 2

    r = post(f"{url}/api/scans/{second}/cancel")  # queued: nothing ran, nothing to kill
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert r.json()["counts"]["pending"] == 1 and r.json()["runs"] == []
    assert not (results / "scans" / second / "points").exists()
    assert scan(url, third)["queue_position"] == 1
    assert post(f"{url}/api/scans/{second}/cancel").status_code == 409

    wait_until((results / "scans" / holder / "points" / "00000" / "pids.json").exists, 30)
    pids = point_pids(results / "scans" / holder, 0)
    assert post(f"{url}/api/scans/{holder}/cancel").json()["status"] == "cancelled"
    s = wait_until(lambda: (s := scan(url, third))["status"] == "running" and s, 30)  # started by itself
    assert s["queue_position"] is None
    wait_until(lambda: nothing_left(pids), 15)
    listed = requests.get(f"{url}/api/scans", timeout=10).json()["scans"]
    assert {x["id"] for x in listed if x["status"] == "running"} == {*running, third} - {holder}

    r = post(f"{url}/api/scans/{second}/resume")  # behind nobody but the running ones: queued first in line
    assert r.status_code == 200 and r.json()["status"] == "queued" and r.json()["queue_position"] == 1
    for sid in [second, third, *running]:
        if sid != holder:
            assert post(f"{url}/api/scans/{sid}/cancel").json()["status"] == "cancelled"


def test_two_scans_launched_together_both_make_progress_before_either_finishes(lab):
    """No starvation: the shared workers take the two scans' points in turn, so each has most of its points
    done before the first of them ends (one after the other, the first to end would have all, the other none)."""
    url, _ = lab
    n = 12
    ids = []
    for _ in range(2):
        r = post(
            f"{url}/api/scans", {"kind": "probe", "grid": {"work_s": [round(0.1 + 0.01 * i, 2) for i in range(n)]}}
        )
        assert r.status_code == 201 and r.json()["queue_position"] is None, r.text  # both run, neither waits
        ids.append(r.json()["id"])
    ended = [wait_until(lambda sid=sid: (s := scan(url, sid))["status"] == "done" and s, 60) for sid in ids]
    first_end = min(s["finished_at"] for s in ended)
    for sid, s in zip(ids, ended, strict=True):
        assert s["total"] == n
        ends = [requests.get(f"{url}/api/scans/{sid}/points/{i}", timeout=10).json()["finished_at"] for i in range(n)]
        assert sum(t <= first_end for t in ends) >= n // 2, (sid, sorted(ends), first_end)


def test_a_symlink_in_a_point_folder_is_never_served_nor_listed(lab):
    url, results = lab
    sid = post(f"{url}/api/scans", {"kind": "probe", "grid": {"work_s": [0, 0.01]}, "workers": 1}).json()["id"]
    wait_until(lambda: scan(url, sid)["status"] == "done", 60)
    scan_dir = results / "scans" / sid
    (scan_dir / "points" / "00000" / "passwd").symlink_to("/etc/passwd")
    (scan_dir / "points" / "00000" / "summary.json").unlink()
    (scan_dir / "points" / "00000" / "summary.json").symlink_to("/etc/passwd")
    (scan_dir / "points" / "00000" / "sibling.json").symlink_to(scan_dir / "points" / "00001" / "summary.json")
    for name in ("passwd", "summary.json", "sibling.json"):
        r = requests.get(f"{url}/api/scans/{sid}/points/0/{name}", timeout=10)
        assert r.status_code == 404, (name, r.status_code)
        assert "root:" not in r.text
        err = r.json()
        assert (
            err["error"] == f"point 0 of scan '{sid}' has no file '{name}'" and "links are never served" in err["hint"]
        )
    files = requests.get(f"{url}/api/scans/{sid}/points/0", timeout=10).json()["files"]
    assert "passwd" not in files and "summary.json" not in files and "output.log" in files

    point1 = scan_dir / "points" / "00001"  # a whole point folder swapped for a link to /etc
    point1.rename(scan_dir / "points" / "moved")
    point1.symlink_to("/etc")
    r = requests.get(f"{url}/api/scans/{sid}/points/1/passwd", timeout=10)
    assert r.status_code == 404 and "root:" not in r.text and r.json()["hint"]
    assert requests.get(f"{url}/api/scans/{sid}/points/1", timeout=10).json()["files"] == []
    assert requests.get(f"{url}/api/scans/{sid}/points/0/output.log", timeout=10).status_code == 200


def test_a_point_never_writes_its_log_through_a_symlink_planted_in_its_folder(lab, tmp_path_factory):
    url, results = lab
    victim = tmp_path_factory.mktemp("victim") / "precious.txt"
    victim.write_text("keep me\n")
    sid = post(f"{url}/api/scans", {"kind": "probe", "grid": {"fail": [1]}}).json()["id"]
    wait_until(lambda: scan(url, sid)["status"] == "done", 60)
    log = results / "scans" / sid / "points" / "00000" / "output.log"
    log.unlink()
    log.symlink_to(victim)
    assert post(f"{url}/api/scans/{sid}/resume", {"retry_errors": True}).status_code == 200
    s = wait_until(lambda: (s := scan(url, sid))["status"] == "done" and s, 60)
    assert s["points"][0]["attempts"] == 2
    assert victim.read_text() == "keep me\n"
    assert not log.is_symlink() and "RuntimeError" in log.read_text()


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"force_n": "0:200:5e-324"}, "force_n: range '0:200:5e-324' has more than 1e308 values, more than 10,000"),
        ({"force_n": "0:1e308:1e-308"}, "has more than 1e308 values"),
        ({"force_n": "0:200:0.00001"}, "force_n: range '0:200:0.00001' has 20,000,001 values, more than 10,000"),
        ({"force_n": "0:200:1e-300"}, "values, more than 10,000"),
        ({"force_n": "0:1e400:1"}, "must be start:stop:step with finite numbers"),
        ({"force_n": "nan:1:1"}, "must be start:stop:step with finite numbers"),
        ({"force_n": ["1e400"]}, "force_n: value '1e400' is not a finite number"),
        ({"force_n": ["-inf"]}, "is not a finite number"),
        ({"force_n": ["9" * 400]}, "force_n: expected a number of at most 40 characters, got '99999999"),
        ({"force_n": "0:" + "9" * 400 + ":1"}, "must be start:stop:step with finite numbers"),
        (
            {"force_n": "0:200:0.0201", "duration_s": "0.01:1:0.0001"},
            "grid has 98,524,851 points (9901 x 9951), more than 10,000",
        ),
        ({"force_n": [[1]]}, "force_n: expected a number, got [1]"),
        ({"force_n": {"a": 1}}, "force_n: values must be a list of numbers or a start:stop:step range"),
    ],
)
def test_malformed_numbers_in_a_scan_spec_are_a_400_with_a_hint_never_a_500(lab, grid, message):
    url, _ = lab
    t0 = time.monotonic()
    r = post(f"{url}/api/scans", {"kind": "push_recovery", "grid": grid})
    assert time.monotonic() - t0 < 5  # refused before a single value of a huge range is made
    assert r.status_code == 400, r.text
    err = r.json()
    assert message in err["error"] and err["hint"]
    if "more than 10,000" in message:
        assert "at most 10,000 points" in err["hint"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"kind": "push_recovery", "grid": {"force_n": [10**400]}}, "force_n: value 1000000"),
        ({"kind": "push_recovery", "grid": {"force_n": [float("nan")]}}, "force_n: value nan is not a finite number"),
        ({"kind": "push_recovery", "grid": {"force_n": [float("inf")]}}, "is not a finite number"),
        ({"kind": "push_recovery", "grid": {"force_n": [1]}, "timeout_s": float("nan")}, "timeout_s must be"),
        ({"kind": "push_recovery", "grid": {"force_n": [1]}, "timeout_s": 10**400}, "timeout_s must be"),
        ({"kind": "push_recovery", "grid": {"force_n": [1]}, "workers": 10**400}, "workers must be an integer"),
        ({"kind": "push_recovery", "grid": {"seconds": [10**400]}}, "seconds: value"),
        ({"kind": "walk_stability", "grid": {"seed": [2**80]}}, "seed: value"),
    ],
)
def test_numbers_python_callers_pass_that_json_cannot_carry_are_refused_the_same_way(body, message):
    from lab.scans.spec import parse_spec

    with pytest.raises(LabError) as e:
        parse_spec(body)
    assert message in e.value.message and e.value.hint and e.value.status == 400
    assert len(e.value.message) < 300  # a 400-digit number is shown cut


# ---------------------------------------------------------------- 6. stopping the Lab: SIGTERM and SIGKILL


def start_lab(port: int, results: Path, log: Path, env: dict | None = None) -> subprocess.Popen:
    env = {**os.environ, "LAB_RESULTS": str(results), **(env or {})}
    cmd = [sys.executable, str(ROOT / "app.py"), "lab", "--port", str(port), "--results", str(results)]
    cmd += ["--remote-url", f"http://127.0.0.1:{free_port()}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    wait_until(
        lambda: proc.poll() is None and requests.get(f"http://127.0.0.1:{port}/api/scans", timeout=2).ok, 90, 0.2
    )
    return proc


def launch_sleepers(url: str, results: Path) -> tuple[str, str, dict]:
    """A running probe scan (one point sleeping with a child on the one worker), scans waiting for that worker
    up to the cap, and a queued one behind them; (running, queued, pids)."""
    from lab.web.scans_page import MAX_RUNNING

    running = post(f"{url}/api/scans", {"kind": "probe", "grid": {"sleep_s": [0.1, 120]}, "workers": 1}).json()["id"]
    pid_file = results / "scans" / running / "points" / "00001" / "pids.json"
    wait_until(pid_file.exists, 60)
    for _ in range(MAX_RUNNING - 1):
        post(f"{url}/api/scans", {"kind": "probe", "grid": {"sleep_s": [1]}, "workers": 1})
    queued = post(f"{url}/api/scans", {"kind": "probe", "grid": {"sleep_s": [1]}}).json()
    assert queued["queue_position"] == 1, queued
    queued = queued["id"]
    pids = json.loads(pid_file.read_text())
    assert all(alive(int(p)) for p in pids.values() if p), pids
    assert set(group_members(pids["point"])) >= {pids["point"], pids["child"]}  # and the point's guard
    return running, queued, pids


def test_sigterm_of_the_lab_leaves_its_scans_interrupted_on_disk_no_process_behind_and_resume_picks_them_up(
    tmp_path,
):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "lab.log"
    proc = start_lab(port, tmp_path, log)
    try:
        running, queued, pids = launch_sleepers(url, tmp_path)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_until(lambda: nothing_left(pids), 5)  # SIGKILLed with their group while the Lab stopped
    info = json.loads((tmp_path / "scans" / running / "scan.json").read_text())
    assert info["status"] == "interrupted" and info["runs"][-1]["status"] == "interrupted"
    point = json.loads((tmp_path / "scans" / running / "points" / "00001" / "point.json").read_text())
    assert point["status"] == "interrupted" and point["finished_at"]
    assert (
        json.loads((tmp_path / "scans" / running / "points" / "00000" / "point.json").read_text())["status"] == "done"
    )
    assert json.loads((tmp_path / "scans" / queued / "scan.json").read_text())["status"] == "interrupted"

    from lab.scans.manager import ScanManager

    m = ScanManager(tmp_path)
    try:
        assert m.get(running)["status"] == "interrupted"
        m.resume(running)
        s = wait_until(lambda: (s := m.get(running))["points"][1]["status"] == "running" and s, 30)
        assert s["points"][0]["status"] == "done" and s["points"][0]["attempts"] == 1  # not run again
        assert s["points"][1]["attempts"] == 2 and m.get(queued)["status"] == "interrupted"
        c = m.cancel(running)
        assert [p["status"] for p in c["points"]] == ["done", "cancelled"]
    finally:
        m.shutdown()


def test_sigkill_of_the_lab_takes_every_point_process_and_its_children_with_it(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_lab(port, tmp_path, tmp_path / "lab.log")
    try:
        running, _, pids = launch_sleepers(url, tmp_path)
    finally:
        proc.kill()  # SIGKILL: no stop function runs
        proc.wait(timeout=30)
    wait_until(lambda: nothing_left(pids), 10)  # the point (PDEATHSIG), its child and its guard (the group)

    from lab.scans.manager import ScanManager

    m = ScanManager(tmp_path)  # the next start sees what the killed Lab could not write
    try:
        s = m.get(running)
        assert s["status"] == "interrupted" and [p["status"] for p in s["points"]] == ["done", "interrupted"]
    finally:
        m.shutdown()
