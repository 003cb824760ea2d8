"""PyBullet against MuJoCo on URDF variants of the built-in robot: unnamed materials, a link without
``<inertial>``, PyBullet's own load messages, the per-link mass/inertia parity table and its correction,
the floating-base bias torque, ``<mimic>`` joints, and the two HTTP endpoints and the parity card."""

import copy
import re

import numpy as np
import pybullet as pb
import pytest
import requests

from lab.errors import LabError
from lab.robots.model import BUILTIN_URDF, load_robot
from lab.settings import Settings
from lab.sim.mujoco_engine import MujocoEngine
from lab.sim.parity import parity_summary, parity_table
from lab.sim.pybullet_engine import PybulletEngine
from lab.sim.pybullet_urdf import bullet_messages, captured_output
from lab.web.server import ServerThread
from tests.conftest import wait_until

UNNAMED = '<material><color rgba="1 0 0 1"/></material>'


def _variant(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def unnamed_material_urdf(tmp_path):
    text = BUILTIN_URDF.read_text().replace('<material name="accent"/>', UNNAMED, 1)
    return _variant(tmp_path, "unnamed.urdf", text)


def no_inertial_urdf(tmp_path, link="head_link"):
    text = re.sub(rf'(<link name="{link}">\s*)<inertial>.*?</inertial>', r"\1", BUILTIN_URDF.read_text(), flags=re.S)
    return _variant(tmp_path, "no_inertial.urdf", text)


@pytest.fixture()
def engine_of():
    made = []

    def make(robot):
        made.append(PybulletEngine(robot))
        return made[-1]

    yield make
    for e in made:
        e.close()


def test_pybullet_alone_refuses_an_unnamed_material_and_says_why_in_its_own_words(tmp_path):
    path = unnamed_material_urdf(tmp_path)
    cid = pb.connect(pb.DIRECT)
    try:
        with captured_output() as out:
            with pytest.raises(pb.error):
                pb.loadURDF(str(path), physicsClientId=cid)
    finally:
        pb.disconnect(physicsClientId=cid)
    messages = bullet_messages(out)
    assert messages[0] == ("error", "Visual material must contain a name attribute")
    assert ("error", "Could not parse visual element for Link: pelvis") in messages
    assert not any("b3Error" in m or "BulletUrdfImporter" in m for _, m in messages)


def test_urdf_with_an_unnamed_material_loads_in_pybullet_with_a_note(tmp_path, engine_of):
    robot = load_robot(unnamed_material_urdf(tmp_path))
    pyb = engine_of(robot)
    assert pyb.load_notes == ["material on link pelvis has no name: named lab_mat_0"]
    assert pyb.corrected == []
    assert pyb.total_mass == pytest.approx(robot.total_mass, rel=1e-9)


def test_a_urdf_pybullet_cannot_parse_raises_with_pybullets_message_not_the_file_location(tmp_path):
    path = _variant(tmp_path, "robot.urdf", BUILTIN_URDF.read_text())
    robot = load_robot(path)  # then the file changes under it into one PyBullet's parser refuses
    path.write_text(path.read_text().replace('<geometry><sphere radius="0.06"/></geometry>', "<geometry/>", 1))
    with pytest.raises(LabError) as err:
        PybulletEngine(robot)
    msg = str(err.value)
    assert msg.startswith("PyBullet cannot load robot.urdf: ")
    assert "b3Error" not in msg and "BulletUrdfImporter.cpp" not in msg
    assert "head_link" in msg, msg


def test_link_without_inertial_is_given_mujocos_values_and_shown_in_parity_before(tmp_path, engine_of):
    robot = load_robot(no_inertial_urdf(tmp_path))
    pyb = engine_of(robot)
    head_mj = float(robot.model.body_mass[robot.model.body("head_link").id])
    assert head_mj == pytest.approx(4 / 3 * np.pi * 0.06**3 * 1000)  # its collision sphere at 1000 kg/m³
    assert pyb.load_notes == [
        f"link head_link has no <inertial>: PyBullet gives it 1 kg (MuJoCo: {head_mj:.4g} kg from its geoms); "
        "given MuJoCo's mass, CoM and inertia"
    ]
    before = {r.link: r for r in pyb.parity_before}
    assert [r.link for r in pyb.parity_before if r.disagrees] == ["head_link"]
    head = before["head_link"]
    assert head.pybullet_mass == 1.0 and head.pybullet_inertia == (1.0, 1.0, 1.0)
    assert head.rel_diff == pytest.approx((1.0 - head_mj) / 1.0)
    assert head.com_diff == pytest.approx(0.07)  # PyBullet's CoM at the link origin, MuJoCo's at the sphere
    assert pyb.raw_total_mass == pytest.approx(robot.total_mass - head_mj + 1.0)
    assert pyb.corrected == ["head_link"]
    after = parity_table(robot, pyb)
    assert parity_summary(after)["disagree"] == []
    assert max(r.com_diff for r in after) < 1e-9
    assert abs(pyb.total_mass - robot.total_mass) / robot.total_mass < 0.005
    assert pyb.total_mass == pytest.approx(robot.total_mass, rel=1e-9)


def test_built_in_robot_needs_no_correction(robot, engine_of):
    pyb = engine_of(robot)
    assert pyb.load_notes == [] and pyb.corrected == []
    summary = parity_summary(pyb.parity_before)
    assert summary == {"links": 23, "merged": [], "disagree": [], "max_diff": summary["max_diff"]}
    assert summary["max_diff"] < 1e-6
    assert pyb.raw_total_mass == pytest.approx(robot.total_mass, rel=1e-9)


def test_bias_torque_of_pybullet_equals_mujocos_at_the_standing_pose(robot, engine_of):
    mj, pyb = MujocoEngine(robot), engine_of(robot)
    b_mj, b_pb = mj.bias_torque(), pyb.bias_torque()
    assert b_pb.shape == (len(robot.joint_names),)
    assert np.max(np.abs(b_mj)) > 0.2  # hips, knees, shoulders carry weight
    np.testing.assert_allclose(b_pb, b_mj, atol=0.02 * np.max(np.abs(b_mj)))


def test_bias_torque_of_pybullet_is_the_gravity_part_of_mujocos_in_a_bent_pose(robot, engine_of):
    import mujoco

    mj, pyb = MujocoEngine(robot), engine_of(robot)
    q = robot.q_nominal + np.linspace(-0.3, 0.3, len(robot.joint_names))
    mj.data.qpos[robot.qadr] = q
    mujoco.mj_forward(robot.model, mj.data)
    for j, v in zip(pyb._idx, q):
        pb.resetJointState(pyb._body, j, float(v), 0.0, physicsClientId=pyb._cid)
    np.testing.assert_allclose(pyb.bias_torque(), mj.bias_torque(), atol=1e-9)


def test_mimic_joint_follows_its_leader_in_pybullet(robot, engine_of):
    mimic_robot = copy.copy(robot)
    mimic_robot.mimic = [("right_elbow_joint", "left_elbow_joint", -1.0, 0.1)]
    pyb = engine_of(mimic_robot)
    names = list(robot.joint_names)
    left, right = names.index("left_elbow_joint"), names.index("right_elbow_joint")
    q, _ = pyb.joint_state()
    assert q[right] == pytest.approx(-q[left] + 0.1)
    for _ in range(400):  # no control: the robot falls and the arms swing
        pyb.step(np.zeros(len(names)))
    q, _ = pyb.joint_state()
    assert q[right] == pytest.approx(-q[left] + 0.1, abs=0.01)


# ---- over HTTP ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sim2sim_no_inertial(tmp_path_factory):
    from lab.web.sim2sim import create_sim2sim_app

    path = no_inertial_urdf(tmp_path_factory.mktemp("parity"))
    app = create_sim2sim_app(Settings(model=str(path)), start=False)
    with ServerThread(app) as srv:
        yield srv


def test_api_parity_reports_the_raw_disagreement_and_the_correction(sim2sim_no_inertial):
    r = requests.get(sim2sim_no_inertial.url + "/api/parity", timeout=10).json()
    assert r["applicable"] is True
    assert r["corrected"] == ["head_link"]
    bad = [row for row in r["rows"] if row["disagrees"]]
    assert [row["link"] for row in bad] == ["head_link"] and bad[0]["pybullet_mass"] == 1.0
    t = r["total"]
    assert t["pybullet_raw"] > t["mujoco"] and abs(t["pybullet"] - t["mujoco"]) / t["mujoco"] < 0.005
    assert r["summary"]["after"]["disagree"] == []
    assert any("head_link has no <inertial>" in n for n in r["notes"])


def test_sim2sim_page_shows_the_parity_card_with_the_disagreeing_link(sim2sim_no_inertial, browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    try:
        page.goto(sim2sim_no_inertial.url + "/")
        page.wait_for_selector("#parity-table tr.disagree[data-link='head_link']", timeout=15000)
        assert "1 of 23 links disagree" in page.inner_text("#parity-summary")
        page.locator("#parity-card").scroll_into_view_if_needed()
        page.screenshot(path="/tmp/parity.png", full_page=True)
    finally:
        ctx.close()


def test_api_pybullet_notes_on_the_lab_for_a_urdf_and_an_mjcf(tmp_path):
    from lab.web import create_lab_app

    mjcf = _variant(
        tmp_path,
        "robot.xml",
        "<mujoco><worldbody><body><freejoint/><geom size='0.1'/>"
        "<body name='arm'><joint name='elbow' type='hinge'/><geom size='0.05' pos='0 0 0.2'/></body></body></worldbody></mujoco>",
    )
    for model, expect in ((unnamed_material_urdf(tmp_path), True), (mjcf, False)):
        app = create_lab_app(Settings(model=str(model)), start=False)
        with ServerThread(app) as srv:
            r = requests.get(srv.url + "/api/pybullet_notes", timeout=10).json()
            assert r["applicable"] is expect
            if expect:
                assert r["notes"] == ["material on link pelvis has no name: named lab_mat_0"]
                assert r["total"]["pybullet"] == pytest.approx(r["total"]["mujoco"])
                assert requests.get(srv.url + "/api/pybullet_notes", timeout=10).json() == r  # cached
            html = requests.get(srv.url + "/", timeout=10).text
            assert 'id="pybullet-notes"' in html


def test_lab_page_shows_the_pybullet_notes_card_only_when_there_are_notes(tmp_path, browser, robot):
    from lab.web import create_lab_app

    for model, shown in ((str(unnamed_material_urdf(tmp_path)), True), (None, False)):
        app = create_lab_app(Settings(model=model), start=False)
        ctx = browser.new_context()
        page = ctx.new_page()
        try:
            with ServerThread(app) as srv:
                page.goto(srv.url + "/")
                if shown:
                    page.wait_for_selector("#pybullet-notes li", timeout=15000)
                    assert "lab_mat_0" in page.inner_text("#pybullet-notes")
                else:
                    wait_until(lambda: page.evaluate("document.getElementById('pybullet-notes') !== null"), 10)
                    page.wait_for_timeout(500)
                    assert page.locator("#pybullet-notes").is_hidden()
        finally:
            ctx.close()
