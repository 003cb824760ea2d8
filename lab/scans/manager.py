"""The scan manager: validates a scan, queues it, runs it in a background thread, reports, cancels, resumes.

One :class:`ScanManager` per Lab (the web layer makes it in ``init_app``); ``experiments/`` use the
same class. Every scan lives on disk (:mod:`lab.scans.store`), so a new manager on the same
folder sees the old scans: those that were queued or running when the Lab stopped come back as
``interrupted`` and :meth:`ScanManager.resume` runs only the points not yet finished.

At most ``max_running`` scans run at a time (default 1; the Lab runs several, see
``lab.web.scans_page.MAX_RUNNING``: on the local warm pool the running scans share its workers
point by point, so more of them take no more cores); the others wait as ``queued`` with their
place in the queue and start by themselves, oldest first, when a running one ends.

Scan status: queued -> running -> done | cancelled | interrupted | failed (the executor itself
failed, e.g. Ray could not start). Point status: pending -> running -> done | error | cancelled |
interrupted (see :mod:`lab.scans.points`).

A search scan (``"search"`` in the spec, :mod:`lab.scans.search`) has no fixed points: its run goes in
rounds, each asking every line of the other parameters for its next bisection value and running those
points in parallel; the detail carries each line's ``thresholds`` bracket. :meth:`ScanManager.refine`
adds points to a finished sweep along its PASS/FAIL boundary. Points a search or a refine adds are kept
in scan.json's ``extra`` (their params), after the grid's.

The detail (:meth:`ScanManager.describe`) lists no points unless asked (a page of them, or every one for
a small scan): it carries the points as columns (:func:`lab.scans.points.point_table`), computed once
per change of a point and, while a scan runs, at most every :data:`SUMMARY_S`.

A scan launched with ``"record": true`` asks each point for its recording (``recording.mcap`` in its folder,
:mod:`lab.scans.recording`); :meth:`ScanManager.point_recording` finds it for the replay page.

A cancel returns only once the run has recorded each of its running points (``cancelled``) and
the scan's final status; :meth:`ScanManager.shutdown` (the Lab stopping) does the same with
``interrupted``, on disk, and kills each point's process group.
"""

import atexit
import threading
import time
from collections import deque
from pathlib import Path

from lab.errors import LabError
from lab.scans.executors import PointJob, make_executor
from lab.scans.figures import drawable, ensure_figure
from lab.scans.kinds import MAX_POINTS, Grid
from lab.scans.points import ACTIVE, FINISHED, Outcome, Point, PointStatus, ScanStatus, point_table, summary_records
from lab.scans.recording import FLAG as RECORD_FLAG
from lab.scans.recording import RECORDING
from lab.scans.registry import KINDS, get_kind
from lab.scans.search import boundary_midpoints, next_value, parse_search, points_left, threshold
from lab.scans.spec import SPEC_KEYS, parse_refine, parse_resume, parse_spec
from lab.scans.store import ScanStore, point_dir, results_table

__all__ = ["SPEC_KEYS", "Scan", "ScanManager", "parse_spec"]

# Lock order: ScanManager._lock -> Scan.flush_lock -> Scan.lock (results are flushed outside Scan.lock).
FLUSH_S = 0.5  # results.* are rewritten at most this often while points finish [s] (per 1,000 points)
STOP_JOIN_S = 60.0  # longest a cancel or stop waits for a run to record its points (executors bound theirs lower) [s]
INLINE_POINTS = 100  # GET /api/scans/<id> lists the points of a scan this small unasked (older clients read them)
MAX_PAGE = 1000  # the most points one page of GET /api/scans/<id>?points=1 holds
SUMMARY_S = 0.5  # a running scan's summary and point table are recomputed at most this often [s]


def param_key(params: dict) -> tuple:
    """A hashable form of a parameter dict (the same for any key order)."""
    return tuple(sorted(params.items()))


