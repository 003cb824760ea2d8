"""How a point process is kept apart: its own process group, death with its parent, a guard, safe log files.

Shared by the cold path (:func:`lab.scans.executors.run_point`, one process per point) and the warm
workers (:mod:`lab.scans.pool`, one long-lived process per worker): either process

* runs in its own process group (``start_new_session``), so one ``killpg`` takes it and all it started;
* dies with the thread that started it (``PR_SET_PDEATHSIG``, :func:`die_with_parent`);
* forks a guard into its group (:func:`start_guard`) that SIGKILLs the group once the process is
  gone, so nothing a point started outlives it, even when the Lab is killed with SIGKILL;
* writes its output through :func:`open_nofollow`, which never follows a link planted in a point folder.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

TAIL_CHARS = 2000
GUARD_POLL_S = 0.1  # how often a guard checks that its process is still there [s]


def child_env() -> dict:
    """The environment of a point process: the repository on ``PYTHONPATH``, Agg, one thread per library."""
    env = dict(os.environ)
    root = str(Path(__import__("lab").__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MPLBACKEND", "Agg")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # one core per point: the pool is the parallelism
    env["PYTHONUNBUFFERED"] = "1"
    return env


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group led by ``proc`` (the process and anything it started), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def open_nofollow(path: Path, flags: int) -> int:
    """``os.open`` that refuses a symlink (a link planted in a point folder is never followed)."""
    return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)


def fresh_log(path: Path) -> int:
    """A new, empty ``output.log`` at ``path`` (a planted symlink is removed first, never written through)."""
    path.unlink(missing_ok=True)
    return open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)


def tail(path: Path, n: int = TAIL_CHARS) -> str:
    """The last ``n`` characters of the file at ``path`` ("" when it cannot be read)."""
    try:
        with os.fdopen(open_nofollow(path, os.O_RDONLY), "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    """The last non-blank line of ``text``, cut to 300 characters ("" for none)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent thread goes (a Lab killed hard leaves no point behind)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent went before prctl took effect
        os._exit(1)


def start_guard() -> int:
    """Fork a guard into this process's group that SIGKILLs the whole group once this process is gone.

    The process itself dies with its parent (PDEATHSIG), but what *it* started (a solver, a renderer)
    would be orphaned; the guard sees its own parent change and takes the group down, itself
    included. Call it before threads start. Returns the guard's pid."""
    me = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:  # the guard: no imports, no threads, just a poll of its parent
        while os.getppid() == me:
            time.sleep(GUARD_POLL_S)
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of process ``pid`` [MiB] (0 when it is gone)."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``, from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            out.append(int(d.name))
    return out


def kill_strays(keep: set[int]) -> int:
    """SIGKILL every process of this process's group but those in ``keep``; how many were killed.

    What a point started and left running when it returned (the cold path's group kill did the same)."""
    n = 0
    for pid in group_members(os.getpgid(0)):
        if pid not in keep:
            try:
                os.kill(pid, signal.SIGKILL)
                n += 1
            except (ProcessLookupError, PermissionError):
                pass
    return n
