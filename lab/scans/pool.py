"""Warm workers: long-lived point processes that imported the engine and loaded the model once, shared fairly.

A worker (``python -m lab.scans.pool``) imports MuJoCo, the controllers and the built-in kinds and
loads the built-in robot when it starts, then runs one point after another, each sent as one JSON
line on a pipe; it answers with one JSON line (the point's numbers, its compute time, the worker's
resident memory). While a point runs, the worker's stdout and stderr go to the point's
``output.log``. A worker is as isolated as the one-process-per-point path it replaces
(:func:`lab.scans.executors.run_point`, see :mod:`lab.scans.isolation`): its own process group, death
with the thread that started it (``PR_SET_PDEATHSIG``) and a guard in its group; after each point it
kills whatever the point started and left running. A worker is killed with its process group and
replaced when its point

* crashes it (exits, dies on a signal): ``error`` "exit status 3: <last line>", as on the cold path;
* overruns its timeout: ``error`` "timed out after 1.5 s";
* leaks: the worker's resident memory grew by more than :data:`LEAK_MB` during the point: ``error``;
* is cancelled (or the Lab stops): ``cancelled``; the kill is what makes a cancel quick.

A point that raises is an ``error`` ("exit status 1: RuntimeError: ...", the cold path's words) and
the worker stays. A worker whose memory grew by :data:`RECYCLE_MB` since it started is replaced after
its point (the point keeps its result), one idle for :data:`IDLE_S` goes.

:class:`WorkerPool` runs the points of every scan of the process on its workers (``shared_pool()``):
each scan run asks for at most ``limit`` points in flight, and a free worker takes the next point
round-robin over the runs that have one waiting, so a long scan never starves a short one started
after it. Workers run at niceness :data:`NICE`: the Lab's live view comes first.
"""

import argparse
import atexit
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from lab.scans import isolation
from lab.scans.kinds import _jsonable
from lab.scans.points import Outcome, PointStatus

REPO = Path(__file__).resolve().parents[2]
PRELOAD = (
    "numpy",
    "mujoco",
    "lab.robots.model",
    "lab.sim.mujoco_engine",
    "lab.control.modes",
    "lab.control.rollout",
    "lab.scans.builtin",
)
NICE = 10  # niceness of the workers (the Lab's own threads keep 0) [nice]
LEAK_MB = 256.0  # a point that grows its worker's resident memory by more than this is an error [MiB]
RECYCLE_MB = 1024.0  # a worker grown this much since it started is replaced after its point [MiB]
IDLE_S = 60.0  # a worker with nothing to do this long goes [s]
START_S = 120.0  # longest a worker may take to import and load before its point is an error [s]
POLL_S = 0.05  # how often a running point's cancel and timeout are checked [s]


@dataclass(frozen=True)
class PointJob:
    """One point to run: its index in the scan, ``module:function``, parameters, folder, timeout [s], model."""

    index: int
    fn: str  # "module:function" of the point function
    params: dict
    out_dir: str
    timeout_s: float
    model: str | None = None


