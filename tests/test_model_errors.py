"""Bad robot files end in one LabError line, never a traceback or a hang; MuJoCo's warnings go to logging."""

import json
import logging
import os
import subprocess
import sys
import textwrap

import mujoco
import numpy as np
import pytest

from lab.errors import LabError
from lab.robots.model import BUILTIN_URDF, load_robot
from tests.model_files import write_mesh_urdf, write_stl_box

ROOT = BUILTIN_URDF.parents[3]

FREE_BOX = """<mujoco><worldbody><body name="box" pos="0 0 1"><freejoint/>
  <geom type="box" size="0.1 0.1 0.1"/></body></worldbody></mujoco>"""
SLIDES_ONLY = """<mujoco><worldbody><body name="base" pos="0 0 1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/>
  <body name="slider"><joint name="lift" type="slide" axis="0 0 1"/><geom size="0.05"/></body>
  </body></worldbody></mujoco>"""
TWO_HINGES = """<mujoco><compiler meshdir="assets"/>{asset}
  <worldbody><body name="pelvis" pos="0 0 0.6"><freejoint/><geom {geom} mass="3"/>
    <body name="left_thigh" pos="0 0.05 -0.1"><joint name="left_hip_pitch_joint" axis="0 1 0" range="-1 1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.5"/>
      <body name="left_shin" pos="0 0 -0.2"><joint name="left_knee_joint" axis="0 1 0" range="0 2"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.3"/></body></body>
  </body></worldbody></mujoco>"""


def one_line(exc: LabError) -> str:
    text = f"{exc.message} ({exc.hint})"
    assert "\n" not in text and exc.hint
    return exc.message


def refused(path) -> str:
    with pytest.raises(LabError) as info:
        load_robot(path)
    return one_line(info.value)


def urdf_with_effort(tmp_path, value: str):
    """The Q1 URDF with the left knee's effort replaced by ``value``."""
    text = BUILTIN_URDF.read_text()
    head, sep, tail = text.partition('<joint name="left_knee_joint"')
    limit = tail.index('effort="')
    end = tail.index('"', limit + len('effort="'))
    path = tmp_path / "q1_effort.urdf"
    path.write_text(head + sep + tail[:limit] + f'effort="{value}"' + tail[end + 1 :])
    return path


def test_mjcf_without_hinge_joints_is_refused_with_one_line(tmp_path):
    box = tmp_path / "box.xml"
    box.write_text(FREE_BOX)
    assert refused(box) == "model box.xml: expected at least one hinge joint to drive, found none (joints: 1 free)"
    slides = tmp_path / "slides.xml"
    slides.write_text(SLIDES_ONLY)
    assert refused(slides) == (
        "model slides.xml: expected at least one hinge joint to drive, found none (joints: 1 free, 1 slide)"
    )


def test_body_without_any_joint_is_refused_like_one_without_hinges(tmp_path):
    path = tmp_path / "rock.xml"
    path.write_text('<mujoco><worldbody><body name="rock"><geom size="0.1"/></body></worldbody></mujoco>')
    assert "expected at least one hinge joint to drive, found none" in refused(path)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"gains": "x"}, "gains: expected a list of [pattern, kp, kd] entries"),
        ({"gains": "x"}, "got string 'x'"),
        ({"nominal": {"left_knee": "a"}}, "nominal['left_knee'] angle: expected a finite number, got string 'a'"),
        ({"nominal": [["knee", float("nan")]]}, "nominal[0] angle: expected a finite number, got nan"),
        ({"gains": [["knee", 1e999, 1]]}, "gains[0] kp: expected a finite number >= 0, got inf"),
        ({"gains": [["knee", -1, 1]]}, "gains[0] kp: expected a finite number >= 0, got -1"),
        ({"gains": [["knee", 150]]}, "gains[0]: expected [pattern, kp, kd], got a list of 2"),
        ({"gains": {"knee": 150}}, "gains['knee']: expected [kp, kd], got 150"),
        ({"gains": [[3, 150, 12]]}, "gains[0] pattern: expected a regular expression string, got 3"),
        ({"effort_default": [["knee", 0]]}, "effort_default[0] effort: expected a finite number > 0, got 0"),
        ({"torso_body": ["torso"]}, "torso_body: expected a regular expression string, got a list of 1"),
        ({"foot_bodies": "foot("}, "foot_bodies: expected a regular expression, got 'foot('"),
        ({"gravity_ff": "yes"}, "gravity_ff: expected true or false, got string 'yes'"),
        ({"gain": []}, "unknown key 'gain'; expected one of gains, nominal, effort_default"),
        ([["gains", 1]], "expected a JSON object with fields gains, nominal"),
    ],
)
def test_sidecar_config_with_a_wrong_value_is_refused_naming_the_key(tmp_path, config, message):
    path = write_mesh_urdf(tmp_path / "robot")
    sidecar = tmp_path / "robot" / "robot.urdf.lab.json"
    sidecar.write_text(json.dumps(config))
    text = refused(path)
    assert text.startswith(f"{sidecar}: ") and message in text


