"""Scans of the feedback walker over real HTTP on the real Lab app, with real point processes and real
simulations: choice parameters (``controller: "feedback, pd"``), walk_stability with both controllers, and
push_threshold's bisection (bracket, impulse, Δv, the PD-walk baseline that falls unpushed), and the page
showing both scans (choice labels on the heatmap axes, the threshold table)."""

import csv
import io
import json

import pytest
import requests

from lab.errors import LabError
from lab.scans.kinds import parse_grid
from lab.scans.registry import get_kind
from tests.conftest import free_port, wait_until


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The real Lab app (simulation thread not started: scans only) on a free port; (url, results dir)."""
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    results = tmp_path_factory.mktemp("scans_feedback")
    app = create_lab_app(results_dir=results, start=False, remote_url=f"http://127.0.0.1:{free_port()}")
    with ServerThread(app) as srv:
        yield srv.url, results


def run_scan(url: str, body: dict, timeout: float = 120) -> dict:
    r = requests.post(f"{url}/api/scans", json=body, timeout=30)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    s = wait_until(
        lambda: (
            (s := requests.get(f"{url}/api/scans/{sid}", timeout=5).json())["status"] in ("done", "failed", "cancelled")
            and s
        ),
        timeout,
        0.2,
    )
    assert s["status"] == "done" and s["counts"]["done"] == s["total"], [p["error"] for p in s["points"]]
    return s


# ---------------------------------------------------------------- choice parameters


def test_a_choice_axis_expands_to_its_names_and_numbers_stay_as_they_were():
    kind = get_kind("walk_stability")
    g = parse_grid(kind, {"controller": "feedback, pd", "step_len": "0.02:0.04:0.02"})
    assert g.axes == {"step_len": [0.02, 0.04], "controller": ["feedback", "pd"]}
    assert g.fixed == {"step_height": 0.035, "steps": 6, "seed": 0}  # the default controller is not fixed here
    assert parse_grid(kind, {"steps": "4"}).fixed["controller"] == "feedback"  # the default
    assert parse_grid(kind, {"controller": [" PD", "pd", "feedback"]}).axes["controller"] == ["pd", "feedback"]
    with pytest.raises(LabError) as e:
        parse_grid(kind, {"controller": "feedback, mpc"})
    assert str(e.value) == "controller: unknown choice 'mpc', expected one of feedback, pd"
    assert "controller: one of feedback, pd, default feedback" in e.value.hint
    with pytest.raises(LabError, match="controller: expected one of feedback, pd, got 1"):
        parse_grid(kind, {"controller": [1]})
    with pytest.raises(LabError, match="step_len: value 'pd' is not a number"):
        parse_grid(kind, {"step_len": "pd"})


@pytest.mark.parametrize(
    ("grid", "message", "hint"),
    [
        (
            {"controller": "mpc"},
            "controller: unknown choice 'mpc', expected one of feedback, pd",
            "one of feedback, pd",
        ),
        ({"controller": "a:b:c"}, "controller: unknown choice 'a:b:c'", 'choices as a list ["a", "b"] or "a, b"'),
        ({"controller": []}, "empty grid: controller has no values", "controller: one of feedback, pd"),
        ({"controller": {"x": 1}}, "controller: values must be a list of feedback, pd", "controller"),
        ({"controller": [True]}, "controller: expected one of feedback, pd, got True", "controller"),
    ],
)
def test_a_bad_choice_is_a_400_that_lists_the_choices(lab, grid, message, hint):
    url, _ = lab
    r = requests.post(f"{url}/api/scans", json={"kind": "walk_stability", "grid": grid}, timeout=10)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"] and hint in r.json()["hint"], r.json()


def test_a_bad_situation_or_direction_is_a_400_that_lists_them(lab):
    url, _ = lab
    r = requests.post(f"{url}/api/scans", json={"kind": "push_threshold", "grid": {"direction": "up"}}, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"] == "direction: unknown choice 'up', expected one of forward, backward, left, right"
    r = requests.post(f"{url}/api/scans", json={"kind": "push_threshold", "grid": {"situation": "sit"}}, timeout=10)
    assert "expected one of stand_feedback, stand_step, walk, pd_stand, pd_walk" in r.json()["error"]


def test_the_kinds_list_shows_choices_beside_unchanged_numeric_parameters(lab):
    url, _ = lab
    kinds = {k["name"]: k for k in requests.get(f"{url}/api/scans/kinds", timeout=5).json()["kinds"]}
    params = {p["name"]: p for p in kinds["walk_stability"]["params"]}
    assert params["controller"]["choices"] == ["feedback", "pd"] and params["controller"]["default"] == "feedback"
    assert params["step_len"] == {
        "name": "step_len",
        "default": 0.04,
        "min": 0.0,
        "max": 0.15,
        "unit": "m",
        "integer": False,
        "description": "forward step length",
    }
    pt = kinds["push_threshold"]
    assert [p["name"] for p in pt["params"]][:2] == ["situation", "direction"]
    assert pt["params"][1]["choices"] == ["forward", "backward", "left", "right"]
    assert pt["heat_metric"] == "impulse_ns" and pt["available"] is True
    defaults = {p["name"]: p["default"] for p in pt["params"]}
    assert defaults["duration_s"] == 0.1 and defaults["tolerance_n"] == 2.0 and defaults["max_force_n"] == 300.0


# ---------------------------------------------------------------- walk_stability: feedback vs pd


@pytest.fixture(scope="module")
def walk_scan(lab):
    url, _ = lab
    body = {
        "kind": "walk_stability",
        "grid": {"controller": "feedback, pd", "step_len": [0.04], "step_height": [0.03], "steps": [4]},
        "workers": 2,
    }
    return run_scan(url, body)


def test_walk_stability_on_both_controllers_the_feedback_walker_stands_and_the_pd_walk_falls(lab, walk_scan):
    url, _ = lab
    s = walk_scan
    assert s["axes"][0] == "controller" and s["grid"]["controller"] == ["feedback", "pd"]
    fb, pd = s["points"]
    assert fb["params"]["controller"] == "feedback" and pd["params"]["controller"] == "pd"
    assert fb["metrics"]["stable"] is True and fb["metrics"]["fell"] is False
    assert fb["metrics"]["steps_completed"] >= 4
    assert fb["metrics"]["vx_cmd_mps"] == pytest.approx(0.04 / 0.45, abs=1e-6)
    assert 0.02 < fb["metrics"]["mean_speed_mps"] < 0.2
    assert fb["metrics"]["z_min"] > 0.35 and fb["metrics"]["pitch_max_deg"] < 45
    assert pd["metrics"]["stable"] is False and pd["metrics"]["fell"] is True and pd["metrics"]["fall_time_s"] > 0
    assert (
        s["summary"]["stable"] == 1 and s["summary"]["stable_feedback"] == "1/1" and s["summary"]["stable_pd"] == "0/1"
    )

    rows = list(csv.DictReader(io.StringIO(requests.get(f"{url}/api/scans/{s['id']}/results.csv", timeout=5).text)))
    assert [r["controller"] for r in rows] == ["feedback", "pd"]
    assert [r["stable"] for r in rows] == ["true", "false"]
    assert rows[0]["steps_completed"] and rows[0]["mean_speed_mps"]
    summary = requests.get(f"{url}/api/scans/{s['id']}/points/0/summary.json", timeout=5).json()
    assert summary["controller"] == "feedback" and summary["steps"] == 4 and summary["step_height_m"] == 0.03


# ---------------------------------------------------------------- push_threshold: bisection


@pytest.fixture(scope="module")
def push_scan(lab):
    url, _ = lab
    body = {
        "kind": "push_threshold",
        "grid": {
            "situation": "stand_feedback, pd_stand, pd_walk",
            "direction": "forward",
            "tolerance_n": 20,
            "max_force_n": 120,
            "probes": 0,
        },
        "workers": 2,
    }
    return run_scan(url, body)


def replay_bisection(trials: list[dict], max_force: float, tol: float) -> None:
    """The trial forces are exactly what bisection on [0, max_force] picks given the outcomes seen."""
    assert trials[0]["force_n"] == 0.0 and trials[0]["recovered"] is True
    assert trials[1]["force_n"] == max_force and trials[1]["recovered"] is False
    lo, hi = 0.0, max_force
    for t in (t for t in trials[2:] if not t["probe"]):
        assert hi - lo > tol  # a trial is only run while the bracket is wider than the tolerance
        assert t["force_n"] == pytest.approx((lo + hi) / 2, abs=1e-3)
        lo, hi = (t["force_n"], hi) if t["recovered"] else (lo, t["force_n"])
    assert hi - lo <= tol


@pytest.mark.parametrize("index", [0, 1])  # stand_feedback, pd_stand
def test_a_push_threshold_point_bisects_to_the_tolerance_and_reports_impulse_and_delta_v(lab, push_scan, index):
    url, _ = lab
    p = push_scan["points"][index]
    m = p["metrics"]
    assert p["params"]["direction"] == "forward" and p["params"]["duration_s"] == 0.1
    summary = requests.get(f"{url}/api/scans/{push_scan['id']}/points/{index}/summary.json", timeout=5).json()
    trials = summary["trials"]
    replay_bisection(trials, 120.0, 20.0)
    recovered = [t["force_n"] for t in trials if t["recovered"]]
    fell = [t["force_n"] for t in trials if not t["recovered"]]
    assert m["outcome"] == "bracketed" and m["n_trials"] == len(trials) == 5  # 0, 120, 60, 30 or 90, then one
    assert m["n_probes"] == 0 and m["monotonic"] is True
    assert (m["bisection_threshold_n"], m["bisection_first_fall_n"]) == (
        m["threshold_force_n"],
        m["first_fall_force_n"],
    )
    assert m["threshold_force_n"] == max(recovered) and m["first_fall_force_n"] == min(fell)
    assert max(recovered) < min(fell)  # the outcomes are monotonic in force
    assert 0 < m["first_fall_force_n"] - m["threshold_force_n"] <= 20
    assert m["impulse_ns"] == pytest.approx(m["threshold_force_n"] * 0.1)
    assert m["delta_v_mps"] == pytest.approx(m["impulse_ns"] / m["total_mass_kg"], abs=1e-6)  # rounded to 1e-6
    assert m["total_mass_kg"] == pytest.approx(11.1)
    assert all(t["fall_time_s"] > t["push_t_s"] for t in trials if not t["recovered"])  # fell after the push
    assert m["trials_text"].startswith("0:ok 120:fell ")
    point = requests.get(f"{url}/api/scans/{push_scan['id']}/points/{index}", timeout=5).json()
    assert point["figure"] == "trials.png" and {"summary.json", "trials.csv"} <= set(point["files"])
    png = requests.get(f"{url}/api/scans/{push_scan['id']}/points/{index}/trials.png", timeout=5)
    assert png.content[:4] == b"\x89PNG"
    table = list(
        csv.DictReader(
            io.StringIO(requests.get(f"{url}/api/scans/{push_scan['id']}/points/{index}/trials.csv", timeout=5).text)
        )
    )
    assert [float(r["force_n"]) for r in table] == [t["force_n"] for t in trials]


def test_the_pd_walk_baseline_falls_unpushed_and_is_reported_as_zero_with_a_note(lab, push_scan):
    url, _ = lab
    p = push_scan["points"][2]
    m = p["metrics"]
    assert p["params"]["situation"] == "pd_walk"
    assert m["outcome"] == "falls_unpushed" and m["threshold_force_n"] == 0 and m["impulse_ns"] == 0
    assert m["n_trials"] == 1 and m["trials_text"] == "0:fell"
    assert "falls without a push" in m["note"]
    point = requests.get(f"{url}/api/scans/{push_scan['id']}/points/2", timeout=5).json()
    assert "pd_walk_curves.png" in point["files"]  # the run that shows it


def test_the_scan_summary_is_a_situation_by_direction_table(push_scan):
    sm = push_scan["summary"]
    assert sm["points_done"] == 3 and sm["total_mass_kg"] == pytest.approx(11.1)
    rows = {(r["situation"], r["direction"]): r for r in sm["push_thresholds"]}
    assert set(rows) == {("stand_feedback", "forward"), ("pd_stand", "forward"), ("pd_walk", "forward")}
    for (sit, _), r in rows.items():
        m = next(p["metrics"] for p in push_scan["points"] if p["params"]["situation"] == sit)
        assert r["impulse_ns"] == m["impulse_ns"] and r["delta_v_mps"] == m["delta_v_mps"] and r["plane"] == "sagittal"
    weakest = {w["situation"]: w for w in sm["weakest_plane"]}
    assert weakest["pd_walk"]["sagittal_min_impulse_ns"] == 0 and weakest["pd_walk"]["lateral_min_impulse_ns"] is None


def test_check_trials_around_the_bracket_test_that_the_outcome_is_monotonic_in_force(lab):
    url, _ = lab
    body = {
        "kind": "push_threshold",
        "grid": {"situation": "pd_stand", "direction": "forward", "tolerance_n": 20, "max_force_n": 120, "probes": 4},
    }
    s = run_scan(url, body)
    m = s["points"][0]["metrics"]
    summary = requests.get(f"{url}/api/scans/{s['id']}/points/0/summary.json", timeout=5).json()
    trials = summary["trials"]
    replay_bisection(trials, 120.0, 20.0)
    lo, hi = m["bisection_threshold_n"], m["bisection_first_fall_n"]
    probes = [t["force_n"] for t in trials if t["probe"]]
    assert probes == pytest.approx([0.9 * lo, 0.8 * lo, 1.1 * hi, 1.2 * hi], abs=1e-3) and m["n_probes"] == 4
    recovered = [t["force_n"] for t in trials if t["recovered"]]
    fell = [t["force_n"] for t in trials if not t["recovered"]]
    assert m["first_fall_force_n"] == min(fell)
    assert m["threshold_force_n"] == max(f for f in recovered if f < min(fell))  # the largest below every fall
    assert m["monotonic"] is (max(recovered) < min(fell))
    assert m["monotonic"] is True and m["note"] == ""  # the PD stand is monotonic here: 0.8 lo .. 1.2 hi agree


def test_a_robot_that_recovers_at_the_largest_force_is_reported_above_it_not_bracketed(lab):
    url, _ = lab
    body = {"kind": "push_threshold", "grid": {"situation": "pd_stand", "direction": "left", "max_force_n": 5}}
    s = run_scan(url, body)
    m = s["points"][0]["metrics"]
    assert m["outcome"] == "above_max" and m["threshold_force_n"] == 5 and m["first_fall_force_n"] is None
    assert m["n_trials"] == 2 and m["trials_text"] == "0:ok 5:ok" and "above it" in m["note"]
    assert m["impulse_ns"] == pytest.approx(0.5)
    summary = json.loads((lab[1] / "scans" / s["id"] / "points" / "00000" / "summary.json").read_text())
    assert summary["push_vector"] == [0.0, 1.0] and summary["plane"] == "lateral"


# ---------------------------------------------------------------- the page


@pytest.mark.e2e
def test_the_page_shows_choice_axes_and_the_threshold_table(lab, walk_scan, push_scan, page):
    url, _ = lab
    page.goto(f"{url}/scans")
    page.select_option("#kind", "push_threshold")
    assert page.locator("#params fieldset.choices").count() == 2
    assert page.text_content("#count") == "20 points (5 × 4)"  # the example ticks every situation and direction
    page.uncheck("#params input[data-choice-of=situation][value=pd_walk]")
    assert page.text_content("#count") == "16 points (4 × 4)"

    page.goto(f"{url}/scans#scan={push_scan['id']}")
    page.reload()  # the page reads the scan from its hash when it loads
    page.wait_for_function("document.getElementById('d-status').textContent === 'done'", timeout=15000)
    page.wait_for_selector("#d-summary table.thresholds")
    assert page.locator("#d-summary table.thresholds tbody tr").count() == 3
    assert "falls unpushed" in page.text_content("#d-summary")
    ticks = page.evaluate("Array.from(document.querySelectorAll('#heatmap .xtick text')).map(t => t.textContent)")
    assert ticks == ["stand_feedback", "pd_stand", "pd_walk"], ticks

    page.goto(f"{url}/scans#scan={walk_scan['id']}")
    page.reload()  # the page reads the scan from its hash when it loads
    page.wait_for_function("document.getElementById('d-status').textContent === 'done'", timeout=15000)
    page.wait_for_function("document.querySelectorAll('#heatmap .xtick text').length === 2", timeout=15000)
    ticks = page.evaluate("Array.from(document.querySelectorAll('#heatmap .xtick text')).map(t => t.textContent)")
    assert ticks == ["feedback", "pd"], ticks
    texts = page.evaluate("Array.from(document.querySelectorAll('#heatmap .textpoint')).map(t => t.textContent)")
    assert sum("PASS" in t for t in texts) == 1 and sum("FAIL" in t for t in texts) == 1, texts
    assert page.errors == []
