"""The 3D view over WS ``/ws``: each viewer's own camera, overlays, picking and (the Lab) the mouse pull.

Client -> server messages (answered on the same socket; a malformed one gets ``{"type": "error",
"about": TYPE, "error", "hint"}`` and changes nothing):

- ``{"type": "camera", ...}`` (:data:`lab.render.camera.CAMERA_HINT`): orbit / pan / zoom by deltas
  (fractions of the view), absolute angles, follow on/off, reset. Answered with ``{"type": "camera",
  azimuth, elevation, distance, lookat, follow, body, body_name, shared}``. A viewer's camera moves
  only its own picture; viewers whose cameras are the same (the default one, say) share renders
  (``shared``: on the default camera). In Sim2Sim one camera moves every view of the client.
- ``{"type": "overlays", "on": [NAME, ...]}`` (:data:`lab.render.overlays.OVERLAYS`), answered with
  ``{"type": "overlays", "on": [...]}``.
- ``{"type": "pick", "x", "y", "view"}`` (x, y in [0, 1] of the view, 0, 0 top left): the body under
  that point; the camera re-centres on it (and follows it when following). Answered with
  ``{"type": "picked", "body", "body_id", "point"}`` (``body`` null: nothing there).
- ``{"type": "perturb", "phase": "start" | "move" | "end", "x", "y"}`` (the Lab only): pull the body
  under the cursor with a limited spring (:mod:`lab.runtime.perturb`) towards the point under the
  cursor on the plane through the grabbed point facing the camera. Needs a trusted client (the
  token, when the Lab has one: ``{"type": "auth", "token"}``). Answered with ``{"type": "perturb",
  "active", "body", "max_n"}``; the pull ends when released, when the viewer goes away or after 5 s
  without a move.
"""

import dataclasses
import math

import mujoco
import numpy as np

from lab.errors import LabError
from lab.render.camera import CameraSpec, camera_axes, moved
from lab.render.overlays import OVERLAYS
from lab.render.renderer import REF_SPAN, robot_span

PICK_HINT = '{"type": "pick", "x": 0.5, "y": 0.5} with x, y in [0, 1] of the view (0, 0 top left)'
PERTURB_HINT = '{"type": "perturb", "phase": "start" | "move" | "end", "x": 0..1, "y": 0..1}'
AUTH_HINT = 'send {"type": "auth", "token": TOKEN} first (the --token value)'


