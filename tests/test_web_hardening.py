"""Every service against hostile HTTP and WebSocket input, over real sockets: bodies too large to read
(a 1 GB POST to real processes, with their RSS measured), the token checked before any body is read,
a stop that carries other settings, Origin/Host/Content-Type checks on every state change, JSON that
is too deep or holds numbers no double holds, exact bearer tokens, blank tokens at start, and garbage
sent up a stream's WebSocket."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests
import websocket

from lab.remote.cli import spawn_state_server, stop_child
from lab.remote.client import wait_ready
from tests.conftest import ROOT, WsClient, free_port, wait_until

TOKEN = "s3cret-hardening"
GB = 1 << 30


# --- helpers: raw HTTP, process memory --------------------------------------------------------------


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


class RssWatch:
    """The peak VmRSS of ``pid`` above its value at the start, sampled every 5 ms in a thread."""

    def __init__(self, pid: int):
        self.pid, self.base, self.peak = pid, rss_kib(pid), 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_kib(self.pid))
            time.sleep(0.005)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        time.sleep(0.5)  # the server finishes with the connection
        self._stop.set()
        self._t.join()

    @property
    def growth_mib(self) -> float:
        return max(0, self.peak - self.base) / 1024


def split_answer(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body.decode())


def read_answer(s: socket.socket, got: bytes, timeout: float = 10) -> bytes:
    """Read until the answer's headers and its Content-Length of body are in."""
    s.setblocking(True)
    s.settimeout(timeout)
    while True:
        head, sep, body = got.partition(b"\r\n\r\n")
        if sep:
            length = next(
                (
                    int(v)
                    for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
                    if k.lower() == b"content-length"
                ),
                0,
            )
            if len(body) >= length:
                return got
        chunk = s.recv(65536)
        if not chunk:
            return got
        got += chunk


def post_huge(port: int, path: str, *, chunked: bool = False, declared: int = GB, send_max: int = 300 << 20):
    """POST a body of ``declared`` bytes (or an endless chunked one) to ``127.0.0.1:port``, sending up to
    ``send_max`` bytes while watching for the answer. Returns (status, JSON answer, bytes sent)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json"]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {declared}")
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    block = b" " * (1 << 16)  # whitespace: a JSON text may start with any amount of it
    if chunked:
        block = b"%x\r\n" % len(block) + block + b"\r\n"
    s.setblocking(False)
    sent, got = 0, b""
    deadline = time.monotonic() + 60
    try:
        while sent < send_max and time.monotonic() < deadline and b"\r\n\r\n" not in got:
            readable, writable, _ = select.select([s], [s], [], 1.0)
            if readable:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            elif writable:
                sent += s.send(block)
        got = read_answer(s, got)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()
    assert got, f"no answer after sending {sent} bytes"
    status, body = split_answer(got)
    return status, body, sent


def headers_only(port: int, path: str, length: int, extra: str = "") -> tuple[int, dict, float]:
    """Send a POST's headers announcing ``length`` bytes, never the body; (status, answer, seconds to answer)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    t0 = time.monotonic()
    s.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n".encode()
    )
    try:
        got = read_answer(s, b"", timeout=5)
    finally:
        s.close()
    status, body = split_answer(got)
    return status, body, time.monotonic() - t0


def start_service(cmd: str, port: int, tmp_path, token: str | None = None) -> subprocess.Popen:
    """``python app.py CMD --port PORT`` (the state server through spawn_state_server), ready to answer."""
    if cmd == "state-server":
        proc = spawn_state_server(port, token=token, log_path=tmp_path / "state.log")
        wait_ready(f"http://127.0.0.1:{port}", timeout=90, proc=proc)
        return proc
    argv = [sys.executable, "app.py", cmd, "--port", str(port)]
    if cmd == "lab":
        argv += ["--remote-url", f"http://127.0.0.1:{free_port()}", "--results", str(tmp_path / "results")]
    env = {k: v for k, v in os.environ.items() if k != "LAB_TOKEN"}
    log = tmp_path / f"{cmd}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"{cmd} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/api/status", timeout=2).ok:
                break
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline:
            stop_child(proc)
            raise AssertionError(f"{cmd} not ready after 120 s: {log.read_text()[-2000:]}")
        time.sleep(0.5)
    return proc


