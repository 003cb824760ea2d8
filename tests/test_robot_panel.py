"""The robot panel's API against a real Lab server thread: the joint table, live gains and nominal pose,
the sidecar export (round trip through the config loader) and the pose mode."""

import json
import shutil

import numpy as np
import pytest
import requests

from lab.control.pose import Pose
from lab.robots.config import load_config
from lab.robots.model import BUILTIN_URDF, load_robot
from lab.settings import Settings
from tests.conftest import wait_until

TOKEN = "s3cret"


def make_app(tmp_path_factory, **overrides):
    from lab.web import create_lab_app

    settings = Settings(remote_url="", results_dir=tmp_path_factory.mktemp("results"), **overrides)
    return create_lab_app(settings)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    from lab.web.server import ServerThread

    with ServerThread(make_app(tmp_path_factory)) as s:
        wait_until(lambda: get(s, "/api/metrics")[1]["sim_time"] > 0.05, 10)
        yield s


@pytest.fixture()
def lab(srv):
    """The server's robot and session; afterwards back to stand with the robot's original gains and pose."""
    c = srv.app.extensions["lab"]
    robot, session = c["robot"], c["session"]
    kp, kd, q0 = robot.kp.copy(), robot.kd.copy(), robot.q_nominal.copy()
    yield robot, session
    session.set_gains(kp, kd)
    session.set_nominal(q0)
    session.set_mode("stand")


def get(srv, path):
    r = requests.get(srv.url + path, timeout=5)
    return r.status_code, r.json()


def post(srv, path, body, headers=None):
    r = requests.post(srv.url + path, json=body, timeout=5, headers=headers or {})
    return r.status_code, r.json()


def sim_time(srv) -> float:
    return get(srv, "/api/metrics")[1]["sim_time"]


def test_get_robot_lists_every_joint_in_actuator_order_with_gains_range_and_live_state(srv, lab):
    robot, _ = lab
    code, r = get(srv, "/api/robot")
    assert code == 200
    assert (r["file"], r["kind"], r["nu"], r["mode"]) == ("q1.urdf", "urdf", 22, "stand")
    assert r["total_mass"] == pytest.approx(robot.total_mass, abs=1e-3)
    assert r["standing_height"] == pytest.approx(robot.standing_height, abs=1e-3)
    assert r["gains_source"] == "names"
    joints = r["joints"]
    assert [j["name"] for j in joints] == robot.joint_names
    assert [j["actuator"] for j in joints] == robot.actuator_names
    assert [j["kp"] for j in joints] == robot.kp.tolist()
    assert [j["kd"] for j in joints] == robot.kd.tolist()
    assert [j["nominal"] for j in joints] == robot.q_nominal.tolist()
    assert [j["tau_limit"] for j in joints] == robot.tau_limit.tolist()
    knee = joints[robot.joint_names.index("left_knee_joint")]
    assert (knee["lower"], knee["upper"]) == (-0.05, 2.4)
    for j in joints:
        assert j["error"] == pytest.approx(j["target"] - j["q"], abs=2e-6)
        assert abs(j["error"]) < 0.1  # standing: every joint near its target
        assert abs(j["tau"]) <= j["tau_limit"] and j["saturated"] is (abs(j["tau"]) >= 0.999 * j["tau_limit"])


def test_gains_source_and_gain_notes_of_the_robot_are_shown(srv, lab):
    robot, _ = lab
    robot.gain_method = "inertia"
    robot.gain_notes = [f"note {i}" for i in range(len(robot.joint_names))]
    try:
        r = get(srv, "/api/robot")[1]
    finally:
        del robot.gain_method, robot.gain_notes
    assert r["gains_source"] == "inertia"
    assert [j["gain_note"] for j in r["joints"]][:2] == ["note 0", "note 1"]


