"""Pulling a body with the mouse, as MuJoCo's ``simulate`` does: a limited spring from a point on the body
to a target point the viewer drags.

The spring is ``F = k (target - p) - c v`` on the grabbed point ``p`` (world), with ``k`` scaled by
the robot's mass so that any robot feels the same, ``c`` a damping that keeps the pull from
oscillating, and ``|F|`` capped at a share of the robot's weight. It is recomputed every physics step
while it acts and ends when released, when the viewer goes away, on a reset, or when no one has
moved it for :data:`IDLE_S` (a lost mouse-up never leaves a force behind).
"""

import collections
import time

import numpy as np

G = 9.81
STIFFNESS_PER_KG = 20.0  # [N/m per kg of robot]: a 30 kg robot, 10 cm of drag -> 60 N
DAMPING_S = 0.15  # [s] damping = this * stiffness [N s/m]
MAX_WEIGHT_SHARE = 0.5  # |F| at most this share of the robot's weight
IDLE_S = 5.0  # [s wall] a perturbation not moved for this long is released
EVENTS = 100  # perturbation events kept


class Perturbation:
    """The one mouse perturbation of a Lab session (at most one acts at a time).

    Call :meth:`start`, :meth:`move`, :meth:`end` with the session's lock held; :meth:`apply` is
    called every physics step while :attr:`active`.
    """

    def __init__(self, engine, total_mass: float, body_names: list):
        self.engine, self.names = engine, body_names
        self.k = STIFFNESS_PER_KG * total_mass
        self.c = DAMPING_S * self.k
        self.max_n = MAX_WEIGHT_SHARE * total_mass * G
        self.events = collections.deque(maxlen=EVENTS)
        self._p = None

    @property
    def active(self) -> bool:
        return self._p is not None

    def held_by_another(self, owner) -> bool:
        """True while a viewer other than ``owner`` pulls."""
        return self._p is not None and self._p["owner"] is not owner

    def start(self, body: int, local: np.ndarray, target: np.ndarray, owner, sim_time: float) -> None:
        """Grab body ``body`` at ``local`` (3,) [m, body frame] and pull it towards world ``target`` (3,)."""
        self._p = {
            "body": int(body),
            "local": np.array(local, dtype=float),
            "target": np.array(target, dtype=float),
            "owner": owner,
            "point": None,
            "force": np.zeros(3),
            "t0": sim_time,
            "peak_n": 0.0,
            "impulse": np.zeros(3),
            "moved": time.monotonic(),
        }

    def move(self, target: np.ndarray, owner) -> bool:
        """A new target (3,) [m] for ``owner``'s perturbation; False when ``owner`` holds none."""
        p = self._p
        if p is None or p["owner"] is not owner:
            return False
        p["target"] = np.array(target, dtype=float)
        p["moved"] = time.monotonic()
        return True

    def end(self, sim_time: float, owner=None, why: str = "released") -> dict | None:
        """Release (only ``owner``'s, when given); the event logged, or None when nothing was held."""
        p = self._p
        if p is None or (owner is not None and p["owner"] is not owner):
            return None
        self._p = None
        self.engine.set_body_force(None)
        event = {
            "kind": "perturb",
            "body": self.names[p["body"]],
            "t_start": round(p["t0"], 4),
            "t_end": round(sim_time, 4),
            "peak_force_n": round(p["peak_n"], 2),
            "impulse_ns": [round(float(v), 3) for v in p["impulse"]],
            "ended": why,
        }
        self.events.append(event)
        return event

    def apply(self, data, dt: float) -> None:
        """One physics step of the spring on MuJoCo ``data`` (kinematics of the step before)."""
        p = self._p
        b = p["body"]
        point = data.xpos[b] + data.xmat[b].reshape(3, 3) @ p["local"]
        prev = p["point"]
        vel = np.zeros(3) if prev is None else (point - prev) / dt
        f = self.k * (p["target"] - point) - self.c * vel
        n = float(np.linalg.norm(f))
        if n > self.max_n:
            f *= self.max_n / n
            n = self.max_n
        self.engine.set_body_force(b, f, point)
        p["point"], p["force"] = point, f
        p["peak_n"] = max(p["peak_n"], n)
        p["impulse"] += f * dt

    def idle(self) -> bool:
        """True when the perturbation has not been moved for :data:`IDLE_S`."""
        return self._p is not None and time.monotonic() - self._p["moved"] > IDLE_S

    def state(self) -> dict | None:
        """What acts now, for the readouts and the overlay: ``{"body", "body_id", "point", "target",
        "force" (3,) [N], "force_n", "max_n"}``, or None."""
        p = self._p
        if p is None or p["point"] is None:
            return None
        return {
            "body": self.names[p["body"]],
            "body_id": p["body"],
            "point": p["point"].copy(),
            "target": p["target"].copy(),
            "force": p["force"].copy(),
            "force_n": round(float(np.linalg.norm(p["force"])), 2),
            "max_n": round(self.max_n, 2),
        }
