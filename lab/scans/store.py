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
point (a :class:`~lab.scans.points.Point`); ``results.*`` are rewritten from the records as points
finish. A point's files are served only when they are regular files inside the point's folder: a
symlink, or anything resolving elsewhere, is never followed.
"""

import csv
import io
import json
import os
import re
import secrets
import stat
import time
from pathlib import Path

from lab.errors import LabError
from lab.scans.kinds import write_json
from lab.scans.points import Point

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,120}$")
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

    def write_point(self, scan_id: str, point: Point) -> None:
        d = point_dir(self.root / scan_id, point.index)
        d.mkdir(parents=True, exist_ok=True)
        write_json(d / "point.json", point.to_dict())

    def read_points(self, scan_id: str) -> dict[int, Point]:
        """Records of the points that have one, by index (unreadable records are skipped: the point reruns)."""
        out = {}
        for f in (self.root / scan_id / "points").glob("*/point.json"):
            try:
                if f.is_symlink():
                    continue
                rec = Point.from_dict(json.loads(f.read_text()))
                out[rec.index] = rec
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    def open_point_file(self, scan_id: str, index: int, name: str):
        """``(file object, name)`` of one file of a point, opened without following links.

        Only a regular file directly in the point's folder, itself a real folder inside this
        store, is opened; a symlink (to /etc/passwd or to a sibling) is a 404 like a missing file."""
        scan_dir = self.dir(scan_id)
        d = point_dir(scan_dir, index)
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise LabError(
                f"bad file name {shown_name(name)}", "names like summary.json or push_curves.png", status=404
            )
        missing = LabError(
            f"point {index} of scan '{scan_id}' has no file '{name}'",
            f"files: {', '.join(self.point_files(scan_id, index)) or 'none yet'}; links are never served",
            status=404,
        )
        if not self._real_folder(d):
            raise missing
        try:
            fd = os.open(d / name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # missing, a symlink (ELOOP), unreadable
            raise missing from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise missing
        return os.fdopen(fd, "rb"), name

    def _real_folder(self, d: Path) -> bool:
        """``d`` exists, is no symlink, and resolves to the same place inside this store."""
        try:
            real_root = self.root.resolve(strict=True)
            return d.is_dir() and d.resolve(strict=True) == real_root / d.relative_to(self.root)
        except (OSError, ValueError):
            return False

    def point_files(self, scan_id: str, index: int) -> list[str]:
        """The names of the regular files in a point's folder (links and hidden files left out)."""
        d = point_dir(self.root / scan_id, index)
        if not self._real_folder(d):
            return []
        return sorted(p.name for p in d.iterdir() if not p.is_symlink() and p.is_file() and NAME_RE.match(p.name))

    def results_file(self, scan_id: str, ext: str) -> Path:
        f = self.dir(scan_id) / f"results.{ext}"
        if f.is_symlink() or not f.is_file() or not self._real_folder(f.parent):
            raise LabError(f"scan '{scan_id}' has no results.{ext} yet", "it is written as points finish", 404)
        return f

    def write_results(self, scan_id: str, table: dict) -> None:
        """Rewrite results.json and results.csv from ``table`` = {"columns", "rows", ...} (see manager)."""
        d = self.root / scan_id
        write_json(d / "results.json", table)
        atomic_write_text(d / "results.csv", rows_to_csv(table["columns"], table["rows"]))


def shown_name(name) -> str:
    text = repr(name)
    return text if len(text) <= 60 else text[:48] + "..."


def results_table(info: dict, points: list[Point], kind) -> dict:
    """results.json content: the scan, its kind's summary, the CSV's columns and one flat row per point.

    Columns: index, status, the parameters (grid axes, then fixed), the metrics (the kind's own
    first, then the rest sorted; one named like a parameter or a run column is left out), then
    point_wall_s, point_compute_s, attempts, error."""
    names = list(info["grid"]) + list(info["fixed"])
    reserved = {*names, *POINT_COLUMNS}
    seen = []
    for p in points:
        for k in p.metrics:
            if k not in seen and k not in reserved:
                seen.append(k)
    first = [m.key for m in kind.metrics if m.key in seen]
    metric_cols = first + sorted(k for k in seen if k not in first)
    columns = ["index", "status", *names, *metric_cols, "point_wall_s", "point_compute_s", "attempts", "error"]
    rows = []
    for p in points:
        run = {"point_wall_s": p.wall_s, "point_compute_s": p.compute_s, "attempts": p.attempts, "error": p.error}
        rows.append(
            {
                "index": p.index,
                "status": p.status.value,
                **p.params,
                **{k: p.metrics.get(k) for k in metric_cols},
                **run,
            }
        )
    return {
        "id": info["id"],
        "kind": kind.name,
        "status": str(info["status"]),
        "grid": info["grid"],
        "fixed": info["fixed"],
        "summary": kind.summarize([p.to_dict() for p in points]) if kind.summarize else {},
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
