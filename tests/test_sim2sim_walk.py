"""Sim2Sim's walk: the feedback walker in MuJoCo and PyBullet in lockstep, and the per-step divergence.

Headless (:class:`Lockstep`, ``advance()``): both engines walk, their touchdowns pair by step index with
finite touchdown and foothold differences, and both robots are upright after 8 steps. Over real HTTP: a
Sim2Sim server walks, ``GET /api/steps`` fills, ``POST /api/walk`` checks its input. In Chromium: the
page's footsteps table fills while walking. Every wait is on a condition, never on a duration.
"""

import math

import numpy as np
import pytest
import requests

from lab.runtime.lockstep import Lockstep, _pair_steps, step_summary
from tests.conftest import SCREENSHOTS, wait_until

ENGINES = ("mujoco", "pybullet")
ROW_KEYS = {
    "step",
    "side",
    "t_s",
    "dt_s",
    "contact_s",
    "contact_dt_s",
    "landed",
    "dx_m",
    "dy_m",
    "dxy_m",
    "early",
    "upright",
    "paired",
}
SUMMARY_KEYS = {
    "paired",
    "max_dt_s",
    "mean_dt_s",
    "bias_dt_s",
    "max_dxy_m",
    "mean_dxy_m",
    "contact_timed",
    "contact_max_dt_s",
    "contact_mean_dt_s",
    "steps",
    "upright",
    "engines",
}


def finite(*xs) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


# ---------------------------------------------------------------- headless


@pytest.fixture(scope="module")
def walked(robot):
    """A lockstep that stood 0.2 s, then walked (0.15 m/s forward) until 8 steps paired (at most 12 s)."""
    ls = Lockstep(robot, mode="stand")
    try:
        ls.advance(0.2)
        ls.set_mode("walk")
        while ls.sim_time < 12.0:
            ls.advance(0.25)
            s = ls.step_divergence()["summary"]
            if s["paired"] >= 8:
                break
        yield ls
    finally:
        ls.close()


def test_both_engines_walk_and_the_touchdowns_pair_by_step(walked):
    d = walked.step_divergence()
    s = d["summary"]
    assert d["walking"] is True and walked.sim_info()["state"] == "running"
    assert s["paired"] >= 8, s
    assert s["steps"]["mujoco"] >= 8 and s["steps"]["pybullet"] >= 8
    paired = [r for r in d["steps"] if r["paired"]]
    assert [r["step"] for r in paired[:8]] == list(range(8))
    for r in paired:
        assert set(r) == ROW_KEYS
        assert r["side"] in ("left", "right")
        assert finite(r["dt_s"], r["dx_m"], r["dy_m"], r["dxy_m"]), r
        assert r["dt_s"] == pytest.approx(r["t_s"]["pybullet"] - r["t_s"]["mujoco"], abs=1e-5)
        la, lb = r["landed"]["mujoco"], r["landed"]["pybullet"]
        assert r["dx_m"] == pytest.approx(lb[0] - la[0], abs=1e-5)
        assert r["dxy_m"] == pytest.approx(math.hypot(lb[0] - la[0], lb[1] - la[1]), abs=1e-5)
        # the same walker, gains and law: the engines land within a fraction of a step of each other
        assert abs(r["dt_s"]) < 0.3 and r["dxy_m"] < 0.1, r
    sides = [r["side"] for r in paired[:8]]
    assert all(a != b for a, b in zip(sides, sides[1:]))  # the feet alternate
    xs = [r["landed"]["mujoco"][0] for r in paired[:8]]
    assert xs[-1] - xs[0] > 0.1  # forward, in MuJoCo ...
    assert paired[7]["landed"]["pybullet"][0] - paired[0]["landed"]["pybullet"][0] > 0.1  # ... and in PyBullet


def test_both_engines_are_upright_after_eight_steps(walked):
    d = walked.step_divergence()
    assert all(r["upright"] == {"mujoco": True, "pybullet": True} for r in d["steps"][:8])
    assert d["summary"]["upright"] == {"mujoco": True, "pybullet": True}
    assert walked.fell_at("mujoco") is None and walked.fell_at("pybullet") is None


def test_summary_is_the_rows_aggregated(walked):
    d = walked.step_divergence()
    s, rows = d["summary"], d["steps"]
    assert set(s) == SUMMARY_KEYS and s["engines"] == list(ENGINES)
    dts = [abs(r["dt_s"]) for r in rows if r["dt_s"] is not None]
    dxy = [r["dxy_m"] for r in rows if r["paired"]]
    assert s["max_dt_s"] == pytest.approx(max(dts), abs=1e-6)
    assert s["mean_dt_s"] == pytest.approx(np.mean(dts), abs=1e-6)
    assert s["max_dxy_m"] == pytest.approx(max(dxy), abs=1e-6) and 0 <= s["mean_dxy_m"] <= s["max_dxy_m"]
    # the measured first contact: a step whose swing foot cleared the floor in both engines has one in both
    timed = [r for r in rows if r["contact_dt_s"] is not None]
    assert s["contact_timed"] == len(timed) >= 4
    for r in timed:
        assert r["contact_dt_s"] == pytest.approx(r["contact_s"]["pybullet"] - r["contact_s"]["mujoco"], abs=1e-5)
    assert walked.latest()["steps"] == s  # the same summary reaches every metrics sample
    assert len(walked.step_divergence(3)["steps"]) == 3 and walked.step_divergence(3)["summary"] == s


