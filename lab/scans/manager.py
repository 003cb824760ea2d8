"""The scan manager: validates a scan, runs it in a background thread, reports progress, cancels, resumes.

One :class:`ScanManager` per Lab (the web layer makes it in ``init_app``); ``experiments/`` use the
same class. Every scan lives on disk (:mod:`lab.scans.store`), so a new manager on the same
folder sees the old scans: those that were running when the Lab stopped come back as
``interrupted`` and :meth:`ScanManager.resume` runs only the points not yet finished.

Scan status: queued -> running -> done | cancelled | interrupted | failed (the executor itself
failed, e.g. Ray could not start). Point status: pending -> running -> done | error | cancelled.
"""

import atexit
import threading
import time
from pathlib import Path

from lab.errors import LabError
from lab.scans.executors import PointJob, check_executor, make_executor
from lab.scans.kinds import Grid, get_kind, parse_grid
from lab.scans.store import FINISHED, ScanStore, point_dir, results_table

SPEC_KEYS = ("kind", "grid", "executor", "workers", "address", "timeout_s")
FLUSH_S = 0.5  # results.* are rewritten at most this often while points finish [s]
SCALARS = (int, float, bool, str)


class Scan:
    """The in-memory state of one scan; ``lock`` guards ``points`` and ``info``."""

    def __init__(self, info: dict, points: list[dict]):
        self.info = info  # what scan.json holds
        self.points = points  # one record per grid point, by index
        self.kind = get_kind(info["kind"])
        self.lock = threading.RLock()
        self.flush_lock = threading.Lock()
        self.cancel = threading.Event()
        self.stop_reason = "cancelled"
        self.thread: threading.Thread | None = None
        self.run_t0 = 0.0  # monotonic start of the current run
        self.run_indices: set = set()
        self.run_finished = 0
        self.last_flush = 0.0
        self.flush_timer: threading.Timer | None = None

    @property
    def id(self) -> str:
        return self.info["id"]

    @property
    def status(self) -> str:
        return self.info["status"]

    def counts(self) -> dict:
        c = dict.fromkeys(("pending", "running", "done", "error", "cancelled"), 0)
        for p in self.points:
            c[p["status"]] += 1
        return c


def _new_record(index: int, params: dict) -> dict:
    return {
        "index": index,
        "params": params,
        "status": "pending",
        "metrics": {},
        "attempts": 0,
        "wall_s": None,
        "compute_s": None,
        "error": "",
        "output_tail": "",
        "exit_code": None,
        "started_at": None,
        "finished_at": None,
    }


