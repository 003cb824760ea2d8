"""Recordings on the Lab and on Sim2Sim: ``/api/recordings`` (lab/record/store.py does the work).

- ``POST /api/recordings`` ``{"max_s", "max_mb", "label"}`` (all optional): start recording the simulation;
  201 with the recording (``id``, state ``recording``); 409 while one records; 507 when the recordings
  folder (``<results>/recordings``) cannot be written;
- ``POST /api/recordings/<id>/stop``: stop it and wait for its file; the recording (a finished one as it is);
- ``GET /api/recordings``: every recording, newest first; ``GET /api/recordings/<id>``: one;
- ``GET /api/recordings/<id>/file``: the ``.mcap`` (409 while it is being written);
- ``DELETE /api/recordings/<id>``: remove the file (409 while it is being written).

A recording: ``id``, ``service``, ``label``, ``started``, ``duration_s`` (recording time: physics steps
x dt), ``bytes``, ``state`` recording | done | failed, ``reason`` (why it ended, in words).
"""

from flask import Blueprint, current_app, jsonify, send_file

from lab.record.store import Recordings, check_options
from lab.settings import default_results_dir
from lab.web.common import json_body, require_token
from lab.web.server import on_stop

bp = Blueprint("recordings", __name__)


def init_app(app, service: str, runner) -> None:
    """Recordings of ``runner()`` (the service's runner as of each request: a model switch replaces it)."""
    settings = app.extensions.get("settings")
    results = settings.results_dir if settings is not None else default_results_dir()
    store = Recordings(results / "recordings", service)
    app.extensions["recordings"] = {"store": store, "runner": runner}
    on_stop(app, store.close)
    app.register_blueprint(bp)


def _store() -> Recordings:
    return current_app.extensions["recordings"]["store"]


@bp.get("/api/recordings")
def api_list():
    return jsonify({"recordings": _store().list()})


@bp.post("/api/recordings")
@require_token
def api_start():
    opts = check_options(json_body(required=False))
    runner = current_app.extensions["recordings"]["runner"]()
    return jsonify(_store().start(runner, **opts)), 201


@bp.get("/api/recordings/<rid>")
def api_one(rid):
    return jsonify(_store().info(rid))


@bp.post("/api/recordings/<rid>/stop")
@require_token
def api_stop(rid):
    return jsonify(_store().stop(rid))


@bp.get("/api/recordings/<rid>/file")
def api_file(rid):
    path = _store().path(rid)
    return send_file(path, mimetype="application/octet-stream", as_attachment=True, download_name=path.name)


@bp.delete("/api/recordings/<rid>")
@require_token
def api_delete(rid):
    return jsonify(_store().delete(rid))
