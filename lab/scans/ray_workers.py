"""Scan points on Ray: one actor per worker, each holding a warm worker process (:mod:`lab.scans.pool`).

``ray.init(address=...)`` joins a cluster (``"127.0.0.1:6390"``, ``"auto"``, ``"ray://head:10001"``);
no address starts a local instance, shut down when the last scan using it ends. A run starts
``workers`` actors (default: the cluster's CPUs), each with one CPU; an actor starts a warm worker
on its node and runs point after point on it with the local pool's isolation
(:func:`lab.scans.pool.execute`): a crash, a timeout or a leak kills the worker with its process
group and the actor starts a new one; the point is ``error`` with its output tail.

What Ray adds: an actor that dies itself (its node lost, the actor process killed) makes its
point ``error`` and is replaced by a new actor; a point that runs past its timeout by
:data:`RAY_GRACE_S` without its actor answering has the actor ``ray.kill``-ed (its worker dies with
it: PDEATHSIG, and the worker's guard takes the rest of its group). A cancel ``ray.kill``-s every
busy actor at once and records each of their points ``cancelled`` before the run returns. Actors
belong to the run (the Lab is their Ray driver): when the Lab stops, they go; the cluster stays.
"""

import os
import threading
import time
from dataclasses import asdict
from pathlib import Path

from lab.scans import isolation
from lab.scans.points import Outcome, PointStatus
from lab.scans.pool import PointJob, Worker, execute

REPO = Path(__file__).resolve().parents[2]
RAY_GRACE_S = 10.0  # a point this long past its timeout without an answer has its actor killed [s]
WAIT_S = 0.1  # how often the run looks at the cancel and the deadlines [s]

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


class PointActor:
    """The body of one Ray actor: a warm worker on the actor's node, replaced when a point had it killed."""

    def __init__(self):
        self.worker = Worker()  # starts warming up now, while the run creates the other actors

    def run(self, job: dict) -> dict:
        """Run one point (a :class:`~lab.scans.pool.PointJob` as a dict) on the warm worker; its outcome as a dict."""
        if self.worker is None:
            self.worker = Worker()
        outcome, keep = execute(self.worker, PointJob(**job), threading.Event())
        if not keep:
            self.worker.kill()
            self.worker = None
        return outcome.to_dict()


class RayExecutor:
    """At most ``workers`` points in flight on as many Ray actors (default: the cluster's CPUs)."""

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None):
        self.workers = workers
        self.address = address

    def run(self, jobs: list, on_start, on_finish, cancel: threading.Event) -> None:
        import ray

        _ray_acquire(self.address, self.workers)
        actor_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(PointActor)
        limit = min(len(jobs), self.workers or max(1, int(ray.cluster_resources().get("CPU", 1))))
        free = [actor_class.remote() for _ in range(limit)]
        inflight: dict = {}  # ref -> (actor, job, deadline)
        try:
            pending = list(jobs)
            while (pending or inflight) and not cancel.is_set():
                while pending and free and not cancel.is_set():
                    job, actor = pending.pop(0), free.pop()
                    on_start(job.index)
                    deadline = time.monotonic() + job.timeout_s + RAY_GRACE_S + 120.0  # + the worker's start
                    inflight[actor.run.remote(asdict(job))] = (actor, job, deadline)
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    actor, job, _ = inflight.pop(ref)
                    outcome, alive = self._get(ref, job)
                    free.append(actor if alive else self._replace(actor, actor_class))
                    on_finish(job.index, outcome)
                now = time.monotonic()
                for ref in [r for r, (_, _, d) in inflight.items() if now > d]:
                    actor, job, _ = inflight.pop(ref)
                    free.append(self._replace(actor, actor_class))
                    why = f"timed out after {job.timeout_s:g} s: its Ray actor did not answer and was killed"
                    on_finish(job.index, self._stopped(PointStatus.ERROR, why, job))
            if inflight:  # cancelled: every point still in flight ends here, before run() returns
                self._cancel(inflight, on_finish)
        finally:
            for actor in free + [a for a, _, _ in inflight.values()]:
                ray.kill(actor, no_restart=True)
            _ray_release()

    @staticmethod
    def _stopped(status: PointStatus, why: str, job: PointJob) -> Outcome:
        return Outcome.stopped(status, why, isolation.tail(Path(job.out_dir) / "output.log"))

    def _get(self, ref, job: PointJob) -> tuple[Outcome, bool]:
        """The outcome of a finished call, and whether its actor is still alive."""
        import ray

        try:
            return Outcome.from_dict(ray.get(ref)), True
        except ray.exceptions.RayActorError as e:  # the actor died: its node lost, its process killed
            return self._stopped(PointStatus.ERROR, f"its Ray actor died: {type(e).__name__}", job), False
        except Exception as e:  # the call itself failed
            return self._stopped(PointStatus.ERROR, f"ray call failed: {type(e).__name__}: {e}"[:300], job), False

    @staticmethod
    def _replace(actor, actor_class):
        import ray

        ray.kill(actor, no_restart=True)
        return actor_class.remote()

    def _cancel(self, inflight: dict, on_finish) -> None:
        """Kill every busy actor at once and record each point (``cancelled``; ``done`` if it just finished).

        ``ray.kill`` ends the actor's process: its worker dies with it (PDEATHSIG) and the worker's guard
        kills the rest of the worker's process group."""
        import ray

        ready, _ = ray.wait(list(inflight), num_returns=len(inflight), timeout=0)
        for actor, _, _ in inflight.values():
            ray.kill(actor, no_restart=True)
        for ref, (_, job, _) in inflight.items():
            outcome = self._get(ref, job)[0] if ref in ready else None
            if outcome is None or outcome.status != PointStatus.DONE:
                outcome = self._stopped(PointStatus.CANCELLED, "cancelled while running", job)
            on_finish(job.index, outcome)
