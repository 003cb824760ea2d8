"""Loading a humanoid (URDF or MJCF) into MuJoCo with the lab's additions, and its identity.

The built-in Q1 is one URDF (``q1/q1.urdf``) that PyBullet loads as it is; for MuJoCo this
module adds, in code, what URDF cannot say: a free base joint, one torque motor per hinge
(ctrlrange from the URDF ``effort``), floor, lights, timestep and offscreen buffer.
"""

import hashlib
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from lab.errors import LabError
from lab.robots.config import RobotConfig, file_kind, load_config

BUILTIN_URDF = Path(__file__).parent / "q1" / "q1.urdf"
TIMESTEP = 0.001  # [s]
GRID_GROUP = 4  # geom group of the floor grid lines the `fast` render preset shows
# The one fall rule, for every service, scan and experiment: the pelvis below this fraction of the
# standing height (0.35 m of the built-in robot's 0.4226 m), or the torso tilted past FALL_TILT_DEG.
FALL_HEIGHT_FRACTION = 0.35 / 0.4226
FALL_TILT_DEG = 45.0  # [deg], on pitch or roll
# The order the built-in robot's actuators are listed in (legs, waist, arms, head).
Q1_ORDER = (
    [
        f"{side}_{j}_joint"
        for side in ("left", "right")
        for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
    ]
    + ["waist_yaw_joint"]
    + [
        f"{side}_{j}_joint"
        for side in ("left", "right")
        for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow")
    ]
    + ["head_yaw_joint"]
)


@dataclass
class Robot:
    """A compiled humanoid plus what the controller needs, indexed in actuator order."""

    path: Path
    kind: str  # "urdf" | "mjcf"
    builtin: bool
    model: mujoco.MjModel
    config: RobotConfig
    identity: str  # SHA-256 hex
    assets: list  # files the model references, absolute paths
    joint_names: list  # actuated joints, actuator order
    actuator_names: list
    qadr: np.ndarray  # (nu,) qpos address of each actuated joint
    dadr: np.ndarray  # (nu,) dof address of each actuated joint
    kp: np.ndarray  # (nu,) [N·m/rad]
    kd: np.ndarray  # (nu,) [N·m·s/rad]
    q_nominal: np.ndarray  # (nu,) [rad]
    tau_limit: np.ndarray  # (nu,) [N·m], symmetric
    root_body: int
    torso_body: int
    foot_bodies: list
    init_qpos: np.ndarray = field(default=None)  # (nq,) nominal pose, feet on the floor
    standing_height: float = 0.0  # root z in init_qpos [m]
    total_mass: float = 0.0  # [kg]
    gain_method: str = "names"  # how gains, limits and pose were found ("auto": lab.robots.tuning)
    gravity_ff: bool = False  # the controller adds the standing gravity load (lab.control.stance)
    mimic: list = field(default_factory=list)  # (joint, leader, multiplier, offset) of URDF <mimic> joints
    soles: list = field(default_factory=list)  # lab.robots.tuning.Sole per foot ("auto")
    legs: list = field(default_factory=list)  # per foot: actuator indices of its leg, root first ("auto")
    knees: list = field(default_factory=list)  # actuator index of each leg's knee, -1 for none ("auto")
    stance_tau: np.ndarray = field(default=None)  # (nu,) standing load at the nominal pose [N·m] ("auto")
    gain_notes: list = field(default_factory=list)  # one line per joint whose gains the 1 ms bound cut

    @property
    def short_id(self) -> str:
        return self.identity[:12]

    @property
    def fall_height(self) -> float:
        """Pelvis height [m] below which the robot has fallen (:data:`FALL_HEIGHT_FRACTION` of standing)."""
        return FALL_HEIGHT_FRACTION * self.standing_height

    def has_fallen(self, pelvis_z: float, pitch_deg: float, roll_deg: float = 0.0) -> bool:
        """The one fall rule: pelvis below :attr:`fall_height` [m] or torso pitch/roll beyond 45 deg."""
        return bool(pelvis_z < self.fall_height or abs(pitch_deg) > FALL_TILT_DEG or abs(roll_deg) > FALL_TILT_DEG)

    @property
    def foot_sides(self) -> dict:
        """The one foot-side rule: body id -> 0 (left) / 1 (right) for each foot body and every body below it.

        A foot's side comes from its name (:func:`side_of`); a foot whose name says neither is left out."""
        m, out = self.model, {}
        for b in self.foot_bodies:
            side = side_of(m.body(b).name)
            if side is None:
                continue
            for c in range(m.nbody):
                p = c
                while p > 0 and p != b:
                    p = int(m.body_parentid[p])
                if p == b:
                    out[c] = side
        return out

    def model_dict(self) -> dict:
        """What status endpoints say about the model: file, kind, dimensions, timestep, mass, standing height."""
        m = self.model
        return {
            "file": self.path.name,
            "kind": self.kind,
            "builtin": self.builtin,
            "nq": int(m.nq),
            "nv": int(m.nv),
            "nu": int(m.nu),
            "timestep": float(m.opt.timestep),
            "total_mass": round(self.total_mass, 4),
            "standing_height": round(self.standing_height, 4),
        }

    def identity_dict(self) -> dict:
        return {
            "sha256": self.identity,
            "short": self.short_id,
            "file": self.path.name,
            "mujoco": mujoco.__version__,
            "nq": int(self.model.nq),
            "nv": int(self.model.nv),
            "nu": int(self.model.nu),
        }


