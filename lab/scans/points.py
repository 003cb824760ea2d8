"""Typed records of a scan: the status enums, one grid point (:class:`Point`) and what running it gave (:class:`Outcome`).

A :class:`Point` is what ``points/<i>/point.json`` holds and what the API shows; it is frozen and
changes only through its methods (:meth:`Point.started`, :meth:`Point.finished`, ...), each of
which returns a new record. An :class:`Outcome` is what an executor reports when a point process
ends (on a Ray worker too: it travels as a dict through :meth:`Outcome.to_dict`).

The JSON of both keeps the field names the store and the API have always used.
"""

import math
import time
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum

SCALARS = (int, float, bool, str)


class PointStatus(str, Enum):
    PENDING = "pending"  # not run yet (or reset by a resume)
    RUNNING = "running"
    DONE = "done"
    ERROR = "error"  # the point raised, exited non-zero, died on a signal or overran its timeout
    CANCELLED = "cancelled"  # stopped by a cancel of its scan
    INTERRUPTED = "interrupted"  # cut off by the Lab stopping (or being killed) while it ran

    def __str__(self) -> str:
        return self.value


class ScanStatus(str, Enum):
    QUEUED = "queued"  # waiting for a free slot (ScanManager's max_running)
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # the Lab stopped while it ran; resume picks it up
    FAILED = "failed"  # the executor itself failed (e.g. Ray could not start)

    def __str__(self) -> str:
        return self.value


FINISHED = (PointStatus.DONE, PointStatus.ERROR)  # a point in one of these is not run again by resume
ACTIVE = (ScanStatus.QUEUED, ScanStatus.RUNNING)  # a scan in one of these can be cancelled, not resumed


def scalar_metrics(metrics) -> dict:
    """The flat part of a point function's result: numbers, booleans, short strings and None."""
    return {str(k): v for k, v in (metrics or {}).items() if v is None or isinstance(v, SCALARS)}


@dataclass(frozen=True)
class Outcome:
    """How one run of a point process ended (what :func:`lab.scans.executors.run_point` returns)."""

    status: PointStatus
    metrics: dict = field(default_factory=dict)
    wall_s: float | None = None
    compute_s: float | None = None
    error: str = ""
    output_tail: str = ""
    exit_code: int | None = None
    started_at: float | None = None
    finished_at: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "status", PointStatus(self.status))

    @classmethod
    def stopped(cls, status: PointStatus, error: str, output_tail: str = "", started_at: float | None = None):
        """A point stopped from outside (cancel, the Lab stopping) before it could report."""
        now = time.time()
        return cls(status, error=error, output_tail=output_tail, started_at=started_at or now, finished_at=now)

    def to_dict(self) -> dict:
        return {**asdict(self), "status": self.status.value}

    @classmethod
    def from_dict(cls, d: dict) -> "Outcome":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class Point:
    """One grid point of a scan: its parameters, status, numbers and the timings of its last run."""

    index: int
    params: dict
    status: PointStatus = PointStatus.PENDING
    metrics: dict = field(default_factory=dict)
    attempts: int = 0
    wall_s: float | None = None
    compute_s: float | None = None
    error: str = ""
    output_tail: str = ""
    exit_code: int | None = None
    started_at: float | None = None
    finished_at: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "status", PointStatus(self.status))
        object.__setattr__(self, "index", int(self.index))

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def started(self) -> "Point":
        return replace(
            self, status=PointStatus.RUNNING, started_at=time.time(), finished_at=None, attempts=self.attempts + 1
        )

    def ended(self, outcome: Outcome, status: PointStatus | None = None) -> "Point":
        """This point with ``outcome`` recorded (``status`` overrides the outcome's, e.g. interrupted)."""
        return replace(
            self,
            status=status or outcome.status,
            metrics=scalar_metrics(outcome.metrics),
            wall_s=outcome.wall_s,
            compute_s=outcome.compute_s,
            error=outcome.error,
            output_tail=outcome.output_tail,
            exit_code=outcome.exit_code,
            finished_at=outcome.finished_at or time.time(),
        )

    def cut_off(self, status: PointStatus, error: str) -> "Point":
        """A running point whose run ended without an outcome (cancelled, interrupted)."""
        return replace(self, status=status, error=error, finished_at=self.finished_at or time.time())

    def reset(self) -> "Point":
        """Pending again, for a resume (numbers and attempts kept until it runs)."""
        return replace(self, status=PointStatus.PENDING, error="", output_tail="")

    def to_dict(self) -> dict:
        return {**asdict(self), "status": self.status.value}

    @classmethod
    def from_dict(cls, d: dict) -> "Point":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def public(self) -> dict:
        """The fields GET /api/scans/<id> lists per point."""
        d = self.to_dict()
        return {k: d[k] for k in ("index", "params", "status", "metrics", "wall_s", "compute_s", "error", "attempts")}


# ---------------------------------------------------------------- the points as columns

STATUS_CODES = {
    PointStatus.PENDING: "p",
    PointStatus.RUNNING: "r",
    PointStatus.DONE: "d",
    PointStatus.ERROR: "e",
    PointStatus.CANCELLED: "c",
    PointStatus.INTERRUPTED: "i",
}


def summary_records(points: list[Point]) -> list[dict]:
    """What a kind's ``summarize`` reads of each point (status, params, metrics), without copying the rest."""
    return [{"status": p.status.value, "params": p.params, "metrics": p.metrics} for p in points]


def _number(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(f"{v:.6g}")
    return None


def point_table(points: list[Point], kind) -> dict:
    """Every point as columns, what the scans page draws its heatmap from (a 10,000-point scan in ~0.3 MB).

    ``axes``: the parameters that take more than one value, in the kind's order; ``values``: every
    parameter's sorted values; ``coords[axis][i]``: the position of point i's value in ``values[axis]``;
    ``status``: one letter per point (p pending, r running, d done, e error, c cancelled, i interrupted);
    ``pass``: one letter per point (1 PASS, 0 FAIL, - not known); ``metrics[key][i]``: the kind's metrics
    (booleans as 1/0, 6 significant digits, None where missing)."""
    names = [p.name for p in kind.params]
    seen = {n: set() for n in names}
    for p in points:
        for n in names:
            if n in p.params:
                seen[n].add(p.params[n])
    values = {}
    for prm in kind.params:
        vs = seen[prm.name]
        values[prm.name] = [c for c in prm.choices if c in vs] if prm.is_choice else sorted(vs)
    axes = [n for n in names if len(values[n]) > 1]
    where = {a: {v: k for k, v in enumerate(values[a])} for a in axes}
    keys = [m.key for m in kind.metrics]
    if kind.pass_key and kind.pass_key not in keys:
        keys.append(kind.pass_key)
    status, verdict = [], []
    coords = {a: [] for a in axes}
    metrics = {k: [] for k in keys}
    for p in points:
        status.append(STATUS_CODES[p.status])
        ok = p.metrics.get(kind.pass_key) if p.status == PointStatus.DONE and kind.pass_key else None
        verdict.append("-" if ok is None else "1" if ok else "0")
        for a in axes:
            coords[a].append(where[a].get(p.params.get(a), -1))
        for k in keys:
            metrics[k].append(_number(p.metrics.get(k)) if p.status == PointStatus.DONE else None)
    return {
        "n": len(points),
        "axes": axes,
        "values": values,
        "coords": coords,
        "status": "".join(status),
        "pass": "".join(verdict),
        "metrics": metrics,
    }
