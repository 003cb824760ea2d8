"""The simulation side of a recording's file: the writer process (:mod:`lab.record.writer`) and what feeds it.

:class:`RecordingFile` starts the writer process (``python -m lab.record.writer``: a fresh interpreter, never
a fork of this one, which has threads and a GL context) and waits until it has written the file's head, so
a folder that cannot be written is refused at once. Then:

- the simulation thread writes each step's inputs into one of :data:`POOL` shared buffers (``buffers``, a
  memfd both processes map; ``free`` holds the slots it may take) and :meth:`~RecordingFile.put` s small items
  (bytes, tuples) into a bounded deque (no lock, no wake-up: the recording costs the simulation thread little);
- a feeder thread wakes every :data:`FEED_S`, pickles what has gathered into one batch and writes it to the
  writer's stdin;
- a watcher thread reads the writer's status (buffers it is done with, its progress, the size limit, a failed
  write, the file done) and notices when the process has died: the file is then cut back to the last whole record the writer
  reported and closed there, so it is still a valid, finished MCAP, and the recording ends ``failed``.

:meth:`~RecordingFile.join` returns once the file is finished and the process is reaped (killed past its
timeout). The writer process ends by itself when this process goes away (the end of its input).
"""

import collections
import contextlib
import dataclasses
import fcntl
import mmap
import os
import pickle
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from lab.errors import LabError
from lab.record import format as fmt
from lab.record.writer import end_without_summary, read_frame, write_frame

POOL = 8  # input buffers of one keyframe interval each: the writer may be this many seconds behind
QUEUE_ITEMS = 4096  # items waiting for the writer before the recording fails as overflowing
FEED_S = 0.1  # [s] between two batches sent to the writer process (each wake-up costs the simulation thread)
START_S = 30.0  # [s] the writer process has to write the file's head
PIPE_BYTES = 1 << 20  # the pipe to the writer process (Linux caps it at /proc/sys/fs/pipe-max-size)
_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the lab package


@dataclasses.dataclass
class Outcome:
    """How a recording ended: ``state`` done | failed, ``reason`` in words, ``steps`` written; ``writable``: a
    failed recording whose file still takes its last inputs and end keyframe (the disk got full)."""

    state: str
    reason: str
    steps: int = 0
    writable: bool = False


