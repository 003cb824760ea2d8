"""Foot IK: damped least squares on the MuJoCo Jacobian converges below 2 mm on every swing target."""

import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from lab.walking.geometry import measure_geometry
from lab.walking.ik import VALIDATION_TARGETS, IKConfig, LegIK, Target, flat_seed, target_pose

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setup(robot):
    geo = measure_geometry(robot)
    ik = LegIK(robot, geo)
    ik.set_pelvis(robot.init_qpos[:3], robot.init_qpos[3:7])
    return robot, geo, ik


def _R(quat):
    import mujoco

    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, quat)
    return R.reshape(3, 3)


@pytest.mark.parametrize("side", [0, 1], ids=["left", "right"])
def test_dls_converges_below_2_mm_on_every_validation_target(setup, side):
    _, geo, ik = setup
    names = {t.name for t in VALIDATION_TARGETS}
    assert {"lift 100 mm", "forward 30 mm", "forward 60 mm", "forward 60 + lift 100"} <= names
    for tgt in VALIDATION_TARGETS:
        p, quat = target_pose(geo, side, tgt)
        res = ik.solve(geo.legs[side], p, quat)
        assert res.converged, f"{tgt.name}: {res.error_mm:.3f} mm"
        assert res.error < IKConfig().tol
        # the forward kinematics of the answer really puts the foot there
        p_fk, R_fk = ik.foot_pose(geo.legs[side], res.q)
        assert ik.ee_error(p_fk, R_fk, p, _R(quat)) < 2e-3
        assert np.all(res.q >= np.array(geo.legs[side].lo) - 1e-12) and np.all(
            res.q <= np.array(geo.legs[side].hi) + 1e-12
        )


def test_knee_seeds_keep_the_foot_flat(setup):
    _, geo, ik = setup
    leg = geo.legs[0]
    for k in IKConfig().seeds_knee:
        q = flat_seed(leg, k)
        assert q[leg.hip_pitch] + q[leg.knee] + q[leg.ankle_pitch] == pytest.approx(0.0, abs=1e-12)
        _, R = ik.foot_pose(leg, q)
        assert np.allclose(R, np.eye(3), atol=1e-9)


def test_a_warm_start_converges_in_a_few_iterations(setup):
    _, geo, ik = setup
    leg = geo.legs[1]
    p, quat = target_pose(geo, 1, Target("lift 50", 0.0, 0.05))
    cold = ik.solve(leg, p, quat)
    p2, quat2 = target_pose(geo, 1, Target("lift 52", 0.002, 0.052))
    warm = ik.solve(leg, p2, quat2, q0=cold.q)
    assert warm.converged and warm.seed == -1 and warm.iters <= 4


def test_an_unreachable_target_is_reported_as_not_converged(setup):
    _, geo, ik = setup
    p, quat = target_pose(geo, 0, Target("too far", 0.0, -0.10))  # 10 cm below the floor: beyond the leg
    res = ik.solve(geo.legs[0], p, quat)
    assert not res.converged and res.error_mm > 2.0


def test_truncated_pseudo_inverse_silently_fails_on_lift_targets(setup):
    _, geo, ik = setup
    leg = geo.legs[0]
    for tgt in VALIDATION_TARGETS:
        if tgt.dz <= 0:
            continue
        p, quat = target_pose(geo, 0, tgt)
        res = ik.solve(leg, p, quat, q0=flat_seed(leg, 0.3), method="pinv")  # returns; raises nothing
        assert res.error_mm > 2.0, tgt.name
        assert res.iters == IKConfig().max_iters  # ran out its iterations without getting there


def test_foot_ik_script_reports_dls_converged_and_pinv_failed(tmp_path):
    runpy.run_path(str(ROOT / "experiments" / "02_foot_ik.py"), run_name="not_main")["main"](["--out", str(tmp_path)])
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["all_converged"] is True and s["max_error_mm"] < 2.0
    assert s["pinv_failed_lift_targets"] == s["lift_targets"] > 0
    for name in ("ik_targets.csv", "ik_errors.png", "ik_convergence.png", "ik_poses.png"):
        assert (tmp_path / name).stat().st_size > 0
