"""The Lab page's signal picker in Debian's Chromium (Playwright) against a real Lab server: search and
pick two signals, the chart draws both traces and they advance, a reconnect re-sends the pick, a bad
pick shows the server's error, chips drop signals and Clear stops the stream."""

import pytest

from tests.conftest import SCREENSHOTS, wait_until

pytestmark = pytest.mark.e2e

KNEE, FOOT = "q/left_knee_joint", "foot/left/fz"
COLORS = [(0x5F, 0xB3, 0xFF), (0xF3, 0x9A, 0x2E)]  # the first two trace colours of static/js/signals.js


def stats(page) -> dict:
    return page.evaluate("window.labSignals.stats()")


def pixels_near(page, rgb, tol: int = 40) -> int:
    """Pixels of the chart canvas within ``tol`` (per channel) of colour ``rgb``."""
    return page.evaluate(
        """([r, g, b, tol]) => {
          const c = document.getElementById('sig-chart');
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0;
          for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - r) < tol && Math.abs(d[i + 1] - g) < tol && Math.abs(d[i + 2] - b) < tol) n++;
          return n;
        }""",
        [*rgb, tol],
    )


def chips(page) -> list:
    return page.eval_on_selector_all("#sig-chips .sig-chip", "els => els.map((e) => e.dataset.name)")


def test_picking_two_signals_plots_two_traces_that_advance(lab_server, page):
    page.goto(lab_server.url + "/")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    wait_until(lambda: page.locator(".sig-item").count() > 100, 10)
    assert page.is_visible("#sig-hint") and page.is_disabled("#sig-clear")

    # search narrows the list; Enter picks the first match
    page.fill("#sig-search", "left knee")
    shown = page.eval_on_selector_all(".sig-item:not([hidden])", "els => els.map((e) => e.dataset.name)")
    assert KNEE in shown and "q/right_knee_joint" not in shown and "base/z" not in shown
    page.press("#sig-search", "Enter")
    page.fill("#sig-search", "foot fz")
    page.click(f".sig-item[data-name='{FOOT}']")
    assert chips(page) == [KNEE, FOOT]
    page.wait_for_selector("#sig-state[data-state='live']", timeout=10000)

    # the chart holds both and draws both colours; its samples and the drawing advance
    wait_until(lambda: stats(page)["traces"] == 2 and stats(page)["buffered"] >= 10, 15)
    wait_until(lambda: all(pixels_near(page, c) > 30 for c in COLORS), 10)
    first = page.evaluate("document.getElementById('sig-chart').toDataURL()")
    n0 = stats(page)["samples"]
    wait_until(lambda: stats(page)["samples"] >= n0 + 10, 15)
    wait_until(lambda: page.evaluate("document.getElementById('sig-chart').toDataURL()") != first, 10)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#signals-panel").screenshot(path=str(SCREENSHOTS / "lab_signals.png"))

    # a reconnect: the new socket is sent the pick again and the samples go on
    page.evaluate("window.__oldWs = window.labSocket.ws; window.labSocket.ws.close()")
    wait_until(
        lambda: page.evaluate("window.labSocket.ws !== window.__oldWs && window.labSocket.ws.readyState === 1"), 15
    )
    n1 = stats(page)["samples"]
    wait_until(lambda: stats(page)["samples"] >= n1 + 10, 15)
    assert stats(page)["traces"] == 2

    # a pick the server refuses: its error and hint, and the pick it streams stays
    page.evaluate("window.labSignals.pick(['q/left_knee'])")
    err = page.wait_for_selector("#sig-error:not([hidden])", timeout=10000)
    assert "unknown signal 'q/left_knee'; did you mean q/left_knee_joint" in err.inner_text()
    assert "GET /api/signals" in err.inner_text()
    wait_until(lambda: chips(page) == [KNEE, FOOT], 5)

    # a chip's × drops its signal; Clear drops them all and the stream stops
    page.click(f"#sig-chips .sig-chip[data-name='{FOOT}'] button")
    wait_until(lambda: stats(page)["traces"] == 1, 10)
    assert chips(page) == [KNEE] and page.is_hidden("#sig-error")
    page.click("#sig-clear")
    wait_until(lambda: stats(page)["traces"] == 0, 10)
    assert chips(page) == [] and page.is_visible("#sig-hint")
    page.wait_for_selector("#sig-state[data-state='idle']", timeout=5000)
    assert page.errors == []
