"""The recordings scan points kept, on the replay page: id ``scan:<scan id>:<point>``, read-only.

A scan launched with ``"record": true`` leaves ``recording.mcap`` in each point's folder
(:mod:`lab.scans.recording`). :func:`init_app` registers them with the replay page
(:func:`lab.web.replay_page.add_source`), so the page and its routes open one by that id through the same code
as a stored recording: ``GET /replay?scan=SID&point=I`` (or ``?id=scan:SID:I``), ``GET
/api/recordings/scan:SID:I/timeline``, ``.../state?t=T``, ``POST .../export`` and ``WS /ws/replay?id=scan:SID:I``.
The file itself downloads as one of the point's files, ``GET /api/scans/SID/points/I/recording.mcap``. Only the
file in the point's own folder is served (a regular file, never a link: :meth:`ScanManager.point_recording`);
anything else is a 404 with an error and a hint. Nothing here deletes or writes a recording.
"""

import re

from lab.errors import LabError
from lab.web import replay_page

ID_RE = re.compile(r"^scan:(?P<scan>[^:/]{1,120}):(?P<point>[0-9]{1,6})$")
ID_HINT = (
    "a scan point's recording is scan:<scan id>:<point>, e.g. /replay?scan=20250101-120000-push_recovery-ab12&point=0"
)


def recording_id(scan_id: str, index: int) -> str:
    """The replay page's id of point ``index`` of scan ``scan_id``'s recording."""
    return f"{replay_page.SCAN_PREFIX}{scan_id}:{index}"


def init_app(app, manager) -> None:
    """Serve the recordings of ``manager``'s scan points on the replay page (when the app has one)."""
    if "replay" not in app.extensions:  # an app without the replay page: the point files still download
        return

    def resolve(rid: str):
        m = ID_RE.match(rid)
        if m is None:
            raise LabError(f"no scan point recording {rid[:80]!r}", ID_HINT, 404)
        return manager.point_recording(m["scan"], int(m["point"]))

    replay_page.add_source(app, replay_page.SCAN_PREFIX, resolve)
