"""The Lab page in Debian's Chromium, driven by Playwright, against a real server (and one whose mode
registry has two test modes that fail: one raises, one gives NaN targets)."""

import re
import time

import pytest
import requests

from tests.conftest import SCREENSHOTS, wait_until
from tests.fault_modes import LateNanTargets, RaisesOnce, with_faults

pytestmark = pytest.mark.e2e


def canvas_png(page) -> str:
    """The view's pixels as a PNG data URL (FrameView.snapshot: the frame worker owns the canvas)."""
    return page.evaluate("window.labView.snapshot()")


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
    page.fill("input[name=force_n]", "9999")
    page.evaluate("document.querySelector('input[name=force_n]').removeAttribute('max')")
    page.click("#push-form button[type=submit]")
    toast = page.wait_for_selector(".toast.error", timeout=5000)
    assert "push force_n 9999 is outside [0, 2000]" in toast.inner_text()


@pytest.fixture()
def faulty_lab():
    """The real Lab app whose mode registry has the two test modes, served on a free port."""
    from lab.runtime.modes import LAB_MODES
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    RaisesOnce.raised = False
    modes = with_faults(LAB_MODES, RaisesOnce, LateNanTargets)
    app = create_lab_app(modes=modes, remote_url="")
    with ServerThread(app) as srv:
        yield srv


def sim_state(srv) -> dict:
    return requests.get(srv.url + "/api/status", timeout=5).json()["sim"]


def banner(page) -> dict:
    """The simulation banner: shown, its words, its background colour (r, g, b) and whether it is in the viewport."""
    return page.evaluate(
        """() => {
        const el = document.getElementById('sim-banner');
        const r = el.getBoundingClientRect();
        const rgb = getComputedStyle(el).backgroundColor.match(/[\\d.]+/g).slice(0, 3).map(Number);
        return {shown: !el.hidden && r.height > 0, text: el.textContent, rgb,
                in_view: r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0};
    }"""
    )


def is_red(rgb) -> bool:
    r, g, b = rgb
    return r > 170 and g < 90 and b < 110


def test_lab_page_shows_an_error_and_a_divergence_in_red_over_the_view_until_reset(faulty_lab, page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(faulty_lab.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    wait_until(lambda: page.evaluate("window.labView.frames") >= 2, 20)
    assert not banner(page)["shown"]

    page.click("#modes button[data-mode='raises']")
    wait_until(lambda: sim_state(faulty_lab)["state"] == "error", 10)
    page.wait_for_function("!document.getElementById('sim-banner').hidden", timeout=5000)
    b = banner(page)
    words = re.fullmatch(r"Simulation error at t=(\d+\.\d) s: (.*) — press Reset", b["text"])
    assert words and words[2] == "RuntimeError: the test mode raised on purpose", b["text"]
    assert abs(float(words[1]) - sim_state(faulty_lab)["at"]) <= 0.051
    assert is_red(b["rgb"]) and b["in_view"], b
    page.wait_for_timeout(300)
    page.screenshot(path=str(SCREENSHOTS / "lab_error.png"))

    page.click("#reset")
    page.wait_for_function("document.getElementById('sim-banner').hidden", timeout=5000)
    assert sim_state(faulty_lab)["state"] == "running"

    page.click("#modes button[data-mode='nan']")
    page.wait_for_function(
        "document.getElementById('sim-banner').textContent.startsWith('Simulation diverged at t=')", timeout=10000
    )
    b = banner(page)
    assert sim_state(faulty_lab)["state"] == "diverged"
    assert (
        "MuJoCo: bad control" in b["text"] and b["text"].endswith("— press Reset") and is_red(b["rgb"]) and b["in_view"]
    ), b
    page.screenshot(path=str(SCREENSHOTS / "lab_diverged.png"))
    page.click("#modes button[data-mode='stand']")
    page.click("#reset")
    page.wait_for_function("document.getElementById('sim-banner').hidden", timeout=5000)
    wait_until(lambda: float(page.inner_text("#m-sim_time")) > 0.5, 10)
    assert sim_state(faulty_lab)["state"] == "running" and not banner(page)["shown"]
    assert not page.errors, page.errors


def test_lab_page_says_paused_without_red_and_when_the_robot_fell(lab_server, page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(lab_server.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    page.click("#pause")
    page.wait_for_function(
        "document.getElementById('sim-banner').textContent.startsWith('Simulation paused at t=')", timeout=5000
    )
    b = banner(page)
    assert b["text"].endswith("— press Resume") and b["in_view"] and not is_red(b["rgb"]), b
    page.screenshot(path=str(SCREENSHOTS / "lab_paused.png"))
    page.click("#pause")
    page.wait_for_function("document.getElementById('sim-banner').hidden", timeout=5000)

    page.click("#modes button[data-mode='zero']")  # control off: the robot falls
    page.wait_for_function("document.getElementById('m-fall').textContent.startsWith('fell at')", timeout=15000)
    fell = requests.get(lab_server.url + "/api/status", timeout=5).json()["fall_time"]
    shown = re.fullmatch(r"fell at (\d+\.\d) s", page.inner_text("#m-fall"))
    assert shown and abs(float(shown[1]) - fell) <= 0.051
    assert page.text_content("#fall-badge") == page.inner_text("#m-fall") and page.is_visible("#fall-badge")
    assert page.inner_text("#m-support") == "fallen"
    page.wait_for_timeout(1500)
    page.screenshot(path=str(SCREENSHOTS / "lab_fallen.png"))
    page.click("#modes button[data-mode='stand']")
    page.click("#reset")
    page.wait_for_function("document.getElementById('m-fall').textContent === 'standing'", timeout=5000)
    assert not page.is_visible("#fall-badge")
    assert not page.errors, page.errors
