"""The engines by name: :func:`make_engine` builds one for a robot (each engine module imported on first use)."""

from lab.errors import LabError
from lab.robots.model import Robot
from lab.sim.engine import Engine

ENGINE_NAMES = ("mujoco", "pybullet")


def make_engine(name: str, robot: Robot) -> Engine:
    """A new ``name`` engine (``mujoco`` or ``pybullet``) holding ``robot``; a :class:`LabError` for another name."""
    if name == "mujoco":
        from lab.sim.mujoco_engine import MujocoEngine

        return MujocoEngine(robot)
    if name == "pybullet":
        from lab.sim.pybullet_engine import PybulletEngine

        return PybulletEngine(robot)
    raise LabError(f"unknown engine '{name}'", f"available: {', '.join(ENGINE_NAMES)}")
