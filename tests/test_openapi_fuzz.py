"""Schemathesis against the four live services, each described by its own ``GET /api/openapi.json``.

Each service runs in this process on a free loopback port (:class:`lab.web.server.ServerThread`),
one after the other (the Lab with its own state server behind the remote monitor, so that
``/api/remote/*`` is forwarded for real; the policy server on the session's robot). Every HTTP operation
of the served spec gets fuzzed cases, schema-valid ("positive") and, where it takes input, schema-invalid
("negative"); each response must not be a 5xx and must conform to the spec: a documented status code, a
documented content type, a body matching the schema. Afterwards the simulation still runs (``sim_time``
advances, state running).

Limits, so the whole file stays near a minute and a half on 2 cores: ``max_examples`` per operation and mode
(``LAB_FUZZ_EXAMPLES``, default 20; ``LAB_FUZZ_RANDOM=1`` for fresh random cases instead of the
fixed derandomized ones); no shrinking. Not fuzzed as described: WebSocket routes (not in OpenAPI;
listed under ``x-websockets``); ``POST /api/scans`` gets a narrowed copy of its schema (kind ``probe``,
one point of at most 10 ms of work, or a search of one line of at most two such points, local executor,
one worker) and positive cases only, so a fuzzed scan is one short child process rather than a 10 000-point
grid or a Ray cluster; ``resume`` is narrowed to the local executor for the same reason. Scan paths are
fuzzed with random ids (404) and with the ids of two real finished scans (a grid and a search). A fuzzed
runtime start (``POST /api/v1/runtime/start`` and the Lab's ``/api/remote/runtime/start``) gets a loopback
policy URL nothing listens on, so no request leaves the machine; both state servers are armed first so that
the start runs. After each fuzzed ``POST /api/remote/connect`` the monitor is pointed back at the test's
state server.

Inputs that once made a server error are sent as fixed regression cases beside the fuzzed ones.
The number of cases per service is written to the terminal when the module ends (one line,
``openapi fuzz: state-server N cases / ...``, with or without ``-s``).
"""

import copy
import os
import re
import time

import pytest
import requests

from tests.conftest import free_port, wait_until

schemathesis = pytest.importorskip("schemathesis")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.failures import FailureGroup  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = int(os.environ.get("LAB_FUZZ_EXAMPLES", "20"))
RANDOM = os.environ.get("LAB_FUZZ_RANDOM") == "1"
COUNTS: dict = {}  # service -> {"cases": n, "operations": n, "seconds": s}

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    yield
    if not COUNTS:
        return
    parts = [
        f"{svc} {c['cases']} cases / {c['operations']} operations in {c['seconds']:.1f} s" for svc, c in COUNTS.items()
    ]
    line = "openapi fuzz: " + "; ".join(parts) + f"; total {sum(c['cases'] for c in COUNTS.values())} cases"
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:  # shown with or without -s
        with capture.global_and_fixture_disabled():
            reporter.write_line("\n" + line)
    else:
        print("\n" + line)


def _has_input(op) -> bool:
    raw = op.definition.raw
    return bool(raw.get("requestBody") or raw.get("parameters"))