class Worker:
    """The Lab's side of one worker process: its process, a job pipe and a reply pipe.

    Construction starts the process and returns at once; :meth:`wait_ready` waits for its hello."""

    def __init__(self, nice: int = NICE):
        job_r, job_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self._log = tempfile.TemporaryFile()  # what the worker prints outside its points (a failed start)
        cmd = [sys.executable, "-m", "lab.scans.pool", "--jobs", str(job_r), "--replies", str(rep_w)]
        cmd += ["--parent", str(os.getpid()), "--nice", str(nice)]
        try:
            self.proc = subprocess.Popen(
                cmd,
                pass_fds=(job_r, rep_w),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                cwd=str(REPO),
                env=isolation.child_env(),
                start_new_session=True,  # its own process group: a kill takes the worker and all it started
            )
        except BaseException:
            for fd in (job_w, rep_r):
                os.close(fd)
            raise
        finally:
            os.close(job_r)
            os.close(rep_w)
        self._jobs, self._replies = job_w, rep_r
        self._killed = threading.Lock()  # held once killed: its pipes' numbers may be another file's by then
        self._buf = b""
        self.hello: dict | None = None  # {"pid", "guard", "rss_mb"} once started
        self.rss_mb = 0.0  # resident memory after its last point [MiB]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, cancel: threading.Event, timeout: float = START_S) -> str:
        """Wait for the worker's hello: "" when it is ready, "cancelled", or why it could not start."""
        deadline = time.monotonic() + timeout
        while self.hello is None:
            if cancel.is_set():
                return "cancelled"
            left = deadline - time.monotonic()
            if left <= 0:
                return f"the worker did not start in {timeout:g} s"
            msg = self.read(min(POLL_S, left))
            if msg is EOF:
                self.proc.wait(timeout=10)
                self._log.seek(0)
                text = self._log.read()[-isolation.TAIL_CHARS :].decode("utf-8", "replace")
                return f"the worker did not start (exit status {self.proc.returncode}): {isolation.last_line(text)}"
            if msg is not None:
                self.hello = msg
                self.rss_mb = msg["rss_mb"]
        return ""

    def send(self, job: dict) -> None:
        data = (json.dumps(job) + "\n").encode()
        while data:
            data = data[os.write(self._jobs, data) :]

    def read(self, timeout: float):
        """The next reply (a dict), None when none came in ``timeout`` [s], :data:`EOF` when the worker is gone."""
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self._replies], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                return EOF
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        """SIGKILL the worker's process group and reap it; its pipes close. Only the first call acts: closing a
        pipe's number twice could close another worker's pipe that reused it."""
        if not self._killed.acquire(blocking=False):
            return
        isolation.kill_group(self.proc)
        for fd in (self._jobs, self._replies):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()


EOF = object()  # Worker.read: the worker closed its reply pipe (it exited or was killed)


class _Run:
    """One executor run waiting on the pool: its queued jobs, callbacks, cancel and in-flight cap."""

    def __init__(self, jobs, on_start, on_finish, cancel: threading.Event, limit: int):
        self.todo = deque(jobs)
        self.on_start, self.on_finish, self.cancel, self.limit = on_start, on_finish, cancel, limit
        self.inflight = 0
        self.errors: list[BaseException] = []

    @property
    def wants(self) -> bool:
        return bool(self.todo) and self.inflight < self.limit and not self.cancel.is_set() and not self.errors

    @property
    def over(self) -> bool:
        return self.inflight == 0 and (not self.todo or self.cancel.is_set() or bool(self.errors))


