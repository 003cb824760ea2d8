"""Overlays drawn into the scene: each one, on the real robot in a real running simulation, changes the
rendered image where its 3-D anchor points project, and nothing where the state has nothing to draw."""

import copy
import math

import mujoco
import numpy as np
import pytest

from lab.render import overlays
from lab.render.camera import CameraSpec, ViewCamera, camera_axes
from lab.render.overlays import OVERLAYS
from lab.render.renderer import Renderer
from lab.runtime.lockstep import Lockstep
from lab.runtime.session import SimSession

W, H = 640, 480
CHANGED = 12  # a pixel changed: any channel by more than this (of 255)
INSIDE = 0.9  # share of the changed pixels that must lie near the overlay's anchors
MARGIN = 24  # [px] around the anchors' bounding box


def run(robot, mode: str, seconds: float, **kw) -> SimSession:
    s = SimSession(robot, mode, **kw)
    s.advance(seconds)
    return s


def captured(runner, name=None) -> tuple[np.ndarray, dict]:
    """The drawn qpos and the overlay state, taken together under the runner's lock (as the render source does)."""
    q, _, state = runner.frame_state(name, overlays=True)
    return q, state


@pytest.fixture(scope="module")
def stand(robot):
    s = run(robot, "stand", 0.5)
    yield captured(s)
    s.close()


@pytest.fixture(scope="module")
def pushed(robot):
    s = run(robot, "push", 1.05)  # the first push acts from 1.0 s for 0.1 s
    yield captured(s)
    s.close()


@pytest.fixture(scope="module")
def walking(robot):
    s = run(robot, "walk", 1.5)
    yield captured(s)
    s.close()


@pytest.fixture(scope="module")
def view(robot):
    """A renderer made in this thread and a fixed camera on the robot."""
    r = Renderer(robot.model, W, H, "fast")
    spec = CameraSpec.default(r.size)
    cam = ViewCamera(CameraSpec(spec.azimuth, spec.elevation, spec.distance, (0.05, 0.0, 0.3), follow=False))
    yield r, cam
    r.close()


def project(view, points) -> np.ndarray:
    """Pixel (column, row) (n, 2) of world points (n, 3) in the fixed camera (MuJoCo's free camera, fovy)."""
    r, cam = view
    s = cam.spec
    fwd, right, up = camera_axes(s.azimuth, s.elevation)
    eye = np.array(s.lookat) - s.distance * fwd
    v = np.asarray(points, float).reshape(-1, 3) - eye
    f = (H / 2) / math.tan(math.radians(r.model.vis.global_.fovy) / 2)
    z = v @ fwd
    return np.stack([W / 2 + f * (v @ right) / z, H / 2 - f * (v @ up) / z], axis=1)


def changed(view, qpos, overlay: str, state: dict) -> np.ndarray:
    """(H, W) bool: pixels that differ between the frame without and with ``overlay``."""
    r, cam = view
    off = r.render(qpos, camera=cam).astype(int)
    on = r.render(qpos, camera=cam, overlays=frozenset({overlay}), overlay_state=state).astype(int)
    return np.abs(on - off).max(axis=2) > CHANGED


def assert_near(view, mask: np.ndarray, anchors, inside_share: float = INSIDE) -> None:
    """At least 30 pixels changed, and ``inside_share`` of them within MARGIN of the anchors' projection."""
    px = project(view, anchors)
    lo, hi = px.min(0) - MARGIN, px.max(0) + MARGIN
    rows, cols = np.nonzero(mask)
    assert len(rows) >= 30, f"only {len(rows)} pixels changed"
    inside = (cols >= lo[0]) & (cols <= hi[0]) & (rows >= lo[1]) & (rows <= hi[1])
    assert inside.mean() >= inside_share, (
        f"{inside.mean():.0%} of {len(rows)} changed pixels near {lo.round()}..{hi.round()}"
    )