def fuzz(
    service: str, base: str, spec: dict, *, examples=None, positive_only=(), fixed=None, after=None, regressions=None
) -> list:
    """Fuzz every operation of ``spec`` against ``base``; the failures as text (empty: all passed).

    ``examples``: label -> max_examples; ``positive_only``: labels fuzzed with valid input only;
    ``fixed``: label -> list of path-parameter dicts, each fuzzed too (the rest generated);
    ``after(label)``: called after each case of an operation; ``regressions``: label -> list of
    ``Case`` keyword dicts (inputs that once made a server error), sent and checked like the fuzzed ones."""
    schema = schemathesis.openapi.from_dict(spec)
    session = requests.Session()
    failures, cases, ops = [], 0, 0
    t0 = time.monotonic()
    for result in schema.get_all_operations():
        op = result.ok()
        ops += 1
        modes = [GenerationMode.POSITIVE]
        if _has_input(op) and op.label not in positive_only:
            modes.append(GenerationMode.NEGATIVE)
        n = (examples or {}).get(op.label, EXAMPLES if _has_input(op) else 1)
        for mode in modes:
            runs = [({}, n)] + [(params, max(2, n // 2)) for params in (fixed or {}).get(op.label, [])]
            for params, count in runs:
                strategy = op.as_strategy(generation_mode=mode, path_parameters=params or None)

                @given(case=strategy)
                @settings(
                    max_examples=count,
                    deadline=None,
                    database=None,
                    derandomize=not RANDOM,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                def run(case):
                    nonlocal cases
                    try:
                        response = case.call(base_url=base, session=session, timeout=20)
                        cases += 1
                        case.validate_response(response, checks=CHECKS)
                    finally:
                        if after is not None:
                            after(op.label)

                try:
                    run()
                except Unsatisfiable:  # nothing of this operation can be made invalid (e.g. a free string id)
                    if mode is not GenerationMode.NEGATIVE:
                        failures.append(f"{op.label} [{mode.value}] {params}: no valid case could be generated")
                except (Exception, FailureGroup) as exc:  # one failure per operation, mode and fixed params
                    failures.append(f"{op.label} [{mode.value}] {params}: {type(exc).__name__}: {exc}")
        for kw in (regressions or {}).get(op.label, []):
            try:
                case = op.Case(**kw)
                response = case.call(base_url=base, session=session, timeout=20)
                cases += 1
                case.validate_response(response, checks=CHECKS)
            except (Exception, FailureGroup) as exc:
                failures.append(f"{op.label} [regression] {kw}: {type(exc).__name__}: {exc}")
            finally:
                if after is not None:
                    after(op.label)
    COUNTS[service] = {"cases": cases, "operations": ops, "seconds": time.monotonic() - t0}
    return failures


def served_spec(base: str, service: str) -> dict:
    r = requests.get(base + "/api/openapi.json", timeout=10)
    assert r.status_code == 200, r.text
    spec = r.json()
    assert spec["openapi"].startswith("3.") and spec["x-service"] == service
    return spec


def assert_every_route_described(app, spec: dict) -> None:
    """Each Flask route of ``app`` (but the WebSockets, listed under x-websockets) is a path of ``spec`` with its methods."""
    websockets = {p.split("?")[0] for p in spec["x-websockets"]}
    missing = []
    for rule in app.url_map.iter_rules():
        path = re.sub(r"<(?:[a-z]+(?:\([^)]*\))?:)?([A-Za-z_]+)>", r"{\1}", rule.rule)
        if path in websockets:
            continue
        if "<any(" in rule.rule:  # results.<any(csv, json):ext> -> one path per choice
            choices = re.search(r"<any\(([^)]*)\):\w+>", rule.rule).group(1).replace(" ", "").split(",")
            paths = [re.sub(r"\{ext\}", c, path) for c in choices]
        else:
            paths = [path]
        for p in paths:
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                if method.lower() not in spec["paths"].get(p, {}):
                    missing.append(f"{method} {p}")
    assert not missing, f"routes the OpenAPI description lacks: {missing}"


def assert_still_running(base: str, status_path: str = "/api/status") -> None:
    """Resume (pausing is a legitimate fuzzed input), then simulation time must advance in state running."""
    requests.post(base + "/api/pause", json={"paused": False}, timeout=10)
    t0 = requests.get(base + status_path, timeout=10).json()["sim_time"]
    wait_until(lambda: requests.get(base + status_path, timeout=10).json()["sim_time"] > t0, 10)
    st_ = requests.get(base + status_path, timeout=10).json()
    assert st_["sim"]["state"] == "running", st_["sim"]


def report(failures: list) -> None:
    assert not failures, f"{len(failures)} failing operation(s):\n\n" + "\n\n".join(failures)


# ---------------------------------------------------------------- the services


def closed_port_url() -> str:
    """A loopback URL nothing listens on: a fuzzed runtime start follows it (connection refused at once)."""
    return f"http://127.0.0.1:{free_port()}"


def narrowed_state_spec(spec: dict) -> dict:
    """The state server's spec with the runtime's policy_url narrowed to a loopback port nothing listens on."""
    spec = copy.deepcopy(spec)
    body = spec["paths"]["/api/v1/runtime/start"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body["properties"]["policy_url"] = {"type": "string", "enum": [closed_port_url()]}
    return spec


def test_state_server_conforms_to_its_openapi(tmp_path):
    from lab.settings import Settings
    from lab.web.server import ServerThread
    from lab.web.state_server import create_state_app

    app = create_state_app(Settings(results_dir=tmp_path))
    with ServerThread(app) as srv:
        wait_until(lambda: requests.get(srv.url + "/api/v1/health", timeout=5).json()["simulation_time"] > 0.05, 10)
        spec = served_spec(srv.url, "state-server")
        assert_every_route_described(app, spec)
        # armed first, so that a fuzzed start runs a runtime (holding: its policy URL refuses connections)
        armed = requests.post(srv.url + "/api/v1/arm", json={"reason": "openapi fuzz", "expires_s": 60}, timeout=5)
        assert armed.status_code == 200, armed.text
        # the recording id routes answer random ids through the blueprint the Lab's test fuzzes in full: fewer here
        by_id = ["GET /api/recordings/{rid}", "DELETE /api/recordings/{rid}", "POST /api/recordings/{rid}/stop"]
        examples = {
            "POST /api/v1/control": 3 * EXAMPLES,
            **dict.fromkeys(by_id + ["GET /api/recordings/{rid}/file"], 5),
        }
        failures = fuzz("state-server", srv.url, narrowed_state_spec(spec), examples=examples)
        t0 = requests.get(srv.url + "/api/v1/state", timeout=5).json()["simulation_time"]
        wait_until(lambda: requests.get(srv.url + "/api/v1/state", timeout=5).json()["simulation_time"] > t0, 10)
        assert requests.get(srv.url + "/api/v1/health", timeout=5).json()["sim"]["state"] == "running"
    report(failures)


def narrowed_lab_spec(spec: dict) -> dict:
    """The Lab's spec with POST /api/scans (and resume) narrowed so a fuzzed scan is one tiny point (a search: one
    line of at most two), and the runtime pass-through's policy_url to a loopback port nothing listens on."""
    spec = copy.deepcopy(spec)
    create = spec["components"]["schemas"]["ScanCreate"]["properties"]
    create["kind"] = {"type": "string", "enum": ["probe"]}
    create["grid"] = {
        "type": "object",
        "properties": {
            "work_s": {
                "type": "array",
                "items": {"type": "number", "minimum": 0, "maximum": 0.01},
                "minItems": 1,
                "maxItems": 1,
            },
            "fail": {"type": "array", "items": {"type": "integer", "enum": [0, 1, 2]}, "minItems": 1, "maxItems": 1},
        },
        "required": ["work_s"],
        "additionalProperties": False,
    }
    create["search"] = {
        "type": "object",
        "properties": {
            "param": {"type": "string", "enum": ["sleep_s"]},
            "bisect": {
                "type": "array",
                "items": {"type": "number", "minimum": 0, "maximum": 0.01},
                "minItems": 2,
                "maxItems": 2,
            },
            "tol": {"type": "number", "minimum": 0.005, "maximum": 0.01},
        },
        "required": ["param", "bisect", "tol"],
        "additionalProperties": False,
    }
    create["executor"] = {"type": "string", "enum": ["local"]}
    create["workers"] = {"type": "integer", "enum": [1]}
    create.pop("address")
    create["timeout_s"] = {"type": "number", "minimum": 5, "maximum": 30}
    resume = spec["paths"]["/api/scans/{scan_id}/resume"]["post"]["requestBody"]["content"]["application/json"]
    resume["schema"]["properties"]["executor"] = {"type": "string", "enum": ["local"]}
    resume["schema"]["properties"].pop("address")
    runtime = spec["paths"]["/api/remote/runtime/{action}"]["post"]["requestBody"]["content"]["application/json"]
    runtime["schema"]["properties"]["policy_url"] = {"type": "string", "enum": [closed_port_url()]}
    return spec


def test_lab_conforms_to_its_openapi(tmp_path):
    from lab.web import create_lab_app
    from lab.web.server import ServerThread
    from lab.web.state_server import create_state_app

    with ServerThread(create_state_app()) as state:
        app = create_lab_app(remote_url=state.url, results_dir=tmp_path)
        with ServerThread(app) as srv:
            base = srv.url
            wait_until(lambda: requests.get(base + "/api/remote/status", timeout=5).json()["state"] == "CONNECTED", 10)
            spec = served_spec(base, "lab")
            assert_every_route_described(app, spec)
            # one real, finished scan, so the scan paths are fuzzed against something that exists
            r = requests.post(
                base + "/api/scans", json={"kind": "probe", "grid": {"work_s": [0, 0.001]}, "workers": 1}, timeout=10
            )
            assert r.status_code == 201, r.text
            sid = r.json()["id"]
            search = {"param": "sleep_s", "bisect": [0, 0.004], "tol": 0.002}  # one line: 0.002 then 0.004 pass
            r = requests.post(
                base + "/api/scans",
                json={"kind": "probe", "grid": {"work_s": [0]}, "search": search, "workers": 1},
                timeout=10,
            )
            assert r.status_code == 201, r.text
            searched = r.json()["id"]
            for s in (sid, searched):
                wait_until(lambda s=s: requests.get(f"{base}/api/scans/{s}", timeout=5).json()["status"] == "done", 30)
            assert requests.get(f"{base}/api/scans/{searched}", timeout=5).json()["thresholds"][0]["status"] == (
                "passes_at_hi"
            )
            # armed, so that a fuzzed start through the Lab runs a runtime (its policy URL refuses connections)
            armed = requests.post(state.url + "/api/v1/arm", json={"reason": "openapi fuzz"}, timeout=5)
            assert armed.status_code == 200, armed.text

            def after(label):
                if label == "POST /api/remote/connect":  # fuzzed URLs: watch the test's state server again
                    requests.post(base + "/api/remote/connect", json={"url": state.url}, timeout=10)

            real = [{"scan_id": sid}]
            fixed = {
                f"{m} /api/scans/{{scan_id}}{p}": real
                for m, p in [
                    ("POST", "/cancel"),
                    ("POST", "/resume"),
                    ("POST", "/refine"),
                    ("GET", "/results.csv"),
                    ("GET", "/results.json"),
                ]
            }
            fixed["GET /api/scans/{scan_id}"] = real + [{"scan_id": searched}]
            fixed["GET /api/recordings/{rid}/timeline"] = [{"rid": f"scan:{sid}:0"}]  # kept no recording: a 404
            fixed["GET /api/scans/{scan_id}/points/{index}"] = real + [{"scan_id": sid, "index": 1}]
            fixed["GET /api/scans/{scan_id}/points/{index}/{name}"] = real + [
                {"scan_id": sid, "index": 0},
                {"scan_id": sid, "index": 0, "name": "output.log"},
                {"scan_id": sid, "index": 1, "name": "summary.json"},
            ]
            long_index = int("9" * 300)
            regressions = {  # server errors found while writing this test, fixed since
                "POST /api/remote/connect": [{"body": {"url": "http://["}}, {"body": {"url": "[::1"}}],
                "GET /api/scans/{scan_id}/points/{index}/{name}": [
                    {"path_parameters": {"scan_id": sid, "index": 0, "name": "a" * 300}},
                    {"path_parameters": {"scan_id": sid, "index": long_index, "name": "summary.json"}},
                ],
                "GET /api/scans/{scan_id}/points/{index}": [{"path_parameters": {"scan_id": sid, "index": long_index}}],
                "POST /api/scans": [{"body": {"kind": "probe", "grid": {"work_s": "0:0.01:1e-320"}}}],
            }
            failures = fuzz(
                "lab",
                base,
                narrowed_lab_spec(spec),
                examples={"POST /api/scans": 6, "POST /api/remote/control": 2 * EXAMPLES},
                positive_only={"POST /api/scans"},
                fixed=fixed,
                after=after,
                regressions=regressions,
            )
            assert_still_running(base)
            for s in requests.get(base + "/api/scans", timeout=10).json()["scans"]:  # nothing left running
                if s["status"] in ("queued", "running"):
                    requests.post(f"{base}/api/scans/{s['id']}/cancel", timeout=40)
    report(failures)


def test_policy_server_conforms_to_its_openapi(robot):
    from lab.web.policy_server import create_policy_app
    from lab.web.server import ServerThread

    app = create_policy_app(robot)
    with ServerThread(app) as srv:
        spec = served_spec(srv.url, "policy-server")
        assert_every_route_described(app, spec)
        failures = fuzz("policy-server", srv.url, spec)
        assert requests.get(srv.url + "/health", timeout=5).json()["model"]["sha256"] == robot.identity
    report(failures)


def test_sim2sim_conforms_to_its_openapi():
    from lab.web.server import ServerThread
    from lab.web.sim2sim import create_sim2sim_app

    app = create_sim2sim_app()
    with ServerThread(app) as srv:
        wait_until(lambda: requests.get(srv.url + "/api/status", timeout=5).json()["sim_time"] > 0.05, 20)
        spec = served_spec(srv.url, "sim2sim")
        assert_every_route_described(app, spec)
        failures = fuzz("sim2sim", srv.url, spec)
        assert_still_running(srv.url)
    report(failures)
