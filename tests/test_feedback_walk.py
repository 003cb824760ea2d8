"""The feedback walker on the real model: it walks, stops, turns, side-steps and steps where a push sends it,
in MuJoCo and PyBullet; the joint-PD baseline still falls; the Lab's velocity command over real HTTP."""

import math

import numpy as np
import pytest
import requests

from lab.walking.dcm import FeedbackParams, FeedbackWalker, clamp_to_polygon, hull
from lab.walking.feedback_run import run_feedback_walk
from tests.conftest import wait_until


def test_feedback_walk_takes_20_steps_without_falling_and_stands_on_stop(robot, tmp_path):
    s = run_feedback_walk(robot, vx=0.15, steps=20, out_dir=tmp_path)
    assert not s["fell"] and s["stable"]
    assert s["steps_completed"] >= 20
    assert s["mean_speed_mps"] > 0.12  # it walks forward (the 0.15 m/s figure is 06_feedback_walk.py's)
    assert s["stands_at_end"] and s["stood_after_s"] is not None  # the zero command stops it: it stands
    assert s["max_pitch_deg"] < 15 and s["max_roll_deg"] < 15
    for f in ("summary.json", "walk_trace.csv", "walk_curves.png"):
        assert (tmp_path / f).stat().st_size > 0
    # footholds land where the walker meant them to (the joint PD follows the plan closely)
    miss = [math.dist(t["planned_m"], t["landed_m"]) for t in s["touchdowns"]]
    assert np.median(miss) < 0.03


def test_pd_walk_baseline_still_falls(robot):
    from lab.walking.run import run_walk

    s = run_walk(step_len=0.04, step_height=0.035, steps=6, robot=robot)
    assert s["fell"] and s["fall_time_s"] < 4.0  # the reference result: sideways at ~2.6 s


def test_turns_90_degrees_on_the_spot(robot):
    s = run_feedback_walk(robot, vx=0.0, yaw_rate=0.5, steps=60, turn_to_deg=90.0)
    assert not s["fell"] and s["stands_at_end"]
    assert 80.0 <= s["heading_change_deg"] <= 100.0
    assert s["distance_m"] < 0.12  # on the spot


def test_side_steps_left(robot):
    s = run_feedback_walk(robot, vx=0.0, vy=0.05, steps=8)
    assert not s["fell"] and s["stands_at_end"]
    lat = [t["landed_m"][1] for t in s["touchdowns"]]
    assert (lat[-1] + lat[-2]) / 2 - (lat[0] + lat[1]) / 2 > 0.08  # the feet's midpoint moved left
    assert abs(s["heading_change_deg"]) < 10


def test_a_lateral_push_that_saturates_the_zmp_moves_the_next_footstep(robot):
    calm = run_feedback_walk(robot, vx=0.15, steps=10)
    pushed = run_feedback_walk(
        robot, vx=0.15, steps=10, push={"t_s": 2.8, "fx_n": 0.0, "fy_n": -20.0, "duration_s": 0.1}
    )
    assert not pushed["fell"]
    largest = {
        n: max(math.hypot(*t["adjust_m"]) for t in s["touchdowns"]) for n, s in (("calm", calm), ("pushed", pushed))
    }
    assert largest["calm"] < 0.01  # walking undisturbed, the footholds are the nominal ones
    assert largest["pushed"] > 0.015  # the push moved a foothold toward where the DCM went
    after = [t for t in pushed["touchdowns"] if 2.8 <= t["t_s"] <= 4.0]
    assert any(t["adjust_m"][1] < -0.01 for t in after)  # ... to the right, the way it was pushed
    assert pushed["saturated_fraction"] > calm["saturated_fraction"]


def test_the_hip_strategy_catches_a_push_toward_the_stance_foot_that_the_ankles_alone_do_not(robot):
    # 27 N for 0.1 s to the left just as the left foot's single support begins (3 s of walking at 0.15 m/s):
    # the DCM goes over the stance foot's outer edge, where no step inside the reach box can catch it
    push = {"t_s": 4.0, "fx_n": 0.0, "fy_n": 27.0, "duration_s": 0.1}
    kw = {"vx": 0.15, "steps": 14, "push": push, "stand_s": 1.0, "settle_s": 7.1, "max_s": 7.1}
    ankles = run_feedback_walk(robot, params=FeedbackParams(hip_gain=0.0), **kw)
    hip = run_feedback_walk(robot, **kw)
    assert ankles["fell"]
    assert not hip["fell"] and hip["max_roll_deg"] > 10.0  # it leaned into the push and walked on


def test_pybullet_walks_20_steps_with_the_same_walker(robot):
    s = run_feedback_walk(robot, engine="pybullet", vx=0.15, steps=20)
    assert s["engine"] == "pybullet"
    assert not s["fell"] and s["steps_completed"] >= 20 and s["mean_speed_mps"] > 0.12


