"""Two engines in lockstep: the same robot, start state, PD law, gains and targets, one tick at a time.

:class:`Lockstep` holds one :class:`~lab.control.rollout.Rollout` per engine (MuJoCo and PyBullet by
default) and advances them together by one physics step of the shared timestep; a mode, a push,
a pause or a reset acts on both at the same instant. :meth:`Lockstep.advance` is the one loop:
``experiments/sim2sim.py`` calls it headless, and :meth:`Lockstep.start` runs it in a thread paced
to the wall clock for the Sim2Sim page. Each sample holds every engine's metrics plus their
divergence (pelvis height difference, joint-angle RMS difference).
"""

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.control.modes import PushParams, SquatParams, get_mode
from lab.control.pd import PDGains
from lab.errors import LabError
from lab.robots.model import Robot, load_robot
from lab.runtime.modes import LAB_MODES, SIM2SIM_MODES
from lab.runtime.realtime import RealtimeRunner
from lab.sim.engine import Engine, quat_pitch_deg
from lab.sim.mujoco_engine import MujocoEngine
from lab.sim.pybullet_engine import PybulletEngine, check_urdf_for_pybullet

LOCKSTEP_MODES = tuple(SIM2SIM_MODES)  # the modes both engines run (walk is the Lab's)

ENGINES = {"mujoco": MujocoEngine, "pybullet": PybulletEngine}
MASS_TOLERANCE = 1e-3  # relative difference of total mass above which the engines disagree


def make_engine(name: str, robot: Robot) -> Engine:
    if name not in ENGINES:
        raise LabError(f"unknown engine '{name}'", f"available: {', '.join(ENGINES)}")
    return ENGINES[name](robot)


def load_sim2sim_robot(path: str | Path | None = None) -> Robot:
    """Load a URDF humanoid that both engines can read; a :class:`LabError` names the engine that cannot.

    ``None`` is the built-in Q1. File errors (missing, not a file) are reported as they are.
    """
    if path is not None:
        p = Path(path).expanduser()
        if not p.exists():
            raise LabError(f"model file not found: {p}", "pass --model PATH to an existing .urdf file")
        if not p.is_file():
            raise LabError(f"model path is not a file: {p}", "pass --model PATH to a .urdf file")
        check_urdf_for_pybullet(p)  # not a URDF, or meshes PyBullet cannot read
    try:
        robot = load_robot(path)
    except LabError as exc:
        name = Path(path).name if path else "the built-in robot"
        reason = re.sub(r"^model \S+ (does not compile|does not load): (Error: )?", "", exc.message)
        raise LabError(
            f"MuJoCo cannot load {name}: {reason}", exc.hint or "check the model in MuJoCo's simulate viewer"
        ) from exc
    make_engine("pybullet", robot).close()  # raises a LabError naming PyBullet
    return robot


@dataclass(frozen=True)
class Divergence:
    """How far engine ``b`` is from engine ``a`` at one instant."""

    sim_time: float  # [s]
    pelvis_dz: float  # pelvis height b - a [m]
    joint_rms: float  # RMS over actuated joints of q_b - q_a [rad]
    joint_max: float  # max over actuated joints of |q_b - q_a| [rad]
    base_dxy: float  # horizontal distance between the two pelvises [m]
    pitch_diff_deg: float  # torso pitch b - a [deg]

    def to_dict(self) -> dict:
        return {k: round(v, 6) for k, v in dataclasses.asdict(self).items()}


def divergence(a: Engine, b: Engine) -> Divergence:
    pa, _ = a.base_pose()
    pb_, _ = b.base_pose()
    dq = b.joint_state()[0] - a.joint_state()[0]
    return Divergence(
        sim_time=a.time,
        pelvis_dz=float(pb_[2] - pa[2]),
        joint_rms=float(np.sqrt(np.mean(dq * dq))),
        joint_max=float(np.max(np.abs(dq))),
        base_dxy=float(np.hypot(*(pb_[:2] - pa[:2]))),
        pitch_diff_deg=quat_pitch_deg(b.torso_quat()) - quat_pitch_deg(a.torso_quat()),
    )


