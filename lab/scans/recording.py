"""A scan point's recording: ``recording.mcap`` in the point's folder, made by the Lab's own recorder.

A scan launched with ``"record": true`` (:mod:`lab.scans.spec`) hands each of its points the flag :data:`FLAG`
in the parameters of its job only (the point's own parameters, its row in the table, stay as they are). Only a
kind that lists :data:`RECORDING` among its ``artifacts`` takes the option (:func:`can_record`); its point
function runs its simulation through :func:`recorded_run` when the flag is set, or, where the run steps
itself, hands it the stepper of a :class:`PointRecording`.

:func:`recorded_run` steps the point's run on a :class:`~lab.runtime.session.SimSession` offline (``advance``,
no real-time thread) with a :class:`lab.record.store.Recordings` recording attached: the same topics and the
same exact MuJoCo state as a recording made on the Lab's page, so ``python experiments/replay.py
recording.mcap`` replays it bit-exactly. The physics is the point's own: the session steps one
:class:`~lab.control.rollout.Rollout` of the same engine, gains and mode, sampled every ``sample_dt`` as
:func:`lab.control.rollout.simulate` samples it, and the recorder only reads the state, so a point gives the
same numbers with its recording as without. A point without the flag never comes here (no cost). Where a bare
Rollout would raise, the session stops stepping and says why: the point ends as an error there, and keeps the
recording up to that moment.

``push_recovery`` records (:func:`recorded_run`), and so does ``walk_stability``: ``run_walk`` and
``run_feedback_walk`` (:mod:`lab.walking`) take a ``stepper`` and step their walk through it, one tick at a time.
``push_threshold`` keeps none: a point is a bisection of many trials, not one run.
"""

import gc
import os
from pathlib import Path

RECORDING = "recording.mcap"  # the file name of a point's recording, in its folder
FLAG = "_record"  # the job parameter that asks a point for its recording (never one of the point's own)


def can_record(kind) -> bool:
    """Whether points of ``kind`` can keep their recording (the kind lists :data:`RECORDING` as an artifact)."""
    return RECORDING in kind.artifacts


def wants_recording(params: dict) -> bool:
    """Whether the job's ``params`` ask the point for its recording."""
    return bool(params.get(FLAG))


def point_label(params: dict) -> str:
    """The recording's label: the point's parameters, ``force_n=40, duration_s=0.1, ...`` (80 characters at most)."""
    return ", ".join(f"{k}={v}" for k, v in params.items() if k != FLAG)[:80]


def recorded_run(robot, mode, seconds: float, out_dir: Path, label: str, sample_dt: float = 0.01) -> list:
    """Run ``mode`` (a :class:`~lab.control.modes.Mode` made for ``robot``) for ``seconds`` [s] with the PD gains of
    ``robot`` in MuJoCo, recorded into ``out_dir/recording.mcap``; the metrics sampled every ``sample_dt`` [s]
    (the first at t = 0), as :func:`lab.control.rollout.simulate` returns them for the same run."""
    from lab.sim.mujoco_engine import MujocoEngine  # here: importing the kinds stays light

    with PointRecording(robot, out_dir, label, max_s=seconds + 1.0) as rec:
        rollout, _ = rec.stepper(MujocoEngine(robot), mode)
        dt = rec.session.dt
        n = int(round(seconds / dt))
        every = max(1, int(round(sample_dt / dt)))
        samples = [rollout.metrics()]
        for _ in range(n // every):
            rec.advance(every)  # ``every`` physics steps, each recorded
            samples.append(rollout.metrics())
        if n % every:
            rec.advance(n % every)
    return samples


class PointRecording:
    """The recording of one point's run into ``out_dir/recording.mcap`` (``label``; at most ``max_s`` [s]), for a
    point function that steps its run itself: ``with PointRecording(...) as rec:`` it hands :meth:`stepper` to
    the run (``run_walk(..., stepper=rec.stepper)``, ``run_feedback_walk``), which steps through it; leaving the
    block finishes the file, also when the run raised (the recording up to where it failed)."""

    def __init__(self, robot, out_dir: Path, label: str, max_s: float = 600.0):
        self.robot, self.out_dir, self.label, self.max_s = robot, Path(out_dir), label, float(max_s)
        self.session = None
        self._store = self._info = None

    def stepper(self, engine, mode) -> tuple:
        """``(rollout, tick)`` for ``mode`` on ``engine`` (MuJoCo): the session's own
        :class:`~lab.control.rollout.Rollout` (the robot's PD gains, as a bare one) and ``tick()``, one recorded
        physics step. Once per recording."""
        from lab.record.store import Recordings  # here: importing the kinds stays light
        from lab.runtime.session import SimSession

        if self._store is not None:
            raise RuntimeError("a PointRecording records one run: its stepper was already taken")
        name = mode.name  # the recording's mode: the point's own one (``push``, ``walk``)
        self._store = Recordings(self.out_dir, "scans")
        self.session = SimSession(self.robot, mode=name, engine=engine, modes={name: lambda robot, **_: mode})
        self._info = self._store.start(self.session, label=self.label, max_s=self.max_s)
        return self.session.rollout, self.advance

    def advance(self, steps: int = 1) -> None:
        """``steps`` physics steps of the run, each recorded; raises where the session stopped (:func:`_check`)."""
        self.session.advance(steps * self.session.dt)
        _check(self.session)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self._store is None:
            return
        try:
            if exc[0] is None and self._info is not None:
                self._store.stop(self._info["id"])
        finally:  # a run that raised still finishes its file, and keeps it: the recording up to where it failed
            if self.session is not None:
                self.session.close()
            self._store.close()
            if self._info is not None and (self.out_dir / self._info["file"]).is_file():
                os.replace(self.out_dir / self._info["file"], self.out_dir / RECORDING)
            self.session = self._store = self._info = None
            gc.collect()  # the recorder's shared input buffers go now, not at some later point of this worker


def _check(session) -> None:
    """The session stops stepping at an error or a divergence (and says why) where a bare Rollout would raise or
    run on: the point ends there as an error, its recording kept up to that moment."""
    info = session.sim_info()
    if info["state"] in ("error", "diverged"):
        raise RuntimeError(f"the simulation {info['state']} at t = {info['at']:g} s: {info['error']}")
