"""Humanoid Sim Lab: headless humanoid simulation (MuJoCo, PyBullet) seen and driven from a browser.

Rendering is offscreen through EGL: MuJoCo picks its GL backend when it is first imported, so the
default is chosen here, before any ``lab`` module imports ``mujoco`` (a user's own ``MUJOCO_GL`` wins).
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
if os.environ["MUJOCO_GL"] == "egl":
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
