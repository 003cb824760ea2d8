"""Two engines in lockstep: the same robot, start state, PD law, gains and targets, one tick at a time.

:class:`Lockstep` holds one :class:`~lab.control.rollout.Rollout` per engine (MuJoCo and PyBullet by
default) and advances them together by one physics step of the shared timestep; a mode, a push,
a pause or a reset acts on both at the same instant. :meth:`Lockstep.advance` is the one loop:
``experiments/sim2sim.py`` calls it headless, and :meth:`Lockstep.start` runs it in a thread paced
to the wall clock for the Sim2Sim page. Each sample holds every engine's metrics plus their
divergence (pelvis height difference, joint-angle RMS difference).

In the ``walk`` mode (the feedback walker, the same gains and law in each engine) the footsteps are
compared too: :meth:`Lockstep.step_divergence` pairs the two engines' touchdowns by step index: the
walker's touchdown (its ``events``: the end of the swing, planned, re-timed or early once the swing
foot carries load) and where it measured the landed ankle. Beside it, each engine's *contact* touchdown
is measured every physics step (:class:`TouchdownWatch`): the swing foot's first floor contact after
it has been clear of the floor for :data:`CLEAR_S` (none for a step whose foot never cleared).
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
from lab.sim.engines import make_engine
from lab.sim.pybullet_engine import check_urdf_for_pybullet

LOCKSTEP_MODES = tuple(SIM2SIM_MODES)  # the modes both engines run (walk_pd and pose are the Lab's)

MASS_TOLERANCE = 1e-3  # relative difference of total mass above which the engines disagree
CLEAR_S = 0.02  # [s] a swing foot counts as lifted once it has had no floor contact this long
SIDES = ("left", "right")
STEP_ROWS = (1, 1000, 100)  # rows of the per-step table one read may ask for: least, most, default


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


class TouchdownWatch:
    """The touchdown times of one engine's feedback walker (``controller``), measured on the engine.

    Per step index (the walker's ``step`` while the foot swings): ``lift[k]``, the sim time [s] the
    swing foot left the floor (no contact for :data:`CLEAR_S` from then on), and ``touch[k]``, the sim
    time [s] of its first floor contact after that. A step whose foot never clears has neither.
    """

    def __init__(self, controller):
        self.controller = controller
        self.lift: dict = {}
        self.touch: dict = {}
        self._step = None  # the step being watched
        self._side = 0
        self._clear_since = None
        self._done = True

    def watch(self, engine: Engine) -> None:
        ctl = self.controller
        if getattr(ctl, "phase", None) == "ss" and ctl.step != self._step:  # a new swing begins
            self._step, self._side = ctl.step, 1 - ctl.support
            self._clear_since, self._done = None, False
        if self._done:
            return
        side = self._side
        on = any(c.side == side and c.fz > 0.0 for c in engine.foot_contacts())
        t = engine.time
        if self._step not in self.lift:
            if on:
                self._clear_since = None
            else:
                if self._clear_since is None:
                    self._clear_since = t
                if t - self._clear_since >= CLEAR_S - 1e-9:
                    self.lift[self._step] = self._clear_since
        elif on:
            self.touch[self._step] = t
            self._done = True


def _pair_steps(names: tuple, walks: dict, falls: dict) -> list:
    """One row per step index either engine has landed (see :meth:`Lockstep.step_divergence`).

    ``walks``: engine -> (events, touchdown watch, engine time of walk time 0 [s]); ``falls``: engine -> fall time or None.
    """
    a, b = names
    by = {n: {e["step"]: e for e in ev} for n, (ev, _, _) in walks.items()}

    def r6(v):
        return None if v is None else round(float(v), 6)

    rows = []
    for k in sorted(set(by[a]) | set(by[b])):
        ev = {n: by[n].get(k) for n in names}
        t = {n: (walks[n][2] + ev[n]["t_s"] if ev[n] else None) for n in names}
        t_any = t[a] if t[a] is not None else t[b]
        contact = {n: walks[n][1].touch.get(k) for n in names}
        landed = {n: (list(ev[n]["landed"]) if ev[n] else None) for n in names}
        paired = ev[a] is not None and ev[b] is not None
        row = {
            "step": k,
            "side": SIDES[(ev[a] or ev[b])["side"]],
            "t_s": {n: r6(v) for n, v in t.items()},
            "dt_s": r6(t[b] - t[a]) if paired else None,
            "contact_s": {n: r6(v) for n, v in contact.items()},
            "contact_dt_s": None if None in contact.values() else r6(contact[b] - contact[a]),
            "landed": {n: (None if v is None else [r6(x) for x in v]) for n, v in landed.items()},
            "dx_m": None,
            "dy_m": None,
            "dxy_m": None,
            "early": {n: (None if ev[n] is None else bool(ev[n].get("early", False))) for n in names},
            "upright": {n: falls[n] is None or falls[n] > (t[n] if t[n] is not None else t_any) for n in names},
            "paired": paired,
        }
        if paired:
            dx, dy = landed[b][0] - landed[a][0], landed[b][1] - landed[a][1]
            row.update(dx_m=r6(dx), dy_m=r6(dy), dxy_m=r6(np.hypot(dx, dy)))
        rows.append(row)
    return rows


def step_summary(rows: list, names: tuple, walks: dict, falls: dict) -> dict:
    """Over every step: ``paired`` (landed in both engines); the largest and mean |touchdown Δt| [s] and its
    signed mean ``bias_dt_s`` (> 0: the second engine lands later); the same of the measured contact
    touchdowns over the ``contact_timed`` steps that have one in both; the largest and mean foothold
    distance [m]; steps per engine; whether each engine is upright now."""

    def agg(f, xs):
        return None if len(xs) == 0 else round(float(f(xs)), 6)

    dt = [r["dt_s"] for r in rows if r["dt_s"] is not None]
    cdt = [r["contact_dt_s"] for r in rows if r["contact_dt_s"] is not None]
    dxy = [r["dxy_m"] for r in rows if r["paired"]]
    return {
        "paired": len(dxy),
        "max_dt_s": agg(np.max, np.abs(dt)),
        "mean_dt_s": agg(np.mean, np.abs(dt)),
        "bias_dt_s": agg(np.mean, dt),
        "max_dxy_m": agg(np.max, dxy),
        "mean_dxy_m": agg(np.mean, dxy),
        "contact_timed": len(cdt),
        "contact_max_dt_s": agg(np.max, np.abs(cdt)),
        "contact_mean_dt_s": agg(np.mean, np.abs(cdt)),
        "steps": {n: len(walks[n][0]) for n in names},
        "upright": {n: falls[n] is None for n in names},
        "engines": list(names),
    }


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
        self._watches: dict = {}  # engine -> TouchdownWatch of its walker (walk mode)
        self._steps_key = None  # what the cached step comparison was computed from
        self._steps = ([], None)  # (rows, summary) of the current walk; summary None outside it
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

    # ---- the walk: touchdowns measured on each engine, paired by step index ----------------------
    def _tick(self) -> None:
        for r in self.rollouts.values():
            r.step()
        if self.mode_name == "walk":
            self._watch_steps()

    def _walkers(self) -> dict:
        """engine -> its feedback walker, or {} when not every engine walks with one."""
        out = {}
        for n, r in self.rollouts.items():
            ctl = getattr(r.mode, "controller", None)
            if ctl is None or not hasattr(ctl, "events") or not hasattr(ctl, "phase"):
                return {}
            out[n] = ctl
        return out

    def _watch_steps(self) -> None:
        for n, ctl in self._walkers().items():
            w = self._watches.get(n)
            if w is None or w.controller is not ctl:  # a new walk (mode selected again)
                w = self._watches[n] = TouchdownWatch(ctl)
            w.watch(self.engines[n])

    def _on_reset(self) -> None:
        self._watches.clear()
        self._steps_key = None

    def _step_table(self) -> tuple:
        """(rows, summary) of the current walk (lock held); recomputed only when something new landed."""
        ctls = self._walkers() if self.mode_name == "walk" and len(self.names) > 1 else {}
        if not ctls:
            self._steps_key, self._steps = None, ([], None)
            return self._steps
        names = tuple(self.names[:2])
        for n in names:
            w = self._watches.get(n)
            if w is None or w.controller is not ctls[n]:
                self._watches[n] = TouchdownWatch(ctls[n])
        falls = {n: self.fell_at(n) for n in names}
        key = tuple(
            (id(ctls[n]), id(ctls[n].events), len(ctls[n].events), len(self._watches[n].touch), falls[n]) for n in names
        )
        if key != self._steps_key:
            walks = {}
            for n in names:
                r = self.rollouts[n]
                walks[n] = (list(ctls[n].events), self._watches[n], r.mode_t0 + getattr(r.mode, "_t0", 0.0))
            rows = _pair_steps(names, walks, falls)
            self._steps = (rows, step_summary(rows, names, walks, falls))
            self._steps_key = key
        return self._steps

    def step_divergence(self, last: int | None = None) -> dict:
        """The per-step comparison of the walk: ``{"walking", "steps": [...], "summary"}``.

        One row per step index (the last ``last`` rows; the summary, :func:`step_summary`, covers every
        step): ``side`` of the swing foot; per engine ``t_s``, the walker's touchdown (sim time [s]),
        ``contact_s``, the measured first floor contact [s] (None if the foot never cleared the floor),
        ``landed``, the landed ankle (x, y) [m], ``early`` (landed on load before the swing's end),
        ``upright`` at that touchdown (the fall rule); ``dt_s`` and ``contact_dt_s``: the second engine
        (PyBullet) minus the first (MuJoCo) [s]; ``dx_m``, ``dy_m``, ``dxy_m``: the foothold, second minus
        first, and the distance [m]; ``paired``: both engines took the step. Outside the walk: no rows and a
        null summary.
        """
        with self._lock:
            rows, summary = self._step_table()
        out = rows if last is None else rows[-last:] if last > 0 else []
        return {"walking": summary is not None, "steps": out, "summary": summary}

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
        self._step_table()  # keeps the walk's step summary current for latest() (lock held here)
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
        s["steps"] = self._steps[1]  # the walk's per-step divergence summary (step_divergence), None outside it
        return s

    def history_since(self, t: float) -> list:
        with self._lock:
            return [h for h in self.history if h["sim_time"] > t]

    def engine_info(self) -> dict:
        return {
            n: {"name": e.name, "version": e.version, "dt": e.dt, "total_mass": self.masses["total_mass"][n]}
            for n, e in self.engines.items()
        }
