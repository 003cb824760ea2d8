"""The model picker's API, on the Lab and on Sim2Sim: list the models, switch the running one, upload a zip.

- ``GET /api/models`` -> ``{"models": [...], "current": id, "folder": ...}``: the built-in robot, the
  ``--model`` file (when it is outside the folder) and every model under the models folder
  (``--models DIR``, default ``<results>/models``); each with ``usable`` (Sim2Sim: URDFs only);
- ``POST /api/model {"id"}`` (token): switch without restarting the process. The new robot is loaded in
  the request thread first; a model that fails is a 400 with the loader's one line and the running
  simulation is untouched. Then a new runner (the Lab's ``SimSession``, Sim2Sim's ``Lockstep``) is
  built, the frame hubs are pointed at it (each renderer is rebuilt in its hub thread, where its GL
  context lives), the runner is started and swapped into ``app.extensions`` (every route reads it from
  there at request time), and the old one is stopped. One switch at a time: another one meanwhile is a 409;
- ``POST /api/models/upload`` (token): a zip as the raw body (``application/zip``) or as the multipart
  field ``file`` (optional field ``model``: which model file, if it holds several); extracted safely by
  :func:`lab.robots.library.extract_zip`, the model loaded to check it, then listed: 201 with its entry.
  The size is checked from ``Content-Length`` before anything is read, and again while reading.
"""

import threading

from flask import Blueprint, current_app, jsonify, request

from lab.errors import LabError
from lab.robots import library
from lab.robots.library import BUILTIN_ID, ModelEntry
from lab.web import common
from lab.web.common import json_body, require_token
from lab.web.server import on_stop

UPLOAD_PATH = "/api/models/upload"
UPLOAD_TYPES = ("application/zip", "application/x-zip-compressed", "application/octet-stream", "multipart/form-data")
MULTIPART_SLACK = 64 * 1024  # [bytes] multipart headers and boundaries on top of the zip itself
RETARGET_TIMEOUT_S = 10.0  # [s] a hub thread gets to rebuild its renderer
SIM2SIM_URDF_HINT = "Sim2Sim loads the same file in MuJoCo and PyBullet; PyBullet reads URDF only"


def upload_limit() -> int:
    return current_app.extensions["models"]["max_upload"]


# --- the request guard, with the upload route's own body type and size ---------------------------


def _check_upload_body():
    """The upload route's body (Host and Origin are checked first by :func:`lab.web.common.guard_request`): a
    zip or a multipart form (415 otherwise) of at most the upload limit (413 before reading)."""
    limit = upload_limit() + MULTIPART_SLACK
    length = request.content_length
    if length is not None and length > limit:
        return common.error(f"upload is {length} bytes; at most {upload_limit()} accepted", library.UPLOAD_HINT, 413)
    if not length and "chunked" not in request.headers.get("Transfer-Encoding", "").lower():
        return None  # no body: the route says so (400)
    if request.mimetype not in UPLOAD_TYPES:
        ctype = request.headers.get("Content-Type")
        got = f"'{ctype[:100]}'" if ctype is not None else "a body with no Content-Type"
        return common.error(
            f"expected Content-Type application/zip or multipart/form-data, got {got}",
            "send the zip as the body (Content-Type: application/zip) or as the form field 'file'",
            415,
        )
    return None


def _read_upload() -> tuple[bytes, str | None, str | None]:
    """(zip bytes, file name, the form's ``model`` field) of this request, reading at most the limit."""
    limit = upload_limit()
    request.max_content_length = limit + MULTIPART_SLACK + 1
    if request.mimetype == "multipart/form-data":
        try:
            f = request.files.get("file")
            wanted = request.form.get("model") or None
        except Exception as exc:  # werkzeug: a broken form, or past the limit while parsing
            code = getattr(exc, "code", None)
            if code == 413:
                raise LabError(f"upload is longer than {limit} bytes", library.UPLOAD_HINT, 413) from None
            raise LabError(f"malformed multipart form: {str(exc)[:100]}", library.UPLOAD_HINT) from None
        if f is None:
            raise LabError("multipart form has no field 'file'", "send the zip as the form field 'file'")
        data = f.stream.read(limit + 1)
        name = f.filename
    else:
        chunks, total = [], 0
        try:
            while total <= limit:
                chunk = request.stream.read(64 * 1024)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        except Exception as exc:
            if getattr(exc, "code", None) == 413:
                raise LabError(f"upload is longer than {limit} bytes", library.UPLOAD_HINT, 413) from None
            raise
        data = b"".join(chunks)
        name = request.args.get("name") or request.headers.get("X-Filename")
        wanted = request.args.get("model") or None
    if len(data) > limit:
        raise LabError(f"upload is longer than {limit} bytes; at most {limit} accepted", library.UPLOAD_HINT, 413)
    if not data:
        raise LabError("request body is empty", "send a .zip of the robot's folder")
    return data, name, wanted


