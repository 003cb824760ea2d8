"""Per-robot configuration: PD gains and nominal pose by joint-name pattern.

A pattern is a regular expression searched in the joint name; the first match wins. The
built-in Q1 uses :data:`Q1_CONFIG`; another robot gets :data:`DEFAULT_CONFIG` unless a JSON
file ``<model>.lab.json`` beside the model overrides some of its fields.
"""

import dataclasses
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError


@dataclass(frozen=True)
class RobotConfig:
    """Gains [N·m/rad, N·m·s/rad], nominal joint angles [rad] and body-name patterns."""

    gains: tuple = (
        (r"hip|knee|thigh|calf|leg", 150.0, 12.0),
        (r"ankle|foot", 100.0, 8.0),
        (r"shoulder|elbow|waist|head|neck|torso|wrist|arm", 40.0, 3.0),
        (r".", 40.0, 3.0),
    )
    nominal: tuple = (
        (r"hip_pitch", -0.3),
        (r"knee", 0.6),
        (r"ankle_pitch", -0.3),
    )
    effort_default: tuple = (  # torque limit [N·m] for joints whose model gives none
        (r"hip|knee", 60.0),
        (r"ankle", 30.0),
        (r".", 22.0),
    )
    torso_body: str = r"torso|chest|trunk|upper_body"
    foot_bodies: str = r"foot|ankle_roll"
    gravity_ff: bool | None = None  # feed-forward of the standing gravity load (None: on for "auto", off for "names")
    gain_method: str = (
        "auto"  # "auto": gains, limits, pose and feet from the model (lab.robots.tuning); "names": the tables above
    )
    given: tuple = ()  # the fields a sidecar set (they override what "auto" derives)

    def gains_for(self, joint: str) -> tuple[float, float]:
        for pattern, kp, kd in self.gains:
            if re.search(pattern, joint):
                return float(kp), float(kd)
        return 40.0, 3.0

    def nominal_for(self, joint: str) -> float:
        for pattern, angle in self.nominal:
            if re.search(pattern, joint):
                return float(angle)
        return 0.0

    def effort_for(self, joint: str) -> float:
        for pattern, effort in self.effort_default:
            if re.search(pattern, joint):
                return float(effort)
        return 22.0


DEFAULT_CONFIG = RobotConfig()

Q1_CONFIG = dataclasses.replace(
    DEFAULT_CONFIG,
    gain_method="names",
    gravity_ff=False,
    nominal=(
        (r"hip_pitch", -0.3),
        (r"knee", 0.6),
        (r"ankle_pitch", -0.3),
        (r"left_shoulder_roll", 0.12),
        (r"right_shoulder_roll", -0.12),
        (r"elbow", -0.35),
    ),
)


def load_config(model_path: Path, builtin: bool) -> RobotConfig:
    """The config for a model: Q1's for the built-in robot, else defaults plus a JSON sidecar.

    The sidecar is one JSON object with any of the fields of :class:`RobotConfig`: ``gains`` a list of
    ``[pattern, kp, kd]`` (or an object ``{pattern: [kp, kd]}``), ``nominal`` a list of ``[pattern, angle]``
    (or ``{pattern: angle}``), ``effort_default`` likewise with torque limits [N·m], ``torso_body`` and
    ``foot_bodies`` regular expressions, ``gravity_ff`` true/false; a field given replaces the default whole
    (a joint no pattern matches gets 40/3, 0 rad, 22 N·m). Anything else is a one-line
    :class:`LabError` naming the key, what was expected and what came.
    """
    if builtin:
        return Q1_CONFIG
    sidecar = Path(str(model_path) + ".lab.json")
    try:
        if not sidecar.exists():
            return DEFAULT_CONFIG
        if not sidecar.is_file():  # a FIFO would block the read, a directory cannot be read
            raise LabError(
                f"{sidecar}: expected a regular JSON file, found {file_kind(sidecar)}",
                "make the robot config a regular file or remove it",
            )
        raw = json.loads(sidecar.read_text(encoding="utf-8"))
    except LabError:
        raise
    except json.JSONDecodeError as exc:
        raise LabError(f"{sidecar}: invalid JSON ({exc})", "fix the robot config file or remove it") from exc
    except UnicodeDecodeError as exc:
        raise LabError(
            f"{sidecar}: expected UTF-8 JSON text, got undecodable bytes ({exc.reason} at byte {exc.start})",
            "fix the robot config file or remove it",
        ) from exc
    except (OSError, ValueError, RecursionError) as exc:
        raise LabError(
            f"{sidecar}: cannot be read ({_one_line(exc)})", "fix the robot config file or remove it"
        ) from exc
    return _config_from_json(raw, sidecar)