def side_of(name: str) -> int | None:
    """0 for a left body or joint name (``left_*``, ``l_*``, ``*_l_*``, ``*_l``), 1 for a right one, else None."""
    n = (name or "").lower()
    if re.search(r"(^|_)(left|l)(_|$)", n) or n.startswith("left"):
        return 0
    if re.search(r"(^|_)(right|r)(_|$)", n) or n.startswith("right"):
        return 1
    return None


def _resolve_mesh(filename: str, base: Path) -> Path:
    """A mesh path from a URDF: ``package://pkg/x`` or relative to the URDF's folder."""
    if filename.startswith("package://"):
        rest = filename[len("package://") :]
        parts = Path(rest).parts
        for candidate_root in [base, *base.parents][:4]:
            for skip in (1, 0):
                p = candidate_root.joinpath(*parts[skip:])
                if p.exists():
                    return p.resolve()
        return (base / Path(*parts[1:])).resolve()
    if filename.startswith("file://"):
        filename = filename[len("file://") :]
    p = Path(filename)
    return (p if p.is_absolute() else base / p).resolve()


def _urdf_for_mujoco(path: Path) -> tuple[str, list, dict]:
    """The URDF text with absolute mesh paths and MuJoCo compiler options; assets; efforts."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise LabError(f"model {path} is not valid XML: {exc}", "check the file is a URDF or MJCF model") from exc
    assets = []
    for mesh in root.iter("mesh"):
        fn = mesh.get("filename")
        if fn:
            resolved = _resolve_mesh(fn, path.parent)
            if not resolved.exists():
                raise LabError(
                    f"model {path.name} references mesh '{fn}', not found at {resolved}",
                    "meshes are looked up relative to the URDF file (package:// is stripped)",
                )
            _check_regular(path, "mesh", fn, resolved)
            mesh.set("filename", str(resolved))
            assets.append(resolved)
    for tex in root.iter("texture"):  # not read by MuJoCo, but by PyBullet for the same file
        fn = tex.get("filename")
        if fn:
            _check_regular(path, "texture", fn, _resolve_mesh(fn, path.parent))
    efforts, mimic = {}, []
    for j in root.iter("joint"):
        lim = j.find("limit")
        if lim is not None and lim.get("effort") is not None:
            efforts[j.get("name")] = _effort(path, j.get("name"), lim.get("effort"))
        mim = j.find("mimic")
        if mim is not None and mim.get("joint"):
            mimic.append(_mimic(path, j.get("name"), mim))
    efforts["__mimic__"] = mimic
    for old in root.findall("mujoco"):
        root.remove(old)
    mj = ET.SubElement(root, "mujoco")
    ET.SubElement(mj, "compiler", strippath="false", discardvisual="false", fusestatic="false", balanceinertia="true")
    return ET.tostring(root, encoding="unicode"), assets, efforts


def _mimic(path: Path, joint: str, el) -> tuple:
    """A URDF ``<mimic joint multiplier offset>``: (joint, leader, multiplier, offset)."""
    out = [joint, el.get("joint")]
    for key, default in (("multiplier", 1.0), ("offset", 0.0)):
        raw = el.get(key)
        try:
            value = float(raw) if raw is not None else default
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise LabError(
                f"model {path.name}: joint {joint}: mimic {key} {raw[:40]!r} is not a finite number",
                f'set <mimic joint="..." {key}="..."/> to a number',
            )
        out.append(value)
    return tuple(out)


def _effort(path: Path, joint: str, raw: str) -> float:
    """A URDF ``<limit effort>`` [N·m]: a finite number >= 0 (0, as exporters write for "not given", means the
    limit the lab derives), else a :class:`LabError` naming the joint and the value."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise LabError(
            f"model {path.name}: joint {joint}: effort {raw[:40]!r} is not a finite positive number",
            'set <limit effort="..."/> to the joint\'s torque limit in N·m; 0 means none given: the lab derives one',
        )
    return value


