"""The mode registries of the services, built explicitly (nothing registers itself on import).

- :data:`LAB_MODES`: the Lab and the state server: stand, squat, push, zero, the walking pipeline's walk
  (the feedback walker) and walk_pd (the joint-PD baseline), and pose (joint targets set one by one, the
  robot panel's sliders);
- :data:`SIM2SIM_MODES`: Sim2Sim: the modes both engines run: stand, squat, push, zero and the feedback walk
  (walk_pd and pose stay the Lab's).
"""

from lab.control.modes import MODES
from lab.control.pose import Pose
from lab.walking.mode import Walk, WalkPD

LAB_MODES: dict = {**MODES, Walk.name: Walk, WalkPD.name: WalkPD, Pose.name: Pose}
SIM2SIM_MODES: dict = {**MODES, Walk.name: Walk}  # the feedback walker reads only the engine interface