class WorkerPool:
    """Warm workers shared by every run (see the module docstring); grows to the largest ``limit`` asked."""

    def __init__(self, nice: int = NICE, leak_mb: float = LEAK_MB, recycle_mb: float = RECYCLE_MB):
        self.nice, self.leak_mb, self.recycle_mb = nice, leak_mb, recycle_mb
        self._cond = threading.Condition()
        self._runs: list[_Run] = []
        self._next_run = 0  # round-robin position in _runs
        self._slots: set[int] = set()  # the slot threads taking points, by number; one worker process each
        self._closed = False
        self.workers: dict[int, Worker] = {}  # by slot, the live worker processes (for tests and the bench)

    def run(self, jobs: list, on_start, on_finish, cancel: threading.Event, limit: int) -> None:
        """Run ``jobs`` (:class:`PointJob`) with at most ``limit`` in flight; returns when
        each has finished or, after ``cancel``, when the running ones are recorded. Same callbacks as the executors."""
        run = _Run(jobs, on_start, on_finish, cancel, max(1, limit))
        with self._cond:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            self._runs.append(run)
            self._grow()
            self._cond.notify_all()
            try:
                while not run.over:
                    self._cond.wait(POLL_S)  # also wakes for a cancel, which sets no condition
                    self._grow()  # a slot that ended (a failed start) is replaced while points are waiting
                    if run.cancel.is_set():
                        self._cond.notify_all()  # slots busy with this run's points look at the cancel
            finally:
                self._runs.remove(run)
                self._next_run = 0
        if run.errors:
            raise run.errors[0]

    def close(self) -> None:
        """Stop every worker (the process is exiting); runs in flight see their points cancelled."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            workers = list(self.workers.values())
        for w in workers:
            w.kill()

    # ------------------------------------------------------------ slots

    def _grow(self) -> None:
        """Start slot threads up to the largest limit of the waiting runs (caller holds _cond)."""
        want = min(max((r.limit for r in self._runs if r.todo), default=0), 256)
        while len(self._slots) < want and not self._closed:
            n = min(set(range(len(self._slots) + 1)) - self._slots)
            self._slots.add(n)
            threading.Thread(target=self._slot, args=(n,), name="scan-worker", daemon=True).start()

    def _take(self):
        """The next (run, job) round-robin over the runs that want a point; None to retire (caller holds _cond)."""
        idle_since = time.monotonic()
        while not self._closed:
            n = len(self._runs)
            for k in range(n):
                run = self._runs[(self._next_run + k) % n]
                if run.wants:
                    self._next_run = (self._next_run + k + 1) % n
                    run.inflight += 1
                    return run, run.todo.popleft()
            if time.monotonic() - idle_since > IDLE_S:
                return None
            self._cond.wait(1.0)
        return None

    def _slot(self, n: int) -> None:
        """One worker's life: take a point, run it, replace the worker when it had to be killed."""
        worker, retired = None, False
        try:
            while True:
                if worker is None and not self._closed:
                    worker = Worker(self.nice)  # warms up while the next point is picked
                    with self._cond:
                        self.workers[n] = worker
                with self._cond:
                    item = self._take()
                    if item is None:  # retired, under the lock: a run that comes now starts a slot of its own
                        self._slots.discard(n)
                        retired = True
                        return
                run, job = item
                try:
                    run.on_start(job.index)
                    outcome, keep = execute(worker, job, run.cancel, self.leak_mb, self.recycle_mb)
                    if not keep:
                        worker.kill()
                        worker = None
                    run.on_finish(job.index, outcome)
                except Exception as e:  # a bug in the callbacks: this run stops, it raises it from run()
                    run.errors.append(e)
                finally:
                    with self._cond:
                        run.inflight -= 1
                        self._cond.notify_all()
        finally:
            if worker is not None:
                worker.kill()
            with self._cond:
                if worker is not None and self.workers.get(n) is worker:
                    del self.workers[n]
                if not retired:  # a retired slot's number may be another slot's by now
                    self._slots.discard(n)


def execute(
    worker: Worker, job: PointJob, cancel: threading.Event, leak_mb: float = LEAK_MB, recycle_mb: float = RECYCLE_MB
) -> tuple[Outcome, bool]:
    """Run ``job`` on ``worker`` (started, maybe not ready yet): (its outcome, whether the worker may run another
    point). A worker that may not has been killed already, or must be."""
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started_at = time.time()
    t0 = time.perf_counter()
    why = worker.wait_ready(cancel)
    if why == "cancelled":
        return Outcome.stopped(PointStatus.CANCELLED, "cancelled while running", started_at=started_at), False
    if why:
        return _failed(out, why, started_at, t0, None), False
    t0 = time.perf_counter()  # the point's timeout and wall time start once its worker is ready
    rss0 = worker.rss_mb
    worker.send({"fn": job.fn, "params": job.params, "out_dir": str(out), "model": job.model})
    reason = reply = None
    while reply is None:
        msg = worker.read(POLL_S)
        if msg is EOF:
            worker.proc.wait(timeout=10)
            code = worker.proc.returncode
            reason = f"killed by signal {_signal_name(-code)}" if code < 0 else f"exit status {code}"
            break
        if msg is not None:
            reply = msg
        elif cancel.is_set():
            worker.kill()  # now, not when the slot gets to it: the cancel returns quickly
            log = isolation.tail(out / "output.log")
            return _ended(PointStatus.CANCELLED, "cancelled while running", log, started_at, t0), False
        elif time.perf_counter() - t0 > job.timeout_s:
            reason = f"timed out after {job.timeout_s:g} s"
            break
    if reply is None:
        worker.kill()
        return _failed(out, reason, started_at, t0, worker.proc.returncode), False
    grown = reply["rss_mb"] - rss0
    worker.rss_mb = reply["rss_mb"]
    if grown > leak_mb:
        reason = f"leaked: the worker's memory grew by {grown:.0f} MiB in this point (bound {leak_mb:g} MiB)"
        return _failed(out, reason, started_at, t0, None, add_line=False), False
    keep = not reply.get("recycle") and worker.rss_mb - worker.hello["rss_mb"] <= recycle_mb
    if not reply["ok"]:
        code = reply["exit_code"]
        reason = f"exit status {code}" + ("" if code else " without a result")
        return _failed(out, reason, started_at, t0, code), keep
    wall = round(time.perf_counter() - t0, 4)
    outcome = Outcome(
        PointStatus.DONE,
        metrics=reply["metrics"],
        compute_s=reply["compute_s"],
        wall_s=wall,
        exit_code=0,
        started_at=started_at,
        finished_at=time.time(),
    )
    return outcome, keep