def _check_regular(model: Path, what: str, ref: str, resolved: Path) -> None:
    """Refuse a referenced file that exists but is not a regular file (a FIFO would block the reader forever,
    a directory or a device cannot be a mesh), before anything opens it. A missing file is left to the caller."""
    try:
        exists = resolved.exists()
        regular = resolved.is_file()
    except (OSError, ValueError):
        return  # a path the OS refuses to look at: the loader reports it as not found
    if exists and not regular:
        raise LabError(
            f"model {model.name} references {what} '{ref[:80]}': expected a regular file, "
            f"found {file_kind(resolved)} at {resolved}",
            f"point the {what} at a regular file",
        )


# MJCF attributes that name a file: mesh/hfield/skin/model/include file, a cube or skybox texture's six faces
_MJCF_FILE_ATTR = re.compile(r"^file(right|left|up|down|front|back)?$")
_MJCF_DIR_ATTRS = ("meshdir", "texturedir", "assetdir")
_XML_TAG = re.compile(r"<\s*([\w:.-]+)([^<>]*)>")
_XML_ATTR = re.compile(r"([\w:.-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")


def _xml_elements(f: Path) -> list:
    """(tag, attributes) of every element of an XML file; by a plain scan if it does not parse as XML here
    (MuJoCo's own parser then has the last word on it). Empty for a file that cannot be read."""
    try:
        return [(el.tag, dict(el.attrib)) for el in ET.parse(f).getroot().iter()]
    except ET.ParseError:
        pass
    except (OSError, ValueError, RecursionError):
        return []
    try:
        text = f.read_text(errors="replace")
    except OSError:
        return []
    return [
        (
            m.group(1),
            {a.group(1): a.group(2) if a.group(2) is not None else a.group(3) for a in _XML_ATTR.finditer(m.group(2))},
        )
        for m in _XML_TAG.finditer(text)
    ]


def _check_mjcf_files(path: Path) -> None:
    """Before MuJoCo reads an MJCF: every file it (or an ``<include>``, recursively) references that exists must
    be a regular file. MuJoCo reads includes while parsing and meshes while compiling, and blocks forever on a FIFO.

    A file is looked for where MuJoCo may look (the model's folder, the including file's folder, each with the
    ``meshdir``, ``texturedir`` or ``assetdir`` of any ``<compiler>``); any non-regular candidate is refused."""
    base = path.parent
    todo, seen, refs, dirs = [path], set(), [], {""}
    while todo and len(seen) < 1000:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for tag, attrib in _xml_elements(f):
            if tag == "compiler":
                dirs.update(attrib[a] for a in _MJCF_DIR_ATTRS if attrib.get(a))
            for attr, value in attrib.items():
                if not (value and _MJCF_FILE_ATTR.match(attr)):
                    continue
                refs.append((tag, value, f.parent))
                if tag == "include":
                    for folder in {base, f.parent}:
                        candidate = folder / value
                        _check_regular(path, "include", value, candidate)
                        if candidate.is_file():
                            todo.append(candidate.resolve())
    for tag, value, folder in refs:
        for top in {base, folder}:
            for d in dirs:
                _check_regular(path, tag, value, top / d / value)