def test_posted_gains_change_what_the_controller_uses_live_and_survive_a_reset(srv, lab):
    robot, session = lab
    i = robot.joint_names.index("left_knee_joint")
    t0 = sim_time(srv)
    code, r = post(srv, "/api/robot", {"gains": {"left_knee_joint": [180.5, 9.25]}})
    assert code == 200
    assert (r["joints"][i]["kp"], r["joints"][i]["kd"]) == (180.5, 9.25)
    assert (session.rollout.gains.kp[i], session.rollout.gains.kd[i]) == (180.5, 9.25)
    assert (robot.kp[i], robot.kd[i]) == (180.5, 9.25)
    assert session.rollout.gains.kp[0] == 150.0  # the other joints keep theirs
    wait_until(lambda: sim_time(srv) > t0 + 0.1, 5)  # never restarted: time goes on
    assert get(srv, "/api/status")[1]["sim"]["state"] == "running"
    assert post(srv, "/api/reset", None)[0] == 200
    assert session.rollout.gains.kp[i] == 180.5
    assert get(srv, "/api/robot")[1]["joints"][i]["kp"] == 180.5


def test_a_new_nominal_is_what_stand_holds(srv, lab):
    robot, session = lab
    i = robot.joint_names.index("left_elbow_joint")
    code, r = post(srv, "/api/robot", {"nominal": {"left_elbow_joint": -1.0}})
    assert code == 200 and r["joints"][i]["nominal"] == -1.0 and robot.q_nominal[i] == -1.0
    wait_until(lambda: get(srv, "/api/robot")[1]["joints"][i]["target"] == -1.0, 5)
    assert session.mode_name == "stand"


@pytest.mark.parametrize(
    ("body", "error", "hint"),
    [
        (
            {"gains": {"left_kne_joint": [1, 2]}},
            "unknown joint 'left_kne_joint'",
            "actuated joints: left_hip_pitch_joint",
        ),
        (
            {"gains": {"left_knee_joint": [-1, 2]}},
            "kp of left_knee_joint: value -1 is outside [0, 100000]",
            "[0, 100000]",
        ),
        ({"gains": {"left_knee_joint": [1, 2e6]}}, "kd of left_knee_joint: value 2e+06 is outside [0, 100000]", "in"),
        (
            {"gains": {"left_knee_joint": ["1", 2]}},
            "kp of left_knee_joint: expected a finite number, got '1'",
            "number",
        ),
        ({"gains": {"left_knee_joint": [1]}}, "gains of left_knee_joint: expected [kp, kd], got a list of 1", "kp"),
        ({"gains": {"left_knee_joint": True}}, "gains of left_knee_joint: expected [kp, kd], got bool", "kp"),
        (
            {"nominal": {"left_knee_joint": 2.5}},
            "value 2.5 is outside joint left_knee_joint range [-0.05, 2.4]",
            "[-0.05",
        ),
        (
            {"nominal": {"left_knee_joint": None}},
            "nominal of left_knee_joint: expected a finite number, got None",
            "num",
        ),
        ({"nominal": []}, "'nominal' must be a non-empty object of joint name -> angle [rad]", "e.g."),
        ({"gain": {}}, "unknown field 'gain'", "accepted: gains, nominal"),
        ({}, "nothing to change", "gains"),
        # a valid change beside a bad one: nothing of it is applied
        ({"gains": {"left_knee_joint": [99, 9]}, "nominal": {"left_hip_pitch_joint": 9}}, "value 9 is outside", "rad"),
    ],
)
def test_bad_robot_changes_are_a_400_with_error_and_hint_and_change_nothing(srv, lab, body, error, hint):
    robot, session = lab
    kp, kd, q0, gains = robot.kp.copy(), robot.kd.copy(), robot.q_nominal.copy(), session.rollout.gains
    code, r = post(srv, "/api/robot", body)
    assert code == 400
    assert r["error"].startswith(error) and hint in r["hint"]
    assert session.rollout.gains is gains
    assert np.array_equal(robot.kp, kp) and np.array_equal(robot.kd, kd) and np.array_equal(robot.q_nominal, q0)


def test_nan_in_a_body_is_refused_before_it_reaches_the_gains(srv, lab):
    _, session = lab
    gains = session.rollout.gains
    r = requests.post(
        srv.url + "/api/robot",
        data='{"gains": {"left_knee_joint": [NaN, 1]}}',
        headers={"Content-Type": "application/json"},
        timeout=5,
    )
    assert r.status_code == 400 and "not a finite number" in r.json()["error"]
    assert session.rollout.gains is gains


def test_pose_targets_are_refused_outside_pose_mode_with_a_hint(srv, lab):
    code, r = post(srv, "/api/pose", {"q": {"left_elbow_joint": -1.2}})
    assert code == 409
    assert r["error"] == "joint targets are set only in pose mode; the mode is stand"
    assert '"mode": "pose"' in r["hint"]


