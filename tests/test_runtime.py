"""The runtime on the virtual clock, with the real policy answering over real HTTP: each chunk checked once
and rejected whole by reason, staleness from ``observed_at``, order, the e-stop latch and its confirmed
clear, the congested link's story (the adaptive lead cuts time in hold), and the sweep bit for bit."""

import math

import numpy as np
import pytest
import requests

from experiments.latency_sweep import sweep
from lab.remote.clock import VirtualClock
from lab.remote.episode import ablated, run_episode
from lab.remote.faults import FaultProfile, Link, get_profile
from lab.remote.runtime import ESTOP, HOLD, STREAMING, Runtime
from lab.remote.transport import VirtualTransport
from lab.web.policy_server import create_policy_app
from lab.web.server import ServerThread


@pytest.fixture(scope="module")
def predict(robot):
    """The real policy server's ``POST /predict`` as a function (the virtual transport calls it)."""
    with ServerThread(create_policy_app(robot)) as srv, requests.Session() as s:
        yield lambda obs: s.post(srv.url + "/predict", json=obs, timeout=5).json()


def still(robot) -> dict:
    nu = len(robot.joint_names)
    return {"q": robot.q_nominal.tolist(), "dq": [0.0] * nu}


def drive(runtime: Runtime, clock: VirtualClock, robot, seconds: float) -> None:
    """Tick ``runtime`` every 20 ms of virtual time for ``seconds``."""
    t0 = clock.now()
    for k in range(1, int(round(seconds / 0.02)) + 1):
        clock.advance_to(t0 + k * 0.02)
        runtime.tick(clock.now(), lambda: still(robot))


def make(robot, predict, profile="healthy", seed=0):
    """A runtime on a virtual clock whose transport calls ``predict`` through the fault ``profile``."""
    link = Link(get_profile(profile) if isinstance(profile, str) else profile, seed)
    return Runtime(robot, VirtualTransport(predict, link)), VirtualClock()


def test_each_chunk_is_checked_whole_and_rejected_by_reason_never_clamped(robot, predict):
    rt, _ = make(robot, predict)
    nu = len(robot.joint_names)
    obs = {"observed_at": 1.0, "phase": 0.5, "model": {"sha256": robot.identity}, "horizon": 20, **still(robot)}
    good = predict(obs)
    chunk, reason, _ = rt.check(good, 1.0, 1.05)
    assert reason is None and chunk.actions.shape == (20, nu) and not chunk.actions.flags.writeable

    def bad(**change):
        return {**good, **change}

    nan = [list(a) for a in good["actions"]]
    nan[7][3] = math.nan
    far = [list(a) for a in good["actions"]]
    far[2][3] = 3.0  # the knee's range ends at 2.4 rad
    jump = [list(a) for a in good["actions"]]
    for a in jump[10:]:
        a[0] += 0.2  # 0.2 rad in one 20 ms tick: 10 rad/s
    cases = {
        "identity": bad(model={"sha256": "f" * 64}),
        "dimensions": bad(actions=[a[:-1] for a in good["actions"]]),
        "non_finite": bad(actions=nan),
        "joint_limits": bad(actions=far),
        "rate_limit": bad(actions=jump),
        "malformed": bad(observed_at=0.5),
    }
    for want, raw in cases.items():
        chunk, reason, words = rt.check(raw, 1.0, 1.05)
        assert (chunk, reason) == (None, want), words
        assert words
    assert rt.check(good, 1.0, 1.0 + 0.31)[1] == "stale"  # age from observed_at, not from arrival
    rt.chunk, _, _ = rt.check(predict({**obs, "observed_at": 1.1}), 1.1, 1.15)
    assert rt.check(good, 1.0, 1.16)[1] == "out_of_order"  # an older answer never replaces a newer one


def test_stale_and_reordered_answers_are_rejected_and_the_robot_holds_instead(robot, predict):
    slow = FaultProfile("slow", base_s=0.35, jitter_s=0.0)
    rt, clock = make(robot, predict, slow)
    drive(rt, clock, robot, 2.0)
    assert rt.rejected["stale"] >= 4 and rt.counts["accepted"] == 0 and rt.state == HOLD
    assert np.array_equal(rt.target, robot.q_nominal)  # held in place
    shuffled = FaultProfile("shuffled", base_s=0.12, jitter_s=0.08, min_s=0.01)
    rt, clock = make(robot, predict, shuffled, seed=4)
    drive(rt, clock, robot, 3.0)
    assert rt.rejected["out_of_order"] > 0 and rt.counts["accepted"] > 5
    assert [e["kind"] for e in rt.log.items].count("out_of_order_rejected") >= 1


def test_a_dead_server_holds_opens_the_breaker_and_latches_the_estop_after_8_s(robot, predict):
    dead = FaultProfile("dead", dead_from_s=0.5, dead_to_s=30.0)
    rt, clock = make(robot, predict, dead)
    drive(rt, clock, robot, 0.4)
    assert rt.state == STREAMING
    drive(rt, clock, robot, 1.0)
    assert rt.state == HOLD and rt.status(clock.now())["state"] == "breaker_open"
    drive(rt, clock, robot, 8.0)
    assert rt.estopped and rt.state == ESTOP and rt.counts["estops"] == 1
    lines = [e["text"] for e in rt.log.lines()]
    assert any(t.startswith("breaker_rejected x") for t in lines) and "estop" in lines
    requests_before = rt.counts["requests"]
    drive(rt, clock, robot, 1.0)
    assert rt.estopped and rt.counts["requests"] == requests_before  # latched: no requests, no motion
    assert not rt.clear_estop(clock.now(), confirm=False) and rt.estopped
    assert rt.clear_estop(clock.now(), confirm=True) and rt.state == HOLD


def test_an_outage_holds_then_recovers_by_itself_and_the_task_is_done(robot):
    r = run_episode(robot, "outage", seed=2)
    assert r.success and r.safe and 2.9 < r.hold_s < 4.0 and 5.0 < r.done_at < 6.0
    stuck = run_episode(robot, "outage", seed=2, config=ablated("hold_release"))
    assert stuck.safe and not stuck.success  # without the release the hold never ends


def test_on_a_congested_link_the_adaptive_lead_cuts_time_in_hold(robot):
    lead = run_episode(robot, "congested", seed=3)
    fixed = run_episode(robot, "congested", seed=3, config=ablated("adaptive_lead"))
    assert lead.safe and fixed.safe
    assert lead.hold_s < 0.6 * fixed.hold_s, (lead.hold_s, fixed.hold_s)
    unchecked = run_episode(robot, "corrupt", seed=1, config=ablated("validation"))
    assert not unchecked.safe  # the NaN went to the robot


def test_the_sweep_is_reproducible_bit_for_bit_from_its_seed():
    args = (2, 7, ["healthy", "wrong-robot"], ["full", "validation"], 2.0, 1)
    one, two = sweep(*args), sweep(*args)
    assert one == two
    assert one["profiles"]["wrong-robot"]["safe_end_rate"] == 1.0
    assert one["ablations"]["validation"]["wrong-robot"]["safe_end_rate"] == 0.0
    assert one["verdicts"]["validation"] == {"healthy": "does not pay", "wrong-robot": "pays"}
