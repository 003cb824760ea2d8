"""The robot side of remote control: a 50 Hz loop that follows action chunks and fails safe.

:class:`Runtime` is ticked by the simulation every :data:`~lab.remote.policy.CONTROL_DT` (20 ms) with
the runtime's clock time ``now`` [s] and returns the joint targets (nu,) [rad] to hold until the next
tick. It never waits for the network: requests go out through a transport's ``submit`` and come back
through ``poll`` (:mod:`lab.remote.transport`). Per tick:

1. replies are taken; each chunk is checked once, whole, at this trust boundary (:meth:`Runtime.check`):
   shape, model identity, dimensions, finite, inside the joint limits, inside the rate limit between
   consecutive actions; then staleness (its age from ``observed_at``, not from arrival, over
   ``max_age_s``) and order (an answer to an older observation never replaces a newer chunk). A chunk
   that fails is rejected whole, never clamped, and counted by reason;
2. the target: the chunk's action due now (index ``(now - observed_at) / dt``), else a **protective
   hold** (stand in place: the last target held, the stand pose before any chunk), which a valid chunk releases at once; a hold that lasts ``estop_after_s``
   latches the **e-stop** (damped, zero target: :attr:`Runtime.estopped`) until :meth:`clear_estop`
   with ``confirm=True``;
3. the target moves at most ``max_rate * dt`` per tick from the last one (the per-tick rate limit);
4. the next request goes out ``lead`` before the chunk of the last one runs out; the lead is the
   measured p95 latency plus a margin; failures are retried with exponential backoff; consecutive
   failures open a circuit breaker for ``breaker_cooldown_s``, then one probe is let through.

Each mitigation can be switched off in :class:`RuntimeConfig` (``experiments/latency_sweep.py``'s ablations).
"""

import collections
import math
from dataclasses import dataclass

import numpy as np

from lab.control.pose import joint_ranges
from lab.remote.policy import CONTROL_DT, HORIZON
from lab.robots.model import Robot

STREAMING, HOLD, ESTOP, IDLE = "streaming", "hold", "estop", "idle"
REASONS = ("malformed", "identity", "dimensions", "non_finite", "joint_limits", "rate_limit", "stale", "out_of_order")
MITIGATIONS = ("staleness", "ordering", "validation", "retries", "breaker", "hold_release", "adaptive_lead")


@dataclass(frozen=True)
class RuntimeConfig:
    """The runtime's limits (times in [s], rates in [rad/s]) and which mitigations are on."""

    dt: float = CONTROL_DT
    horizon: int = HORIZON
    max_age_s: float = 0.30  # a chunk whose observation is older than this on arrival is stale
    max_rate: float = 3.0  # [rad/s] targets move at most this fast (within a chunk and per tick)
    lead_s: float = 0.10  # request lead before the adaptive lead has 5 latency samples (and without it)
    lead_margin_s: float = 0.03  # added to the p95 latency
    min_period_s: float = 0.04  # at most one request per 40 ms
    max_in_flight: int = 8
    backoff_s: float = 0.04  # first retry after a failure; doubles per consecutive failure
    backoff_max_s: float = 0.64
    breaker_failures: int = 5  # consecutive failures that open the breaker
    breaker_cooldown_s: float = 1.0
    estop_after_s: float = 8.0  # a hold this long latches the e-stop
    # mitigations (all on; experiments switch them off one at a time)
    staleness: bool = True
    ordering: bool = True
    validation: bool = True
    retries: bool = True
    breaker: bool = True
    hold_release: bool = True
    adaptive_lead: bool = True


@dataclass(frozen=True)
class Chunk:
    """An accepted chunk: ``actions`` (horizon, nu) [rad], action ``k`` due at ``observed_at + k * dt`` [s]
    (``start`` [s]: when action 0 is due; ``observed_at`` unless staleness is switched off)."""

    chunk_id: str
    observed_at: float
    phase: float
    actions: np.ndarray
    start: float
    arrived_at: float

    @property
    def end(self) -> float:
        return self.start + len(self.actions) * CONTROL_DT


