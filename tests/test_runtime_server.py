"""The runtime on the state server, through real HTTP with real servers in threads: arming with a reason
that expires, the policy server killed and brought back (hold, breaker, recovery by itself), the e-stop
that no token gates and its confirmed clear, a fault profile, and the run recorded to MCAP and replayed
to the same final state."""

import json

import jsonschema
import pytest
import requests
from mcap.reader import make_reader

from lab.record import open_recording
from lab.record.replay import replay
from lab.settings import Settings
from lab.web.policy_server import create_policy_app
from lab.web.server import ServerThread
from lab.web.state_server import create_state_app
from tests.conftest import free_port, wait_until

TOKEN = "h15-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def servers(robot, tmp_path_factory):
    """(state server API URL, policy port, results folder): the state server with a token."""
    results = tmp_path_factory.mktemp("runtime_server")
    app = create_state_app(Settings(results_dir=results, token=TOKEN))
    port = free_port()
    with ServerThread(app) as st:
        yield st.url + "/api/v1", st.url, port, results


def runtime(api) -> dict:
    return requests.get(api + "/runtime", timeout=5).json()


def post(api, path, body=None, auth=True):
    return requests.post(api + path, json=body if body is not None else {}, headers=AUTH if auth else {}, timeout=5)


def test_motion_needs_arming_with_a_reason_and_the_token(servers):
    api, _, port, _ = servers
    url = f"http://127.0.0.1:{port}"
    r = post(api, "/runtime/start", {"policy_url": url})
    assert r.status_code == 409 and "not armed" in r.json()["error"] and "/arm" in r.json()["hint"]
    assert post(api, "/arm", {"reason": "test"}, auth=False).status_code == 401
    r = post(api, "/arm", {"reason": "  ", "expires_s": 30})
    assert r.status_code == 400 and r.json()["error"] == "arming needs a reason"
    assert post(api, "/arm", {"reason": "x", "expires_s": 601}).status_code == 400
    r = post(api, "/arm", {"reason": "h15 test run", "expires_s": 0.5})
    assert r.json()["armed"] and r.json()["reason"] == "h15 test run"
    wait_until(lambda: not runtime(api)["arming"]["armed"], 5)  # arming expires by itself
    assert post(api, "/runtime/start", {"policy_url": url}).status_code == 409
    r = post(api, "/runtime/faults", {"profile": "storm"})
    assert r.status_code == 400 and "healthy" in r.json()["hint"]


def test_outage_holds_opens_the_breaker_then_recovers_by_itself_and_is_recorded(servers, robot):
    api, base, port, results = servers
    policy = ServerThread(create_policy_app(robot), port=port)
    policy.__enter__()
    try:
        assert post(api, "/arm", {"reason": "outage story", "expires_s": 120}).status_code == 200
        rec = requests.post(base + "/api/recordings", json={"label": "h15"}, headers=AUTH, timeout=5).json()
        r = post(api, "/runtime/start", {"policy_url": f"http://127.0.0.1:{port}"})
        assert r.status_code == 200, r.text
        wait_until(lambda: runtime(api)["state"] == "streaming" and runtime(api)["phase"] > 0.3, 15)
    finally:
        policy.stop()  # the policy server dies
    s = wait_until(lambda: (s := runtime(api))["state"] == "breaker_open" and s, 15)
    assert s["runtime_state"] == "hold" and s["counts"]["failures"] >= 5
    held_phase = s["phase"]
    policy = ServerThread(create_policy_app(robot), port=port)  # ... and comes back on the same port
    with policy:
        s = wait_until(lambda: (s := runtime(api))["state"] == "streaming" and s, 15)
        assert s["phase"] >= held_phase and s["breaker"] == "closed"
        texts = [e["text"] for e in s["events"]]
        assert "breaker_open" in texts and "breaker_closed" in texts and "hold_released" in texts
        assert any(t.startswith("breaker_rejected") for t in texts)
        post(api, "/runtime/stop", auth=False)
        counts = runtime(api)["counts"]  # the runtime that ran, as it stopped
        rejected = sum(runtime(api)["rejected"].values())
        info = requests.post(base + f"/api/recordings/{rec['id']}/stop", headers=AUTH, timeout=30).json()
    assert info["state"] == "done", info
    path = results / "recordings" / f"{rec['id']}.mcap"
    with open(path, "rb") as f:  # the runtime's own topics: their schemas and messages valid for the mcap reader
        reader = make_reader(f)
        summary = reader.get_summary()
        schemas = {c.topic: summary.schemas.get(c.schema_id) for c in summary.channels.values()}
        assert schemas["/observation"].name == "lab.Observation" and schemas["/action_chunk"].name == "lab.ActionChunk"
        check = {
            t: jsonschema.Draft202012Validator(json.loads(schemas[t].data)) for t in ("/observation", "/action_chunk")
        }
        for schema in check.values():
            schema.check_schema(schema.schema)
        for _, channel, message in reader.iter_messages(topics=list(check)):
            check[channel.topic].validate(json.loads(message.data))
    with open_recording(path) as r:
        kinds = [e.get("kind") for _, e in r.read("/event")]
        assert {"runtime_breaker_open", "runtime_start"} <= set(kinds), set(kinds)
        assert not {"observation", "action_chunk"} & set(kinds)  # those have topics of their own now
        breaker = [e for _, e in r.read("/event") if e["kind"] == "runtime_breaker_rejected"]
        assert breaker and max(e["count"] for e in breaker) > 1  # repeats collapsed
        observations = [m for _, m in r.read("/observation")]
        assert len(observations) == counts["requests"]
        nu = len(observations[0]["q"])
        assert all(len(o["q"]) == len(o["dq"]) == nu and len(o["base"]["quat"]) == 4 for o in observations)
        assert [o["observed_at"] for o in observations] == sorted(o["observed_at"] for o in observations)
        chunks = [m for _, m in r.read("/action_chunk")]
        assert len(chunks) == counts["accepted"] + rejected
        accepted = [c for c in chunks if c["verdict"] == "accepted"]
        assert len(accepted) == counts["accepted"] and all(c["reason"] is None for c in accepted)
        assert all(len(c["actions"]) == 20 and len(c["actions"][0]) == nu for c in accepted)
        sent = {o["observed_at"] for o in observations}
        assert all(c["observed_at"] in sent and c["arrived_at"] > c["observed_at"] for c in chunks)
        assert "/command" in r.topics
        out = replay(r)
    assert out["max_qpos_diff"] == 0.0 and out["steps"] > 1000


def test_the_estop_needs_no_token_and_clears_only_with_confirmation(servers):
    api, _, _, _ = servers
    r = post(api, "/estop", auth=False)
    assert r.status_code == 200 and r.json()["state"] == "estop"
    r = post(api, "/arm", {"reason": "after estop", "expires_s": 30})
    r = post(api, "/runtime/start", {"policy_url": "http://127.0.0.1:9"})
    assert r.status_code == 409 and "e-stop is latched" in r.json()["error"]
    assert post(api, "/estop/clear", {"confirm": True}, auth=False).status_code == 401
    r = post(api, "/estop/clear", {"confirm": "yes"})
    assert r.status_code == 400 and "confirmation" in r.json()["error"] and r.json()["hint"]
    assert runtime(api)["estopped"]
    r = post(api, "/estop/clear", {"confirm": True})
    assert r.status_code == 200 and not r.json()["estopped"]
    r = post(api, "/runtime/faults", {"profile": "congested", "seed": 3})
    assert r.json()["faults"]["profile"] == "congested"
