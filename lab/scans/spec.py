"""What a scan request may say: the POST /api/scans body and the resume body, validated into a spec.

Bad input raises a :class:`~lab.errors.LabError` (400) that says what was expected and what came,
with a hint listing what is accepted; a number never turns into a 500 (NaN, inf, 400 digits, a
step of 5e-324, a grid of millions of points: see :mod:`lab.scans.kinds`).
"""

import math

from lab.errors import LabError
from lab.scans.executors import check_executor
from lab.scans.kinds import parse_grid, shown
from lab.scans.registry import KINDS, get_kind

SPEC_KEYS = ("kind", "grid", "executor", "workers", "address", "timeout_s")
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
    return {
        "kind": kind.name,
        "grid": grid.axes,
        "fixed": grid.fixed,
        "executor": executor,
        "workers": workers,
        "address": address,
        "timeout_s": float(timeout),
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
