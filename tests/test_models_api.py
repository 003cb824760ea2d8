"""The model picker's API over real HTTP (lab/web/models_api.py): list, switch, upload, refusals, the token."""

import io
import zipfile

import pytest
import requests

from lab.robots.model import BUILTIN_URDF
from tests.conftest import WsClient, wait_until
from tests.model_files import write_mesh_urdf

GOOD = "q1mesh/robot.urdf"
BROKEN = "broken/robot.urdf"
MJCF = "arm/scene.xml"


def make_folder(root):
    """A models folder: a Q1 variant with a mesh sub-folder, a URDF whose mesh is missing, an MJCF."""
    write_mesh_urdf(root / "q1mesh")
    (root / "broken").mkdir()
    text = BUILTIN_URDF.read_text().replace(
        '<geometry><box size="0.1 0.17 0.18"/></geometry>', '<geometry><mesh filename="meshes/gone.stl"/></geometry>'
    )
    (root / "broken" / "robot.urdf").write_text(text)
    (root / "arm").mkdir()
    (root / "arm" / "scene.xml").write_text("<mujoco><worldbody/></mujoco>")
    return root


def zip_folder(folder) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(folder).as_posix())
    return buf.getvalue()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    root = make_folder(tmp_path_factory.mktemp("models"))
    app = create_lab_app(remote_url="", models_dir=root, results_dir=root.parent / "results")
    with ServerThread(app) as srv:
        srv.root = root
        wait_until(lambda: status(srv)["sim_time"] > 0.05, 10)
        yield srv


def status(srv):
    return requests.get(srv.url + "/api/status", timeout=5).json()


def switch(srv, model_id, headers=None):
    r = requests.post(srv.url + "/api/model", json={"id": model_id}, timeout=30, headers=headers)
    return r.status_code, r.json()


def upload(srv, data, headers=None, **kw):
    h = {"Content-Type": "application/zip", **(headers or {})}
    r = requests.post(srv.url + "/api/models/upload", data=data, headers=h, timeout=30, **kw)
    return r.status_code, r.json()


