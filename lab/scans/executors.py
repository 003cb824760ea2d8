"""Where scan points run: on warm workers (a local pool of processes, or Ray actors), or each in a fresh process.

* :class:`LocalExecutor`: by default the points go to the process's shared pool of warm workers
  (:mod:`lab.scans.pool`): long-lived processes that imported the engine and loaded the model once,
  each in its own process group, killed and replaced when a point crashes, hangs or leaks. With
  ``warm=False`` (or ``LAB_SCANS_WARM=0`` in the environment) each point runs the cold way,
  :func:`run_point`: ``workers`` threads, each waiting on one fresh child process
  (``python -m lab.scans.executors``) at a time (what the bench compares against).
* :class:`~lab.scans.ray_workers.RayExecutor`: one Ray actor per worker, each holding a warm worker.

:func:`run_point` runs one point in a child process in its own process group, output to
``output.log`` in the point's folder, killed with its whole group on timeout or cancel. A point
that exits non-zero, dies on a signal or overruns its timeout comes back as ``error`` with the tail
of its output. The child dies with whoever started it (``PR_SET_PDEATHSIG``) and forks a guard in
its own process group that SIGKILLs that group when the point goes (see :mod:`lab.scans.isolation`).

Every executor calls ``on_start(index)`` when a point starts and ``on_finish(index, outcome)`` when
it ends; ``outcome`` is a :class:`~lab.scans.points.Outcome` (status done | error | cancelled).
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
from pathlib import Path

from lab.errors import LabError
from lab.scans import isolation
from lab.scans.kinds import shown
from lab.scans.points import Outcome, PointStatus
from lab.scans.pool import PointJob, shared_pool

REPO = Path(__file__).resolve().parents[2]
POLL_S = 0.05
EXECUTORS = ("local", "ray")
__all__ = ["EXECUTORS", "LocalExecutor", "PointJob", "check_executor", "make_executor", "run_point"]


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
    with os.fdopen(isolation.fresh_log(out / "output.log"), "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(REPO),
            env=isolation.child_env(),
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
            isolation.kill_group(proc)  # also takes stray grandchildren of a point that exited normally
    wall = round(time.perf_counter() - t0, 4)
    common = {"wall_s": wall, "exit_code": proc.returncode, "started_at": started_at, "finished_at": time.time()}
    if reason is None and proc.returncode == 0 and result_file.exists():
        data = json.loads(result_file.read_text())
        return Outcome(PointStatus.DONE, metrics=data["metrics"], compute_s=data["compute_s"], **common)
    output_tail = isolation.tail(out / "output.log")
    if reason == "cancelled":
        return Outcome(PointStatus.CANCELLED, error="cancelled while running", output_tail=output_tail, **common)
    if reason is not None:
        error = reason
    elif proc.returncode is not None and proc.returncode < 0:
        error = f"killed by signal {signal.Signals(-proc.returncode).name}"
    else:
        error = f"exit status {proc.returncode}" + ("" if proc.returncode else " without a result")
    last = isolation.last_line(output_tail)
    if last:
        error += f": {last}"
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
    """At most ``workers`` points of a run at a time (default: the number of cores), on warm workers
    (``warm``, the default) or each in a fresh process."""

    name = "local"

    def __init__(self, workers: int | None = None, warm: bool | None = None):
        self.workers = workers or os.cpu_count() or 1
        self.warm = os.environ.get("LAB_SCANS_WARM", "1") != "0" if warm is None else warm

    def run(self, jobs: list, on_start, on_finish, cancel: threading.Event) -> None:
        if self.warm:
            shared_pool().run(jobs, on_start, on_finish, cancel, min(self.workers, len(jobs)))
            return
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


def make_executor(name: str, workers: int | None = None, address: str | None = None):
    name, workers, address = check_executor(name, workers, address)
    if name == "ray":
        from lab.scans.ray_workers import RayExecutor

        return RayExecutor(workers, address)
    return LocalExecutor(workers)


# ---------------------------------------------------------------- the child process


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="run one scan point (used by the scan executors)")
    ap.add_argument("--fn", required=True, help="module:function of the point function")
    ap.add_argument("--params", required=True, help="JSON object of parameters")
    ap.add_argument("--out", required=True, help="the point's folder")
    ap.add_argument("--model", default=None)
    ap.add_argument("--parent", type=int, default=None)
    a = ap.parse_args(argv)
    if a.parent:
        isolation.die_with_parent(a.parent)
    if os.getpgid(0) == os.getpid():  # the leader of its own group (run_point's start_new_session)
        os.environ["LAB_POINT_GUARD"] = str(isolation.start_guard())
    module, name = a.fn.split(":")
    fn = getattr(importlib.import_module(module), name)
    t0 = time.perf_counter()
    metrics = fn(json.loads(a.params), Path(a.out), a.model)
    from lab.scans.kinds import write_json

    write_json(Path(a.out) / "result.json", {"metrics": metrics, "compute_s": round(time.perf_counter() - t0, 4)})


if __name__ == "__main__":
    main()
