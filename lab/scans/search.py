"""Adaptive search: the PASS/FAIL boundary of one parameter, by bisection, per line of the other parameters.

A search scan (``"search": {"param": "force_n", "bisect": [lo, hi], "tol": 2}``) has no fixed list of
points. Its grid names the *other* parameters; each combination of their values is one **line**, and
along each line the search parameter is bisected on ``[lo, hi]`` until the last value that passed
and the first that failed are at most ``tol`` apart.

The search holds no state of its own: where a line stands is a pure function of the outcomes of the
points already run on it (:func:`next_value`, :func:`threshold`), so the manager asks each line for
its next value after every round, a resumed scan picks up where it stopped (its finished points are
its outcomes), and the same outcomes always give the same next point.

Bisection assumes PASS below the boundary and FAIL above it. The ends are assumed, not run, until
the bracket closes on one of them: ``lo`` is run only when every value tried so far failed, ``hi``
only when every value passed. So a line takes at most ``ceil(log2((hi - lo) / tol)) + 1`` points
(8 for [0, 200] N at 2 N), and it ends one of three ways:

* ``bracketed``: ``bracket = [last_pass, first_fail]``, ``first_fail - last_pass <= tol``;
* ``passes_at_hi``: even ``hi`` passed, ``bracket = [hi, None]`` (the boundary lies above the range);
* ``fails_at_lo``: even ``lo`` failed, ``bracket = [None, lo]`` (the boundary lies below the range).

A line whose next point ended in ``error`` stops (``error``) until a resume retries it.
"""

import math
from dataclasses import dataclass

from lab.errors import LabError
from lab.scans.kinds import Param, ScanKind, shown

SEARCH_KEYS = ("param", "bisect", "tol")
MAX_STEPS = 30  # bisection halvings per line at most: (hi - lo) / tol <= 2**30
RESOLUTION = 1e-6  # values are rounded to this (integers for an integer parameter)


@dataclass(frozen=True)
class Search:
    """Bisect ``param`` on [``lo``, ``hi``] down to a bracket of at most ``tol`` (all in the parameter's unit)."""

    param: str
    lo: float
    hi: float
    tol: float
    integer: bool = False
    unit: str = ""

    @property
    def max_points(self) -> int:
        """The most points one line takes (bisection plus one end check)."""
        return max(1, math.ceil(math.log2((self.hi - self.lo) / self.tol))) + 1

    def to_dict(self) -> dict:
        return {"param": self.param, "bisect": [self.lo, self.hi], "tol": self.tol}

    def mid(self, a: float, b: float) -> float | None:
        """The value halfway between ``a`` and ``b``, or None when none lies strictly between at the resolution."""
        m = math.floor((a + b) / 2) if self.integer else round((a + b) / 2, 6)
        return m if a < m < b else None


def parse_search(kind: ScanKind, body, grid_names) -> Search:
    """Validate a ``"search"`` object for ``kind``; ``grid_names`` are the parameters the grid varies."""
    example = '{"param": "force_n", "bisect": [0, 200], "tol": 2}'
    if not kind.pass_key:
        raise LabError(f"scan kind '{kind.name}' has no PASS/FAIL result to search on", "search needs a pass_key")
    if not isinstance(body, dict):
        raise LabError(f"search must be a JSON object, got {shown(body)}", f"e.g. {example}")
    unknown = [k for k in body if k not in SEARCH_KEYS]
    if unknown:
        raise LabError(
            f"unknown search field {', '.join(shown(k) for k in unknown)}", f"accepted: {', '.join(SEARCH_KEYS)}"
        )
    numeric = [p.name for p in kind.params if not p.is_choice]
    name = body.get("param")
    if not isinstance(name, str) or name not in numeric:
        raise LabError(
            f"search param {shown(name)} is not a number parameter of '{kind.name}'", f"one of: {', '.join(numeric)}"
        )
    param: Param = kind.param(name)
    if name in grid_names:
        raise LabError(
            f"{name} is searched, so it cannot also be in the grid",
            f"leave {name} out of the grid; the grid names the other parameters (one line per combination)",
        )
    ends = body.get("bisect")
    if (
        not isinstance(ends, list)
        or len(ends) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in ends)
        or not param.lo <= ends[0] < ends[1] <= param.hi
    ):
        raise LabError(
            f"search bisect must be [lo, hi] with {param.lo:g} <= lo < hi <= {param.hi:g}, got {shown(ends)}",
            f"{param.describe()}; e.g. {example}",
        )
    lo, hi = float(ends[0]), float(ends[1])
    tol = body.get("tol")
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol) or tol <= 0:
        raise LabError(
            f"search tol must be a number > 0 in {param.unit or 'the unit of ' + name}, got {shown(tol)}", example
        )
    if param.integer and tol < 1:
        raise LabError(f"search tol must be >= 1 for the integer parameter {name}, got {tol:g}", example)
    if tol < RESOLUTION * 10 or (hi - lo) / tol > 2**MAX_STEPS:
        raise LabError(
            f"search tol {tol:g} is too fine for [{lo:g}, {hi:g}]",
            f"at most {MAX_STEPS} halvings: tol >= {(hi - lo) / 2**MAX_STEPS:.3g} (and >= {RESOLUTION * 10:g})",
        )
    if param.integer:
        lo, hi = float(math.ceil(lo)), float(math.floor(hi))
    return Search(name, lo, hi, float(tol), integer=param.integer, unit=param.unit)


