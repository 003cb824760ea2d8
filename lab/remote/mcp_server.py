"""Agent tools for the remote-control runtime: an MCP server (the ``mcp`` SDK) in front of a state server.

Tools (each answers a JSON object; a refusal or a failure is ``{"ok": false, "error", "hint"}``, never an
exception):

- read-only, never gated: ``get_state``, ``get_camera_frame`` (a JPEG of the robot drawn from the state's
  ``qpos``, kinematics only), ``get_fault_profile``, ``list_recordings``, ``get_audit_log``;
- motion, gated by the state server's arming (a reason and an expiry, ``arm_motion``): ``start_policy``,
  ``stop_policy``, ``set_fault_profile``;
- ``estop``: never gated; ``clear_estop``: only with ``confirm`` true.

Every call is appended to the audit log (``get_audit_log`` reads it; ``--audit FILE`` also writes it as
JSON lines). Serve it over stdio: ``python -m lab.remote.mcp_server --state-url http://127.0.0.1:8766``.
"""

import argparse
import base64
import collections
import json
import os
import time
from pathlib import Path

import numpy as np
import requests
from mcp.server.mcpserver import MCPServer

GATED = ("start_policy", "stop_policy", "set_fault_profile")


class RuntimeTools:
    """The tools' work over HTTP to the state server at ``state_url`` (``token``: its bearer token)."""

    def __init__(self, state_url: str, token: str | None = None, audit_path: Path | None = None):
        self.url = state_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.audit = collections.deque(maxlen=1000)
        self.audit_path = audit_path
        self._renderer = None
        self._robot = None

    # --- plumbing -------------------------------------------------------------------------------------
    def _http(self, method: str, path: str, body: dict | None = None) -> dict:
        try:
            r = requests.request(method, self.url + path, json=body, headers=self.headers, timeout=5)
            data = r.json()
        except (requests.RequestException, ValueError) as exc:
            return {"ok": False, "error": f"state server {self.url}: {type(exc).__name__}", "hint": "is it running?"}
        if r.status_code >= 400:
            return {"ok": False, "error": data.get("error", f"HTTP {r.status_code}"), "hint": data.get("hint", "")}
        return {"ok": True, **data} if isinstance(data, dict) else {"ok": True, "items": data}

    def call(self, tool: str, arguments: dict, fn) -> dict:
        """Run ``fn()`` for ``tool``; gated tools first need motion armed. The call goes to the audit log."""
        if tool in GATED:
            arming = self._http("GET", "/api/v1/runtime").get("arming") or {}
            if not arming.get("armed"):
                out = {
                    "ok": False,
                    "error": f"{tool} needs motion armed",
                    "hint": "call arm_motion with a reason first",
                }
                return self._audit(tool, arguments, out)
        try:
            out = fn()
        except Exception as exc:  # a tool never raises: the agent gets the words
            out = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "hint": "see the audit log"}
        return self._audit(tool, arguments, out)

    def _audit(self, tool: str, arguments: dict, out: dict) -> dict:
        entry = {"t": round(time.time(), 3), "tool": tool, "arguments": arguments, "ok": bool(out.get("ok"))}
        if not out.get("ok"):
            entry["error"] = out.get("error")
        self.audit.append(entry)
        if self.audit_path is not None:
            with open(self.audit_path, "a") as f:
                f.write(json.dumps(entry) + "\n")
        return out

    # --- the tools' work ------------------------------------------------------------------------------
    def state(self) -> dict:
        runtime = self._http("GET", "/api/v1/runtime")
        st = self._http("GET", "/api/v1/state")
        if not st.get("ok"):
            return st
        keep = ("simulation_time", "mode", "sequence", "server_instance_id", "model")
        runtime.pop("latency_ms", None)
        return {"ok": True, **{k: st[k] for k in keep}, "base_height_m": st["qpos"][2], "runtime": runtime}

    def camera_frame(self, width: int, height: int) -> dict:
        if not (64 <= width <= 640 and 64 <= height <= 480):
            return {
                "ok": False,
                "error": f"frame size {width}x{height} outside 64..640 x 64..480",
                "hint": "e.g. 320x240",
            }
        st = self._http("GET", "/api/v1/state")
        if not st.get("ok"):
            return st
        from lab.render.jpeg import encode_jpeg
        from lab.render.renderer import Renderer
        from lab.robots.model import load_robot

        if self._robot is None:
            self._robot = load_robot()
        if st["model"]["sha256"] != self._robot.identity:
            return {"ok": False, "error": "the state server runs another model", "hint": "start this server with it"}
        if self._renderer is None or (self._renderer.width, self._renderer.height) != (width, height):
            self._renderer = Renderer(self._robot.model, width, height, "fast")
        rgb = self._renderer.render(np.asarray(st["qpos"], dtype=float))
        jpeg = encode_jpeg(rgb)
        return {
            "ok": True,
            "format": "jpeg",
            "width": width,
            "height": height,
            "simulation_time": st["simulation_time"],
            "jpeg_base64": base64.b64encode(jpeg).decode(),
        }


