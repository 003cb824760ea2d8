"""Per-robot configuration: PD gains and nominal pose by joint-name pattern.

A pattern is a regular expression searched in the joint name; the first match wins. The
built-in Q1 uses :data:`Q1_CONFIG`; another robot gets :data:`DEFAULT_CONFIG` unless a JSON
file ``<model>.lab.json`` beside the model overrides some of its fields.
"""

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError


@dataclass(frozen=True)
class RobotConfig:
    """Gains [N·m/rad, N·m·s/rad], nominal joint angles [rad] and body-name patterns."""

    gains: tuple = (
        (r"hip|knee|thigh|calf|leg", 150.0, 12.0),
        (r"ankle|foot", 100.0, 8.0),
        (r"shoulder|elbow|waist|head|neck|torso|wrist|arm", 40.0, 3.0),
        (r".", 40.0, 3.0),
    )
    nominal: tuple = (
        (r"hip_pitch", -0.3),
        (r"knee", 0.6),
        (r"ankle_pitch", -0.3),
    )
    effort_default: tuple = (  # torque limit [N·m] for joints whose model gives none
        (r"hip|knee", 60.0),
        (r"ankle", 30.0),
        (r".", 22.0),
    )
    torso_body: str = r"torso|chest|trunk|upper_body"
    foot_bodies: str = r"foot|ankle_roll"
    gravity_ff: bool = False  # add qfrc_bias (gravity + Coriolis) of the actuated dofs

    def gains_for(self, joint: str) -> tuple[float, float]:
        for pattern, kp, kd in self.gains:
            if re.search(pattern, joint):
                return float(kp), float(kd)
        return 40.0, 3.0

    def nominal_for(self, joint: str) -> float:
        for pattern, angle in self.nominal:
            if re.search(pattern, joint):
                return float(angle)
        return 0.0

    def effort_for(self, joint: str) -> float:
        for pattern, effort in self.effort_default:
            if re.search(pattern, joint):
                return float(effort)
        return 22.0


DEFAULT_CONFIG = RobotConfig()

Q1_CONFIG = dataclasses.replace(
    DEFAULT_CONFIG,
    nominal=(
        (r"hip_pitch", -0.3),
        (r"knee", 0.6),
        (r"ankle_pitch", -0.3),
        (r"left_shoulder_roll", 0.12),
        (r"right_shoulder_roll", -0.12),
        (r"elbow", -0.35),
    ),
)


def load_config(model_path: Path, builtin: bool) -> RobotConfig:
    """The config for a model: Q1's for the built-in robot, else defaults plus a JSON sidecar."""
    if builtin:
        return Q1_CONFIG
    sidecar = Path(str(model_path) + ".lab.json")
    if not sidecar.exists():
        return DEFAULT_CONFIG
    try:
        raw = json.loads(sidecar.read_text())
    except json.JSONDecodeError as exc:
        raise LabError(f"{sidecar}: invalid JSON ({exc})", "fix the robot config file or remove it") from exc
    known = {f.name for f in dataclasses.fields(RobotConfig)}
    unknown = set(raw) - known
    if unknown:
        raise LabError(f"{sidecar}: unknown field(s) {sorted(unknown)}", f"known fields: {', '.join(sorted(known))}")
    fixed = {k: tuple(tuple(x) for x in v) if isinstance(v, list) else v for k, v in raw.items()}
    return dataclasses.replace(DEFAULT_CONFIG, **fixed)
