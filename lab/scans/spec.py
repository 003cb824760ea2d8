"""What a scan request may say: the POST /api/scans body and the resume body, validated into a spec.

Bad input raises a :class:`~lab.errors.LabError` (400) that says what was expected and what came,
with a hint listing what is accepted; a number never turns into a 500 (NaN, inf, 400 digits, a
step of 5e-324, a grid of millions of points: see :mod:`lab.scans.kinds`).
"""

import math

from lab.errors import LabError
from lab.scans.executors import check_executor
from lab.scans.kinds import MAX_POINTS, Grid, default_value, parse_grid, shown
from lab.scans.recording import can_record
from lab.scans.registry import KINDS, get_kind
from lab.scans.search import parse_search

SPEC_KEYS = ("kind", "grid", "search", "executor", "workers", "address", "timeout_s", "record")
RESUME_KEYS = ("retry_errors", "executor", "workers", "address")
MAX_TIMEOUT_S = 86400.0


def _fields(body, accepted: tuple, what: str, example: str) -> dict:
    if not isinstance(body, dict):
        raise LabError(f"{what} must be a JSON object, got {type(body).__name__}", example)
    unknown = [k for k in body if k not in accepted]
    if unknown:
        raise LabError(
            f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(shown(k) for k in unknown)}",
            f"accepted: {', '.join(accepted)}",
        )
    return body


def parse_spec(body, kinds: dict | None = None) -> dict:
    """Validate a POST /api/scans body against ``kinds`` (default: the built-in table); the normalized spec."""
    kinds = KINDS if kinds is None else kinds
    body = _fields(
        body,
        SPEC_KEYS,
        "the body",
        'e.g. {"kind": "push_recovery", "grid": {"force_n": [20, 40], "duration_s": [0.1, 0.2]}}',
    )
    kind = get_kind(body.get("kind"), kinds)
    ok, why = kind.available()
    if not ok:
        raise LabError(
            f"scan kind '{kind.name}' cannot run here: {why}",
            "available kinds: " + ", ".join(k for k, v in kinds.items() if v.available()[0]),
        )
    search = None
    if body.get("search") is not None:
        grid_body = body.get("grid") or {}
        search = parse_search(kind, body["search"], grid_body if isinstance(grid_body, dict) else ())
        if grid_body:
            grid = parse_grid(kind, grid_body)
        else:  # one line, every other parameter at its default
            grid = Grid(kind.name, {}, {p.name: default_value(p) for p in kind.params})
        grid = Grid(kind.name, grid.axes, {k: v for k, v in grid.fixed.items() if k != search.param})
        if grid.size * search.max_points > MAX_POINTS:
            raise LabError(
                f"search has {grid.size:,} lines of up to {search.max_points} points, more than {MAX_POINTS:,} points",
                "fewer values of the other parameters, or a coarser tol",
            )
    else:
        grid = parse_grid(kind, body.get("grid"))
    executor, workers, address = check_executor(body.get("executor"), body.get("workers"), body.get("address"))
    timeout = body.get("timeout_s", kind.timeout_s)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not (isinstance(timeout, int) or math.isfinite(timeout))
        or not 0 < timeout <= MAX_TIMEOUT_S
    ):
        raise LabError(
            f"timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {shown(timeout)}",
            f"leave it out for the kind's default ({kind.timeout_s:g} s)",
        )
    record = body.get("record", False)
    if not isinstance(record, bool):
        raise LabError(f"record must be true or false, got {shown(record)}", "leave it out for false")
    if record and not can_record(kind):
        raise LabError(
            f"scan kind '{kind.name}' keeps no recording of its points",
            "kinds that do: " + (", ".join(k for k, v in kinds.items() if can_record(v)) or "none"),
        )
    return {
        "kind": kind.name,
        "grid": grid.axes,
        "fixed": grid.fixed,
        "search": search.to_dict() if search else None,
        "executor": executor,
        "workers": workers,
        "address": address,
        "timeout_s": float(timeout),
        "record": record,
    }


def parse_resume(body, info: dict) -> tuple[bool, dict]:
    """Validate a resume body for the scan ``info``: (retry_errors, executor changes to apply or {})."""
    body = _fields(body or {}, RESUME_KEYS, "the body", '{"retry_errors": true} also reruns points that ended in error')
    retry = body.get("retry_errors", False)
    if not isinstance(retry, bool):
        raise LabError(f"retry_errors must be true or false, got {shown(retry)}", "leave it out for false")
    changes = {}
    if any(k in body for k in ("executor", "workers", "address")):
        ex = body.get("executor", info["executor"])
        ex, workers, address = check_executor(
            ex,
            body.get("workers", info["workers"]),
            body.get("address", info["address"] if ex == "ray" else None),
        )
        changes = {"executor": ex, "workers": workers, "address": address}
    return retry, changes


def parse_refine(body, kind, info: dict, is_search: bool) -> list[str]:
    """Validate a refine body (``{"axes": [...]}``, optional) for the scan ``info``: the number axes to refine."""
    if is_search:
        raise LabError("a search scan places its own points", "resume it to carry its lines on", status=409)
    if not kind.pass_key:
        raise LabError(f"scan kind '{kind.name}' has no PASS/FAIL result", "refine follows the PASS/FAIL boundary")
    body = _fields(body or {}, ("axes",), "the body", '{"axes": ["force_n"]}; leave it out for every number axis')
    numeric = [a for a, v in info["grid"].items() if len(v) > 1 and not kind.param(a).is_choice]
    axes = body.get("axes", numeric)
    if not isinstance(axes, list) or not axes or any(a not in numeric for a in axes):
        raise LabError(
            f"axes must be a list of the scan's number axes, got {shown(axes)}",
            f"number axes of this scan: {', '.join(numeric) or 'none (a grid axis needs two or more values)'}",
        )
    return list(dict.fromkeys(axes))