# --- 1. bodies too large to read: 413 before reading, RSS bounded ----------------------------------

BIG_ROUTES = {"lab": "/api/mode", "sim2sim": "/api/mode", "state-server": "/api/v1/control"}
LIMITS = {"lab": 65536, "sim2sim": 65536, "state-server": 4096}


@pytest.mark.parametrize("service", ["lab", "state-server", "sim2sim"])
def test_a_1_gb_post_and_an_endless_chunked_post_get_413_and_grow_the_process_by_under_20_mb(service, tmp_path):
    port = free_port()
    proc = start_service(service, port, tmp_path)
    try:
        time.sleep(1.0)  # past the start's own allocations
        with RssWatch(proc.pid) as watch:
            status, body, sent = post_huge(port, BIG_ROUTES[service])
        assert status == 413, body
        assert body["error"] == f"request body is {GB} bytes; at most {LIMITS[service]} accepted" and body["hint"]
        assert sent < 200 << 20, f"the answer came only after {sent} bytes"
        assert watch.growth_mib < 20, f"{service}: RSS grew {watch.growth_mib:.1f} MiB for a 1 GB POST"
        print(f"\n{service}: 1 GB POST -> 413 after {sent / 2**20:.1f} MiB sent, RSS +{watch.growth_mib:.1f} MiB")

        with RssWatch(proc.pid) as watch:
            status, body, sent = post_huge(port, BIG_ROUTES[service], chunked=True)
        assert status == 413, body
        assert (
            body["error"] == f"request body is longer than {LIMITS[service]} bytes; at most {LIMITS[service]} accepted"
        )
        assert watch.growth_mib < 20, f"{service}: RSS grew {watch.growth_mib:.1f} MiB for an endless chunked POST"
        print(f"{service}: chunked POST -> 413 after {sent / 2**20:.1f} MiB sent, RSS +{watch.growth_mib:.1f} MiB")
        assert proc.poll() is None  # and it still answers
        assert requests.get(f"http://127.0.0.1:{port}/api/openapi.json", timeout=5).status_code == 200
    finally:
        stop_child(proc)


# --- in-process servers for the rest ----------------------------------------------------------------


@pytest.fixture(scope="module")
def lab_token():
    """The Lab with a token, in this process (its simulation thread running)."""
    from lab.web import create_lab_app
    from lab.web.server import ServerThread

    app = create_lab_app(token=TOKEN, remote_url=f"http://127.0.0.1:{free_port()}")
    with ServerThread(app) as srv:
        yield srv


@pytest.fixture(scope="module")
def state_token(robot):
    from lab.web.server import ServerThread
    from lab.web.state_server import create_state_app

    app = create_state_app(robot, token=TOKEN)
    with ServerThread(app) as srv:
        yield srv


@pytest.fixture(scope="module")
def state_open(robot):
    from lab.web.server import ServerThread
    from lab.web.state_server import create_state_app

    app = create_state_app(robot)
    with ServerThread(app) as srv:
        yield srv


@pytest.fixture(scope="module")
def sim2sim_open():
    from lab.web.server import ServerThread
    from lab.web.sim2sim import create_sim2sim_app

    app = create_sim2sim_app(start=False)
    with ServerThread(app) as srv:
        yield srv


def auth(token=TOKEN) -> dict:
    return {"Authorization": f"Bearer {token}"}


def post(srv, path, body=None, data=None, headers=None):
    r = requests.post(srv.url + path, json=body, data=data, headers=headers or {}, timeout=10)
    return r.status_code, r.json()


# --- 2. the token is checked before the body is read ------------------------------------------------

