"""The out-of-the-box checks of a robot: stand, push and squat in one engine, with the numbers that judge them.

One function (:func:`run_trial`) for the tests, ``experiments/06_any_humanoid.py`` and its README figures:
- **stand** 10 s: the pelvis stays within :data:`STAND_POS_M` of where it started and the torso within
  :data:`STAND_TILT_DEG` of upright;
- **push** 10 s: the default push for the robot's mass (the built-in robot's delta-v) at 1, 4 and 7 s,
  no fall;
- **squat** 4 cycles (16 s at the default 4 s period): no fall, and the depth reached.
"""

import time
from dataclasses import asdict, dataclass

import numpy as np

from lab.control.modes import get_mode
from lab.control.pd import PDGains
from lab.control.rollout import Rollout, simulate
from lab.robots.model import Robot
from lab.runtime.lockstep import make_engine
from lab.runtime.modes import LAB_MODES

STAND_POS_M = 0.01  # [m]
STAND_TILT_DEG = 2.0  # [deg]
SECONDS = {"stand": 10.0, "push": 10.0, "squat": 16.0}


@dataclass(frozen=True)
class Trial:
    model: str
    engine: str
    mode: str
    seconds: float  # simulated [s]
    fell_at: float | None  # [s], by the robot's one fall rule
    pos_err_m: float  # largest pelvis displacement from its start [m]
    tilt_deg: float  # largest |pitch| or |roll| of the torso [deg]
    joint_err_rad: float  # largest joint tracking error after the first second [rad]
    depth_m: float  # deepest pelvis drop below its start [m]
    push_n: float  # the push force used (push mode) [N]
    steps_per_s: float  # physics steps per wall-clock second, controller included

    @property
    def ok(self) -> bool:
        if self.fell_at is not None:
            return False
        if self.mode == "stand":
            return self.pos_err_m <= STAND_POS_M and self.tilt_deg <= STAND_TILT_DEG
        return True

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def run_trial(robot: Robot, mode: str, engine: str = "mujoco", seconds: float | None = None) -> Trial:
    """Run ``mode`` on ``robot`` in ``engine`` ("mujoco" | "pybullet") for ``seconds`` (default :data:`SECONDS`)."""
    seconds = SECONDS.get(mode, 10.0) if seconds is None else seconds
    eng = make_engine(engine, robot)
    try:
        m = get_mode(mode, robot, modes=LAB_MODES)
        rollout = Rollout(eng, PDGains.for_robot(robot), m)
        pos0 = np.array(eng.base_pose()[0])
        worst = {"pos": 0.0, "tilt": 0.0, "err": 0.0, "depth": 0.0}
        fell = []

        def watch(s):
            pos = np.array(eng.base_pose()[0])
            worst["pos"] = max(worst["pos"], float(np.linalg.norm(pos - pos0)))
            worst["depth"] = max(worst["depth"], float(pos0[2] - pos[2]))
            worst["tilt"] = max(worst["tilt"], abs(s.pitch_deg), abs(s.roll_deg))
            if s.sim_time >= 1.0:
                worst["err"] = max(worst["err"], s.max_joint_err)
            if not fell and robot.has_fallen(s.pelvis_z, s.pitch_deg, s.roll_deg):
                fell.append(s.sim_time)

        t0 = time.perf_counter()
        simulate(rollout, seconds, sample_dt=0.01, on_sample=watch)
        wall = time.perf_counter() - t0
    finally:
        eng.close()
    return Trial(
        model=robot.path.name,
        engine=engine,
        mode=mode,
        seconds=seconds,
        fell_at=round(fell[0], 3) if fell else None,
        pos_err_m=round(worst["pos"], 5),
        tilt_deg=round(worst["tilt"], 3),
        joint_err_rad=round(worst["err"], 5),
        depth_m=round(worst["depth"], 5),
        push_n=m.push_params.force_n if mode == "push" else 0.0,
        steps_per_s=round(seconds / eng.dt / wall, 0) if wall > 0 else 0.0,
    )
