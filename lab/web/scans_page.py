"""The scans page and its API (docs/CONTRACT.md "Scans"): launch, list, watch, cancel, resume, download.

``init_app(app, results_dir)`` makes the Lab's one :class:`~lab.scans.manager.ScanManager` (scans
live under ``<results_dir>/scans``; up to :data:`MAX_RUNNING` run at once, sharing the process's warm
workers point by point (:mod:`lab.scans.pool`), the others wait as ``queued``) and stops
its queued and running scans as ``interrupted``, on disk, when the Lab stops (SIGTERM, Ctrl+C:
:func:`lab.web.server.serve` calls the stop functions). Routes that change state carry
:func:`~lab.web.common.require_token`. A point's files are served only when they are regular files
in the point's folder: a symlink is a 404, never followed.

    GET  /scans                                  the page
    GET  /api/scans/kinds                        kinds: parameters with defaults and limits, metrics
    POST /api/scans                              {"kind", "grid": {param: [values] | "a:b:step"}, "search",
                                                  "executor", "workers", "record"} -> 201
    GET  /api/scans                              every scan, newest first: counts and progress, no points
    GET  /api/scans/<id>                         counts, ETA, summary, the points as columns (table), thresholds;
                                                  ?points=1&offset=&limit= a page of points (limit <= 1000)
    POST /api/scans/<id>/cancel                  stop it; running points are killed, finished ones kept
    POST /api/scans/<id>/resume                  run the unfinished points ({"retry_errors": true}: errors too)
    POST /api/scans/<id>/refine                  add and run points along the PASS/FAIL boundary ({"axes": [...]})
    GET  /api/scans/<id>/results.csv | .json     the aggregated table
    GET  /api/scans/<id>/points/<i>              one point's record, its files and output tail
    GET  /api/scans/<id>/points/<i>/<file>       one of its files (summary.json, trace CSV, figure, output.log,
                                                  recording.mcap: replayed at /replay?scan=<id>&point=<i>)
"""

from pathlib import Path

from flask import Blueprint, current_app, jsonify, render_template, request, send_file

from lab.scans.kinds import MAX_POINTS
from lab.scans.manager import ScanManager
from lab.web import scan_recordings
from lab.web.common import json_body, require_token
from lab.web.server import on_stop

bp = Blueprint("scans", __name__)

MIMETYPES = {
    ".png": "image/png",
    ".csv": "text/csv",
    ".json": "application/json",
    ".log": "text/plain",
    ".html": "text/html",
    ".mcap": "application/octet-stream",
}
# Scans the Lab runs at once; the rest queue. On the local warm pool they share its workers (a free worker
# takes the next point of each running scan in turn): several running scans take no more cores than one, and
# a short scan no longer waits behind a long one.
MAX_RUNNING = 4


def _manager() -> ScanManager:
    return current_app.extensions["scans"]


def init_app(
    app, results_dir, model: str | None = None, max_running: int = MAX_RUNNING, kinds: dict | None = None
) -> ScanManager:
    """Register the blueprint and the scan manager on ``app``; scans stop (as interrupted) with the app.

    ``max_running``: scans that run at once (the rest queue); ``kinds``: the kind table (default: built-in)."""
    manager = ScanManager(Path(results_dir), model=model, kinds=kinds, max_running=max_running)
    app.extensions["scans"] = manager
    scan_recordings.init_app(app, manager)  # a point's recording on the replay page
    on_stop(app, manager.shutdown)
    app.register_blueprint(bp)
    return manager


def kinds_list() -> list[dict]:
    return [k.to_dict() for k in _manager().kinds.values()]


@bp.route("/scans")
def page():
    every = kinds_list()
    shown = [k for k in every if not k["hidden"]]
    return render_template(
        "scans.html",
        page="scans",
        kinds=shown,
        all_kinds=every,
        max_points=MAX_POINTS,
        max_running=_manager().max_running,
    )


@bp.get("/api/scans/kinds")
def kinds():
    return jsonify(
        {
            "kinds": kinds_list(),
            "max_points": MAX_POINTS,
            "executors": ["local", "ray"],
            "max_running": _manager().max_running,
        }
    )


@bp.post("/api/scans")
@require_token
def create():
    scan = _manager().create(json_body())
    return jsonify(scan), 201


@bp.get("/api/scans")
def list_scans():
    return jsonify({"scans": _manager().list_scans()})


@bp.get("/api/scans/<scan_id>")
def get(scan_id):
    return jsonify(_manager().get_page(scan_id, request.args.to_dict()))


@bp.post("/api/scans/<scan_id>/cancel")
@require_token
def cancel(scan_id):
    return jsonify(_manager().cancel(scan_id))


@bp.post("/api/scans/<scan_id>/refine")
@require_token
def refine(scan_id):
    return jsonify(_manager().refine(scan_id, json_body(required=False)))


@bp.post("/api/scans/<scan_id>/resume")
@require_token
def resume(scan_id):
    return jsonify(_manager().resume(scan_id, json_body(required=False)))


@bp.get("/api/scans/<scan_id>/results.<any(csv, json):ext>")
def results(scan_id, ext):
    path = _manager().results_path(scan_id, ext)
    return send_file(
        path, mimetype=MIMETYPES[f".{ext}"], as_attachment=False, download_name=f"{scan_id}-results.{ext}", max_age=0
    )


@bp.get("/api/scans/<scan_id>/points/<int:index>")
def point(scan_id, index):
    return jsonify(_manager().point(scan_id, index))


@bp.get("/api/scans/<scan_id>/points/<int:index>/<name>")
def point_file(scan_id, index, name):
    f, name = _manager().open_point_file(scan_id, index, name)  # opened without following links
    return send_file(
        f, mimetype=MIMETYPES.get(Path(name).suffix, "application/octet-stream"), download_name=name, max_age=0
    )
