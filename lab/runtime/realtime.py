"""The one real-time runner: engines stepped by a thread, paced to the wall clock, never failing silently.

:class:`RealtimeRunner` owns what every live service needs: pacing at a real-time factor, pause,
reset, the mode (one :class:`~lab.control.rollout.Rollout` per engine, all under the same mode), the
push, the measured real-time factor, metrics samples with the robot's one fall rule, and the state
of the simulation itself. The Lab's :class:`~lab.runtime.session.SimSession`, Sim2Sim's
:class:`~lab.runtime.lockstep.Lockstep` and the state server's
:class:`~lab.remote.state_sim.StateSim` are thin users: they say what a sample holds and, where
they need it, what a tick does beyond the rollouts.

Every change (mode, push, pause, reset) and every read of the state takes one short lock; the thread
holds it for one chunk of steps (at most ``max_chunk`` steps) at a time.

The simulation's own state (``sim_info()``) is ``running``, ``paused``, ``error`` (a tick raised:
a mode, the controller or an engine) or ``diverged`` (an engine's state went non-finite, or MuJoCo
flagged a bad acceleration and reset its data behind our back). An error or a divergence stops
stepping, keeps its reason and the simulation time it happened at, and is cleared by :meth:`reset`.
"""

import collections
import dataclasses
import logging
import threading
import time

import numpy as np

from lab.control.modes import PushParams, SquatParams, get_mode
from lab.control.pd import PDGains
from lab.control.rollout import Rollout
from lab.errors import LabError
from lab.robots.model import Robot
from lab.runtime import overlay_state
from lab.sim.engine import quat_pitch_deg, quat_roll_deg

log = logging.getLogger("lab.runtime")

RUNNING, PAUSED, ERROR, DIVERGED = "running", "paused", "error", "diverged"
SIM_STATES = (RUNNING, PAUSED, ERROR, DIVERGED)
RTF_RANGE = (0.05, 4.0)
FALL_CHECK_DT = 0.01  # [s] the fall rule is checked on this grid of simulation time, whatever the sample rate
ENGINE_LABELS = {"mujoco": "MuJoCo", "pybullet": "PyBullet"}


WALK_COMMAND = ("vx", "vy", "yaw_rate")  # the feedback walker's velocity command [m/s, m/s, rad/s]