def _mjcf_assets(path: Path, spec: mujoco.MjSpec) -> list:
    base = path.parent
    meshdir = base / (spec.meshdir or "")
    texdir = base / (spec.texturedir or "")
    out = []
    for m in spec.meshes:
        if m.file:
            out.append((meshdir / m.file).resolve())
    for t in spec.textures:
        if t.file:
            out.append((texdir / t.file).resolve())
    return out


def compute_identity(path: Path, assets: list, model: mujoco.MjModel) -> str:
    """SHA-256 over the model file, every asset it references, the MuJoCo version and nq/nv/nu."""
    h = hashlib.sha256()
    h.update(path.read_bytes())
    for a in sorted(set(assets)):
        h.update(a.name.encode())
        h.update(a.read_bytes())
    h.update(f"mujoco={mujoco.__version__};nq={model.nq};nv={model.nv};nu={model.nu}".encode())
    return h.hexdigest()


def _add_world(spec: mujoco.MjSpec) -> None:
    has_plane = any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in spec.geoms)
    spec.visual.global_.offwidth = 1280
    spec.visual.global_.offheight = 960
    spec.visual.quality.shadowsize = 2048
    spec.visual.headlight.ambient = [0.35, 0.35, 0.38]
    spec.visual.headlight.diffuse = [0.45, 0.45, 0.45]
    spec.add_texture(
        name="lab_sky",
        type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
        rgb1=[0.32, 0.40, 0.50],
        rgb2=[0.05, 0.06, 0.08],
        width=256,
        height=256,
    )
    if not has_plane:
        spec.add_texture(
            name="lab_grid",
            type=mujoco.mjtTexture.mjTEXTURE_2D,
            builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
            rgb1=[0.20, 0.23, 0.27],
            rgb2=[0.14, 0.16, 0.19],
            mark=mujoco.mjtMark.mjMARK_EDGE,
            markrgb=[0.35, 0.38, 0.42],
            width=512,
            height=512,
        )
        mat = spec.add_material(name="lab_floor", texrepeat=[10, 10], reflectance=0.15)
        mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "lab_grid"
        spec.worldbody.add_geom(
            name="floor",
            type=mujoco.mjtGeom.mjGEOM_PLANE,
            size=[5, 5, 0.05],
            material="lab_floor",
            contype=0,
            conaffinity=1,
            friction=[1.0, 0.005, 0.0001],
        )
        # 1 m grid lines, drawn only by the `fast` preset (geom group 4) in place of the floor texture,
        # whose trilinear sampling is the dearest part of a frame on a software renderer
        for k in range(-4, 5):
            for size, pos in (
                ([4.0, 0.005, 0.0005], [0.0, float(k), 0.0]),
                ([0.005, 4.0, 0.0005], [float(k), 0.0, 0.0]),
            ):
                spec.worldbody.add_geom(
                    type=mujoco.mjtGeom.mjGEOM_BOX,
                    size=size,
                    pos=pos,
                    rgba=[0.28, 0.31, 0.36, 1],
                    contype=0,
                    conaffinity=0,
                    group=GRID_GROUP,
                )
    spec.worldbody.add_light(
        name="lab_key",
        pos=[0.6, -0.8, 2.5],
        dir=[-0.25, 0.3, -1],
        castshadow=True,
        diffuse=[0.6, 0.6, 0.6],
        specular=[0.2, 0.2, 0.2],
    )


