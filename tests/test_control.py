"""The PD law and the four modes on the real model in MuJoCo (the Lab's engine)."""

import numpy as np
import pytest

from lab.control.modes import MODES, PushParams, get_mode
from lab.control.pd import PDGains, pd_torque
from lab.control.rollout import Rollout, simulate
from lab.errors import LabError
from lab.sim.mujoco_engine import MujocoEngine


def run(robot, mode, seconds, **kw):
    ro = Rollout(MujocoEngine(robot), PDGains.for_robot(robot), get_mode(mode, robot, **kw))
    return simulate(ro, seconds)


def test_pd_torque_is_clipped_to_the_actuator_range(robot):
    g = PDGains.for_robot(robot)
    q = np.zeros(robot.model.nu)
    tau = pd_torque(g, q, q, q + 10.0)
    assert np.allclose(tau, g.limit)
    assert np.allclose(pd_torque(g, q, q + 1.0, q), np.maximum(-g.kd, -g.limit))


def test_stand_holds_pelvis_within_1cm_and_torso_within_2deg_for_10s(robot):
    ms = run(robot, "stand", 10.0)
    z = np.array([m.pelvis_z for m in ms])
    pitch = np.array([m.pitch_deg for m in ms])
    roll = np.array([m.roll_deg for m in ms])
    assert np.abs(z - robot.standing_height).max() < 0.01
    assert np.abs(pitch).max() < 2.0 and np.abs(roll).max() < 2.0
    assert ms[-1].support == "double" and ms[-1].margin > 0.02


def test_zero_falls_below_60_percent_of_standing_height_within_2s(robot):
    ms = run(robot, "zero", 2.0)
    z = np.array([m.pelvis_z for m in ms])
    assert z.min() < 0.6 * robot.standing_height
    assert ms[-1].sim_time == pytest.approx(2.0)


def test_squat_moves_the_pelvis_at_least_4cm_and_tracks_it(robot):
    ms = run(robot, "squat", 8.0)
    z = np.array([m.pelvis_z for m in ms])
    target = np.array([m.pelvis_z_target for m in ms])
    assert z.max() - z.min() >= 0.04
    err = np.abs(z - target)
    assert err.max() < 0.015, f"tracking error {err.max():.4f} m"
    assert np.abs([m.pitch_deg for m in ms]).max() < 5


def test_push_disturbs_pitch_and_the_robot_recovers_at_the_default_force(robot):
    p = PushParams()
    ms = run(robot, "push", 2 * p.period_s + p.first_s)
    t = np.array([m.sim_time for m in ms])
    pitch = np.array([m.pitch_deg for m in ms])
    z = np.array([m.pelvis_z for m in ms])
    before = np.abs(pitch[t < p.first_s]).max()
    after_push = pitch[(t > p.first_s) & (t < p.first_s + 1.0)]
    assert any(m.push for m in ms)
    assert np.abs(after_push).max() > before + 1.0, "the push must visibly move the torso"
    settled = (t > p.first_s + p.period_s - 0.2) & (t < p.first_s + p.period_s)  # just before the 2nd push
    assert np.abs(pitch[settled]).max() < 2.0
    assert np.abs(z[settled] - robot.standing_height).max() < 0.01
    assert z.min() > 0.8 * robot.standing_height


def test_push_params_outside_their_range_are_refused():
    with pytest.raises(LabError, match=r"push force_n 2500 is outside \[0, 2000\]"):
        PushParams(force_n=2500).validated()
    with pytest.raises(LabError, match="must be a finite number"):
        PushParams(force_n=float("nan")).validated()
    with pytest.raises(LabError, match="shorter than period_s"):
        PushParams(duration_s=0.9, period_s=0.8).validated()


def test_unknown_mode_names_what_exists(robot):
    with pytest.raises(LabError) as e:
        get_mode("walkk", robot)
    assert str(e.value) == "unknown mode 'walkk'"
    assert e.value.hint == "available: " + ", ".join(MODES)


@pytest.mark.parametrize("mode", ["stand", "squat", "push", "zero"])
def test_contract_every_mode_resets_steps_without_nan_and_repeats(robot, mode):
    def trajectory():
        eng = MujocoEngine(robot)
        ro = Rollout(eng, PDGains.for_robot(robot), get_mode(mode, robot))
        ms = simulate(ro, 0.5, sample_dt=0.05)
        q, qd = eng.joint_state()
        assert q.shape == qd.shape == (robot.model.nu,)
        assert eng.mj_qpos().shape == (robot.model.nq,)
        ro.reset()
        assert eng.time == 0 and np.allclose(eng.mj_qpos(), robot.init_qpos)
        return np.array([[m.pelvis_z, m.pitch_deg, m.max_joint_err, *m.com] for m in ms])

    a, b = trajectory(), trajectory()
    assert np.isfinite(a).all()
    assert np.array_equal(a, b)