# --- the service-specific halves: load a robot, build and swap a runner --------------------------


def _loader(service: str):
    if service == "sim2sim":
        from lab.runtime.lockstep import load_sim2sim_robot

        return load_sim2sim_robot
    from lab.robots.model import load_robot

    return load_robot


def _retarget(hubs_sources: list, attr: str, runner, model) -> list:
    """Point each source at ``runner`` with a renderer of ``model``, in its hub thread; the errors."""
    from lab.render.renderer import Renderer

    jobs = []
    for hub, src in hubs_sources:
        done, errors = threading.Event(), []

        def fn(s, done=done, errors=errors):
            try:
                if s.renderer is not None:
                    new = Renderer(model, s.width, s.height, s.preset)
                    old, s.renderer = s.renderer, new
                    old.close()
                setattr(s, attr, runner)
            except Exception as exc:  # keep the hub alive; the switch is undone
                errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                done.set()

        thread = getattr(hub, "_thread", None)
        if hub.error is None and thread is not None and thread.is_alive():
            hub.submit(fn)
            jobs.append((done, errors))
        else:  # the hub has no thread (its renderer failed to start): nothing renders, just repoint
            setattr(src, attr, runner)
    problems = []
    for done, errors in jobs:
        if not done.wait(RETARGET_TIMEOUT_S):
            problems.append("timeout")
        problems += errors
    return problems


def _switch_lab(app, path):
    from lab.runtime.session import SimSession

    c = app.extensions["lab"]
    robot = _loader("lab")(path)
    old = c["session"]
    mode = app.extensions["settings"].mode
    mode = mode if mode in old.modes else next(iter(old.modes))
    session = _build(lambda: SimSession(robot, mode=mode, modes=old.modes, rtf=old.rtf), robot)
    problems = _retarget([(c["hub"], c["source"])], "session", session, robot.model)
    if problems and "timeout" not in problems:
        _retarget([(c["hub"], c["source"])], "session", old, old.robot.model)
        session.close()
        raise LabError(f"the view cannot render {robot.path.name}: {problems[0]}", "the running model is kept")
    session.start()
    c["robot"], c["session"] = robot, session
    if problems:
        old.stop()  # its renderer may still be drawing from it until the hub gets to the switch
    else:
        old.close()
    return robot


def _switch_sim2sim(app, path):
    from lab.runtime.lockstep import Lockstep

    c = app.extensions["sim2sim"]
    robot = _loader("sim2sim")(path)
    old = c["lockstep"]
    mode = "stand" if "stand" in old.modes else next(iter(old.modes))
    ls = _build(lambda: Lockstep(robot, mode=mode, modes=old.modes, rtf=old.rtf), robot)
    pairs = [(c["hubs"][v], c["sources"][v]) for v in c["hubs"]]
    problems = _retarget(pairs, "lockstep", ls, robot.model)
    if problems and "timeout" not in problems:
        _retarget(pairs, "lockstep", old, old.robot.model)
        ls.close()
        raise LabError(f"the views cannot render {robot.path.name}: {problems[0]}", "the running model is kept")
    ls.start()
    c["lockstep"] = ls
    if problems:
        old.stop()
    else:
        old.close()
    return robot


def _build(make, robot):
    """A new runner for ``robot``; any failure is a 400 naming the model (the running one is untouched)."""
    try:
        return make()
    except LabError:
        raise
    except Exception as exc:
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise LabError(
            f"model {robot.path.name} loads but cannot run: {type(exc).__name__}: {line}",
            "check the model in MuJoCo's simulate viewer",
        ) from exc


# --- the listing ----------------------------------------------------------------------------------


def _entries() -> list[ModelEntry]:
    m = current_app.extensions["models"]
    entries = library.list_models(m["folder"])
    if m["startup"] is not None and all(e.id != m["startup"].id for e in entries):
        entries.insert(1, m["startup"])
    return entries


def _usable(entry: ModelEntry, service: str) -> bool:
    return entry.kind == "urdf" or service != "sim2sim"