LAB_GATED = ["/api/mode", "/api/pause", "/api/push", "/api/reset", "/api/rtf", "/api/render", "/api/scans",
             "/api/remote/connect", "/api/remote/control"]  # fmt: skip


@pytest.mark.parametrize("path", LAB_GATED)
def test_a_gated_lab_route_answers_401_while_the_body_is_still_unsent(lab_token, path):
    status, body, took = headers_only(lab_token.port, path, 1000)
    assert status == 401 and "bearer token" in body["error"] and body["hint"], body
    assert took < 2.0  # had it waited for the 1000 bytes, it would have hung until the client gave up


def test_the_state_servers_control_answers_401_while_the_body_is_still_unsent(state_token):
    status, body, took = headers_only(state_token.port, "/api/v1/control", 100)
    assert (status, body["error"]) == (401, "control requires Authorization: Bearer TOKEN") and took < 2.0


# --- 3. a stop carries nothing else without the token ----------------------------------------------


def test_a_zero_mode_stop_that_carries_push_settings_is_refused_without_the_token_and_changes_nothing(lab_token):
    before = requests.get(lab_token.url + "/api/status", timeout=5).json()
    code, body = post(lab_token, "/api/mode", {"mode": "zero", "force_n": 200, "duration_s": 1.0, "period_s": 1.5})
    assert code == 401
    assert (
        body["error"]
        == "missing or wrong bearer token: only a bare stop is accepted without it (refused: duration_s, force_n, period_s)"
    )
    assert '{"mode":"zero"}' in body["hint"]
    after = requests.get(lab_token.url + "/api/status", timeout=5).json()
    assert after["push"] == before["push"] and after["mode"] == before["mode"]
    # the bare stop is never blocked; with the token the push settings come along
    assert post(lab_token, "/api/mode", {"mode": "zero"})[0] == 200
    code, st = post(
        lab_token, "/api/mode", {"mode": "zero", "force_n": 200, "duration_s": 1.0, "period_s": 1.5}, headers=auth()
    )
    assert code == 200 and st["mode"] == "zero" and st["push"]["force_n"] == 200
    post(lab_token, "/api/push", {"force_n": 25, "duration_s": 0.1, "period_s": 3.0}, headers=auth())
    post(lab_token, "/api/mode", {"mode": "stand"}, headers=auth())


def test_a_pause_that_carries_anything_else_is_refused_without_the_token(lab_token):
    assert post(lab_token, "/api/pause", {"paused": True, "rtf": 4})[0] == 401
    assert post(lab_token, "/api/pause", {"paused": 1})[0] == 401  # true, not a truthy number
    assert post(lab_token, "/api/pause", data=b"garbage", headers={"Content-Type": "application/json"})[0] == 401
    assert post(lab_token, "/api/pause", {"paused": True})[1]["paused"] is True
    assert post(lab_token, "/api/pause", {"paused": False}, headers=auth())[1]["paused"] is False


def test_the_state_servers_stop_needs_no_token_and_ignores_a_body(state_token):
    r = requests.post(state_token.url + "/api/v1/control/stop", json={"value": 2.0}, timeout=5)
    assert r.status_code == 200 and r.json()["status"] == "stopped"


# --- 4. Origin, Host, Content-Type on every state change (scans included) ---------------------------


def test_a_text_plain_cross_origin_scan_from_a_foreign_host_is_refused(lab_server):
    scans_before = len(requests.get(lab_server.url + "/api/scans", timeout=5).json()["scans"])
    r = requests.post(
        lab_server.url + "/api/scans",
        data='{"kind": "walk_stability", "grid": {"steps": [2]}}',
        headers={"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": "evil.example:8765"},
        timeout=5,
    )
    assert r.status_code == 403 and r.json()["error"] == "Host 'evil.example:8765' is not this server"
    r = requests.post(
        lab_server.url + "/api/scans",
        data='{"kind": "walk_stability", "grid": {"steps": [2]}}',
        headers={"Content-Type": "text/plain"},
        timeout=5,
    )
    assert r.status_code == 415 and r.json()["hint"] == "send a JSON object with Content-Type: application/json"
    assert len(requests.get(lab_server.url + "/api/scans", timeout=5).json()["scans"]) == scans_before


