"""Two engines in lockstep: the same robot, start state, PD law, gains and targets, one tick at a time.

:class:`Lockstep` holds one :class:`~lab.sim.runner.Rollout` per engine (MuJoCo and PyBullet by
default) and advances them together by one physics step of the shared timestep; a mode, a push,
a pause or a reset acts on both at the same instant. :meth:`Lockstep.advance` is the one loop:
``experiments/sim2sim.py`` calls it headless, and :meth:`Lockstep.start` runs it in a thread paced
to the wall clock for the Sim2Sim page. Each sample holds every engine's metrics plus their
divergence (pelvis height difference, joint-angle RMS difference).
"""

import collections
import dataclasses
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.control.modes import MODES, PushParams, SquatParams, get_mode
from lab.control.pd import PDGains
from lab.errors import LabError
from lab.robots.model import Robot, load_robot
from lab.sim.engine import Engine, quat_pitch_deg
from lab.sim.mujoco_engine import MujocoEngine
from lab.sim.pybullet_engine import PybulletEngine, check_urdf_for_pybullet
from lab.sim.runner import Rollout

LOCKSTEP_MODES = ("stand", "squat", "push", "zero")  # the modes both engines run (walk is the Lab's)

ENGINES = {"mujoco": MujocoEngine, "pybullet": PybulletEngine}
MAX_CATCHUP_S = 0.1  # if physics falls further behind the wall clock, the clock slips [s]
MASS_TOLERANCE = 1e-3  # relative difference of total mass above which the engines disagree
FALLEN_HEIGHT = 0.6  # fallen when the pelvis is below this fraction of the standing height...
FALLEN_PITCH_DEG = 45.0  # ...or the torso pitches more than this [deg]


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
        warning = (
            f"total mass differs: {', '.join(f'{n} {v:g} kg' for n, v in masses.items())}"
            + (f" ({'; '.join(extra)})" if extra else "")
            + "; links without <inertial> get 1 kg in PyBullet"
        )
    return {"total_mass": masses, "mass_warning": warning}


def fell(metrics: dict, standing_height: float) -> bool:
    return metrics["pelvis_z"] < FALLEN_HEIGHT * standing_height or abs(metrics["pitch_deg"]) > FALLEN_PITCH_DEG