def test_sidecar_config_that_is_not_utf8_json_is_refused(tmp_path):
    path = write_mesh_urdf(tmp_path)
    (tmp_path / "robot.urdf.lab.json").write_bytes(b"\xff\xfe{")
    assert "expected UTF-8 JSON text, got undecodable bytes" in refused(path)
    (tmp_path / "robot.urdf.lab.json").write_text('{"gains": [}')
    assert "invalid JSON" in refused(path)


def test_sidecar_config_in_either_form_sets_gains_and_pose(tmp_path):
    path = write_mesh_urdf(tmp_path)
    (tmp_path / "robot.urdf.lab.json").write_text(
        json.dumps({"gains": {"knee": [90, 9]}, "nominal": [["knee", 0.5]], "gravity_ff": True})
    )
    r = load_robot(path)
    i = r.joint_names.index("left_knee_joint")
    assert (r.kp[i], r.kd[i], r.q_nominal[i]) == (90, 9, 0.5) and r.config.gravity_ff is True
    # a joint the sidecar's table does not match keeps what the model gives it ("auto")
    plain = load_robot(write_mesh_urdf(tmp_path / "plain"))
    j = r.joint_names.index("left_ankle_pitch_joint")
    assert r.kp[j] == plain.kp[j] and r.gain_method == plain.gain_method == "auto"


@pytest.mark.timeout(20, method="thread")  # a hang is in C: a signal cannot end it
def test_urdf_mesh_that_is_a_fifo_is_refused_before_it_is_opened(tmp_path):
    path = write_mesh_urdf(tmp_path)
    mesh = tmp_path / "meshes" / "torso.stl"
    mesh.unlink()
    os.mkfifo(mesh)
    assert refused(path) == (
        f"model robot.urdf references mesh 'meshes/torso.stl': expected a regular file, "
        f"found a named pipe (FIFO) at {mesh}"
    )


@pytest.mark.timeout(20, method="thread")  # a hang is in C: a signal cannot end it
def test_urdf_mesh_that_is_a_directory_or_a_device_is_refused(tmp_path):
    path = write_mesh_urdf(tmp_path)
    mesh = tmp_path / "meshes" / "torso.stl"
    mesh.unlink()
    mesh.mkdir()
    assert "expected a regular file, found a directory at" in refused(path)
    path.write_text(path.read_text().replace("meshes/torso.stl", "/dev/zero"))
    assert "references mesh '/dev/zero': expected a regular file, found a character device" in refused(path)


@pytest.mark.timeout(20, method="thread")  # a hang is in C: a signal cannot end it
def test_mjcf_mesh_or_include_that_is_a_fifo_is_refused_before_it_is_opened(tmp_path):
    (tmp_path / "assets").mkdir()
    os.mkfifo(tmp_path / "assets" / "body.stl")
    path = tmp_path / "walker.xml"
    path.write_text(
        TWO_HINGES.format(asset='<asset><mesh name="body" file="body.stl"/></asset>', geom='type="mesh" mesh="body"')
    )
    assert refused(path) == (
        "model walker.xml references mesh 'body.stl': expected a regular file, "
        f"found a named pipe (FIFO) at {tmp_path / 'assets' / 'body.stl'}"
    )
    os.mkfifo(tmp_path / "more.xml")
    path.write_text(TWO_HINGES.format(asset='<include file="more.xml"/>', geom='type="sphere" size="0.1"'))
    assert "references include 'more.xml': expected a regular file, found a named pipe (FIFO)" in refused(path)


