"""Recording runs (lab/record): real sessions on the real model, real MCAP files, replayed bit-exactly.

Each recording is made offline (``advance``, in this thread) into a temporary folder; the replay runs as
``experiments/replay.py`` in a child process, as a person would run it.
"""

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import mujoco
import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.records import Message
from mcap.stream_reader import StreamReader

from lab.errors import LabError
from lab.record import format as fmt
from lab.record import open_recording
from lab.record.replay import replay
from lab.record.store import Recordings
from lab.runtime.session import SimSession
from tests.conftest import ROOT, wait_until


@pytest.fixture(scope="module")
def push_run(robot, tmp_path_factory):
    """A 10 s push run (the push mode's pushes, a pause, a reset, a mode change) recorded to a file."""
    s = SimSession(robot, mode="push")
    store = Recordings(tmp_path_factory.mktemp("rec"), "lab")
    info = store.start(s, label="push run")
    s.advance(4.0)
    s.pause(True)
    s.pause(True)  # the same event again at once: counted into the first
    s.pause(False)
    s.reset()
    s.advance(3.0)
    s.set_mode("squat")
    s.advance(3.0)
    end = store.stop(info["id"])
    return store.path(info["id"]), end


def test_a_ten_second_push_run_replays_bit_exact(push_run):
    path, end = push_run
    assert end["state"] == "done" and end["duration_s"] == pytest.approx(10.0)
    p = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "replay.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["max_qpos_diff"] == 0.0
    assert out["steps"] == 10_000 and out["keyframes"] >= 10
    assert out["version_match"] and out["identity_match"]


def test_the_file_opens_with_the_mcap_reader_and_every_schema_and_message_is_valid(push_run):
    path, _ = push_run
    with open(path, "rb") as f:
        reader = make_reader(f, validate_crcs=True)  # the chunks' and the summary's CRCs too
        summary = reader.get_summary()
        assert summary.chunk_indexes and all(c.compression == "zstd" for c in summary.chunk_indexes)
        counts = summary.statistics.channel_message_counts
        assert sum(counts.values()) == summary.statistics.message_count == sum(1 for _ in reader.iter_messages())
        validators = {}
        for sid, schema in summary.schemas.items():
            assert schema.encoding == "jsonschema"
            doc = json.loads(schema.data)
            jsonschema.Draft202012Validator.check_schema(doc)
            validators[sid] = jsonschema.Draft202012Validator(doc)
        seen = set()
        last = {}  # topic -> (log time, message) of each JSON topic's last message
        for schema, channel, message in reader.iter_messages():
            if channel.message_encoding == "json":
                msg = json.loads(message.data)
                validators[schema.id].validate(msg)
                seen.add(channel.topic)
                last[channel.topic] = (message.log_time, msg)
            else:
                assert channel.schema_id == 0 and channel.message_encoding in (
                    fmt.KEYFRAME_ENCODING,
                    fmt.INPUTS_ENCODING,
                )
        f.seek(0)
        linear = StreamReader(f, skip_magic=False, validate_crcs=True)  # record by record, as a stream reads it
        assert sum(isinstance(r, Message) for r in linear.records) == summary.statistics.message_count
        names = {a.name for a in reader.iter_attachments()}
        meta = {m.name: m.metadata for m in reader.iter_metadata()}
    assert seen == {"/joint_states", "/base", "/tf", "/contacts", "/contact_scene", "/command", "/metrics", "/event"}
    schemas = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values() if c.schema_id}
    assert schemas["/tf"] == "foxglove.FrameTransform" and schemas["/contact_scene"] == "foxglove.SceneUpdate"
    assert schemas["/base"] == "foxglove.PoseInFrame"
    # the transform is the base pose; the scene draws the recorded contacts (a sphere and an arrow up at each)
    (t_tf, tf), (t_base, base) = last["/tf"], last["/base"]
    assert t_tf == t_base and (tf["parent_frame_id"], tf["child_frame_id"]) == ("world", "base")
    assert tf["translation"] == base["pose"]["position"] and tf["rotation"] == base["pose"]["orientation"]
    (t_sc, scene), (t_c, contacts) = last["/contact_scene"], last["/contacts"]
    (entity,) = scene["entities"]
    points = [c["position"] for c in contacts["contacts"]]
    assert t_sc == t_c and points and [s["pose"]["position"] for s in entity["spheres"]] == points
    assert len(entity["arrows"]) == len(points) and all(a["shaft_length"] > 0 for a in entity["arrows"])
    assert {"model.mjb.zst", "model/q1.urdf"} <= names
    assert meta["identity"]["sha256"] and meta["identity"]["mujoco"] == mujoco.__version__
    assert meta["result"]["state"] == "done"


