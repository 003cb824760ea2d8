"""The writer process of a recording: builds the MCAP file from what the simulation process sends it.

:class:`lab.record.process.RecordingFile` starts it as ``python -m lab.record.writer`` (a fresh interpreter,
nothing of the simulation process is forked) and feeds it through its stdin; it answers on its stdout. So the
JSON encoding, the MCAP records (:class:`lab.record.mcap_out.McapOut`) and zstd run beside the simulation instead
of holding its GIL.

The wire: frames of a ``<I`` length and a payload (:func:`write_frame`, :func:`read_frame`).

- in: first the head (a pickled dict: the keyword arguments of :class:`McapWriter`), answered ``("ready",
  bytes)`` once the file's head is written or ``("error", errno, strerror)``; then batches, each a pickled list
  of items (below), the last one ``("close", state, reason)``. End of input without it: the simulation process
  went away, the file is finished ``failed``.
- out: ``("free", slot)`` when an input buffer is done with, ``("good", bytes)`` now and then (the file up to
  there is whole records of the data section: where a file is cut back to if this process dies), ``("end",
  state, reason)`` when this process ends the recording by itself (the size limit; a write that failed),
  ``("full", reason)`` when the disk refused more room (the recording ends ``failed``, the file still takes its
  end), and last ``("done", state, reason, bytes)``: the file is finished and closed.

The per-step inputs do not travel through the pipe: they are in a shared memory ``pool`` (a memfd of ``slots``
buffers of ``rows x width`` float64, mapped by both processes); ``("rows", k, slot, a, b, last)`` says that rows
``a:b`` of buffer ``slot`` hold the inputs of steps ``k ..`` (``last``: the simulation is done with that buffer).
Other items: ``("key", k, sim_time, kind, state bytes)``, ``("metrics", k, sim_time, sample dict)``, ``("snap", k,
mode, [(prefix, sim_time, sizes, numbers bytes, enabled, push bytes or None, contacts)])`` (see
:meth:`lab.record.recorder.Recorder._snapshot`), ``("event", k, sim_time, kind, data)``, ``("json", k, sim_time,
topic, data)`` (a message on one of the service's own topics, :meth:`lab.record.recorder.Recorder.message`).

Every write goes through :class:`_Sink`, which keeps room allocated ahead of the data: when the disk refuses
more (full, a quota, ``ulimit -f``) the recording ends ``failed`` with the reason and the file is finished in
that room, with its summary. It also knows where the last complete write ended: when a write fails even so (the
reserve used up, the file system gone read-only) the file is cut back there and closed with a data-end record
and a footer (:func:`end_without_summary`), so it stays a valid, finished MCAP (without the summary index:
readers read it linearly). The size limit ends the recording ``done``.
"""

import contextlib
import errno
import mmap
import os
import pickle
import signal
import struct
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import orjson
from mcap.data_stream import RecordBuilder
from mcap.records import DataEnd, Footer
from mcap.writer import MCAP0_MAGIC

from lab.record import format as fmt
from lab.record.mcap_out import McapOut
from lab.record.messages import snapshot_messages

