"""Mass/inertia parity on Sim2Sim and the PyBullet-side notes on the Lab.

- Sim2Sim ``GET /api/parity``: the per-link table of MuJoCo against PyBullet's raw values at load time
  (``rows``), the links PyBullet was given MuJoCo's values for (``corrected``), the total masses and
  the load notes (:attr:`lab.sim.pybullet_engine.PybulletEngine.load_notes`);
- Lab ``GET /api/pybullet_notes``: for a URDF robot, what PyBullet makes of it (loaded once per robot
  identity into a PyBullet DIRECT client, on the first request; a few tens of ms), else
  ``{"applicable": false}``.

The robot and the lockstep are read from ``current_app.extensions`` on each request: either may be
switched at run time.
"""

import threading

from flask import Blueprint, current_app, jsonify

from lab.errors import LabError
from lab.sim.parity import parity_summary, parity_table

sim2sim_bp = Blueprint("sim2sim_parity", __name__)
lab_bp = Blueprint("lab_pybullet_notes", __name__)
_LOCK = threading.Lock()


def _totals(robot, engine) -> dict:
    return {
        "mujoco": round(float(robot.total_mass), 6),
        "pybullet_raw": round(float(engine.raw_total_mass), 6),
        "pybullet": round(float(engine.total_mass), 6),
    }


def parity_dict(robot, engine) -> dict:
    """What ``GET /api/parity`` answers for ``robot`` and its PyBullet engine (None: no PyBullet engine)."""
    if engine is None or not hasattr(engine, "parity_before"):
        return {"applicable": False, "rows": [], "after": [], "corrected": [], "total": None, "notes": []}
    after = parity_table(robot, engine)
    return {
        "applicable": True,
        "rows": [r.to_dict() for r in engine.parity_before],
        "after": [r.to_dict() for r in after],
        "corrected": list(engine.corrected),
        "total": _totals(robot, engine),
        "summary": {"before": parity_summary(engine.parity_before), "after": parity_summary(after)},
        "notes": list(engine.load_notes),
    }


@sim2sim_bp.get("/api/parity")
def api_parity():
    ls = current_app.extensions["sim2sim"]["lockstep"]
    return jsonify(parity_dict(ls.robot, ls.engines.get("pybullet")))


def pybullet_notes(robot) -> dict:
    """What PyBullet makes of ``robot``: its load notes and total masses, or why it cannot load it."""
    if robot.kind != "urdf":
        return {"applicable": False}
    from lab.sim.pybullet_engine import PybulletEngine

    try:
        engine = PybulletEngine(robot)
    except LabError as exc:
        return {"applicable": True, "notes": [exc.message], "error": exc.message, "total": None}
    try:
        return {"applicable": True, "notes": list(engine.load_notes), "error": None, "total": _totals(robot, engine)}
    finally:
        engine.close()


@lab_bp.get("/api/pybullet_notes")
def api_pybullet_notes():
    robot = current_app.extensions["lab"]["robot"]
    cache = current_app.extensions.setdefault("pybullet_notes", {})
    with _LOCK:  # one PyBullet load per robot identity, however many requests arrive at once
        if robot.identity not in cache:
            cache[robot.identity] = pybullet_notes(robot)
        return jsonify(cache[robot.identity])