def test_pairing_keeps_a_step_only_one_engine_took():
    """One engine fell after step 0: step 1 is listed, unpaired, with the other engine's data only."""

    class Watch:
        touch = {0: 1.20, 1: 1.65}

    class NoContact:
        touch = {0: 1.23}

    ev = [
        {"step": 0, "side": 1, "t_s": 0.70, "landed": (0.06, -0.07)},
        {"step": 1, "side": 0, "t_s": 1.15, "landed": (0.12, 0.09), "early": True},
    ]
    walks = {
        "mujoco": (ev, Watch, 0.5),
        "pybullet": ([{**ev[0], "t_s": 0.72, "landed": (0.09, -0.03)}], NoContact, 0.5),
    }
    falls = {"mujoco": None, "pybullet": 1.4}
    rows = _pair_steps(ENGINES, walks, falls)
    assert [r["paired"] for r in rows] == [True, False]
    r0, r1 = rows
    assert r0["dt_s"] == pytest.approx(0.02) and r0["contact_dt_s"] == pytest.approx(0.03)
    assert (r0["dx_m"], r0["dy_m"], r0["dxy_m"]) == pytest.approx((0.03, 0.04, 0.05))
    assert r0["side"] == "right" and r0["upright"] == {"mujoco": True, "pybullet": True}
    assert r1["side"] == "left" and r1["dt_s"] is None and r1["dxy_m"] is None and r1["contact_dt_s"] is None
    assert r1["landed"]["pybullet"] is None and r1["early"] == {"mujoco": True, "pybullet": None}
    assert r1["upright"] == {"mujoco": True, "pybullet": False}  # PyBullet fell at 1.4 s, before 1.65 s
    s = step_summary(rows, ENGINES, walks, falls)
    assert s["paired"] == 1 and s["steps"] == {"mujoco": 2, "pybullet": 1}
    assert s["upright"] == {"mujoco": True, "pybullet": False}
    assert s["max_dt_s"] == s["mean_dt_s"] == pytest.approx(0.02) and s["max_dxy_m"] == pytest.approx(0.05)


def test_leaving_the_walk_or_a_reset_clears_the_steps(robot):
    ls = Lockstep(robot, mode="walk")
    try:
        while ls.step_divergence()["summary"]["paired"] < 1 and ls.sim_time < 5.0:
            ls.advance(0.2)
        assert ls.step_divergence()["summary"]["paired"] >= 1
        ls.reset()  # back to t=0, still walking: a new walk
        d = ls.step_divergence()
        assert d["walking"] and d["steps"] == [] and d["summary"]["paired"] == 0
        ls.set_mode("stand")
        assert ls.step_divergence() == {"walking": False, "steps": [], "summary": None}
        ls.advance(0.05)
        assert ls.latest()["steps"] is None
    finally:
        ls.close()


# ---------------------------------------------------------------- over HTTP


def get(srv, path):
    r = requests.get(srv.url + path, timeout=10)
    return r.status_code, r.json()


def post(srv, path, body=None):
    r = requests.post(srv.url + path, json=body, timeout=10)
    return r.status_code, r.json()


