"""The mode registries of the services, built explicitly (nothing registers itself on import).

- :data:`LAB_MODES`: the Lab and the state server: stand, squat, push, zero and the walking pipeline's walk;
- :data:`SIM2SIM_MODES`: Sim2Sim: the four modes both engines run.
"""

from lab.control.modes import MODES
from lab.walking.mode import Walk

LAB_MODES: dict = {**MODES, Walk.name: Walk}
SIM2SIM_MODES: dict = dict(MODES)
