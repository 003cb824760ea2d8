"""Faults injected between the robot's runtime and the policy, as named profiles drawn from a seeded RNG.

A :class:`Link` decides, for each request at the moment it is sent, what the link does to it
(:class:`Plan`): its latency [s], whether it is lost, whether the server is dead, whether the answer
comes back corrupted (NaN targets) or from another robot (another model identity, targets in another
robot's joint order). The draws come from ``numpy.random.Generator(PCG64(seed))`` in the order the
requests are sent, so a run on the virtual clock is reproducible bit for bit from its seed.

Profiles (:data:`PROFILES`, :func:`get_profile`): ``healthy`` (15-25 ms), ``lossy`` (20 % of requests
lost), ``congested`` (~250 ms + jitter), ``outage`` (server dead from 1 s to 4 s after the profile
starts), ``corrupt`` (20 % of chunks hold a NaN), ``wrong-robot`` (every chunk from another robot).
The transports of :mod:`lab.remote.transport` apply a plan: on the virtual clock by delivering at
``now + latency``, on the wall clock by sleeping it in the request's worker thread.
"""

import math
from dataclasses import dataclass

import numpy as np

from lab.errors import LabError

OTHER_ROBOT = {"sha256": "f" * 64, "short": "f" * 12, "file": "other_robot.urdf"}


@dataclass(frozen=True)
class FaultProfile:
    """What the link does: latency ``base_s`` + normal jitter ``jitter_s`` (clipped at ``min_s``) [s];
    ``drop``, ``corrupt`` and ``wrong_robot`` probabilities; the server dead in ``[dead_from_s, dead_to_s)``
    [s after the profile starts] (``dead_to_s`` 0: never)."""

    name: str
    base_s: float = 0.015
    jitter_s: float = 0.005
    min_s: float = 0.005
    drop: float = 0.0
    corrupt: float = 0.0
    wrong_robot: float = 0.0
    dead_from_s: float = 0.0
    dead_to_s: float = 0.0
    description: str = ""


PROFILES = {
    p.name: p
    for p in (
        FaultProfile("healthy", description="15 ms +- 5 ms, nothing lost"),
        FaultProfile("lossy", drop=0.2, description="20 % of requests lost (each one times out)"),
        FaultProfile("congested", base_s=0.25, jitter_s=0.03, min_s=0.18, description="250 ms +- 30 ms latency"),
        FaultProfile("outage", dead_from_s=1.0, dead_to_s=4.0, description="server dead from 1 s to 4 s"),
        FaultProfile("corrupt", corrupt=0.2, description="20 % of chunks hold a NaN target"),
        FaultProfile("wrong-robot", wrong_robot=1.0, description="every chunk is another robot's"),
    )
}


def get_profile(name) -> FaultProfile:
    """The profile ``name``; an unknown name raises and lists what exists."""
    if not isinstance(name, str) or name not in PROFILES:
        raise LabError(f"unknown fault profile {str(name)[:40]!r}", f"profiles: {', '.join(PROFILES)}")
    return PROFILES[name]


@dataclass(frozen=True)
class Plan:
    """What happens to one request: ``latency_s`` [s] and at most one of the faults."""

    latency_s: float
    dead: bool = False
    lost: bool = False
    corrupt: bool = False
    wrong_robot: bool = False
    where: float = 0.5  # which action/joint a corruption hits (0..1)


class Link:
    """``profile`` with its own RNG (``seed``); ``t0`` [s, the runtime's clock]: when the profile started."""

    def __init__(self, profile: FaultProfile, seed: int = 0, t0: float = 0.0):
        self.profile = profile
        self.seed = int(seed)
        self.t0 = float(t0)
        self.rng = np.random.Generator(np.random.PCG64(self.seed))

    def plan(self, now: float) -> Plan:
        """The fate of a request sent at ``now`` [s]: four draws per request, whatever the profile."""
        p = self.profile
        jitter, u_drop, u_bad, u_where = self.rng.standard_normal(), *self.rng.random(3)
        latency = max(p.min_s, p.base_s + p.jitter_s * jitter)
        dead = p.dead_from_s <= now - self.t0 < p.dead_to_s
        return Plan(
            latency_s=latency,
            dead=dead,
            lost=not dead and u_drop < p.drop,
            corrupt=u_bad < p.corrupt,
            wrong_robot=u_bad < p.wrong_robot,
            where=float(u_where),
        )

    def describe(self) -> dict:
        p = self.profile
        return {"profile": p.name, "seed": self.seed, "description": p.description, "started_at": self.t0}


def damage(plan: Plan, chunk: dict) -> dict:
    """The chunk as the link hands it on: a NaN at action/joint ``plan.where`` if ``plan.corrupt``;
    another robot's identity and joint order if ``plan.wrong_robot``; else ``chunk`` itself."""
    if not (plan.corrupt or plan.wrong_robot) or not isinstance(chunk, dict):
        return chunk
    out = dict(chunk)
    actions = [list(a) for a in chunk.get("actions", [])]
    if plan.wrong_robot:
        out["model"] = OTHER_ROBOT
        actions = [a[::-1] for a in actions]
    if plan.corrupt and actions and actions[0]:
        i = min(len(actions) - 1, int(plan.where * len(actions)))
        j = int(plan.where * 7919) % len(actions[i])
        actions[i][j] = math.nan
    out["actions"] = actions
    return out
