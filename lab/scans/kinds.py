"""Scan kinds: an experiment with named parameters (numbers or choices) and a per-point function; grids over them.

A kind is one :class:`ScanKind`. Its ``point`` function runs in a worker process (see
:mod:`lab.scans.executors`) as ``point(params, out_dir, model) -> dict``: it writes its own
artifacts (``summary.json``, a trace CSV) into ``out_dir`` and returns the numbers of the point
(flat: numbers, booleans, short strings). A figure named in ``figures`` is drawn from those files
only when it is first asked for (:mod:`lab.scans.figures`), never while the scan runs. ``summarize``
turns the finished points of a scan (as dicts) into the scan's headline numbers (e.g. the push force
threshold per duration).

This module only defines the types and the grid parser; it imports no kind. The built-in kinds are
defined in :mod:`lab.scans.builtin`, and :mod:`lab.scans.registry` builds the one name -> kind
table (``KINDS``) that the manager uses; a manager can be given another table (``kinds=``).
"""

import importlib.util
import itertools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lab.errors import LabError

MAX_POINTS = 10_000


@dataclass(frozen=True)
class Param:
    """A scan parameter: a number with a default and a closed range ``[lo, hi]`` in ``unit``, or, with
    ``choices``, one of a few names (``controller: "feedback, pd"``; ``lo``/``hi``/``integer`` unused)."""

    name: str
    default: float | str
    lo: float = 0.0
    hi: float = 0.0
    unit: str = ""
    integer: bool = False
    description: str = ""
    choices: tuple = ()  # the names a choice parameter takes; () for a number

    def __post_init__(self):
        if self.choices and self.default not in self.choices:
            raise ValueError(f"parameter {self.name}: default {self.default!r} is not one of {self.choices}")

    @property
    def is_choice(self) -> bool:
        return bool(self.choices)

    def describe(self) -> str:
        unit = f" [{self.unit}]" if self.unit else ""
        if self.choices:
            return f"{self.name}{unit}: one of {', '.join(self.choices)}, default {self.default}"
        kind = "integer" if self.integer else "number"
        return f"{self.name}{unit}: {kind} in [{self.lo:g}, {self.hi:g}], default {self.default:g}"

    def to_dict(self) -> dict:
        if self.choices:
            return {
                "name": self.name,
                "default": self.default,
                "min": None,
                "max": None,
                "unit": self.unit,
                "integer": False,
                "description": self.description,
                "choices": list(self.choices),
            }
        return {
            "name": self.name,
            "default": self.default,
            "min": self.lo,
            "max": self.hi,
            "unit": self.unit,
            "integer": self.integer,
            "description": self.description,
        }


@dataclass(frozen=True)
class Metric:
    """A number a point reports; ``key`` in the point's result, shown as ``label`` [``unit``]."""

    key: str
    label: str
    unit: str = ""
    better: str = ""  # "high" or "low" when one direction is the good one (the page's colour scale follows it)

    def to_dict(self) -> dict:
        return {"key": self.key, "label": self.label, "unit": self.unit, "better": self.better}


