"""The scans page in real Chromium against the real Lab app: launch a scan from the form, watch the
heatmap cells fill in, open a cell's run (numbers and figure). Screenshots in results/screenshots/."""

import time

import pytest

from tests.conftest import SCREENSHOTS, free_port


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(
        results_dir=tmp_path_factory.mktemp("scans_page"), start=False, remote_url=f"http://127.0.0.1:{free_port()}"
    )
    with ServerThread(app) as srv:
        yield srv.url


@pytest.mark.e2e
def test_a_scan_launched_from_the_page_fills_its_heatmap_cell_by_cell_and_opens_a_cells_run(lab, page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(f"{lab}/scans")
    page.select_option("#kind", "push_recovery")
    page.fill("input[data-param=duration_s]", "0.1, 0.2")
    page.fill("input[data-param=force_n]", "20:90:70")
    page.fill(
        "input[data-param=seconds]", "20"
    )  # >= 0.5 s per 20 N point even warm: 3 in-between states outlast the 1 s poll
    page.fill("#workers", "1")
    assert page.text_content("#count") == "4 points (2 × 2)"
    page.click("#launch")

    seen, shot_mid = [], False
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        filled = int(page.get_attribute("#heatmap", "data-filled") or 0)
        if not seen or seen[-1] != filled:
            seen.append(filled)
        if 0 < filled < 4 and not shot_mid:
            page.screenshot(path=str(SCREENSHOTS / "scans_filling.png"))
            shot_mid = True
        if filled == 4:
            break
        time.sleep(0.1)
    assert seen[-1] == 4, seen
    assert any(0 < n < 4 for n in seen), f"cells did not fill one by one: {seen}"
    page.wait_for_function("document.getElementById('d-status').textContent === 'done'", timeout=15000)
    assert "4 / 4 points" in page.text_content("#d-progress")
    assert page.locator("#d-summary table tbody tr").count() == 2  # a threshold row per push duration
    texts = page.evaluate("Array.from(document.querySelectorAll('#heatmap .textpoint')).map(t => t.textContent)")
    assert sum("PASS" in t for t in texts) == 2 and sum("FAIL" in t for t in texts) == 2, texts
    page.screenshot(path=str(SCREENSHOTS / "scans_done.png"), full_page=True)

    xy = page.evaluate(
        """() => { const el = document.getElementById('heatmap'), fl = el._fullLayout, r = el.getBoundingClientRect();
                   return [r.left + fl._size.l + fl.xaxis.l2p(1), r.top + fl._size.t + fl.yaxis.l2p(1)]; }"""
    )
    page.mouse.click(*xy)  # duration 0.2 s, force 90 N
    page.wait_for_selector("#point:not([hidden])")
    assert "duration_s=0.2" in page.text_content("#p-title") and "force_n=90" in page.text_content("#p-title")
    assert "FAIL" in page.text_content("#p-status")
    page.wait_for_function(
        "(() => { const i = document.getElementById('p-figure'); return i.complete && i.naturalWidth > 0; })()"
    )
    page.screenshot(path=str(SCREENSHOTS / "scans_point.png"), full_page=True)
    assert page.errors == []
