"""Bounded LIPM: two stable sweeps give a CoM inside the ZMP range that ends at the final ZMP."""

import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from lab.walking.geometry import measure_geometry
from lab.walking.lipm import analytic_step, bounded_com, naive_backward, omega, zmp_of
from lab.walking.planner import FootstepPlanner, GaitParams

ROOT = Path(__file__).resolve().parents[1]
Z_C = 0.433  # [m], about Q1's CoM height


@pytest.fixture(scope="module")
def plan(robot):
    geo = measure_geometry(robot)
    com0 = np.array(geo.com_offset[:2]) + robot.init_qpos[:2]
    return FootstepPlanner(geo, GaitParams(), np.array(geo.ankle_xyz), com0)


def test_bounded_solution_of_the_gait_plan_stays_within_the_zmp_range_and_ends_at_the_final_zmp(plan):
    lo, hi = plan.zmp.min(0), plan.zmp.max(0)
    assert np.all(plan.com >= lo - 1e-9) and np.all(plan.com <= hi + 1e-9)
    assert np.abs(plan.com[-1] - plan.zmp[-1]).max() < 1e-3
    assert np.isfinite(plan.com).all() and np.isfinite(plan.vel).all()


def test_bounded_solution_stays_within_a_random_zmp_staircase():
    rng = np.random.default_rng(0)
    dt = 0.01
    levels = rng.uniform(-0.1, 0.1, size=(12, 2))
    zmp = np.repeat(levels, 50, axis=0)
    x, v, xi = bounded_com(zmp, dt, Z_C)
    assert np.all(x >= zmp.min(0) - 1e-9) and np.all(x <= zmp.max(0) + 1e-9)
    assert np.all(xi >= zmp.min(0) - 1e-9) and np.all(xi <= zmp.max(0) + 1e-9)
    assert np.allclose(xi[-1], zmp[-1])


@pytest.mark.parametrize("dt", [0.001, 0.005, 0.01])
def test_bounded_solution_matches_the_analytic_single_step_within_1_mm(dt):
    t = np.arange(0.0, 4.0 + dt / 2, dt)
    p = np.where(t < 2.0, 0.0, 0.1)
    xa = analytic_step(t, 2.0, 0.0, 0.1, Z_C)
    x, v, _ = bounded_com(p, dt, Z_C, x0=xa[0])
    assert np.abs(x - xa).max() < 1e-3
    assert x[np.searchsorted(t, 2.0)] == pytest.approx(0.05, abs=1e-3)  # crosses the midpoint at the step
    assert v.max() == pytest.approx(omega(Z_C) * 0.05, rel=0.02)  # peak speed omega * (p1 - p0) / 2


def test_the_bounded_com_implies_the_planned_zmp(plan):
    p = zmp_of(plan.com, plan.p.dt, plan.z_c)
    inner = slice(2, -2)
    assert np.abs(p[inner] - plan.zmp[inner]).max() < 5e-3


def test_naive_backward_integration_diverges(plan):
    naive = naive_backward(plan.zmp, plan.p.dt, plan.z_c)
    assert np.abs(naive[0]).max() > 1e3  # metres: meaningless
    assert np.abs(naive[-1] - plan.zmp[-1]).max() < 1e-12  # it starts right at the end


def test_lipm_script_writes_the_divergence_and_the_gait_plan(tmp_path):
    runpy.run_path(str(ROOT / "experiments" / "04_lipm_plot.py"), run_name="not_main")["main"](
        ["--out", str(tmp_path), "--steps", "3"]
    )
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["bounded_within_zmp_range"] is True and s["bounded_final_equals_final_zmp"] is True
    assert s["single_step_within_1mm"] is True
    assert s["naive_diverged_fraction_x"] > 0.3 and s["naive_diverged_fraction_y"] > 0.3
    for name in ("lipm_plan.csv", "lipm_divergence.png", "gait_plan.png"):
        assert (tmp_path / name).stat().st_size > 0
