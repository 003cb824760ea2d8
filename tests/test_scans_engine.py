"""The scan engine without the web: grids, real point processes (crash, timeout), the push threshold,
and the Ray executor on a local Ray instance against the local pool."""

import json
import time
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.scans.kinds import parse_grid
from lab.scans.manager import ScanManager, parse_spec
from lab.scans.registry import get_kind
from tests.conftest import wait_until


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def numbers(metrics: dict) -> dict:
    """A point's results without its timings (wall_s, sim_wall_s), which differ from run to run."""
    return {k: v for k, v in metrics.items() if not k.endswith("wall_s")}


@pytest.fixture()
def manager(tmp_path):
    m = ScanManager(tmp_path)
    yield m
    m.shutdown()


def test_grid_expands_lists_ranges_and_defaults_first_axis_outermost():
    kind = get_kind("push_recovery")
    g = parse_grid(kind, {"force_n": "20:40:10", "duration_s": [0.1, "0.2"]})
    assert g.axes == {"duration_s": [0.1, 0.2], "force_n": [20.0, 30.0, 40.0]}
    assert g.fixed == {"seconds": 3.0, "direction": "forward"}
    pts = g.points()
    assert len(pts) == g.size == 6
    assert pts[0] == {"seconds": 3.0, "direction": "forward", "duration_s": 0.1, "force_n": 20.0}
    assert pts[1]["force_n"] == 30.0 and pts[3]["duration_s"] == 0.2
    assert parse_grid(get_kind("walk_stability"), {"steps": "2, 3"}).axes == {"steps": [2, 3]}


@pytest.mark.parametrize(
    ("body", "message", "hint"),
    [
        ({"kind": "push_recovery", "grid": {}}, "empty grid", "force_n [N]: number in [0, 200]"),
        ({"kind": "push_recovery", "grid": {"force_n": []}}, "empty grid: force_n has no values", "duration_s [s]"),
        (
            {"kind": "push_recovery", "grid": {"force_n": "0:200:0.01"}},
            "force_n: range '0:200:0.01' has 20,001 values, more than 10,000",
            "values as a list",
        ),
        (
            {"kind": "push_recovery", "grid": {"force_n": "0:100:1", "duration_s": "0.01:1:0.01"}},
            "grid has 10,100 points (100 x 101)",
            "at most",
        ),
        (
            {"kind": "push_recovery", "grid": {"force_n": ["strong"]}},
            "force_n: value 'strong' is not a number",
            "force_n [N]",
        ),
        ({"kind": "push_recovery", "grid": {"force_n": [float("nan")]}}, "is not a finite number", "force_n"),
        ({"kind": "push_recovery", "grid": {"force_n": [500]}}, "force_n: value 500 is outside [0, 200]", "force_n"),
        (
            {"kind": "push_recovery", "grid": {"mass": [1]}},
            "unknown parameter 'mass' for scan kind 'push_recovery'",
            "parameters of push_recovery: duration_s",
        ),
        (
            {"kind": "walk_stability", "grid": {"steps": [2.5]}},
            "steps: value 2.5 is not an integer",
            "steps: integer in [1, 40]",
        ),
        (
            {"kind": "fly", "grid": {"x": [1]}},
            "unknown scan kind 'fly'",
            "available: walk_stability, push_recovery, push_threshold, probe",
        ),
        (
            {"kind": "push_recovery", "grid": {"force_n": [1]}, "executor": "slurm"},
            "unknown executor 'slurm'",
            "available: local, ray",
        ),
        (
            {"kind": "push_recovery", "grid": {"force_n": [1]}, "grids": {}},
            "unknown field 'grids'",
            "accepted: kind, grid",
        ),
    ],
)
def test_bad_scan_specs_raise_with_a_hint_listing_what_is_accepted(body, message, hint):
    with pytest.raises(LabError) as e:
        parse_spec(body)
    assert message in e.value.message
    assert hint in e.value.hint
    assert e.value.status == 400


