"""The model picker in Debian's Chromium: pick a model, Switch, the page reloads on the new robot; a model that
fails to load shows its one-line reason in red under the picker."""

import pytest
import requests

from tests.conftest import SCREENSHOTS, wait_until
from tests.test_models_api import BROKEN, GOOD, make_folder

pytestmark = pytest.mark.e2e


@pytest.fixture()
def lab(tmp_path):
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    root = make_folder(tmp_path / "models")
    app = create_lab_app(remote_url="", models_dir=root, results_dir=tmp_path / "results")
    with ServerThread(app) as srv:
        yield srv


def test_picking_a_model_and_switching_reloads_the_page_on_it_and_a_broken_one_shows_why(lab, page):
    page.goto(lab.url + "/")
    page.wait_for_selector(f"#models-select option[value='{GOOD}']", state="attached", timeout=15000)
    assert "q1.urdf" in page.inner_text(".viewer-head h2")
    assert page.inner_text("#models-switch") == "Running"  # the running model is selected and marked
    page.select_option("#models-select", GOOD)
    assert page.is_enabled("#models-switch")
    with page.expect_navigation(timeout=20000):
        page.click("#models-switch")
    page.wait_for_selector("#conn[data-state='live']", timeout=15000)
    assert "robot.urdf" in page.inner_text(".viewer-head h2")
    assert page.inner_text("#models-current") == "robot.urdf"
    assert requests.get(lab.url + "/api/status", timeout=5).json()["model"]["file"] == "robot.urdf"
    wait_until(lambda: page.evaluate("window.labView.frames") >= 3, 20)
    page.wait_for_selector(f"#models-select option[value='{GOOD}']", state="attached", timeout=10000)
    assert "(running)" in page.inner_text(f"#models-select option[value='{GOOD}']")

    page.select_option("#models-select", BROKEN)
    page.click("#models-switch")
    err = page.wait_for_selector("#models-error:not([hidden])", timeout=15000)
    assert "references mesh 'meshes/gone.stl', not found" in err.inner_text()
    color = page.evaluate("getComputedStyle(document.getElementById('models-error')).color")
    assert color == "rgb(255, 92, 108)"  # the page's red (--bad)
    assert "robot.urdf" in page.inner_text(".viewer-head h2")  # still the running model
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path="/tmp/models_picker.png", full_page=True)
    page.screenshot(path=str(SCREENSHOTS / "models_picker.png"), full_page=True)
    assert not page.errors, page.errors
