"""The writer process of a recording: builds the MCAP file from what the simulation process sends it.

:class:`lab.record.process.RecordingFile` starts it as ``python -m lab.record.writer`` (a fresh interpreter,
nothing of the simulation process is forked) and feeds it through its stdin; it answers on its stdout. So the
JSON encoding, the MCAP records and zstd run beside the simulation instead of holding its GIL.

The wire: frames of a ``<I`` length and a payload (:func:`write_frame`, :func:`read_frame`).

- in: first the head (a pickled dict: the keyword arguments of :class:`McapWriter`), answered ``("ready",
  bytes)`` once the file's head is written or ``("error", errno, strerror)``; then batches, each a pickled list
  of items (below), the last one ``("close", state, reason)``. End of input without it: the simulation process
  went away, the file is finished ``failed``.
- out: ``("free", slot)`` when an input buffer is done with, ``("good", bytes)`` now and then (the file up to
  there is whole records of the data section: where a file is cut back to if this process dies), ``("end",
  state, reason)`` when this process ends the recording by itself (the size limit; a write that failed), and
  last ``("done", state, reason, bytes)``: the file is finished and closed.

The per-step inputs do not travel through the pipe: they are in a shared memory ``pool`` (a memfd of ``slots``
buffers of ``rows x width`` float64, mapped by both processes); ``("rows", k, slot, a, b, last)`` says that rows
``a:b`` of buffer ``slot`` hold the inputs of steps ``k ..`` (``last``: the simulation is done with that buffer).
Other items: ``("key", k, sim_time, kind, state bytes)``, ``("metrics", k, sim_time, sample dict)``, ``("snap", k,
mode, [(prefix, sim_time, sizes, numbers bytes, enabled, push bytes or None, contacts)])`` (see
:meth:`lab.record.recorder.Recorder._snapshot`), ``("event", k, sim_time, kind, data)``.

Every write goes through :class:`_Sink`, which knows where the last complete write ended: when one fails (disk
full, a quota, the file system gone read-only) the file is cut back there and closed with a data-end record and
a footer (:func:`end_without_summary`), so it stays a valid, finished MCAP (without the summary index: readers
read it linearly), and the recording ends ``failed`` with the reason. The size limit ends it ``done``.
"""

import mmap
import os
import pickle
import signal
import struct
import sys
import time
from pathlib import Path

import numpy as np
from mcap.data_stream import RecordBuilder
from mcap.records import DataEnd, Footer
from mcap.writer import MCAP0_MAGIC, CompressionType, Writer

from lab.record import format as fmt

CHUNK_BYTES = 256 * 1024  # uncompressed bytes per MCAP chunk: a seek decompresses about one
GOOD_EVERY_S = 0.2  # [s] between two ("good", bytes) reports
_FRAME = struct.Struct("<I")


# ---- the wire ------------------------------------------------------------------------------------
def write_frame(fd: int, data) -> None:
    """One frame (a length, then ``data``: bytes or any contiguous buffer) to file descriptor ``fd``."""
    view = memoryview(data).cast("B")
    if len(view) < 65536:
        view = memoryview(_FRAME.pack(len(view)) + view)
    else:
        _write_all(fd, _FRAME.pack(len(view)))
    _write_all(fd, view)


def _write_all(fd: int, view) -> None:
    view = memoryview(view)
    while view:
        view = view[os.write(fd, view) :]


def read_frame(f) -> bytes | None:
    """The next frame's payload from the binary file ``f``; None at the end of the input."""
    head = _read(f, _FRAME.size)
    return None if head is None else _read(f, _FRAME.unpack(head)[0])


def _read(f, n: int) -> bytes | None:
    """Exactly ``n`` bytes of ``f`` (a raw pipe may answer with less at a time); None at the end of the input."""
    parts, got = [], 0
    while got < n:
        more = f.read(n - got)
        if not more:
            return None
        parts.append(more)
        got += len(more)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def send(fd: int, msg: tuple) -> None:
    write_frame(fd, pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))


# ---- the file ------------------------------------------------------------------------------------
class _Sink:
    """A file that remembers where its last complete write ended (``good``), and cuts back to it on failure."""

    def __init__(self, path: Path):
        self.f = open(path, "wb", buffering=0)  # noqa: SIM115 (closed by close())
        self.pos = 0
        self.good = 0
        self.broken: OSError | None = None

    def write(self, data) -> int:
        if self.broken is not None:
            raise self.broken
        view = memoryview(data)
        try:
            while view:
                n = self.f.write(view)
                view = view[n:]
        except OSError as exc:
            self.broken = exc
            self.f.truncate(self.good)
            raise
        self.pos += len(data)
        self.good = self.pos
        return len(data)

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.f.close()


