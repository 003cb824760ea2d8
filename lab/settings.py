"""The settings of one run: every service's address and options in one frozen object.

``app.py`` builds one :class:`Settings` from its command line and hands it to every app factory
(:func:`lab.web.create_lab_app`, :func:`lab.web.sim2sim.create_sim2sim_app`,
:func:`lab.web.state_server.create_state_app`); the pages take their navigation links from it, so
``--lab-port`` / ``--sim2sim-port`` / ``--state-port`` reach every link. With ``python app.py`` (all
services) each child process is started with the command line :func:`app.child_argv` writes from
the same object. No Flask here: scripts and tests build one too (``Settings(lab_port=9000)``).
"""

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("lab", "state", "sim2sim")
DEFAULT_PORTS = {"lab": 8765, "state": 8766, "sim2sim": 8767}
PRESETS = ("fast", "nice")
# (page, label, service, path): every page a person navigates to, and the service that serves it
PAGES = (
    ("lab", "Lab", "lab", "/"),
    ("remote", "Remote monitor", "lab", "/remote"),
    ("scans", "Scans", "lab", "/scans"),
    ("replay", "Replay", "lab", "/replay"),
    ("sim2sim", "Sim2Sim", "sim2sim", "/"),
)


def default_results_dir() -> Path:
    """``LAB_RESULTS`` if set, else ``<repository>/results``."""
    return Path(os.environ.get("LAB_RESULTS") or ROOT / "results")


@dataclass(frozen=True)
class Settings:
    # where the services listen
    host: str = "127.0.0.1"  # address every service binds; anything but loopback needs a token
    lab_port: int = DEFAULT_PORTS["lab"]  # the Lab: pages /, /remote, /scans and their API
    state_port: int = DEFAULT_PORTS["state"]  # the state server (/api/v1/...)
    sim2sim_port: int = DEFAULT_PORTS["sim2sim"]  # Sim2Sim: page / and its API
    # what runs
    model: str | None = None  # URDF or MJCF file; None: the built-in Q1 humanoid
    token: str | None = None  # bearer token every state change needs; None: open (loopback only)
    results_dir: Path = field(default_factory=default_results_dir)  # scans go under <results_dir>/scans/<id>/
    models_dir: Path | None = None  # models the pages offer, uploads in <models_dir>/uploads/; None: <results>/models
    # the Lab
    fps: float = 60.0  # Lab stream frame-rate cap [frames/s]
    width: int = 640  # live view width [px] (Lab and Sim2Sim)
    height: int = 480  # live view height [px]
    preset: str | None = None  # render preset "fast" | "nice"; None: "fast" on a software renderer, else "nice"
    mode: str = "stand"  # the Lab's first mode
    remote_url: str | None = None  # state server the remote monitor watches; None: this run's, "": none
    # Sim2Sim
    sim2sim_fps: float = 30.0  # frame-rate cap per Sim2Sim view [frames/s]
    # the state server
    state_mode: str = "stand"  # the mode the state server runs (zero: the robot falls)
    allow_actuators: tuple = ("motor_left_elbow",)  # actuators a state-server client may command
    state_server: bool = True  # `python app.py` (all services) starts a state server too

    def __post_init__(self):
        if self.results_dir is None:
            object.__setattr__(self, "results_dir", default_results_dir())
        object.__setattr__(self, "results_dir", Path(self.results_dir))
        if self.models_dir is not None:
            object.__setattr__(self, "models_dir", Path(self.models_dir))
        object.__setattr__(self, "allow_actuators", tuple(self.allow_actuators))
        if self.model is not None:
            object.__setattr__(self, "model", str(self.model))
        for svc in SERVICES:
            port = self.port(svc)
            if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
                raise LabError(
                    f"{svc} port {port!r} is not a port number", "a port is an integer in 1..65535 (0: pick a free one)"
                )
        for name in ("fps", "sim2sim_fps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 240:
                raise LabError(f"{name} {v!r} is outside (0, 240] frames/s", "e.g. --fps 30")
        if self.preset is not None and self.preset not in PRESETS:
            raise LabError(f"unknown render preset '{self.preset}'", f"presets: {', '.join(PRESETS)}")

    # ---- derived ---------------------------------------------------------------------------------
    def port(self, service: str) -> int:
        """The port of ``service`` ("lab", "state" or "sim2sim")."""
        if service not in SERVICES:
            raise LabError(f"unknown service '{service}'", f"services: {', '.join(SERVICES)}")
        return getattr(self, f"{service}_port")

    @property
    def ports(self) -> dict:
        return {s: self.port(s) for s in SERVICES}

    @property
    def models_folder(self) -> Path:
        """The folder of models the pages offer: ``models_dir``, else ``<results_dir>/models``."""
        return self.models_dir if self.models_dir is not None else self.results_dir / "models"

    @property
    def local_host(self) -> str:
        """Where a process on this machine reaches the services (a wildcard bind is reached on loopback)."""
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host

    @property
    def monitor_url(self) -> str | None:
        """The state server the Lab's remote monitor watches: ``remote_url``, or this run's; None for none."""
        if self.remote_url == "":
            return None
        if self.remote_url is not None:
            return self.remote_url
        host = self.local_host
        return f"http://[{host}]:{self.state_port}" if ":" in host else f"http://{host}:{self.state_port}"

    def nav(self, service: str) -> list[dict]:
        """The navigation links as seen from ``service``: page, label, service, port, path, and ``local``
        (served by ``service`` itself: a plain path; otherwise another port of the same host)."""
        return [
            {
                "page": page,
                "label": label,
                "service": svc,
                "port": self.port(svc),
                "path": path,
                "local": svc == service,
            }
            for page, label, svc, path in PAGES
        ]

    def links(self) -> dict:
        """page -> {"port", "path"}: where each page of this run is (the status endpoints report it)."""
        return {page: {"port": self.port(svc), "path": path} for page, _, svc, path in PAGES}

    def replace(self, **changes) -> "Settings":
        """A copy with ``changes`` (Settings field names; a misspelt one raises ``TypeError``)."""
        return dataclasses.replace(self, **changes)
