"""The Lab page's walk panel (templates/_walk_panel.html, static/js/walk_panel.js) in Debian's Chromium
(Playwright) against a real Lab server: the card and its hint outside walk, buttons and arrow keys that
command the feedback walker (checked through GET /api/walk), Esc that stops it, keys left alone while
typing, the state readouts and the three charts filling while it walks, a refused command shown inline,
the PD walk with what it reports, and the bearer token on a Lab that has one."""

import pytest
import requests

from tests.conftest import SCREENSHOTS, free_port, wait_until

pytestmark = pytest.mark.e2e


def walk_state(srv) -> dict:
    return requests.get(srv.url + "/api/walk", timeout=5).json()


def set_mode(srv, mode: str) -> None:
    r = requests.post(srv.url + "/api/mode", json={"mode": mode}, timeout=5)
    assert r.status_code == 200, r.text


def open_lab(srv, page):
    console = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.console_errors = console
    page.goto(srv.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    page.wait_for_selector("#walk-panel", state="visible", timeout=5000)
    page.evaluate("document.getElementById('walk-panel').scrollIntoView()")  # the charts draw while on screen


def held(page) -> dict:
    """The command the panel shows as held (data attributes of the readout; '' when not walking)."""
    return page.evaluate(
        "() => { const d = document.getElementById('walk-held').dataset;"
        " return {walking: d.walking, vx: d.vx, vy: d.vy, yaw_rate: d.yaw_rate, text: document.getElementById('walk-held').textContent}; }"
    )


def command_is(srv, vx, vy, yaw_rate):
    s = walk_state(srv)
    return s["walking"] and s["command"] == pytest.approx({"vx": vx, "vy": vy, "yaw_rate": yaw_rate}, abs=1e-9)


def no_errors(page, allow: str | None = None):
    """No script error; no console error but, with ``allow``, the browser's own line for a refusal the
    test asked for (e.g. "status of 400")."""
    assert not page.errors, page.errors
    left = [e for e in page.console_errors if not (allow and e.startswith("Failed to load resource") and allow in e)]
    assert not left, left


def test_the_walk_card_renders_with_its_controls_and_a_hint_outside_walk(lab_server, page):
    set_mode(lab_server, "stand")
    open_lab(lab_server, page)
    assert page.inner_text("#walk-title").startswith("Walk")
    assert page.locator("#walk-panel input[type=range]").count() == 3
    for act in ("forward", "back", "left", "right", "turn_left", "turn_right", "stop"):
        assert page.is_visible(f"#walk-pad button[data-act='{act}']"), act
    for key, unit in (("vx", "m/s"), ("vy", "m/s"), ("yaw_rate", "rad/s")):
        assert page.inner_text(f".walk-slider[data-key='{key}'] .walk-unit") == unit
    wait_until(lambda: page.inner_text("#walk-vy-bound") == "±0.15", 5)  # the bounds GET /api/walk gives
    assert page.get_attribute("#walk-vx-range", "max") == "0.3"
    # not walking: the hint, no state or charts
    assert page.is_visible("#walk-hint")
    assert "stand" in page.inner_text("#walk-hint")
    assert not page.is_visible("#walk-live")
    assert held(page)["text"] == "not walking"
    no_errors(page)


def test_buttons_and_arrow_keys_command_the_walker_and_esc_stops_it(lab_server, page):
    set_mode(lab_server, "stand")
    open_lab(lab_server, page)
    assert not walk_state(lab_server)["walking"]

    # outside walk, a button switches to walk with the command the panel shows (all zero, +0.05 forward)
    page.click("#walk-pad button[data-act='forward']")
    wait_until(lambda: command_is(lab_server, 0.05, 0.0, 0.0), 5)
    assert requests.get(lab_server.url + "/api/status", timeout=5).json()["mode"] == "walk"
    wait_until(lambda: held(page)["vx"] == "0.05", 5)
    assert held(page)["walking"] == "1"
    assert "vx +0.05 m/s" in held(page)["text"]
    wait_until(lambda: page.get_attribute("#modes button[data-mode='walk']", "class") == "on", 5)

    # the keys: Up +0.05 vx, Shift+Left +0.05 vy, Left +0.25 yaw rate (each one POST /api/walk)
    page.keyboard.press("ArrowUp")
    wait_until(lambda: command_is(lab_server, 0.10, 0.0, 0.0), 5)
    page.keyboard.press("Shift+ArrowLeft")
    wait_until(lambda: command_is(lab_server, 0.10, 0.05, 0.0), 5)
    page.keyboard.press("ArrowLeft")
    wait_until(lambda: command_is(lab_server, 0.10, 0.05, 0.25), 5)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    wait_until(lambda: command_is(lab_server, 0.05, 0.05, 0.0), 5)
    wait_until(lambda: held(page)["yaw_rate"] == "0" and held(page)["vx"] == "0.05", 5)
    assert page.input_value("#walk-vx-num") == "0.05"
    assert page.input_value("#walk-vy-num") == "0.05"

    # Esc stops, even with a panel button focused (Space is the page's pause: tests/test_keys_e2e.py)
    page.focus("#walk-pad button[data-act='forward']")
    page.keyboard.press("Escape")
    assert page.evaluate("window.walkPanel.target()") == {"vx": 0, "vy": 0, "yaw_rate": 0}
    wait_until(lambda: command_is(lab_server, 0.0, 0.0, 0.0), 5)
    wait_until(lambda: held(page)["vx"] == "0" and held(page)["vy"] == "0", 5)

    # typing elsewhere on the page: the arrow keys are that field's
    page.focus("#push-form input[name=force_n]")
    page.keyboard.press("ArrowUp")
    assert page.evaluate("window.walkPanel.target()") == {"vx": 0, "vy": 0, "yaw_rate": 0}
    page.evaluate("document.activeElement.blur()")

    # a slider: its value is sent
    page.evaluate(
        """() => { const s = document.getElementById('walk-yaw_rate-range');
                   s.value = '-0.5'; s.dispatchEvent(new Event('input', {bubbles: true})); }"""
    )
    wait_until(lambda: command_is(lab_server, 0.0, 0.0, -0.5), 5)
    page.click("#walk-pad button[data-act='stop']")
    wait_until(lambda: command_is(lab_server, 0.0, 0.0, 0.0), 5)
    assert not page.is_visible("#walk-error")
    no_errors(page)


def test_state_readouts_and_charts_fill_while_the_feedback_walker_walks(lab_server, page):
    requests.post(lab_server.url + "/api/reset", timeout=5)
    set_mode(lab_server, "walk")  # starts forward at 0.15 m/s
    open_lab(lab_server, page)
    page.wait_for_selector("#walk-live", state="visible", timeout=5000)
    assert not page.is_visible("#walk-hint")
    wait_until(lambda: page.inner_text("#w-controller") == "DCM feedback", 5)
    wait_until(lambda: held(page)["vx"] == "0.15", 5)

    def trace_len(plot, i):
        return page.evaluate(f"document.getElementById('{plot}').data[{i}].x.length")

    wait_until(lambda: trace_len("walk-plot-y", 0) > 5, 10)  # DCM, lateral
    n0 = trace_len("walk-plot-y", 0)
    wait_until(
        lambda: trace_len("walk-plot-y", 0) > n0 + 5 and trace_len("walk-plot-x", 5) > 10, 10
    )  # and CoM, sagittal
    s0 = int(page.inner_text("#w-step"))
    wait_until(lambda: int(page.inner_text("#w-step")) >= s0 + 2, 10)  # steps are taken
    phases = set()
    wait_until(lambda: phases.add(page.get_attribute("#w-phase", "data-phase")) or {"ss", "ds"} <= phases, 10)
    assert page.inner_text("#w-support") in ("left", "right", "both")
    assert page.inner_text("#w-saturated") in ("inside", "clamped")
    assert page.inner_text("#w-adjust").count(",") == 1
    # the top view: the support polygon, the planned footholds, the landed feet and the points
    wait_until(lambda: trace_len("walk-plot-top", 0) >= 4 and trace_len("walk-plot-top", 4) >= 5, 10)
    wait_until(lambda: trace_len("walk-plot-top", 1) + trace_len("walk-plot-top", 2) >= 12, 10)
    assert trace_len("walk-plot-top", 7) >= 5  # ZMP ref, DCM ref, CoP (when in contact), p*, DCM, CoM
    # the view follows the CoM
    xr = page.evaluate("document.getElementById('walk-plot-top').layout.xaxis.range")
    com_x = requests.get(lab_server.url + "/api/metrics", timeout=5).json()["com"][0]
    assert xr[0] < com_x < xr[1]
    assert "+0.15" in page.inner_text("#walk-held")

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#walk-panel").screenshot(path=str(SCREENSHOTS / "walk_panel.png"))
    no_errors(page)


def test_a_refused_command_shows_the_servers_error_and_hint_inline(lab_server, page):
    set_mode(lab_server, "walk")
    requests.post(lab_server.url + "/api/walk", json={"vx": 0.1, "vy": 0.0, "yaw_rate": 0.0}, timeout=5)
    open_lab(lab_server, page)
    wait_until(lambda: held(page)["vx"] == "0.1", 5)

    page.fill("#walk-vx-num", "0.5")  # the typed value is sent as it is; the server checks it
    page.press("#walk-vx-num", "Enter")
    err = page.wait_for_selector("#walk-error:not([hidden])", timeout=5000)
    assert "'vx' = 0.5 m/s is beyond the walker's bound ±0.3 m/s" in err.inner_text()
    assert "bounds: |vx| <= 0.3 m/s" in err.inner_text()
    assert page.input_value("#walk-vx-num") == "0.5"  # what was typed stays, next to the error
    assert command_is(lab_server, 0.1, 0.0, 0.0)  # nothing applied
    assert held(page)["vx"] == "0.1"

    # the next accepted command clears it
    page.keyboard.press("ArrowUp")
    wait_until(lambda: command_is(lab_server, 0.15, 0.0, 0.0), 5)
    wait_until(lambda: page.is_hidden("#walk-error"), 5)
    assert page.input_value("#walk-vx-num") == "0.15"

    # the API itself: 400 with error and hint, for a bound and a non-number
    for body in ({"vx": 0.31}, {"yaw_rate": -1.5}, {"vy": "fast"}, {"speed": 1}):
        r = requests.post(lab_server.url + "/api/walk", json=body, timeout=5)
        assert r.status_code == 400, body
        assert set(r.json()) >= {"error", "hint"}
    no_errors(page, allow="status of 400")


def test_walk_pd_shows_what_it_reports(lab_server, page):
    requests.post(lab_server.url + "/api/reset", timeout=5)
    set_mode(lab_server, "walk_pd")
    open_lab(lab_server, page)
    page.wait_for_selector("#walk-live", state="visible", timeout=5000)
    wait_until(lambda: page.inner_text("#w-controller") == "PD baseline", 5)
    wait_until(lambda: page.evaluate("document.getElementById('walk-plot-y').data.length") == 4, 5)
    wait_until(lambda: page.evaluate("document.getElementById('walk-plot-y').data[2].x.length") > 5, 10)  # CoM
    assert page.inner_text("#w-saturated") == "–"
    assert "walk_pd" in page.inner_text("#walk-sub")
    assert held(page)["text"] == "not walking"
    # a command from here switches to the feedback walker
    page.keyboard.press("Escape")
    wait_until(lambda: command_is(lab_server, 0.0, 0.0, 0.0), 5)
    wait_until(lambda: page.inner_text("#w-controller") == "DCM feedback", 5)
    no_errors(page)


@pytest.fixture(scope="module")
def token_server():
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(token="walk-secret", remote_url=f"http://127.0.0.1:{free_port()}")
    with ServerThread(app) as srv:
        wait_until(lambda: requests.get(srv.url + "/api/metrics", timeout=5).json()["sim_time"] > 0.05, 10)
        yield srv


def test_with_a_token_the_panel_sends_it_and_shows_a_401_without_it(token_server, page):
    open_lab(token_server, page)
    page.click("#walk-pad button[data-act='forward']")  # no token stored: refused, shown inline
    err = page.wait_for_selector("#walk-error:not([hidden])", timeout=5000)
    assert err.inner_text().strip()
    assert not walk_state(token_server)["walking"]
    page.evaluate("localStorage.setItem('labToken', 'walk-secret')")
    page.click("#walk-pad button[data-act='forward']")
    wait_until(lambda: command_is(token_server, 0.05, 0.0, 0.0), 5)
    wait_until(lambda: page.is_hidden("#walk-error"), 5)
    no_errors(page, allow="status of 401")