class Scan:
    """The in-memory state of one scan; ``lock`` guards ``points`` and ``info``."""

    def __init__(self, info: dict, points: list[Point], kind):
        self.info = info  # what scan.json holds
        self.points = points  # one Point per grid point, by index, then those a search or a refine added
        self.kind = kind
        self.search = parse_search(kind, info["search"], ()) if info.get("search") else None
        self.lines = Grid(kind.name, info["grid"], info["fixed"]).points() if self.search else []
        self.version = 0  # bumped on every change of a point: the detail's tables are cached per version
        self.cached: tuple = (-1, None)
        self.lock = threading.RLock()
        self.flush_lock = threading.Lock()
        self.cancel = threading.Event()
        self.stop_reason = ScanStatus.CANCELLED
        self.thread: threading.Thread | None = None
        self.gen = 0  # which run the executor callbacks belong to; a run abandoned by a stop is ignored
        self.todo: list[int] = []  # the indices of the run waiting in the queue
        self.run_t0 = 0.0  # monotonic start of the current run
        self.run_indices: set = set()
        self.run_finished = 0
        self.last_flush = 0.0
        self.flush_timer: threading.Timer | None = None

    @property
    def id(self) -> str:
        return self.info["id"]

    @property
    def status(self) -> ScanStatus:
        return ScanStatus(self.info["status"])

    def set_status(self, status: ScanStatus) -> None:
        self.info["status"] = status.value

    def set_point(self, i: int, point: Point) -> None:
        self.points[i] = point
        self.version += 1

    def add_points(self, params: list[dict]) -> list[int]:
        """Append points (a search's next steps, a refine's midpoints); their params go to scan.json's
        ``extra`` (the caller writes it). The new indices."""
        first = len(self.points)
        extra = self.info.setdefault("extra", [])
        for k, prm in enumerate(params):
            self.points.append(Point(first + k, prm))
            extra.append(prm)
        self.info["total"] = len(self.points)
        self.version += 1
        return list(range(first, len(self.points)))

    def line_outcomes(self) -> list[tuple[dict, dict, dict]]:
        """Per search line: (its params, value -> passed over its done points, value -> its Point)."""
        s, key = self.search, self.kind.pass_key
        by_line: dict[tuple, dict] = {}
        for p in self.points:
            line = {k: v for k, v in p.params.items() if k != s.param}
            by_line.setdefault(param_key(line), {})[p.params[s.param]] = p
        out = []
        for line in self.lines:
            have = by_line.get(param_key(line), {})
            outcomes = {
                v: bool(p.metrics[key]) for v, p in have.items() if p.status == PointStatus.DONE and key in p.metrics
            }
            out.append((line, outcomes, have))
        return out

    def search_step(self) -> tuple[list[int], list[dict]]:
        """Ask every line for its next value (caller holds ``lock``): (indices of points to run again, params of
        new points). A line whose next point ended in error waits for a retry."""
        rerun, new = [], []
        for line, outcomes, have in self.line_outcomes():
            v = next_value(self.search, outcomes)
            if v is None:
                continue
            p = have.get(v)
            if p is None:
                new.append({**line, self.search.param: v})
            elif p.status not in FINISHED:
                rerun.append(p.index)
        return rerun, new

    def thresholds(self) -> tuple[list[dict], int]:
        """Each search line's bracket (:func:`lab.scans.search.threshold`) and the points all lines may still take."""
        rows, left = [], 0
        for line, outcomes, have in self.line_outcomes():
            v = next_value(self.search, outcomes)
            stuck = have.get(v) if v is not None else None
            error = stuck.error if stuck is not None and stuck.status == PointStatus.ERROR else ""
            rows.append(threshold(self.search, line, outcomes, error, points=len(have)))
            left += 0 if error else points_left(self.search, outcomes)
        return rows, left

    def counts(self) -> dict:
        c = dict.fromkeys((s.value for s in PointStatus), 0)
        for p in self.points:
            c[p.status.value] += 1
        return c