@pytest.mark.timeout(20, method="thread")  # a hang is in C: a signal cannot end it
def test_model_or_sidecar_that_is_a_fifo_is_refused_before_it_is_opened(tmp_path):
    os.mkfifo(tmp_path / "robot.xml")
    assert refused(tmp_path / "robot.xml") == (
        f"model path is not a file: {tmp_path / 'robot.xml'} is a named pipe (FIFO), "
        "expected a regular .urdf or .xml file"
    )
    path = write_mesh_urdf(tmp_path / "r")
    os.mkfifo(tmp_path / "r" / "robot.urdf.lab.json")
    assert (
        refused(path)
        == f"{tmp_path / 'r' / 'robot.urdf.lab.json'}: expected a regular JSON file, found a named pipe (FIFO)"
    )


def test_mjcf_with_a_regular_mesh_still_loads_after_the_file_checks(tmp_path):
    (tmp_path / "assets").mkdir()
    write_stl_box(tmp_path / "assets" / "body.stl", 0.1, 0.1, 0.2)
    path = tmp_path / "walker.xml"
    path.write_text(
        TWO_HINGES.format(asset='<asset><mesh name="body" file="body.stl"/></asset>', geom='type="mesh" mesh="body"')
    )
    r = load_robot(path)
    assert r.model.nmesh == 1 and r.actuator_names == ["motor_left_hip_pitch", "motor_left_knee"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-5", "abc", ""])
def test_urdf_effort_that_is_not_a_finite_positive_number_is_refused(tmp_path, value):
    assert refused(urdf_with_effort(tmp_path, value)) == (
        f"model q1_effort.urdf: joint left_knee_joint: effort '{value}' is not a finite positive number"
    )


def test_urdf_effort_zero_means_a_limit_from_the_gains_and_the_standing_load(tmp_path):
    r = load_robot(urdf_with_effort(tmp_path, "0"))
    i = r.joint_names.index("left_knee_joint")
    assert r.tau_limit[i] == pytest.approx(max(0.4 * r.kp[i], 2.5 * abs(r.stance_tau[i])))
    assert r.model.actuator_ctrlrange[i].tolist() == [-r.tau_limit[i], r.tau_limit[i]]
    (tmp_path / "q1_effort.urdf.lab.json").write_text('{"gain_method": "names"}')  # the name table's default
    assert load_robot(tmp_path / "q1_effort.urdf").tau_limit[i] == 60.0


def test_mjcf_actuator_with_an_infinite_ctrlrange_is_refused(tmp_path):
    path = tmp_path / "inf.xml"
    path.write_text(
        TWO_HINGES.format(asset="", geom='type="sphere" size="0.1"').replace(
            "</mujoco>",
            '<actuator><motor name="m" joint="left_knee_joint" ctrllimited="true" ctrlrange="-inf inf"/>'
            "</actuator></mujoco>",
        )
    )
    assert refused(path) == "model inf.xml: actuator m: torque limit inf is not a finite number"


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe\x00<mujoco>\x01\x02", b"<robot name='x'><link name='a'>", b"just text", b""],
    ids=["binary", "broken-urdf", "text", "empty"],
)
def test_file_that_is_not_a_model_is_refused_with_one_line(tmp_path, content):
    path = tmp_path / "junk.xml"
    path.write_bytes(content)
    assert refused(path).startswith(("model junk.xml does not load", f"model {path} is not valid XML"))