class Lockstep:
    """Engines ``engines`` (names) stepping ``robot`` together under one mode.

    ``sample_hz`` is the rate of metrics samples [Hz] kept for ``history_s`` [s]. Thread-safe: the
    web layer reads :meth:`latest`, :meth:`snapshot` and :meth:`history_since` while the thread steps.
    """

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
    ):
        self.robot = robot
        self.push = (push or PushParams()).validated()
        self.squat = squat or SquatParams()
        mode_obj = self._make_mode(mode)  # an unknown mode raises before any engine exists
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        gains = PDGains.for_robot(robot)
        # PyBullet gives no gravity/Coriolis torque here: the same law for both means no feed-forward.
        self.gravity_ff_requested = gains.gravity_ff
        gains = dataclasses.replace(gains, gravity_ff=False)
        self.gains = gains
        self.engines: dict[str, Engine] = {}
        try:
            for name in engines:
                self.engines[name] = make_engine(name, robot)
        except Exception:
            self.close()
            raise
        dts = {e.dt for e in self.engines.values()}
        if len(dts) != 1:
            self.close()
            raise LabError(f"engines have different timesteps {sorted(dts)}", "lockstep needs one shared timestep")
        self.dt = dts.pop()
        self.rollouts = {n: Rollout(e, gains, mode_obj) for n, e in self.engines.items()}
        self.names = list(self.engines)
        self.mode_name = mode
        self.rtf = float(rtf)
        self.paused = False
        self.steps = 0
        self.resets = 0
        self.masses = mass_report(robot, self.engines)
        self._every = max(1, int(round(1.0 / (sample_hz * self.dt))))
        self._lock = threading.Lock()
        self.history = collections.deque(maxlen=int(history_s * sample_hz))
        self._rtf_window = collections.deque(maxlen=64)  # (wall, sim) pairs
        self._fall_time: dict = {}
        self._latest = None
        self._qpos = {}
        self.error: str | None = None
        with self._lock:
            self._sample()
            self._publish()

    def _make_mode(self, name):
        return get_mode(name, self.robot, push=self.push, squat=self.squat)

    # ---- stepping -----------------------------------------------------------------------------
    def _tick(self) -> None:
        for r in self.rollouts.values():
            r.step()
        self.steps += 1
        if self.steps % self._every == 0:
            self._sample()

    def advance(self, seconds: float) -> None:
        """Step every engine by ``seconds`` [s] of simulation (headless; for scripts and tests)."""
        with self._lock:
            for _ in range(int(round(seconds / self.dt))):
                self._tick()
            self._publish()

    def _sample(self) -> None:
        t = self.sim_time
        per = {}
        for n, r in self.rollouts.items():
            m = r.metrics().to_dict()
            if n not in self._fall_time and fell(m, self.robot.standing_height):
                self._fall_time[n] = round(t, 6)
            m["fall_time"] = self._fall_time.get(n)
            per[n] = m
        a, b = (self.engines[n] for n in self.names[:2])
        div = divergence(a, b).to_dict()
        cmd = self.rollouts[self.names[0]].command
        sample = {
            "sim_time": round(t, 6),
            "mode": self.mode_name,
            "push": cmd.push is not None,
            "engines": per,
            "divergence": div,
        }
        self._latest = sample
        self.history.append(sample)

    def _publish(self) -> None:
        """Copy each engine's state as a MuJoCo qpos for the renderers (called with the lock held)."""
        self._qpos = {n: (e.mj_qpos(), e.time) for n, e in self.engines.items()}

    # ---- control -------------------------------------------------------------------------------
    def set_mode(self, name: str, push: dict | None = None) -> None:
        if not isinstance(name, str) or name not in LOCKSTEP_MODES:
            hint = f"available: {', '.join(LOCKSTEP_MODES)}"
            if isinstance(name, str) and name in MODES:
                raise LabError(f"mode '{name}' is not available in Sim2Sim", hint)
            raise LabError(f"unknown mode '{name}'", hint)
        with self._lock:
            new_push = _push_params(self.push, push) if push else self.push
            mode = get_mode(name, self.robot, push=new_push, squat=self.squat)  # raises before anything changes
            self.push = new_push
            for r in self.rollouts.values():
                r.set_mode(mode)
            self.mode_name = name

    def set_push(self, push: dict) -> PushParams:
        """Change the push (force, duration, period); a running ``push`` mode restarts with it in both engines."""
        with self._lock:
            self.push = _push_params(self.push, push)
            if self.mode_name == "push":
                mode = self._make_mode("push")
                for r in self.rollouts.values():
                    r.set_mode(mode)
            return self.push

    def pause(self, paused: bool) -> None:
        """Hold or release both engines; once ``pause(True)`` returns, no further step is taken."""
        with self._lock:
            self.paused = bool(paused)

    def reset(self) -> None:
        """Both engines back to the same start state at time 0, under the current mode; history cleared."""
        with self._lock:
            mode = self._make_mode(self.mode_name)
            for r in self.rollouts.values():
                r.set_mode(mode)
                r.reset()
            self.steps = 0
            self.resets += 1
            self._rtf_window.clear()
            self.history.clear()
            self._fall_time.clear()
            self._sample()
            self._publish()

    # ---- reads ---------------------------------------------------------------------------------
    @property
    def sim_time(self) -> float:
        return self.engines[self.names[0]].time

    def snapshot(self, name: str) -> tuple[np.ndarray, float]:
        """``(qpos (nq,), sim_time)`` of engine ``name`` as of the last published step (a copy)."""
        with self._lock:
            q, t = self._qpos[name]
            return q.copy(), t

    def latest(self) -> dict:
        s = dict(self._latest)
        s["mode"] = self.mode_name  # the sample may predate a mode change by up to one sample period
        s["rtf"] = round(self.measured_rtf(), 3)
        s["paused"] = self.paused
        s["resets"] = self.resets
        return s

    def history_since(self, t: float) -> list:
        with self._lock:
            return [h for h in self.history if h["sim_time"] > t]

    def measured_rtf(self) -> float:
        w = self._rtf_window
        if self.paused or len(w) < 2 or w[-1][0] - w[0][0] < 1e-3:
            return 0.0
        return (w[-1][1] - w[0][1]) / (w[-1][0] - w[0][0])

    def engine_info(self) -> dict:
        return {
            n: {"name": e.name, "version": e.version, "dt": e.dt, "total_mass": self.masses["total_mass"][n]}
            for n, e in self.engines.items()
        }

    # ---- the thread ----------------------------------------------------------------------------
    def start(self) -> "Lockstep":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lockstep", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(2.0)

    def close(self) -> None:
        self.stop()
        for e in getattr(self, "engines", {}).values():
            if hasattr(e, "close"):
                e.close()

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # keep the reason visible in /api/status instead of dying silently
            self.error = f"simulation stopped: {type(exc).__name__}: {exc}"

    def _loop(self) -> None:
        dt = self.dt
        wall0, sim0 = time.perf_counter(), self.sim_time
        while not self._stop.is_set():
            now = time.perf_counter()
            if self.paused:
                time.sleep(0.01)
                wall0, sim0 = time.perf_counter(), self.sim_time
                self._rtf_window.clear()
                continue
            if self.sim_time < sim0:  # a reset happened: re-anchor the clock
                wall0, sim0 = now, self.sim_time
                self._rtf_window.clear()
            behind = sim0 + (now - wall0) * self.rtf - self.sim_time
            if behind < dt:
                time.sleep(min(0.002, max(dt - behind, 0.0) / self.rtf))
                continue
            if behind > MAX_CATCHUP_S:  # cannot keep up: let the clock slip, rtf shows it
                wall0, sim0 = now, self.sim_time
                behind = dt
            n = min(int(behind / dt), 20)
            with self._lock:
                if self.paused:  # paused while this chunk was being planned
                    continue
                for _ in range(n):
                    self._tick()
                self._publish()
            self._rtf_window.append((time.perf_counter(), self.sim_time))


def _push_params(current: PushParams, raw: dict) -> PushParams:
    if not isinstance(raw, dict):
        raise LabError(f"push must be a JSON object, got {type(raw).__name__}", 'e.g. {"force_n": 40}')
    known = {f.name for f in dataclasses.fields(PushParams)}
    unknown = set(raw) - known
    if unknown:
        raise LabError(
            f"unknown push parameter(s): {', '.join(sorted(unknown))}", f"accepted: {', '.join(sorted(known))}"
        )
    first = raw.get("first_s", current.first_s)  # PushParams.validated() does not check it
    if not isinstance(first, (int, float)) or isinstance(first, bool) or not 0.0 <= first <= 60.0:
        raise LabError(f"push first_s must be a number in [0, 60], got {first!r}", "time of the first push [s]")
    return dataclasses.replace(current, **raw).validated()
