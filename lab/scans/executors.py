"""Where scan points run: each point in its own process, from a local pool of threads or as Ray tasks.

:func:`run_point` is the one way a point runs, whatever the executor: a child process
(``python -m lab.scans.executors``) in its own process group, output to ``output.log`` in the
point's folder, killed with its whole group on timeout or cancel. A point that exits non-zero,
dies on a signal or overruns its timeout comes back as ``error`` with the tail of its output.

* :class:`LocalExecutor`: ``workers`` threads (default: the number of cores), each waiting on one
  child process at a time.
* :class:`RayExecutor`: one Ray task per point, each calling :func:`run_point` on a Ray worker;
  ``ray.init(address=...)`` joins a cluster, no address starts a local instance (shut down when
  the last scan using it ends). Cancel force-cancels every task in flight (``ray.cancel(force=True)``
  ends its worker) and waits, bounded, until Ray reports each one ended: it does not rely on the
  KeyboardInterrupt of a plain ``ray.cancel`` reaching the task, which Ray delivers best effort.

A point process dies with whoever started it (``PR_SET_PDEATHSIG``) and forks a small guard in its
own process group that SIGKILLs that group when the point goes, so nothing a point started outlives
it, even when the Lab (or the Ray worker) is killed with SIGKILL.

Both call ``on_start(index)`` when a point starts and ``on_finish(index, outcome)`` when it ends;
``outcome`` is a :class:`~lab.scans.points.Outcome` (status done | error | cancelled).
"""

import argparse
import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.errors import LabError
from lab.scans.kinds import shown
from lab.scans.points import Outcome, PointStatus

REPO = Path(__file__).resolve().parents[2]
TAIL_CHARS = 2000
POLL_S = 0.05
GUARD_POLL_S = 0.1  # how often a point's guard checks that the point is still there [s]
RAY_CANCEL_WAIT_S = 20.0  # longest a cancel waits for Ray to report its force-cancelled tasks [s]
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class PointJob:
    index: int
    fn: str  # "module:function" of the point function
    params: dict
    out_dir: str
    timeout_s: float
    model: str | None = None


