"""Robot files written by tests: binary STL meshes and a Q1 variant whose torso is a mesh in a sub-folder."""

import itertools
import struct

import numpy as np

from lab.robots.model import BUILTIN_URDF


def write_stl_box(path, sx, sy, sz) -> None:
    """A binary STL box centred at the origin (MuJoCo reads binary STL only)."""
    v = np.array(list(itertools.product([-sx / 2, sx / 2], [-sy / 2, sy / 2], [-sz / 2, sz / 2])))
    faces = [
        (0, 1, 3),
        (0, 3, 2),
        (4, 6, 7),
        (4, 7, 5),
        (0, 4, 5),
        (0, 5, 1),
        (2, 3, 7),
        (2, 7, 6),
        (0, 2, 6),
        (0, 6, 4),
        (1, 5, 7),
        (1, 7, 3),
    ]
    out = bytearray(b"lab test box".ljust(80, b" ")) + struct.pack("<I", len(faces))
    for f in faces:
        a, b, c = v[list(f)]
        n = np.cross(b - a, c - a)
        if np.dot(n, (a + b + c) / 3) < 0:  # outward normals
            b, c = c, b
            n = -n
        n = n / np.linalg.norm(n)
        out += struct.pack("<12fH", *n, *a, *b, *c, 0)
    path.write_bytes(bytes(out))


def write_mesh_urdf(folder):
    """The Q1 URDF with its torso drawn and collided by ``meshes/torso.stl`` beside it; returns the URDF path."""
    (folder / "meshes").mkdir(parents=True, exist_ok=True)
    write_stl_box(folder / "meshes" / "torso.stl", 0.10, 0.17, 0.18)
    text = BUILTIN_URDF.read_text().replace(
        '<geometry><box size="0.1 0.17 0.18"/></geometry>', '<geometry><mesh filename="meshes/torso.stl"/></geometry>'
    )
    path = folder / "robot.urdf"
    path.write_text(text)
    return path