def _bounds(s: Search, outcomes: dict) -> tuple:
    """(last pass below every fail or None, first fail or None) of ``outcomes`` (value -> passed)."""
    fails = [v for v, ok in outcomes.items() if not ok]
    first_fail = min(fails) if fails else None
    passes = [v for v, ok in outcomes.items() if ok and (first_fail is None or v < first_fail)]
    return (max(passes) if passes else None), first_fail


def next_value(s: Search, outcomes: dict) -> float | None:
    """The value of the search parameter a line runs next, given its ``outcomes`` (value -> passed); None when done."""
    if outcomes.get(s.lo) is False or outcomes.get(s.hi) is True:
        return None  # fails_at_lo or passes_at_hi
    last_pass, first_fail = _bounds(s, outcomes)
    a = s.lo if last_pass is None else last_pass
    b = s.hi if first_fail is None else first_fail
    if b - a > s.tol + 1e-9:
        m = s.mid(a, b)
        if m is not None:
            return m
    if last_pass is None and s.lo not in outcomes:
        return s.lo  # every value tried failed: is even lo a FAIL?
    if first_fail is None and s.hi not in outcomes:
        return s.hi  # every value tried passed: is even hi a PASS?
    return None


def points_left(s: Search, outcomes: dict) -> int:
    """An upper bound on the points a line still takes (for the ETA)."""
    if next_value(s, outcomes) is None:
        return 0
    last_pass, first_fail = _bounds(s, outcomes)
    a = s.lo if last_pass is None else last_pass
    b = s.hi if first_fail is None else first_fail
    halvings = math.ceil(math.log2((b - a) / s.tol)) if b - a > s.tol else 0
    return max(1, halvings) + (last_pass is None or first_fail is None)


def threshold(s: Search, params: dict, outcomes: dict, error: str = "", points: int | None = None) -> dict:
    """Where one line stands: its bracket [last pass, first fail] (None where the range gave no such value).

    ``status``: bracketed | passes_at_hi | fails_at_lo | searching | error; ``label`` says it in words with
    the unit, e.g. "threshold in [62.5, 64.06] N (tol 2 N)", never a single midpoint; ``points``: the line's
    points (default: those with an outcome)."""
    last_pass, first_fail = _bounds(s, outcomes)
    u = f" {s.unit}" if s.unit else ""
    if outcomes.get(s.lo) is False:
        status, label = "fails_at_lo", f"fails even at lo = {s.lo:g}{u}: the threshold is below the range"
        last_pass, first_fail = None, s.lo
    elif outcomes.get(s.hi) is True:
        status, label = "passes_at_hi", f"passes even at hi = {s.hi:g}{u}: the threshold is above the range"
        last_pass, first_fail = s.hi, None
    elif error:
        status, label = "error", f"stopped: a point ended in error ({error[:120]})"
    elif next_value(s, outcomes) is not None:
        status = "searching"
        label = f"searching: [{_txt(last_pass, s.lo, '≥')}, {_txt(first_fail, s.hi, '≤')}]{u}"
    else:
        status, label = "bracketed", f"threshold in [{last_pass:g}, {first_fail:g}]{u} (tol {s.tol:g}{u})"
    return {
        "params": params,
        "param": s.param,
        "bracket": [last_pass, first_fail],
        "tol": s.tol,
        "unit": s.unit,
        "points": len(outcomes) if points is None else points,
        "status": status,
        "label": label,
    }


def _txt(v, end: float, sign: str) -> str:
    return f"{v:g}" if v is not None else f"{sign}{end:g}?"


def boundary_midpoints(verdicts: list[tuple[dict, bool]], axes: list[Param]) -> list[dict]:
    """Where a heatmap's PASS/FAIL boundary runs: for each number axis in ``axes``, the midpoint between two
    neighbouring points (the other parameters equal) of which one passed and the other failed.

    ``verdicts``: (params, passed) of the done points. The new points' params, each once, in axis order."""
    out, seen = [], set()
    for axis in axes:
        lines: dict[tuple, list] = {}
        for params, ok in verdicts:
            if axis.name in params:
                rest = tuple(sorted((k, v) for k, v in params.items() if k != axis.name))
                lines.setdefault(rest, []).append((params[axis.name], ok, params))
        for row in lines.values():
            row.sort(key=lambda r: r[0])
            for (a, ok_a, params), (b, ok_b, _) in zip(row, row[1:]):
                if ok_a == ok_b:
                    continue
                m = math.floor((a + b) / 2) if axis.integer else round((a + b) / 2, 10)
                if not a < m < b:
                    continue  # neighbours already at the resolution of the axis
                new = {**params, axis.name: int(m) if axis.integer else m}
                key = tuple(sorted(new.items()))
                if key not in seen:
                    seen.add(key)
                    out.append(new)
    return out
