"""The simulation side of a recording: what one physics step costs while recording, and nothing else.

A :class:`Recorder` is attached to a :class:`~lab.runtime.realtime.RealtimeRunner` (``runner.recorder``)
and called by it, always with the runner's lock held:

- :meth:`step` after every physics step: the step's inputs (``ctrl``, ``qfrc_applied``, ``xfrc_applied``
  of the MuJoCo engine, one ``mj_getState`` into a row of a preallocated buffer of one keyframe interval);
  every :data:`~lab.record.format.KEYFRAME_S` a keyframe (``mjSTATE_INTEGRATION``);
- :meth:`flush` after every chunk of steps: the rows filled since the last flush go to the writer;
- :meth:`sample` with each metrics sample (25 Hz in the Lab, 50 Hz in Sim2Sim): the sample and a snapshot of
  each engine (its numbers packed as raw float64, its foot contacts: the writer process rounds them and builds
  the JSON);
- :meth:`event` with each change (mode, push settings, gains, pause, pull), :meth:`reset` after a reset (a
  keyframe replay loads), :meth:`close` when the runner closes;
- :meth:`message` with a message on one of the runner's own topics (its ``record_topics``,
  :func:`lab.record.format.extra_topics`: the state server's ``/observation``, ``/action_chunk``).

The file (:class:`lab.record.process.RecordingFile`) is written by a process of its own; the simulation
thread only copies: a row per step, bytes and small tuples per sample. When the writer falls behind (no free
buffer, a full queue) the recording ends ``failed`` at once and the simulation goes on untouched; a headless run
(``advance``, no real-time thread: nothing to hold) waits up to :data:`OFFLINE_WAIT_S` for a free buffer instead.

PyBullet (Sim2Sim) has no MuJoCo state: its joint states, base pose, contacts, commands and metrics are
recorded as JSON; only the MuJoCo engine's run is bit-exact.
"""

import threading
import time

import mujoco
import numpy as np

from lab.record import format as fmt
from lab.record.process import Outcome, RecordingFile

_get_state, _INPUT_SPEC = mujoco.mj_getState, fmt.INPUT_SPEC  # step()'s names, looked up once
OFFLINE_WAIT_S = 30.0  # [s] a headless run waits at most this long for the writer to free an input buffer