@dataclass(frozen=True)
class ScanKind:
    name: str
    title: str
    description: str
    params: tuple  # Param, in the order the heatmap uses: x axis first, then y
    point: Callable  # point(params: dict, out_dir: Path, model: str | None) -> dict, in a child process
    metrics: tuple = ()  # Metric, the columns shown first (the page's metric choices)
    heat_metric: str = ""  # default heatmap metric
    pass_key: str = ""  # boolean result key that reads PASS when true
    summarize: Callable | None = None  # summarize(points: list[dict]) -> dict over finished points
    timeout_s: float = 300.0  # per point [s]
    hidden: bool = False  # accepted by the API, not offered by the page's form
    requires: str = ""  # a module the point function needs; the kind is unavailable without it
    artifacts: tuple = field(default=())  # file names a point writes (figure first)
    example: dict = field(default_factory=dict)  # param -> values text the page's form starts with
    # figure name -> draw(out_dir, path): draws it from the point's files when first asked for (lab.scans.figures)
    figures: dict = field(default_factory=dict)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise LabError(f"unknown parameter '{name}' for scan kind '{self.name}'", self.params_hint())

    def params_hint(self) -> str:
        return f"parameters of {self.name}: " + "; ".join(p.describe() for p in self.params)

    @property
    def point_ref(self) -> str:
        """``module:function`` of the point function, what the child process imports."""
        return f"{self.point.__module__}:{self.point.__qualname__}"

    def available(self) -> tuple[bool, str]:
        """(True, "") when the point function can run here; else (False, why)."""
        if not self.requires:
            return True, ""
        try:
            found = importlib.util.find_spec(self.requires) is not None
        except ModuleNotFoundError:
            found = False
        return (True, "") if found else (False, f"{self.requires} is not available in this installation")

    def to_dict(self) -> dict:
        ok, why = self.available()
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "params": [p.to_dict() for p in self.params],
            "metrics": [m.to_dict() for m in self.metrics],
            "heat_metric": self.heat_metric,
            "pass_key": self.pass_key,
            "timeout_s": self.timeout_s,
            "hidden": self.hidden,
            "available": ok,
            "unavailable_reason": why,
            "artifacts": list(self.artifacts),
            "example": dict(self.example),
        }


# ---------------------------------------------------------------- grids


def shown(value, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters (a 400-digit number reads as its first digits and a count)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}... ({len(text)} chars)"