def services(lab_server, sim2sim_open, state_open) -> dict:
    return {
        "lab": (lab_server, ["/api/scans", "/api/mode", "/api/reset", "/api/remote/connect", "/api/remote/stop"]),
        "sim2sim": (sim2sim_open, ["/api/mode", "/api/push", "/api/render"]),
        "state-server": (state_open, ["/api/v1/control", "/api/v1/control/stop"]),
    }


@pytest.mark.parametrize("service", ["lab", "sim2sim", "state-server"])
def test_every_state_change_refuses_a_foreign_origin_a_foreign_host_and_a_non_json_type(
    service, lab_server, sim2sim_open, state_open
):
    srv, paths = services(lab_server, sim2sim_open, state_open)[service]
    host = srv.url.split("//")[1]
    for path in paths:
        for method in ("POST", "PUT", "PATCH", "DELETE"):  # refused before routing: even a method it lacks
            r = requests.request(
                method, srv.url + path, data="{}", headers={"Origin": "http://evil.example"}, timeout=5
            )
            assert r.status_code == 403, (method, path, r.status_code, r.text)
        cases = [
            ({"Origin": "http://evil.example", "Content-Type": "application/json"}, 403, "cross-origin request"),
            ({"Origin": f"http://{host.split(':')[0]}:1", "Content-Type": "application/json"}, 403, "cross-origin"),
            ({"Origin": "null", "Content-Type": "application/json"}, 403, "cross-origin"),
            ({"Host": "evil.example", "Content-Type": "application/json"}, 403, "is not this server"),
            ({"Host": "127.0.0.1.evil.example:80", "Content-Type": "application/json"}, 403, "is not this server"),
            ({"Content-Type": "text/plain"}, 415, "expected Content-Type application/json, got 'text/plain'"),
            ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "expected Content-Type application/json"),
            ({"Content-Type": "multipart/form-data; boundary=x"}, 415, "expected Content-Type application/json"),
        ]
        for headers, status, needle in cases:
            r = requests.post(srv.url + path, data="{}", headers=headers, timeout=5)
            assert r.status_code == status and needle in r.json()["error"] and r.json()["hint"], (path, headers, r.text)


def test_same_origin_loopback_names_and_json_with_a_charset_pass_the_checks(lab_server):
    port = lab_server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"127.9.8.7:{port}", f"[::1]:{port}"):
        r = requests.post(
            lab_server.url + "/api/pause",
            data='{"paused": false}',
            headers={"Host": host, "Origin": f"http://{host}", "Content-Type": "application/json; charset=utf-8"},
            timeout=5,
        )
        assert r.status_code == 200, (host, r.text)
    assert requests.post(lab_server.url + "/api/remote/stop", timeout=5).status_code != 415  # empty, untyped: fine


def test_an_empty_body_is_not_checked_for_its_type_so_a_stop_from_curl_passes(state_open, lab_server):
    for ctype in (None, "application/x-www-form-urlencoded", "text/plain"):
        headers = {"Content-Type": ctype} if ctype else {}
        r = requests.post(state_open.url + "/api/v1/control/stop", data=b"", headers=headers, timeout=5)
        assert r.status_code == 200 and r.json()["status"] == "stopped", (ctype, r.text)
    r = requests.post(lab_server.url + "/api/mode", data="", headers={"Content-Type": "text/plain"}, timeout=5)
    assert r.status_code == 400 and r.json()["error"] == "request body is empty"
    r = requests.post(
        lab_server.url + "/api/mode", data='{"mode": "zero"}', headers={"Content-Type": "text/plain"}, timeout=5
    )
    assert r.status_code == 415


