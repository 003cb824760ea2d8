"""Scans on disk: ``results/scans/<id>/`` survives a restart of the Lab.

Layout of one scan::

    scan.json              spec (kind, grid, executor, workers, timeout), status, timings, runs
    points/00000/          one folder per point, created when the point first starts:
        point.json         the point's record (params, status, metrics, wall time, error, output tail)
        output.log         what the point process printed
        summary.json ...   what the kind's point function wrote (trace CSV, figure)
    results.csv            one row per grid point: index, status, parameters, metrics, wall_s, error
    results.json           the scan, its per-kind summary and the same rows

Every file is written atomically (temporary file + rename). ``point.json`` is the truth about a
point; ``results.*`` are rewritten from the records as points finish.
"""

import csv
import io
import json
import os
import re
import secrets
import time
from pathlib import Path

from lab.errors import LabError
from lab.scans.kinds import write_json

FINISHED = ("done", "error")  # a point in one of these is not run again by resume
POINT_STATUSES = ("pending", "running", "done", "error", "cancelled")
SCAN_STATUSES = ("queued", "running", "done", "cancelled", "interrupted", "failed")
ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")
# Columns of results.csv about the run of a point, not its numbers: wall and compute time [s] of its process.
POINT_COLUMNS = ("index", "status", "point_wall_s", "point_compute_s", "attempts", "error")


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def point_dir(scan_dir: Path, index: int) -> Path:
    return scan_dir / "points" / f"{index:05d}"


class ScanStore:
    """The folder that holds every scan (``<results>/scans``)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def new_id(self, kind: str) -> str:
        return f"{time.strftime('%Y%m%d-%H%M%S')}-{kind}-{secrets.token_hex(2)}"

    def dir(self, scan_id: str) -> Path:
        if not isinstance(scan_id, str) or not ID_RE.match(scan_id) or not (self.root / scan_id / "scan.json").exists():
            raise LabError(f"no scan '{scan_id}'", "GET /api/scans lists the scans", status=404)
        return self.root / scan_id

    def ids(self) -> list[str]:
        return sorted(p.parent.name for p in self.root.glob("*/scan.json"))

    def write_scan(self, scan: dict) -> None:
        d = self.root / scan["id"]
        d.mkdir(parents=True, exist_ok=True)
        write_json(d / "scan.json", scan)

    def read_scan(self, scan_id: str) -> dict:
        return json.loads((self.dir(scan_id) / "scan.json").read_text())

    def write_point(self, scan_id: str, record: dict) -> None:
        d = point_dir(self.root / scan_id, record["index"])
        d.mkdir(parents=True, exist_ok=True)
        write_json(d / "point.json", record)

    def read_points(self, scan_id: str) -> dict[int, dict]:
        """Records of the points that have one, by index (unreadable records are skipped: the point reruns)."""
        out = {}
        for f in (self.root / scan_id / "points").glob("*/point.json"):
            try:
                rec = json.loads(f.read_text())
                out[int(rec["index"])] = rec
            except (OSError, ValueError, KeyError):
                continue
        return out

    def point_file(self, scan_id: str, index: int, name: str) -> Path:
        d = point_dir(self.dir(scan_id), index)
        if not re.match(r"^[A-Za-z0-9_.-]+$", name or "") or name.startswith("."):
            raise LabError(f"bad file name {name!r}", "names like summary.json or push_curves.png", status=404)
        f = d / name
        if not f.is_file():
            have = ", ".join(self.point_files(scan_id, index)) or "none yet"
            raise LabError(f"point {index} of scan '{scan_id}' has no file '{name}'", f"files: {have}", status=404)
        return f

    def point_files(self, scan_id: str, index: int) -> list[str]:
        d = point_dir(self.root / scan_id, index)
        if not d.is_dir():
            return []
        return sorted(p.name for p in d.iterdir() if p.is_file() and not p.name.startswith("."))

    def write_results(self, scan_id: str, table: dict) -> None:
        """Rewrite results.json and results.csv from ``table`` = {"columns", "rows", ...} (see manager)."""
        d = self.root / scan_id
        write_json(d / "results.json", table)
        atomic_write_text(d / "results.csv", rows_to_csv(table["columns"], table["rows"]))


def results_table(info: dict, points: list[dict], kind) -> dict:
    """results.json content: the scan, its kind's summary, the CSV's columns and one flat row per point.

    Columns: index, status, the parameters (grid axes, then fixed), the metrics (the kind's own
    first, then the rest sorted; one named like a parameter or a run column is left out), then
    point_wall_s, point_compute_s, attempts, error."""
    names = list(info["grid"]) + list(info["fixed"])
    reserved = {*names, *POINT_COLUMNS}
    seen = []
    for p in points:
        for k in p["metrics"] or {}:
            if k not in seen and k not in reserved:
                seen.append(k)
    first = [m.key for m in kind.metrics if m.key in seen]
    metric_cols = first + sorted(k for k in seen if k not in first)
    columns = ["index", "status", *names, *metric_cols, "point_wall_s", "point_compute_s", "attempts", "error"]
    rows = []
    for p in points:
        m = p["metrics"] or {}
        run = {
            "point_wall_s": p["wall_s"],
            "point_compute_s": p["compute_s"],
            "attempts": p["attempts"],
            "error": p["error"],
        }
        rows.append(
            {"index": p["index"], "status": p["status"], **p["params"], **{k: m.get(k) for k in metric_cols}, **run}
        )
    return {
        "id": info["id"],
        "kind": kind.name,
        "status": info["status"],
        "grid": info["grid"],
        "fixed": info["fixed"],
        "summary": kind.summarize(points) if kind.summarize else {},
        "columns": columns,
        "rows": rows,
    }


def rows_to_csv(columns: list[str], rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if r.get(c) is None else _cell(r.get(c)) for c in columns])
    return buf.getvalue()


def _cell(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return v
