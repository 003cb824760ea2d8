"""The Lab page in Debian's Chromium, driven by Playwright, against a real server."""

import time

import pytest
import requests

from tests.conftest import SCREENSHOTS, wait_until

pytestmark = pytest.mark.e2e


def canvas_png(page) -> str:
    return page.evaluate("document.getElementById('view').toDataURL('image/png')")


def test_lab_page_shows_the_live_robot_and_switches_every_mode(lab_server, page):
    page.goto(lab_server.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    wait_until(lambda: page.evaluate("window.labView.frames") >= 3, 20)
    first = canvas_png(page)
    requests.post(lab_server.url + "/api/mode", json={"mode": "squat"}, timeout=5)
    wait_until(lambda: canvas_png(page) != first, 15)  # the image changes as the robot moves

    for mode in ("squat", "push", "zero", "stand"):
        page.click(f"#modes button[data-mode='{mode}']")
        wait_until(lambda m=mode: requests.get(lab_server.url + "/api/status", timeout=5).json()["mode"] == m, 5)
        wait_until(lambda m=mode: page.get_attribute(f"#modes button[data-mode='{m}']", "class") == "on", 5)
    page.click("#reset")
    wait_until(lambda: float(page.inner_text("#m-sim_time")) > 1.0, 15)
    assert page.inner_text("#m-pelvis_z") != "–"
    time.sleep(1.0)  # let the curves fill a little for the screenshot
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "lab.png"), full_page=True)
    assert not page.errors, page.errors


def test_lab_page_shows_an_error_toast_for_bad_push_values(lab_server, page):
    page.goto(lab_server.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    page.fill("input[name=force_n]", "999")
    page.evaluate("document.querySelector('input[name=force_n]').removeAttribute('max')")
    page.click("#push-form button[type=submit]")
    toast = page.wait_for_selector(".toast.error", timeout=5000)
    assert "push force_n 999 is outside [0, 200]" in toast.inner_text()