def _ended(status, error, log, started_at, t0, exit_code=None) -> Outcome:
    wall = round(time.perf_counter() - t0, 4)
    return Outcome(
        status,
        error=error,
        output_tail=log,
        wall_s=wall,
        exit_code=exit_code,
        started_at=started_at,
        finished_at=time.time(),
    )


def _failed(out: Path, reason: str, started_at, t0, exit_code, add_line: bool = True) -> Outcome:
    """An ``error`` outcome: ``reason`` and (``add_line``) the last line the point printed."""
    log = isolation.tail(out / "output.log")
    line = isolation.last_line(log)
    error = f"{reason}: {line}" if add_line and line else reason
    return _ended(PointStatus.ERROR, error, log, started_at, t0, exit_code)


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return str(n)


_shared: WorkerPool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> WorkerPool:
    """The process's one pool, made on first use (workers start when a run first needs them)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = WorkerPool()
            atexit.register(_shared.close)
        return _shared


# ---------------------------------------------------------------- the worker process


def _run_job(job: dict, keep: set[int]) -> dict:
    """Run one point here, its output to its ``output.log``; the reply (ok, metrics or exit code, rss)."""
    out = Path(job["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    log = isolation.fresh_log(out / "output.log")
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    t0 = time.perf_counter()
    reply: dict = {"ok": False, "exit_code": 1}
    try:
        module, name = job["fn"].split(":")
        fn = getattr(importlib.import_module(module), name)
        reply = {"ok": True, "metrics": fn(job["params"], out, job["model"])}
    except SystemExit as e:  # the point asked for the process to end: it ends its worker too
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
        reply = {"ok": False, "exit_code": code, "recycle": True}
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
    reply["compute_s"] = round(time.perf_counter() - t0, 4)
    if isolation.kill_strays(keep):
        _reap()
    reply["rss_mb"] = isolation.rss_mb()
    return reply


def _reap() -> None:
    """Collect the zombies of the strays just killed (the guard, still alive, is never one)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="a warm scan worker (started by lab.scans.pool.WorkerPool)")
    ap.add_argument("--jobs", type=int, required=True, help="fd to read jobs from, one JSON line each")
    ap.add_argument("--replies", type=int, required=True, help="fd to write replies to, one JSON line each")
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--nice", type=int, default=NICE)
    a = ap.parse_args(argv)
    isolation.die_with_parent(a.parent)
    guard = isolation.start_guard() if os.getpgid(0) == os.getpid() else None
    os.environ["LAB_POINT_GUARD"] = str(guard)
    os.nice(a.nice)
    for name in PRELOAD:
        importlib.import_module(name)
    from lab.robots.model import load_robot

    load_robot()  # MuJoCo compiles the built-in model once here, not in the first point
    keep = {os.getpid(), guard}
    replies = os.fdopen(a.replies, "w", buffering=1)
    replies.write(json.dumps({"pid": os.getpid(), "guard": guard, "rss_mb": isolation.rss_mb()}) + "\n")
    with os.fdopen(a.jobs) as jobs:
        for line in jobs:
            reply = _run_job(json.loads(line), keep)
            replies.write(json.dumps(reply, default=_jsonable) + "\n")
            if reply.get("recycle"):
                break


if __name__ == "__main__":
    main()
