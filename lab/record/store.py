"""The recordings of one service: ``<results>/recordings/<id>.mcap``, at most one being recorded at a time.

:class:`Recordings` starts a recording of a runner (:meth:`Recordings.start`), stops it, lists, describes
and deletes the files. What a finished file says about itself (its ``recording`` and ``result`` metadata,
its duration) is read from the file once and kept while the file is unchanged.
"""

import contextlib
import json
import re
import secrets
import threading
import time
from pathlib import Path

import mujoco
import numpy as np
import zstandard

from lab.errors import LabError
from lab.record import format as fmt
from lab.record.process import RecordingFile, file_size
from lab.record.reader import file_info
from lab.record.recorder import Recorder

DEFAULT_MAX_S = 600.0  # [s] of recording time
DEFAULT_MAX_MB = 500.0  # [MB] file size
MAX_S_RANGE = (0.01, 86400.0)
MAX_MB_RANGE = (1.0, 100_000.0)
LABEL_MAX = 80
ID_RE = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$")
FORMAT = "lab-recording/1"


def model_attachments(robot) -> tuple[list, dict]:
    """The model as attachments: the compiled MjModel (``model.mjb.zst``, what replay loads), the model file,
    its assets and its sidecar; and the names of the asset attachments -> their paths (for the identity)."""
    m = robot.model
    mjb = np.empty(mujoco.mj_sizeModel(m), dtype=np.uint8)
    mujoco.mj_saveModel(m, None, mjb)
    out = [("model.mjb.zst", "application/zstd", zstandard.compress(mjb.tobytes(), 10))]
    out.append((f"model/{robot.path.name}", "application/xml", robot.path.read_bytes()))
    assets = {}
    for i, a in enumerate(sorted(set(robot.assets))):
        name = f"model/assets/{i:03d}_{Path(a).name}"
        assets[name] = str(a)
        out.append((name, "application/octet-stream", Path(a).read_bytes()))
    sidecar = Path(str(robot.path) + ".lab.json")
    if sidecar.is_file():
        out.append((f"model/{sidecar.name}", "application/json", sidecar.read_bytes()))
    return out, assets


def _exact_engine(runner) -> str | None:
    """The first engine with a MuJoCo state (``model``, ``data``): the one replayed bit-exactly."""
    for n, e in runner.engines.items():
        if isinstance(getattr(e, "data", None), mujoco.MjData):
            return n
    return None


