"""The keyboard shortcuts (static/js/keys.js) and the frames drawn off the main thread (socket.js FrameView,
static/js/frame_worker.js) in Debian's Chromium (Playwright) against real Lab and Sim2Sim servers: each
key does what its list says (checked through the HTTP API), none fires while typing or with Ctrl held,
`?` shows the list, and the view's frames are drawn by the worker (or on the main thread with ?draw=main)."""

import base64
import io

import pytest
import requests
from PIL import Image

from lab.web.server import ServerThread
from lab.web.sim2sim import create_sim2sim_app
from tests.conftest import SCREENSHOTS, wait_until

pytestmark = pytest.mark.e2e

# words the Lab's list shows: its own keys, the 3D view's and the walk panel's
LAB_LIST = ("Space", "pause / resume", "Backspace", "reset", "mode: stand", "contact overlay", "camera follows")
LAB_LIST += ("all overlays", "walk: forward / back", "Shift", "walk: stop")


def status(srv) -> dict:
    return requests.get(srv.url + "/api/status", timeout=5).json()


def open_page(srv, page, path: str = "/") -> None:
    page.goto(srv.url + path)
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    page.wait_for_selector("#keys-hint", timeout=5000)


def press(page, key: str) -> None:
    """A key pressed with nothing focused (the page's body)."""
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press(key)


@pytest.fixture()
def running(lab_server):
    """The Lab in `stand`, running (a test before may have left it paused or elsewhere)."""
    requests.post(lab_server.url + "/api/pause", json={"paused": False}, timeout=5)
    requests.post(lab_server.url + "/api/mode", json={"mode": "stand"}, timeout=5)
    return lab_server


def test_space_pauses_and_resumes_the_lab_even_with_a_button_focused(running, page):
    open_page(running, page)
    press(page, " ")
    wait_until(lambda: status(running)["paused"], 5)
    page.wait_for_function("document.getElementById('pause').textContent === 'Resume'", timeout=5000)
    page.focus("#reset")  # Space on a focused button: the shortcut, not a click on the button
    resets = status(running)["sim"]["resets"]
    page.keyboard.press(" ")
    wait_until(lambda: not status(running)["paused"], 5)
    assert status(running)["sim"]["resets"] == resets
    assert not page.errors, page.errors


@pytest.mark.parametrize("key", ["r", "Backspace"])
def test_r_and_backspace_reset_the_simulation_time_to_near_zero(running, page, key):
    open_page(running, page)
    wait_until(lambda: status(running)["sim_time"] > 1.5, 20)
    before = status(running)
    press(page, key)
    wait_until(lambda: status(running)["sim"]["resets"] == before["sim"]["resets"] + 1, 10)
    assert status(running)["sim_time"] < before["sim_time"]  # started again from 0
    assert not page.errors, page.errors


def test_number_keys_select_the_pages_first_five_modes(running, page):
    open_page(running, page)
    modes = page.eval_on_selector_all("#modes button", "bs => bs.map(b => b.dataset.mode)")
    press(page, "2")
    wait_until(lambda: status(running)["mode"] == modes[1], 5)
    wait_until(lambda: page.get_attribute(f"#modes button[data-mode='{modes[1]}']", "class") == "on", 5)
    press(page, "1")
    wait_until(lambda: status(running)["mode"] == modes[0], 5)
    assert not page.errors, page.errors


def test_no_shortcut_fires_while_typing_or_with_ctrl_held(running, page):
    open_page(running, page)
    first = status(running)["mode"]
    page.click("#push-form input[name=force_n]")
    page.keyboard.press("End")
    page.keyboard.type("2")  # a digit typed into the field is the field's
    page.keyboard.press(" ")
    assert page.input_value("#push-form input[name=force_n]").endswith("2")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Control+2")  # the browser's (a tab switch), not the page's
    page.keyboard.press("Alt+r")
    # the next key the page does take proves the ones before it reached the page and were ignored
    press(page, "?")
    page.wait_for_selector("#keys-help", state="visible", timeout=5000)
    s = status(running)
    assert s["mode"] == first and not s["paused"], s
    assert not page.errors, page.errors


