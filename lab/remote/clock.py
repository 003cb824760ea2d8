"""The clocks a runtime can run on: the wall clock, and a virtual clock an experiment advances itself.

The runtime (:mod:`lab.remote.runtime`) and its transports read time only through a clock's ``now()``
[s], so the same code runs live on the state server (:class:`WallClock`: real time, real latency) and
in ``experiments/latency_sweep.py`` (:class:`VirtualClock`: the simulation's own time, faster than real
time; the runtime then sees only the latency a fault profile asks for, never the harness's).
"""

import time


class WallClock:
    """Monotonic wall time [s] (``time.monotonic``)."""

    virtual = False

    def now(self) -> float:
        return time.monotonic()


class VirtualClock:
    """Time that moves only when its owner calls :meth:`advance_to` (e.g. to the simulation time) [s]."""

    virtual = True

    def __init__(self, t0: float = 0.0):
        self._t = float(t0)

    def now(self) -> float:
        return self._t

    def advance_to(self, t: float) -> None:
        """Move to ``t`` [s]; time never goes back (a smaller ``t`` is ignored)."""
        if t > self._t:
            self._t = float(t)