def test_events_say_what_happened_and_repeats_are_counted(push_run):
    path, _ = push_run
    with open_recording(path) as rec:
        ev = rec.events()
    kinds = [e["kind"] for e in ev]
    assert kinds[0] == "start" and kinds[-1] == "stop"
    assert {"push", "pause", "resume", "reset", "mode"} <= set(kinds)
    pause = next(e for e in ev if e["kind"] == "pause")
    assert pause["count"] == 2 and pause["t"] == pytest.approx(4.0)
    push = next(e for e in ev if e["kind"] == "push")
    assert push["data"]["force_n"][0] > 0 and push["data"]["duration_s"] > 0
    assert next(e for e in ev if e["kind"] == "mode")["data"]["mode"] == "squat"


def test_state_at_is_the_live_state_bit_for_bit(robot, tmp_path):
    s = SimSession(robot, mode="push")
    store = Recordings(tmp_path, "lab")
    info = store.start(s)
    s.advance(2.345)
    live = s.engine.data.qpos.copy(), s.engine.data.qvel.copy()
    s.advance(1.0)
    store.stop(info["id"])
    with open_recording(store.path(info["id"])) as rec:
        _, d = rec.state_at(2.345)
        assert rec.duration_s == pytest.approx(3.345)
        assert list(rec.read("/joint_states", 1.0, 1.1))  # a time range through the chunk index
    assert np.array_equal(d.qpos, live[0]) and np.array_equal(d.qvel, live[1])


def test_a_mouse_pull_while_recording_acts_as_without_and_replays_exactly(robot, tmp_path):
    runs = []
    for record in (False, True):
        s = SimSession(robot, mode="stand")
        store = Recordings(tmp_path, "lab")
        info = store.start(s) if record else None
        s.advance(0.2)
        torso = robot.torso_body
        point = s.engine.data.xpos[torso].copy()
        s.perturb_start(torso, point, point + [0.1, 0.05, 0.0], owner="test")
        s.advance(0.5)
        s.perturb_end("test")
        s.advance(0.3)
        runs.append(s.engine.data.qpos.copy())
        if record:
            store.stop(info["id"])
            with open_recording(store.path(info["id"])) as rec:
                out = replay(rec)
                kinds = [e["kind"] for e in rec.events()]
    assert np.array_equal(runs[0], runs[1])  # the pull acts the same with a recording on
    assert out["max_qpos_diff"] == 0.0 and out["ok"]
    assert "perturb_start" in kinds and "perturb" in kinds


def test_the_maximum_duration_stops_with_a_message_and_a_valid_file(robot, tmp_path):
    s = SimSession(robot, mode="stand")
    store = Recordings(tmp_path, "lab")
    info = store.start(s, max_s=0.5)
    s.advance(1.0)
    assert s.recorder is None  # detached at 0.5 s: the simulation went on alone
    end = store.stop(info["id"])
    assert end["state"] == "done" and "maximum duration of 0.5 s" in end["reason"]
    assert end["duration_s"] == pytest.approx(0.5)
    with open_recording(store.path(info["id"])) as rec:
        assert rec.steps == 500 and replay(rec)["max_qpos_diff"] == 0.0


def test_an_unwritable_folder_is_a_clear_error_and_the_simulation_goes_on(robot, tmp_path):
    blocked = tmp_path / "recordings"
    blocked.write_text("a file where the folder should be")
    s = SimSession(robot, mode="stand")
    store = Recordings(blocked, "lab")
    with pytest.raises(LabError) as err:
        store.start(s)
    assert err.value.status == 507 and f"cannot write recordings to {blocked}" in err.value.message
    assert s.recorder is None
    s.advance(0.1)
    assert s.sim_time == pytest.approx(0.1) and store.list() == []


def test_sim2sim_records_both_engines_and_mujoco_replays_exactly(robot, tmp_path):
    from lab.runtime.lockstep import Lockstep

    ls = Lockstep(robot, mode="push")
    try:
        store = Recordings(tmp_path, "sim2sim")
        info = store.start(ls)
        ls.advance(1.5)
        end = store.stop(info["id"])
    finally:
        ls.close()
    assert end["state"] == "done"
    with open_recording(store.path(info["id"])) as rec:
        assert {"/joint_states", "/pybullet/joint_states", "/pybullet/base", "/pybullet/command"} <= set(rec.topics)
        _, js = next(iter(rec.read("/pybullet/joint_states", 1.0, 1.1)))
        assert len(js["position"]) == robot.model.nu and js["name"] == list(robot.joint_names)
        assert rec.meta["service"] == "sim2sim" and rec.exact == "mujoco"
        out = replay(rec)
    assert out["max_qpos_diff"] == 0.0 and out["steps"] == 1500


