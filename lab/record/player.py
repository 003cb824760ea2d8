"""The recorded robot at a cursor: the exact MuJoCo state at any step of a recording, and what the overlays draw.

A :class:`Player` keeps one ``MjData`` at a step ``k``. A move forward by no more steps than a seek would
take (play, export) steps MuJoCo on from there with the recorded inputs; any other move (back, far ahead,
across a reset) is a seek (:meth:`lab.record.reader.Recording.state_at`). Both give the state the live run
had, bit for bit. :meth:`Player.overlay_state` turns the recorded ``/contacts`` at the
cursor, and the exact external force of the step from there (``xfrc_applied``: a push or a mouse pull), into the dict
:func:`lab.render.overlays.draw` takes (the keys of :func:`lab.runtime.overlay_state.capture` that a
recording holds: ``weight``, ``contact_pos``, ``contact_fz``, ``support``, ``cop``, ``push``).

Times are recording times [s] (:mod:`lab.record.format`); steps ``k`` are ``round(t / dt)``.
"""

import bisect
import time

import mujoco
import numpy as np

from lab.control.metrics import contact_support
from lab.record import format as fmt
from lab.record.reader import Recording, step_inputs
from lab.sim.engine import Contact

SHORT_STEPS = 200  # a move forward by at most this many steps is stepped, whatever the keyframe grid
WINDOW_S = 2.0  # [s] of a JSON topic read at once for the overlays (play reads a chunk every 2 s)
REPLAY_OVERLAYS = ("contacts", "com", "support", "cop", "push", "frames")  # what a recording can draw


class Player:
    """The exact state of ``rec`` at any step."""

    def __init__(self, rec: Recording):
        self.rec = rec
        self.model = rec.model()
        self.data = mujoco.MjData(self.model)
        self.k: int | None = None  # the step self.data holds
        self.seek_ms: float | None = None  # what the last move took [ms]
        keys = [kf for _, kf in rec.read(fmt.KEYFRAME_TOPIC)] if fmt.KEYFRAME_TOPIC in rec.topics else []
        self._resets = sorted(kf[0] for kf in keys if kf[2] == fmt.KEY_RESET)
        self._weight = float(self.model.body_mass.sum() * np.linalg.norm(self.model.opt.gravity))
        self._blocks: list = []  # (k0, rows) of /mujoco/inputs read ahead (see _inputs)
        self._contacts = _Window(rec, "/contacts") if "/contacts" in rec.topics else None

    def step_of(self, t: float) -> int:
        """The step at recording time ``t`` [s], clamped to the recording."""
        return int(np.clip(round(t / self.rec.dt), 0, self.rec.steps))

    def at(self, t: float) -> mujoco.MjData:
        """``self.data`` holding the state at recording time ``t`` [s] (clamped)."""
        k = self.step_of(t)
        if k == self.k:
            return self.data
        t0 = time.perf_counter()
        if self._steppable(k):
            step_inputs(self.model, self.data, self._inputs(self.k, k), self.k, k)
        else:
            self.rec.state_at(k * self.rec.dt, self.data)
        self.k = k
        self.seek_ms = (time.perf_counter() - t0) * 1e3
        return self.data

    def _inputs(self, k_from: int, k_to: int) -> list:
        """The input blocks that hold steps ``k_from .. k_to - 1``: read :data:`WINDOW_S` ahead and kept, so
        that playing on decompresses each chunk once."""
        b = self._blocks
        if not b or b[0][0] > k_from or b[-1][0] + len(b[-1][1]) < min(k_to, self.rec.steps):
            dt = self.rec.dt
            lo = max(0, k_from - fmt.BLOCK + 1)  # any block holding step k_from starts at most BLOCK - 1 before it
            hi = max(k_to, k_from + int(WINDOW_S / dt))
            self._blocks = b = [blk for _, blk in self.rec.read(fmt.INPUTS_TOPIC, lo * dt, hi * dt)]
        return b

    def _steppable(self, k: int) -> bool:
        """Stepping from ``self.k`` to ``k`` takes no more steps than a seek, and crosses no reset."""
        if self.k is None or k < self.k:
            return False
        if k - self.k > max(SHORT_STEPS, k % self.rec.key_every):
            return False
        i = bisect.bisect_right(self._resets, self.k)
        return i == len(self._resets) or self._resets[i] > k

    def qpos(self, t: float) -> np.ndarray:
        """(nq,) the exact qpos at recording time ``t`` [s] (a copy)."""
        return self.at(t).qpos.copy()

    def overlay_state(self) -> dict:
        """What the overlays draw at the step held now: the newest recorded contacts at or before it, and the
        largest external force on a body in the step from there (see the module docstring)."""
        state: dict = {"weight": self._weight}
        if self._contacts is not None and self.k is not None:
            msg = self._contacts.at(self.k * self.rec.dt)
            if msg is not None and msg["contacts"]:
                contacts = [
                    Contact(
                        0 if c["side"] == "left" else 1,
                        np.array([c["position"][a] for a in "xyz"], dtype=float),
                        float(c["force_n"]),
                    )
                    for c in msg["contacts"]
                ]
                state["contact_pos"] = np.array([c.pos for c in contacts])
                state["contact_fz"] = np.array([c.fz for c in contacts])
                cop, hull, _ = contact_support(contacts)
                state["support"] = np.array(hull, dtype=float)
                if cop is not None:
                    state["cop"] = np.array(cop)
        xfrc = self._xfrc()
        if xfrc is not None and xfrc[:, :3].any():
            body = int(np.argmax(np.linalg.norm(xfrc[:, :3], axis=1)))
            state["push"] = {"body": body, "force": xfrc[body, :3].copy()}
        return state

    def _xfrc(self) -> np.ndarray | None:
        """(nbody, 6) the recorded ``xfrc_applied`` of the step from the state held now (None at the end)."""
        k = self.k
        if k is None or k >= self.rec.steps:
            return None
        nu, nv, _ = self.rec.dims
        for k0, rows in self._inputs(k, k + 1):
            if k0 <= k < k0 + len(rows):
                return rows[k - k0, nu + nv :].reshape(-1, 6)
        return None


class _Window:
    """The newest message of one JSON topic at or before a time, read :data:`WINDOW_S` at a time."""

    def __init__(self, rec: Recording, topic: str):
        self.rec, self.topic = rec, topic
        self.lo = self.hi = -1.0
        self.times: list = []
        self.msgs: list = []

    def at(self, t: float):
        if not self.lo <= t <= self.hi:
            # a little before t: the newest message at or before it (samples come at >= 25 Hz)
            self.lo, self.hi = max(0.0, t - 0.25), t + WINDOW_S
            got = list(self.rec.read(self.topic, self.lo, self.hi))
            self.times, self.msgs = [m[0] for m in got], [m[1] for m in got]
        i = bisect.bisect_right(self.times, t + 1e-9) - 1
        return self.msgs[i] if i >= 0 else None
