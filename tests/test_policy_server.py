"""The policy server through real HTTP: a chunk stamped with the observation's time, the model identity and
a chunk id; the same observation answered the same; every bad observation a 400 with error and hint; and
``python app.py policy-server`` as a real process."""

import subprocess
import sys

import pytest
import requests

from lab.remote.policy import HORIZON
from lab.web.policy_server import create_policy_app
from lab.web.server import ServerThread
from tests.conftest import ROOT, free_port, wait_until


@pytest.fixture(scope="module")
def policy(robot):
    with ServerThread(create_policy_app(robot)) as srv:
        yield srv.url


def observation(robot, **changes) -> dict:
    nu = len(robot.joint_names)
    obs = {"observed_at": 3.25, "phase": 0.5, "model": {"sha256": robot.identity}, "q": [0.0] * nu, "dq": [0.0] * nu}
    obs.update(changes)
    return {k: v for k, v in obs.items() if v is not None}


def test_predict_answers_a_stamped_chunk_of_joint_targets_the_same_for_the_same_observation(policy, robot):
    r = requests.post(policy + "/predict", json=observation(robot), timeout=5)
    assert r.status_code == 200
    chunk = r.json()
    assert chunk["observed_at"] == 3.25 and chunk["phase"] == 0.5 and chunk["dt"] == 0.02
    assert chunk["model"]["sha256"] == robot.identity and len(chunk["chunk_id"]) == 12
    assert len(chunk["actions"]) == HORIZON and all(len(a) == len(robot.joint_names) for a in chunk["actions"])
    knee = robot.joint_names.index("left_knee_joint")
    assert chunk["actions"][-1][knee] > chunk["actions"][0][knee] > robot.q_nominal[knee]  # squatting down
    again = requests.post(policy + "/predict", json=observation(robot), timeout=5).json()
    assert again == chunk
    late = requests.post(policy + "/predict", json=observation(robot, phase=9.0, horizon=5), timeout=5).json()
    assert len(late["actions"]) == 5 and late["actions"][0] == pytest.approx(robot.q_nominal.tolist())  # then stand
    assert late["chunk_id"] != chunk["chunk_id"]
    health = requests.get(policy + "/health", timeout=5).json()
    assert health["model"]["sha256"] == robot.identity and health["task"]["duration_s"] == 2.0


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"phase": None}, "observation lacks 'phase'"),
        ({"observed_at": "soon"}, "observed_at must be a finite number"),
        ({"phase": -1}, "phase -1 is negative"),
        ({"model": {"sha256": "ab" * 32}}, "observation is of model abababababab"),
        ({"model": None}, "lacks the model identity"),
        ({"q": [0.0] * 3}, "q must be a list of 22 numbers, got 3 values"),
        ({"horizon": 500}, "horizon 500 is not an integer in 1..100"),
    ],
)
def test_predict_rejects_a_bad_observation_with_400_error_and_hint(policy, robot, changes, words):
    r = requests.post(policy + "/predict", json=observation(robot, **changes), timeout=5)
    assert r.status_code == 400
    body = r.json()
    assert words in body["error"] and body["hint"]


def test_predict_rejects_nan_and_a_non_object(policy):
    r = requests.post(policy + "/predict", data='{"observed_at": NaN}', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["hint"]
    r = requests.post(policy + "/predict", json=[1, 2], timeout=5)
    assert r.status_code == 400 and "JSON object" in r.json()["error"]


def test_app_py_policy_server_serves_on_its_port():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "app.py"), "policy-server", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        health = wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/health", timeout=2).json(), 30)
        assert health["service"] == "policy-server" and health["horizon"] == 20
    finally:
        proc.terminate()
        proc.wait(10)