def mass_report(robot: Robot, engines: dict) -> dict:
    """Total mass [kg] each engine sees, and a warning line when they differ by more than 0.1 %."""
    masses = {name: round(float(e.total_mass), 6) for name, e in engines.items()}
    ref = robot.total_mass
    warning = None
    off = {n: m for n, m in masses.items() if abs(m - ref) > MASS_TOLERANCE * ref}
    if off:
        m = robot.model
        mj = {m.body(b).name: float(m.body_mass[b]) for b in range(1, m.nbody)}
        extra = []
        for name, e in engines.items():
            if hasattr(e, "link_masses"):
                extra += [
                    f"{link} {kg:g} kg in {name}, {mj.get(link, 0.0):g} kg in MuJoCo"
                    for link, kg in e.link_masses().items()
                    if abs(kg - mj.get(link, 0.0)) > 1e-6
                ]
        warning = f"total mass differs: {', '.join(f'{n} {v:g} kg' for n, v in masses.items())}" + (
            f" ({'; '.join(extra)})" if extra else ""
        )
    return {"total_mass": masses, "mass_warning": warning}


class Lockstep(RealtimeRunner):
    """Engines ``engines`` (names) stepping ``robot`` together under one mode.

    ``sample_hz`` is the rate of metrics samples [Hz] kept for ``history_s`` [s]. Thread-safe: the
    web layer reads :meth:`latest`, :meth:`snapshot` and :meth:`history_since` while the thread steps.
    """

    service = "Sim2Sim"

    def __init__(
        self,
        robot: Robot,
        mode: str = "stand",
        engines=("mujoco", "pybullet"),
        rtf: float = 1.0,
        sample_hz: float = 50.0,
        history_s: float = 30.0,
        push: PushParams | None = None,
        squat: SquatParams | None = None,
        modes: dict | None = None,
    ):
        modes = modes or SIM2SIM_MODES
        if isinstance(mode, str) and mode not in modes and mode in LAB_MODES:
            raise LabError(f"mode '{mode}' is not available in Sim2Sim", f"available: {', '.join(modes)}")
        get_mode(mode, robot, modes=modes)  # an unknown mode raises before any engine exists
        gains = PDGains.for_robot(robot)
        # the standing-load feed-forward is computed from the controller's model and each engine's measured
        # state (lab.control.stance), so both engines get the same law
        self.gravity_ff_requested = gains.gravity_ff
        made: dict[str, Engine] = {}
        try:
            for name in engines:
                made[name] = make_engine(name, robot)
            super().__init__(
                robot,
                made,
                modes,
                mode,
                gains=gains,
                all_modes=LAB_MODES,
                rtf=rtf,
                sample_hz=sample_hz,
                history_s=history_s,
                push=push,
                squat=squat,
                max_chunk=20,
            )
        except Exception:
            for e in made.values():
                e.close()
            raise
        self.masses = mass_report(robot, self.engines)

    @property
    def error(self) -> str | None:
        return self.sim_info()["error"]

    def _make_sample(self, metrics: dict) -> dict:
        per = {}
        for n, m in metrics.items():
            d = m.to_dict()
            d["fall_time"] = self.fell_at(n)
            per[n] = d
        cmd = self.rollouts[self.names[0]].command
        div = None  # one engine alone (a headless comparison run) has nothing to diverge from
        if len(self.names) > 1:
            div = divergence(self.engines[self.names[0]], self.engines[self.names[1]]).to_dict()
        return {
            "sim_time": round(self.sim_time, 6),
            "mode": self.mode_name,
            "push": cmd.push is not None,
            "engines": per,
            "divergence": div,
        }

    def latest(self) -> dict:
        s = dict(self._latest)
        s["mode"] = self.mode_name  # the sample may predate a mode change by up to one sample period
        s["rtf"] = round(self.measured_rtf(), 3)
        s["paused"] = self.paused
        s["resets"] = self.resets
        s["sim"] = self.sim_info()
        return s

    def history_since(self, t: float) -> list:
        with self._lock:
            return [h for h in self.history if h["sim_time"] > t]

    def engine_info(self) -> dict:
        return {
            n: {"name": e.name, "version": e.version, "dt": e.dt, "total_mass": self.masses["total_mass"][n]}
            for n, e in self.engines.items()
        }