def test_any_other_exception_while_loading_becomes_a_lab_error(tmp_path, monkeypatch):

    def boom(*args):
        raise mujoco.FatalError("mj_forward: something broke\nsecond line")

    from lab.robots import tuning

    monkeypatch.setattr(tuning, "derive", boom)
    path = write_mesh_urdf(tmp_path)
    assert refused(path) == "model robot.urdf does not load: FatalError: mj_forward: something broke"
    monkeypatch.setattr(tuning, "derive", lambda *a: (_ for _ in ()).throw(UnicodeDecodeError("utf-8", b"", 0, 1, "x")))
    assert refused(path).startswith("model robot.urdf does not load: UnicodeDecodeError:")


def _bad_models(tmp_path) -> dict:
    """One bad file per family, and the message its one stderr line must carry."""
    box = tmp_path / "box.xml"
    box.write_text(FREE_BOX)
    cfg = write_mesh_urdf(tmp_path / "cfg")
    (tmp_path / "cfg" / "robot.urdf.lab.json").write_text('{"nominal": {"knee": "a"}}')
    fifo = write_mesh_urdf(tmp_path / "fifo")
    (tmp_path / "fifo" / "meshes" / "torso.stl").unlink()
    os.mkfifo(tmp_path / "fifo" / "meshes" / "torso.stl")
    junk = tmp_path / "junk.xml"
    junk.write_bytes(b"\xff\xfe\x00<mujoco>\x01")
    return {
        "no-hinge": (box, "model box.xml: expected at least one hinge joint to drive, found none (joints: 1 free)"),
        "sidecar": (cfg, "robot.urdf.lab.json: nominal['knee'] angle: expected a finite number, got string 'a'"),
        "fifo-mesh": (fifo, "references mesh 'meshes/torso.stl': expected a regular file, found a named pipe (FIFO)"),
        "effort": (urdf_with_effort(tmp_path, "nan"), "joint left_knee_joint: effort 'nan' is not a finite positive"),
        "not-a-model": (junk, "model junk.xml does not load"),
    }


@pytest.mark.timeout(90)
@pytest.mark.parametrize("family", ["no-hinge", "sidecar", "fifo-mesh", "effort", "not-a-model"])
def test_app_ends_with_one_error_line_and_code_2_for_a_bad_model(tmp_path, family):
    path, message = _bad_models(tmp_path)[family]
    p = subprocess.run(
        [sys.executable, "app.py", "lab", "--model", str(path), "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ") and lines[0].endswith(")") and message in lines[0]
    assert " (" in lines[0]  # the hint


def test_mujoco_warnings_go_to_the_lab_mujoco_logger(caplog):
    import lab  # noqa: F401  (installs the handler)

    m = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><freejoint/><geom size='0.1'/></body></worldbody></mujoco>"
    )
    d = mujoco.MjData(m)
    d.qfrc_applied[:] = np.nan
    with caplog.at_level(logging.WARNING, logger="lab.mujoco"):
        mujoco.mj_step(m, d)
    assert d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number == 1
    assert [(r.name, r.levelno) for r in caplog.records] == [("lab.mujoco", logging.WARNING)]
    assert "QACC" in caplog.records[0].getMessage()


DIVERGE = textwrap.dedent(
    """
    import mujoco, numpy as np
    import lab
    from lab.robots.model import load_robot
    from lab.sim.mujoco_engine import MujocoEngine
    engine = MujocoEngine(load_robot())
    engine.reset()
    engine.data.qfrc_applied[:] = np.nan
    engine.step(np.zeros(engine.model.nu))
    engine.data.ctrl[:] = np.nan
    mujoco.mj_step(engine.model, engine.data)
    print("badqacc", engine.data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number)
    print("divergence", engine.divergence())
    """
)


@pytest.mark.timeout(90)
def test_a_diverging_simulation_writes_no_mujoco_log_into_the_working_directory(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [sys.executable, "-c", DIVERGE], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env
    )
    assert p.returncode == 0, p.stderr
    assert "badqacc 1" in p.stdout and "divergence bad acceleration" in p.stdout
    assert "Nan, Inf or huge value in QACC" in p.stderr  # logged (Python's last-resort handler: stderr)
    assert "WARNING:" not in p.stdout  # MuJoCo's own handler no longer prints
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert list(tmp_path.iterdir()) == []
