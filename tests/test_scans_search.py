"""Adaptive search, refine and the compact detail, on the real Lab app over real HTTP with real point processes:
the bisection of the built-in robot's push threshold against a dense sweep, a heatmap refined along its
PASS/FAIL boundary, and a scan of a known boundary (``boundary_probe``) paged and summarised."""

import math

import pytest
import requests

from lab.errors import LabError
from lab.scans.builtin import BOUNDARY_PROBE, PUSH_RECOVERY, boundary_value, builtin_kinds
from lab.scans.search import Search, boundary_midpoints, next_value, parse_search, threshold
from tests.conftest import free_port, wait_until


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The real Lab app (no simulation thread) with boundary_probe added to its kinds; its url."""
    from lab.scans.registry import make_kinds
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(
        results_dir=tmp_path_factory.mktemp("scans_search"), start=False, remote_url=f"http://127.0.0.1:{free_port()}"
    )
    app.extensions["scans"].kinds = make_kinds(*builtin_kinds(), BOUNDARY_PROBE)
    with ServerThread(app) as srv:
        yield srv.url


def launch(url, body) -> str:
    r = requests.post(f"{url}/api/scans", json=body, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def finished(url, sid, timeout=120) -> dict:
    return wait_until(
        lambda: (
            (s := requests.get(f"{url}/api/scans/{sid}?points=0", timeout=10).json())["status"]
            in ("done", "failed", "cancelled")
            and s
        ),
        timeout,
        0.2,
    )


def run_line(s: Search, boundary: float) -> tuple[dict, list]:
    """Bisect against the oracle "PASS below ``boundary``"; (outcomes, values in the order asked)."""
    outcomes, asked = {}, []
    while (v := next_value(s, outcomes)) is not None:
        asked.append(v)
        outcomes[v] = v < boundary
    return outcomes, asked


def test_bisection_brackets_the_boundary_in_log_points_and_labels_a_boundary_outside_the_range():
    s = parse_search(PUSH_RECOVERY, {"param": "force_n", "bisect": [0, 200], "tol": 2}, ["duration_s"])
    assert s.max_points == 8
    for boundary in (0.7, 44.1, 63.3, 100.0, 150.5, 199.2):
        outcomes, asked = run_line(s, boundary)
        t = threshold(s, {"duration_s": 0.1}, outcomes)
        lo, hi = t["bracket"]
        assert t["status"] == "bracketed" and lo < boundary <= hi and hi - lo <= 2, (boundary, t)
        assert len(asked) <= 8 and len(set(asked)) == len(asked)
        assert t["label"] == f"threshold in [{lo:g}, {hi:g}] N (tol 2 N)"

    outcomes, asked = run_line(s, 250.0)  # passes everywhere: hi is run, the bracket stays open above
    t = threshold(s, {}, outcomes)
    assert asked[-1] == 200.0 and t["status"] == "passes_at_hi" and t["bracket"] == [200.0, None]
    assert "passes even at hi = 200 N" in t["label"]
    outcomes, asked = run_line(s, -1.0)  # fails everywhere: lo is run, the bracket stays open below
    t = threshold(s, {}, outcomes)
    assert asked[-1] == 0.0 and t["status"] == "fails_at_lo" and t["bracket"] == [None, 0.0]
    assert len(asked) <= 8 and "fails even at lo = 0 N" in t["label"]
    assert threshold(s, {}, {100.0: True})["status"] == "searching"

    with pytest.raises(LabError) as e:
        parse_search(PUSH_RECOVERY, {"param": "force_n", "bisect": [0, 200], "tol": 2}, ["force_n"])
    assert "force_n is searched, so it cannot also be in the grid" in e.value.message
    with pytest.raises(LabError) as e:
        parse_search(PUSH_RECOVERY, {"param": "direction", "bisect": [0, 1], "tol": 1}, [])
    assert "not a number parameter" in e.value.message and "duration_s, force_n, seconds" in e.value.hint

    verdicts = [({"x": x, "y": 0.0}, x < 33) for x in (0, 20, 40, 60)] + [({"x": 20, "y": 10.0}, True)]
    x = BOUNDARY_PROBE.param("x")
    assert boundary_midpoints(verdicts, [x]) == [{"x": 30.0, "y": 0.0}]  # only between PASS 20 and FAIL 40


def test_a_push_search_finds_the_threshold_within_2_n_in_at_most_8_points_and_agrees_with_a_refined_dense_sweep(lab):
    durations = [0.1, 0.2]
    search = launch(
        lab,
        {
            "kind": "push_recovery",
            "grid": {"duration_s": durations, "seconds": [1.2]},
            "search": {"param": "force_n", "bisect": [0, 200], "tol": 2},
            "workers": 2,
        },
    )
    dense = launch(
        lab, {"kind": "push_recovery", "grid": {"duration_s": durations, "force_n": "0:200:25", "seconds": [1.2]}}
    )
    s = finished(lab, search)
    assert s["status"] == "done" and s["lines"] == {"total": 2, "done": 2}, s
    assert "points" not in s and s["search"] == {"param": "force_n", "bisect": [0.0, 200.0], "tol": 2.0}
    found = {}
    for t in s["thresholds"]:
        lo, hi = t["bracket"]
        assert t["status"] == "bracketed" and hi - lo <= 2 and t["points"] <= 8, t
        assert t["label"].startswith(f"threshold in [{lo:g}, {hi:g}] N")
        found[t["params"]["duration_s"]] = (lo, hi)
    assert set(found) == set(durations) and found[0.2][1] < found[0.1][0]  # a longer push needs less force
    assert s["total"] == sum(t["points"] for t in s["thresholds"]) == s["counts"]["done"]

    d = finished(lab, dense)
    assert d["status"] == "done" and d["counts"]["done"] == 18, d["counts"]
    sweep = {t["duration_s"]: t for t in d["summary"]["thresholds"]}
    for dur, (lo, hi) in found.items():  # the sweep's 25 N transition contains the search's 2 N bracket
        a, b = sweep[dur]["bracket"]
        assert sweep[dur]["tol_n"] == 25 and sweep[dur]["monotonic"] and "threshold_n" not in sweep[dur]
        assert a <= lo < hi <= b, (dur, (a, b), (lo, hi))

    r = requests.post(f"{lab}/api/scans/{dense}/refine", json={"axes": ["force_n"]}, timeout=30)
    assert r.status_code == 200 and r.json()["added"] == 2, r.text  # one midpoint per duration, on the boundary
    d = finished(lab, dense)
    assert d["total"] == 20 and d["counts"]["done"] == 20
    for t in d["summary"]["thresholds"]:
        a, b = t["bracket"]
        lo, hi = found[t["duration_s"]]
        assert t["tol_n"] == 12.5 and a <= lo < hi <= b, (t, (lo, hi))
    added = set(d["table"]["values"]["force_n"]) - {25.0 * k for k in range(9)}
    assert len(added) == 2 and all(v % 25 == 12.5 for v in added)
    again = requests.post(f"{lab}/api/scans/{search}/refine", json={}, timeout=30)
    assert again.status_code == 409 and "resume it" in again.json()["hint"]


def test_a_scan_of_a_known_boundary_pages_its_points_summarises_its_list_and_searches_to_the_boundary(lab):
    sid = launch(lab, {"kind": "boundary_probe", "grid": {"x": "0:95:5", "y": "0:95:5"}, "workers": 2})
    s = finished(lab, sid)
    assert s["status"] == "done" and s["total"] == 400 and "points" not in s  # above 100 points: on request only
    t = s["table"]
    assert t["n"] == 400 and t["axes"] == ["x", "y"] and t["status"] == "d" * 400
    for i in (0, 57, 399):
        x, y = t["values"]["x"][t["coords"]["x"][i]], t["values"]["y"][t["coords"]["y"][i]]
        assert t["pass"][i] == ("1" if x < boundary_value(x, y) else "0")
        assert t["metrics"]["margin"][i] == pytest.approx(boundary_value(x, y) - x, abs=1e-3)

    page = requests.get(f"{lab}/api/scans/{sid}?points=1&offset=390&limit=20", timeout=10).json()
    assert page["points_page"] == {"offset": 390, "limit": 20, "total": 400}
    assert [p["index"] for p in page["points"]] == list(range(390, 400))
    for query, message in (
        ("points=1&limit=0", "limit must be an integer in [1, 1,000], got '0'"),
        ("points=1&limit=5000", "limit must be an integer in [1, 1,000]"),
        ("points=1&offset=-3", "offset must be an integer in [0, 10,000]"),
        ("points=1&offset=ten", "offset must be an integer"),
        ("points=maybe", "points must be 0 or 1"),
    ):
        r = requests.get(f"{lab}/api/scans/{sid}?{query}", timeout=10)
        assert r.status_code == 400 and message in r.json()["error"] and "points=1" in r.json()["hint"], query
    listed = next(x for x in requests.get(f"{lab}/api/scans", timeout=10).json()["scans"] if x["id"] == sid)
    assert listed["counts"]["done"] == 400 and not {"points", "table", "summary"} & set(listed)

    ys = [0, 20, 45, 70]
    sid = launch(
        lab,
        {"kind": "boundary_probe", "grid": {"y": ys}, "search": {"param": "x", "bisect": [0, 100], "tol": 0.5}},
    )
    s = finished(lab, sid)
    for th in s["thresholds"]:
        lo, hi = th["bracket"]
        edge = boundary_value(0.0, th["params"]["y"])
        assert lo < edge <= hi and hi - lo <= 0.5 and th["points"] <= math.ceil(math.log2(100 / 0.5)) + 1, th
    assert sorted(th["params"]["y"] for th in s["thresholds"]) == ys