def _entry_dict(entry: ModelEntry, service: str, current: str) -> dict:
    return {**entry.to_dict(), "usable": _usable(entry, service), "current": entry.id == current}


def _startup_entry(model: str | None, folder) -> tuple[ModelEntry | None, str]:
    """The ``--model`` file as an entry (None when it is the built-in robot) and the id it has."""
    from pathlib import Path

    if not model:
        return None, BUILTIN_ID
    p = Path(model).expanduser().resolve()
    for e in library.list_models(folder, include_builtin=False):
        if e.path == p:
            return None, e.id
    kind = "urdf" if p.suffix.lower() == ".urdf" else "mjcf"
    size = p.stat().st_size if p.is_file() else 0
    return ModelEntry("startup", f"{p.name} (--model)", p, kind, size), "startup"


def models_blueprint(service: str) -> Blueprint:
    bp = Blueprint(f"{service}_models", __name__)

    @bp.get("/api/models")
    def api_models():
        m = current_app.extensions["models"]
        entries = _entries()
        return jsonify(
            {
                "models": [_entry_dict(e, service, m["current"]) for e in entries],
                "current": m["current"],
                "folder": str(m["folder"]),
                "service": service,
                "max_upload": m["max_upload"],
            }
        )

    @bp.post("/api/model")
    @require_token
    def api_model():
        body = json_body()
        entry = library.get_model(_entries(), body.get("id"))
        if not _usable(entry, service):
            raise LabError(
                f"Sim2Sim needs a URDF: '{entry.name}' is an MJCF model (use it on the Lab)", SIM2SIM_URDF_HINT
            )
        m = current_app.extensions["models"]
        if not m["switch_lock"].acquire(blocking=False):
            raise LabError("another model switch is in progress", "wait for it to finish, then try again", 409)
        try:
            app = current_app._get_current_object()
            path = None if entry.id == BUILTIN_ID else entry.path
            robot = (_switch_sim2sim if service == "sim2sim" else _switch_lab)(app, path)
            m["current"] = entry.id
            app.extensions.pop("lab_openapi_spec", None)  # its enums (joint names) follow the new robot
        finally:
            m["switch_lock"].release()
        return jsonify(
            {"current": entry.id, "model": _entry_dict(entry, service, entry.id), "identity": robot.identity_dict()}
        )

    @bp.post(UPLOAD_PATH)
    @require_token
    def api_upload():
        m = current_app.extensions["models"]
        data, name, wanted = _read_upload()
        if not m["upload_lock"].acquire(blocking=False):
            raise LabError("another upload is being checked", "wait for it to finish, then try again", 409)
        try:
            folder = library.extract_zip(data, m["folder"], max_bytes=m["max_upload"], name=name)
            try:
                model = library.find_model(folder, wanted)
                robot = _loader(service if model.suffix.lower() == ".urdf" else "lab")(model)
                library.check_inside(folder, model, robot.assets)
            except Exception:
                library.remove_upload(folder, m["folder"])
                raise
        finally:
            m["upload_lock"].release()
        entry = next((e for e in _entries() if e.path == model.resolve()), None)
        if entry is None:  # listed nowhere (too deep, too many models): say so rather than 201 a ghost
            library.remove_upload(folder, m["folder"])
            raise LabError(f"model {model.name} is too deep in the zip to be listed", "put the model near the top")
        return jsonify({"model": _entry_dict(entry, service, m["current"])}), 201

    return bp


def init_app(app, service: str, max_upload: int = library.MAX_UPLOAD) -> None:
    """The picker's routes on ``app`` (``service``: "lab" or "sim2sim"); call after ``app.extensions[service]``."""
    settings = app.extensions["settings"]
    folder = settings.models_folder.expanduser().resolve()
    startup, current = _startup_entry(settings.model, folder)
    app.extensions["models"] = {
        "service": service,
        "folder": folder,
        "startup": startup,
        "current": current,
        "max_upload": int(max_upload),
        "switch_lock": threading.Lock(),
        "upload_lock": threading.Lock(),
    }
    common.body_rule(app, UPLOAD_PATH, _check_upload_body)
    app.register_blueprint(models_blueprint(service))

    # the runner running at shutdown may be a switched-in one, not the one the app factory registered
    def stop_current():
        if service == "sim2sim":
            app.extensions["sim2sim"]["lockstep"].close()
        else:
            app.extensions["lab"]["session"].stop()

    on_stop(app, stop_current)
