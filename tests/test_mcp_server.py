"""The MCP server through a real MCP client session over stdio (``python -m lab.remote.mcp_server``) in
front of a real state server and policy server: read-only tools open, motion gated by arming with a reason,
the e-stop never gated, its clear only with confirmation, structured errors with a hint, the audit log."""

import asyncio
import base64
import concurrent.futures
import json
import sys

import pytest

from lab.settings import Settings
from lab.web.policy_server import create_policy_app
from lab.web.server import ServerThread
from lab.web.state_server import create_state_app
from tests.conftest import ROOT

TOKEN = "h15-mcp"


@pytest.fixture(scope="module")
def servers(robot, tmp_path_factory):
    app = create_state_app(Settings(results_dir=tmp_path_factory.mktemp("mcp"), token=TOKEN))
    with ServerThread(app) as st, ServerThread(create_policy_app(robot)) as pol:
        yield st.url, pol.url


def result(r) -> dict:
    """A tool's answer as a dict (its structured content, else its JSON text)."""
    sc = r.structured_content if hasattr(r, "structured_content") else r.structuredContent
    if sc is not None:
        return sc.get("result", sc)
    return json.loads(r.content[0].text)


async def session(state_url, policy_url, tmp_path) -> list:
    from mcp import Client, StdioServerParameters

    audit = tmp_path / "audit.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lab.remote.mcp_server", "--state-url", state_url, "--audit", str(audit)],
        env={"LAB_TOKEN": TOKEN, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        cwd=str(ROOT),
    )
    out = []
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        out.append(names)
        for name, args in [
            ("get_state", {}),
            ("start_policy", {"policy_url": policy_url}),
            ("arm_motion", {"reason": ""}),
            ("arm_motion", {"reason": "mcp test: squat", "expires_s": 60}),
            ("start_policy", {"policy_url": policy_url}),
            ("get_fault_profile", {}),
            ("estop", {}),
            ("clear_estop", {}),
            ("clear_estop", {"confirm": True}),
            ("get_camera_frame", {"width": 160, "height": 120}),
            ("list_recordings", {}),
            ("get_audit_log", {"last": 20}),
        ]:
            out.append((name, result(await client.call_tool(name, args))))
    out.append(audit.read_text().splitlines())
    return out


def test_mcp_tools_gate_motion_never_the_estop_and_log_every_call(servers, tmp_path):
    state_url, policy_url = servers
    # In a thread of its own: a Playwright page of an earlier test may have left this thread's event loop running.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        names, *calls, audit_lines = pool.submit(asyncio.run, session(state_url, policy_url, tmp_path)).result()
    assert {
        "get_state",
        "get_camera_frame",
        "get_fault_profile",
        "list_recordings",
        "get_audit_log",
        "arm_motion",
        "start_policy",
        "stop_policy",
        "set_fault_profile",
        "estop",
        "clear_estop",
    } <= names
    got = dict(enumerate(calls))
    state = got[0][1]
    assert state["ok"] and state["model"]["nq"] == 29 and state["runtime"]["state"] == "idle"
    refused = got[1][1]
    assert not refused["ok"] and "needs motion armed" in refused["error"] and "arm_motion" in refused["hint"]
    assert not got[2][1]["ok"] and got[2][1]["error"] == "arming needs a reason"
    assert got[3][1]["ok"] and got[3][1]["armed"]
    assert got[4][1]["ok"] and got[4][1]["running"]
    assert got[5][1]["profile"] == "healthy"
    assert got[6][1]["ok"] and got[6][1]["state"] == "estop"
    assert not got[7][1]["ok"] and "confirmation" in got[7][1]["error"] and got[7][1]["hint"]
    assert got[8][1]["ok"] and not got[8][1]["estopped"]
    frame = got[9][1]
    assert frame["ok"] and base64.b64decode(frame["jpeg_base64"])[:2] == b"\xff\xd8"
    assert got[10][1]["ok"]
    entries = got[11][1]["entries"]
    assert [e["tool"] for e in entries][:3] == ["get_state", "start_policy", "arm_motion"]
    assert entries[1]["ok"] is False and "needs motion armed" in entries[1]["error"]
    assert len(audit_lines) == 12 and json.loads(audit_lines[6])["tool"] == "estop"