def end_without_summary(f, good: int) -> None:
    """Cut the open MCAP file ``f`` back to ``good`` (the end of its last whole record of the data section) and
    close the file there: a data-end record, a footer without summary and the closing magic."""
    b = RecordBuilder()
    DataEnd(0).write(b)
    Footer(summary_start=0, summary_offset_start=0, summary_crc=0).write(b)
    tail = b.end() + MCAP0_MAGIC
    f.truncate(good)
    f.seek(good)
    f.write(tail)  # a few dozen bytes inside a block the file already holds


class McapWriter:
    """One MCAP file: its head written now, then :meth:`run` turns the items read from the input into messages.

    ``head``: metadata name -> {str: str}; ``attachments``: (name, media type, bytes); ``dims``: nu, nv, nx
    (= nbody*6) of the exact engine or None; ``topics``: topic -> schema name of every JSON topic; ``dt`` [s];
    ``max_bytes``: the size at which the recording ends ``done``; ``names``: the joint names; ``pool``: ``(fd,
    slots, rows, width)`` of the shared input buffers (with ``dims``).
    """

    def __init__(
        self, path, *, head: dict, attachments: list, dims, topics: dict, dt: float, max_bytes: int, names, pool=None
    ):
        self.path = Path(path)
        self.dt_ns = int(round(dt * 1e9))
        self.max_bytes = max_bytes
        self.dims = dims
        self.names = list(names)
        self._seq = 0
        self._block = None  # (k0, [row arrays]) being gathered into one /mujoco/inputs message
        self._push = None  # (k start, force (3,)) of the push acting on the exact engine
        self._anchor = (0, 0.0)  # (k, sim time [s]) of the last keyframe: the sim time of a step in between
        self._event = None  # the last event, held back while it may repeat: [k, sim_time, kind, data, count, last_k]
        self._ending = False  # the size limit was reported: the simulation side is ending the recording
        self.pool = None
        if pool is not None:
            fd, slots, rows, width = pool
            self._mm = mmap.mmap(fd, slots * rows * width * 8)
            os.close(fd)
            self.pool = np.ndarray((slots, rows, width), dtype="<f8", buffer=self._mm)
        self.sink = _Sink(self.path)
        try:
            self.mcap = Writer(self.sink, chunk_size=CHUNK_BYTES, compression=CompressionType.ZSTD)
            self.mcap.start(profile=fmt.PROFILE, library="humanoid-sim-lab lab.record")
            self.channels = {}
            for topic, schema in topics.items():
                sid = self.mcap.register_schema(schema, "jsonschema", fmt.dumps(fmt.SCHEMAS[schema]))
                self.channels[topic] = self.mcap.register_channel(topic, "json", sid)
            if dims is not None:
                meta = {"nu": str(dims[0]), "nv": str(dims[1]), "nx": str(dims[2]), "dt": repr(dt)}
                self.channels[fmt.KEYFRAME_TOPIC] = self.mcap.register_channel(
                    fmt.KEYFRAME_TOPIC, fmt.KEYFRAME_ENCODING, 0, {**meta, "state_spec": str(fmt.STATE_SPEC)}
                )
                self.channels[fmt.INPUTS_TOPIC] = self.mcap.register_channel(
                    fmt.INPUTS_TOPIC, fmt.INPUTS_ENCODING, 0, {**meta, "input_spec": str(fmt.INPUT_SPEC)}
                )
            now = time.time_ns()
            for name, data in head.items():
                self.mcap.add_metadata(name, data)
            for name, media, data in attachments:
                self.mcap.add_attachment(now, 0, name, media, data)
        except BaseException:
            self.sink.close()
            raise

    def run(self, inp, out: int) -> None:
        """Read batches from ``inp`` until ``close`` (or the end of the input), write them, finish the file; the
        status goes to file descriptor ``out``."""
        reported = time.monotonic()
        final = None
        try:
            try:
                while final is None:
                    data = read_frame(inp)
                    if data is None:
                        final = ("failed", "the simulation process went away without ending the recording")
                        break
                    for item in pickle.loads(data):
                        if item[0] == "close":
                            final = item[1:]
                            break
                        if item[0] == "rows":  # ("rows", k, slot, a, b, last)
                            _, k, slot, a, b, last = item
                            self._rows(self.pool[slot, a:b], k)
                            if last:
                                send(out, ("free", slot))
                        else:
                            self._handle(item)
                    if self.sink.pos >= self.max_bytes and not self._ending:
                        self._ending = True
                        send(
                            out,
                            (
                                "end",
                                "done",
                                f"reached the size limit of {self.max_bytes / 1e6:g} MB; recording stopped",
                            ),
                        )
                    if time.monotonic() - reported >= GOOD_EVERY_S:
                        reported = time.monotonic()
                        send(out, ("good", self.sink.good))
            except _Terminated:
                final = ("failed", "the recording writer process was terminated")
            self._flush_block()
            self._flush_event()
            self.mcap.add_metadata("result", {"state": final[0], "reason": final[1], "ended": _iso()})
            self.mcap.finish()
            self.sink.close()
            send(out, ("done", final[0], final[1], self.sink.pos))
        except OSError as exc:
            self._salvage(f"cannot write {self.path.name}: {exc.strerror or exc}", out)
        except Exception as exc:  # a bug in the writer: still a finished file and a reason
            import traceback

            traceback.print_exc()
            self._salvage(f"the recording writer failed: {type(exc).__name__}: {exc}", out)

    def _salvage(self, reason: str, out: int) -> None:
        reason = f"{reason}; the file ends at {self.sink.good} bytes (no index: read linearly)"
        try:
            end_without_summary(self.sink.f, self.sink.good)
            self.sink.close()
        except OSError as exc:
            reason += f"; closing it failed too: {exc.strerror or exc}"
        send(out, ("end", "failed", reason))
        send(out, ("done", "failed", reason, self.sink.good))

    def _message(self, topic: str, k: int, data: bytes) -> None:
        self._seq += 1
        self.mcap.add_message(self.channels[topic], k * self.dt_ns, data, time.time_ns(), self._seq)

    def _handle(self, item: tuple) -> None:
        kind = item[0]
        if kind == "key":  # ("key", k, sim_time, kind, state bytes)
            _, k, t, key_kind, state = item
            self._flush_block()
            self._anchor = (k, t)
            self._message(fmt.KEYFRAME_TOPIC, k, fmt.encode_keyframe(k, t, key_kind, np.frombuffer(state, "<f8")))
        elif kind == "metrics":  # ("metrics", k, sim_time, sample dict)
            _, k, t, sample = item
            self._message("/metrics", k, fmt.dumps(_stamped({"sim_time": t, **sample}, k * self.dt_ns)))
        elif kind == "snap":  # ("snap", k, mode, [engine snapshot])
            _, k, mode, engines = item
            for snap in engines:
                for topic, msg in _snapshot_messages(snap, self.names, mode, k * self.dt_ns):
                    self._message(topic, k, fmt.dumps(msg))
        elif kind == "event":  # ("event", k, sim_time, kind, data)
            self._event_in(*item[1:])

    # ---- per-step inputs: blocks of BLOCK steps, pushes seen in xfrc_applied --------------------------
    def _rows(self, rows: np.ndarray, k: int) -> None:
        nu, nv, _ = self.dims
        i = 0
        while i < len(rows):
            if self._block is None:
                self._block = (k + i, [])
            room = fmt.BLOCK - (k + i) % fmt.BLOCK
            part = rows[i : i + room].copy()  # the buffer goes back to the simulation
            self._watch_push(part[:, nu + nv :], k + i)
            self._block[1].append(part)
            i += len(part)
            if (k + i) % fmt.BLOCK == 0:
                self._flush_block()

    def _flush_block(self) -> None:
        if self._block is None:
            return
        k0, parts = self._block
        self._block = None
        nu, nv, _ = self.dims
        self._message(fmt.INPUTS_TOPIC, k0, fmt.encode_inputs(k0, np.concatenate(parts), nu, nv))

    def _watch_push(self, xfrc: np.ndarray, k0: int) -> None:
        """A push is an interval of steps with a non-zero xfrc_applied (the push mode and POST /api/push)."""
        on = xfrc.any(axis=1)
        for i in np.flatnonzero(np.diff(np.r_[self._push is not None, on].astype(np.int8))):
            k = k0 + int(i)
            if self._push is None:
                row = xfrc[i].reshape(-1, 6)
                self._push = (k, row[np.flatnonzero(row.any(axis=1))[0], :3].copy())
            else:
                (k_on, force), self._push = self._push, None
                data = {
                    "force_n": [round(float(v), 3) for v in force],
                    "duration_s": round((k - k_on) * self.dt_ns / 1e9, 6),
                }
                self._event_in(k_on, self._sim_time(k_on), "push", data)

    def _sim_time(self, k: int) -> float:
        k_a, t_a = self._anchor
        return round(t_a + (k - k_a) * self.dt_ns / 1e9, 6)

    # ---- events: a repeat within COLLAPSE_S is counted into the one before ------------------------------
    def _event_in(self, k: int, sim_time: float, kind: str, data: dict) -> None:
        e = self._event
        if e is not None and e[2] == kind and e[3] == data and (k - e[5]) * self.dt_ns <= fmt.COLLAPSE_S * 1e9:
            e[4] += 1
            e[5] = k
            return
        self._flush_event()
        self._event = [k, sim_time, kind, data, 1, k]

    def _flush_event(self) -> None:
        e, self._event = self._event, None
        if e is None:
            return
        k, sim_time, kind, data, count, last_k = e
        msg = {"sim_time": sim_time, "kind": kind, "data": data, "count": count, "last_t": last_k * self.dt_ns / 1e9}
        self._message("/event", k, fmt.dumps(_stamped(msg, k * self.dt_ns)))