class RealtimeRunner:
    """``engines`` (name -> :class:`~lab.sim.engine.Engine`) stepping ``robot`` together under one mode.

    ``modes`` is the registry this service offers (``all_modes``: every mode the lab knows, for the
    message that names a mode another service has). ``sample_hz`` [Hz] is the metrics sample rate,
    kept for ``history_s`` [s]; ``max_catchup_s`` [s] is how far behind the wall clock the thread may
    fall before the clock slips (counted in ``lag_drops``); ``max_chunk`` steps are taken per hold of
    the lock.
    """

    service = "this service"

    def __init__(
        self,
        robot: Robot,
        engines: dict,
        modes: dict,
        mode: str = "stand",
        *,
        gains: PDGains | None = None,
        all_modes: dict | None = None,
        rtf: float = 1.0,
        sample_hz: float = 25.0,
        history_s: float = 30.0,
        push: PushParams | None = None,
        squat: SquatParams | None = None,
        max_catchup_s: float = 0.1,
        max_chunk: int = 50,
    ):
        self.robot = robot
        self.modes = modes
        self.all_modes = all_modes or modes
        self.push = (push or PushParams.for_robot(robot)).validated()
        self.squat = squat or SquatParams.for_robot(robot)
        self.engines = dict(engines)
        self.names = list(self.engines)
        dts = {float(e.dt) for e in self.engines.values()}
        if len(dts) != 1:
            raise LabError(f"engines have different timesteps {sorted(dts)}", "one runner needs one shared timestep")
        self.dt = dts.pop()
        self.gains = gains or PDGains.for_robot(robot)
        made = self._make_modes(mode)  # an unknown mode raises before anything runs
        self.rollouts = {n: Rollout(e, self.gains, made[n]) for n, e in self.engines.items()}
        self.mode_name = mode
        self.rtf = self._check_rtf(rtf)
        self.paused = False
        self.steps = 0
        self.resets = 0
        self.lag_drops = 0
        self.max_catchup_s = max_catchup_s
        self.max_chunk = max(1, int(max_chunk))
        self._every = max(1, int(round(1.0 / (sample_hz * self.dt)))) if sample_hz > 0 else 0
        self._fall_every = max(1, int(round(FALL_CHECK_DT / self.dt)))
        self.history = collections.deque(maxlen=max(1, int(history_s * sample_hz)))
        self.fall_time: dict = {}  # engine name -> sim time of the first sample the fall rule fired [s]
        self._fault: dict | None = None  # {"state", "error", "sim_time"} while stopped by an error/divergence
        self._lock = threading.Condition(threading.Lock())  # also a condition: users may wait for a publish
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rtf_window = collections.deque(maxlen=64)  # (wall, sim) pairs
        self._latest = None
        self._qpos: dict = {}
        self.recorder = None  # a lab.record.recorder.Recorder while a recording runs (lab.record.store); else None
        with self._lock:
            for e in self.engines.values():
                e.clear_divergence()
            self._check_fall()
            self._take_sample()
            self._publish()

    # ---- what users may override -----------------------------------------------------------------
    def _tick(self) -> None:
        """One physics step of every engine (a user adds what its service does per step)."""
        for r in self.rollouts.values():
            r.step()

    def _make_sample(self, metrics: dict):
        """The sample kept in the history, from each engine's :class:`~lab.control.metrics.Metrics`."""
        return {"sim_time": self.sim_time, "engines": metrics}

    def _publish(self) -> None:
        """After each chunk (lock held): copy each engine's state as a MuJoCo qpos for the renderers."""
        self._qpos = {n: (e.mj_qpos(), e.time) for n, e in self.engines.items()}

    def _on_reset(self) -> None:
        """After the engines are back at time 0 (lock held)."""

    def sample_dict(self, sample) -> dict:
        """A sample of the history (:meth:`_make_sample`) as JSON-able dict (what ``latest`` builds on)."""
        return sample

    def _note(self, kind: str, **data) -> None:
        """An event for the recording, when one runs (lock held): a mode, push, gains, pause, reset change."""
        if self.recorder is not None:
            self.recorder.event(kind, data)

    # ---- control ---------------------------------------------------------------------------------
    def _make_modes(self, name, push: PushParams | None = None) -> dict:
        if isinstance(name, str) and name not in self.modes and name in self.all_modes:
            raise LabError(f"mode '{name}' is not available in {self.service}", f"available: {', '.join(self.modes)}")
        push = push or self.push
        return {n: get_mode(name, self.robot, modes=self.modes, push=push, squat=self.squat) for n in self.engines}

    def set_mode(self, name: str, push: dict | None = None) -> None:
        """Switch every engine to mode ``name`` now (optionally with new push settings); raises before changing anything."""
        with self._lock:
            new_push = push_params(self.push, push) if push else self.push
            made = self._make_modes(name, new_push)
            self.push = new_push
            for n, r in self.rollouts.items():
                r.set_mode(made[n])
            self.mode_name = name
            self._note("mode", mode=name, push=dataclasses.asdict(self.push))

    def set_push(self, push: dict) -> PushParams:
        """Change the push (force, duration, period, first); a running ``push`` mode restarts with it."""
        with self._lock:
            new_push = push_params(self.push, push)
            if self.mode_name == "push":
                made = self._make_modes("push", new_push)
                for n, r in self.rollouts.items():
                    r.set_mode(made[n])
            self.push = new_push
            self._note("push_settings", **dataclasses.asdict(new_push))
            return self.push

    def set_gains(self, kp: np.ndarray, kd: np.ndarray) -> PDGains:
        """New PD gains ``kp``, ``kd`` (nu,) [N·m/rad, N·m·s/rad] for every engine from the next tick on,
        without a restart; the robot keeps them too (new arrays), so a reset or a new mode holds them.
        The caller checks the values (finite, >= 0)."""
        kp, kd = np.array(kp, dtype=float), np.array(kd, dtype=float)
        with self._lock:
            gains = dataclasses.replace(self.gains, kp=kp, kd=kd)
            for r in self.rollouts.values():
                r.set_gains(gains)
            self.gains = gains
            self.robot.kp, self.robot.kd = kp.copy(), kd.copy()
            self._note("gains", kp=kp.tolist(), kd=kd.tolist())
            return gains

    def set_nominal(self, q: np.ndarray) -> None:
        """A new nominal pose ``q`` (nu,) [rad] (the robot keeps a new array); the current mode is made
        again from it now, so ``stand`` holds the new pose (a ``pose`` mode starts over from it). The
        caller checks the values (finite, inside the joint ranges)."""
        q = np.array(q, dtype=float)
        with self._lock:
            old = self.robot.q_nominal
            self.robot.q_nominal = q
            try:
                made = self._make_modes(self.mode_name)
            except Exception:
                self.robot.q_nominal = old
                raise
            for n, r in self.rollouts.items():
                r.set_mode(made[n])
            self._note("nominal", q=q.tolist())

    def set_walk(self, command: dict) -> dict:
        """The feedback walker's velocity command ``{"vx", "vy", "yaw_rate"}`` (missing keys keep their
        value); in any other mode the ``walk`` mode is selected first. The caller checks the values."""
        with self._lock:
            if self.mode_name != "walk":
                made = self._make_modes("walk")
                for n, r in self.rollouts.items():
                    r.set_mode(made[n])
                self.mode_name = "walk"
            held = None
            for r in self.rollouts.values():
                now = dict(zip(WALK_COMMAND, r.mode.controller.cmd))
                now.update(command)
                held = r.mode.set_command(*(now[k] for k in WALK_COMMAND))
            self._note("walk", **{k: float(v) for k, v in zip(WALK_COMMAND, held)})
            return dict(zip(WALK_COMMAND, held))

    def walk_state(self) -> dict | None:
        """The velocity command held and the walker's bounds, or None outside the feedback walk."""
        with self._lock:
            if self.mode_name != "walk":
                return None
            ctl = next(iter(self.rollouts.values())).mode.controller
            return {
                "command": dict(zip(WALK_COMMAND, (float(v) for v in ctl.cmd))),
                "phase": ctl.phase,
                "steps": ctl.step,
            }

    def set_pose(self, targets: dict) -> np.ndarray:
        """New targets (actuator index -> angle [rad]) for the ``pose`` mode, the other joints hold;
        a 409 :class:`LabError` in any other mode. The targets now held (nu,) [rad], a copy."""
        with self._lock:
            if self.mode_name != "pose":
                raise LabError(
                    f"joint targets are set only in pose mode; the mode is {self.mode_name}",
                    'switch to pose first: POST /api/mode {"mode": "pose"}',
                    409,
                )
            q = None
            for r in self.rollouts.values():
                q = r.mode.set_targets(targets)
            self._note("pose", q_target=q.tolist())
            return q.copy()

    def joint_table(self, name: str | None = None) -> dict:
        """The live joints of engine ``name`` (default: the first), copies taken under the lock:
        ``q`` (nu,) [rad], ``target`` (nu,) [rad] (what the mode asks now), ``tau`` (nu,) [N·m] (the last
        commanded torque), ``kp``, ``kd`` (nu,) (the gains the controller uses), ``mode`` and ``sim_time`` [s]."""
        with self._lock:
            r = self.rollouts[name or self.names[0]]
            q, _ = r.engine.joint_state()
            return {
                "q": np.array(q, dtype=float),
                "target": np.array(r.command.q_target, dtype=float),
                "tau": np.array(r._tau, dtype=float),
                "kp": r.gains.kp.copy(),
                "kd": r.gains.kd.copy(),
                "mode": self.mode_name,
                "sim_time": r.engine.time,
            }

    def set_rtf(self, rtf) -> None:
        self.rtf = self._check_rtf(rtf)

    @staticmethod
    def _check_rtf(rtf) -> float:
        lo, hi = RTF_RANGE
        if not isinstance(rtf, (int, float)) or isinstance(rtf, bool) or not lo <= rtf <= hi:
            raise LabError(f"rtf {rtf!r} is outside [{lo:g}, {hi:g}]", "real-time factor: 1 is real time")
        return float(rtf)

    def pause(self, paused: bool) -> None:
        """Hold or release every engine; once ``pause(True)`` returns, no further step is taken."""
        with self._lock:
            self.paused = bool(paused)
            self._note("pause" if self.paused else "resume")

    def reset(self) -> None:
        """Every engine back to its start state at time 0 under the current mode; clears an error or divergence."""
        with self._lock:
            made = self._make_modes(self.mode_name)
            for n, r in self.rollouts.items():
                r.set_mode(made[n])
                r.reset()
                r.engine.clear_divergence()
            self.steps = 0
            self.resets += 1
            self._fault = None
            self.fall_time.clear()
            self.history.clear()
            self._rtf_window.clear()
            self._on_reset()
            if self.recorder is not None:
                self.recorder.reset()
            self._check_fall()
            self._take_sample()
            self._publish()

    # ---- reads -----------------------------------------------------------------------------------
    @property
    def sim_time(self) -> float:
        return self.engines[self.names[0]].time

    def sim_info(self) -> dict:
        """``{"state": running|paused|error|diverged, "error": reason or None, "at": sim time or None, "resets"}``."""
        f = self._fault
        if f is not None:
            return {"state": f["state"], "error": f["error"], "at": f["sim_time"], "resets": self.resets}
        return {"state": PAUSED if self.paused else RUNNING, "error": None, "at": None, "resets": self.resets}

    def measured_rtf(self) -> float:
        w = self._rtf_window
        if self.paused or self._fault is not None or len(w) < 2 or w[-1][0] - w[0][0] < 1e-3:
            return 0.0
        return (w[-1][1] - w[0][1]) / (w[-1][0] - w[0][0])

    def snapshot(self, name: str | None = None) -> tuple[np.ndarray, float]:
        """``(qpos (nq,), sim_time)`` of engine ``name`` (default: the first) as of the last chunk (a copy)."""
        with self._lock:
            q, t = self._qpos[name or self.names[0]]
            return q.copy(), t

    def frame_state(self, name: str | None = None, overlays: bool = False) -> tuple:
        """``(qpos (nq,), sim_time, overlay state or None)`` of engine ``name`` (default: the first) as of
        the last chunk, copies; with ``overlays`` the state the scene overlays draw from
        (:func:`lab.runtime.overlay_state.capture`), read in the same hold of the lock."""
        name = name or self.names[0]
        with self._lock:
            q, t = self._qpos[name]
            return q.copy(), t, overlay_state.capture(self, name) if overlays else None

    def read(self, fn):
        """``fn(self)`` called under the lock, between two chunks: one consistent read of several parts of
        the state (the engines, the rollouts' commands, the history). ``fn`` must be short and only copy:
        the simulation waits for it. Returns what ``fn`` returns."""
        with self._lock:
            return fn(self)

    def fell_at(self, name: str | None = None) -> float | None:
        """Simulation time [s] the robot in engine ``name`` (default: the first) fell, or None."""
        t = self.fall_time.get(name or self.names[0])
        return None if t is None else round(t, 6)

    # ---- the thread ------------------------------------------------------------------------------
    def start(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"{type(self).__name__}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(2.0)

    def close(self) -> None:
        with self._lock:
            if self.recorder is not None:  # a model switch or the service stopping ends a recording
                self.recorder.close("the simulation was closed (a model switch or the service stopping)")
        self.stop()
        for e in self.engines.values():
            e.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def advance(self, seconds: float) -> None:
        """Step by ``seconds`` [s] of simulation now, in the caller's thread (headless scripts and tests)."""
        with self._lock:
            self._chunk(int(round(seconds / self.dt)))
            self._publish()

    def _check_fall(self) -> None:
        """The robot's fall rule on each engine not yet fallen (every FALL_CHECK_DT: the time of a fall does
        not depend on the service's sample rate, so the Lab, Sim2Sim and a scan agree on it)."""
        for n, e in self.engines.items():
            if n not in self.fall_time:
                q = e.torso_quat()
                if self.robot.has_fallen(float(e.base_pose()[0][2]), quat_pitch_deg(q), quat_roll_deg(q)):
                    self.fall_time[n] = e.time

    def _take_sample(self) -> None:
        per = {n: r.metrics() for n, r in self.rollouts.items()}
        s = self._make_sample(per)
        self._latest = s
        self.history.append(s)
        if self.recorder is not None:
            self.recorder.sample(s)

    def _chunk(self, n: int) -> None:
        """``n`` ticks (lock held); an exception or a divergence stops the runner with its reason."""
        if self._fault is not None:
            return
        t0 = self.sim_time
        try:
            every, fall_every = self._every, self._fall_every
            for _ in range(n):
                self._tick()
                self.steps += 1
                if self.recorder is not None:  # lab.record: this step's inputs
                    self.recorder.step()
                if self.steps % fall_every == 0:
                    self._check_fall()
                if every and self.steps % every == 0:
                    self._take_sample()
        except Exception as exc:  # a mode, the controller or an engine raised: say so, never die silently
            log.exception("simulation stopped at t=%.3f s", self.sim_time)
            self._fail(ERROR, f"{type(exc).__name__}: {exc}", max(t0, self.sim_time))
            return
        finally:
            if self.recorder is not None:
                self.recorder.flush()
        for name, e in self.engines.items():
            reason = e.divergence()
            if reason is not None:
                self._fail(DIVERGED, f"{ENGINE_LABELS.get(e.name, e.name)}: {reason}", t0)
                return

    def _fail(self, state: str, error: str, at: float) -> None:
        self._fault = {"state": state, "error": error, "sim_time": round(float(at), 6)}
        self._note("sim", state=state, error=error)
        log.error("%s: simulation %s at t=%.3f s: %s (reset to recover)", self.service, state, at, error)

    def _run(self) -> None:
        dt = self.dt
        wall0, sim0 = time.perf_counter(), self.sim_time
        while not self._stop.is_set():
            now = time.perf_counter()
            if self.paused or self._fault is not None:
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
            if behind > self.max_catchup_s:  # cannot keep up: let the clock slip, the measured rtf shows it
                wall0, sim0 = now, self.sim_time
                behind = dt
                self.lag_drops += 1
            n = min(int(behind / dt), self.max_chunk)
            with self._lock:
                if self.paused:  # paused while this chunk was being planned
                    continue
                self._chunk(n)
                self._publish()
            self._rtf_window.append((time.perf_counter(), self.sim_time))
            if n < 5:
                time.sleep(0.001)  # small chunks: let readers and renderers take the lock


def push_params(current: PushParams, raw) -> PushParams:
    """``current`` with the fields of ``raw`` (a dict) changed, validated; a :class:`LabError` says what is wrong."""
    if not isinstance(raw, dict):
        raise LabError(f"push must be a JSON object, got {type(raw).__name__}", 'e.g. {"force_n": 40}')
    known = [f.name for f in dataclasses.fields(PushParams)]
    unknown = set(raw) - set(known)
    if unknown:
        raise LabError(f"unknown push parameter(s): {', '.join(sorted(unknown))}", f"accepted: {', '.join(known)}")
    return dataclasses.replace(current, **raw).validated()