class Recorder:
    """Records ``runner`` into ``file`` (a :class:`RecordingFile` with its head written) until :meth:`end`.

    ``max_s`` [s of recording time]: the duration at which it ends ``done``. ``on_end(recorder)`` is called
    once it has ended (any thread).
    """

    def __init__(self, runner, file: RecordingFile, *, exact: str | None, max_s: float, on_end=None):
        self.runner, self.file = runner, file
        self.dt = runner.dt
        self.k = 0  # physics steps recorded
        self.on_end = on_end
        self.outcome: Outcome | None = None  # how it ended, as the simulation side saw it
        self.started = time.time()
        self._ended = threading.Event()
        self._exact = exact
        self._key_every = max(1, int(round(fmt.KEYFRAME_S / self.dt)))
        self._max_k = max(1, int(round(max_s / self.dt)))
        self._next_k = min(self._max_k, self._key_every)  # the step step() has more to do at
        self._engines = [("" if i == 0 else f"/{n}", n) for i, n in enumerate(runner.names)]
        self._extra = frozenset(fmt.extra_topics(runner))
        robot = runner.robot
        self._names = list(robot.joint_names)
        self._rows = None
        if exact is not None:
            e = runner.engines[exact]
            self._m, self._d = e.model, e.data
            self._state_size = mujoco.mj_stateSize(self._m, fmt.STATE_SPEC)
            shape = (self._key_every, mujoco.mj_stateSize(self._m, fmt.INPUT_SPEC))
            if file.buffers is None or file.buffers.shape[1:] != shape:
                raise ValueError(f"the file's input buffers do not fit {shape} rows")
            self._slot_rows = [list(b) for b in file.buffers]  # a view per row, made once
            self._take_buffer()
        file.on_end = self._writer_ended

    # ---- called by the runner (its lock held) --------------------------------------------------------
    def attach(self) -> None:
        """Start: the first keyframe, a snapshot, the ``start`` event; from now on the runner calls us."""
        r = self.runner
        self.event("start", {"mode": r.mode_name, "paused": r.paused, "engines": list(r.names)})
        self._keyframe(fmt.KEY_START)
        if r._latest is not None:
            self.sample(r._latest)
        r.recorder = self

    def step(self) -> None:
        """After one physics step of every engine: this step's inputs; on the keyframe grid a keyframe."""
        k = self.k
        rows = self._rows
        if rows is not None:
            _get_state(self._m, self._d, rows[k - self._buf_k], _INPUT_SPEC)
        self.k = k = k + 1
        if k >= self._next_k:
            self._boundary()

    def _boundary(self) -> None:
        """At a step on the keyframe grid (every KEYFRAME_S) or at the maximum duration."""
        k = self.k
        if k >= self._max_k:
            self.end(Outcome("done", f"reached the maximum duration of {self._max_k * self.dt:g} s"))
            return
        self._next_k = min(self._max_k, k + self._key_every)
        if self._rows is not None:
            self._hand_rows(last=True)
            if self._take_buffer():
                self._keyframe(fmt.KEY_PERIODIC)

    def flush(self) -> None:
        """After each chunk of steps: the rows filled since the last flush go to the writer."""
        if self._rows is not None and self.k > self._sent:
            self._hand_rows(last=False)

    def sample(self, sample) -> None:
        """A metrics sample of the runner (its ``_make_sample`` object, as the runner's ``sample_dict``), and a
        snapshot of each engine at the same instant."""
        r = self.runner
        self._put(("metrics", self.k, round(r.sim_time, 6), r.sample_dict(sample)))
        self._snapshot()

    def event(self, kind: str, data: dict | None = None) -> None:
        """``kind`` happened now, with ``data`` (JSON-able; compared to collapse repeats)."""
        self._put(("event", self.k, round(self.runner.sim_time, 6), kind, dict(data or {})))

    def message(self, topic: str, data: dict) -> None:
        """A message on ``topic``, one of the runner's own ``record_topics``: ``data`` (JSON-able: numbers,
        strings, lists, str-keyed dicts, numpy arrays; a NaN is written as null) stamped with the recording time
        and ``sim_time``; not to be changed after. Each is written as it comes (no collapsing)."""
        if topic not in self._extra:
            raise ValueError(
                f"{topic!r} is not one of this runner's record_topics: {', '.join(sorted(self._extra)) or 'none'}"
            )
        self._put(("json", self.k, round(self.runner.sim_time, 6), topic, data))

    def reset(self) -> None:
        """The engines were put back to their start state: replay loads this keyframe."""
        self.event("reset", {"mode": self.runner.mode_name})
        self._keyframe(fmt.KEY_RESET)

    def close(self, reason: str) -> None:
        """The runner is closing (a model switch or the service stopping)."""
        self.event("closed", {"reason": reason})
        self.end(Outcome("done", reason))

    # ---- ending --------------------------------------------------------------------------------------
    def end(self, outcome: Outcome) -> None:
        """End now (the runner's lock held): the last rows and the final keyframe, then the writer finishes."""
        if self._ended.is_set():
            return
        self._ended.set()
        self.outcome = outcome
        if self.runner.recorder is self:
            self.runner.recorder = None
        if outcome.state == "done" or outcome.writable:
            self.event("stop", {"reason": outcome.reason})
            if self._rows is not None:
                if self.k > self._sent:
                    self._hand_rows(last=True, wait=1.0)
                self._keyframe(fmt.KEY_END, wait=1.0)
        outcome.steps = self.k
        self.file.close(outcome)
        if self.on_end is not None:
            self.on_end(self)

    def stop(self, reason: str = "stopped") -> Outcome:
        """End from another thread (takes the runner's lock), wait for the file to be finished; its outcome."""
        with self.runner._lock:
            self.end(Outcome("done", reason))
        self.file.join()
        return self.file.outcome or self.outcome

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def _writer_ended(self, outcome: Outcome) -> None:  # the writer thread: size limit, disk full, error
        with self.runner._lock:
            self.end(outcome)

    def _overflow(self, what: str) -> None:
        self.end(
            Outcome(
                "failed",
                f"the writer fell behind ({what}) after {self.k * self.dt:.1f} s; the file ends there",
            )
        )

    def _put(self, item: tuple, wait: float = 0.0) -> None:
        if not self.file.put(item, wait) and not self._ended.is_set():
            self._overflow("queue full")

    # ---- buffers, snapshots, keyframes ---------------------------------------------------------------
    def _take_buffer(self) -> bool:
        live = self.runner.running
        try:
            slot = self.file.free.get_nowait() if live else self.file.free.get(timeout=OFFLINE_WAIT_S)
        except Exception:  # queue.Empty: every buffer is still waiting for the writer
            self._rows = None
            self._overflow("no free input buffer")
            return False
        self._buf, self._rows = slot, self._slot_rows[slot]
        self._buf_k = self._sent = self.k
        return True

    def _hand_rows(self, last: bool, wait: float = 0.0) -> None:
        a, b = self._sent - self._buf_k, self.k - self._buf_k
        item = ("rows", self._sent, self._buf, a, b, last)
        self._sent = self.k
        if last:
            self._rows = None
        self._put(item, wait)

    def _keyframe(self, kind: int, wait: float = 0.0) -> None:
        if self._exact is None:
            return
        state = np.empty(self._state_size)
        mujoco.mj_getState(self._m, self._d, state, fmt.STATE_SPEC)
        self._put(("key", self.k, float(self._d.time), kind, state.tobytes()), wait)

    def _snapshot(self) -> None:
        """Each engine as ``(prefix, sim_time [s], sizes, numbers, enabled, push, contacts)``: ``numbers`` the
        float64 bytes of q, qd, tau, q_target (their ``sizes``), base position (3) and quaternion (4, w x y z);
        ``push`` [N] bytes or None; ``contacts`` ``[(side 0 left | 1 right, [x, y, z] [m], normal force [N])]``."""
        r = self.runner
        out = []
        for prefix, name in self._engines:
            e, ro = r.engines[name], r.rollouts[name]
            cmd = ro.command
            tau, qt = ro._tau, cmd.q_target
            push = None if cmd.push is None else np.asarray(cmd.push, dtype=float).tobytes()
            q, qd = e.joint_state()
            pos, quat = e.base_pose()
            numbers = np.concatenate((q, qd, tau, qt, pos, quat)).tobytes()
            contacts = [(c.side, c.pos.tolist(), c.fz) for c in e.foot_contacts()]
            sizes = (len(q), len(qd), len(tau), len(qt), 3)
            out.append((prefix, e.time, sizes, numbers, bool(cmd.enabled), push, contacts))
        self._put(("snap", self.k, r.mode_name, out))