def _child_env() -> dict:
    env = dict(os.environ)
    root = str(Path(__import__("lab").__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MPLBACKEND", "Agg")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # one core per point: the pool is the parallelism
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the point's process group (the point and anything it started), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _open_nofollow(path: Path, flags: int) -> int:
    """``os.open`` that refuses a symlink (a link planted in a point folder is never followed)."""
    return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)


def tail(path: Path, n: int = TAIL_CHARS) -> str:
    try:
        with os.fdopen(_open_nofollow(path, os.O_RDONLY), "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_point(job: PointJob, cancel: threading.Event | None = None) -> Outcome:
    """Run one point in a child process and wait for it; see the module docstring for the outcome."""
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result_file = out / "result.json"
    result_file.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "lab.scans.executors",
        "--fn",
        job.fn,
        "--params",
        json.dumps(job.params),
        "--out",
        str(out),
        "--parent",
        str(os.getpid()),
    ]
    if job.model:
        cmd += ["--model", job.model]
    started_at = time.time()
    t0 = time.perf_counter()
    reason = None
    (out / "output.log").unlink(missing_ok=True)  # a planted symlink goes; the log is created anew
    with os.fdopen(_open_nofollow(out / "output.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(REPO),
            env=_child_env(),
            start_new_session=True,  # its own process group: a kill takes the point and all it started
        )
        try:
            while proc.poll() is None:
                if cancel is not None and cancel.is_set():
                    reason = "cancelled"
                    break
                if time.perf_counter() - t0 > job.timeout_s:
                    reason = f"timed out after {job.timeout_s:g} s"
                    break
                time.sleep(POLL_S)
        finally:
            _kill_group(proc)  # also takes stray grandchildren of a point that exited normally
    wall = round(time.perf_counter() - t0, 4)
    common = {"wall_s": wall, "exit_code": proc.returncode, "started_at": started_at, "finished_at": time.time()}
    if reason is None and proc.returncode == 0 and result_file.exists():
        data = json.loads(result_file.read_text())
        return Outcome(PointStatus.DONE, metrics=data["metrics"], compute_s=data["compute_s"], **common)
    output_tail = tail(out / "output.log")
    if reason == "cancelled":
        return Outcome(PointStatus.CANCELLED, error="cancelled while running", output_tail=output_tail, **common)
    if reason is not None:
        error = reason
    elif proc.returncode is not None and proc.returncode < 0:
        error = f"killed by signal {signal.Signals(-proc.returncode).name}"
    else:
        error = f"exit status {proc.returncode}" + ("" if proc.returncode else " without a result")
    last = [ln for ln in output_tail.strip().splitlines() if ln.strip()]
    if last:
        error += f": {last[-1][:300]}"
    return Outcome(PointStatus.ERROR, error=error, output_tail=output_tail, **common)


def check_executor(executor, workers, address) -> tuple[str, int | None, str | None]:
    """Validate an executor choice; returns (name, workers or None for the default, address)."""
    if executor is None:
        executor = "local"
    if executor not in EXECUTORS:
        raise LabError(f"unknown executor {shown(executor)}", f"available: {', '.join(EXECUTORS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 256):
        raise LabError(
            f"workers must be an integer in [1, 256], got {shown(workers)}", "leave it out for one worker per core"
        )
    if address is not None and (executor != "ray" or not isinstance(address, str) or not address.strip()):
        raise LabError(
            f"address {shown(address)} only applies to the ray executor, as a string",
            'e.g. "auto" or "ray://head:10001"; leave it out for a local Ray instance',
        )
    return executor, workers, address


class LocalExecutor:
    """A pool of ``workers`` threads, each running one point process at a time."""

    name = "local"

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1

    def run(self, jobs: list, on_start, on_finish, cancel: threading.Event) -> None:
        # Daemon threads (not a ThreadPoolExecutor, which the interpreter joins at exit): a Lab that
        # exits never waits for its points; their processes die with it (PDEATHSIG).
        todo = queue.SimpleQueue()
        for j in jobs:
            todo.put(j)
        errors = []

        def worker():
            while not cancel.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    on_start(job.index)
                    on_finish(job.index, run_point(job, cancel))
                except Exception as e:  # a bug in the callbacks: stop this worker, report after the others
                    errors.append(e)
                    return

        threads = [
            threading.Thread(target=worker, name=f"scan-point-{i}", daemon=True)
            for i in range(min(self.workers, len(jobs)))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]


# ---------------------------------------------------------------- Ray

_ray_lock = threading.Lock()
_ray_users = 0
_ray_started_here = False


def _ray_acquire(address: str | None, num_cpus: int | None) -> None:
    global _ray_users, _ray_started_here
    import ray

    with _ray_lock:
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            kw = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
                "ignore_reinit_error": True,
            }
            if address:
                kw["runtime_env"] = {"py_modules": [str(Path(__file__).resolve().parents[1])]}
                ray.init(address=address, **kw)
            else:
                kw["runtime_env"] = {"env_vars": {"PYTHONPATH": str(REPO)}}
                ray.init(num_cpus=num_cpus or os.cpu_count(), **kw)
            _ray_started_here = True
        _ray_users += 1


def _ray_release() -> None:
    global _ray_users, _ray_started_here
    import ray

    with _ray_lock:
        _ray_users -= 1
        if _ray_users == 0 and _ray_started_here:
            ray.shutdown()
            _ray_started_here = False


def _ray_task(job: dict) -> dict:
    """Body of one Ray task: the same :func:`run_point` as the local pool (its outcome as a dict)."""
    return run_point(PointJob(**job)).to_dict()


class RayExecutor:
    """One Ray task per point, at most ``workers`` in flight (default: the cluster's CPUs)."""

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None):
        self.workers = workers
        self.address = address

    def run(self, jobs: list, on_start, on_finish, cancel: threading.Event) -> None:
        import ray

        _ray_acquire(self.address, self.workers)
        try:
            task = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
            limit = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
            pending, inflight = list(jobs), {}
            while pending or inflight:
                if cancel.is_set():
                    break
                while pending and len(inflight) < limit and not cancel.is_set():
                    job = pending.pop(0)
                    on_start(job.index)
                    inflight[task.remote(asdict(job))] = job
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.2)
                for ref in ready:
                    job = inflight.pop(ref)
                    on_finish(job.index, self._get(ref))
            if inflight:  # cancelled: every point still in flight ends here, before run() returns
                self._cancel(inflight, on_finish)
        finally:
            _ray_release()

    @staticmethod
    def _get(ref) -> Outcome:
        import ray

        try:
            return Outcome.from_dict(ray.get(ref))
        except Exception as e:  # the task itself failed (worker died, cluster lost)
            return Outcome.stopped(PointStatus.ERROR, f"ray task failed: {type(e).__name__}", str(e)[-TAIL_CHARS:])

    @staticmethod
    def _cancel(inflight: dict, on_finish) -> None:
        """Force-cancel every task in flight, wait (bounded) until Ray reports each ended, record each point.

        ``force=True`` ends the task's worker process: the point process dies with it (PDEATHSIG) and
        the point's guard kills the rest of its group. A plain ``ray.cancel`` only raises a
        KeyboardInterrupt in the task when Ray manages to deliver it, which it does best effort."""
        import ray

        for ref in inflight:
            ray.cancel(ref, force=True)
        ready, _ = ray.wait(list(inflight), num_returns=len(inflight), timeout=RAY_CANCEL_WAIT_S)
        ready = set(ready)
        for ref, job in inflight.items():
            outcome = None
            if ref in ready:
                try:
                    outcome = Outcome.from_dict(ray.get(ref, timeout=0))
                except Exception:  # TaskCancelledError, WorkerCrashedError: the cancel stopped it
                    outcome = None
            # Only a point that finished before the cancel keeps its outcome: an error seen while the
            # worker went down (its point SIGKILLed by Ray's cleanup of the worker's children) is the cancel.
            if outcome is None or outcome.status != PointStatus.DONE:
                outcome = Outcome.stopped(
                    PointStatus.CANCELLED,
                    "cancelled while running",
                    tail(Path(job.out_dir) / "output.log"),
                    started_at=outcome.started_at if outcome else None,
                )
            on_finish(job.index, outcome)