def test_pose_mode_moves_a_joint_to_its_slider_target(srv, lab):
    robot, _ = lab
    i = robot.joint_names.index("left_elbow_joint")
    assert post(srv, "/api/mode", {"mode": "pose"})[0] == 200
    r = get(srv, "/api/robot")[1]
    assert r["mode"] == "pose" and r["joints"][i]["target"] == pytest.approx(robot.q_nominal[i])
    code, bad = post(srv, "/api/pose", {"q": {"left_elbow_joint": 0.5}})
    assert code == 400 and bad["error"] == "value 0.5 is outside joint left_elbow_joint range [-2.3, 0.2]"
    code, held = post(srv, "/api/pose", {"q": {"left_elbow_joint": -1.2}})
    assert code == 200 and held["targets"]["left_elbow_joint"] == -1.2
    assert held["targets"]["right_elbow_joint"] == pytest.approx(robot.q_nominal[i + 4])  # the others hold
    t0 = sim_time(srv)

    def reached():
        j = get(srv, "/api/robot")[1]["joints"][i]
        assert sim_time(srv) < t0 + 1.5, f"after 1.5 s of simulation q = {j['q']}"
        return abs(j["q"] - (-1.2)) < 0.05

    wait_until(reached, 10)


def test_pose_hands_out_a_new_target_array_for_each_change(robot):
    mode = Pose(robot)
    first = mode.command(0.0).q_target
    assert np.array_equal(first, robot.q_nominal)
    mode.set_targets({16: -1.0})
    second = mode.command(0.1).q_target
    assert second is not first and second[16] == -1.0 and first[16] == robot.q_nominal[16]


def test_the_sidecar_export_loads_back_through_the_config_loader(srv, lab, tmp_path):
    robot, _ = lab
    gains = {"left_knee_joint": [175.0, 11.5], "head_yaw_joint": [12.25, 0.75]}
    assert post(srv, "/api/robot", {"gains": gains, "nominal": {"left_elbow_joint": -0.8}})[0] == 200
    r = requests.get(srv.url + "/api/robot/sidecar", timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    assert r.headers["Content-Disposition"] == 'attachment; filename="q1.urdf.lab.json"'
    doc = r.json()
    assert doc["gains"]["^left_knee_joint$"] == [175.0, 11.5]
    model = tmp_path / "q1.urdf"  # a copy of the model: a --model file reads its sidecar
    shutil.copy(BUILTIN_URDF, model)
    (tmp_path / "q1.urdf.lab.json").write_bytes(r.content)
    config = load_config(model, builtin=False)
    for i, name in enumerate(robot.joint_names):
        assert config.gains_for(name) == (robot.kp[i], robot.kd[i])
        assert config.nominal_for(name) == robot.q_nominal[i]
    again = load_robot(model)
    assert np.array_equal(again.kp, robot.kp) and np.array_equal(again.kd, robot.kd)
    assert np.array_equal(again.q_nominal, robot.q_nominal)
    assert json.loads(r.text) == doc


@pytest.fixture(scope="module")
def token_srv(tmp_path_factory):
    from lab.web.server import ServerThread

    with ServerThread(make_app(tmp_path_factory, token=TOKEN)) as s:
        yield s


def test_robot_changes_and_pose_targets_need_the_token_but_reading_does_not(token_srv):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert get(token_srv, "/api/robot")[0] == 200
    assert requests.get(token_srv.url + "/api/robot/sidecar", timeout=5).status_code == 200
    code, r = post(token_srv, "/api/robot", {"gains": {"left_knee_joint": [100, 5]}})
    assert code == 401 and "bearer token" in r["error"] and r["hint"]
    assert get(token_srv, "/api/robot")[1]["joints"][3]["kp"] == 150.0
    assert post(token_srv, "/api/pose", {"q": {"left_elbow_joint": -1.0}})[0] == 401
    code, r = post(token_srv, "/api/robot", {"gains": {"left_knee_joint": [100, 5]}}, headers=auth)
    assert code == 200 and r["joints"][3]["kp"] == 100.0
    assert (
        post(token_srv, "/api/pose", {"q": {"left_elbow_joint": -1.0}}, headers={"Authorization": "Bearer x"})[0] == 401
    )