def on_disk(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_models_lists_the_builtin_robot_and_every_model_of_the_folder(lab):
    body = requests.get(lab.url + "/api/models", timeout=5).json()
    assert [(m["id"], m["kind"]) for m in body["models"]] == [
        ("builtin", "urdf"), (MJCF, "mjcf"), (BROKEN, "urdf"), (GOOD, "urdf"),
    ]  # fmt: skip
    assert body["folder"] == str(lab.root.resolve())
    assert all(m["usable"] for m in body["models"])  # the Lab runs MJCF too
    assert [m["id"] for m in body["models"] if m["current"]] == [body["current"]]


def test_switching_changes_the_identity_in_status_and_the_ws_hello_and_the_simulation_runs_on(lab):
    before = status(lab)["identity"]
    code, body = switch(lab, GOOD)
    assert code == 200, body
    assert body["current"] == GOOD and body["identity"]["file"] == "robot.urdf"
    s = status(lab)
    assert s["identity"]["sha256"] == body["identity"]["sha256"] != before["sha256"]
    assert s["model"]["file"] == "robot.urdf"
    t0 = s["sim_time"]
    wait_until(lambda: status(lab)["sim_time"] > t0 + 0.2, 10)
    assert status(lab)["sim"]["state"] == "running"
    ws = WsClient(lab.url.replace("http", "ws") + "/ws")
    try:
        hello = ws.recv()
        assert hello["type"] == "hello" and hello["identity"]["sha256"] == s["identity"]["sha256"]
        wait_until(lambda: isinstance(ws.recv(), bytes), 15)  # the hub renders the new model
    finally:
        ws.close()
    assert requests.get(lab.url + "/api/models", timeout=5).json()["current"] == GOOD
    assert switch(lab, "builtin")[0] == 200
    assert status(lab)["identity"]["file"] == "q1.urdf"


def test_a_broken_model_is_a_400_with_the_reason_and_the_running_model_keeps_going(lab):
    s = status(lab)
    code, body = switch(lab, BROKEN)
    assert code == 400
    assert "references mesh 'meshes/gone.stl', not found" in body["error"] and body["hint"]
    after = status(lab)
    assert after["identity"] == s["identity"]
    wait_until(lambda: status(lab)["sim_time"] > after["sim_time"] + 0.1, 10)
    assert requests.get(lab.url + "/api/models", timeout=5).json()["current"] == "builtin"


def test_unknown_ids_and_bad_bodies_are_400s(lab):
    code, body = switch(lab, "../../etc/passwd")
    assert code == 400 and body["error"] == "unknown model '../../etc/passwd'" and "builtin" in body["hint"]
    assert switch(lab, 3)[0] == 400
    r = requests.post(lab.url + "/api/model", data="x", headers={"Content-Type": "text/plain"}, timeout=5)
    assert r.status_code == 415


def test_a_second_switch_while_one_runs_is_a_409(lab):
    lock = lab.app.extensions["models"]["switch_lock"]
    lock.acquire()
    try:
        code, body = switch(lab, GOOD)
    finally:
        lock.release()
    assert code == 409 and body["error"] == "another model switch is in progress"


def test_an_uploaded_zip_is_201_listed_and_switchable(lab, tmp_path):
    src = tmp_path / "src"
    write_mesh_urdf(src)
    code, body = upload(lab, zip_folder(src), params={"name": "walker.zip"})
    assert code == 201, body
    entry = body["model"]
    assert entry["id"].startswith("uploads/walker-") and entry["id"].endswith("/robot.urdf")
    assert (lab.root / entry["id"]).is_file() and (lab.root / entry["id"]).parent.joinpath("meshes/torso.stl").is_file()
    ids = [m["id"] for m in requests.get(lab.url + "/api/models", timeout=5).json()["models"]]
    assert entry["id"] in ids
    (src / "robot.urdf").write_text((src / "robot.urdf").read_text() + "\n")  # other bytes: another folder
    files = {"file": ("second.zip", zip_folder(src), "application/zip")}
    r = requests.post(lab.url + "/api/models/upload", files=files, timeout=30)
    assert r.status_code == 201 and r.json()["model"]["id"].startswith("uploads/second-")


def test_a_zip_slip_or_a_broken_model_upload_is_400_and_leaves_nothing_on_disk(lab, tmp_path):
    before = on_disk(lab.root)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("robot.urdf", BUILTIN_URDF.read_text())
        z.writestr("../evil.txt", "x")
    code, body = upload(lab, buf.getvalue())
    assert code == 400 and "'..' component" in body["error"]
    code, body = upload(lab, zip_folder(lab.root / "broken"))
    assert code == 400 and "references mesh 'meshes/gone.stl'" in body["error"]
    code, body = upload(lab, b"not a zip")
    assert code == 400 and "not a readable zip" in body["error"]
    assert on_disk(lab.root) == before
    assert not (lab.root.parent / "evil.txt").exists() and not (lab.root / "evil.txt").exists()


def test_upload_size_is_checked_before_reading_and_while_reading(lab):
    m = lab.app.extensions["models"]
    old, m["max_upload"] = m["max_upload"], 1000
    try:
        code, body = upload(lab, b"\0" * 200_000)
        assert code == 413 and "at most 1000 accepted" in body["error"]

        def chunks():  # no Content-Length: cut off while reading
            for _ in range(100):
                yield b"\0" * 4096

        code, body = upload(lab, chunks())
        assert code == 413 and "longer than 1000 bytes" in body["error"]
    finally:
        m["max_upload"] = old
    r = requests.post(lab.url + "/api/models/upload", data=b"PK", headers={"Content-Type": "text/plain"}, timeout=5)
    assert r.status_code == 415 and "application/zip" in r.json()["error"]


def test_switch_and_upload_need_the_token_when_the_service_has_one(lab):
    lab.app.config["LAB_TOKEN"] = "s3cret"
    try:
        assert switch(lab, GOOD)[0] == 401
        assert upload(lab, b"PK")[0] == 401
        assert requests.get(lab.url + "/api/models", timeout=5).status_code == 200  # reading stays open
        code, body = switch(lab, BROKEN, headers={"Authorization": "Bearer s3cret"})
        assert code == 400  # past the token, refused for the model
    finally:
        lab.app.config["LAB_TOKEN"] = None


def test_sim2sim_offers_urdfs_only_and_switches_its_lockstep(tmp_path):
    from lab.web.server import ServerThread
    from lab.web.sim2sim import create_sim2sim_app

    root = make_folder(tmp_path / "models")
    app = create_sim2sim_app(models_dir=root)
    with ServerThread(app) as srv:
        body = requests.get(srv.url + "/api/models", timeout=5).json()
        usable = {m["id"]: m["usable"] for m in body["models"]}
        assert usable == {"builtin": True, MJCF: False, BROKEN: True, GOOD: True}
        code, err = switch(srv, MJCF)
        assert code == 400 and err["error"].startswith("Sim2Sim needs a URDF")
        code, ok = switch(srv, GOOD)
        assert code == 200, ok
        s = status(srv)
        assert s["identity"]["sha256"] == ok["identity"]["sha256"] and s["model"]["file"] == "robot.urdf"
        assert app.extensions["sim2sim"]["lockstep"].robot.path.name == "robot.urdf"
        t0 = s["sim_time"]
        wait_until(lambda: status(srv)["sim_time"] > t0 + 0.1, 15)