def view_extension(model_fn, session_fn=None):
    """``fn(*_) -> (handlers, tickers)`` for :func:`lab.web.stream.ws_loop`: camera, overlays, pick and,
    with ``session_fn`` (the Lab's live :class:`~lab.runtime.session.SimSession`), perturb.
    ``model_fn()`` is the robot's ``MjModel`` now (the Lab may switch models)."""

    def make(*_):
        model = model_fn()
        size = robot_span(model, mujoco.MjData(model)) / REF_SPAN
        default = CameraSpec.default(size)
        names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or f"body {b}" for b in range(model.nbody)]

        def answer_camera(client):
            spec = client.state.get("camera")
            shown = spec or default
            client.send(
                {
                    "type": "camera",
                    **shown.to_dict(),
                    "body_name": names[shown.body] if 0 <= shown.body < len(names) else None,
                    "shared": spec is None,
                }
            )

        def rejoin(client, spec, overlays) -> None:
            """Move every view of ``client`` to the channel of ``spec`` (None: the default camera) and ``overlays``."""
            if spec is not None and spec.key() == default.key():
                spec = None
            ev = client.state["_event"]
            joined = {}
            try:
                for view, hub in client.hubs.items():
                    joined[view] = hub.join(ev, spec, overlays, like=client.views[view])
            except LabError:
                for view, ch in joined.items():
                    if ch is not client.views[view]:
                        ch.unsubscribe(ev)
                raise
            for view, ch in joined.items():
                old = client.views[view]
                client.views[view] = ch
                if old is not ch:
                    old.unsubscribe(ev)
            client.state["camera"], client.state["overlays"] = spec, frozenset(overlays)

        def lookat_now(client):
            ch = next(iter(client.views.values()))
            if ch.camera is not None:
                return ch.camera.lookat
            hub = next(iter(client.hubs.values()))
            r = getattr(hub.source, "renderer", None)
            return None if r is None else np.array(r.camera.lookat, dtype=float)

        def on_camera(client, msg):
            cur = client.state.get("camera") or default
            spec = moved(cur, msg, size, default, lookat_now(client))
            rejoin(client, spec, client.state.get("overlays", frozenset()))
            answer_camera(client)

        def on_overlays(client, msg):
            on = msg.get("on")
            if not isinstance(on, list) or len(on) > len(OVERLAYS) or not all(isinstance(n, str) for n in on):
                raise LabError("overlays on must be a list of overlay names", f"names: {', '.join(OVERLAYS)}")
            bad = [n for n in on if n not in OVERLAYS]
            if bad:
                raise LabError(f"unknown overlay {bad[0][:40]!r}", f"names: {', '.join(OVERLAYS)}")
            rejoin(client, client.state.get("camera"), frozenset(on))
            client.send({"type": "overlays", "on": sorted(client.state["overlays"])})

        def point_of(client, msg, hint) -> tuple:
            x, y = msg.get("x"), msg.get("y")
            for v in (x, y):
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or not 0 <= v <= 1:
                    raise LabError(f"x and y must be numbers in [0, 1], got {str(x)[:20]}, {str(y)[:20]}", hint)
            view = msg.get("view", next(iter(client.views)))
            if view not in client.views:
                raise LabError(f"unknown view {str(view)[:40]!r}", f"views of this stream: {', '.join(client.views)}")
            return float(x), float(y), view

        def select(client, view, x, y):
            """``(body, point, camera pose)`` under (x, y) in ``view`` as last drawn, or None."""
            ch, hub = client.views[view], client.hubs[view]

            def run(src):
                r = src.renderer
                hit = r.select(ch.camera, x, y)
                cam = r.camera if ch.camera is None else ch.camera.mjv
                pose = (
                    np.array(cam.lookat, dtype=float),
                    float(cam.distance),
                    float(cam.azimuth),
                    float(cam.elevation),
                )
                return hit, pose, r.width / r.height

            return hub.call(run)

        def on_pick(client, msg):
            x, y, view = point_of(client, msg, PICK_HINT)
            hit, _, _ = select(client, view, x, y)
            if hit is None:
                client.send({"type": "picked", "body": None, "body_id": None, "point": None})
                return
            body, point = hit
            cur = client.state.get("camera") or default
            spec = dataclasses.replace(cur, lookat=tuple(float(v) for v in point), body=body)
            rejoin(client, spec, client.state.get("overlays", frozenset()))
            client.send(
                {"type": "picked", "body": names[body], "body_id": body, "point": [round(float(v), 4) for v in point]}
            )
            answer_camera(client)

        def on_perturb(client, msg):
            session = session_fn()
            phase = msg.get("phase")
            if phase not in ("start", "move", "end"):
                raise LabError(f"perturb phase must be start, move or end, got {str(phase)[:20]!r}", PERTURB_HINT)
            if phase == "end":
                event = session.perturb_end(owner=client)
                client.send({"type": "perturb", "active": False, "event": event})
                return
            if not client.trusted:
                raise LabError("pulling the robot needs the Lab's token", AUTH_HINT, 401)
            x, y, view = point_of(client, msg, PERTURB_HINT)
            if phase == "start":
                hit, pose, aspect = select(client, view, x, y)
                if hit is None:
                    client.send({"type": "perturb", "active": False, "body": None})
                    return
                body, point = hit
                client.state["perturb"] = {"plane": point, "pose": pose, "aspect": aspect}
                session.perturb_start(body, point, point, owner=client)
                client.send(
                    {"type": "perturb", "active": True, "body": names[body], "max_n": session.perturbation.max_n}
                )
                return
            grab = client.state.get("perturb")
            if grab is None:
                raise LabError("no perturbation to move", "start one first: phase start", 409)
            target = drag_target(grab["pose"], model.vis.global_.fovy, grab["aspect"], grab["plane"], x, y)
            if target is not None and not session.perturb_move(target, owner=client):
                client.state.pop("perturb", None)
                client.send({"type": "perturb", "active": False, "body": None})

        def on_close(client):
            if session_fn is not None and client.state.get("perturb") is not None:
                session_fn().perturb_end(owner=client, why="viewer left")

        handlers = {"camera": on_camera, "overlays": on_overlays, "pick": on_pick, "close": on_close}
        if session_fn is not None:
            handlers["perturb"] = on_perturb
        return handlers, []

    return make


def drag_target(pose, fovy_deg: float, aspect: float, plane_point, x: float, y: float) -> np.ndarray | None:
    """The world point (3,) under image point (x, y) on the plane through ``plane_point`` facing the camera
    ``pose`` = ``(lookat (3,), distance, azimuth, elevation)``; None when the ray runs along the plane."""
    lookat, dist, az, el = pose
    fwd, right, up = camera_axes(az, el)
    eye = lookat - dist * fwd
    t = math.tan(math.radians(fovy_deg) / 2.0)
    ray = fwd + (2.0 * x - 1.0) * t * aspect * right + (1.0 - 2.0 * y) * t * up
    den = float(ray @ fwd)
    if abs(den) < 1e-9:
        return None
    s = float((np.asarray(plane_point) - eye) @ fwd) / den
    return eye + s * ray
