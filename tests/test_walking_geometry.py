"""Gait geometry is measured from the compiled model and matches the built-in Q1's definition."""

import json
import runpy
from pathlib import Path

import pytest

from lab.walking.geometry import find_legs, measure_geometry

ROOT = Path(__file__).resolve().parents[1]
MM = 1e-3


@pytest.fixture(scope="module")
def geo(robot):
    return measure_geometry(robot)


def test_foot_is_145_by_46_mm_with_the_ankle_50_mm_ahead_of_the_heel(geo):
    assert geo.foot_length == pytest.approx(0.145, abs=1 * MM)
    assert geo.foot_width == pytest.approx(0.046, abs=1 * MM)
    assert geo.heel_offset == pytest.approx(0.050, abs=1 * MM)
    assert geo.toe_offset == pytest.approx(0.095, abs=1 * MM)
    assert geo.sole_depth == pytest.approx(0.035, abs=1 * MM)
    assert geo.balance_x == pytest.approx((geo.toe_offset - geo.heel_offset) / 2)


def test_ankles_are_181_mm_apart_and_level(geo):
    assert geo.ankle_spacing == pytest.approx(0.181, abs=1 * MM)
    left, right = geo.ankle_xyz
    assert left[1] > 0 > right[1]
    assert left[2] == pytest.approx(right[2], abs=1e-9)


def test_leg_and_heights_come_from_the_model(robot, geo):
    assert geo.leg_length == pytest.approx(0.40, abs=1 * MM)
    assert geo.thigh == pytest.approx(0.20, abs=1 * MM) and geo.shank == pytest.approx(0.20, abs=1 * MM)
    assert geo.pelvis_height == pytest.approx(robot.standing_height, abs=1e-9)
    assert 0.40 < geo.pelvis_height < geo.pelvis_height_straight < 0.45
    assert geo.com_height == pytest.approx(geo.pelvis_height + geo.com_offset[2], abs=1e-9)
    assert abs(geo.com_offset[1]) < 1e-9  # the robot is left-right symmetric


def test_each_leg_is_six_actuated_hinges_from_hip_to_ankle(robot):
    legs = find_legs(robot)
    assert [leg.side for leg in legs] == [0, 1]
    for leg, side in zip(legs, ("left", "right")):
        names = [robot.joint_names[a] for a in leg.act]
        assert names == [
            f"{side}_{j}_joint" for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
        ]
        assert (leg.hip_pitch, leg.knee, leg.ankle_pitch, leg.knee_sign) == (0, 3, 4, 1.0)


def test_gait_geometry_script_writes_its_summary_csv_and_figure(tmp_path):
    runpy.run_path(str(ROOT / "experiments" / "01_gait_geometry.py"), run_name="not_main")["main"](
        ["--out", str(tmp_path)]
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["matches_definition_within_1mm"] is True
    assert summary["foot_length_m"] == pytest.approx(0.145, abs=1 * MM)
    assert (tmp_path / "geometry.csv").read_text().count("\n") >= 14
    assert (tmp_path / "gait_geometry.png").stat().st_size > 10_000
