"""Modes that inject faults into a real runner, for the tests that check a fault is never silent.

- :class:`Raises`: holds the pose, then its command raises every time after ``RAISE_AT_S`` (a bug in a mode);
- :class:`RaisesOnce`: raises once ``RAISE_AT_S`` in, then holds the pose (so that Reset recovers without a
  mode change); ``RaisesOnce.raised = False`` re-arms it;
- :class:`NanTargets`: NaN joint targets after ``RAISE_AT_S``: MuJoCo flags the NaN torques (a divergence).

And a scan kind whose points fault on purpose, for the warm workers (:data:`FAULTS`, point function
:func:`fault_point`): ``mode`` ok | crash (SIGSEGV) | hang | leak (keeps :data:`LEAK_BYTES`).
"""

import os
import signal
import time

import numpy as np

from lab.control.modes import Command, Mode
from lab.scans.kinds import Metric, Param, ScanKind

RAISE_AT_S = 0.05  # [s] of mode time before the fault (the e2e tests use their own, longer, below)
MESSAGE = "the test mode raised on purpose"


class Raises(Mode):
    name = "boom"
    description = "raises every tick after a moment"
    at_s = RAISE_AT_S

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        self._cmd = Command(self.q_nominal)

    def command(self, t):
        if t > self.at_s:
            raise RuntimeError(MESSAGE)
        return self._cmd


class RaisesOnce(Raises):
    name = "raises"
    description = "raises once, then holds the pose"
    at_s = 0.3
    raised = False

    def command(self, t):
        if t >= self.at_s and not RaisesOnce.raised:
            RaisesOnce.raised = True
            raise RuntimeError(MESSAGE)
        return self._cmd


class NanTargets(Mode):
    name = "nan"
    description = "NaN joint targets after a moment"
    at_s = RAISE_AT_S

    def __init__(self, robot, **kw):
        super().__init__(robot, **kw)
        self._ok, self._nan = Command(self.q_nominal), Command(np.full_like(self.q_nominal, np.nan))

    def command(self, t):
        return self._ok if t <= self.at_s else self._nan


class LateNanTargets(NanTargets):
    at_s = 0.3


def with_faults(modes: dict, *faults) -> dict:
    """``modes`` plus the given fault modes, under their names."""
    return {**modes, **{f.name: f for f in faults}}


# ---------------------------------------------------------------- scan points that fault

LEAK_BYTES = 400 << 20  # what a leaking point keeps, above the pool's LEAK_MB bound [bytes]
_kept = []  # a leaking point's memory, held for the life of its worker


def fault_point(params: dict, out_dir, model=None) -> dict:
    """Print a line, then as ``mode`` says: return the worker's pid, crash it, hang, or keep memory and return."""
    mode = params["mode"]
    print(f"fault point: {mode} in process {os.getpid()}", flush=True)
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "hang":
        time.sleep(3600)
    if mode == "leak":
        _kept.append(b"\x01" * LEAK_BYTES)  # written, so resident
    return {"pid": os.getpid(), "ok": True}


FAULTS = ScanKind(
    name="faults",
    title="Faults: points that crash, hang or leak on purpose",
    description="The warm workers' tests.",
    params=(Param("mode", "ok", choices=("ok", "crash", "hang", "leak")), Param("n", 0, 0, 1000, integer=True)),
    point=fault_point,
    metrics=(Metric("pid", "worker pid"), Metric("ok", "ok")),
    pass_key="ok",
    timeout_s=60.0,
    hidden=True,
)
