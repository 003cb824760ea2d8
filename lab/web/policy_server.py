"""The policy server (port 8768): a stateless remote controller, observation in, action chunk out.

``POST /predict`` takes one observation (:mod:`lab.remote.policy`) and answers a chunk of ``horizon``
joint-target actions (default 20: 0.4 s at 50 Hz) stamped with the observation's ``observed_at``, the
model identity and a chunk id; a bad observation is a 400 with ``error`` and ``hint``. ``GET /health``
says which model and task it serves. ``python app.py policy-server`` serves it.
"""

from flask import Flask, jsonify

from lab.remote.policy import CONTROL_DT, HORIZON, SquatPolicy, TaskParams
from lab.robots.model import load_robot
from lab.web import make_flask
from lab.web.common import json_body

POLICY_PORT = 8768
ENDPOINTS = "GET /health, POST /predict"


def create_policy_app(model=None, task: TaskParams | None = None, token: str | None = None) -> Flask:
    """The policy server's Flask app for ``model`` (a path, a loaded Robot or None: the built-in Q1)."""
    robot = model if hasattr(model, "identity_dict") else load_robot(model)
    policy = SquatPolicy(robot, task)
    app, _ = make_flask("policy-server", token)
    app.config["LAB_API_HINT"] = f"endpoints: {ENDPOINTS}"
    app.extensions["policy"] = policy

    @app.get("/health")
    def health():
        t = policy.task
        return jsonify(
            {
                "status": "ok",
                "service": "policy-server",
                "model": policy.identity,
                "joint_names": list(robot.joint_names),
                "dt": CONTROL_DT,
                "horizon": HORIZON,
                "task": {
                    "kind": "squat_then_stand",
                    "cycles": t.cycles,
                    "period_s": t.period_s,
                    "depth_m": t.depth_m,
                    "duration_s": t.duration_s,
                },
            }
        )

    @app.post("/predict")
    def predict():  # stateless: changes nothing, so no token
        return jsonify(policy.predict(json_body(label="observation")))

    return app