class EventLog:
    """The runtime's events, repeats collapsed: ``[{"kind", "t", "count", "detail"}]`` (last ``n`` kept)."""

    def __init__(self, n: int = 200, on_event=None):
        self.items = collections.deque(maxlen=n)
        self.on_event = on_event

    def add(self, t: float, kind: str, detail: str = "") -> None:
        last = self.items[-1] if self.items else None
        if last is not None and last["kind"] == kind and last["detail"] == detail:
            last["count"] += 1
            last["t"] = round(t, 3)
        else:
            self.items.append({"kind": kind, "t": round(t, 3), "count": 1, "detail": detail})
        if self.on_event is not None:
            self.on_event(kind, {"detail": detail})  # no time: the recording stamps it and collapses repeats

    def lines(self) -> list:
        return [dict(e, text=e["kind"] + (f" x{e['count']}" if e["count"] > 1 else "")) for e in self.items]


class Runtime:
    """Follows ``transport``'s chunks for ``robot`` under ``config``; :meth:`tick` every ``config.dt``.

    ``on_event(kind, {"detail"})``, ``on_observation(obs)`` (each observation sent, as sent), ``on_chunk(raw, observed_at,
    now, reason, why)`` (each chunk as it arrived, with :meth:`check`'s verdict; :func:`chunk_record` makes it a
    record): optional hooks (the recording).
    """

    def __init__(self, robot: Robot, transport, config: RuntimeConfig | None = None, on_event=None):
        self.robot = robot
        self.transport = transport
        self.config = c = config or RuntimeConfig()
        self.identity = robot.identity
        self.nu = len(robot.joint_names)
        lo, hi = joint_ranges(robot)
        self.lower = np.where(np.isnan(lo), -np.inf, lo)
        self.upper = np.where(np.isnan(hi), np.inf, hi)
        self.stand = robot.q_nominal.copy()
        self.max_step = c.max_rate * c.dt
        self.log = EventLog(on_event=on_event)
        self.on_observation = self.on_chunk = None
        self.state = IDLE
        self.target = self.stand.copy()
        self.chunk: Chunk | None = None
        self.phase = 0.0  # [s] how much of the task has been executed
        self.estopped = False
        self.hold_since: float | None = None
        self.latency = collections.deque(maxlen=50)
        self.rejected = collections.Counter()
        self.counts = collections.Counter()  # requests, replies, accepted, failures, breaker_rejected, ...
        self.hold_s = 0.0
        self.invalid_sent = 0  # targets applied that were not finite or outside the joint limits (audit)
        self._rid = 0
        self._sent: dict = {}  # rid -> observed_at of the requests in flight
        self._next_due = -math.inf
        self._fails = 0
        self._breaker_until = -math.inf
        self._probe = False
        self._latched_hold = False
        self._last_tick: float | None = None
        self.started_at: float | None = None  # [s] the first tick (event times are shown from here)

    # --- the loop -------------------------------------------------------------------------------------
    def tick(self, now: float, sense) -> np.ndarray:
        """One control tick at ``now`` [s]; ``sense()`` -> ``{"q", "dq", "base"}`` (called only to send a
        request). The targets (nu,) [rad] to hold until the next tick (a new array when they change)."""
        c = self.config
        if self.state == IDLE:
            self.started_at = now
            self.state = HOLD
            self.hold_since = now
        for reply in self.transport.poll(now):
            self._take(reply, now)
        due = self._due_action(now)
        if self.estopped:  # latched: nothing is followed, whatever arrives
            due = None
        elif due is not None and not self._latched_hold:
            if self.state != STREAMING:
                self.log.add(now, "hold_released" if self.hold_since is not None else "streaming")
            self.state, self.hold_since = STREAMING, None
        else:
            if self.state == STREAMING:
                self.log.add(now, "hold", "no valid chunk covers now")
                self.hold_since = now
                self._latched_hold = not c.hold_release
            self.state = HOLD
            due = None
            if now - self.hold_since >= c.estop_after_s - 1e-9:
                self.estop(now, f"hold lasted {c.estop_after_s:g} s")
        if self.state == HOLD and self._last_tick is not None:
            self.hold_s += now - self._last_tick
        self._last_tick = now
        goal = self.target if due is None else due[0]  # the hold stands in place: the last target held
        if due is not None:
            self.phase = due[1]
        step = np.clip(goal - self.target, -self.max_step, self.max_step)
        if not np.array_equal(step, np.zeros_like(step)):
            self.target = self.target + step
        t = self.target
        if not (np.all(np.isfinite(t)) and np.all(t >= self.lower - 1e-9) and np.all(t <= self.upper + 1e-9)):
            self.invalid_sent += 1
        if not self.estopped:
            self._maybe_request(now, sense)
        return self.target

    def _due_action(self, now: float):
        """(targets (nu,), phase [s]) of the chunk's action due at ``now``, or None."""
        ch = self.chunk
        if ch is None:
            return None
        k = int(math.floor((now - ch.start) / self.config.dt + 1e-9))
        if not 0 <= k < len(ch.actions):
            return None
        return ch.actions[k], ch.phase + k * self.config.dt

    # --- requests -------------------------------------------------------------------------------------
    @property
    def lead(self) -> float:
        """How long before the last request's chunk runs out the next one goes [s]."""
        c = self.config
        if not c.adaptive_lead or len(self.latency) < 5:
            return c.lead_s
        p95 = float(np.percentile(np.asarray(self.latency), 95))
        return min(max(p95 + c.lead_margin_s, c.lead_s / 2), c.horizon * c.dt - c.min_period_s)

    def _maybe_request(self, now: float, sense) -> None:
        c = self.config
        if now < self._next_due - 1e-9 or len(self._sent) >= c.max_in_flight:
            return
        if c.breaker and now < self._breaker_until:
            self.counts["breaker_rejected"] += 1
            self.log.add(now, "breaker_rejected")
            return
        if c.breaker and self._breaker_until > -math.inf and not self._probe:
            self._probe = True  # half-open: one probe; its reply closes or re-opens the breaker
            self.log.add(now, "breaker_half_open")
        elif self._probe:
            return
        self._rid += 1
        obs = {"observed_at": now, "phase": self.phase, "model": {"sha256": self.identity}, "horizon": c.horizon}
        obs.update(sense())
        self._sent[self._rid] = now
        self.counts["requests"] += 1
        self._next_due = now + max(c.min_period_s, c.horizon * c.dt - self.lead)
        if self.on_observation is not None:
            self.on_observation(obs)
        self.transport.submit(self._rid, obs, now)

    def _failed(self, now: float, why: str, kind: str) -> None:
        c = self.config
        self._fails += 1
        self.counts["failures"] += 1
        self.log.add(now, kind, why[:120])
        if c.retries:
            self._next_due = min(self._next_due, now + min(c.backoff_s * 2 ** (self._fails - 1), c.backoff_max_s))
        if c.breaker and (self._probe or self._fails >= c.breaker_failures):
            if not self._probe:
                self.log.add(now, "breaker_open", f"{self._fails} failures in a row")
            self.counts["breaker_opens"] += 1
            self._breaker_until = now + c.breaker_cooldown_s
            self._probe = False

    def _succeeded(self, now: float) -> None:
        if self._probe or self._breaker_until > -math.inf:
            self.log.add(now, "breaker_closed")
        self._fails = 0
        self._probe = False
        self._breaker_until = -math.inf

    # --- the trust boundary ---------------------------------------------------------------------------
    def _take(self, reply, now: float) -> None:
        observed = self._sent.pop(reply.rid, None)
        if observed is None:
            return
        self.counts["replies"] += 1
        if reply.error is not None:
            self._failed(now, reply.error, "request_failed")
            return
        self.latency.append(now - reply.sent_at)
        chunk, reason, why = self.check(reply.chunk, observed, now)
        if self.on_chunk is not None:
            self.on_chunk(reply.chunk, observed, now, reason, why)
        if chunk is None:
            self.rejected[reason] += 1
            if reason in ("stale", "out_of_order"):  # the server answered: the link is up, only late
                self.log.add(now, f"{reason}_rejected", why)
                self._succeeded(now)
            else:
                self._failed(now, why, f"rejected_{reason}")
            return
        self._succeeded(now)
        self.counts["accepted"] += 1
        self.chunk = chunk

    def check(self, raw, observed_at: float, now: float):
        """``(Chunk, None, "")`` for an answer to the observation taken at ``observed_at`` [s], or
        ``(None, reason, words)`` with ``reason`` one of :data:`REASONS`."""
        c = self.config
        if not isinstance(raw, dict) or not isinstance(raw.get("actions"), list):
            return None, "malformed", "the answer is not a chunk object with actions"
        if c.validation:
            if raw.get("observed_at") != observed_at:
                return None, "malformed", f"observed_at {raw.get('observed_at')!r:.30} is not the request's"
            model = raw.get("model")
            sha = model.get("sha256") if isinstance(model, dict) else None
            if sha != self.identity:
                return None, "identity", f"chunk for model {str(sha)[:12]}, this robot is {self.identity[:12]}"
        try:
            actions = np.array(raw["actions"], dtype=float)
        except (TypeError, ValueError):
            return None, "malformed", "actions are not a list of number lists"
        if actions.ndim != 2 or actions.shape[1] != self.nu:  # cannot be executed, checked or not
            return None, "dimensions", f"actions have shape {actions.shape}, expected (horizon, {self.nu})"
        if c.validation and not 1 <= len(actions) <= 4 * c.horizon:
            return None, "dimensions", f"{len(actions)} actions, expected 1..{4 * c.horizon}"
        if c.validation:
            if not np.all(np.isfinite(actions)):
                k, j = np.argwhere(~np.isfinite(actions))[0]
                return None, "non_finite", f"action {k} joint {self.robot.joint_names[j]} is {actions[k, j]}"
            out = (actions < self.lower - 1e-9) | (actions > self.upper + 1e-9)
            if out.any():
                k, j = np.argwhere(out)[0]
                return (
                    None,
                    "joint_limits",
                    (
                        f"action {k}: {self.robot.joint_names[j]} {actions[k, j]:.3g} outside "
                        f"[{self.lower[j]:.3g}, {self.upper[j]:.3g}]"
                    ),
                )
            if len(actions) > 1:
                jump = np.abs(np.diff(actions, axis=0)).max()
                if jump > self.max_step + 1e-9:
                    return None, "rate_limit", f"targets jump {jump:.3g} rad in one tick, limit {self.max_step:.3g}"
        phase = raw.get("phase", self.phase)
        if isinstance(phase, bool) or not isinstance(phase, (int, float)) or not math.isfinite(phase):
            return None, "malformed", "phase is not a finite number"
        age = now - observed_at
        if c.staleness and age > c.max_age_s + 1e-9:
            return None, "stale", f"age {age * 1e3:.0f} ms > {c.max_age_s * 1e3:.0f} ms"
        if c.ordering and self.chunk is not None and observed_at <= self.chunk.observed_at:
            return None, "out_of_order", f"answers t={observed_at:.3f}, holding t={self.chunk.observed_at:.3f}"
        actions.setflags(write=False)
        start = observed_at if c.staleness else now  # without the staleness rule: played from arrival
        return Chunk(str(raw.get("chunk_id", ""))[:40], observed_at, float(phase), actions, start, now), None, ""

    # --- the operator -------------------------------------------------------------------------------
    def estop(self, now: float, why: str = "requested") -> None:
        """Latch the e-stop now (damped, zero target); only :meth:`clear_estop` with ``confirm`` ends it."""
        if not self.estopped:
            self.counts["estops"] += 1
            self.log.add(now, "estop", why)
        self.estopped, self.state = True, ESTOP
        self.chunk = None

    def clear_estop(self, now: float, confirm: bool) -> bool:
        """End a latched e-stop (``confirm`` must be True); back to hold, streaming once a chunk arrives."""
        if not confirm or not self.estopped:
            return False
        self.estopped, self.state, self.hold_since = False, HOLD, now
        self._latched_hold = False
        self._fails, self._breaker_until, self._probe, self._next_due = 0, -math.inf, False, -math.inf
        self.log.add(now, "estop_cleared")
        return True

    def status(self, now: float) -> dict:
        """The runtime as JSON: state, breaker, chunk queue and staleness, latency, rejections, events."""
        c, ch = self.config, self.chunk
        lat = np.asarray(self.latency) * 1e3
        breaker = "closed"
        if c.breaker and now < self._breaker_until:
            breaker = "open"
        elif self._probe:
            breaker = "half_open"
        chunk = None
        if ch is not None:
            left = max(0, len(ch.actions) - max(0, int(math.floor((now - ch.start) / c.dt + 1e-9))))
            chunk = {
                "id": ch.chunk_id,
                "observed_at": round(ch.observed_at, 4),
                "age_ms": round((now - ch.observed_at) * 1e3, 1),
                "arrival_age_ms": round((ch.arrived_at - ch.observed_at) * 1e3, 1),
                "actions_left": left,
                "horizon": len(ch.actions),
            }
        return {
            "state": "breaker_open" if breaker == "open" and self.state == HOLD else self.state,
            "runtime_state": self.state,
            "breaker": breaker,
            "estopped": self.estopped,
            "hold_s": round(self.hold_s, 3),
            "hold_for_s": round(now - self.hold_since, 3) if self.hold_since is not None else 0.0,
            "phase": round(self.phase, 4),
            "lead_ms": round(self.lead * 1e3, 1),
            "in_flight": len(self._sent),
            "chunk": chunk,
            "max_age_ms": c.max_age_s * 1e3,
            "latency_ms": [round(x, 2) for x in lat.tolist()],
            "latency_p95_ms": round(float(np.percentile(lat, 95)), 1) if len(lat) else None,
            "rejected": {r: self.rejected[r] for r in REASONS},
            "counts": dict(self.counts),
            "invalid_sent": self.invalid_sent,
            "events": [dict(e, t=round(e["t"] - (self.started_at or 0.0), 3)) for e in self.log.lines()[-40:]],
        }