def parse_spec(body) -> dict:
    """Validate a POST /api/scans body; returns the normalized spec (grid expanded)."""
    if not isinstance(body, dict):
        raise LabError(
            "the body must be a JSON object",
            'e.g. {"kind": "push_recovery", "grid": {"force_n": [20, 40], "duration_s": [0.1, 0.2]}}',
        )
    unknown = [k for k in body if k not in SPEC_KEYS]
    if unknown:
        raise LabError(
            f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}",
            f"accepted: {', '.join(SPEC_KEYS)}",
        )
    kind = get_kind(body.get("kind"))
    ok, why = kind.available()
    if not ok:
        raise LabError(
            f"scan kind '{kind.name}' cannot run here: {why}",
            "available kinds: " + ", ".join(k for k, v in _kinds().items() if v.available()[0]),
        )
    grid = parse_grid(kind, body.get("grid"))
    executor, workers, address = check_executor(body.get("executor"), body.get("workers"), body.get("address"))
    timeout = body.get("timeout_s", kind.timeout_s)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 86400:
        raise LabError(
            f"timeout_s must be a number of seconds in (0, 86400], got {timeout!r}",
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


def _kinds():
    from lab.scans.kinds import KINDS

    return KINDS


class ScanManager:
    """All scans under ``<results_dir>/scans``; points use the robot at ``model`` (None = built-in Q1)."""

    def __init__(self, results_dir: str | Path, model: str | None = None):
        self.store = ScanStore(Path(results_dir) / "scans")
        self.model = str(model) if model else None
        self._scans: dict[str, Scan] = {}
        self._lock = threading.Lock()
        self._closed = False
        for sid in self.store.ids():
            try:
                self._load(sid)
            except (OSError, ValueError, KeyError, LabError):
                continue  # a damaged or foreign folder: not shown
        atexit.register(self.shutdown)

    # ------------------------------------------------------------ loading

    def _load(self, sid: str) -> None:
        info = self.store.read_scan(sid)
        grid = Grid(info["kind"], info["grid"], info["fixed"])
        records = self.store.read_points(sid)
        points = []
        for i, params in enumerate(grid.points()):
            rec = records.get(i) or _new_record(i, params)
            if rec["status"] == "running":  # the Lab stopped while it ran
                rec["status"] = "cancelled"
                rec["error"] = "interrupted: the Lab stopped while this point ran"
            points.append(rec)
        scan = Scan(info, points)
        if info["status"] in ("queued", "running"):
            info["status"] = "interrupted"
            info["finished_at"] = info.get("finished_at") or time.time()
            for run in info["runs"]:
                if run["status"] == "running":  # the Lab was killed before it could say so
                    run.update(status="interrupted", finished_at=run["finished_at"] or info["finished_at"])
            self.store.write_scan(info)
        self._scans[sid] = scan

    # ------------------------------------------------------------ API

    def create(self, body) -> dict:
        spec = parse_spec(body)
        kind = get_kind(spec["kind"])
        grid = Grid(kind.name, spec["grid"], spec["fixed"])
        with self._lock:
            if self._closed:
                raise LabError("the Lab is stopping", "start it again", status=503)
            sid = self.store.new_id(kind.name)
            while sid in self._scans:
                sid = self.store.new_id(kind.name)
            info = {
                "id": sid,
                **spec,
                "model": self.model,
                "status": "queued",
                "total": grid.size,
                "created_at": time.time(),
                "started_at": None,
                "finished_at": None,
                "runs": [],
                "error": "",
            }
            scan = Scan(info, [_new_record(i, p) for i, p in enumerate(grid.points())])
            self._scans[sid] = scan
            self.store.write_scan(info)
            self._flush(scan, force=True)
            self._start(scan, list(range(grid.size)))
        return self.describe(scan)

    def list_scans(self) -> list[dict]:
        with self._lock:
            scans = sorted(self._scans.values(), key=lambda s: s.info["created_at"], reverse=True)
        return [self.describe(s, points=False) for s in scans]

    def get(self, sid: str, points: bool = True) -> dict:
        return self.describe(self._get(sid), points=points)

    def point(self, sid: str, index) -> dict:
        scan = self._get(sid)
        try:
            i = int(index)
        except (TypeError, ValueError):
            i = -1
        if not 0 <= i < len(scan.points):
            raise LabError(
                f"scan '{sid}' has no point {index!r}", f"points are 0 .. {len(scan.points) - 1}", status=404
            )
        with scan.lock:
            rec = dict(scan.points[i])
        rec["files"] = self.store.point_files(sid, i)
        rec["figure"] = next((f for f in scan.kind.artifacts if f.endswith(".png") and f in rec["files"]), None)
        return rec

    def point_file(self, sid: str, index: int, name: str) -> Path:
        self._get(sid)
        return self.store.point_file(sid, index, name)

    def results_path(self, sid: str, ext: str) -> Path:
        scan = self._get(sid)
        self._flush(scan, force=True)
        return self.store.root / sid / f"results.{ext}"

    def cancel(self, sid: str) -> dict:
        scan = self._get(sid)
        with scan.lock:
            if scan.status not in ("queued", "running"):
                raise LabError(
                    f"scan '{sid}' is {scan.status}, not running",
                    "only a queued or running scan can be cancelled",
                    status=409,
                )
            scan.stop_reason = "cancelled"
            scan.cancel.set()
        self._join(scan, 30)
        return self.describe(scan)

    def resume(self, sid: str, body: dict | None = None) -> dict:
        """Run the scan's unfinished points again (``retry_errors``: also those that ended in error).

        ``body`` may change ``executor``, ``workers``, ``address`` for this run."""
        body = body or {}
        if not isinstance(body, dict):
            raise LabError(
                "the body must be a JSON object or empty",
                '{"retry_errors": true} also reruns points that ended in error',
            )
        allowed = ("retry_errors", "executor", "workers", "address")
        unknown = [k for k in body if k not in allowed]
        if unknown:
            raise LabError(f"unknown field {unknown[0]!r}", f"accepted: {', '.join(allowed)}")
        scan = self._get(sid)
        retry = bool(body.get("retry_errors", False))
        with self._lock, scan.lock:
            if scan.status in ("queued", "running"):
                raise LabError(
                    f"scan '{sid}' is already {scan.status}", "cancel it first, or wait for it to end", status=409
                )
            if any(k in body for k in ("executor", "workers", "address")):
                ex = body.get("executor", scan.info["executor"])
                ex, workers, address = check_executor(
                    ex,
                    body.get("workers", scan.info["workers"]),
                    body.get("address", scan.info["address"] if ex == "ray" else None),
                )
                scan.info.update(executor=ex, workers=workers, address=address)
            skip = ("done",) if retry else FINISHED
            todo = [p["index"] for p in scan.points if p["status"] not in skip]
            if not todo:
                raise LabError(
                    f"scan '{sid}' has no unfinished points",
                    '{"retry_errors": true} reruns the points that ended in error',
                    status=409,
                )
            scan.cancel = threading.Event()
            scan.stop_reason = "cancelled"
            for i in todo:
                scan.points[i].update(status="pending", error="", output_tail="")
            scan.info.update(status="queued", finished_at=None, error="")
            self.store.write_scan(scan.info)
            self._start(scan, todo)
        return self.describe(scan)

    def wait(self, sid: str, timeout: float | None = None) -> dict:
        """Block until the scan's current run ends (for scripts and tests)."""
        scan = self._get(sid)
        self._join(scan, timeout)
        return self.describe(scan)

    def shutdown(self, timeout: float = 20.0) -> None:
        """Stop every running scan as ``interrupted`` (its running points are killed); they resume later."""
        with self._lock:
            self._closed = True
            scans = list(self._scans.values())
        for s in scans:
            with s.lock:
                if s.status in ("queued", "running"):
                    s.stop_reason = "interrupted"
                    s.cancel.set()
        deadline = time.monotonic() + timeout
        for s in scans:
            self._join(s, max(0.1, deadline - time.monotonic()))

    # ------------------------------------------------------------ running

    def _get(self, sid: str) -> Scan:
        with self._lock:
            scan = self._scans.get(sid)
        if scan is None:
            raise LabError(f"no scan '{sid}'", "GET /api/scans lists the scans", status=404)
        return scan

    @staticmethod
    def _join(scan: Scan, timeout) -> None:
        t = scan.thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    def _start(self, scan: Scan, indices: list[int]) -> None:
        scan.thread = threading.Thread(target=self._run, args=(scan, indices), name=f"scan-{scan.id}", daemon=True)
        scan.thread.start()

    def _run(self, scan: Scan, indices: list[int]) -> None:
        info, kind = scan.info, scan.kind
        jobs = [
            PointJob(
                i,
                kind.point_ref,
                scan.points[i]["params"],
                str(point_dir(self.store.root / scan.id, i)),
                info["timeout_s"],
                info.get("model"),
            )
            for i in indices
        ]
        run = {
            "started_at": time.time(),
            "finished_at": None,
            "status": "running",
            "points": len(indices),
            "executor": info["executor"],
            "workers": info["workers"],
        }
        with scan.lock:
            scan.run_t0, scan.run_indices, scan.run_finished = time.monotonic(), set(indices), 0
            info["status"] = "running"
            info["started_at"] = info["started_at"] or run["started_at"]
            info["runs"].append(run)
            self.store.write_scan(info)
        try:
            if not scan.cancel.is_set():
                make_executor(info["executor"], info["workers"], info.get("address")).run(
                    jobs, lambda i: self._on_start(scan, i), lambda i, r: self._on_finish(scan, i, r), scan.cancel
                )
        except Exception as e:  # the executor itself failed (Ray could not start, ...)
            with scan.lock:
                info["error"] = f"{type(e).__name__}: {e}"[:2000]
        with scan.lock:
            for p in scan.points:
                if p["status"] == "running":  # an executor that lost track of a point
                    p.update(status="cancelled", error="the executor stopped while this point ran")
            unfinished = any(p["status"] not in FINISHED for p in scan.points)
            if scan.cancel.is_set():
                status = scan.stop_reason
            elif info["error"]:
                status = "failed"
            else:
                status = "interrupted" if unfinished else "done"
            info["status"] = run["status"] = status
            info["finished_at"] = run["finished_at"] = time.time()
            self.store.write_scan(info)
        self._flush(scan, force=True)

    def _on_start(self, scan: Scan, i: int) -> None:
        with scan.lock:
            rec = scan.points[i]
            rec.update(status="running", started_at=time.time(), finished_at=None, attempts=rec["attempts"] + 1)
            self.store.write_point(scan.id, rec)

    def _on_finish(self, scan: Scan, i: int, res: dict) -> None:
        with scan.lock:
            rec = scan.points[i]
            rec.update(
                {
                    k: res.get(k)
                    for k in (
                        "status",
                        "metrics",
                        "wall_s",
                        "compute_s",
                        "error",
                        "output_tail",
                        "exit_code",
                        "finished_at",
                    )
                }
            )
            rec["metrics"] = {k: v for k, v in (rec["metrics"] or {}).items() if v is None or isinstance(v, SCALARS)}
            if i in scan.run_indices:
                scan.run_finished += 1
            self.store.write_point(scan.id, rec)
        self._flush(scan)

    # ------------------------------------------------------------ results

    def _flush(self, scan: Scan, force: bool = False) -> None:
        """Rewrite results.csv/json now, or at most every FLUSH_S while points finish."""
        with scan.flush_lock:
            now = time.monotonic()
            if not force and now - scan.last_flush < FLUSH_S:
                if scan.flush_timer is None:
                    scan.flush_timer = threading.Timer(FLUSH_S, self._flush, args=(scan, True))
                    scan.flush_timer.daemon = True
                    scan.flush_timer.start()
                return
            if scan.flush_timer is not None and scan.flush_timer is not threading.current_thread():
                scan.flush_timer.cancel()
            scan.flush_timer = None
            scan.last_flush = now
            with scan.lock:
                table = results_table(scan.info, scan.points, scan.kind)
            self.store.write_results(scan.id, table)

    def describe(self, scan: Scan, points: bool = True) -> dict:
        """What GET /api/scans/<id> returns: spec, status, progress and ETA, and (``points``) every point."""
        kind = scan.kind
        with scan.lock:
            info = dict(scan.info)
            counts = scan.counts()
            total = len(scan.points)
            finished = counts["done"] + counts["error"]
            eta = elapsed = None
            if info["status"] == "running":
                elapsed = time.monotonic() - scan.run_t0
                left = sum(1 for i in scan.run_indices if scan.points[i]["status"] in ("pending", "running"))
                if scan.run_finished:
                    eta = elapsed / scan.run_finished * left
            out = {
                **info,
                "title": kind.title,
                "axes": [a for a, v in info["grid"].items() if len(v) > 1]
                + [a for a, v in info["grid"].items() if len(v) == 1],
                "metrics": [{"key": m.key, "label": m.label, "unit": m.unit} for m in kind.metrics],
                "heat_metric": kind.heat_metric,
                "pass_key": kind.pass_key,
                "counts": counts,
                "done": finished,
                "total": total,
                "progress": finished / total if total else 1.0,
                "eta_s": round(eta, 1) if eta is not None else None,
                "elapsed_s": round(elapsed, 1) if elapsed is not None else None,
            }
            if points:
                out["summary"] = kind.summarize(scan.points) if kind.summarize else {}
                out["points"] = [
                    {
                        k: p[k]
                        for k in ("index", "params", "status", "metrics", "wall_s", "compute_s", "error", "attempts")
                    }
                    for p in scan.points
                ]
        return out