def test_standing_capture_step_catches_a_push_that_ankle_feedback_alone_does_not(robot):
    push = {"t_s": 1.0, "fx_n": 50.0, "fy_n": 0.0, "duration_s": 0.1}
    ankle = run_feedback_walk(robot, vx=0.0, steps=0, params=FeedbackParams(capture_step=False), push=push)
    step = run_feedback_walk(robot, vx=0.0, steps=0, params=FeedbackParams(capture_step=True), push=push)
    assert ankle["fell"] and ankle["captures"] == 0
    assert not step["fell"] and step["captures"] == 1 and step["steps_completed"] >= 1


def test_a_capture_step_lifted_higher_catches_a_forward_push_the_walking_swing_height_does_not(robot):
    push = {"t_s": 1.0, "fx_n": 58.0, "fy_n": 0.0, "duration_s": 0.1}  # 5.8 N s, above the old 5.39 N s threshold
    low = run_feedback_walk(robot, vx=0.0, steps=0, params=FeedbackParams(capture_height=0.03), push=push)
    high = run_feedback_walk(robot, vx=0.0, steps=0, push=push)
    assert low["fell"] and low["captures"] == 1  # it stepped, but the swing foot scuffed and landed short
    assert not high["fell"] and high["captures"] == 1


def test_command_is_bounded_and_polygon_clamp_projects_onto_the_edge(robot):
    w = FeedbackWalker(robot)
    assert tuple(w.set_command(9.0, -9.0, 9.0)) == (w.params.vx_max, -w.params.vy_max, w.params.yaw_rate_max)
    sq = hull(np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]]))
    assert len(sq) == 4
    p, cut = clamp_to_polygon(np.array([0.5, 0.5]), sq)
    assert not cut and np.allclose(p, [0.5, 0.5])
    p, cut = clamp_to_polygon(np.array([2.0, 0.5]), sq)
    assert cut and np.allclose(p, [1.0, 0.5])


# ---------------------------------------------------------------- the Lab's velocity command over HTTP


def post(srv, path, body):
    r = requests.post(srv.url + path, json=body, timeout=10)
    return r.status_code, r.json()


def test_walk_api_selects_walk_and_replans_from_the_command(lab_server):
    srv = lab_server
    assert requests.post(srv.url + "/api/mode", json={"mode": "stand"}, timeout=10).status_code == 200
    assert requests.get(srv.url + "/api/walk", timeout=5).json()["walking"] is False
    code, body = post(srv, "/api/walk", {"vx": 0.1})
    assert code == 200 and body["mode"] == "walk" and body["command"] == {"vx": 0.1, "vy": 0.0, "yaw_rate": 0.0}
    # the walker steps under the command and reports its state in every sample
    state = wait_until(lambda: (s := requests.get(srv.url + "/api/walk", timeout=5).json())["steps"] >= 3 and s, 30)
    assert state["walking"] and state["command"]["vx"] == 0.1
    ex = requests.get(srv.url + "/api/metrics", timeout=5).json()["extras"]
    for k in ("dcm_x", "dcm_y", "zmp_cmd_x", "zmp_cmd_y", "zmp_plan_x", "phase", "step", "saturated"):
        assert isinstance(ex[k], (int, float)) and math.isfinite(ex[k]), k
    assert ex["controller"] == "feedback" and len(ex["polygon"]) >= 3 and ex["footsteps"]
    # missing fields keep their value; the footholds follow the new command from the next step
    code, body = post(srv, "/api/walk", {"yaw_rate": 0.4})
    assert code == 200 and body["command"] == {"vx": 0.1, "vy": 0.0, "yaw_rate": 0.4}
    code, body = post(srv, "/api/walk", {"vx": 0.0, "yaw_rate": 0.0})
    assert code == 200 and body["command"] == {"vx": 0.0, "vy": 0.0, "yaw_rate": 0.0}
    wait_until(lambda: requests.get(srv.url + "/api/walk", timeout=5).json().get("phase") == "stand", 30)
    assert requests.get(srv.url + "/api/status", timeout=5).json()["fall_time"] is None


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"vx": 0.5}, "beyond the walker's bound"),
        ({"vy": "fast"}, "must be a finite number"),
        ({"vx": True}, "must be a finite number"),
        ({"speed": 0.1}, "unknown walk field"),
        ({}, "a walk command is a JSON object"),
        ([0.1, 0, 0], "expected a JSON object"),
    ],
)
def test_walk_api_refuses_bad_commands_and_keeps_the_one_held(lab_server, body, fragment):
    srv = lab_server
    before = requests.get(srv.url + "/api/status", timeout=5).json()["mode"]
    code, err = post(srv, "/api/walk", body)
    assert code == 400 and fragment in err["error"] and err["hint"]
    assert requests.get(srv.url + "/api/status", timeout=5).json()["mode"] == before  # nothing applied
    assert requests.get(srv.url + "/api/metrics", timeout=5).json()["sim_time"] > 0  # the simulation runs on
