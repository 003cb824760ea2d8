"""The Sim2Sim page in Debian's Chromium, driven by Playwright, against a real Sim2Sim server (whose mode
registry has one test mode more, which raises once)."""

import re
import time

import pytest
import requests

from lab.runtime.modes import SIM2SIM_MODES
from lab.web.server import ServerThread
from lab.web.sim2sim import create_sim2sim_app
from tests.conftest import SCREENSHOTS, wait_until
from tests.fault_modes import RaisesOnce, with_faults

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def s2s_server():
    app = create_sim2sim_app(fps=30, modes=with_faults(SIM2SIM_MODES, RaisesOnce))
    with ServerThread(app) as srv:
        yield srv


def canvas_png(page, view: str) -> str:
    """A view's pixels as a PNG data URL (FrameView.snapshot: the frame worker owns the canvas)."""
    return page.evaluate(f"window.s2s.views['{view}'].snapshot()")


def frames(page, view: str) -> int:
    return page.evaluate(f"window.s2s.views['{view}'].frames")


def status(srv) -> dict:
    return requests.get(srv.url + "/api/status", timeout=5).json()


def test_sim2sim_page_shows_both_engines_live_and_switches_modes(s2s_server, page):
    page.goto(s2s_server.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    assert page.inner_text("#label-mujoco") == "MuJoCo 4.0.0"
    assert page.inner_text("#label-pybullet") == "PyBullet 3.2.7"
    wait_until(lambda: frames(page, "mujoco") >= 3 and frames(page, "pybullet") >= 3, 20)
    before = {v: canvas_png(page, v) for v in ("mujoco", "pybullet")}

    page.click("#modes button[data-mode='zero']")  # both robots fall: both images change
    wait_until(lambda: status(s2s_server)["mode"] == "zero", 5)
    wait_until(lambda: page.get_attribute("#modes button[data-mode='zero']", "class") == "on", 5)
    for v in ("mujoco", "pybullet"):
        wait_until(lambda v=v: canvas_png(page, v) != before[v], 15)
    wait_until(lambda: page.inner_text("#r-mujoco-fall_time") != "standing", 10)
    wait_until(lambda: page.inner_text("#r-pybullet-fall_time") != "standing", 10)

    for mode in ("squat", "push", "stand"):
        page.click(f"#modes button[data-mode='{mode}']")
        wait_until(lambda m=mode: status(s2s_server)["mode"] == m, 5)
        wait_until(lambda m=mode: page.get_attribute(f"#modes button[data-mode='{m}']", "class") == "on", 5)
    resets = status(s2s_server)["sim"]["resets"]
    page.click("#reset")
    wait_until(lambda: status(s2s_server)["sim"]["resets"] == resets + 1, 10)
    # the page may still show a sample taken before the reset: wait for the fall to clear, then for time to pass
    wait_until(lambda: page.inner_text("#r-mujoco-fall_time") == "standing", 10)
    wait_until(lambda: page.inner_text("#r-pybullet-fall_time") == "standing", 10)
    wait_until(lambda: float(page.inner_text("#m-sim_time")) > 1.0, 20)
    assert page.inner_text("#r-mujoco-fall_time") == "standing"  # standing 1 s after the reset
    assert page.inner_text("#d-joint_rms") != "–" and page.inner_text("#r-pybullet-pelvis_z") != "–"

    page.check("#overlay")  # the overlay view appears and streams
    assert page.is_visible("#card-overlay")
    wait_until(lambda: frames(page, "overlay") >= 2, 20)
    page.click("#modes button[data-mode='push']")
    wait_until(lambda: status(s2s_server)["mode"] == "push", 5)
    time.sleep(2.0)  # a push lands at 1 s into the mode: let the curves show it for the screenshot
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sim2sim.png"), full_page=True)
    page.uncheck("#overlay")
    assert not page.is_visible("#card-overlay")
    assert not page.errors, page.errors


def test_sim2sim_page_shows_an_error_toast_for_bad_push_values(s2s_server, page):
    page.goto(s2s_server.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    page.fill("input[name=force_n]", "9999")
    page.evaluate("document.querySelector('input[name=force_n]').removeAttribute('max')")
    page.click("#push-form button[type=submit]")
    toast = page.wait_for_selector(".toast.error", timeout=5000)
    assert "push force_n 9999 is outside [0, 2000]" in toast.inner_text()


def banners(page) -> list:
    """Each engine view's simulation banner: shown, words, background (r, g, b), inside the viewport."""
    return page.evaluate(
        """() => ['mujoco', 'pybullet'].map((v) => {
        const el = document.getElementById(`sim-${v}`);
        const r = el.getBoundingClientRect();
        const rgb = getComputedStyle(el).backgroundColor.match(/[\\d.]+/g).slice(0, 3).map(Number);
        return {shown: !el.hidden && r.height > 0, text: el.textContent, rgb,
                in_view: r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0};
    })"""
    )


def test_sim2sim_page_shows_an_error_in_red_over_both_views_until_reset_both(s2s_server, page):
    RaisesOnce.raised = False
    page.goto(s2s_server.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    assert not any(b["shown"] for b in banners(page))
    page.click("#modes button[data-mode='raises']")
    wait_until(lambda: status(s2s_server)["sim"]["state"] == "error", 10)
    page.wait_for_function("!document.getElementById('sim-pybullet').hidden", timeout=5000)
    at = status(s2s_server)["sim"]["at"]
    for b in banners(page):
        words = re.fullmatch(r"Simulation error at t=(\d+\.\d) s: (.*) — press Reset both", b["text"])
        assert words and words[2] == "RuntimeError: the test mode raised on purpose", b["text"]
        assert abs(float(words[1]) - at) <= 0.051
        r, g, bl = b["rgb"]
        assert r > 170 and g < 90 and bl < 110 and b["in_view"], b
    page.wait_for_timeout(300)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sim2sim_error.png"))
    page.click("#reset")
    page.wait_for_function("document.getElementById('sim-mujoco').hidden", timeout=5000)
    assert status(s2s_server)["sim"]["state"] == "running" and not any(b["shown"] for b in banners(page))
    page.click("#modes button[data-mode='stand']")
    assert not page.errors, page.errors
