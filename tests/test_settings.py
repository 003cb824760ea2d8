"""One Settings object from the command line: defaults, checks, the links it gives the pages, and the
command lines ``python app.py`` gives its children."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import app
from lab.errors import LabError
from lab.settings import Settings
from tests.conftest import ROOT


def settings(*argv) -> Settings:
    return app.settings_from_args(app.parse(list(argv)))


def test_defaults_are_the_documented_ports_loopback_and_the_results_folder(monkeypatch):
    monkeypatch.delenv("LAB_RESULTS", raising=False)
    s = Settings()
    assert s.ports == {"lab": 8765, "state": 8766, "sim2sim": 8767}
    assert s.host == "127.0.0.1" and s.token is None and s.model is None
    assert s.results_dir == ROOT / "results"
    assert s.monitor_url == "http://127.0.0.1:8766"
    assert settings() == s  # `python app.py` with no flags is Settings()


def test_lab_results_in_the_environment_is_the_default_results_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_RESULTS", str(tmp_path))
    assert Settings().results_dir == tmp_path


def test_settings_are_frozen_and_replace_rejects_a_misspelt_field():
    s = Settings()
    with pytest.raises(AttributeError):
        s.lab_port = 1  # type: ignore[misc]
    assert s.replace(lab_port=9000).lab_port == 9000 and s.lab_port == 8765
    with pytest.raises(TypeError):
        s.replace(lab_prot=9000)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lab_port": 70000}, "lab port 70000 is not a port number"),
        ({"state_port": "8766"}, "state port '8766' is not a port number"),
        ({"fps": 0}, "fps 0 is outside (0, 240] frames/s"),
        ({"preset": "ultra"}, "unknown render preset 'ultra'"),
    ],
)
def test_a_bad_value_is_refused_in_words(change, message):
    with pytest.raises(LabError) as err:
        Settings(**change)
    assert err.value.message == message


def test_the_three_port_flags_reach_every_sub_command_and_port_sets_its_own():
    ports = ["--lab-port", "9001", "--state-port", "9002", "--sim2sim-port", "9003"]
    want = {"lab": 9001, "state": 9002, "sim2sim": 9003}
    assert settings(*ports).ports == want
    for cmd in ("lab", "sim2sim", "state-server"):
        assert settings(cmd, *ports).ports == want
    assert settings("lab", "--port", "9100").lab_port == 9100
    assert settings("sim2sim", "--port", "9100").sim2sim_port == 9100
    assert settings("state-server", "--port", "9100").state_port == 9100


def test_the_remote_monitor_watches_the_state_port_unless_told_otherwise():
    assert settings("--state-port", "9002").monitor_url == "http://127.0.0.1:9002"
    assert settings("lab", "--host", "0.0.0.0", "--token", "t", "--state-port", "9002").monitor_url == (
        "http://127.0.0.1:9002"
    )
    assert settings("lab", "--remote-url", "http://robot:8766").monitor_url == "http://robot:8766"
    assert Settings(remote_url="").monitor_url is None


def test_results_is_kept_as_an_absolute_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert settings("lab", "--results", "runs").results_dir == tmp_path / "runs"
    assert settings("--results", "runs").results_dir == tmp_path / "runs"


def test_each_child_of_app_py_gets_the_same_settings_without_the_token():
    s = settings(
        "--host", "127.0.0.1", "--lab-port", "9001", "--state-port", "9002", "--sim2sim-port", "9003",
        "--results", "/tmp/lab-results", "--mode", "squat", "--fps", "30", "--preset", "fast", "--token", "s3cret",
    )  # fmt: skip
    for cmd in ("lab", "sim2sim", "state-server"):
        argv = app.child_argv(s, cmd)
        assert "s3cret" not in argv  # the token goes by environment: a command line shows in `ps`
        child = settings(*argv).replace(token="s3cret")
        if cmd == "lab":
            assert child == s
        else:
            assert child.ports == s.ports and child.model == s.model


def test_the_nav_links_name_each_page_with_its_services_port():
    s = Settings(lab_port=9001, sim2sim_port=9003)
    lab = {n["page"]: n for n in s.nav("lab")}
    assert [n["page"] for n in s.nav("lab")] == ["lab", "remote", "scans", "replay", "sim2sim"]
    assert lab["remote"] == {
        "page": "remote", "label": "Remote monitor", "service": "lab", "port": 9001, "path": "/remote", "local": True,
    }  # fmt: skip
    assert lab["sim2sim"]["port"] == 9003 and not lab["sim2sim"]["local"]
    s2s = {n["page"]: n for n in s.nav("sim2sim")}
    assert not s2s["scans"]["local"] and s2s["scans"]["port"] == 9001 and s2s["sim2sim"]["local"]
    assert s.links()["scans"] == {"port": 9001, "path": "/scans"}


def test_egl_is_chosen_in_one_place_lab_init_which_app_py_imports_first():
    setters = []
    for path in [ROOT / "app.py", *sorted((ROOT / "lab").rglob("*.py"))]:
        if re.search(r"MUJOCO_GL", path.read_text()) and re.search(
            r"environ\.setdefault\(\s*\"MUJOCO_GL\"", path.read_text()
        ):
            setters.append(path.relative_to(ROOT).as_posix())
    assert setters == ["lab/__init__.py"]
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    out = subprocess.run(
        [sys.executable, "-c", GL_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["egl"]  # what MUJOCO_GL was when mujoco was first imported
    text = Path(app.__file__).read_text()
    assert text.index("import lab ") < text.index("from lab.")


# records MUJOCO_GL at the moment anything first imports mujoco, then imports what the services import
GL_PROBE = """
import os, sys
class Probe:
    def find_spec(self, name, path=None, target=None):
        if name == "mujoco":
            print(os.environ.get("MUJOCO_GL"))
            sys.meta_path.remove(self)
sys.meta_path.insert(0, Probe())
import app
import lab.web, lab.web.sim2sim, lab.web.state_server
"""
