"""The robot models a person may pick from: the files of a models folder, and safe zip uploads into it.

:func:`list_models` finds every ``*.urdf`` and every MJCF ``*.xml`` (an XML file whose root is
``<mujoco>``) under a folder, bounded in depth and number, without following symlinks, leaving out
MJCF files that another one ``<include>``\\ s; the built-in robot comes first as id ``builtin``.
:func:`extract_zip` unpacks an uploaded zip into ``<root>/uploads/<name>-<hash>/``, refusing anything
that could write outside that folder or fill the disk; :func:`find_model` picks the model inside.
No Flask here: the web layer (:mod:`lab.web.models_api`) calls these and loads the model to check it.
"""

import hashlib
import io
import os
import re
import shutil
import stat
import uuid
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.robots.model import BUILTIN_URDF

BUILTIN_ID = "builtin"
MAX_DEPTH = 6  # folder levels searched below the models folder
MAX_MODELS = 500  # model files listed at most
MAX_SCANNED = 20000  # directory entries looked at at most
MAX_ENTRIES = 2000  # entries of an uploaded zip
MAX_UPLOAD = 50 * 2**20  # [bytes] an upload, compressed, and everything it inflates to
MAX_NAME = 1024  # characters of an entry's path inside a zip
SNIFF_BYTES = 4096  # bytes of an .xml read to see whether its root is <mujoco>
UPLOADS = "uploads"
CHUNK = 64 * 1024
UPLOAD_HINT = "upload a .zip of a robot folder: one .urdf or MJCF .xml with its meshes beside it"


@dataclass(frozen=True)
class ModelEntry:
    """One model a person may switch to."""

    id: str  # stable: "builtin", or the path relative to the models folder (POSIX)
    name: str  # what the picker shows: the file name (the folder for uploads)
    path: Path  # absolute path of the model file
    kind: str  # "urdf" | "mjcf"
    size: int  # [bytes] of the model file

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "file": self.path.name, "kind": self.kind, "size": self.size}


def builtin_entry() -> ModelEntry:
    return ModelEntry(BUILTIN_ID, "Q1 humanoid (built-in)", BUILTIN_URDF, "urdf", BUILTIN_URDF.stat().st_size)


# ---------------------------------------------------------------------------------------------- listing

_XML_PROLOGUE = re.compile(r"(\s+|<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>]*>)", re.S)
_ROOT_TAG = re.compile(r"<\s*([\w:.-]+)")
_INCLUDE = re.compile(r"<\s*include\b[^>]*\bfile\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")


