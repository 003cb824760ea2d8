"""A live simulation: a :class:`~lab.sim.runner.Rollout` stepped by a thread, paced to the wall clock.

Physics runs in its own thread; every change (mode, pause, reset) and every read (a state copy for
the renderer, the latest metrics) takes one short lock, so the renderer copies a qpos and lets
go, and physics never waits for a frame.
"""

import collections
import dataclasses
import threading
import time

import numpy as np

from lab.control.modes import PushParams, SquatParams, get_mode
from lab.control.pd import PDGains
from lab.errors import LabError
from lab.robots.model import Robot
from lab.sim.mujoco_engine import MujocoEngine
from lab.sim.runner import Rollout

MAX_CATCHUP_S = 0.1  # if physics falls further behind the wall clock, it stops catching up [s]


class SimSession:
    """One robot in one engine, live. ``rtf`` is the real-time factor the clock is paced to."""

    def __init__(
        self,
        robot: Robot,
        mode: str = "stand",
        rtf: float = 1.0,
        sample_hz: float = 25.0,
        history_s: float = 30.0,
        engine=None,
        push: PushParams | None = None,
    ):
        self.robot = robot
        self.engine = engine or MujocoEngine(robot)
        self.push = (push or PushParams()).validated()
        self.squat = SquatParams()
        self.rollout = Rollout(self.engine, PDGains.for_robot(robot), self._make_mode(mode))
        self.mode_name = mode
        self.rtf = float(rtf)
        self.paused = False
        self.steps = 0
        self.resets = 0
        self._every = max(1, int(round(1.0 / (sample_hz * self.engine.dt))))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._latest = None
        self.history = collections.deque(maxlen=int(history_s * sample_hz))
        self._rtf_window = collections.deque(maxlen=64)  # (wall, sim) pairs
        self._thread = threading.Thread(target=self._run, name="sim", daemon=True)
        with self._lock:
            self._sample()

    def _make_mode(self, name):
        return get_mode(name, self.robot, push=self.push, squat=self.squat)

    # --- control from the web layer --------------------------------------------------------------
    def start(self) -> "SimSession":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2.0)

    def set_mode(self, name: str, push: dict | None = None) -> None:
        with self._lock:
            new_push = _push_params(self.push, push) if push else self.push
            mode = get_mode(name, self.robot, push=new_push, squat=self.squat)  # raises before anything changes
            self.push = new_push
            self.rollout.set_mode(mode)
            self.mode_name = name

    def set_push(self, push: dict) -> PushParams:
        with self._lock:
            self.push = _push_params(self.push, push)
            if self.mode_name == "push":
                self.rollout.set_mode(self._make_mode("push"))
            return self.push

    def set_rtf(self, rtf) -> None:
        if not isinstance(rtf, (int, float)) or isinstance(rtf, bool) or not 0.05 <= rtf <= 4.0:
            raise LabError(f"rtf {rtf!r} is outside [0.05, 4]", "real-time factor: 1 is real time")
        self.rtf = float(rtf)

    def pause(self, paused: bool) -> None:
        self.paused = bool(paused)

    def reset(self) -> None:
        with self._lock:
            self.rollout.set_mode(self._make_mode(self.mode_name))
            self.rollout.reset()
            self.history.clear()
            self.resets += 1
            self._sample()

    # --- reads ---------------------------------------------------------------------------------
    def snapshot(self) -> tuple[np.ndarray, float]:
        """``(qpos (nq,) copy, sim_time)`` taken under the lock."""
        with self._lock:
            return self.engine.mj_qpos(), self.engine.time

    def latest(self) -> dict:
        m = _as_dict(self._latest)
        m["rtf"] = round(self.measured_rtf(), 3)
        m["mode"] = self.mode_name
        m["paused"] = self.paused
        return m

    def history_since(self, t: float) -> list:
        with self._lock:
            recent = [h for h in self.history if h[0].sim_time > t]
        return [_as_dict(h) for h in recent]

    def measured_rtf(self) -> float:
        w = self._rtf_window
        if self.paused or len(w) < 2 or w[-1][0] - w[0][0] < 1e-3:
            return 0.0
        return (w[-1][1] - w[0][1]) / (w[-1][0] - w[0][0])

    @property
    def sim_time(self) -> float:
        return self.engine.time

    # --- the thread ------------------------------------------------------------------------------
    def _sample(self) -> None:
        """Keep the Metrics object (and the mode's extras); dicts are made when someone reads."""
        m = (self.rollout.metrics(), self.rollout.command.extras)
        self._latest = m
        self.history.append(m)

    def _run(self) -> None:
        dt = self.engine.dt
        wall0, sim0 = time.perf_counter(), self.engine.time
        while not self._stop.is_set():
            now = time.perf_counter()
            if self.paused:
                time.sleep(0.01)
                wall0, sim0 = time.perf_counter(), self.engine.time
                self._rtf_window.clear()
                continue
            target = sim0 + (now - wall0) * self.rtf
            behind = target - self.engine.time
            if behind < 0 or self.engine.time < sim0:  # reset happened or ahead: re-anchor / wait
                if self.engine.time < sim0:
                    wall0, sim0 = now, self.engine.time
                time.sleep(min(0.002, max(-behind, 0.0) / self.rtf))
                continue
            if behind > MAX_CATCHUP_S:  # cannot keep up: let the clock slip, rtf shows it
                wall0, sim0 = now, self.engine.time
                behind = dt
            n = min(int(behind / dt) + 1, 50)
            with self._lock:
                for _ in range(n):
                    self.rollout.step()
                    self.steps += 1
                    if self.steps % self._every == 0:
                        self._sample()
            self._rtf_window.append((time.perf_counter(), self.engine.time))
            if n < 5:
                time.sleep(0.002)


def _as_dict(sample) -> dict:
    metrics, extras = sample
    d = metrics.to_dict()
    if extras:
        d["extras"] = extras
    return d


def _push_params(current: PushParams, raw: dict) -> PushParams:
    known = {f.name for f in dataclasses.fields(PushParams)}
    unknown = set(raw) - known
    if unknown:
        raise LabError(
            f"unknown push parameter(s): {', '.join(sorted(unknown))}", f"accepted: {', '.join(sorted(known))}"
        )
    return dataclasses.replace(current, **raw).validated()
