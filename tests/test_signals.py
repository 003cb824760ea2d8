"""Any signal (lab/web/signals.py): the catalog over HTTP, picks and the stream over a real WS /ws."""

import json
from dataclasses import fields

import pytest
import requests

from lab.control.metrics import Metrics
from lab.robots.model import BUILTIN_URDF
from lab.web.signals import MAX_PICK, METRIC_UNITS, NOT_SIGNALS
from tests.conftest import WsClient, srv_get, wait_until

KNEE = "q/left_knee_joint"


def ws_url(srv):
    return srv.url.replace("http", "ws") + "/ws"


def post(srv, path, body):
    r = requests.post(srv.url + path, json=body, timeout=5)
    assert r.status_code == 200, r.text
    return r.json()


def catalog_names(srv) -> dict:
    """name -> unit of every signal ``GET /api/signals`` offers."""
    cat = srv_get(srv.url, "/api/signals")
    return {s["name"]: s["unit"] for g in cat["groups"] for s in g["signals"]}


class Stream:
    """A WS /ws client that keeps what it was sent by type (frames are acknowledged and dropped)."""

    def __init__(self, srv):
        self.ws = WsClient(ws_url(srv))

    def pick(self, names):
        self.ws.ws.send(json.dumps({"type": "signals", "names": names}))

    def next(self, want, limit: int = 2000, seen=None):
        """The next message whose type is in ``want``; others are counted in ``seen`` (type -> count)."""
        for _ in range(limit):
            msg = self.ws.recv()
            if isinstance(msg, bytes):
                self.ws.ack()
                continue
            if msg["type"] in want:
                return msg
            if seen is not None:
                seen[msg["type"]] = seen.get(msg["type"], 0) + 1
        raise AssertionError(f"no {want} message in {limit} messages")

    def close(self):
        self.ws.close()


@pytest.fixture()
def stream(lab_server):
    s = Stream(lab_server)
    yield s
    s.close()


def test_every_numeric_metrics_field_has_a_unit_and_is_a_signal():
    numeric = [f.name for f in fields(Metrics) if f.name not in NOT_SIGNALS]
    assert sorted(numeric) == sorted(METRIC_UNITS)


def test_catalog_lists_every_joint_base_contact_and_metric_signal_with_units(lab_server):
    robot = srv_get(lab_server.url, "/api/robot")
    names = catalog_names(lab_server)
    for j in (row["name"] for row in robot["joints"]):
        for kind, unit in (("q", "rad"), ("q_target", "rad"), ("qd", "rad/s"), ("tau", "N·m")):
            assert names[f"{kind}/{j}"] == unit
    for p in ("x", "y", "z"):
        assert names[f"base/{p}"] == "m"
        assert names[f"base/v{p}"] == "m/s"
        assert names[f"base/w{p}"] == "rad/s"
    for p in ("roll", "pitch", "yaw"):
        assert names[f"base/{p}"] == "deg"
    for side in ("left", "right"):
        assert names[f"foot/{side}/fz"] == "N"
        assert names[f"foot/{side}/cop_x"] == names[f"foot/{side}/cop_y"] == "m"
    assert names["contact/left_foot_link/fz"] == "N"
    assert names["metric/pelvis_z"] == "m" and names["metric/com_z"] == "m" and names["metric/pitch_deg"] == "deg"
    assert all(names.values()), "every signal has a unit"
    cat = srv_get(lab_server.url, "/api/signals")
    assert cat["count"] == len(names) and cat["max_pick"] == MAX_PICK
    assert {g["id"] for g in cat["groups"]} >= {"q", "q_target", "qd", "tau", "base", "foot", "contact", "metric"}


def test_picked_signals_match_the_joint_table_of_the_same_state(lab_server, stream):
    picked = [KNEE, "q_target/left_knee_joint", "tau/left_knee_joint", "base/z", "metric/pelvis_z"]
    post(lab_server, "/api/pause", {"paused": True})
    try:
        stream.pick(picked)
        ok = stream.next({"signals_picked"})
        assert ok["names"] == picked and ok["units"] == ["rad", "rad", "N·m", "m", "m"]
        msg = stream.next({"signals"})  # paused: one sample of the held state
        table = srv_get(lab_server.url, "/api/robot")
    finally:
        post(lab_server, "/api/pause", {"paused": False})
    assert msg["names"] == picked
    knee = next(row for row in table["joints"] if row["name"] == "left_knee_joint")
    assert msg["t"] == pytest.approx(table["sim_time"], abs=1e-6)
    q, target, tau, base_z, pelvis_z = msg["values"]
    assert q == pytest.approx(knee["q"], abs=1e-6)
    assert target == pytest.approx(knee["target"], abs=1e-6)
    assert tau == pytest.approx(knee["tau"], abs=1e-4)
    assert base_z == pytest.approx(pelvis_z, abs=1e-12)  # one state: the root height two ways