def test_a_body_with_no_content_type_is_refused_as_not_json(lab_server, state_open):
    for url in (lab_server.url + "/api/mode", state_open.url + "/api/v1/control"):
        r = requests.post(url, data='{"mode": "stand"}', timeout=5)  # requests sends no Content-Type for a str
        assert "Content-Type" not in r.request.headers
        assert r.status_code == 415, r.text
        assert r.json()["error"] == "expected Content-Type application/json, got a body with no Content-Type"


def test_with_a_token_any_host_is_answered_but_a_foreign_origin_is_not(lab_token):
    ok = requests.post(
        lab_token.url + "/api/pause", json={"paused": False}, headers={**auth(), "Host": "lab.lan:8765"}, timeout=5
    )
    assert ok.status_code == 200
    r = requests.post(
        lab_token.url + "/api/pause",
        json={"paused": True},
        headers={**auth(), "Origin": "http://evil.example"},
        timeout=5,
    )
    assert r.status_code == 403


def test_reading_stays_open_whatever_the_origin_and_host(lab_server, state_open):
    h = {"Origin": "http://evil.example", "Host": "evil.example"}
    assert requests.get(lab_server.url + "/api/status", headers=h, timeout=5).status_code == 200
    assert requests.get(state_open.url + "/api/v1/state", headers=h, timeout=5).status_code == 200


def ws_handshake_status(url: str, **kw) -> int:
    try:
        ws = websocket.create_connection(url, timeout=5, **kw)
    except websocket.WebSocketBadStatusException as exc:
        return exc.status_code
    ws.close()
    return 101


def test_a_websocket_from_a_foreign_origin_or_host_is_refused(lab_server, state_open):
    for srv, path in ((lab_server, "/ws"), (state_open, "/api/v1/stream")):
        url = srv.url.replace("http", "ws") + path
        assert ws_handshake_status(url, origin="http://evil.example") == 403
        assert ws_handshake_status(url, host="evil.example") == 403
        assert ws_handshake_status(url) == 101


# --- 5. JSON that no route should see: 400 with error and hint, never 500 ---------------------------