def kinematics(robot, qpos):
    d = mujoco.MjData(robot.model)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(robot.model, d)
    mujoco.mj_comPos(robot.model, d)
    return d


def on_floor(xy, z=0.0) -> np.ndarray:
    xy = np.asarray(xy, float).reshape(-1, 2)
    return np.column_stack([xy, np.full(len(xy), z)])


def test_capture_of_a_standing_robot_holds_contacts_support_and_cop(robot, stand):
    _, st = stand
    assert st["weight"] == pytest.approx(robot.total_mass * 9.81)
    assert st["contact_pos"].shape[1] == 3 and len(st["contact_pos"]) == len(st["contact_fz"]) >= 4
    assert st["contact_fz"].sum() == pytest.approx(st["weight"], rel=0.05)
    assert len(st["support"]) >= 3 and st["cop"].shape == (2,)
    assert not {"push", "perturb", "footsteps", "dcm", "zmp_cmd"} & set(st)


def test_capture_returns_copies_that_the_simulation_does_not_change(robot):
    s = run(robot, "walk", 1.0)
    _, st = captured(s)
    kept = copy.deepcopy(st)
    s.advance(0.3)
    s.close()
    for k in ("contact_pos", "contact_fz", "support", "cop", "zmp_cmd", "dcm", "footsteps", "landed"):
        np.testing.assert_array_equal(st[k], kept[k])


def test_contacts_draw_at_the_feet(robot, view, stand):
    q, st = stand
    tips = st["contact_pos"] + np.outer(st["contact_fz"] / st["weight"] * 0.6 * view[0].size, [0, 0, 1])
    assert_near(view, changed(view, q, "contacts", st), np.vstack([st["contact_pos"], tips]))


def test_com_draws_at_the_centre_of_mass_and_below_it_even_without_a_state(robot, view, stand):
    q, _ = stand
    c = kinematics(robot, q).subtree_com[0]
    arm = 0.14 * view[0].size
    anchors = [c + [arm, 0, 0], c - [arm, 0, 0], c + [0, arm, 0], c - [0, arm, 0], [c[0], c[1], 0.0]]
    assert_near(view, changed(view, q, "com", {}), anchors)  # the remote monitor: kinematics only


def test_support_polygon_draws_around_the_feet(robot, view, stand):
    q, st = stand
    poly = st["support"]
    assert_near(view, changed(view, q, "support", st), np.vstack([on_floor(poly), on_floor(poly, 0.03)]))


def test_cop_draws_at_the_measured_centre_of_pressure(robot, view, stand):
    q, st = stand
    assert_near(view, changed(view, q, "cop", st), [[*st["cop"], 0.0], [*st["cop"], 0.1 * view[0].size]])


def test_push_draws_at_the_torso_while_it_acts(robot, view, pushed):
    q, st = pushed
    assert st["push"]["body"] == robot.torso_body and st["push"]["force"][0] > 0
    p = kinematics(robot, q).xipos[robot.torso_body]
    d = st["push"]["force"] / np.linalg.norm(st["push"]["force"])
    assert_near(view, changed(view, q, "push", st), [p, p + 0.45 * view[0].size * d])


def test_mouse_perturbation_draws_from_the_grabbed_point_while_it_pulls(robot, view):
    s = run(robot, "stand", 0.5)
    d = s.engine.data
    point = d.xipos[robot.torso_body] + [0.0, -0.085, 0.0]  # the torso's right side
    s.perturb_start(robot.torso_body, point, point + [0.0, -0.15, 0.05], owner=s)
    s.advance(0.05)
    q, st = captured(s)
    s.perturb_end(s)
    _, after = captured(s)
    s.close()
    pert = st["perturb"]
    assert pert["body"] == robot.torso_body and np.linalg.norm(pert["force"]) > 1.0
    tip = pert["point"] + pert["force"] / np.linalg.norm(pert["force"]) * 0.45 * view[0].size
    assert_near(view, changed(view, q, "push", st), [pert["point"], tip, pert["target"]])
    assert "perturb" not in after


