"""Any humanoid stands, takes a push and squats out of the box: the generated family in both engines, a public
humanoid the project did not write, and the method's pieces (feet, soles, pose, spawn, gains, limits, mimic).

No sidecar anywhere here: gains, limits, pose, spawn and balance come from the model (lab.robots.tuning).
"""

from pathlib import Path

import mujoco
import numpy as np
import pytest

from lab.control.modes import PUSH_DELTA_V, SQUAT_DEPTH_FRACTION
from lab.robots import tuning
from lab.robots.family import FAMILY, write_family
from lab.robots.model import load_robot
from lab.runtime.trials import STAND_POS_M, STAND_TILT_DEG, run_trial

URDFS = [n for n, s in FAMILY.items() if s.fmt == "urdf"]


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> dict:
    paths = write_family(tmp_path_factory.mktemp("family"))
    return {name: load_robot(p) for name, p in paths.items()}


CASES = [(n, e, m) for n in FAMILY for e in ("mujoco", "pybullet") for m in ("stand", "push", "squat")]
CASES = [c for c in CASES if c[1] == "mujoco" or c[0] in URDFS]


@pytest.mark.parametrize(("name", "engine", "mode"), CASES, ids=["-".join(c) for c in CASES])
def test_family_member_holds_the_mode_in_the_engine(family, name, engine, mode):
    robot = family[name]
    t = run_trial(robot, mode, engine)
    assert t.fell_at is None, t
    if mode == "stand":  # 10 s within 1 cm and 2 deg
        assert t.pos_err_m <= STAND_POS_M and t.tilt_deg <= STAND_TILT_DEG, t
    if mode == "push":  # three pushes of the built-in robot's delta-v for this mass
        assert t.push_n == pytest.approx(PUSH_DELTA_V * robot.total_mass / 0.1, abs=0.06)
    if mode == "squat":  # 4 cycles, and it really goes down
        assert t.seconds == 16.0
        assert t.depth_m >= 0.8 * SQUAT_DEPTH_FRACTION * robot.standing_height, t


@pytest.mark.parametrize("name", list(FAMILY))
def test_nominal_pose_has_flat_soles_the_com_over_them_and_a_half_millimetre_gap(family, name):
    r = family[name]
    assert r.gain_method == "auto" and r.gravity_ff and len(r.soles) == 2
    d = mujoco.MjData(r.model)
    d.qpos[:] = r.init_qpos
    mujoco.mj_forward(r.model, d)
    centers = []
    for s in r.soles:
        rot = d.xmat[s.body].reshape(3, 3)
        tilt = np.degrees(np.arccos(np.clip(-(rot @ s.normal)[2], -1, 1)))
        assert tilt < 0.5, (r.model.body(s.body).name, tilt)
        centers.append(d.xpos[s.body] + rot @ s.center)
    mid = np.mean(centers, axis=0)
    assert np.linalg.norm(d.subtree_com[1][:2] - mid[:2]) < 0.005
    assert tuning.lowest_point(r.model, d) == pytest.approx(tuning.SPAWN_GAP, abs=2e-5)
    assert all(c[2] == pytest.approx(tuning.SPAWN_GAP, abs=2e-4) for c in centers)  # both soles on the floor
    knees = [k for k in r.knees if k >= 0]
    assert len(knees) == 2 and all(abs(r.q_nominal[k]) > 0.3 for k in knees)  # bent, toward flexion


@pytest.mark.parametrize("name", list(FAMILY))
def test_every_gain_is_bounded_for_the_explicit_1ms_step(family, name):
    r = family[name]
    _, ifree, _ = tuning.inertias(r.model, r.init_qpos)
    inertia, dt = ifree[r.dadr], r.model.opt.timestep
    passive = r.model.dof_damping[r.dadr] if r.kind == "urdf" else 0.0
    assert np.all((r.kd + passive) * dt / inertia <= tuning.DAMPING_BOUND + 1e-9)
    assert np.all(r.kp * dt**2 / inertia <= tuning.STIFFNESS_BOUND + 1e-9)
    assert np.all(r.kp > 0) and np.all(r.tau_limit > 0)


def test_leg_gains_scale_with_mass_and_size_by_dynamic_similarity(family):
    tiny, giant = family["tiny"], family["giant"]
    hip = "left_hip_pitch_joint"
    ratio = giant.kp[giant.joint_names.index(hip)] / tiny.kp[tiny.joint_names.index(hip)]
    expect = (giant.total_mass * giant.standing_height) / (tiny.total_mass * tiny.standing_height)
    assert ratio == pytest.approx(expect, rel=1e-6) and ratio > 50


def test_light_fingers_get_gains_their_inertia_can_take(family):
    r = family["heavy"]
    fingers = [i for i, n in enumerate(r.joint_names) if "finger" in n]
    assert len(fingers) >= 24
    assert max(r.kp[fingers]) < 1.0 < min(r.kp[:12])  # not the 40 N·m/rad of the name table
    assert any("finger" in note for note in r.gain_notes)


