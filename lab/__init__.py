"""Humanoid Sim Lab: headless humanoid simulation (MuJoCo, PyBullet) seen and driven from a browser.

Rendering is offscreen through EGL: MuJoCo picks its GL backend when it is first imported, so the
default is chosen here, before any ``lab`` module imports ``mujoco`` (a user's own ``MUJOCO_GL`` wins).
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
if os.environ["MUJOCO_GL"] == "egl":
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def _route_mujoco_warnings() -> None:
    """MuJoCo's own warning handler appends to ``MUJOCO_LOG.TXT`` in the current directory (the repository
    root, for the services) and prints to stdout; send its warnings to the ``lab.mujoco`` logger instead.

    Only the report changes: MuJoCo still counts each warning in ``data.warning`` (the engines' divergence
    check reads ``mjWARN_BADQACC`` and its kin there). Imported after ``MUJOCO_GL`` is set, above."""
    import logging

    try:
        import mujoco
    except ImportError:  # a tool that needs only lab.errors, say, on a machine without MuJoCo
        return
    log = logging.getLogger("lab.mujoco")

    def warn(message: str) -> None:
        log.warning("%s", str(message).strip())

    mujoco.set_mju_user_warning(warn)


_route_mujoco_warnings()