def _find_body(model, pattern: str, fallback: int) -> int:
    for b in range(model.nbody):
        if re.search(pattern, model.body(b).name or ""):
            return b
    return fallback


def load_robot(path: str | Path | None = None) -> Robot:
    """Load ``path`` (URDF or MJCF; None for the built-in Q1) and add the lab's pieces.

    Raises :class:`LabError` with one clear line for anything wrong with the file: missing, not a regular
    file, not XML, not compiling, no hinge joint, a bad ``effort`` or sidecar config, a mesh that is a FIFO.
    No other exception type escapes for a bad file.
    """
    try:
        return _load_robot(path)
    except LabError:
        raise
    except Exception as exc:  # the last net: whatever a bad file makes a parser or MuJoCo raise
        name = Path(str(path)).name if path is not None else BUILTIN_URDF.name
        raise LabError(
            f"model {name} does not load: {type(exc).__name__}: {_first_line(exc)}",
            "check the file is a valid URDF or MJCF model",
        ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _load_robot(path: str | Path | None) -> Robot:
    builtin = path is None
    path = Path(BUILTIN_URDF if builtin else path).expanduser()
    if not path.exists():
        raise LabError(f"model file not found: {path}", "pass --model PATH to an existing .urdf or .xml file")
    if not path.is_file():  # a FIFO would block the read below forever
        raise LabError(
            f"model path is not a file: {path} is {file_kind(path)}, expected a regular .urdf or .xml file",
            "pass --model PATH to a .urdf or .xml file",
        )
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise LabError(f"model file {path} cannot be read: {_first_line(exc)}", "check the file's permissions") from exc
    kind = "urdf" if re.search(r"<robot\b", text) else "mjcf"
    efforts, servo_gains = {}, {}
    try:
        if kind == "urdf":
            xml, assets, efforts = _urdf_for_mujoco(path)
            spec = mujoco.MjSpec.from_string(xml)
            spec.modelfiledir = str(path.parent)
        else:
            _check_mjcf_files(path)
            spec = mujoco.MjSpec.from_file(str(path))
            assets = _mjcf_assets(path, spec)
    except LabError:
        raise
    except Exception as exc:  # mujoco raises ValueError with the compiler's message
        msg = _first_line(exc)
        raise LabError(
            f"model {path.name} does not load: {msg}", "check the file is a valid URDF or MJCF model"
        ) from exc

    root = spec.worldbody.first_body()
    if root is None:
        raise LabError(f"model {path.name} has no bodies", "a humanoid needs a floating root body")
    if not any(j.type == mujoco.mjtJoint.mjJNT_FREE for j in root.joints):
        if len(root.joints):
            raise LabError(
                f"model {path.name}: root body '{root.name}' already has joints but no free joint",
                "the lab simulates floating-base humanoids",
            )
        root.add_freejoint(name="floating_base")
    if kind == "urdf":
        for g in spec.geoms:
            if g.contype or g.conaffinity:  # collision geoms: hidden group, collide with the floor only
                g.group = 3
                g.contype, g.conaffinity = 1, 0
                g.friction = [1.0, 0.005, 0.0001]
    spec.option.timestep = TIMESTEP
    _add_world(spec)
    config = load_config(path, builtin)
    mimic = efforts.pop("__mimic__", [])
    mimicked = {m[0] for m in mimic}
    # a mimic joint follows its leader by the equality constraint MuJoCo's URDF reader makes of <mimic>: no motor
    if kind == "mjcf":
        servo_gains = _servos_to_motors(spec)

    if len(spec.actuators) == 0:
        hinges = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE]
        if not hinges:
            _refuse_no_hinge(path, [j.type for j in spec.joints])
        if builtin:
            hinges.sort(key=lambda j: Q1_ORDER.index(j.name) if j.name in Q1_ORDER else 999)
        auto = config.gain_method == "auto"
        for j in hinges:
            if j.name in mimicked:
                continue
            lim = efforts.get(j.name) or (None if auto else config.effort_for(j.name))
            short = re.sub(r"_joint$", "", j.name)
            spec.add_actuator(  # an unlimited motor ("auto" with no effort given) gets its limit in _finish
                name=f"motor_{short}",
                target=j.name,
                trntype=mujoco.mjtTrn.mjTRN_JOINT,
                gear=[1, 0, 0, 0, 0, 0],
                ctrllimited=mujoco.mjtLimited.mjLIMITED_TRUE if lim else mujoco.mjtLimited.mjLIMITED_FALSE,
                ctrlrange=[-lim, lim] if lim else [0, 0],
            )
    try:
        model = spec.compile()
    except Exception as exc:
        msg = _first_line(exc)
        raise LabError(
            f"model {path.name} does not compile: {msg}", "check the model in MuJoCo's simulate viewer"
        ) from exc
    return _finish(path, kind, builtin, model, config, assets, mimic, servo_gains)


