"""Every navigation link of every page, clicked in Debian's Chromium, against ``python app.py`` started on
three free ports: each lands on the right service's port and page, and the remote monitor watches the
state server on the port it was given."""

import signal
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
import requests

from lab.remote.cli import stop_child
from tests.conftest import ROOT, SCREENSHOTS, free_port, wait_until

pytestmark = pytest.mark.e2e

# page -> (service, path); "brand" is the logo link, which goes to the Lab
PAGES = {
    "lab": ("lab", "/"),
    "remote": ("lab", "/remote"),
    "scans": ("lab", "/scans"),
    "replay": ("lab", "/replay"),
    "sim2sim": ("sim2sim", "/"),
}
LINKS = {"brand": "lab", "lab": "lab", "remote": "remote", "scans": "scans", "replay": "replay", "sim2sim": "sim2sim"}


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    """``python app.py --lab-port A --sim2sim-port B --state-port C``: the three ports, until Ctrl+C."""
    ports = {"lab": free_port(), "sim2sim": free_port(), "state": free_port()}
    log = tmp_path_factory.mktemp("navigation") / "app.log"
    cmd = [sys.executable, "app.py", "--lab-port", str(ports["lab"]), "--sim2sim-port", str(ports["sim2sim"])]
    cmd += ["--state-port", str(ports["state"])]
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        for svc, path in (("lab", "/api/status"), ("sim2sim", "/api/status"), ("state", "/api/v1/health")):
            wait_until(lambda u=f"http://127.0.0.1:{ports[svc]}{path}": requests.get(u, timeout=2).ok, 120, 0.5)
        yield ports
    finally:
        stop_child(p, 30, signal.SIGINT)
    assert p.returncode == 0, log.read_text()


def url(ports, page: str) -> str:
    svc, path = PAGES[page]
    return f"http://127.0.0.1:{ports[svc]}{path}"


def where(page) -> dict:
    return page.evaluate(
        "({port: location.port, path: location.pathname, page: document.body.dataset.page,"
        " active: document.querySelector('header nav a.active')?.dataset.nav})"
    )


# A tour that clicks every link once and leaves every page once: (from page, link clicked)
TOUR = [
    ("lab", "remote"),
    ("remote", "scans"),
    ("scans", "replay"),
    ("replay", "sim2sim"),
    ("sim2sim", "brand"),
    ("lab", "lab"),
]


def test_every_navigation_link_lands_on_its_page_on_the_port_given_on_the_command_line(services, page):
    for start in PAGES:  # every page links every page, on the port that service was given
        page.goto(url(services, start))
        page.wait_for_load_state("load")
        assert where(page)["active"] == start  # the page says where you are
        hrefs = page.eval_on_selector_all("header a[data-nav]", "els => els.map((a) => [a.dataset.nav, a.href])")
        assert sorted(n for n, _ in hrefs) == sorted(LINKS), hrefs
        for link, href in hrefs:
            target = urlsplit(href)
            svc, path = PAGES[LINKS[link]]
            assert (target.port, target.path) == (services[svc], path), f"{start}: the '{link}' link is {href}"
    assert {start for start, _ in TOUR} == set(PAGES) and {link for _, link in TOUR} == set(LINKS)
    page.goto(url(services, TOUR[0][0]))
    for start, link in TOUR:  # and a click on it lands there
        assert where(page)["page"] == start
        with page.expect_navigation():
            page.click(f"header a[data-nav='{link}']")
        page.wait_for_load_state("load")
        svc, path = PAGES[LINKS[link]]
        target = LINKS[link]
        assert where(page) == {"port": str(services[svc]), "path": path, "page": target, "active": target}, (
            f"{start}: the '{link}' link"
        )
    assert not page.errors, page.errors


def test_each_page_names_its_own_port_and_the_remote_monitor_watches_the_state_port(services, page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    state_url = f"http://127.0.0.1:{services['state']}"
    page.goto(url(services, "remote"))
    page.wait_for_function("document.getElementById('rstate-word').textContent === 'CONNECTED'", timeout=30000)
    assert page.input_value("#url") == state_url
    assert requests.get(url(services, "lab") + "api/remote/status", timeout=5).json()["url"] == state_url
    page.wait_for_function("document.getElementById('r-sim').textContent === 'running'", timeout=10000)
    assert page.locator("#server-sim").is_hidden()  # a running server simulation needs no banner
    page.wait_for_timeout(500)
    page.screenshot(path=str(SCREENSHOTS / "nav_remote.png"))

    page.goto(url(services, "lab"))
    page.wait_for_selector("#conn[data-state='live']", timeout=20000)
    assert f"Lab :{services['lab']}" in page.inner_text("footer")
    page.wait_for_function("document.getElementById('m-fall').textContent === 'standing'", timeout=10000)
    page.screenshot(path=str(SCREENSHOTS / "nav_lab.png"))

    page.goto(url(services, "scans"))
    page.wait_for_load_state("load")
    page.screenshot(path=str(SCREENSHOTS / "nav_scans.png"))

    page.goto(url(services, "sim2sim"))
    page.wait_for_selector("#conn[data-state='live']", timeout=20000)
    assert f"Sim2Sim :{services['sim2sim']}" in page.inner_text("footer")
    page.wait_for_timeout(1000)
    page.screenshot(path=str(SCREENSHOTS / "nav_sim2sim.png"))
    assert not page.errors, page.errors