def test_question_mark_lists_every_shortcut_and_esc_hides_it(running, page):
    open_page(running, page)
    assert page.is_hidden("#keys-help")
    press(page, "?")
    page.wait_for_selector("#keys-help", state="visible", timeout=5000)
    text = page.inner_text("#keys-help")
    for words in LAB_LIST:
        assert words in text, (words, text)
    modes = page.eval_on_selector_all("#modes button", "bs => bs.map(b => b.dataset.mode)")
    assert all(f"mode: {m}" in text for m in modes[:5]) and f"mode: {modes[5]}" not in text
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "keys_lab.png"))
    page.keyboard.press("Escape")
    page.wait_for_selector("#keys-help", state="hidden", timeout=5000)
    page.click("#keys-hint")  # the button by the view opens it; `?` closes it
    page.wait_for_selector("#keys-help", state="visible", timeout=5000)
    press(page, "?")
    page.wait_for_selector("#keys-help", state="hidden", timeout=5000)
    page.wait_for_function("document.querySelector('#modes button.on').dataset.mode === 'stand'", timeout=5000)
    assert status(running)["mode"] == "stand"  # Esc closing the list did not also reach the walk panel
    assert not page.errors, page.errors


def test_view_keys_call_the_3d_view_or_say_it_is_not_available(running, page):
    open_page(running, page)
    page.evaluate("""() => { window.calls = []; window.labView3d = {
        toggleOverlay: (n) => calls.push(`overlay ${n}`), toggleFollow: () => calls.push('follow'),
        toggleOverlays: () => calls.push('overlays') }; }""")  # whatever view3d.js provides, these three
    for key in "cfo":
        press(page, key)
    assert page.evaluate("window.calls") == ["overlay contacts", "follow", "overlays"]
    page.evaluate("delete window.labView3d")
    press(page, "c")
    toast = page.wait_for_selector(".toast", timeout=5000)
    assert "contact overlay: not available" in toast.inner_text()
    assert not page.errors, page.errors


def png_size(data_url: str) -> tuple[int, int]:
    img = Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1])))
    assert img.getextrema() != ((0, 0), (0, 0), (0, 0), (255, 255)), "the snapshot is blank"
    return img.size


@pytest.mark.parametrize("draw", ["worker", "main"])
def test_frames_are_drawn_by_the_worker_in_chromium_or_on_the_main_thread_when_asked(running, page, draw):
    open_page(running, page, "/" if draw == "worker" else "/?draw=main")
    wait_until(lambda: page.evaluate("window.labView.fps()") > 0, 20)
    info = page.evaluate("window.labView.info()")
    render = status(running)["render"]
    assert info["drawer"] == draw and info["frames"] > 0, info
    assert (info["width"], info["height"]) == (render["width"], render["height"])
    assert png_size(page.evaluate("window.labView.snapshot()")) == (render["width"], render["height"])
    box = page.locator("#view").bounding_box()  # the element's displayed size, for the camera's pointer maths
    assert box["width"] > 100 and box["height"] > 100
    assert not page.errors, page.errors


@pytest.fixture(scope="module")
def s2s_server():
    with ServerThread(create_sim2sim_app(fps=30)) as srv:
        yield srv


def test_sim2sim_keys_pause_and_select_modes_and_its_views_draw_in_workers(s2s_server, page):
    open_page(s2s_server, page)
    wait_until(lambda: all(page.evaluate(f"window.s2s.views['{v}'].fps()") > 0 for v in ("mujoco", "pybullet")), 30)
    assert page.evaluate("Object.values(window.s2s.views).map(v => v.info().drawer)") == ["worker"] * 3
    press(page, "4")
    wait_until(lambda: status(s2s_server)["mode"] == "zero", 5)
    press(page, " ")
    wait_until(lambda: status(s2s_server)["paused"], 5)
    press(page, "?")
    page.wait_for_selector("#keys-help", state="visible", timeout=5000)
    text = page.inner_text("#keys-help")
    assert "pause / resume both engines" in text and "mode: walk" in text and "walk: forward" not in text
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "keys_sim2sim.png"))
    press(page, " ")
    wait_until(lambda: not status(s2s_server)["paused"], 5)
    assert not page.errors, page.errors


def test_remote_monitor_lists_the_view_keys_only(lab_server, page):
    page.goto(lab_server.url + "/remote")
    page.wait_for_selector("#keys-hint", timeout=15000)
    page.click("#keys-hint")
    text = page.inner_text("#keys-help")
    assert "contact overlay" in text and "camera follows" in text and "pause" not in text
    assert page.evaluate("window.remoteView.info().drawer") == "worker"
    assert not page.errors, page.errors