def _servos_to_motors(spec) -> dict:
    """MJCF position/velocity servos (an actuator with a bias) become torque motors the lab's PD drives; their
    ``kp`` and ``kv`` are kept as the joint's gains. Returns {joint name: (kp, kd)}."""
    gains = {}
    for act in spec.actuators:
        if act.trntype != mujoco.mjtTrn.mjTRN_JOINT or act.biastype == mujoco.mjtBias.mjBIAS_NONE:
            continue
        gear = act.gear[0] or 1.0
        kp = float(act.gainprm[0]) * abs(gear)
        kd = float(-act.biasprm[2]) * abs(gear)
        gains[act.target] = (max(kp, 0.0), max(kd, 0.0))
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.gainprm = [1.0] + [0.0] * (len(act.gainprm) - 1)
        act.biastype = mujoco.mjtBias.mjBIAS_NONE
        act.biasprm = [0.0] * len(act.biasprm)
        limited = act.forcelimited == mujoco.mjtLimited.mjLIMITED_TRUE or (
            act.forcelimited == mujoco.mjtLimited.mjLIMITED_AUTO and any(act.forcerange)
        )
        if limited:  # the servo's force range is the motor's range
            lo, hi = act.forcerange
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
            act.ctrlrange = [lo / abs(gear), hi / abs(gear)]
        else:
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
    return gains


_JOINT_KINDS = {
    mujoco.mjtJoint.mjJNT_FREE: "free",
    mujoco.mjtJoint.mjJNT_BALL: "ball",
    mujoco.mjtJoint.mjJNT_SLIDE: "slide",
    mujoco.mjtJoint.mjJNT_HINGE: "hinge",
}


def _refuse_no_hinge(path: Path, types) -> None:
    counts = {}
    for t in types:
        name = _JOINT_KINDS.get(int(t), str(int(t)))
        counts[name] = counts.get(name, 0) + 1
    found = ", ".join(f"{n} {k}" for k, n in counts.items()) or "none at all"
    raise LabError(
        f"model {path.name}: expected at least one hinge joint to drive, found none (joints: {found})",
        "the lab's PD law drives one torque motor per hinge joint: give the robot revolute or continuous joints",
    )


