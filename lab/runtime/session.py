"""The Lab's live simulation: one robot in MuJoCo on the :class:`~lab.runtime.realtime.RealtimeRunner`.

A sample is the :class:`~lab.control.metrics.Metrics` object plus the mode's extras (dicts are made
only when someone reads), taken every 40 ms of simulation time and kept for 30 s.
"""

from lab.control.modes import PushParams
from lab.robots.model import Robot
from lab.runtime.modes import LAB_MODES
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

    def _make_sample(self, metrics: dict):
        return metrics[self.engine.name], self.rollouts[self.engine.name].command.extras

    def latest(self) -> dict:
        m = _as_dict(self._latest)
        m["rtf"] = round(self.measured_rtf(), 3)
        m["mode"] = self.mode_name
        m["paused"] = self.paused
        m["fall_time"] = self.fell_at()
        m["sim"] = self.sim_info()
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