def _head(path: Path, n: int = SNIFF_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(n).decode("utf-8", "replace")
    except OSError:
        return ""


def xml_root(path: Path) -> str | None:
    """The root element's tag of an XML file (from its first few KiB), or None."""
    text = _head(path)
    pos = 0
    while True:
        m = _XML_PROLOGUE.match(text, pos)
        if not m:
            break
        pos = m.end()
    m = _ROOT_TAG.match(text, pos)
    return m.group(1) if m else None


def model_kind(path: Path) -> str | None:
    """``urdf`` for a ``.urdf``, ``mjcf`` for an ``.xml`` whose root is ``<mujoco>``, else None."""
    suffix = path.suffix.lower()
    if suffix == ".urdf":
        return "urdf"
    if suffix == ".xml" and not path.name.endswith(".lab.json") and xml_root(path) == "mujoco":
        return "mjcf"
    return None


def _regular_files(folder: Path, max_depth: int = MAX_DEPTH):
    """Regular files below ``folder`` (no symlinks followed or listed, hidden and staging entries skipped)."""
    todo, scanned = [(folder, 0)], 0
    while todo:
        d, depth = todo.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            scanned += 1
            if scanned > MAX_SCANNED:
                return
            if e.name.startswith("."):
                continue
            try:
                if e.is_symlink():
                    continue
                if e.is_dir(follow_symlinks=False):
                    if depth + 1 < max_depth:
                        todo.append((Path(e.path), depth + 1))
                elif stat.S_ISREG(e.stat(follow_symlinks=False).st_mode):
                    yield Path(e.path)
            except OSError:
                continue


def _found(folder: Path, max_depth: int = MAX_DEPTH) -> list[tuple[Path, str]]:
    """(path, kind) of the model files below ``folder``, without the MJCF files others include."""
    found = []
    for p in _regular_files(folder, max_depth):
        if p.name.endswith(".lab.json") or p.suffix.lower() not in (".urdf", ".xml"):
            continue
        kind = model_kind(p)
        if kind:
            found.append((p, kind))
        if len(found) >= MAX_MODELS:
            break
    included = set()
    for p, kind in found:
        if kind == "mjcf":
            for m in _INCLUDE.finditer(_head(p, 256 * 1024)):
                ref = m.group(1) if m.group(1) is not None else m.group(2)
                included.add(os.path.normpath(p.parent / ref))
    return [(p, k) for p, k in found if os.path.normpath(p) not in included]


def list_models(folder: Path | str | None, include_builtin: bool = True) -> list[ModelEntry]:
    """The built-in robot (id ``builtin``), then every model below ``folder`` sorted by id.

    A missing folder lists only the built-in robot."""
    out = [builtin_entry()] if include_builtin else []
    if folder is None:
        return out
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return out
    base = folder.resolve()
    entries = []
    for p, kind in _found(base):
        rel = p.relative_to(base).as_posix()
        parts = rel.split("/")
        name = f"{parts[1]}/{p.name}" if parts[0] == UPLOADS and len(parts) > 2 else rel
        try:
            size = p.stat().st_size
        except OSError:
            continue
        entries.append(ModelEntry(rel, name, p, kind, size))
    return out + sorted(entries, key=lambda e: e.id)


def get_model(entries: list[ModelEntry], model_id) -> ModelEntry:
    """The entry with id ``model_id``; an unknown id raises and names a few that exist."""
    if not isinstance(model_id, str) or not model_id:
        raise LabError(f"model id must be a non-empty string, got {str(model_id)[:40]!r}", 'e.g. {"id": "builtin"}')
    for e in entries:
        if e.id == model_id:
            return e
    known = ", ".join(e.id for e in entries[:8]) + (", …" if len(entries) > 8 else "")
    raise LabError(f"unknown model '{model_id[:120]}'", f"available: {known} (GET /api/models lists them)")


# ---------------------------------------------------------------------------------------------- uploads


def _refuse(message: str, status: int = 400) -> LabError:
    return LabError(message, UPLOAD_HINT, status)


def _check_name(raw: str) -> tuple[str, ...]:
    """The path components of a zip entry's name; a :class:`LabError` for a name that could escape."""
    shown = raw[:80].encode("unicode_escape").decode()
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise _refuse(f"zip entry '{shown}' has a NUL or control character in its name")
    if len(raw) > MAX_NAME:
        raise _refuse(f"zip entry '{shown}…' has a name longer than {MAX_NAME} characters")
    name = raw.replace("\\", "/")
    if name.startswith("/"):
        raise _refuse(f"zip entry '{shown}' is an absolute path")
    if re.match(r"^[A-Za-z]:", name):
        raise _refuse(f"zip entry '{shown}' starts with a drive letter")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise _refuse(f"zip entry '{shown}' has a '..' component (it would land outside the upload folder)")
    if not parts:
        raise _refuse(f"zip entry '{shown}' has an empty name")
    return parts


def _check_kind(info: zipfile.ZipInfo) -> bool:
    """True for a directory entry, False for a file; a :class:`LabError` for a symlink, device, FIFO or socket."""
    mode = info.external_attr >> 16
    fmt = stat.S_IFMT(mode)
    shown = info.filename[:80]
    if fmt == stat.S_IFLNK:
        raise _refuse(f"zip entry '{shown}' is a symbolic link; links are not extracted")
    if fmt not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise _refuse(f"zip entry '{shown}' is a device, FIFO or socket, not a file")
    if info.flag_bits & 0x1:
        raise _refuse(f"zip entry '{shown}' is encrypted")
    return info.is_dir() or fmt == stat.S_IFDIR


def safe_name(name: str | None) -> str:
    """A folder-name word from an upload's file name: letters, digits, ``._-``; at most 40 characters."""
    stem = Path(str(name or "")).name
    stem = re.sub(r"\.zip$", "", stem, flags=re.I)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:40]
    return stem or "model"