def chunk_record(raw, observed_at: float, now: float, reason: str | None, why: str) -> dict:
    """A chunk as it arrived (``raw``, unchecked) with the runtime's verdict, as plain JSON for the recording:
    ``observed_at``, ``arrived_at`` [s], ``verdict`` accepted | rejected, ``reason`` (one of :data:`REASONS`, or
    None) and its ``detail`` in words; of the chunk: ``chunk_id``, ``model`` (its sha256), ``phase`` [s],
    ``actions`` (horizon, nu) [rad] with a non-finite value as None (each None where a field is missing or not
    of its type: the record never fails on what a server sent)."""
    raw = raw if isinstance(raw, dict) else {}
    model = raw.get("model")
    sha = model.get("sha256") if isinstance(model, dict) else model
    try:
        actions = np.array(raw.get("actions"), dtype=float)
    except (TypeError, ValueError):
        actions = None
    if actions is not None and actions.ndim == 2:
        actions = [[x if math.isfinite(x) else None for x in row] for row in actions.tolist()]
    else:
        actions = None
    return {
        "observed_at": observed_at,
        "arrived_at": now,
        "verdict": "accepted" if reason is None else "rejected",
        "reason": reason,
        "detail": why,
        "chunk_id": str(raw["chunk_id"])[:40] if "chunk_id" in raw else None,
        "model": str(sha)[:64] if sha is not None else None,
        "phase": _finite(raw.get("phase")),
        "actions": actions,
    }


def _finite(v) -> float | None:
    """``v`` as a finite float, or None (not a number, a bool, infinite, NaN, too large)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        v = float(v)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None
