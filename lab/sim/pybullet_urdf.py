"""Reading a URDF for PyBullet: what PyBullet cannot read, a copy it can, and what its parser said.

- :func:`check_urdf_for_pybullet` refuses, with a line naming PyBullet, a file that is not a URDF or
  uses a mesh format PyBullet does not read;
- :func:`prepare_urdf` makes the copy PyBullet is given: absolute mesh and texture paths and a name
  for every ``<material>`` without one (PyBullet's parser refuses the whole file otherwise), and lists
  the links without ``<inertial>``;
- :func:`bullet_messages` turns what PyBullet's parser prints on the C stdout/stderr (captured by
  :func:`captured_output`) into one message per line, the file-location prefixes dropped.
"""

import os
import re
import tempfile
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lab.errors import LabError
from lab.robots.model import _resolve_mesh
from lab.sim.parity import LinkInertia

# Mesh formats PyBullet's URDF importer reads (collision and visual).
PYBULLET_MESH_EXTS = (".obj", ".stl", ".dae")
_BULLET_TAG = re.compile(r"b3(Error|Warning|Printf)\[[^\]]*\]:\s*")
NO_INERTIAL = "No inertial data for link"  # PyBullet's warning for a link without <inertial>


@contextmanager
def captured_output():
    """Capture what C code writes to fd 1/2 (PyBullet's parser messages) into a list of lines."""
    lines: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield lines
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            lines.extend(tmp.read().decode(errors="replace").splitlines())


def check_urdf_for_pybullet(path: Path) -> None:
    """Raise :class:`LabError` naming PyBullet when the URDF uses something PyBullet cannot read."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise LabError(f"PyBullet cannot load {path.name}: not valid XML ({exc})", "Sim2Sim needs a URDF") from exc
    if root.tag != "robot":
        raise LabError(
            f"PyBullet cannot load {path.name}: it is not a URDF (root element <{root.tag}>)",
            "Sim2Sim needs a URDF that both MuJoCo and PyBullet read; MJCF works in the Lab only",
        )
    for mesh in root.iter("mesh"):
        fn = mesh.get("filename") or ""
        if Path(fn).suffix.lower() not in PYBULLET_MESH_EXTS:
            raise LabError(
                f"PyBullet cannot load {path.name}: mesh '{fn}' is in a format PyBullet does not read",
                f"PyBullet reads {', '.join(PYBULLET_MESH_EXTS)} meshes; convert the mesh (e.g. to .stl or .obj)",
            )


def bullet_messages(lines) -> list[tuple[str, str]]:
    """PyBullet's parser output (what it printed to fd 1/2) as ``(level, message)``, one per message.

    PyBullet prints ``b3Error[file,line]:`` then the message on the next line, and a message that ends
    in ``:`` is followed by its subject as a message of its own (``Could not parse visual element for
    Link:`` then ``pelvis``; ``No inertial data for link, ...`` then the link): those are joined.
    ``level`` is ``error``, ``warning`` or ``info``."""
    text = "\n".join(ln for ln in lines if not ln.startswith("pybullet build time"))
    parts = _BULLET_TAG.split(text)
    out = [("info", " ".join(ln.split())) for ln in parts[0].splitlines() if ln.strip()]
    for tag, raw in zip(parts[1::2], parts[2::2]):
        level = {"Printf": "info"}.get(tag, tag.lower())
        msg = " ".join(raw.split())
        if not msg:
            continue
        prev = out[-1][1] if out and out[-1][0] == level else ""
        if prev.endswith(":") or (prev.startswith(NO_INERTIAL) and " " not in msg):  # its subject follows
            out[-1] = (level, f"{out[-1][1]} {msg}")
        else:
            out.append((level, msg))
    return out


@dataclass
class PreparedUrdf:
    """The URDF as PyBullet is given it: ``root`` (with absolute file paths and named materials), the
    links that have no ``<inertial>`` and the notes on what was changed."""

    root: ET.Element
    bare_links: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def write(self, folder: str, name: str) -> Path:
        out = Path(folder) / name
        out.write_text(ET.tostring(self.root, encoding="unicode"))
        return out


def prepare_urdf(path: Path) -> PreparedUrdf:
    """Read ``path`` for PyBullet: every mesh and texture path made absolute (``package://`` resolved as
    MuJoCo does, so the copy may live anywhere), every ``<material>`` without a name given a unique one
    (``lab_mat_N``), and the links without ``<inertial>`` listed."""
    root = ET.parse(path).getroot()
    for tag in ("mesh", "texture"):
        for el in root.iter(tag):
            fn = el.get("filename")
            if fn:
                el.set("filename", str(_resolve_mesh(fn, path.parent)))
    prep = PreparedUrdf(root)
    taken = {m.get("name") for m in root.iter("material") if m.get("name")}
    k = 0

    def fresh() -> str:
        nonlocal k
        while f"lab_mat_{k}" in taken:
            k += 1
        taken.add(f"lab_mat_{k}")
        return f"lab_mat_{k}"

    for mat in root.findall("material"):
        if not mat.get("name"):
            mat.set("name", fresh())
            prep.notes.append(f"a top-level <material> has no name: named {mat.get('name')}")
    for link in root.findall("link"):
        lname = link.get("name") or "?"
        for visual in link.findall("visual"):
            for mat in visual.findall("material"):
                if not mat.get("name"):
                    mat.set("name", fresh())
                    prep.notes.append(f"material on link {lname} has no name: named {mat.get('name')}")
        if link.find("inertial") is None:
            prep.bare_links.append(lname)
    return prep


def inertial_element(inertia: LinkInertia) -> ET.Element:
    """A URDF ``<inertial>`` with ``inertia``'s mass, CoM and full tensor in the link frame."""
    w, x, y, z = inertia.quat
    rot = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    tensor = rot @ np.diag(inertia.diag) @ rot.T
    el = ET.Element("inertial")
    ET.SubElement(el, "origin", xyz=" ".join(f"{v:.12g}" for v in inertia.pos), rpy="0 0 0")
    ET.SubElement(el, "mass", value=f"{inertia.mass:.12g}")
    names = {"ixx": (0, 0), "ixy": (0, 1), "ixz": (0, 2), "iyy": (1, 1), "iyz": (1, 2), "izz": (2, 2)}
    ET.SubElement(el, "inertia", {k: f"{tensor[i, j]:.12g}" for k, (i, j) in names.items()})
    return el
