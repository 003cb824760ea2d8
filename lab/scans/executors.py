"""Where scan points run: each point in its own process, from a local pool of threads or as Ray tasks.

:func:`run_point` is the one way a point runs, whatever the executor: a child process
(``python -m lab.scans.executors``) in its own process group, output to ``output.log`` in the
point's folder, killed with its whole group on timeout or cancel. A point that exits non-zero,
dies on a signal or overruns its timeout comes back as ``error`` with the tail of its output.

* :class:`LocalExecutor`: ``workers`` threads (default: the number of cores), each waiting on one
  child process at a time.
* :class:`RayExecutor`: one Ray task per point, each calling :func:`run_point` on a Ray worker;
  ``ray.init(address=...)`` joins a cluster, no address starts a local instance (shut down when
  the last scan using it ends). Cancel goes through ``ray.cancel``, which interrupts the task;
  the task then kills its point's process group.

Both call ``on_start(index)`` when a point starts and ``on_finish(index, result)`` when it ends;
``result`` is a dict: status (done | error | cancelled), metrics, wall_s, compute_s, error,
output_tail, exit_code, started_at, finished_at.
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

REPO = Path(__file__).resolve().parents[2]
TAIL_CHARS = 2000
POLL_S = 0.05
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


def tail(path: Path, n: int = TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_point(job: PointJob, cancel: threading.Event | None = None) -> dict:
    """Run one point in a child process and wait for it; see the module docstring for the result."""
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
    with open(out / "output.log", "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(REPO),
            env=_child_env(),
            start_new_session=True,
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
    wall = time.perf_counter() - t0
    res = {
        "status": "error",
        "metrics": {},
        "wall_s": round(wall, 4),
        "compute_s": None,
        "error": "",
        "output_tail": "",
        "exit_code": proc.returncode,
        "started_at": started_at,
        "finished_at": time.time(),
    }
    if reason == "cancelled":
        res.update(status="cancelled", error="cancelled while running")
    elif reason is not None:
        res.update(error=reason)
    elif proc.returncode == 0 and result_file.exists():
        data = json.loads(result_file.read_text())
        res.update(status="done", metrics=data["metrics"], compute_s=data["compute_s"])
    elif proc.returncode is not None and proc.returncode < 0:
        res.update(error=f"killed by signal {signal.Signals(-proc.returncode).name}")
    else:
        res.update(error=f"exit status {proc.returncode}" + ("" if proc.returncode else " without a result"))
    if res["status"] != "done":
        res["output_tail"] = tail(out / "output.log")
        last = [ln for ln in res["output_tail"].strip().splitlines() if ln.strip()]
        if res["status"] == "error" and last:
            res["error"] += f": {last[-1][:300]}"
    return res


def check_executor(executor, workers, address) -> tuple[str, int | None, str | None]:
    """Validate an executor choice; returns (name, workers or None for the default, address)."""
    if executor is None:
        executor = "local"
    if executor not in EXECUTORS:
        raise LabError(f"unknown executor {executor!r}", f"available: {', '.join(EXECUTORS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 256):
        raise LabError(
            f"workers must be an integer in [1, 256], got {workers!r}", "leave it out for one worker per core"
        )
    if address is not None and (executor != "ray" or not isinstance(address, str) or not address.strip()):
        raise LabError(
            f"address {address!r} only applies to the ray executor, as a string",
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
    """Body of one Ray task: the same :func:`run_point` as the local pool; a cancel interrupts it and kills the point."""
    return run_point(PointJob(**job))


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
                    self._cancel(inflight, on_finish)
                    return
                while pending and len(inflight) < limit:
                    job = pending.pop(0)
                    on_start(job.index)
                    inflight[task.remote(asdict(job))] = job
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.2)
                for ref in ready:
                    job = inflight.pop(ref)
                    on_finish(job.index, self._get(ref, job))
        finally:
            _ray_release()

    @staticmethod
    def _get(ref, job: PointJob) -> dict:
        import ray

        try:
            return ray.get(ref)
        except Exception as e:  # the task itself failed (worker died, cluster lost)
            now = time.time()
            return {
                "status": "error",
                "metrics": {},
                "wall_s": None,
                "compute_s": None,
                "error": f"ray task failed: {type(e).__name__}",
                "output_tail": str(e)[-TAIL_CHARS:],
                "exit_code": None,
                "started_at": now,
                "finished_at": now,
            }

    @staticmethod
    def _cancel(inflight: dict, on_finish) -> None:
        import ray

        for ref in inflight:
            ray.cancel(ref)  # KeyboardInterrupt in the task: run_point kills the point's process group
        for ref, job in inflight.items():
            try:
                res = ray.get(ref, timeout=30)
            except Exception:
                now = time.time()
                res = {
                    "status": "cancelled",
                    "metrics": {},
                    "wall_s": None,
                    "compute_s": None,
                    "error": "cancelled while running",
                    "output_tail": tail(Path(job.out_dir) / "output.log"),
                    "exit_code": None,
                    "started_at": now,
                    "finished_at": now,
                }
            on_finish(job.index, res)


def make_executor(name: str, workers: int | None = None, address: str | None = None):
    name, workers, address = check_executor(name, workers, address)
    return RayExecutor(workers, address) if name == "ray" else LocalExecutor(workers)


# ---------------------------------------------------------------- the child process


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent goes (a Lab killed hard leaves no orphans)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent went before prctl took effect
        os._exit(1)


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
    from lab.scans.kinds import write_json

    module, name = a.fn.split(":")
    fn = getattr(importlib.import_module(module), name)
    t0 = time.perf_counter()
    metrics = fn(json.loads(a.params), Path(a.out), a.model)
    write_json(Path(a.out) / "result.json", {"metrics": metrics, "compute_s": round(time.perf_counter() - t0, 4)})


if __name__ == "__main__":
    main()