def _finish(path, kind, builtin, model, config, assets, mimic=(), servo_gains=None) -> Robot:
    if model.nu == 0:
        _refuse_no_hinge(path, model.jnt_type)
    _unit_gear(model)
    joint_names, actuator_names, qadr, dadr, jids, given = [], [], [], [], [], []
    for a in range(model.nu):
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            continue
        j = model.actuator_trnid[a, 0]
        if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            continue
        joint_names.append(model.joint(j).name)
        actuator_names.append(model.actuator(a).name)
        qadr.append(model.jnt_qposadr[j])
        dadr.append(model.jnt_dofadr[j])
        jids.append(j)
        given.append(_model_limit(model, a, j))
    if len(joint_names) != model.nu:
        raise LabError(
            f"model {path.name}: {model.nu - len(joint_names)} actuator(s) do not drive a hinge joint",
            "the lab's PD law drives one motor per hinge joint",
        )
    bad = [(a or f"on joint {j}", v) for a, j, v in zip(actuator_names, joint_names, given) if math.isinf(v)]
    if bad:
        raise LabError(
            f"model {path.name}: actuator {bad[0][0]}: torque limit {float(bad[0][1])} is not a finite number",
            "give the actuator a finite ctrlrange (MJCF) or its joint a finite effort (URDF)",
        )
    robot = Robot(
        path=path,
        kind=kind,
        builtin=builtin,
        model=model,
        config=config,
        identity=compute_identity(path, assets, model),
        assets=assets,
        joint_names=joint_names,
        actuator_names=actuator_names,
        qadr=np.array(qadr, int),
        dadr=np.array(dadr, int),
        kp=np.zeros(len(jids)),
        kd=np.zeros(len(jids)),
        q_nominal=np.zeros(len(jids)),
        tau_limit=np.zeros(len(jids)),
        root_body=1,
        torso_body=_find_body(model, config.torso_body, 1),
        foot_bodies=[],
    )
    robot.mimic = list(mimic)
    robot.gain_method = config.gain_method
    robot.gravity_ff = bool(config.gravity_ff) if config.gravity_ff is not None else config.gain_method == "auto"
    if config.gain_method == "names":
        _by_names(robot, np.array(given), np.array(jids))
    else:
        _by_model(robot, np.array(given), np.array(jids), servo_gains or {})
    robot.total_mass = float(model.body_mass.sum())
    return robot


def _unit_gear(model) -> None:
    """Every motor becomes ``ctrl`` = joint torque [N·m]: gear 1 and unit gain, its ranges scaled to match (the
    PD law writes torques; an MJCF motor with ``gear="100"`` would otherwise get 100x them)."""
    for a in range(model.nu):
        scale = float(model.actuator_gear[a, 0]) * float(model.actuator_gainprm[a, 0] or 1.0)
        if scale in (0.0, 1.0):
            continue
        model.actuator_ctrlrange[a] = sorted(model.actuator_ctrlrange[a] * scale)
        model.actuator_forcerange[a] = sorted(model.actuator_forcerange[a] * abs(float(model.actuator_gear[a, 0])))
        model.actuator_gear[a, 0] = 1.0
        model.actuator_gainprm[a, 0] = 1.0


def _model_limit(model, a, j) -> float:
    """The tightest torque limit [N·m] the model gives actuator ``a`` on joint ``j`` (ctrlrange x gear, the
    actuator's forcerange, the joint's actuatorfrcrange); nan when it gives none, inf for a non-finite one."""
    out = math.nan
    gear = abs(model.actuator_gear[a, 0]) or 1.0
    candidates = []
    if model.actuator_ctrllimited[a]:
        candidates.append(min(abs(model.actuator_ctrlrange[a, 0]), abs(model.actuator_ctrlrange[a, 1])) * gear)
    if model.actuator_forcelimited[a]:
        candidates.append(min(abs(model.actuator_forcerange[a, 0]), abs(model.actuator_forcerange[a, 1])) * gear)
    if model.jnt_actfrclimited[j]:
        candidates.append(min(abs(model.jnt_actfrcrange[j, 0]), abs(model.jnt_actfrcrange[j, 1])))
    for c in candidates:
        if not math.isfinite(c):
            return math.inf
        out = c if math.isnan(out) else min(out, c)
    return out


def _by_names(robot: Robot, given, jids) -> None:
    """The reference robot's way: gains, nominal angles and missing limits from the config's name tables."""
    model, config, names = robot.model, robot.config, robot.joint_names
    robot.tau_limit = np.array(
        [g if math.isfinite(g) else config.effort_for(n) for g, n in zip(given, names)], dtype=float
    )
    gains = [config.gains_for(n) for n in names]
    robot.kp = np.array([g[0] for g in gains])
    robot.kd = np.array([g[1] for g in gains])
    q = np.array([config.nominal_for(n) for n in names])
    lo, hi = model.jnt_range[jids, 0], model.jnt_range[jids, 1]
    robot.q_nominal = np.where(model.jnt_limited[jids].astype(bool), np.clip(q, lo, hi), q)
    robot.foot_bodies = [b for b in range(model.nbody) if re.search(config.foot_bodies, model.body(b).name or "")]
    robot.gain_notes = []
    robot.init_qpos, robot.standing_height = _standing_qpos(robot)


