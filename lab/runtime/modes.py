"""The mode registries of the services, built explicitly (nothing registers itself on import).

- :data:`LAB_MODES`: the Lab and the state server: stand, squat, push, zero, the walking pipeline's walk
  and pose (joint targets set one by one, the robot panel's sliders);
- :data:`SIM2SIM_MODES`: Sim2Sim: the four modes both engines run.
"""

from lab.control.modes import MODES
from lab.control.pose import Pose
from lab.walking.mode import Walk

LAB_MODES: dict = {**MODES, Walk.name: Walk, Pose.name: Pose}
SIM2SIM_MODES: dict = dict(MODES)
