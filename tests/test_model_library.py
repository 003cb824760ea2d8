"""The model library: listing a models folder, and extracting uploaded zips safely (nothing left behind)."""

import io
import stat
import zipfile

import pytest

from lab.errors import LabError
from lab.robots.library import extract_zip, find_model, list_models
from lab.robots.model import load_robot
from tests.model_files import write_mesh_urdf

MJCF = '<?xml version="1.0"?>\n<!-- a test robot -->\n<mujoco model="t"><include file="parts.xml"/></mujoco>\n'
PART = "<mujoco><worldbody/></mujoco>\n"


def zip_of(files: dict, attrs: dict | None = None) -> bytes:
    """A zip with ``files`` (name -> bytes); ``attrs``: name -> unix mode for its external attributes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if attrs and name in attrs:
                info.external_attr = attrs[name] << 16
            z.writestr(info, data)
    return buf.getvalue()


def robot_zip(tmp_path) -> bytes:
    src = tmp_path / "src"
    write_mesh_urdf(src)
    return zip_of({f.relative_to(src).as_posix(): f.read_bytes() for f in src.rglob("*") if f.is_file()})


def leftovers(root):
    up = root / "uploads"
    return sorted(p.name for p in up.iterdir()) if up.exists() else []


def test_list_models_finds_urdf_and_mjcf_but_not_included_parts_symlinks_or_other_xml(tmp_path):
    write_mesh_urdf(tmp_path / "q1")
    (tmp_path / "arm").mkdir()
    (tmp_path / "arm" / "scene.xml").write_text(MJCF)
    (tmp_path / "arm" / "parts.xml").write_text(PART)  # only included: not offered on its own
    (tmp_path / "notes.xml").write_text("<robotnotes/>")
    (tmp_path / "robot.lab.json").write_text("{}")
    (tmp_path / "link.urdf").symlink_to(tmp_path / "q1" / "robot.urdf")
    models = list_models(tmp_path)
    assert [(m.id, m.kind) for m in models] == [
        ("builtin", "urdf"),
        ("arm/scene.xml", "mjcf"),
        ("q1/robot.urdf", "urdf"),
    ]
    assert models[2].size == (tmp_path / "q1" / "robot.urdf").stat().st_size
    assert models[2].path == (tmp_path / "q1" / "robot.urdf").resolve()
    assert [m.id for m in list_models(tmp_path / "missing")] == ["builtin"]


def test_a_valid_zip_with_a_mesh_subfolder_is_extracted_and_loads(tmp_path):
    folder = extract_zip(robot_zip(tmp_path), tmp_path / "models", name="My Robot.zip")
    assert folder.parent == tmp_path / "models" / "uploads" and folder.name.startswith("My-Robot-")
    model = find_model(folder)
    assert model == folder / "robot.urdf" and (folder / "meshes" / "torso.stl").is_file()
    robot = load_robot(model)
    assert robot.model.nu == 22 and any(a.name == "torso.stl" for a in robot.assets)
    assert [m.id for m in list_models(tmp_path / "models")] == ["builtin", f"uploads/{folder.name}/robot.urdf"]
    assert leftovers(tmp_path / "models") == [folder.name]  # no staging folder left


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("../evil.urdf", "'..' component"),
        ("a/../../evil.urdf", "'..' component"),
        ("/abs/evil.urdf", "absolute path"),
        ("C:/evil.urdf", "drive letter"),
        ("..\\evil.urdf", "'..' component"),
        ("bad\x01name.urdf", "control character"),
    ],
)
def test_a_zip_entry_that_could_escape_is_refused_and_nothing_is_left(tmp_path, name, needle):
    data = zip_of({"robot.urdf": b"<robot name='x'/>", name: b"x"})
    with pytest.raises(LabError) as e:
        extract_zip(data, tmp_path)
    assert needle in e.value.message and e.value.status == 400
    assert leftovers(tmp_path) == []
    assert not (tmp_path.parent / "evil.urdf").exists()


def test_symlink_and_fifo_entries_are_refused(tmp_path):
    for mode, needle in ((stat.S_IFLNK | 0o777, "symbolic link"), (stat.S_IFIFO | 0o644, "FIFO")):
        data = zip_of({"robot.urdf": b"<robot/>", "mesh.stl": b"/etc/passwd"}, {"mesh.stl": mode})
        with pytest.raises(LabError, match=needle):
            extract_zip(data, tmp_path)
    assert leftovers(tmp_path) == []


def test_a_zip_bomb_is_refused_while_inflating_and_nothing_is_left(tmp_path):
    data = zip_of({"robot.urdf": b"<robot/>", "bomb.bin": b"\0" * (3 * 2**20)})
    assert len(data) < 20_000  # small upload, large inflation
    with pytest.raises(LabError) as e:
        extract_zip(data, tmp_path, max_bytes=2**20)
    assert e.value.status == 413 and "inflates to more than 1048576 bytes" in e.value.message
    assert leftovers(tmp_path) == []


def test_a_bomb_whose_header_lies_about_its_size_is_still_refused(tmp_path):
    data = bytearray(zip_of({"robot.urdf": b"<robot/>", "bomb.bin": b"\0" * (3 * 2**20)}))
    # shrink the declared uncompressed size of bomb.bin in the local and central headers to 10 bytes
    real = (3 * 2**20).to_bytes(4, "little")
    assert data.count(real) == 2
    data = bytes(data).replace(real, (10).to_bytes(4, "little"))
    with pytest.raises(LabError):
        extract_zip(data, tmp_path, max_bytes=2**20)
    assert leftovers(tmp_path) == []


def test_an_upload_over_the_limit_too_many_entries_duplicates_and_non_zips_are_refused(tmp_path):
    with pytest.raises(LabError, match="at most 100 accepted") as e:
        extract_zip(b"x" * 101, tmp_path, max_bytes=100)
    assert e.value.status == 413
    many = zip_of({"robot.urdf": b"<robot/>", **{f"f{i}.txt": b"" for i in range(30)}})
    with pytest.raises(LabError, match="31 entries; at most 20 accepted"):
        extract_zip(many, tmp_path, max_entries=20)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z, pytest.warns(UserWarning):
        z.writestr("robot.urdf", b"<robot/>")
        z.writestr("robot.urdf", b"<robot/>")
    with pytest.raises(LabError, match="the name 'robot.urdf' twice"):
        extract_zip(buf.getvalue(), tmp_path)
    with pytest.raises(LabError, match="not a readable zip"):
        extract_zip(b"PK not really a zip", tmp_path)
    with pytest.raises(LabError, match="no .urdf or MJCF .xml model"):
        extract_zip(zip_of({"readme.txt": b"hi", "a.xml": b"<robot/>"}), tmp_path)
    assert leftovers(tmp_path) == []


def test_several_top_level_models_need_a_name(tmp_path):
    folder = extract_zip(zip_of({"a.urdf": b"<robot/>", "b.urdf": b"<robot/>", "sub/c.urdf": b"<robot/>"}), tmp_path)
    with pytest.raises(LabError, match="several models at its top level: a.urdf, b.urdf"):
        find_model(folder)
    assert find_model(folder, "b.urdf") == folder / "b.urdf"
    assert find_model(folder, "sub/c.urdf") == folder / "sub" / "c.urdf"
    with pytest.raises(LabError, match="no model is named 'x.urdf'"):
        find_model(folder, "x.urdf")