def _number(value, param: Param, hint: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise LabError(f"{param.name}: expected a number, got {shown(value)}", hint)
    if isinstance(value, str) and len(value.strip()) > 40:
        raise LabError(f"{param.name}: expected a number of at most 40 characters, got {shown(value)}", hint)
    try:
        v = float(value)
    except (ValueError, OverflowError):  # "strong"; an integer too large for a float
        raise LabError(
            f"{param.name}: value {shown(value)} is not a number in [{param.lo:g}, {param.hi:g}]", hint
        ) from None
    if not math.isfinite(v):
        raise LabError(f"{param.name}: value {shown(value)} is not a finite number", hint)
    if param.integer:
        if v != round(v):
            raise LabError(f"{param.name}: value {shown(value)} is not an integer", hint)
        v = int(round(v))
    if not param.lo <= v <= param.hi:
        raise LabError(f"{param.name}: value {v:g} is outside [{param.lo:g}, {param.hi:g}]", hint)
    return v


def _range(param: Param, spec: str, hint: str) -> list:
    """The values of an inclusive ``start:stop:step`` range; its size is checked before any value is made."""
    parts = spec.strip().split(":")
    bad = f"{param.name}: range {shown(spec)} must be start:stop:step with finite numbers, start <= stop and step > 0"
    if any(len(x.strip()) > 40 for x in parts):
        raise LabError(bad, hint)
    try:
        start, stop, step = (float(x) for x in parts)
    except (ValueError, OverflowError):
        raise LabError(bad, hint) from None
    if not all(math.isfinite(x) for x in (start, stop, step)) or step <= 0 or stop < start:
        raise LabError(bad, hint)
    span = (stop - start) / step  # overflows to inf for a step like 5e-324
    n = math.floor(span + 1e-9) + 1 if math.isfinite(span) else None
    if n is None or n > MAX_POINTS:
        raise LabError(
            f"{param.name}: range {shown(spec)} has {'more than 1e308' if n is None else f'{n:,}'} values, "
            f"more than {MAX_POINTS:,}",
            f"{hint}; at most {MAX_POINTS:,} points per scan: use a larger step",
        )
    values = [round(start + i * step, 10) for i in range(n)]
    if len(set(values)) < len(values) and step < 1e-10:
        raise LabError(
            f"{param.name}: range {shown(spec)} has a step of {step:g}, below the 1e-10 resolution of scan values",
            hint,
        )
    return values


def _choice(value, param: Param, hint: str) -> str:
    """One value of a choice parameter: a name of ``param.choices`` (surrounding blanks and case ignored)."""
    listed = ", ".join(param.choices)
    if not isinstance(value, str):
        raise LabError(f"{param.name}: expected one of {listed}, got {shown(value)}", hint)
    key = value.strip().lower()
    for c in param.choices:
        if c.lower() == key:
            return c
    raise LabError(f"{param.name}: unknown choice {shown(value.strip())}, expected one of {listed}", hint)


def expand_values(param: Param, spec, hint: str) -> list:
    """Values of one parameter from a list, ``"a, b, c"`` or (numbers only) an inclusive ``"start:stop:step"``."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        spec = [spec]
    if isinstance(spec, str):
        if spec.count(":") == 2 and not param.is_choice:
            spec = _range(param, spec, hint)
        else:
            spec = [x for x in (s.strip() for s in spec.replace(";", ",").split(",")) if x]
    if not isinstance(spec, list):
        what = (
            f"a list of {', '.join(param.choices)}"
            if param.is_choice
            else "a list of numbers or a start:stop:step range"
        )
        raise LabError(f"{param.name}: values must be {what}, got {shown(spec)}", hint)
    if not spec:
        raise LabError(f"empty grid: {param.name} has no values", hint)
    if len(spec) > MAX_POINTS:
        raise LabError(f"{param.name}: {len(spec):,} values, more than {MAX_POINTS:,}", hint)
    out, seen = [], set()
    for v in spec:
        x = _choice(v, param, hint) if param.is_choice else _number(v, param, hint)
        if x not in seen:  # duplicates dropped, first order kept
            seen.add(x)
            out.append(x)
    return out


@dataclass(frozen=True)
class Grid:
    """The expanded grid: ``axes`` (param -> values) varied, every other parameter at its default."""

    kind: str
    axes: dict  # name -> list of values, in the kind's parameter order
    fixed: dict  # name -> value of parameters that are not in the grid

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.axes.values())

    def points(self) -> list[dict]:
        """All points, first axis outermost; each a full parameter dict."""
        names = list(self.axes)
        return [{**self.fixed, **dict(zip(names, combo))} for combo in itertools.product(*self.axes.values())]


def default_value(p: Param):
    """The value a parameter left out of a grid takes."""
    return int(p.default) if p.integer and not p.is_choice else p.default


def parse_grid(kind: ScanKind, grid) -> Grid:
    """Validate a ``{param: values}`` grid for ``kind``; bad input raises a LabError listing what is accepted."""
    hint = kind.params_hint() + '; values as a list [0.02, 0.04], "0.02, 0.04" or a range "0.02:0.06:0.01"'
    if any(p.is_choice for p in kind.params):
        hint += '; choices as a list ["a", "b"] or "a, b"'
    if not isinstance(grid, dict) or not grid:
        raise LabError("empty grid: give at least one parameter with values", hint)
    names = {p.name for p in kind.params}
    for name in grid:
        if name not in names:
            raise LabError(f"unknown parameter '{name}' for scan kind '{kind.name}'", hint)
    axes = {p.name: expand_values(p, grid[p.name], hint) for p in kind.params if p.name in grid}
    fixed = {p.name: default_value(p) for p in kind.params if p.name not in grid}
    g = Grid(kind.name, axes, fixed)
    if g.size > MAX_POINTS:
        shape = " x ".join(str(len(v)) for v in axes.values())
        raise LabError(
            f"grid has {g.size:,} points ({shape}), more than {MAX_POINTS:,}", f"{hint}; at most {MAX_POINTS:,} points"
        )
    return g


# ---------------------------------------------------------------- shared helpers for point functions


def write_json(path: Path, data) -> None:
    """Write JSON atomically (temporary file + rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=_jsonable))
    os.replace(tmp, path)


def _jsonable(x):
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "item"):
        return x.item()
    return str(x)
