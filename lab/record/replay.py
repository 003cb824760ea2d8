"""Replaying a recording: MuJoCo re-simulated from the recorded start state with the recorded inputs of every step.

:func:`replay` steps a fresh ``MjData`` from the start keyframe through every ``/mujoco/inputs`` block,
loads each reset keyframe where the run was reset, and compares its ``qpos`` with each periodic and the
end keyframe: ``max_qpos_diff`` is exactly 0.0 when the replay is bit-exact (same machine, same MuJoCo
version). What could make it differ is said beside it, not hidden: the MuJoCo version now against the
recorded one, and the model identity (SHA-256 of the attached model file and assets, computed as
:func:`lab.robots.model.compute_identity` does) against the recorded identity.
"""

import hashlib
import json

import mujoco
import numpy as np

from lab.errors import LabError
from lab.record import format as fmt
from lab.record.reader import Recording, step_inputs


def attached_identity(rec: Recording) -> str | None:
    """The model identity recomputed from the attachments (the recorded MuJoCo version), or None without them."""
    files = {n: d for n, _, d in rec.attachments()}
    main = rec.identity.get("file")
    if main is None or f"model/{main}" not in files:
        return None
    assets = json.loads(rec.meta.get("assets", "{}"))  # attachment name -> original path
    h = hashlib.sha256()
    h.update(files[f"model/{main}"])
    for name, original in sorted(assets.items(), key=lambda kv: kv[1]):
        h.update(original.rsplit("/", 1)[-1].encode())
        h.update(files[name])
    i = rec.identity
    h.update(f"mujoco={i.get('mujoco')};nq={i.get('nq')};nv={i.get('nv')};nu={i.get('nu')}".encode())
    return h.hexdigest()


def replay(rec: Recording, model: mujoco.MjModel | None = None) -> dict:
    """Re-simulate ``rec`` (on ``model``, default the attached one); a dict with ``max_qpos_diff`` [rad or m],
    ``steps``, ``keyframes`` compared, the version and identity checks and ``ok`` (bit-exact and matching)."""
    if fmt.KEYFRAME_TOPIC not in rec.topics:
        raise LabError(f"{rec.path.name} holds no MuJoCo state to replay", "record a run with a MuJoCo engine")
    m = model if model is not None else rec.model()
    nu, nv, nx = rec.dims
    if (m.nu, m.nv, m.nbody * 6) != (nu, nv, nx):
        raise LabError(
            f"the model has nu={m.nu}, nv={m.nv}, nbody={m.nbody}; the recording nu={nu}, nv={nv}, nbody={nx // 6}",
            "replay with the recording's own model (leave out --model)",
        )
    d = mujoco.MjData(m)
    keyframes = sorted((kf for _, kf in rec.read(fmt.KEYFRAME_TOPIC)), key=lambda kf: kf[0])
    # the reset and periodic keyframes in file order at each step: replay loads resets, compares the rest
    starts = [kf for kf in keyframes if kf[2] == fmt.KEY_START]
    if not starts:
        raise LabError(f"{rec.path.name} has no start keyframe", "the file is damaged")
    k = starts[0][0]
    mujoco.mj_setState(m, d, starts[0][3], fmt.STATE_SPEC)
    qpos_of = np.empty(mujoco.mj_stateSize(m, fmt.STATE_SPEC))
    qadr = slice(1, 1 + m.nq)  # mjSTATE_TIME first, then mjSTATE_QPOS
    worst, compared, steps = 0.0, 0, 0
    blocks = iter(_blocks(rec))
    pending, incomplete = None, None
    for kf in keyframes[1:]:
        k_key, _, kind, state = kf
        if k_key > k:
            try:
                n, pending = _advance(m, d, blocks, pending, k, k_key)
            except LabError as exc:  # a recording cut short (the writer fell behind): replayed up to there
                incomplete = exc.message
                break
            steps += n
            k = k_key
        if kind == fmt.KEY_RESET:
            mujoco.mj_setState(m, d, state, fmt.STATE_SPEC)
            continue
        mujoco.mj_getState(m, d, qpos_of, fmt.STATE_SPEC)
        worst = max(worst, float(np.max(np.abs(qpos_of[qadr] - state[qadr]))))
        compared += 1
    recorded, now = rec.identity.get("mujoco"), mujoco.__version__
    ident = attached_identity(rec)
    out = {
        "max_qpos_diff": worst,
        "steps": steps,
        "keyframes": compared,
        "duration_s": round(steps * rec.dt, 6),
        "mujoco_recorded": recorded,
        "mujoco_now": now,
        "version_match": recorded == now,
        "identity_recorded": rec.identity.get("sha256"),
        "identity_attached": ident,
        "identity_match": ident is not None and ident == rec.identity.get("sha256"),
        "own_model": model is None,
        "incomplete": incomplete,
    }
    out["ok"] = worst == 0.0 and compared > 0 and out["version_match"] and out["identity_match"]
    return out


def _blocks(rec: Recording):
    for _, (k0, rows) in rec.read(fmt.INPUTS_TOPIC):
        yield k0, rows


def _advance(m, d, blocks, pending, k_from: int, k_to: int):
    """Step from ``k_from`` to ``k_to`` taking blocks from the iterator ``blocks`` (``pending``: a block
    read before that still has steps beyond ``k_from``); the steps taken and the block left over."""
    taken = []
    if pending is not None:
        taken.append(pending)
    last = pending
    while last is None or last[0] + len(last[1]) < k_to:
        last = next(blocks, None)
        if last is None:
            break
        taken.append(last)
    n = step_inputs(m, d, taken, k_from, k_to)
    left = last if last is not None and last[0] + len(last[1]) > k_to else None
    return n, left