def make_server(tools: RuntimeTools) -> MCPServer:
    """The MCP server with the tools of the module docstring, each through ``tools.call`` (audited)."""
    mcp = MCPServer(
        "humanoid-sim-lab-runtime", instructions="Watch and command the state server's remote-control runtime."
    )

    @mcp.tool()
    def get_state() -> dict:
        """The robot's state (time, mode, base height) and the runtime (streaming/hold/estop, breaker, chunk)."""
        return tools.call("get_state", {}, tools.state)

    @mcp.tool()
    def get_camera_frame(width: int = 320, height: int = 240) -> dict:
        """A JPEG (base64) of the robot drawn from the state server's qpos (kinematics only)."""
        return tools.call(
            "get_camera_frame", {"width": width, "height": height}, lambda: tools.camera_frame(width, height)
        )

    @mcp.tool()
    def get_fault_profile() -> dict:
        """The fault profile injected between the runtime and the policy."""
        return tools.call(
            "get_fault_profile", {}, lambda: {"ok": True, **tools._http("GET", "/api/v1/runtime").get("faults", {})}
        )

    @mcp.tool()
    def list_recordings() -> dict:
        """The state server's recordings (MCAP files)."""
        return tools.call("list_recordings", {}, lambda: tools._http("GET", "/api/recordings"))

    @mcp.tool()
    def get_audit_log(last: int = 50) -> dict:
        """The last ``last`` tool calls of this server (every call is logged, refused ones too)."""
        return tools.call(
            "get_audit_log", {"last": last}, lambda: {"ok": True, "entries": list(tools.audit)[-max(1, last) :]}
        )

    @mcp.tool()
    def arm_motion(reason: str, expires_s: float = 60.0) -> dict:
        """Arm motion on the state server for ``expires_s`` seconds (at most 600), saying why."""
        return tools.call(
            "arm_motion",
            {"reason": reason, "expires_s": expires_s},
            lambda: tools._http("POST", "/api/v1/arm", {"reason": reason, "expires_s": expires_s}),
        )

    @mcp.tool()
    def start_policy(policy_url: str) -> dict:
        """Follow the policy server at ``policy_url`` (needs motion armed)."""
        return tools.call(
            "start_policy",
            {"policy_url": policy_url},
            lambda: tools._http("POST", "/api/v1/runtime/start", {"policy_url": policy_url}),
        )

    @mcp.tool()
    def stop_policy() -> dict:
        """Stop following the policy (the robot stands)."""
        return tools.call("stop_policy", {}, lambda: tools._http("POST", "/api/v1/runtime/stop", {}))

    @mcp.tool()
    def set_fault_profile(profile: str, seed: int = 0) -> dict:
        """Inject a fault profile (healthy, lossy, congested, outage, corrupt, wrong-robot) for a demonstration."""
        return tools.call(
            "set_fault_profile",
            {"profile": profile, "seed": seed},
            lambda: tools._http("POST", "/api/v1/runtime/faults", {"profile": profile, "seed": seed}),
        )

    @mcp.tool()
    def estop() -> dict:
        """Latch the e-stop now (damped, zero target). Never gated."""
        return tools.call("estop", {}, lambda: tools._http("POST", "/api/v1/estop", {}))

    @mcp.tool()
    def clear_estop(confirm: bool = False) -> dict:
        """Clear a latched e-stop; ``confirm`` must be true."""
        if confirm is not True:
            out = {"ok": False, "error": "clearing the e-stop needs confirmation", "hint": "call with confirm=true"}
            return tools.call("clear_estop", {"confirm": confirm}, lambda: out)
        return tools.call(
            "clear_estop", {"confirm": True}, lambda: tools._http("POST", "/api/v1/estop/clear", {"confirm": True})
        )

    return mcp


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="MCP server (stdio) for the state server's remote-control runtime")
    ap.add_argument("--state-url", default="http://127.0.0.1:8766")
    ap.add_argument("--audit", type=Path, default=None, help="also append the audit log to this JSON-lines file")
    args = ap.parse_args(argv)
    tools = RuntimeTools(args.state_url, os.environ.get("LAB_TOKEN"), args.audit)
    make_server(tools).run("stdio")


if __name__ == "__main__":
    main()