def test_only_picked_signals_stream_and_time_advances(lab_server, stream):
    stream.pick(["foot/left/fz", "foot/right/fz", KNEE])
    stream.next({"signals_picked"})
    times = []
    for _ in range(5):
        msg = stream.next({"signals"})
        assert msg["names"] == ["foot/left/fz", "foot/right/fz", KNEE]
        assert len(msg["values"]) == 3
        times.append(msg["t"])
    assert times == sorted(times) and times[-1] > times[0]
    weight = srv_get(lab_server.url, "/api/status")["model"]["total_mass"] * 9.81
    assert msg["values"][0] + msg["values"][1] == pytest.approx(weight, rel=0.25)  # standing: the feet carry it


def test_a_client_that_picks_nothing_is_sent_no_signals(lab_server, stream):
    seen = {}
    for _ in range(30):  # 30 metrics messages: 1.2 s of stream at 25 Hz
        stream.next({"metrics"}, seen=seen)
    assert "signals" not in seen and "signals_picked" not in seen


def test_bad_picks_get_clear_errors_and_the_previous_pick_streams_on(lab_server, stream):
    stream.pick([KNEE])
    stream.next({"signals_picked"})
    cases = [
        (["q/left_knee"], "unknown signal 'q/left_knee'; did you mean q/left_knee_joint"),
        ("q/left_knee_joint", '"names" must be a list of signal names, got str'),
        ([KNEE, 3], "signal names are strings, got int 3"),
        ([f"q/{j}" for j in catalog_joints(lab_server)][: MAX_PICK + 1], f"at most {MAX_PICK} stream at once"),
    ]
    for names, expected in cases:
        stream.pick(names)
        err = stream.next({"error"})
        assert err["about"] == "signals" and expected in err["error"], err
        assert "GET /api/signals" in err["hint"] or "fewer" in err["hint"]
    stream.ws.ws.send('{"type": "signals", "names": [], "rate": 100}')
    err = stream.next({"error"})
    assert "unknown field(s) in a signals pick: rate" in err["error"]
    for _ in range(3):
        msg = stream.next({"signals"})
        assert msg["names"] == [KNEE]


def test_an_empty_pick_stops_the_stream_and_a_repeat_is_kept_once(lab_server, stream):
    stream.pick([KNEE, KNEE, "base/yaw"])
    assert stream.next({"signals_picked"})["names"] == [KNEE, "base/yaw"]
    assert stream.next({"signals"})["names"] == [KNEE, "base/yaw"]
    stream.pick([])
    assert stream.next({"signals_picked"})["names"] == []
    seen = {}
    for _ in range(30):
        stream.next({"metrics"}, seen=seen)
    assert "signals" not in seen


def test_a_reset_sends_time_back_to_zero(lab_server, stream):
    stream.pick(["base/x"])
    stream.next({"signals_picked"})
    before = stream.next({"signals"})["t"]
    while before < 0.5:
        before = stream.next({"signals"})["t"]
    post(lab_server, "/api/reset", {})
    for _ in range(200):  # samples sent before the reset may still be on their way
        t = stream.next({"signals"})["t"]
        if t < before:
            break
    assert t < 0.5


def catalog_joints(srv) -> list:
    return [row["name"] for row in srv_get(srv.url, "/api/robot")["joints"]]


@pytest.fixture()
def two_models(tmp_path):
    """A Lab whose models folder holds the Q1 with its head joint renamed ``neck_yaw_joint``."""
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    folder = tmp_path / "models" / "neck"
    folder.mkdir(parents=True)
    (folder / "robot.urdf").write_text(BUILTIN_URDF.read_text().replace("head_yaw_joint", "neck_yaw_joint"))
    app = create_lab_app(remote_url="", models_dir=tmp_path / "models", results_dir=tmp_path / "results")
    with ServerThread(app) as srv:
        wait_until(lambda: srv_get(srv.url, "/api/metrics")["sim_time"] > 0.05, 10)
        yield srv


def test_after_a_model_switch_a_pick_streams_on_and_names_the_new_model_lacks_are_dropped(two_models):
    s = Stream(two_models)
    try:
        s.pick([KNEE, "q/head_yaw_joint"])
        s.next({"signals_picked"})
        s.next({"signals"})
        r = requests.post(two_models.url + "/api/model", json={"id": "neck/robot.urdf"}, timeout=60)
        assert r.status_code == 200, r.text
        ok = s.next({"signals_picked"})
        assert ok["names"] == [KNEE] and ok["dropped"] == ["q/head_yaw_joint"]
        assert s.next({"signals"})["names"] == [KNEE]
    finally:
        s.close()
    names = catalog_names(two_models)
    assert "q/neck_yaw_joint" in names and "q/head_yaw_joint" not in names