def extract_zip(
    data: bytes, dest_root: Path | str, max_bytes: int = MAX_UPLOAD, name: str | None = None, max_entries=MAX_ENTRIES
) -> Path:
    """Extract the zip ``data`` into a new folder ``dest_root/uploads/<name>-<hash>/`` and return it.

    Refused with a one-line :class:`LabError` (400; 413 for size), leaving nothing behind: an upload over
    ``max_bytes``, not a zip, more than ``max_entries`` entries, duplicate names, names with control
    characters, absolute paths, drive letters or ``..``, symlinks, devices, FIFOs, encrypted entries, a
    total inflated size over ``max_bytes`` (counted while inflating: the sizes in the zip are not trusted),
    and a zip without any ``.urdf`` or MJCF ``.xml``. The files go to a staging folder that is renamed into
    place at the end. The same bytes uploaded twice give the same folder (kept as it is).
    """
    if len(data) > max_bytes:
        raise _refuse(f"upload is {len(data)} bytes; at most {max_bytes} accepted", 413)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise _refuse(f"upload is not a readable zip file ({str(exc)[:80]})") from None
    if len(infos) > max_entries:
        raise _refuse(f"zip has {len(infos)} entries; at most {max_entries} accepted")
    plan, seen = [], set()
    for info in infos:
        parts = _check_name(info.filename)
        is_dir = _check_kind(info)
        key = "/".join(parts)
        if key in seen and not is_dir:
            raise _refuse(f"zip has the name '{key[:80]}' twice")
        seen.add(key)
        plan.append((info, parts, is_dir))
    digest = hashlib.sha256(data).hexdigest()[:10]
    uploads = Path(dest_root).expanduser() / UPLOADS
    uploads.mkdir(parents=True, exist_ok=True)
    tmp = uploads / f".staging-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        _extract(zf, plan, tmp, max_bytes)
        found = _found(tmp, max_depth=MAX_DEPTH)
        if not found:
            raise _refuse("zip holds no .urdf or MJCF .xml model")
        label = safe_name(name) if name and safe_name(name) != "model" else safe_name(_top_most(found)[0][0].stem)
        final = uploads / f"{label}-{digest}"
        if final.exists():  # the same upload again: keep the folder there is
            shutil.rmtree(tmp, ignore_errors=True)
            return final
        os.rename(tmp, final)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _extract(zf: zipfile.ZipFile, plan: list, tmp: Path, max_bytes: int) -> None:
    total = 0
    root = tmp.resolve()
    for info, parts, is_dir in plan:
        target = tmp.joinpath(*parts)
        if not target.resolve().is_relative_to(root):  # belt and braces: the names were checked already
            raise _refuse(f"zip entry '{info.filename[:80]}' would land outside the upload folder")
        try:
            if is_dir:
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "xb") as out:
                while True:
                    chunk = src.read(CHUNK)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > max_bytes:
                        raise _refuse(f"zip inflates to more than {max_bytes} bytes; at most {max_bytes} accepted", 413)
                    out.write(chunk)
        except LabError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
            raise _refuse(f"zip entry '{info.filename[:80]}' cannot be read: {str(exc)[:80]}") from None
        except OSError as exc:  # a file where a folder should be, a name the file system refuses
            raise _refuse(f"zip entry '{info.filename[:80]}' cannot be written: {exc.strerror or exc}") from None


def _top_most(found: list) -> list:
    depth = min(len(p.parts) for p, _ in found)
    return [(p, k) for p, k in found if len(p.parts) == depth]


def find_model(folder: Path, wanted: str | None = None) -> Path:
    """The model file of an extracted upload: the one named ``wanted`` (a file name or a path inside the
    folder), else the only one at the top-most level that has any. A :class:`LabError` when none or several."""
    folder = Path(folder)
    found = _found(folder)
    if not found:
        raise _refuse("the upload holds no .urdf or MJCF .xml model")
    if wanted:
        w = str(wanted).replace("\\", "/").strip("/")
        hits = [p for p, _ in found if p.relative_to(folder).as_posix() == w] or [p for p, _ in found if p.name == w]
        if len(hits) == 1:
            return hits[0]
        names = ", ".join(sorted(p.relative_to(folder).as_posix() for p, _ in found)[:8])
        what = "several files are named" if hits else "no model is named"
        raise _refuse(f"{what} '{w[:80]}' in the upload; models in it: {names}")
    top = _top_most(found)
    if len(top) > 1:
        names = ", ".join(sorted(p.relative_to(folder).as_posix() for p, _ in top)[:8])
        raise LabError(
            f"the upload holds several models at its top level: {names}",
            "name the one to use in the form field 'model' (or upload one model per zip)",
        )
    return top[0][0]


def check_inside(folder: Path, model: Path, assets) -> None:
    """Refuse an uploaded model that references files outside its own folder (a mesh by absolute path)."""
    root = Path(folder).resolve()
    for a in assets:
        if not Path(a).resolve().is_relative_to(root):
            raise LabError(
                f"model {model.name} references {Path(a).name} outside the uploaded folder",
                "an uploaded model must bring its meshes: reference them by relative path inside the zip",
            )


def remove_upload(folder: Path, models_root: Path) -> None:
    """Delete an extracted upload folder (only ever a folder directly inside ``models_root/uploads``)."""
    folder, uploads = Path(folder).resolve(), (Path(models_root) / UPLOADS).resolve()
    if folder.parent == uploads:
        shutil.rmtree(folder, ignore_errors=True)