def test_footsteps_draw_the_plan_and_the_swing_path_while_walking(robot, view, walking):
    q, st = walking
    assert len(st["footsteps"]) >= 2 and st["landed"].shape == (2, 4) and st["swing_path"].shape[1] == 3
    anchors = np.vstack([on_floor(st["footsteps"][:, :2]), on_floor(st["landed"][:, :2]), st["swing_path"]])
    assert_near(view, changed(view, q, "footsteps", st), anchors)


@pytest.fixture(scope="module")
def see_through(robot):
    """The fixed camera on a renderer whose robot is invisible (alpha 0): in single support the CoP, the
    ZMP command and often the DCM lie under the stance foot, where the leg hides their pins."""
    r = Renderer(robot.model, W, H, "fast")
    r.model.geom_rgba[r.model.geom_bodyid > 0, 3] = 0.0
    spec = CameraSpec.default(r.size)
    cam = ViewCamera(CameraSpec(spec.azimuth, spec.elevation, spec.distance, (0.05, 0.0, 0.3), follow=False))
    yield r, cam
    r.close()


def test_zmp_command_and_dcm_draw_while_walking(robot, see_through, walking):
    view = see_through
    q, st = walking
    size = view[0].size
    cop = [[*st["zmp_cmd"], 0.0], [*st["zmp_cmd"], 0.075 * size]]
    if "cop" in st:
        cop += [[*st["cop"], 0.0], [*st["cop"], 0.1 * size]]
    assert_near(view, changed(view, q, "cop", st), cop)
    assert_near(view, changed(view, q, "dcm", st), [[*st["dcm"], 0.0], [*st["dcm"], 0.125 * size]])


def test_frames_draw_on_the_robot_and_go_away_when_off(robot, view, stand):
    q, _ = stand
    d = kinematics(robot, q)
    assert_near(view, changed(view, q, "frames", {}), np.vstack([d.xpos[1:], d.geom_xpos[robot.model.geom_bodyid > 0]]))
    r, cam = view
    before = r.render(q, camera=cam)
    r.render(q, camera=cam, overlays=frozenset({"frames"}), overlay_state={})
    np.testing.assert_array_equal(r.render(q, camera=cam), before)  # the flags are reset


@pytest.mark.parametrize(
    "overlay, source",
    [("push", "stand"), ("footsteps", "stand"), ("dcm", "stand"), ("contacts", None), ("support", None), ("cop", None)],
)
def test_an_overlay_with_nothing_to_draw_changes_nothing(robot, view, stand, overlay, source):
    q, st = stand
    assert not changed(view, q, overlay, st if source else {}).any()


def test_every_overlay_together_stops_at_a_full_scene(robot, walking):
    q, st = walking
    d = kinematics(robot, q)
    opt = mujoco.MjvOption()
    scene = mujoco.MjvScene(robot.model, maxgeom=robot.model.ngeom + 10)
    overlays.prepare(opt, frozenset(OVERLAYS))
    mujoco.mjv_updateScene(robot.model, d, opt, None, mujoco.MjvCamera(), mujoco.mjtCatBit.mjCAT_ALL, scene)
    overlays.draw(scene, robot.model, d, frozenset(OVERLAYS), st, 1.0)
    assert scene.ngeom == scene.maxgeom


def test_capture_reads_pybullet_through_the_engine_interface(robot, view):
    ls = Lockstep(robot, "stand")
    ls.advance(0.5)
    q, st = captured(ls, "pybullet")
    _, ref = captured(ls, "mujoco")
    ls.close()
    assert st["contact_fz"].sum() == pytest.approx(st["weight"], rel=0.05)
    assert np.linalg.norm(st["cop"] - ref["cop"]) < 0.02
    tips = st["contact_pos"] + np.outer(st["contact_fz"] / st["weight"] * 0.6 * view[0].size, [0, 0, 1])
    assert_near(view, changed(view, q, "contacts", st), np.vstack([st["contact_pos"], tips]))