class ScanManager:
    """All scans under ``<results_dir>/scans``; points use the robot at ``model`` (None = built-in Q1).

    ``kinds``: the name -> kind table (default :data:`lab.scans.registry.KINDS`); ``max_running``:
    how many scans run at once, the rest wait as ``queued``."""

    def __init__(
        self, results_dir: str | Path, model: str | None = None, kinds: dict | None = None, max_running: int = 1
    ):
        if isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1:
            raise LabError(f"max_running must be an integer >= 1, got {max_running!r}", "1 runs one scan at a time")
        self.store = ScanStore(Path(results_dir) / "scans")
        self.model = str(model) if model else None
        self.kinds = KINDS if kinds is None else kinds
        self.max_running = max_running
        self._scans: dict[str, Scan] = {}
        self._lock = threading.RLock()  # guards _scans, _running, _queue, _closed
        self._running: set[str] = set()
        self._queue: deque[Scan] = deque()
        self._closed = False
        for sid in self.store.ids():
            try:
                self._load(sid)
            except (OSError, ValueError, KeyError, TypeError, LabError):
                continue  # a damaged or foreign folder: not shown
        atexit.register(self.shutdown)

    # ------------------------------------------------------------ loading

    def _load(self, sid: str) -> None:
        info = self.store.read_scan(sid)
        kind = get_kind(info["kind"], self.kinds)
        grid = [] if info.get("search") else Grid(info["kind"], info["grid"], info["fixed"]).points()
        records = self.store.read_points(sid)
        points = []
        for i, params in enumerate(grid + info.get("extra", [])):
            p = records.get(i) or Point(i, params)
            if p.status == PointStatus.RUNNING:  # the Lab was killed while it ran
                p = p.cut_off(PointStatus.INTERRUPTED, "interrupted: the Lab stopped while this point ran")
                self.store.write_point(sid, p)
            points.append(p)
        if ScanStatus(info["status"]) in ACTIVE:  # the Lab was killed before it could say so
            info["status"] = ScanStatus.INTERRUPTED.value
            info["finished_at"] = info.get("finished_at") or time.time()
            for run in info["runs"]:
                if run["status"] == ScanStatus.RUNNING:
                    run.update(
                        status=ScanStatus.INTERRUPTED.value, finished_at=run["finished_at"] or info["finished_at"]
                    )
            self.store.write_scan(info)
        self._scans[sid] = Scan(info, points, kind)

    # ------------------------------------------------------------ API

    def create(self, body) -> dict:
        spec = parse_spec(body, self.kinds)
        kind = get_kind(spec["kind"], self.kinds)
        grid = Grid(kind.name, spec["grid"], spec["fixed"])
        points = [] if spec["search"] else grid.points()  # a search makes its points as it goes
        with self._lock:
            self._check_open()
            sid = self.store.new_id(kind.name)
            while sid in self._scans:
                sid = self.store.new_id(kind.name)
            info = {
                "id": sid,
                **spec,
                "model": self.model,
                "status": ScanStatus.QUEUED.value,
                "total": len(points),
                "extra": [],
                "created_at": time.time(),
                "started_at": None,
                "finished_at": None,
                "runs": [],
                "error": "",
            }
            scan = Scan(info, [Point(i, p) for i, p in enumerate(points)], kind)
            self._scans[sid] = scan
            self.store.write_scan(info)
            self._flush(scan, force=True)
            self._submit(scan, list(range(len(points))))
        return self.describe(scan)

    def list_scans(self) -> list[dict]:
        with self._lock:
            scans = sorted(self._scans.values(), key=lambda s: s.info["created_at"], reverse=True)
        return [self.describe(s, points=False, detail=False) for s in scans]

    def get(self, sid: str, points: bool | tuple = True) -> dict:
        """The scan's detail; ``points``: True every point, False none, ``(offset, limit)`` one page."""
        return self.describe(self._get(sid), points=points)

    def get_page(self, sid: str, query: dict) -> dict:
        """GET /api/scans/<id> with its query (``points``, ``offset``, ``limit``, all optional strings).

        Points come only on request (``points=1``: a page of at most :data:`MAX_PAGE` from ``offset``),
        except for a scan of at most :data:`INLINE_POINTS` points, which lists them unless ``points=0``."""
        scan = self._get(sid)
        want = query.get("points")
        if want not in (None, "0", "1", "true", "false"):
            raise LabError(f"points must be 0 or 1, got {str(want)[:30]!r}", "points=1&offset=0&limit=100")
        offset = _int_arg(query, "offset", 0, 0, MAX_POINTS)
        limit = _int_arg(query, "limit", MAX_PAGE, 1, MAX_PAGE)
        if want is None and ("offset" in query or "limit" in query):
            want = "1"
        if want is None:
            return self.describe(scan, points=len(scan.points) <= INLINE_POINTS)
        if want in ("0", "false"):
            return self.describe(scan, points=False)
        return self.describe(scan, points=(offset, limit))

    def point(self, sid: str, index) -> dict:
        scan = self._get(sid)
        i = index if isinstance(index, int) and not isinstance(index, bool) else -1
        if not 0 <= i < len(scan.points):
            raise LabError(
                f"scan '{sid}' has no point {str(index)[:30]}", f"points are 0 .. {len(scan.points) - 1}", status=404
            )
        with scan.lock:
            rec = scan.points[i].to_dict()
            status = scan.points[i].status
        on_disk = self.store.point_files(sid, i)
        rec["files"] = sorted({*on_disk, *drawable(scan.kind, status)})  # a lazy figure is drawn when opened
        rec["figure"] = next((f for f in scan.kind.artifacts if f.endswith(".png") and f in rec["files"]), None)
        return rec

    def open_point_file(self, sid: str, index: int, name: str):
        """``(file object, name)`` of one file of a point; never a symlink or anything outside its folder."""
        scan = self._get(sid)
        if not 0 <= index < len(scan.points):
            raise LabError(f"scan '{sid}' has no point {index}", f"points are 0 .. {len(scan.points) - 1}", 404)
        if name in scan.kind.figures and self.store.point_files(sid, index):  # its folder is a real one of this store
            ensure_figure(scan.kind, scan.points[index].status, point_dir(self.store.root / sid, index), name)
        return self.store.open_point_file(sid, index, name)

    def point_recording(self, sid: str, index: int) -> Path:
        """The recording of point ``index`` (``recording.mcap``: a regular file in the point's folder, never a link;
        :mod:`lab.scans.recording`); a 404 that says why for no such scan, point or recording."""
        scan = self._get(sid)
        if not 0 <= index < len(scan.points):
            raise LabError(f"scan '{sid}' has no point {index}", f"points are 0 .. {len(scan.points) - 1}", 404)
        if RECORDING not in self.store.point_files(sid, index):
            if not scan.info.get("record"):
                hint = 'the scan was launched without "record": launch it with "record": true (keep recordings)'
            else:
                hint = f"the point is {scan.points[index].status.value}; a finished point has its recording"
            raise LabError(f"point {index} of scan '{sid}' has no recording", hint, 404)
        f, _ = self.store.open_point_file(sid, index, RECORDING)  # the store's checks: a regular file, no link
        f.close()
        return point_dir(self.store.root / sid, index) / RECORDING

    def results_path(self, sid: str, ext: str) -> Path:
        scan = self._get(sid)
        self._flush(scan, force=True)
        return self.store.results_file(sid, ext)

    def refine(self, sid: str, body=None) -> dict:
        """Add points along the PASS/FAIL boundary of a finished sweep and run them: the midpoint between each
        two neighbouring done points (along one number axis, the other parameters equal) of which one passed
        and the other failed. ``body`` may name the ``axes`` to refine (default: every number axis)."""
        scan = self._get(sid)
        with self._lock, scan.lock:
            self._check_open()
            kind = scan.kind
            if scan.status in ACTIVE:
                raise LabError(f"scan '{sid}' is {scan.status}", "refine it once it has ended", status=409)
            axes = parse_refine(body, kind, scan.info, bool(scan.search))
            verdicts = [
                (p.params, bool(p.metrics[kind.pass_key]))
                for p in scan.points
                if p.status == PointStatus.DONE and kind.pass_key in p.metrics
            ]
            known = {param_key(p.params) for p in scan.points}
            new = [m for m in boundary_midpoints(verdicts, [kind.param(a) for a in axes]) if param_key(m) not in known]
            if not new:
                raise LabError(
                    f"scan '{sid}' has no PASS/FAIL boundary to refine along {', '.join(axes)}",
                    "refine adds the midpoint of two neighbouring done points where one passed and the other failed",
                    status=409,
                )
            if len(scan.points) + len(new) > MAX_POINTS:
                raise LabError(
                    f"refining adds {len(new):,} points to {len(scan.points):,}, more than {MAX_POINTS:,}",
                    "refine fewer axes",
                )
            todo = scan.add_points(new)
            self._requeue(scan)
            self._submit(scan, todo)
        out = self.describe(scan, points=False)
        out["added"] = len(todo)
        return out

    def cancel(self, sid: str) -> dict:
        """Stop a queued or running scan; returns once every point it was running is recorded ``cancelled``."""
        scan = self._get(sid)
        with self._lock, scan.lock:
            if scan.status not in ACTIVE:
                raise LabError(
                    f"scan '{sid}' is {scan.status}, not queued or running",
                    "only a queued or running scan can be cancelled",
                    status=409,
                )
            queued = scan in self._queue
            if queued:  # never started: nothing to kill
                self._queue.remove(scan)
                self._end_queued(scan, ScanStatus.CANCELLED)
            else:
                scan.stop_reason = ScanStatus.CANCELLED
                scan.cancel.set()
        if queued:
            self._flush(scan, force=True)
        else:
            self._stop_run(scan, STOP_JOIN_S)
        return self.describe(scan)

    def resume(self, sid: str, body: dict | None = None) -> dict:
        """Run the scan's unfinished points again (``retry_errors``: also those that ended in error).

        ``body`` may change ``executor``, ``workers``, ``address`` for this run."""
        scan = self._get(sid)
        with self._lock, scan.lock:
            retry, changes = parse_resume(body, scan.info)
            self._check_open()
            if scan.status in ACTIVE:
                raise LabError(
                    f"scan '{sid}' is already {scan.status}", "cancel it first, or wait for it to end", status=409
                )
            skip = (PointStatus.DONE,) if retry else FINISHED
            todo = [p.index for p in scan.points if p.status not in skip]
            if not todo and not (scan.search and scan.search_step()[1]):  # a search may have lines to go
                raise LabError(
                    f"scan '{sid}' has no unfinished points",
                    '{"retry_errors": true} reruns the points that ended in error',
                    status=409,
                )
            scan.info.update(changes)
            for i in todo:
                scan.set_point(i, scan.points[i].reset())
            self._requeue(scan)
            self._submit(scan, todo)
        return self.describe(scan)

    def wait(self, sid: str, timeout: float | None = None) -> dict:
        """Block until the scan is no longer queued or running (for scripts and tests), or ``timeout`` [s]."""
        scan = self._get(sid)
        deadline = None if timeout is None else time.monotonic() + timeout
        while scan.status in ACTIVE:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            t = scan.thread
            if t is not None and t.is_alive():
                t.join(0.2 if left is None else min(0.2, left))
            else:
                time.sleep(0.05)  # queued: its thread starts when a slot frees
        return self.describe(scan)

    def shutdown(self, timeout: float = 20.0) -> None:
        """The Lab is stopping: every queued or running scan ends ``interrupted`` on disk (its running
        points too, their process groups killed); they resume later. Idempotent."""
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            self._queue.clear()
            for s in queued:
                self._end_queued(s, ScanStatus.INTERRUPTED)
            running = [self._scans[sid] for sid in self._running]
            for s in running:
                with s.lock:
                    s.stop_reason = ScanStatus.INTERRUPTED
                    s.cancel.set()
        for s in queued:
            self._flush(s, force=True)
        deadline = time.monotonic() + timeout
        for s in running:
            self._stop_run(s, max(0.1, deadline - time.monotonic()))

    # ------------------------------------------------------------ queue and runs

    def _check_open(self) -> None:
        if self._closed:
            raise LabError("the Lab is stopping", "start it again", status=503)

    def _get(self, sid: str) -> Scan:
        with self._lock:
            scan = self._scans.get(sid) if isinstance(sid, str) else None
        if scan is None:
            raise LabError(f"no scan '{str(sid)[:80]}'", "GET /api/scans lists the scans", status=404)
        return scan

    def _requeue(self, scan: Scan) -> None:
        """A scan that ended is about to run again (resume, refine): queued, on disk (caller holds both locks)."""
        scan.cancel = threading.Event()
        scan.stop_reason = ScanStatus.CANCELLED
        scan.info.update(status=ScanStatus.QUEUED.value, finished_at=None, error="")
        self.store.write_scan(scan.info)

    def _submit(self, scan: Scan, indices: list[int]) -> None:
        """Start the run now when a slot is free, else queue it (caller holds ``_lock``)."""
        scan.todo = indices
        if len(self._running) < self.max_running:
            self._start(scan)
        else:
            self._queue.append(scan)

    def _start(self, scan: Scan) -> None:
        scan.gen += 1
        self._running.add(scan.id)
        scan.thread = threading.Thread(
            target=self._run, args=(scan, scan.gen, scan.todo), name=f"scan-{scan.id}", daemon=True
        )
        scan.thread.start()

    def _release(self, scan: Scan) -> None:
        """The run of ``scan`` is over: free its slot and start the oldest queued scan (caller holds ``_lock``)."""
        self._running.discard(scan.id)
        while self._queue and len(self._running) < self.max_running and not self._closed:
            self._start(self._queue.popleft())

    def _end_queued(self, scan: Scan, status: ScanStatus) -> None:
        """A queued scan ends without having run (the caller flushes its results afterwards)."""
        with scan.lock:
            scan.set_status(status)
            scan.info["finished_at"] = time.time()
            self.store.write_scan(scan.info)

    def _stop_run(self, scan: Scan, timeout: float) -> None:
        """Wait for the stopped run to record its points; a run that does not in ``timeout`` is abandoned:
        its running points and the scan get the stop status here, and its late callbacks are ignored."""
        t = scan.thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
        with self._lock, scan.lock:
            if t is None or not t.is_alive() or scan.status not in ACTIVE:
                return
            scan.gen += 1  # the old run's on_start/on_finish/end no longer count
            self._finish_run(scan, scan.stop_reason, "the run did not stop in time; its points were cut off")
            self._release(scan)
        self._flush(scan, force=True)

    def _jobs(self, scan: Scan, indices: list[int]) -> list[PointJob]:
        """The executor's jobs for ``indices`` (a scan launched with ``record``: each asks for its recording)."""
        info, fn = scan.info, scan.kind.point_ref
        extra = {RECORD_FLAG: True} if info.get("record") else {}
        with scan.lock:
            return [
                PointJob(
                    i,
                    fn,
                    {**scan.points[i].params, **extra},
                    str(point_dir(self.store.root / scan.id, i)),
                    info["timeout_s"],
                    info.get("model"),
                )
                for i in indices
            ]

    def _execute(self, scan: Scan, gen: int, indices: list[int]) -> None:
        """Run ``indices`` on the scan's executor; a search runs in rounds: every line that is not done gets its
        next point, the round runs (lines in parallel across the workers), and the outcomes decide the next round."""
        info = scan.info
        executor = make_executor(info["executor"], info["workers"], info.get("address"))

        def run(todo: list[int]) -> None:
            executor.run(
                self._jobs(scan, todo),
                lambda i: self._on_start(scan, gen, i),
                lambda i, r: self._on_finish(scan, gen, i, r),
                scan.cancel,
            )

        if not scan.search:
            run(indices)
            return
        while not scan.cancel.is_set():
            with scan.lock:
                if gen != scan.gen:
                    return
                rerun, new = scan.search_step()
                todo = rerun + scan.add_points(new)
                scan.run_indices.update(todo)
                if new:
                    self.store.write_scan(info)
            if not todo:
                return
            run(todo)

    def _run(self, scan: Scan, gen: int, indices: list[int]) -> None:
        info = scan.info
        with scan.lock:
            if gen != scan.gen:
                return
            scan.run_t0, scan.run_indices, scan.run_finished = time.monotonic(), set(indices), 0
            scan.set_status(ScanStatus.RUNNING)
            info["started_at"] = info["started_at"] or time.time()
            info["runs"].append(
                {
                    "started_at": time.time(),
                    "finished_at": None,
                    "status": ScanStatus.RUNNING.value,
                    "points": len(indices),
                    "executor": info["executor"],
                    "workers": info["workers"],
                }
            )
            self.store.write_scan(info)
        error = ""
        try:
            if not scan.cancel.is_set():
                self._execute(scan, gen, indices)
        except Exception as e:  # the executor itself failed (Ray could not start, ...)
            error = f"{type(e).__name__}: {e}"[:2000]
        with self._lock, scan.lock:
            if gen != scan.gen:  # abandoned by _stop_run, which already recorded the end
                return
            if error:
                info["error"] = error
            if scan.cancel.is_set():
                status = scan.stop_reason
            elif info["error"]:
                status = ScanStatus.FAILED
            elif any(not p.finished for p in scan.points):
                status = ScanStatus.INTERRUPTED
            else:
                status = ScanStatus.DONE
            self._finish_run(scan, status, "the executor stopped while this point ran")
            self._release(scan)
        self._flush(scan, force=True)

    def _finish_run(self, scan: Scan, status: ScanStatus, why: str) -> None:
        """Record the end of the current run as ``status`` (caller holds both locks, then flushes); points
        still running are cut off as cancelled or interrupted."""
        cut = PointStatus.INTERRUPTED if status == ScanStatus.INTERRUPTED else PointStatus.CANCELLED
        for i, p in enumerate(scan.points):
            if p.status == PointStatus.RUNNING:
                scan.set_point(i, p.cut_off(cut, why))
                self.store.write_point(scan.id, scan.points[i])
        scan.set_status(status)
        scan.info["finished_at"] = time.time()
        if scan.info["runs"] and scan.info["runs"][-1]["status"] == ScanStatus.RUNNING:
            scan.info["runs"][-1].update(status=status.value, finished_at=scan.info["finished_at"])
        self.store.write_scan(scan.info)

    def _on_start(self, scan: Scan, gen: int, i: int) -> None:
        with scan.lock:
            if gen != scan.gen:
                return
            scan.set_point(i, scan.points[i].started())
            self.store.write_point(scan.id, scan.points[i])

    def _on_finish(self, scan: Scan, gen: int, i: int, outcome: Outcome) -> None:
        with scan.lock:
            if gen != scan.gen:
                return
            status = None
            if outcome.status == PointStatus.CANCELLED and scan.stop_reason == ScanStatus.INTERRUPTED:
                status = PointStatus.INTERRUPTED  # stopped because the Lab is stopping, not by a cancel
            scan.set_point(i, scan.points[i].ended(outcome, status))
            if i in scan.run_indices:
                scan.run_finished += 1
            self.store.write_point(scan.id, scan.points[i])
        self._flush(scan)

    # ------------------------------------------------------------ results

    def _flush(self, scan: Scan, force: bool = False) -> None:
        """Rewrite results.csv/json now, or at most every FLUSH_S while points finish."""
        with scan.flush_lock:
            now = time.monotonic()
            every = FLUSH_S * max(1.0, len(scan.points) / 1000)  # a 10,000-point table is rewritten every 5 s
            if not force and now - scan.last_flush < every:
                if scan.flush_timer is None:
                    scan.flush_timer = threading.Timer(every, self._flush, args=(scan, True))
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

    def queue_position(self, scan: Scan) -> int | None:
        """1 for the next queued scan to start, ...; None when ``scan`` is not queued."""
        with self._lock:
            for n, s in enumerate(self._queue, 1):
                if s is scan:
                    return n
        return None

    def describe(self, scan: Scan, points: bool | tuple = True, detail: bool = True) -> dict:
        """What GET /api/scans/<id> returns: spec, status, counts, progress and ETA; with ``detail`` the kind's
        summary, the points as columns (``table``: :func:`lab.scans.points.point_table`) and, for a search, the
        ``thresholds`` per line; ``points``: True every point, False none, ``(offset, limit)`` one page."""
        kind = scan.kind
        position = self.queue_position(scan)
        with scan.lock:
            info = {k: v for k, v in scan.info.items() if k != "extra"}
            counts = scan.counts()
            total = len(scan.points)
            finished = counts["done"] + counts["error"]
            extras = self._details(scan) if detail or scan.search else {}
            eta = elapsed = None
            if scan.status == ScanStatus.RUNNING:
                elapsed = time.monotonic() - scan.run_t0
                if scan.search:
                    left = extras["points_left"] + counts["running"]
                else:
                    left = sum(
                        1
                        for i in scan.run_indices
                        if scan.points[i].status in (PointStatus.PENDING, PointStatus.RUNNING)
                    )
                if scan.run_finished:
                    eta = elapsed / scan.run_finished * left
            if scan.search:  # progress in lines: the number of points is known only at the end
                lines = extras["thresholds"]
                progress = sum(t["status"] not in ("searching",) for t in lines) / len(lines) if lines else 1.0
            else:
                progress = finished / total if total else 1.0
            out = {
                **info,
                "title": kind.title,
                "axes": [a for a, v in info["grid"].items() if len(v) > 1]
                + [a for a, v in info["grid"].items() if len(v) == 1],
                "metrics": [m.to_dict() for m in kind.metrics],
                "heat_metric": kind.heat_metric,
                "pass_key": kind.pass_key,
                "counts": counts,
                "done": finished,
                "total": total,
                "progress": progress,
                "eta_s": round(eta, 1) if eta is not None else None,
                "elapsed_s": round(elapsed, 1) if elapsed is not None else None,
                "queue_position": position,
                "max_running": self.max_running,
            }
            if scan.search:
                out["lines"] = {
                    "total": len(extras["thresholds"]),
                    "done": sum(t["status"] != "searching" for t in extras["thresholds"]),
                }
            if detail:
                out.update(summary=extras["summary"], table=extras["table"])
                if scan.search:
                    out["thresholds"] = extras["thresholds"]
            if points is True:
                out["points"] = [p.public() for p in scan.points]
            elif points:
                offset, limit = points
                out["points"] = [p.public() for p in scan.points[offset : offset + limit]]
                out["points_page"] = {"offset": offset, "limit": limit, "total": total}
        return out

    def _details(self, scan: Scan) -> dict:
        """The summary, point table and thresholds of ``scan`` (caller holds its lock): computed again only when a
        point changed, and while it runs at most every :data:`SUMMARY_S` (a 10,000-point scan polled each second)."""
        version, cached = scan.cached
        now = time.monotonic()
        fresh = version == scan.version or (
            cached is not None and scan.status == ScanStatus.RUNNING and now - cached["at"] < SUMMARY_S
        )
        if fresh:
            return cached
        kind = scan.kind
        out = {
            "at": now,
            "summary": kind.summarize(summary_records(scan.points)) if kind.summarize else {},
            "table": point_table(scan.points, kind),
        }
        out["thresholds"], out["points_left"] = scan.thresholds() if scan.search else ([], 0)
        scan.cached = (scan.version, out)
        return out


def _int_arg(query: dict, name: str, default: int, lo: int, hi: int) -> int:
    """An integer query argument in [lo, hi]; a bad one is a 400 that says what is accepted."""
    raw = query.get(name)
    if raw is None:
        return default
    try:
        v = int(raw)
    except (TypeError, ValueError):
        v = None
    if v is None or not lo <= v <= hi:
        raise LabError(
            f"{name} must be an integer in [{lo}, {hi:,}], got {str(raw)[:30]!r}", "e.g. ?points=1&offset=0&limit=100"
        )
    return v
