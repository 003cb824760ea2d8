"""How the runtime reaches a policy without ever waiting for it: ``submit`` now, ``poll`` later.

Both transports take a request (an id and an observation) in :meth:`submit`, which returns at once,
and hand back the requests that have finished in :meth:`poll` as :class:`Reply` objects (the raw
answer, unvalidated: validation is the runtime's, at its trust boundary). Faults of a
:class:`~lab.remote.faults.Link` are applied between the two:

- :class:`VirtualTransport`: the policy is a function called in-process; its answer is delivered when
  the runtime's (virtual) clock passes ``sent + latency`` (a lost request or a latency past the
  timeout: a ``timeout`` error at ``sent + timeout_s``; a dead server: ``connection refused`` 1 ms later);
- :class:`HttpTransport`: ``POST <url>/predict`` in a worker thread (the fault plan's latency slept
  there, a lost request waits out the timeout), on the wall clock.
"""

import heapq
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests

from lab.remote.faults import Link, damage

TIMEOUT_S = 0.5  # [s] a request not answered by then has failed


@dataclass(frozen=True)
class Reply:
    """One finished request: ``rid``, the answer ``chunk`` (a dict, unchecked) or ``error`` (words), and when
    it was sent and finished [s, the runtime's clock]."""

    rid: int
    sent_at: float
    done_at: float
    chunk: dict | None = None
    error: str | None = None


class VirtualTransport:
    """``policy(observation) -> chunk`` called in-process; replies delivered on the runtime's clock."""

    def __init__(self, policy, link: Link, timeout_s: float = TIMEOUT_S):
        self.policy, self.link, self.timeout_s = policy, link, timeout_s
        self._due = []  # heap of (done_at, rid, Reply)

    def submit(self, rid: int, obs: dict, now: float) -> None:
        plan = self.link.plan(now)
        if plan.dead:
            reply = Reply(rid, now, now + 0.001, error="connection refused (the policy server is down)")
        elif plan.lost or plan.latency_s > self.timeout_s:
            reply = Reply(rid, now, now + self.timeout_s, error=f"timeout after {self.timeout_s:g} s")
        else:
            try:
                chunk = damage(plan, self.policy(obs))
                reply = Reply(rid, now, now + plan.latency_s, chunk=chunk)
            except Exception as exc:  # the policy's own error, as a server would answer 400/500
                reply = Reply(rid, now, now + plan.latency_s, error=f"policy error: {exc}")
        heapq.heappush(self._due, (reply.done_at, rid, reply))

    def poll(self, now: float) -> list:
        out = []
        while self._due and self._due[0][0] <= now + 1e-12:
            out.append(heapq.heappop(self._due)[2])
        return out

    def close(self) -> None:
        self._due.clear()


class HttpTransport:
    """``POST {url}/predict`` from a pool of worker threads; ``clock`` stamps the replies."""

    def __init__(self, url: str, link: Link, clock, timeout_s: float = TIMEOUT_S, workers: int = 8):
        self.url = url.rstrip("/") + "/predict"
        self.link, self.clock, self.timeout_s = link, clock, timeout_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="policy-request")
        self._session = requests.Session()
        self._done = []
        self._lock = threading.Lock()
        self._closed = False

    def set_link(self, link: Link) -> None:
        self.link = link

    def submit(self, rid: int, obs: dict, now: float) -> None:
        plan = self.link.plan(now)  # drawn here, on the control thread, in the order requests are sent
        self._pool.submit(self._request, rid, obs, now, plan)

    def _request(self, rid, obs, sent, plan) -> None:
        chunk = error = None
        t_start = time.monotonic()
        try:
            if plan.dead:
                error = "connection refused (the policy server is down)"
            elif plan.lost or plan.latency_s > self.timeout_s:
                time.sleep(self.timeout_s)
                error = f"timeout after {self.timeout_s:g} s"
            else:
                time.sleep(plan.latency_s)
                left = self.timeout_s - (time.monotonic() - t_start)
                r = self._session.post(self.url, json=obs, timeout=max(0.01, left))
                if r.status_code != 200:
                    error = f"HTTP {r.status_code}: {r.text[:160]}"
                else:
                    chunk = damage(plan, r.json())
        except requests.Timeout:
            error = f"timeout after {self.timeout_s:g} s"
        except (requests.RequestException, ValueError) as exc:
            error = f"request failed: {type(exc).__name__}"
        with self._lock:
            if not self._closed:
                self._done.append(Reply(rid, sent, self.clock.now(), chunk=chunk, error=error))

    def poll(self, now: float) -> list:
        with self._lock:
            out, self._done = self._done, []
        return out

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._session.close()