def _by_model(robot: Robot, given, jids, servo_gains: dict) -> None:
    """:mod:`lab.robots.tuning`'s method, with what a sidecar gives (gains, nominal, effort defaults, feet)
    overriding it joint by joint, and servo gains an MJCF declares kept as the joint's gains."""
    from lab.robots import tuning

    model, config, names = robot.model, robot.config, robot.joint_names
    fixed = {}
    if "nominal" in config.given:
        fixed = {i: config.nominal_for(n) for i, n in enumerate(names) if _matches(config.nominal, n)}
    feet = None
    if "foot_bodies" in config.given:
        feet = [b for b in range(model.nbody) if re.search(config.foot_bodies, model.body(b).name or "")]
    limits = np.array(given, float)
    if "effort_default" in config.given:
        limits = np.array(
            [
                config.effort_for(n) if math.isnan(g) and _matches(config.effort_default, n) else g
                for g, n in zip(limits, names)
            ]
        )
    d = tuning.derive(model, jids, robot.qadr, robot.dadr, limits, fixed, side_of, feet, robot.kind == "urdf")
    robot.kp, robot.kd, robot.tau_limit = d.kp, d.kd, d.tau_limit
    for i, n in enumerate(names):
        if n in servo_gains:
            robot.kp[i], robot.kd[i] = servo_gains[n]
        if "gains" in config.given and _matches(config.gains, n):
            robot.kp[i], robot.kd[i] = config.gains_for(n)
    for a in range(model.nu):  # actuator a drives joint a of the robot's order
        if not model.actuator_ctrllimited[a]:  # the limit the lab chose is the motor's too
            model.actuator_ctrllimited[a] = 1
            model.actuator_ctrlrange[a] = [-robot.tau_limit[a], robot.tau_limit[a]]
    if robot.kind == "urdf":  # the one model both engines read (MuJoCo would integrate it implicitly)
        model.dof_damping[:] = d.damping
    robot.foot_bodies, robot.soles, robot.legs, robot.knees = d.feet, d.soles, d.legs, d.knees
    robot.stance_tau, robot.gain_notes = d.stance_tau, d.notes
    robot.init_qpos = d.init_qpos
    robot.standing_height = float(d.init_qpos[2])
    robot.q_nominal = d.init_qpos[robot.qadr].copy()


def _matches(table, name: str) -> bool:
    return any(re.search(entry[0], name) for entry in table)


def _standing_qpos(robot: Robot) -> tuple[np.ndarray, float]:
    """qpos at the nominal pose with the lowest collision point 0.5 mm above the floor."""
    m = robot.model
    d = mujoco.MjData(m)
    qpos = m.qpos0.copy()
    qpos[0:3] = [0, 0, 1.0]
    qpos[3:7] = [1, 0, 0, 0]
    qpos[robot.qadr] = robot.q_nominal
    d.qpos[:] = qpos
    mujoco.mj_forward(m, d)
    lowest = np.inf
    for g in range(m.ngeom):
        if m.geom_bodyid[g] == 0 or not (m.geom_contype[g] or m.geom_conaffinity[g]):
            continue
        if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE:
            low = d.geom_xpos[g, 2] - m.geom_size[g, 0]
        else:  # lowest corner of the geom's bounding box (tight for boxes and box-like meshes)
            rz = d.geom_xmat[g].reshape(3, 3)[2]
            low = d.geom_xpos[g, 2] + rz @ m.geom_aabb[g, :3] - np.abs(rz) @ m.geom_aabb[g, 3:]
        lowest = min(lowest, low)
    if not np.isfinite(lowest):
        lowest = 0.0
    qpos[2] = 1.0 - lowest + 0.0005
    return qpos, float(qpos[2])