def test_crashing_and_overrunning_points_are_recorded_as_error_and_the_scan_carries_on(manager):
    s = manager.create({"kind": "probe", "grid": {"fail": [0, 1, 2]}, "workers": 2})
    s = manager.wait(s["id"], 60)
    assert s["status"] == "done"
    ok, raised, exited = s["points"]
    assert ok["status"] == "done" and ok["metrics"]["ok"] is True
    assert raised["status"] == "error"
    assert raised["error"].startswith("exit status 1: RuntimeError: probe point asked to fail")
    assert exited["status"] == "error" and exited["error"] == "exit status 3: probe point exits with status 3"
    rec = manager.point(s["id"], 1)
    assert "Traceback" in rec["output_tail"] and "RuntimeError" in rec["output_tail"]
    assert "output.log" in rec["files"]

    s = manager.create({"kind": "probe", "grid": {"sleep_s": [0, 60]}, "timeout_s": 1.5, "workers": 2})
    t0 = time.monotonic()
    s = manager.wait(s["id"], 30)
    assert time.monotonic() - t0 < 15
    assert [p["status"] for p in s["points"]] == ["done", "error"]
    assert s["points"][1]["error"] == "timed out after 1.5 s"
    pids = json.loads((manager.store.root / s["id"] / "points" / "00001" / "pids.json").read_text())
    assert not alive(pids["point"]) and not alive(pids["child"])  # the whole process group went


def test_push_recovery_points_record_recovered_or_fell_and_the_scan_reports_the_threshold(manager):
    s = manager.create(
        {"kind": "push_recovery", "grid": {"duration_s": [0.1], "force_n": [20, 80], "seconds": [1.5]}, "workers": 2}
    )
    s = manager.wait(s["id"], 90)
    assert s["status"] == "done", s
    gentle, hard = (p["metrics"] for p in s["points"])
    assert gentle["recovered"] is True and gentle["fell"] is False and gentle["pitch_max_deg"] < 20
    assert hard["recovered"] is False and hard["fell"] is True and hard["pitch_max_deg"] > 45
    assert 0.5 < hard["t_fall_s"] < 1.5
    (th,) = s["summary"]["thresholds"]
    assert th == {  # a bracket with its width, never the midpoint of 20 and 80 as a "threshold"
        "direction": "forward",
        "duration_s": 0.1,
        "bracket": [20.0, 80.0],
        "last_pass_n": 20.0,
        "first_fail_n": 80.0,
        "tol_n": 60.0,
        "impulse_bracket_ns": [2.0, 8.0],
        "max_recovered_n": 20.0,
        "min_fell_n": 80.0,
        "monotonic": True,
        "points": 2,
        "label": "threshold in [20, 80] N (tol 60 N)",
    }
    files = manager.point(s["id"], 1)["files"]
    assert {"summary.json", "push_trace.csv", "push_curves.png"} <= set(files)
    rows = (manager.store.root / s["id"] / "results.csv").read_text().strip().splitlines()
    assert len(rows) == 3 and rows[0].startswith("index,status,duration_s,force_n,seconds,direction,pitch_max_deg")


@pytest.mark.slow
def test_ray_executor_on_a_local_instance_matches_the_local_pool_and_cancels_running_points(tmp_path):
    import ray

    grid = {"duration_s": [0.1], "force_n": [20, 80], "seconds": [1.0]}
    local = ScanManager(tmp_path / "local")
    on_ray = ScanManager(tmp_path / "ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}},
    )
    try:
        a = local.wait(local.create({"kind": "push_recovery", "grid": grid, "workers": 2})["id"], 90)
        b = on_ray.wait(
            on_ray.create({"kind": "push_recovery", "grid": grid, "executor": "ray", "workers": 2})["id"], 120
        )
        assert a["status"] == b["status"] == "done", (a, b)
        assert b["executor"] == "ray"
        for pa, pb in zip(a["points"], b["points"]):
            assert pa["params"] == pb["params"]
            assert numbers(pa["metrics"]) == numbers(pb["metrics"])  # the same numbers, bit for bit
        f, _ = on_ray.open_point_file(b["id"], 1, "push_curves.png")  # drawn when first asked for
        with f:
            assert f.read(4) == b"\x89PNG"

        s = on_ray.create({"kind": "probe", "grid": {"sleep_s": [0.1, 60]}, "executor": "ray", "workers": 2})
        pid_file = tmp_path / "ray" / "scans" / s["id"] / "points" / "00001" / "pids.json"
        wait_until(lambda: on_ray.get(s["id"])["counts"]["done"] == 1 and pid_file.exists(), 60)
        pids = json.loads(pid_file.read_text())
        c = on_ray.cancel(s["id"])
        assert c["status"] == "cancelled"
        assert [p["status"] for p in c["points"]] == ["done", "cancelled"]  # recorded before cancel returned
        assert json.loads((pid_file.parent / "point.json").read_text())["status"] == "cancelled"
        # the force-cancelled task's worker is gone; the point dies with it and its guard takes the group
        wait_until(lambda: not any(alive(int(p)) for p in pids.values() if p), 10)
    finally:
        local.shutdown()
        on_ray.shutdown()
        ray.shutdown()