def file_kind(path: Path) -> str:
    """What a path that is not a regular file is, in words (for error messages)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "nothing readable"
    for test, what in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _got(value) -> str:
    """A JSON value as the user wrote it, for 'expected X, got Y'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"string {value[:40]!r}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(value, where: str, sidecar: Path, minimum: float | None = None, positive: bool = False) -> float:
    try:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        ok = False
    if ok and positive:
        ok = value > 0
    elif ok and minimum is not None:
        ok = value >= minimum
    if not ok:
        want = "a finite number" + (" > 0" if positive else f" >= {minimum:g}" if minimum is not None else "")
        raise LabError(f"{sidecar}: {where}: expected {want}, got {_got(value)}", _HINT)
    return float(value)


def _pattern(value, where: str, sidecar: Path) -> str:
    if not isinstance(value, str):
        raise LabError(f"{sidecar}: {where}: expected a regular expression string, got {_got(value)}", _HINT)
    try:
        re.compile(value)
    except re.error as exc:
        raise LabError(f"{sidecar}: {where}: expected a regular expression, got {value[:40]!r} ({exc})", _HINT) from exc
    return value


# key -> (the values after the pattern: names, checks), how an entry is written
_TABLES = {
    "gains": (("kp", "kd"), {"minimum": 0.0}, "[pattern, kp, kd] entries (or an object pattern -> [kp, kd])"),
    "nominal": (("angle",), {}, "[pattern, angle] entries (or an object pattern -> angle)"),
    "effort_default": (("effort",), {"positive": True}, "[pattern, effort] entries (or an object pattern -> effort)"),
}
_HINT = "fix the robot config file <model>.lab.json or remove it"


def _table(key: str, value, sidecar: Path) -> tuple:
    names, check, shape = _TABLES[key]
    if isinstance(value, dict):
        out = []
        for p, v in value.items():
            where = f"{key}[{p[:40]!r}]"
            _pattern(p, f"{where} pattern", sidecar)
            if len(names) == 1:
                vals = [v]
            elif isinstance(v, list) and len(v) == len(names):
                vals = v
            else:
                raise LabError(f"{sidecar}: {where}: expected [{', '.join(names)}], got {_got(v)}", _HINT)
            out.append((p, *(_number(x, f"{where} {n}", sidecar, **check) for n, x in zip(names, vals))))
        return tuple(out)
    if not isinstance(value, list):
        raise LabError(f"{sidecar}: {key}: expected a list of {shape}, got {_got(value)}", _HINT)
    out = []
    for i, entry in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(entry, list) or len(entry) != 1 + len(names):
            raise LabError(f"{sidecar}: {where}: expected [pattern, {', '.join(names)}], got {_got(entry)}", _HINT)
        p = _pattern(entry[0], f"{where} pattern", sidecar)
        out.append((p, *(_number(x, f"{where} {n}", sidecar, **check) for n, x in zip(names, entry[1:]))))
    return tuple(out)


def _config_from_json(raw, sidecar: Path) -> RobotConfig:
    known = _SIDECAR_KEYS
    if not isinstance(raw, dict):
        raise LabError(f"{sidecar}: expected a JSON object with fields {', '.join(known)}, got {_got(raw)}", _HINT)
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise LabError(
            f"{sidecar}: unknown key {unknown[0][:40]!r}"
            + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
            + f"; expected one of {', '.join(known)}",
            _HINT,
        )
    fixed = {}
    for key, value in raw.items():
        if key in _TABLES:
            fixed[key] = _table(key, value, sidecar)
        elif key in ("torso_body", "foot_bodies"):
            fixed[key] = _pattern(value, key, sidecar)
        elif key == "gravity_ff":
            if not isinstance(value, bool):
                raise LabError(f"{sidecar}: gravity_ff: expected true or false, got {_got(value)}", _HINT)
            fixed[key] = value
        elif key == "gain_method":
            if value not in GAIN_METHODS:
                raise LabError(
                    f"{sidecar}: gain_method: expected one of {', '.join(GAIN_METHODS)}, got {_got(value)}", _HINT
                )
            fixed[key] = value
    return dataclasses.replace(DEFAULT_CONFIG, **fixed, given=tuple(fixed))


GAIN_METHODS = ("auto", "names")
_SIDECAR_KEYS = [f.name for f in dataclasses.fields(RobotConfig) if f.name != "given"]
