"""Reading a recording: its metadata, topics and duration, messages over a time range, and the exact state at any time.

``open_recording(path)`` gives a :class:`Recording`. Seeks go through the MCAP chunk index (the python
``mcap`` package's seeking reader): :meth:`Recording.read` decompresses only the chunks that overlap the
range asked for, and :meth:`Recording.state_at` reads the keyframe at or before ``t`` (one every
:data:`~lab.record.format.KEYFRAME_S`) and the per-step inputs from it to ``t``, and steps MuJoCo
there, so that the state is the one the live run had, bit for bit. A file without a summary (cut short
by a full disk) is read linearly.

Times are recording times [s] (``log_time``, see :mod:`lab.record.format`).
"""

import json
from pathlib import Path

import mujoco
import numpy as np
import zstandard
from mcap.reader import make_reader

from lab.errors import LabError
from lab.record import format as fmt

NS = 1_000_000_000


class Recording:
    """One recording file, open for reading (a context manager; :meth:`close` when done)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._f = open(self.path, "rb")  # noqa: SIM115 (closed by close())
            self._reader = make_reader(self._f)
            self.summary = self._reader.get_summary()
            self.metadata = {m.name: dict(m.metadata) for m in self._reader.iter_metadata()}
        except OSError as exc:
            raise LabError(f"cannot read {self.path}: {exc.strerror or exc}", "check the path") from None
        except Exception as exc:
            raise LabError(f"{self.path.name} is not a readable MCAP file: {exc}", "record it again") from None
        meta = self.metadata.get("recording")
        if meta is None:
            self.close()
            raise LabError(f"{self.path.name} is not a lab recording (no 'recording' metadata)", "record it in the Lab")
        self.meta = meta
        self.identity = self.metadata.get("identity", {})
        self.result = self.metadata.get("result")
        self.dt = float(meta["dt"])
        self.dt_ns = int(round(self.dt * NS))
        self.dims = (int(meta["nu"]), int(meta["nv"]), int(meta["nx"]))
        self.exact = meta.get("exact")
        self.engines = json.loads(meta.get("engines", "{}"))
        self.joint_names = json.loads(meta.get("joint_names", "[]"))
        self.key_every = int(round(float(meta["keyframe_s"]) / self.dt))
        self._model = None
        self.topics, end_ns = self._scan_topics()
        self.steps = end_ns // self.dt_ns
        self.duration_s = self.steps * self.dt

    def _scan_topics(self) -> tuple[dict, int]:
        """topic -> {"schema", "encoding", "count"}, and the last log time [ns]."""
        s = self.summary
        if s is not None and s.statistics is not None:
            counts = s.statistics.channel_message_counts
            topics = {
                c.topic: {
                    "schema": s.schemas[c.schema_id].name if c.schema_id else None,
                    "encoding": c.message_encoding,
                    "count": int(counts.get(cid, 0)),
                }
                for cid, c in s.channels.items()
            }
            return topics, int(s.statistics.message_end_time)
        topics, end = {}, 0
        for schema, channel, message in self._reader.iter_messages(log_time_order=False):
            t = topics.setdefault(
                channel.topic,
                {"schema": schema.name if schema else None, "encoding": channel.message_encoding, "count": 0},
            )
            t["count"] += 1
            end = max(end, message.log_time)
        return topics, end

    # ---- messages ------------------------------------------------------------------------------------
    def read(self, topic: str, t0: float | None = None, t1: float | None = None):
        """``(t [s], message)`` of ``topic`` with ``t0 <= t <= t1`` in time order: JSON topics as dicts,
        ``/mujoco/keyframe`` as ``(k, sim_time, kind, state)``, ``/mujoco/inputs`` as ``(k0, rows)``."""
        if topic not in self.topics:
            raise LabError(f"no topic {topic!r} in {self.path.name}", f"topics: {', '.join(sorted(self.topics))}", 404)
        start = None if t0 is None else int(round(t0 * NS))
        end = None if t1 is None else int(round(t1 * NS))
        nu, nv, nx = self.dims
        for _, channel, m in self._reader.iter_messages(topics=[topic], starting_at=start, ending_at=end):
            if channel.message_encoding == "json":
                yield m.log_time / NS, json.loads(m.data)
            elif topic == fmt.KEYFRAME_TOPIC:
                yield m.log_time / NS, fmt.decode_keyframe(m.data)
            elif topic == fmt.INPUTS_TOPIC:
                yield m.log_time / NS, fmt.decode_inputs(m.data, nu, nv, nx)
            else:
                yield m.log_time / NS, m.data

    def events(self) -> list:
        """Every ``/event`` message (dicts with ``t`` [s] of recording time added), in time order."""
        return [{"t": t, **e} for t, e in self.read("/event")] if "/event" in self.topics else []

    def attachments(self) -> list:
        """``(name, media type, bytes)`` of every attachment."""
        return [(a.name, a.media_type, a.data) for a in self._reader.iter_attachments()]

    def model(self) -> mujoco.MjModel:
        """The compiled model the recording was made with (its ``model.mjb.zst`` attachment)."""
        if self._model is None:
            data = next((d for n, _, d in self.attachments() if n == "model.mjb.zst"), None)
            if data is None:
                raise LabError(f"{self.path.name} holds no model (model.mjb.zst)", "record it again")
            self._model = model_from_mjb(zstandard.decompress(data))
        return self._model

    # ---- the exact state -----------------------------------------------------------------------------
    def state_at(self, t: float, data: mujoco.MjData | None = None) -> tuple[np.ndarray, mujoco.MjData]:
        """The exact MuJoCo state (``mjSTATE_INTEGRATION`` vector) at recording time ``t`` [s] (clamped to
        the recording), and an MjData holding it (``data``, or a new one on :meth:`model`): the keyframe at
        or before ``t``, then the recorded inputs of every step from there."""
        if fmt.KEYFRAME_TOPIC not in self.topics:
            raise LabError(f"{self.path.name} holds no MuJoCo state", "only a MuJoCo engine's run is replayed exactly")
        k = int(np.clip(round(t / self.dt), 0, self.steps))
        m = self.model()
        d = data if data is not None else mujoco.MjData(m)
        lo = k - k % self.key_every
        key = None
        while key is None and lo >= 0:
            for _, kf in self.read(fmt.KEYFRAME_TOPIC, lo * self.dt, k * self.dt):
                if kf[0] <= k:
                    key = kf
            lo -= self.key_every
        if key is None:
            raise LabError(f"no keyframe before t={t:g} s in {self.path.name}", "the file is damaged")
        k_key = key[0]
        mujoco.mj_setState(m, d, key[3], fmt.STATE_SPEC)
        if k > k_key:
            step_inputs(m, d, self._inputs(k_key, k), k_key, k)
        out = np.empty(mujoco.mj_stateSize(m, fmt.STATE_SPEC))
        mujoco.mj_getState(m, d, out, fmt.STATE_SPEC)
        return out, d

    def _inputs(self, k_from: int, k_to: int):
        """``(k0, rows)`` of the input blocks that hold steps ``k_from .. k_to - 1``, in order."""
        t0 = (k_from - k_from % fmt.BLOCK) * self.dt
        for _, (k0, rows) in self.read(fmt.INPUTS_TOPIC, t0, (k_to - 1) * self.dt):
            yield k0, rows

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def step_inputs(m, d, blocks, k_from: int, k_to: int) -> int:
    """Step ``d`` from step ``k_from`` to ``k_to`` with the recorded inputs of ``blocks``; the steps taken.
    A missing step raises a :class:`LabError`."""
    k = k_from
    for k0, rows in blocks:
        for i in range(max(0, k - k0), min(len(rows), k_to - k0)):
            if k0 + i != k:
                raise LabError(f"inputs of steps {k} to {k0 + i} are missing", "the file is damaged or cut short")
            mujoco.mj_setState(m, d, rows[i], fmt.INPUT_SPEC)
            mujoco.mj_step(m, d)
            k += 1
        if k >= k_to:
            break
    if k < k_to:
        raise LabError(f"inputs after step {k} are missing (wanted {k_to})", "the file is damaged or cut short")
    return k - k_from


def model_from_mjb(raw: bytes) -> mujoco.MjModel:
    """An MjModel from the bytes of an MJB file."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".mjb") as f:
        f.write(raw)
        f.flush()
        return mujoco.MjModel.from_binary_path(f.name)


def open_recording(path: str | Path) -> Recording:
    """Open the recording at ``path`` (a :class:`LabError` for a missing, unreadable or foreign file)."""
    return Recording(path)


def file_info(path: Path) -> dict:
    """What the recordings list says about a finished file: label, started, service, duration, state, reason."""
    try:
        with Recording(path) as r:
            res = r.result
            info = {k: r.meta.get(k) for k in ("label", "started", "service")}
            info["duration_s"] = round(r.duration_s, 3)
            if res is None:
                info.update(state="failed", reason="the file was cut short (it has no result record)")
            else:
                info.update(state=res.get("state", "done"), reason=res.get("reason"))
            return info
    except LabError as exc:
        return {"duration_s": 0.0, "state": "failed", "reason": exc.message}