def check_options(body: dict) -> dict:
    """``{"max_s", "max_mb", "label"}`` of a start request, checked; a :class:`LabError` says what is wrong."""
    known = ("max_s", "max_mb", "label")
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise LabError(f"unknown field(s): {', '.join(unknown)}", f"accepted: {', '.join(known)}")
    out = {"max_s": DEFAULT_MAX_S, "max_mb": DEFAULT_MAX_MB, "label": ""}
    for key, (lo, hi), unit in (("max_s", MAX_S_RANGE, "s"), ("max_mb", MAX_MB_RANGE, "MB")):
        if key in body:
            v = body[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise LabError(f"{key} {v!r} is outside [{lo:g}, {hi:g}] {unit}", f'e.g. {{"{key}": {out[key]:g}}}')
            out[key] = float(v)
    label = body.get("label", "")
    if not isinstance(label, str) or len(label) > LABEL_MAX:
        raise LabError(f"label must be a string of at most {LABEL_MAX} characters", 'e.g. {"label": "push at 40 N"}')
    out["label"] = label
    return out


class Recordings:
    """The recordings of service ``service`` in ``folder``."""

    def __init__(self, folder: Path, service: str):
        self.folder = Path(folder)
        self.service = service
        self._lock = threading.Lock()
        self._active: dict = {}  # id -> (Recorder, info dict)
        self._infos: dict = {}  # id -> ((size, mtime), info) of finished files
        self._outcomes: dict = {}  # id -> Outcome of the recordings this service ended (a salvaged file has no result record)

    # ---- recording -----------------------------------------------------------------------------------
    def start(self, runner, *, max_s: float = DEFAULT_MAX_S, max_mb: float = DEFAULT_MAX_MB, label: str = "") -> dict:
        """Record ``runner`` from now on; its info. 409 while one records; 507 when the folder cannot be written."""
        with self._lock:
            if self._active:
                rid = next(iter(self._active))
                raise LabError(
                    f"recording {rid} is still running", f"stop it first: POST /api/recordings/{rid}/stop", 409
                )
            rid = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
            path = self.folder / f"{rid}.mcap"
            exact = _exact_engine(runner)
            robot = runner.robot
            started = time.time()
            info = {
                "id": rid,
                "service": self.service,
                "label": label,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                "file": path.name,
                "max_s": max_s,
                "max_mb": max_mb,
                "exact": exact,
            }
            rec_file = self._open(path, runner, robot, exact, info, max_mb)
            rec = Recorder(runner, rec_file, exact=exact, max_s=max_s, on_end=lambda r, rid=rid: self._ended(rid))
            self._active[rid] = (rec, info)
            rec_file.start()
            runner.read(lambda _: rec.attach())
            return self._active_info(rid)

    def _open(self, path: Path, runner, robot, exact, info: dict, max_mb: float) -> RecordingFile:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            attachments, assets = model_attachments(robot)
            dims = None
            if exact is not None:
                m = runner.engines[exact].model
                dims = (int(m.nu), int(m.nv), int(m.nbody) * 6)
            topics = {}
            for i, n in enumerate(runner.names):
                prefix = "" if i == 0 else f"/{n}"
                topics.update({prefix + t: s for t, s in fmt.TOPICS.items()})
            topics.update(fmt.SERVICE_TOPICS)
            extra = fmt.extra_topics(runner)
            topics.update({t: schema["title"] for t, schema in extra.items()})
            m = robot.model
            head = {
                "recording": {
                    **{k: str(v) for k, v in info.items() if v is not None},
                    "format": FORMAT,
                    "dt": repr(runner.dt),
                    "engines": json.dumps(
                        {n: {"name": e.name, "version": e.version} for n, e in runner.engines.items()}
                    ),
                    "joint_names": json.dumps(list(robot.joint_names)),
                    "mode": runner.mode_name,
                    "keyframe_s": repr(fmt.KEYFRAME_S),
                    "block": str(fmt.BLOCK),
                    "digits": str(fmt.DIGITS),
                    "nu": str(m.nu),
                    "nv": str(m.nv),
                    "nx": str(m.nbody * 6),
                    "nstate": str(mujoco.mj_stateSize(m, fmt.STATE_SPEC)),
                    "state_spec": str(fmt.STATE_SPEC),
                    "input_spec": str(fmt.INPUT_SPEC),
                    "assets": json.dumps(assets),
                },
                "identity": {k: str(v) for k, v in robot.identity_dict().items()},
            }
            return RecordingFile(
                path,
                head=head,
                attachments=attachments,
                dims=dims,
                topics=topics,
                schemas={schema["title"]: schema for schema in extra.values()},
                dt=runner.dt,
                max_bytes=int(max_mb * 1e6),
                names=list(robot.joint_names),
                weight=float(robot.model.body_mass.sum() * np.linalg.norm(robot.model.opt.gravity)),
            )
        except OSError as exc:
            with contextlib.suppress(OSError):  # a file begun before the failure
                path.unlink(missing_ok=True)
            raise LabError(
                f"cannot write recordings to {self.folder}: {exc.strerror or exc}",
                "make the folder writable, free some disk space, or start the service with another results folder",
                507,
            ) from None

    def _ended(self, rid: str) -> None:
        """A recorder ended (any thread): once its file is finished, it is listed from the file."""

        def wait():
            rec, _ = self._active[rid]
            rec.file.join()
            with self._lock:
                self._outcomes[rid] = rec.file.outcome or rec.outcome
                self._active.pop(rid, None)

        threading.Thread(target=wait, name=f"recording {rid} end", daemon=True).start()

    def stop(self, rid: str) -> dict:
        """Stop recording ``rid`` and wait for its file; its info (a finished one is left as it is)."""
        self._check_id(rid)
        with self._lock:
            active = self._active.get(rid)
        if active is not None:
            outcome = active[0].stop("stopped")
            with self._lock:
                self._outcomes[rid] = outcome
                self._active.pop(rid, None)
        return self.info(rid)

    def close(self, reason: str = "the service stopped") -> None:
        """Stop every recording (the service is stopping)."""
        with self._lock:
            recs = [rec for rec, _ in self._active.values()]
        for rec in recs:
            rec.stop(reason)

    # ---- reading -------------------------------------------------------------------------------------
    def _active_info(self, rid: str) -> dict:
        rec, info = self._active[rid]
        state = "recording"
        reason = None
        if rec.ended:  # ended, its file being finished
            out = rec.file.outcome or rec.outcome
            state, reason = out.state, out.reason
        return {
            **info,
            "duration_s": round(rec.k * rec.dt, 3),
            "bytes": rec.file.bytes,
            "state": state,
            "reason": reason,
        }

    def _check_id(self, rid: str) -> None:
        if not ID_RE.match(rid or ""):
            raise LabError(f"no recording {rid[:40]!r}", "ids look like 20250101-120000-ab12: GET /api/recordings", 404)

    def path(self, rid: str) -> Path:
        """The file of finished recording ``rid``; 404 for none, 409 while it is being recorded."""
        self._check_id(rid)
        with self._lock:
            if rid in self._active:
                raise LabError(
                    f"recording {rid} is still being written", f"stop it first: POST /api/recordings/{rid}/stop", 409
                )
        p = self.folder / f"{rid}.mcap"
        if not p.is_file():
            raise LabError(f"no recording {rid}", "GET /api/recordings lists them", 404)
        return p

    def info(self, rid: str) -> dict:
        self._check_id(rid)
        with self._lock:
            if rid in self._active:
                return self._active_info(rid)
        return self._file_info(self.path(rid))

    def _file_info(self, p: Path) -> dict:
        rid = p.stem
        try:
            st = p.stat()
        except OSError:
            raise LabError(f"no recording {rid}", "GET /api/recordings lists them", 404) from None
        key = (st.st_size, st.st_mtime_ns)
        cached = self._infos.get(rid)
        if cached is not None and cached[0] == key:
            return cached[1]
        info = {"id": rid, "service": self.service, "label": "", "started": None, "file": p.name}
        info.update(file_info(p))
        out = self._outcomes.get(rid)
        if out is not None and info.get("state") == "failed" and out.state == "failed":
            info["reason"] = out.reason  # the file could not say why: this service saw it
        info["bytes"] = file_size(p)
        self._infos[rid] = (key, info)
        return info

    def list(self) -> list:
        """Every recording, newest first: the one being recorded and the files."""
        with self._lock:
            active = {rid: self._active_info(rid) for rid in self._active}
        out = list(active.values())
        if self.folder.is_dir():
            for p in sorted(self.folder.glob("*.mcap"), reverse=True):
                if p.stem not in active and ID_RE.match(p.stem):
                    out.append(self._file_info(p))
        return sorted(out, key=lambda i: i["id"], reverse=True)

    def delete(self, rid: str) -> dict:
        """Remove finished recording ``rid``; 409 while it is being recorded."""
        p = self.path(rid)
        p.unlink()
        self._infos.pop(rid, None)
        return {"deleted": rid}