def test_single_ankle_feet_named_ankle_link_are_found_and_their_toe_down_soles_flattened(family):
    r = family["toe_single"]
    assert [r.model.body(b).name for b in r.foot_bodies] == ["left_ankle_link", "right_ankle_link"]
    ankle = r.joint_names.index("left_ankle_joint")
    assert abs(r.q_nominal[ankle]) > 0.05  # the 10 deg toe-down mount and the bent knee, undone by the ankle
    t = run_trial(r, "stand", "mujoco", seconds=1.0)
    assert t.fell_at is None


def test_mimic_joints_have_no_motor_and_follow_their_leader(family):
    r = family["mimic"]
    assert r.mimic and all(m[0] not in r.joint_names for m in r.mimic)
    hinges = sum(1 for j in range(r.model.njnt) if r.model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE)
    assert r.model.nu == hinges - len(r.mimic)
    from lab.runtime.lockstep import make_engine

    for engine in ("mujoco", "pybullet"):
        eng = make_engine(engine, r)
        try:
            lead = r.joint_names.index(r.mimic[0][1])
            lo, hi = r.model.jnt_range[r.model.actuator_trnid[lead, 0]]
            target = lo + 0.5 * (hi - lo)  # mid-range, away from both joints' limits
            for _ in range(1000):  # the leader alone is driven (the rest hangs limp: zero torque)
                q, qd = eng.joint_state()
                tau = np.zeros(len(r.qadr))
                tau[lead] = r.kp[lead] * (target - q[lead]) - r.kd[lead] * qd[lead]
                eng.step(tau)
            q = dict(zip(r.joint_names, eng.joint_state()[0]))
            joint, leader, mult, offset = r.mimic[0]
            mq = eng.mj_qpos()[r.model.joint(joint).qposadr[0]]
            assert q[leader] == pytest.approx(target, abs=0.1), engine  # the leader moved
            assert mq == pytest.approx(mult * q[leader] + offset, abs=0.02), engine
        finally:
            eng.close()


def test_torque_limits_come_from_actuatorfrcrange_and_position_servos_keep_their_gains(family):
    for name in ("mjcf_bare", "mjcf_motor"):
        r = family[name]
        j = r.model.actuator_trnid[:, 0]
        assert np.all(r.model.jnt_actfrclimited[j]), name
        np.testing.assert_allclose(r.tau_limit, np.abs(r.model.jnt_actfrcrange[j, 1]), err_msg=name)
    r = family["mjcf_pos"]
    assert np.all(r.model.actuator_biastype == mujoco.mjtBias.mjBIAS_NONE)  # servos became torque motors
    knee = r.joint_names.index("left_knee_joint")
    assert r.kp[knee] == pytest.approx(4 * r.tau_limit[knee], rel=1e-6)  # the servo's own kp (family: 4 x effort)


def test_urdf_effort_not_given_gets_a_limit_from_gains_and_load(family):
    r = family["no_effort"]
    knee = r.joint_names.index("left_knee_joint")
    assert r.tau_limit[knee] == pytest.approx(max(0.4 * r.kp[knee], 2.5 * abs(r.stance_tau[knee])))


def test_the_builtin_robot_keeps_its_reference_gains_and_pose():
    r = load_robot(None)
    assert r.gain_method == "names" and r.gravity_ff is False
    assert set(r.kp.tolist()) == {150.0, 100.0, 40.0} and set(r.kd.tolist()) == {12.0, 8.0, 3.0}
    assert r.q_nominal[r.joint_names.index("left_knee_joint")] == 0.6
    assert r.standing_height == pytest.approx(0.4226, abs=1e-4)


def public_humanoid(name: str) -> Path:
    """A public humanoid the project did not write: the MJCF models shipped in the pybullet_data package."""
    import pybullet_data

    return Path(pybullet_data.getDataPath()) / "mjcf" / name


@pytest.mark.parametrize("mode", ["stand", "push", "squat"])
def test_a_public_mujoco_humanoid_with_geared_motors_and_joint_springs(mode, tmp_path):
    path = public_humanoid("humanoid.xml")
    r = load_robot(path)
    assert np.all(r.model.actuator_gear[:, 0] == 1.0)  # gear folded into the range: ctrl is the joint torque
    assert r.tau_limit[r.joint_names.index("right_hip_y")] == pytest.approx(0.4 * 600)
    t = run_trial(r, mode, "mujoco")
    assert t.ok, t


def test_a_point_footed_humanoid_without_ankles_is_told_it_cannot_stand():
    r = load_robot(public_humanoid("humanoid_symmetric_no_ground.xml"))
    assert any("touches the floor along a line or at a point" in n for n in r.gain_notes)


def test_the_view_frames_a_robot_by_its_size(family):
    from lab.render.renderer import REF_SPAN, robot_span

    builtin = load_robot(None)
    assert robot_span(builtin.model, mujoco.MjData(builtin.model)) == pytest.approx(REF_SPAN, abs=0.002)
    spans = {n: robot_span(family[n].model, mujoco.MjData(family[n].model)) / REF_SPAN for n in ("tiny", "giant")}
    assert spans["tiny"] == pytest.approx(0.5, rel=0.1) and spans["giant"] == pytest.approx(2.0, rel=0.1)
