"""Point figures drawn lazily: when a point's figure is first asked for, not while the scan runs.

A kind names its figures in :attr:`~lab.scans.kinds.ScanKind.figures` (file name -> ``draw(out_dir, path)``,
which draws the figure into ``path`` from the point's ``summary.json`` and trace). The point function writes only
its numbers and trace, so a point costs its simulation and not a matplotlib figure (~0.2 s); the
figure is drawn the first time ``GET /api/scans/<id>/points/<i>/<figure>`` asks for it (in the
request's thread, one figure at a time), and served from disk after that.
"""

import logging
import os
import threading
from pathlib import Path

from lab.scans.points import PointStatus

_lock = threading.Lock()  # one figure at a time: a burst of requests does not fight the live view for the GIL
log = logging.getLogger(__name__)


def drawable(kind, status: PointStatus) -> list[str]:
    """The figures of ``kind`` that a point in ``status`` can have drawn (those of a done point)."""
    return list(kind.figures) if status == PointStatus.DONE else []


def ensure_figure(kind, status: PointStatus, point_dir: Path, name: str) -> None:
    """Draw figure ``name`` into ``point_dir`` if the kind draws it lazily, the point is done and it is not
    there yet. The figure is written to a hidden temporary file and renamed, so a reader never sees half of it;
    nothing is drawn for a point whose files include a link (one planted under the figure's name stays a 404)."""
    draw = kind.figures.get(name)
    if draw is None or name not in drawable(kind, status):
        return
    path = Path(point_dir) / name
    with _lock:
        if path.exists() and not path.is_symlink():
            return
        if any((Path(point_dir) / f).is_symlink() for f in ("summary.json", *kind.artifacts)):
            return  # something planted a link among the point's files: nothing is drawn from it
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}{path.suffix}")
        try:
            draw(Path(point_dir), tmp)
            os.replace(tmp, path)
        except Exception as e:  # a damaged point folder: the figure stays missing (a 404 that lists the files)
            log.warning("could not draw %s: %s: %s", path, type(e).__name__, e)
        finally:
            tmp.unlink(missing_ok=True)