def test_sim2sim_offers_walk_and_reports_steps_over_http(s2s):
    code, st = get(s2s, "/api/status")
    assert "walk" in st["modes"] and "walk_pd" not in st["modes"] and "pose" not in st["modes"]
    assert get(s2s, "/api/steps")[1] == {"walking": False, "steps": [], "summary": None}
    assert get(s2s, "/api/walk")[1]["walking"] is False
    code, st = post(s2s, "/api/mode", {"mode": "walk"})
    assert code == 200 and st["mode"] == "walk"
    assert st["walk"]["command"] == {"vx": 0.15, "vy": 0.0, "yaw_rate": 0.0}  # selecting walk starts forward
    d = wait_until(lambda: (r := get(s2s, "/api/steps")[1])["summary"]["paired"] >= 4 and r, 90)
    s = d["summary"]
    assert d["walking"] is True and set(s) == SUMMARY_KEYS and s["engines"] == list(ENGINES)
    assert finite(s["max_dt_s"], s["mean_dt_s"], s["max_dxy_m"], s["mean_dxy_m"])
    assert 0 <= s["mean_dt_s"] <= s["max_dt_s"] < 0.3 and 0 <= s["mean_dxy_m"] <= s["max_dxy_m"] < 0.1
    assert s["upright"] == {"mujoco": True, "pybullet": True}
    paired = [r for r in d["steps"] if r["paired"]]
    assert len(paired) >= 4 and [r["step"] for r in paired[:4]] == [0, 1, 2, 3]
    for r in paired:
        assert set(r) == ROW_KEYS and set(r["t_s"]) == set(ENGINES) and set(r["landed"]) == set(ENGINES)
        assert finite(r["dt_s"], r["dx_m"], r["dy_m"], r["dxy_m"]) and len(r["landed"]["pybullet"]) == 2
    code, last = get(s2s, "/api/steps?last=2")
    assert code == 200 and len(last["steps"]) == 2 and last["steps"][-1]["step"] >= paired[-1]["step"]
    m = get(s2s, "/api/metrics")[1]
    assert m["mode"] == "walk" and m["steps"]["paired"] >= 4  # the summary rides on every metrics sample
    w = get(s2s, "/api/walk")[1]
    assert w["walking"] is True and w["steps"] >= 4 and w["bounds"]["vx"] == 0.3
    spec = get(s2s, "/api/openapi.json")[1]
    assert {"get", "post"} <= set(spec["paths"]["/api/walk"]) and "get" in spec["paths"]["/api/steps"]


@pytest.mark.parametrize(
    "path",
    ["/api/steps?last=0", "/api/steps?last=abc", "/api/steps?last=1.5", "/api/steps?last=100000"],
)
def test_steps_refuses_a_bad_last(s2s, path):
    code, err = get(s2s, path)
    assert code == 400 and err["error"].startswith("last must be an integer in [1, 1000]") and err["hint"]


@pytest.mark.parametrize(
    "body, words",
    [
        ({"vx": 5}, "'vx' = 5 m/s is beyond the walker's bound ±0.3 m/s"),
        ({"vx": "fast"}, "'vx' must be a finite number"),
        ({"yaw_rate": True}, "'yaw_rate' must be a finite number"),
        ({"speed": 0.1}, "unknown walk field(s): speed"),
        ({}, "a walk command is a JSON object"),
        ([0.1], "expected a JSON object, got array"),
    ],
)
def test_walk_command_is_checked_whole(s2s, body, words):
    before = get(s2s, "/api/status")[1]
    code, err = post(s2s, "/api/walk", body)
    assert code == 400 and err["error"].startswith(words) and err["hint"], err
    after = get(s2s, "/api/status")[1]
    command = [(st["walk"] or {}).get("command") for st in (before, after)]
    assert after["mode"] == before["mode"] and command[1] == command[0]  # nothing applied


def test_walk_command_reaches_both_engines(s2s):
    code, r = post(s2s, "/api/walk", {"vx": 0.1, "yaw_rate": 0.2})
    assert code == 200 and r["mode"] == "walk" and r["command"] == {"vx": 0.1, "vy": 0.0, "yaw_rate": 0.2}
    ls = s2s.app.extensions["sim2sim"]["lockstep"]
    for ro in ls.rollouts.values():  # the same command in each engine's walker
        assert list(ro.mode.controller.cmd) == pytest.approx([0.1, 0.0, 0.2])
    code, r = post(s2s, "/api/walk", {"vx": 0.15, "yaw_rate": 0.0})
    assert code == 200 and r["command"] == {"vx": 0.15, "vy": 0.0, "yaw_rate": 0.0}


# ---------------------------------------------------------------- in Chromium


@pytest.mark.e2e
def test_page_shows_the_footsteps_table_while_walking(s2s, page):
    post(s2s, "/api/mode", {"mode": "stand"})
    post(s2s, "/api/reset")
    page.goto(s2s.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    assert page.inner_text("#steps-state").lower() == "not walking"
    assert page.locator("#steps-rows tr.steps-empty").count() == 1
    page.click("#modes button[data-mode='walk']")
    wait_until(lambda: page.get_attribute("#modes button[data-mode='walk']", "class") == "on", 10)
    wait_until(lambda: page.get_attribute("#walk-pad button[data-walk='forward']", "class") == "on", 10)
    rows = page.locator("#steps-rows tr:not(.steps-empty)")
    wait_until(lambda: rows.count() >= 3, 90)
    assert page.inner_text("#steps-state").lower() == "walking"
    cells = rows.first.locator("td").all_inner_texts()  # the newest step first
    assert len(cells) == 8 and cells[1] in ("left", "right")
    assert all(c != "–" for c in cells[2:7]), cells  # touchdown time, Δt, Δx, Δy, Δxy
    assert finite(float(cells[3]), float(cells[6]))
    assert int(rows.first.locator("td").first.inner_text()) >= 2
    assert page.inner_text("#s-paired") not in ("–", "0") and "/" in page.inner_text("#s-dxy")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sim2sim_walk.png"), full_page=True)
    assert not page.errors, page.errors
