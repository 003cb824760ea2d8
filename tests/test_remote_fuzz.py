"""Fuzz the control endpoint of a real state server process with 600+ malformed or random bodies:
every answer is a JSON 4xx, nothing is accepted, and the simulation keeps advancing."""

import json
import math
import random
import subprocess

import pytest
import requests

from lab.remote.cli import spawn_state_server
from lab.remote.client import wait_ready
from tests.conftest import free_port

ELBOW = "motor_left_elbow"
N_RANDOM = 560
WEIRD = [
    None,
    True,
    False,
    "",
    "2.0",
    "\u00e9\u2603\U0001f916",
    [],
    [2.0],
    {},
    {"v": 1},
    0,
    -1,
    2.5,
    -3.0,
    1e308,
    -1e308,
    10**300,
    -(10**300),
    "NaN",
]


def nonfinite_literal(rng) -> str:
    return rng.choice(["NaN", "Infinity", "-Infinity", "1e309", "-1e400"])


def bad_value(rng):
    """A value that breaks a rule: wrong type, outside the demo limit, or outside the ctrlrange."""
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice([w for w in WEIRD if not isinstance(w, (int, float)) or isinstance(w, bool)])
    if kind == 1:
        return rng.choice([-1, 1]) * rng.uniform(2.0001, 22.0)
    if kind == 2:
        return rng.choice([-1, 1]) * 10 ** rng.uniform(1.4, 300)
    return rng.choice([-1, 1]) * rng.randrange(3, 10**6)


def bad_duration(rng):
    kind = rng.randrange(3)
    if kind == 0:
        return rng.choice([w for w in WEIRD if not isinstance(w, (int, float)) or isinstance(w, bool)])
    if kind == 1:
        return -rng.uniform(0, 100) if rng.random() < 0.5 else 0
    return rng.uniform(0.2501, 1e6)


def random_bodies(rng, n):
    """(description, bytes) pairs, each a control body the server must refuse."""
    good = {"actuator": ELBOW, "value": 1.0, "duration_s": 0.1}
    out = []
    for i in range(n):
        kind = i % 12
        body = dict(good)
        if kind == 0:  # wrong actuator: type or name
            body["actuator"] = rng.choice(
                [*WEIRD, "motor_right_knee", "motor_left_elbo", "MOTOR_LEFT_ELBOW", " motor_left_elbow"]
            )
        elif kind == 1:
            body["value"] = bad_value(rng)
        elif kind == 2:
            body["duration_s"] = bad_duration(rng)
        elif kind == 3:  # missing fields
            for k in rng.sample(list(good), rng.randrange(1, 4)):
                del body[k]
        elif kind == 4:  # extra fields
            body[rng.choice(["force", "actuators", "Value", "", "duration", "__proto__"])] = rng.choice(WEIRD)
        elif kind == 5:  # NaN / inf literals Python's json would write
            text = json.dumps(body).replace("1.0", nonfinite_literal(rng), 1)
            out.append(("nonfinite literal", text.encode()))
            continue
        elif kind == 6:  # invalid JSON
            text = json.dumps(good)
            cut = rng.randrange(0, len(text))
            choice = rng.randrange(4)
            bad = [text[:cut], text.replace('"', "'"), text[:-1] + ",}", "".join(rng.sample(text, len(text)))][choice]
            out.append(("invalid json", bad.encode()))
            continue
        elif kind == 7:  # not an object
            out.append(("not an object", json.dumps(rng.choice([[good], 1, "x", None, True, [], 2.0])).encode()))
            continue
        elif kind == 8:  # random bytes
            out.append(("random bytes", bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))))
            continue
        elif kind == 9:  # everything wrong at once
            body = {k: rng.choice(WEIRD) for k in rng.sample([*good, "x", "y"], rng.randrange(0, 5))}
            if body == good:
                body["x"] = 1
        elif kind == 10:  # huge numbers as literals
            digits = rng.randrange(20, 4000)
            out.append(
                ("huge integer", f'{{"actuator": "{ELBOW}", "value": 9{"9" * digits}, "duration_s": 0.1}}'.encode())
            )
            continue
        else:  # wrong value and wrong duration together
            body["value"], body["duration_s"] = bad_value(rng), bad_duration(rng)
        out.append((f"mutation {kind}", json.dumps(body).encode()))
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    proc = spawn_state_server(port, log_path=tmp_path_factory.mktemp("fuzz") / "server.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, timeout=30, proc=proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_600_malformed_control_bodies_all_get_json_4xx_and_the_simulation_keeps_advancing(server):
    rng = random.Random(20240605)
    bodies = random_bodies(rng, N_RANDOM)
    bodies += [
        ("1 MB body", b'{"actuator": "' + b"a" * (1 << 20) + b'"}'),
        ("1 MB of zeros", b"\0" * (1 << 20)),
        ("empty body", b""),
        ("deeply nested", b"[" * 3000 + b"]" * 3000),
        ("nested object", json.dumps({"actuator": {"actuator": ELBOW}, "value": 1, "duration_s": 0.1}).encode()),
        ("bool as value", b'{"actuator": "motor_left_elbow", "value": true, "duration_s": 0.1}'),
        ("duration exactly 0", b'{"actuator": "motor_left_elbow", "value": 1, "duration_s": 0}'),
        ("value just over demo", b'{"actuator": "motor_left_elbow", "value": 2.0000001, "duration_s": 0.1}'),
        ("negative infinity", b'{"actuator": "motor_left_elbow", "value": -Infinity, "duration_s": 0.1}'),
        ("utf-16 body", json.dumps({"actuator": ELBOW, "value": 1, "duration_s": 0.1}).encode("utf-16")),
    ]
    assert len(bodies) >= 500
    session = requests.Session()
    before = session.get(server + "/api/v1/state", timeout=5).json()
    statuses = {}
    for i, (what, data) in enumerate(bodies):
        ctype = "text/plain" if i % 7 == 3 else "application/json"  # (was len(statuses) % 7: never 3)
        r = session.post(server + "/api/v1/control", data=data, headers={"Content-Type": ctype}, timeout=10)
        assert 400 <= r.status_code < 500, f"{what}: HTTP {r.status_code} for {data[:80]!r}: {r.text[:200]}"
        body = r.json()
        assert isinstance(body.get("error"), str) and body["error"], f"{what}: {body}"
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
    after = session.get(server + "/api/v1/state", timeout=5).json()
    health = session.get(server + "/api/v1/health", timeout=5).json()
    assert after["server_instance_id"] == before["server_instance_id"]
    assert after["sequence"] > before["sequence"] and after["simulation_time"] > before["simulation_time"]
    assert after["active_control"] is None and after["last_control"] is None  # nothing was ever accepted
    assert health["status"] == "ok" and all(math.isfinite(x) for x in after["qpos"])
    # every 7th body goes as text/plain: 415 before it is read (lab/web/common.py guards every service)
    assert set(statuses) <= {400, 413, 415} and statuses.get(415), statuses