CHUNK_BYTES = 256 * 1024  # uncompressed bytes per MCAP chunk: a seek decompresses about one
GOOD_EVERY_S = 0.2  # [s] between two ("good", bytes) reports
RESERVE_BYTES = 4 << 20  # [bytes] kept allocated past the data: room to finish the file when the disk is full
GROW_BYTES = 256 << 10  # [bytes] allocated at a time
NICE = 10  # the writer process's niceness (lower priority than the simulation)
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
    """A file that remembers where its last complete write ended (``good``), and cuts back to it on failure.

    It keeps :data:`RESERVE_BYTES` allocated past the data (``posix_fallocate``, :data:`GROW_BYTES` at a time):
    when the disk (a quota, ``ulimit -f``) refuses more, ``full`` says why and the writes go on into the reserve,
    so the file can still be finished with its summary. A write that fails even so sets ``broken`` (the file is
    then cut back to ``good`` and closed without a summary: :func:`end_without_summary`). :meth:`close` gives the
    unused reserve back."""

    def __init__(self, path: Path):
        self.f = open(path, "wb", buffering=0)  # noqa: SIM115 (closed by close())
        self.pos = 0
        self.good = 0
        self.allocated = 0  # [bytes] the file's allocated length
        self.full: OSError | None = None
        self.broken: OSError | None = None
        self._allocate = hasattr(os, "posix_fallocate")

    def write(self, data) -> int:
        if self.broken is not None:
            raise self.broken
        view = memoryview(data).cast("B")
        size = len(view)
        end = self.pos + size
        if self._allocate and self.full is None and end + RESERVE_BYTES > self.allocated:
            want = end + RESERVE_BYTES + GROW_BYTES
            try:
                os.posix_fallocate(self.f.fileno(), self.allocated, want - self.allocated)
                self.allocated = want
            except OSError as exc:
                if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):  # not on this file system
                    self._allocate = False
                else:  # ENOSPC, EDQUOT, EFBIG: finish the file in the reserve
                    self.full = exc
        try:
            while view:
                n = self.f.write(view)
                view = view[n:]
        except OSError as exc:
            self.broken = exc
            self.f.truncate(self.good)
            raise
        self.pos = self.good = end
        return size

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.allocated > self.pos:
            self.f.truncate(self.pos)
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
    (= nbody*6) of the exact engine or None; ``topics``: topic -> schema name of every JSON topic; ``schemas``:
    name -> JSON schema of those not in :data:`lab.record.format.SCHEMAS` (a service's own topics); ``dt`` [s];
    ``max_bytes``: the size at which the recording ends ``done``; ``names``: the joint names; ``weight`` [N]: the
    robot's weight (the scale of the contact arrows); ``pool``: ``(fd, slots, rows, width)`` of the shared input buffers (with ``dims``).
    """

    def __init__(
        self,
        path,
        *,
        head: dict,
        attachments: list,
        dims,
        topics: dict,
        dt: float,
        schemas: dict | None = None,
        max_bytes: int,
        names,
        weight: float,
        pool=None,
    ):
        self.path = Path(path)
        self.dt_ns = int(round(dt * 1e9))
        self.max_bytes = max_bytes
        self.dims = dims
        self.names = orjson.Fragment(orjson.dumps(list(names)))  # the joint names' JSON, made once
        self.weight = weight
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
            self.mcap = McapOut(self.sink, CHUNK_BYTES)
            self.mcap.start(fmt.PROFILE, "humanoid-sim-lab lab.record")
            self.channels = {}
            catalog = {**fmt.SCHEMAS, **(schemas or {})}
            for topic, schema in topics.items():
                sid = self.mcap.register_schema(schema, "jsonschema", fmt.dumps(catalog[schema]))
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
            if self.sink.full is not None:  # no room for a recording: refused at the start
                raise self.sink.full
        except BaseException:
            self.sink.close()
            raise

    def run(self, inp, out: int) -> None:
        """Read batches from ``inp`` until ``close`` (or the end of the input), write them, finish the file; the
        status goes to file descriptor ``out`` (while it can: the simulation process gone, the file is finished
        all the same)."""
        self._out = out
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
                                self._status(("free", slot))
                        else:
                            self._handle(item)
                    self._check_limits()
                    if time.monotonic() - reported >= GOOD_EVERY_S:
                        reported = time.monotonic()
                        self._status(("good", self.sink.good))
            except _Terminated:
                final = ("failed", "the recording writer process was terminated")
            self._flush_block()
            self._flush_event()
            self.mcap.add_metadata("result", {"state": final[0], "reason": final[1], "ended": _iso()})
            self.mcap.finish()
            self.sink.close()
        except Exception as exc:
            if self.sink.broken is not None:  # a write failed even in the reserve
                reason = f"cannot write {self.path.name}: {self.sink.broken.strerror or self.sink.broken}"
            else:  # a bug in the writer: still a finished file and a reason
                traceback.print_exc()
                reason = f"the recording writer failed: {type(exc).__name__}: {exc}"
            self._salvage(reason)
            return
        self._status(("done", final[0], final[1], self.sink.pos))

    def _check_limits(self) -> None:
        """After each batch: the size limit ends the recording ``done``; a full disk ends it ``failed`` (the
        simulation side sends its last rows and keyframe, the file is finished in the reserve)."""
        if self._ending:
            return
        if self.sink.full is not None:
            self._ending = True
            exc = self.sink.full
            reason = (
                f"cannot write {self.path.name}: {exc.strerror or exc} (the disk is full, or a quota or file size "
                "limit is reached); recording stopped, the file is finished"
            )
            self._status(("full", reason))
        elif self.sink.pos >= self.max_bytes:
            self._ending = True
            self._status(("end", "done", f"reached the size limit of {self.max_bytes / 1e6:g} MB; recording stopped"))

    def _status(self, msg: tuple) -> None:
        with contextlib.suppress(OSError):  # the simulation process is gone: the end of the input tells
            send(self._out, msg)

    def _salvage(self, reason: str) -> None:
        reason = f"{reason}; the file ends at {self.sink.good} bytes (no index: read linearly)"
        try:
            end_without_summary(self.sink.f, self.sink.good)
            self.sink.f.close()
        except OSError as exc:
            reason += f"; closing it failed too: {exc.strerror or exc}"
        self._status(("end", "failed", reason))
        self._status(("done", "failed", reason, self.sink.good))

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
                for topic, msg in snapshot_messages(snap, self.names, mode, k * self.dt_ns, self.weight):
                    self._message(topic, k, fmt.dumps(msg))
        elif kind == "event":  # ("event", k, sim_time, kind, data)
            self._event_in(*item[1:])
        elif kind == "json":  # ("json", k, sim_time, topic, data)
            _, k, t, topic, data = item
            self._message(topic, k, fmt.dumps(_stamped({"sim_time": t, **data}, k * self.dt_ns)))

    # ---- per-step inputs: blocks of BLOCK steps, pushes seen in xfrc_applied --------------------------
    def _rows(self, rows: np.ndarray, k: int) -> None:
        """The inputs of steps ``k ..`` (a view of a shared buffer): copied (the buffer goes back to the
        simulation), watched for pushes, gathered into blocks."""
        nu, nv, _ = self.dims
        rows = rows.copy()
        self._watch_push(rows[:, nu + nv :], k)
        i = 0
        while i < len(rows):
            if self._block is None:
                self._block = (k + i, [])
            room = fmt.BLOCK - (k + i) % fmt.BLOCK
            part = rows[i : i + room]
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
    os.nice(NICE)  # a busy machine gives the simulation the CPU first; the input buffers absorb the delay
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