class RecordingFile:
    """One MCAP file being written by its writer process from :meth:`put` items.

    The keyword arguments are :class:`lab.record.writer.McapWriter`'s (but ``pool``). With ``dims`` (an exact
    engine), ``buffers`` are :data:`POOL` shared arrays of (steps per keyframe, nu + nv + nx) float64, the
    slots of those free in ``free``. ``on_end(outcome)`` is called once (by
    the watcher thread) when the writer ends the recording by itself: the size limit, a failed write, the
    process dying. Raises ``OSError`` when the file cannot be written.
    """

    def __init__(self, path: Path, **init):
        self.path = Path(path)
        self.free: queue.SimpleQueue = queue.SimpleQueue()  # slots of the input buffers the writer is done with
        self.buffers = None
        self.on_end = None
        self.outcome: Outcome | None = None  # how the file ended (set once it is finished)
        self._items: collections.deque = collections.deque()
        self._closing = threading.Event()
        self._final: Outcome | None = None  # how the recording ends (close(), or the writer itself)
        self._broken = False  # the writer's input is gone: items are dropped
        self._good = 0  # the end of the last whole record the writer reported [bytes]
        self._bytes = 0
        self._done: Outcome | None = None
        self._kill_reason: str | None = None
        self._threads: list = []
        fds = ()
        if init.get("dims") is not None:
            rows, width = max(1, int(round(fmt.KEYFRAME_S / init["dt"]))), sum(init["dims"])
            fd = os.memfd_create(f"recording-{self.path.stem}")
            os.ftruncate(fd, POOL * rows * width * 8)
            self._mm = mmap.mmap(fd, POOL * rows * width * 8)
            self.buffers = np.ndarray((POOL, rows, width), dtype="<f8", buffer=self._mm)
            for slot in range(POOL):
                self.free.put(slot)
            init["pool"], fds = (fd, POOL, rows, width), (fd,)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "lab.record.writer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            env=env,
            cwd=_ROOT,  # ``-m`` looks in the working folder first: this lab package, not one that folder holds
            pass_fds=fds,
        )
        for fd in fds:  # the mapping stays
            os.close(fd)
        self._in, self._out = self._proc.stdin.fileno(), self._proc.stdout
        with contextlib.suppress(OSError):  # a larger pipe: fewer waits on the writer (Linux only)
            fcntl.fcntl(self._in, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        try:
            write_frame(self._in, pickle.dumps({"path": str(self.path.resolve()), **init}, pickle.HIGHEST_PROTOCOL))
            ready, _, _ = select.select([self._out], [], [], START_S)
            answer = pickle.loads(read_frame(self._out) or pickle.dumps(None)) if ready else None
        except OSError:  # the process is gone before it answered
            answer = None
        if answer is None or answer[0] != "ready":
            self._proc.kill()
            code = self._proc.wait()
            self._proc.stdin.close()
            self._out.close()
            if answer is not None and answer[0] == "error":
                raise OSError(answer[1], answer[2])
            raise LabError(
                f"the recording writer process did not start ({_exit_words(code)})",
                "see the service's log for its error",
                500,
            )
        self._bytes = self._good = answer[1]

    # ---- the producer side (the simulation thread, or whoever ends the recording) ------------------
    def put(self, item: tuple, wait: float = 0.0) -> bool:
        """Queue ``item``; False when the queue stayed full (``wait`` [s] at most)."""
        items = self._items
        if len(items) >= QUEUE_ITEMS:
            deadline = time.monotonic() + wait
            while len(items) >= QUEUE_ITEMS:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.001)
        items.append(item)
        return True

    def close(self, outcome: Outcome) -> None:
        """No more items will come: send what is queued, then the writer finishes the file with ``outcome``."""
        if self._final is None:
            self._final = outcome
        self._closing.set()

    def start(self) -> "RecordingFile":
        for target, what in ((self._feed, "feeder"), (self._watch, "watcher")):
            t = threading.Thread(target=target, name=f"recording {self.path.name} {what}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def join(self, timeout: float = 30.0) -> None:
        """Wait until the file is finished and the writer process reaped; past ``timeout`` [s] it is killed
        (the file then ends at the last whole record it reported)."""
        if not self._threads:  # never started: nothing was written after the head
            self.close(self._final or Outcome("done", "stopped"))
            self._threads = [threading.Thread(target=self._watch, daemon=True)]
            self._threads[0].start()
            self._send([("close", self._final.state, self._final.reason)])
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if self._proc.poll() is None:
            self._kill_reason = f"the recording writer process did not finish within {timeout:g} s and was killed"
            self._proc.kill()
            for t in self._threads:
                t.join(5.0)

    @property
    def bytes(self) -> int:
        """The size of the file as the writer last reported it [bytes]."""
        return self._bytes

    # ---- the feeder thread ---------------------------------------------------------------------------
    def _feed(self) -> None:
        while True:
            closing = self._closing.wait(FEED_S)
            batch = []
            items = self._items
            while items:
                batch.append(items.popleft())
            if batch:
                self._send(batch)
            if closing and not items:
                break
        final = self._final or Outcome("done", "stopped")
        self._send([("close", final.state, final.reason)])
        with contextlib.suppress(OSError):
            self._proc.stdin.close()  # the end of the writer's input

    def _send(self, batch: list) -> None:
        if not self._broken:
            try:
                write_frame(self._in, pickle.dumps(batch, pickle.HIGHEST_PROTOCOL))
            except OSError:  # the writer process is gone: the watcher says why
                self._broken = True

    # ---- the watcher thread --------------------------------------------------------------------------
    def _watch(self) -> None:
        while True:
            data = read_frame(self._out)
            if data is None:
                break
            msg = pickle.loads(data)
            if msg[0] == "free":
                self.free.put(msg[1])
            elif msg[0] == "good":
                self._good = self._bytes = msg[1]
            elif msg[0] == "end":
                self._end_self(Outcome(msg[1], msg[2]))
            elif msg[0] == "full":  # the disk is full: the file still takes the recording's end
                self._end_self(Outcome("failed", msg[1], writable=True))
            elif msg[0] == "done":
                self._done = Outcome(msg[1], msg[2])
                self._bytes = msg[3]
        code = self._proc.wait()
        self._broken = True
        self._out.close()
        if self._done is None:  # it died: cut the file back to the last whole record it reported, close it there
            reason = self._kill_reason or f"the recording writer process died ({_exit_words(code)})"
            reason += f"; the file ends at {self._good} bytes (no index: read linearly)"
            try:
                with open(self.path, "r+b") as f:
                    end_without_summary(f, self._good)
                self._bytes = self._good
            except OSError as exc:
                reason += f"; closing it failed: {exc.strerror or exc}"
            self._done = Outcome("failed", reason)
            self._end_self(self._done)
        self.outcome = self._done

    def _end_self(self, outcome: Outcome) -> None:
        """The writer ends the recording (size, disk, error, death): the simulation side stops producing."""
        if self._final is not None:
            return
        self._final = outcome
        if self.on_end is not None:
            self.on_end(outcome)


def _exit_words(code: int) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