HOSTILE = {
    "nested 30,000 deep": ("[" * 30000 + "]" * 30000, "nested too deeply"),
    "nested objects 40 deep": ('{"a":' * 40 + "1" + "}" * 40, "nested too deeply"),
    "a 400-digit integer": (
        '{"mode": "push", "force_n": ' + "9" * 400 + "}",
        "force_n 999999... (400 digits) is too large",
    ),
    "a 5000-digit integer": ('{"mode": "push", "force_n": ' + "1" * 5000 + "}", "(5000 digits) is too large"),
    "NaN": ('{"mode": "push", "force_n": NaN}', "force_n nan is not a finite number"),
    "Infinity": ('{"mode": "push", "force_n": Infinity}', "force_n inf is not a finite number"),
    "-Infinity": ('{"mode": "push", "force_n": -Infinity}', "force_n -inf is not a finite number"),
    "a float that overflows": ('{"mode": "push", "force_n": 1e999}', "force_n 1e999 is not a finite number"),
    "2**53 + 1": ('{"mode": "push", "force_n": 9007199254740993}', "is too large"),
    "not UTF-8": (b'{"mode": "\xff"}', "request body is not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_json_on_the_mode_route_is_a_400_with_the_field_named(lab_server, case):
    data, needle = HOSTILE[case]
    code, body = post(lab_server, "/api/mode", data=data, headers={"Content-Type": "application/json"})
    assert code == 400 and needle in body["error"] and body["hint"], body


NUMBER_ROUTES = [
    ("/api/push", "force_n"),
    ("/api/push", "duration_s"),
    ("/api/push", "period_s"),
    ("/api/push", "first_s"),
    ("/api/rtf", "rtf"),
]
BAD_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "9" * 400, "-" + "9" * 30, "[1e999]", '{"x": NaN}']


@pytest.mark.parametrize(("path", "field"), NUMBER_ROUTES)
def test_every_number_field_refuses_nan_infinity_overflow_and_huge_integers(lab_server, sim2sim_open, path, field):
    for srv in (lab_server, sim2sim_open) if path == "/api/push" else (lab_server,):
        for bad in BAD_NUMBERS:
            code, body = post(srv, path, data=f'{{"{field}": {bad}}}', headers={"Content-Type": "application/json"})
            assert code == 400 and body["error"] and body["hint"], (srv.url, path, bad, body)
        code, _ = post(srv, path, data=f'{{"{field}": ["x"]}}', headers={"Content-Type": "application/json"})
        assert code == 400


@pytest.mark.parametrize("since", ["1e999", "nan", "inf", "-inf", "9" * 400, "abc", ""])
def test_history_since_refuses_what_is_not_a_finite_number(lab_server, since):
    r = requests.get(lab_server.url + "/api/history", params={"since": since}, timeout=5)
    assert r.status_code == 400 and "since must be a number" in r.json()["error"], r.text


@pytest.mark.parametrize("field", ["value", "duration_s"])
def test_the_state_servers_control_refuses_hostile_numbers_with_400(state_open, field):
    for bad in BAD_NUMBERS + ["[" * 1500 + "]" * 1500]:  # 1500 levels, inside the 4 KiB limit
        value, duration = (bad, "0.1") if field == "value" else ("1.0", bad)
        text = f'{{"actuator": "motor_left_elbow", "value": {value}, "duration_s": {duration}}}'
        r = requests.post(
            state_open.url + "/api/v1/control", data=text, headers={"Content-Type": "application/json"}, timeout=5
        )
        assert r.status_code == 400 and r.json()["status"] == "rejected" and r.json()["hint"], (bad, r.text)
    state = requests.get(state_open.url + "/api/v1/state", timeout=5).json()
    assert state["active_control"] is None


# --- 6. the token: exact match, never blank, never on a command line --------------------------------

ALMOST = [f"Bearer {TOKEN} ", f"Bearer  {TOKEN}", f"bearer {TOKEN}", f"Bearer {TOKEN}\t", f"Bearer {TOKEN}x",
          f"Bearer{TOKEN}", f"Bearer {TOKEN[:-1]}", TOKEN, f"Basic {TOKEN}", "Bearer "]  # fmt: skip


def raw_post(port: int, path: str, authorization: str, body: bytes) -> int:
    """A POST with the Authorization header exactly as given (requests would strip it)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Authorization: {authorization}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        return split_answer(read_answer(s, b""))[0]
    finally:
        s.close()


def test_only_the_exact_bearer_header_passes_on_the_state_server_and_the_lab(state_token, lab_token):
    control = json.dumps({"actuator": "motor_left_elbow", "value": 0.5, "duration_s": 0.01}).encode()
    for header in ALMOST:
        assert raw_post(state_token.port, "/api/v1/control", header, control) == 401, repr(header)
        assert raw_post(lab_token.port, "/api/push", header, b'{"force_n": 25}') == 401, repr(header)
    assert raw_post(state_token.port, "/api/v1/control", f"Bearer {TOKEN}", control) == 202
    assert raw_post(lab_token.port, "/api/push", f"Bearer {TOKEN}", b'{"force_n": 25}') == 200


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lab", "--token", " "], "error: the token is blank"),
        (["state-server", "--token", "  "], "error: the token is blank"),
        (["sim2sim", "--token", "\t"], "error: the token is blank"),
        (["--token", " ", "--no-state-server"], "error: the token is blank"),
        (["lab", "--token", " s3cret"], "error: the token has spaces or characters an HTTP header cannot carry"),
    ],
)
def test_a_blank_token_is_refused_at_start_with_one_line_and_exit_code_2(argv, message):
    p = subprocess.run(
        [sys.executable, "app.py", *argv, "--port", str(free_port())] if argv[0] != "--token" else [sys.executable, "app.py", *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "LAB_TOKEN"},
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(message), p.stderr


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return out


def proc_file(pid: int, name: str) -> bytes:
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read()


def test_the_token_reaches_child_processes_by_environment_and_never_on_their_command_line(tmp_path):
    ports = [str(free_port()) for _ in range(3)]
    p = subprocess.Popen(
        [sys.executable, "app.py", "--token", TOKEN, "--lab-port", ports[0], "--state-port", ports[1],
         "--sim2sim-port", ports[2], "--results", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        kids = wait_until(lambda: len(children(p.pid)) == 3 and children(p.pid), 60, 0.1)
        for kid in kids:
            cmdline = proc_file(kid, "cmdline")
            assert b"app.py" in cmdline and TOKEN.encode() not in cmdline, cmdline
            assert f"LAB_TOKEN={TOKEN}".encode() in proc_file(kid, "environ").split(b"\0")
    finally:
        stop_child(p, 30, signal.SIGINT)
    # spawn_state_server the same way; the child holds the token and enforces it
    port = free_port()
    proc = spawn_state_server(port, token=TOKEN, log_path=tmp_path / "state.log")
    try:
        assert TOKEN.encode() not in proc_file(proc.pid, "cmdline")
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, timeout=90, proc=proc)
        control = {"actuator": "motor_left_elbow", "value": 0.5, "duration_s": 0.01}
        assert requests.post(url + "/api/v1/control", json=control, timeout=5).status_code == 401
        assert requests.post(url + "/api/v1/control", json=control, headers=auth(), timeout=5).status_code == 202
    finally:
        stop_child(proc)


# --- 8. garbage up the WebSocket: answered or ignored, the stream goes on ---------------------------

GARBAGE = [
    '{"type": "ack", "view": ["x"]}',
    '{"type": "ack", "view": {"a": 1}}',
    '{"type": "ack", "view": "nope", "seq": 1}',
    '{"type": "ack", "view": "lab", "seq": "7"}',
    '{"type": "ack"}',
    '{"type": ["ack"]}',
    '{"type": 5}',
    '{"type": "ping", "t": NaN}',
    '{"type": "ping", "t": [1, 2]}',
    '{"type": "ping", "t": ' + "9" * 400 + "}",
    "[" * 3000 + "]" * 3000,
    "not json at all",
    "",
    "[1, 2]",
    "null",
    '"ack"',
    "x" * 60000,
    b"\x00\x01binary",
]


def test_garbage_sent_up_the_lab_stream_is_answered_and_frames_and_metrics_keep_coming(lab_server):
    ws = WsClient(lab_server.url.replace("http", "ws") + "/ws")
    try:
        assert ws.recv()["type"] == "hello"
        for msg in GARBAGE:
            if isinstance(msg, bytes):
                ws.ws.send_binary(msg)
            else:
                ws.ws.send(msg)
        ws.ws.send(json.dumps({"type": "ping", "t": 42}))
        errors, frames, metrics, pongs = 0, 0, 0, []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (
            frames >= 5 and metrics >= 5 and 42 in pongs and errors >= len(GARBAGE) - 1
        ):
            msg = ws.recv()
            if isinstance(msg, bytes):
                frames += 1
                ws.ack()
            elif msg["type"] == "error":
                errors += 1
                assert msg["error"] and msg["hint"]
            elif msg["type"] == "metrics":
                metrics += 1
            elif msg["type"] == "pong":
                pongs.append(msg["t"])
        assert frames >= 5 and metrics >= 5, (frames, metrics)
        assert pongs == [None, 42]  # the ping with t [1, 2] is answered, its t dropped
        assert errors == len(GARBAGE) - 1, errors
    finally:
        ws.close()


def test_garbage_sent_up_the_state_stream_is_dropped_and_states_keep_coming(state_open):
    ws = websocket.create_connection(state_open.url.replace("http", "ws") + "/api/v1/stream?hz=50", timeout=5)
    try:
        first = json.loads(ws.recv())
        for msg in GARBAGE[:-2]:
            ws.send(msg)
        later = [json.loads(ws.recv()) for _ in range(10)]
        assert later[-1]["sequence"] > first["sequence"]
    finally:
        ws.close()
