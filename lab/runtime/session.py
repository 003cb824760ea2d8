"""The Lab's live simulation: one robot in MuJoCo on the :class:`~lab.runtime.realtime.RealtimeRunner`.

A sample is the :class:`~lab.control.metrics.Metrics` object plus the mode's extras (dicts are made
only when someone reads), taken every 40 ms of simulation time and kept for 30 s.
"""

import mujoco
import numpy as np

from lab.control.modes import PushParams
from lab.errors import LabError
from lab.robots.model import Robot
from lab.runtime.modes import LAB_MODES
from lab.runtime.perturb import Perturbation
from lab.runtime.realtime import RealtimeRunner
from lab.sim.mujoco_engine import MujocoEngine


class SimSession(RealtimeRunner):
    """One robot in one engine, live. ``rtf`` is the real-time factor the clock is paced to."""

    service = "the Lab"

    def __init__(
        self,
        robot: Robot,
        mode: str = "stand",
        rtf: float = 1.0,
        sample_hz: float = 25.0,
        history_s: float = 30.0,
        engine=None,
        push: PushParams | None = None,
        modes: dict | None = None,
    ):
        engine = engine or MujocoEngine(robot)
        self.engine = engine
        super().__init__(
            robot,
            {engine.name: engine},
            modes or LAB_MODES,
            mode,
            rtf=rtf,
            sample_hz=sample_hz,
            history_s=history_s,
            push=push,
            max_chunk=50,
        )
        self.rollout = self.rollouts[engine.name]
        self._tick = self.rollout.step  # one engine: a tick is its rollout's step (no loop over engines)
        m = robot.model
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body {b}" for b in range(m.nbody)]
        self.perturbation = Perturbation(engine, engine.total_mass, names)

    # ---- the mouse perturbation (WS /ws "perturb"; lab.runtime.perturb) ----------------------------
    def _perturbed_tick(self) -> None:
        p = self.perturbation
        if self.steps % 100 == 0 and p.idle():
            self._end_perturb("idle")
            return self.rollout.step()
        p.apply(self.engine.data, self.dt)
        self.rollout.step()

    def perturb_start(self, body: int, point: np.ndarray, target: np.ndarray, owner) -> None:
        """Grab body ``body`` at world ``point`` (3,) [m] (on the state as rendered) and pull it to ``target``
        (3,); a 409 :class:`LabError` while another viewer holds one, or when the simulation is not running."""
        with self._lock:
            p = self.perturbation
            if p.held_by_another(owner):
                raise LabError("another viewer is pulling the robot", "wait until they release it", 409)
            if self._fault is not None:
                raise LabError(f"the simulation is {self._fault['state']}", "reset first", 409)
            d = self.engine.data
            local = d.xmat[body].reshape(3, 3).T @ (np.asarray(point, dtype=float) - d.xpos[body])
            p.start(body, local, target, owner, self.sim_time)
            self._tick = self._perturbed_tick
            self._note("perturb_start", body=self.perturbation.names[body], point=[float(v) for v in point])

    def perturb_move(self, target: np.ndarray, owner) -> bool:
        with self._lock:
            return self.perturbation.move(target, owner)

    def perturb_end(self, owner=None, why: str = "released") -> dict | None:
        with self._lock:
            return self._end_perturb(why, owner)

    def _end_perturb(self, why: str, owner=None) -> dict | None:
        event = self.perturbation.end(self.sim_time, owner, why)
        if not self.perturbation.active:
            self._tick = self.rollout.step
        if event is not None:
            self._note("perturb", **{k: v for k, v in event.items() if k != "kind"})
        return event

    @property
    def perturb(self) -> dict | None:
        """The mouse perturbation acting now (``lab.runtime.perturb.Perturbation.state``), or None."""
        return self.perturbation.state()

    def events(self) -> list:
        """The perturbation events logged (newest last), copies."""
        with self._lock:
            return [dict(e) for e in self.perturbation.events]

    def _on_reset(self) -> None:
        self._end_perturb("reset")

    def _make_sample(self, metrics: dict):
        return metrics[self.engine.name], self.rollouts[self.engine.name].command.extras

    def sample_dict(self, sample) -> dict:
        return _as_dict(sample)

    def latest(self) -> dict:
        m = _as_dict(self._latest)
        m["rtf"] = round(self.measured_rtf(), 3)
        m["mode"] = self.mode_name
        m["paused"] = self.paused
        m["fall_time"] = self.fell_at()
        m["sim"] = self.sim_info()
        p = self.perturbation.state()
        m["perturb"] = None if p is None else {k: p[k] for k in ("body", "force_n", "max_n")}
        return m

    def history_since(self, t: float) -> list:
        with self._lock:
            recent = [h for h in self.history if h[0].sim_time > t]
        return [_as_dict(h) for h in recent]


def _as_dict(sample) -> dict:
    metrics, extras = sample
    d = metrics.to_dict()
    if extras:
        d["extras"] = extras
    return d