def _stamped(msg: dict, ns: int) -> dict:
    return {"timestamp": fmt.stamp(ns), **msg}


def _snapshot_messages(snap: tuple, names: list, mode: str, ns: int) -> list:
    """``(topic, message)`` of one engine's snapshot (see :meth:`lab.record.recorder.Recorder._snapshot`): its
    numbers rounded to :data:`~lab.record.format.DIGITS` decimals."""
    prefix, t, sizes, numbers, enabled, push, contacts = snap
    n = fmt.DIGITS
    t = round(t, 6)
    flat = np.round(np.frombuffer(numbers, "<f8"), n)
    q, qd, tau, q_target, pos, quat = (a.tolist() for a in np.split(flat, np.cumsum(sizes)))
    ts = fmt.stamp(ns)
    (x, y, z), (qw, qx, qy, qz) = pos, quat
    position, orientation = {"x": x, "y": y, "z": z}, {"x": qx, "y": qy, "z": qz, "w": qw}
    return [
        (
            prefix + "/joint_states",
            {
                "header": {"stamp": {"sec": ts["sec"], "nanosec": ts["nsec"]}, "frame_id": ""},
                "name": names,
                "position": q,
                "velocity": qd,
                "effort": tau,
                "sim_time": t,
            },
        ),
        (
            prefix + "/base",
            {
                "timestamp": ts,
                "frame_id": "world",
                "pose": {"position": position, "orientation": orientation},
                "sim_time": t,
            },
        ),
        (
            prefix + "/contacts",
            {
                "timestamp": ts,
                "sim_time": t,
                "contacts": [
                    {
                        "side": "left" if side == 0 else "right",
                        "position": dict(zip("xyz", np.round(p, n).tolist(), strict=True)),
                        "force_n": round(fz, 3),
                    }
                    for side, p, fz in contacts
                ],
            },
        ),
        (
            prefix + "/command",
            {
                "timestamp": ts,
                "sim_time": t,
                "mode": mode,
                "enabled": enabled,
                "q_target": q_target,
                "tau": tau,
                "push": None if push is None else np.round(np.frombuffer(push, "<f8"), n).tolist(),
            },
        ),
    ]


def _iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() if t is None else t))


# ---- the process ---------------------------------------------------------------------------------
class _Terminated(Exception):
    """SIGTERM: finish the file now."""


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the file is being finished
    raise _Terminated


def main() -> int:
    """The writer process: the head from stdin, then the batches until ``close``; the status on stdout."""
    out = os.dup(1)
    os.dup2(2, 1)  # a stray print goes to stderr, never into the status frames
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the simulation process, which ends the recording
    signal.signal(signal.SIGTERM, _on_sigterm)
    inp = open(0, "rb", buffering=1 << 20, closefd=False)  # noqa: SIM115 (stdin, for the life of the process)
    data = read_frame(inp)
    if data is None:
        return 1
    init = pickle.loads(data)
    try:
        writer = McapWriter(init.pop("path"), **init)
    except OSError as exc:
        send(out, ("error", exc.errno or 0, exc.strerror or str(exc)))
        return 1
    send(out, ("ready", writer.sink.pos))
    writer.run(inp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