def make_executor(name: str, workers: int | None = None, address: str | None = None):
    name, workers, address = check_executor(name, workers, address)
    return RayExecutor(workers, address) if name == "ray" else LocalExecutor(workers)


# ---------------------------------------------------------------- the child process


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent goes (a Lab killed hard leaves no point behind)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent went before prctl took effect
        os._exit(1)


def _start_guard() -> int:
    """Fork a guard into this point's process group that SIGKILLs the whole group once this process is gone.

    The point itself dies with its parent (PDEATHSIG), but what *it* started (a solver, a renderer)
    would be orphaned; the guard sees its own parent change and takes the group down, itself
    included. Forked before the point function is imported, while no thread runs. Returns the guard's pid."""
    me = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:  # the guard: no imports, no threads, just a poll of its parent
        while os.getppid() == me:
            time.sleep(GUARD_POLL_S)
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="run one scan point (used by the scan executors)")
    ap.add_argument("--fn", required=True, help="module:function of the point function")
    ap.add_argument("--params", required=True, help="JSON object of parameters")
    ap.add_argument("--out", required=True, help="the point's folder")
    ap.add_argument("--model", default=None)
    ap.add_argument("--parent", type=int, default=None)
    a = ap.parse_args(argv)
    if a.parent:
        _die_with_parent(a.parent)
    if os.getpgid(0) == os.getpid():  # the leader of its own group (run_point's start_new_session)
        os.environ["LAB_POINT_GUARD"] = str(_start_guard())
    module, name = a.fn.split(":")
    fn = getattr(importlib.import_module(module), name)
    t0 = time.perf_counter()
    metrics = fn(json.loads(a.params), Path(a.out), a.model)
    from lab.scans.kinds import write_json

    write_json(Path(a.out) / "result.json", {"metrics": metrics, "compute_s": round(time.perf_counter() - t0, 4)})


if __name__ == "__main__":
    main()
