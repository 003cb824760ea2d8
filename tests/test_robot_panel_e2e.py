"""The robot panel of the Lab page in Debian's Chromium (Playwright) against a real Lab server: the
joint table, an edited gain applied live, a refused value shown inline, and the pose mode's sliders."""

import shutil

import pytest
import requests

from tests.conftest import SCREENSHOTS, wait_until

pytestmark = pytest.mark.e2e


def robot_json(srv) -> dict:
    return requests.get(srv.url + "/api/robot", timeout=5).json()


def joint(srv, name) -> dict:
    return next(j for j in robot_json(srv)["joints"] if j["name"] == name)


def row(name: str) -> str:
    return f"#robot-rows tr[data-joint='{name}']"


def test_robot_panel_lists_the_joints_applies_a_gain_and_shows_sliders_in_pose_mode(lab_server, page):
    page.goto(lab_server.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    page.wait_for_selector(f"{row('head_yaw_joint')} td.tau", timeout=10000)
    assert page.locator("#robot-rows tr[data-joint]").count() == 22
    wait_until(lambda: page.inner_text(f"{row('left_knee_joint')} td.tau") not in ("", "–"), 5)  # live torque
    assert page.locator(".pose-slider:visible").count() == 0  # sliders only in pose mode

    # edit a kp, Apply: the running controller has it
    page.fill(f"{row('left_knee_joint')} input.kp", "175")
    assert page.is_enabled("#robot-apply")
    page.click("#robot-apply")
    wait_until(lambda: joint(lab_server, "left_knee_joint")["kp"] == 175.0, 5)
    assert joint(lab_server, "left_knee_joint")["kd"] == 12.0
    wait_until(lambda: page.is_disabled("#robot-apply"), 5)

    # a value outside the joint range: the server's error and hint inline, nothing applied
    page.fill(f"{row('left_knee_joint')} input.nominal", "9")
    page.click("#robot-apply")
    err = page.wait_for_selector("#robot-error:not([hidden])", timeout=5000)
    assert "value 9 is outside joint left_knee_joint range [-0.05, 2.4]" in err.inner_text()
    assert joint(lab_server, "left_knee_joint")["nominal"] == 0.6
    page.click("#robot-revert")
    assert page.input_value(f"{row('left_knee_joint')} input.nominal") == "0.6"

    # pose mode: one slider per joint; moving one moves that joint's target
    page.click("#robot-to-pose")
    wait_until(lambda: page.locator(".pose-slider:visible").count() == 22, 5)
    assert requests.get(lab_server.url + "/api/status", timeout=5).json()["mode"] == "pose"
    wait_until(lambda: page.get_attribute("#modes button[data-mode='pose']", "class") == "on", 5)
    page.evaluate(
        """() => { const s = document.querySelector("tr[data-joint='left_elbow_joint'] .pose-slider");
                   s.value = '-1.2'; s.dispatchEvent(new Event('input', {bubbles: true})); }"""
    )
    wait_until(lambda: joint(lab_server, "left_elbow_joint")["target"] == pytest.approx(-1.2, abs=0.003), 5)
    wait_until(lambda: abs(joint(lab_server, "left_elbow_joint")["error"]) < 0.05, 10)
    assert not page.is_visible("#robot-error")

    page.evaluate("window.scrollTo(0, 0)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "robot_panel.png"), full_page=True)
    shutil.copy(SCREENSHOTS / "robot_panel.png", "/tmp/robot_panel.png")
    assert not page.errors, page.errors
    requests.post(lab_server.url + "/api/mode", json={"mode": "stand"}, timeout=5)