def writer_processes() -> list:
    """The pids of this process's recording writer processes (a zombie, unreaped, counts too)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmd = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and (b"lab.record.writer" in cmd or fields[0] == "Z"):
            out.append(int(stat.parent.name))
    return out


def test_each_recording_has_a_writer_process_that_is_gone_once_stopped(robot, tmp_path):
    s = SimSession(robot, mode="stand")
    store = Recordings(tmp_path, "lab")
    info = store.start(s)
    pids = writer_processes()
    assert len(pids) == 1
    s.advance(0.5)
    assert store.stop(info["id"])["state"] == "done"
    assert writer_processes() == [] and not Path(f"/proc/{pids[0]}").exists()  # exited and reaped


def test_a_writer_process_that_dies_ends_the_recording_failed_with_a_valid_file(robot, tmp_path):
    s = SimSession(robot, mode="push")
    store = Recordings(tmp_path, "lab")
    info = store.start(s)
    head = info["bytes"]
    (pid,) = writer_processes()
    wait_until(lambda: s.advance(0.2) or store.info(info["id"])["bytes"] > head + 100_000, 60)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: s.advance(0.1) or s.recorder is None, 30)  # the simulation goes on, detached
    end = store.stop(info["id"])
    assert end["state"] == "failed" and "the recording writer process died (killed by SIGKILL)" in end["reason"]
    assert writer_processes() == []
    with open_recording(store.path(info["id"])) as rec:
        assert rec.result is None and rec.steps > 0  # cut back to the last whole record, then closed
        assert list(rec.read("/joint_states")) and list(rec.read(fmt.KEYFRAME_TOPIC))
        assert np.isfinite(rec.state_at(0.5)[0]).all()


def test_the_size_limit_stops_with_a_message_and_a_valid_file(robot, tmp_path):
    s = SimSession(robot, mode="push")
    store = Recordings(tmp_path, "lab")
    info = store.start(s, max_mb=1)
    wait_until(lambda: s.advance(0.5) or s.recorder is None, 120)
    end = store.stop(info["id"])
    assert end["state"] == "done" and "size limit of 1 MB" in end["reason"] and end["bytes"] >= 1e6
    with open_recording(store.path(info["id"])) as rec:
        assert rec.result["state"] == "done" and replay(rec)["max_qpos_diff"] == 0.0


def test_a_full_disk_ends_the_recording_failed_with_a_finished_file_that_replays(robot, tmp_path):
    """The kernel's file-size limit on the writer process (RLIMIT_FSIZE, binding for root too) refuses the file
    more room as a full disk would: the writer's real OSError path, with EFBIG instead of ENOSPC."""
    s = SimSession(robot, mode="push")
    store = Recordings(tmp_path, "lab")
    info = store.start(s)
    (pid,) = writer_processes()
    path = tmp_path / info["file"]
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (path.stat().st_size + 100_000, resource.RLIM_INFINITY))
    wait_until(lambda: s.advance(0.5) or s.recorder is None, 120)  # detached: the simulation goes on alone
    s.advance(0.5)
    end = store.stop(info["id"])
    assert end["state"] == "failed" and end["duration_s"] > 1.0
    assert "cannot write" in end["reason"] and "File too large" in end["reason"]
    assert "recording stopped, the file is finished" in end["reason"]
    with open(path, "rb") as f:
        assert make_reader(f).get_summary() is not None  # finished with its index, in the room kept for it
    with open_recording(path) as rec:
        assert rec.result["state"] == "failed" and "File too large" in rec.result["reason"]
        assert [e["kind"] for e in rec.events()][-1] == "stop"
        out = replay(rec)
    assert out["max_qpos_diff"] == 0.0 and out["steps"] == rec.steps and out["incomplete"] is None
    assert path.stat().st_size == end["bytes"]  # the room left over is given back


def test_a_disk_too_full_for_a_recording_refuses_it_at_the_start(robot, tmp_path):
    s = SimSession(robot, mode="stand")
    store = Recordings(tmp_path, "lab")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, hard))  # the writer process inherits it
    try:
        with pytest.raises(LabError) as err:
            store.start(s)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert err.value.status == 507 and "File too large" in err.value.message and "free some disk" in err.value.hint
    assert s.recorder is None and store.list() == [] and writer_processes() == []
