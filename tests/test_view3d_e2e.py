"""The 3D view in a real Chromium on the real Lab: the mouse moves this page's camera only, and each overlay,
toggled on the page (and `c` by key), changes the drawn frame where its 3-D anchors project."""

import base64

import numpy as np
import pytest
import requests
import simplejpeg

from lab.render.camera import CameraSpec
from tests.conftest import wait_until
from tests.test_overlays import assert_near as near
from tests.test_overlays import on_floor, project

CAMERA = {"azimuth": 145.0, "elevation": -14.0, "distance": 1.55, "lookat": [0.05, 0.0, 0.3]}
CHANGED = 40  # a pixel changed: any channel by more than this (JPEG noise stays below)
INSIDE = 0.85  # share of the changed pixels near the anchors (JPEG ringing spreads a little)


def post(srv, path, body=None):
    r = requests.post(srv.url + path, json=body, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def open_lab(page, srv):
    """The Lab page, live, with each JPEG it receives kept (``window.__frames``: the newest and a count)."""
    page.goto(srv.url + "/")
    page.wait_for_function("window.labView3d && window.labSocket.state === 'live'", timeout=20000)
    page.evaluate(
        """() => { const s = window.labSocket, drawn = s.onFrame; window.__frames = { n: 0, blob: null };
        s.onFrame = (v, blob, h, done) => { window.__frames.blob = blob; window.__frames.n += 1; drawn(v, blob, h, done); }; }"""
    )
    page.wait_for_function("window.labView.fps() > 0 && window.__frames.n > 0", timeout=20000)


def frame(page) -> np.ndarray:
    """A frame the page received after this call (three frames on, so rendered after what came before)."""
    n = page.evaluate("window.__frames.n")
    page.wait_for_function("(n) => window.__frames.n > n + 2", arg=n, timeout=20000)
    b64 = page.evaluate(
        """() => new Promise((ok) => { const r = new FileReader();
        r.onload = () => ok(r.result.split(',')[1]); r.readAsDataURL(window.__frames.blob); })"""
    )
    return simplejpeg.decode_jpeg(base64.b64decode(b64)).astype(int)


def settled(page) -> np.ndarray:
    """The picture of the paused simulation once the last change asked for is drawn."""
    return frame(page)


def replied(page, kind: str, send) -> dict:
    """Run ``send`` (JS) and wait for the server's reply of type ``kind``."""
    page.evaluate(
        """(kind) => { window.__replies = window.__replies || {};
        if (!window.__hooked?.[kind]) { (window.__hooked ||= {})[kind] = true;
          window.labSocket.on(kind, (m) => { (window.__replies[kind] ||= []).push(m); }); } }""",
        kind,
    )
    n = page.evaluate("(k) => (window.__replies[k] || []).length", kind)
    page.evaluate(send)
    page.wait_for_function("([k, n]) => (window.__replies[k] || []).length > n", arg=[kind, n], timeout=20000)
    return page.evaluate("(k) => window.__replies[k].at(-1)", kind)


def fixed_camera(page):
    cam = replied(page, "camera", f"window.labSocket.send({{type: 'camera', ...{CAMERA!r}}})".replace("'", '"'))
    assert cam["follow"] is False
    return cam


def view_of(srv):
    """``project``'s (renderer, camera) pair for the page's fixed camera (only the camera's spec is read)."""

    class R:
        model = srv.app.extensions["lab"]["robot"].model

    class C:
        spec = CameraSpec(CAMERA["azimuth"], CAMERA["elevation"], CAMERA["distance"], tuple(CAMERA["lookat"]), False)

    return R, C


def assert_near(view, mask, anchors):
    near(view, mask, anchors, INSIDE)


def anchors(srv, overlay: str):
    """World points an overlay is drawn about, from the paused session's own state."""
    import mujoco

    s = srv.app.extensions["lab"]["session"]
    q, _, st = s.frame_state(overlays=True)
    m = srv.app.extensions["lab"]["robot"].model
    d = mujoco.MjData(m)
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    if overlay == "com":
        c = d.subtree_com[0]
        return np.vstack([c, [c[0], c[1], 0.0]]), st
    if overlay == "contacts":
        p = np.asarray(st["contact_pos"])
        return np.vstack([p, p + [0, 0, 0.45]]), st
    if overlay in ("support", "cop"):
        pts = on_floor(st["support"]) if overlay == "support" else on_floor(st["cop"])
        return np.vstack([pts, pts + [0, 0, 0.1]]), st
    if overlay == "frames":
        return np.vstack([d.xpos[1:] - 0.09, d.xpos[1:] + 0.09]), st
    if overlay == "push":
        return np.vstack([d.xpos[1:], d.xpos[1:] + [0.45, 0, 0]]), st
    if overlay == "footsteps":
        return on_floor(np.asarray(st["footsteps"])[:, :2]), st
    raise KeyError(overlay)


def toggle(page, overlay: str, on: bool):
    """The overlay's checkbox in the view's Overlays menu, clicked (by script: the menu is hidden for the shots)."""
    box = page.locator(f"input[data-overlay={overlay}]")
    if box.is_checked() != on:
        reply = replied(page, "overlays", f"document.querySelector('input[data-overlay={overlay}]').click()")
        assert (overlay in reply["on"]) == on


@pytest.fixture()
def paused_stand(lab_server):
    post(lab_server, "/api/mode", {"mode": "stand"})
    post(lab_server, "/api/pause", {"paused": False})
    post(lab_server, "/api/reset")
    wait_until(lambda: requests.get(lab_server.url + "/api/metrics", timeout=5).json()["sim_time"] > 0.5, 20)
    post(lab_server, "/api/pause", {"paused": True})
    yield lab_server
    post(lab_server, "/api/pause", {"paused": False})


def test_each_overlay_toggled_on_the_page_draws_where_its_anchors_project(page, paused_stand):
    srv = paused_stand
    open_lab(page, srv)
    fixed_camera(page)
    base = settled(page)
    for overlay in ("contacts", "com", "support", "cop", "frames"):
        toggle(page, overlay, True)
        pts, _ = anchors(srv, overlay)
        assert_near(view_of(srv), np.abs(settled(page) - base).max(axis=2) > CHANGED, pts)
        toggle(page, overlay, False)
        off = np.abs(settled(page) - base).max(axis=2) > CHANGED
        assert off.mean() < 0.002, f"{overlay} off: the picture is as before"
    assert not page.errors


def test_the_c_key_toggles_contacts_and_o_all_overlays(page, paused_stand):
    srv = paused_stand
    open_lab(page, srv)
    fixed_camera(page)
    base = settled(page)
    page.locator("#view").click(position={"x": 5, "y": 5}, modifiers=[])  # focus the page, not an input
    reply = replied(page, "overlays", "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'c', bubbles: true}))")
    assert reply["on"] == ["contacts"]
    pts, _ = anchors(srv, "contacts")
    assert_near(view_of(srv), np.abs(settled(page) - base).max(axis=2) > CHANGED, pts)
    reply = replied(page, "overlays", "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'o', bubbles: true}))")
    assert reply["on"] == []
    reply = replied(page, "overlays", "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'o', bubbles: true}))")
    assert "contacts" in reply["on"]


def test_push_and_footsteps_overlays_draw_while_they_act(page, lab_server):
    srv = lab_server
    open_lab(page, srv)
    fixed_camera(page)
    post(srv, "/api/pause", {"paused": False})
    post(srv, "/api/mode", {"mode": "push", "first_s": 0.3, "duration_s": 0.8, "period_s": 5.0})
    post(srv, "/api/reset")
    session = srv.app.extensions["lab"]["session"]
    wait_until(lambda: session.frame_state(overlays=True)[2].get("push") is not None, 20)
    post(srv, "/api/pause", {"paused": True})
    try:
        assert session.frame_state(overlays=True)[2].get("push") is not None, "paused while the push acts"
        base = settled(page)
        toggle(page, "push", True)
        pts, _ = anchors(srv, "push")
        assert_near(view_of(srv), np.abs(settled(page) - base).max(axis=2) > CHANGED, pts)
        toggle(page, "push", False)
        post(srv, "/api/pause", {"paused": False})
        post(srv, "/api/mode", {"mode": "walk"})
        wait_until(lambda: len(session.frame_state(overlays=True)[2].get("footsteps", [])) > 0, 20)
        post(srv, "/api/pause", {"paused": True})
        base = settled(page)
        toggle(page, "footsteps", True)
        on = settled(page)
        assert (np.abs(on - base).max(axis=2) > CHANGED).sum() >= 30  # footholds drawn on the floor
        rows, _ = np.nonzero(np.abs(on - base).max(axis=2) > CHANGED)
        floor_row = project(view_of(srv), [[CAMERA["lookat"][0], 0.0, 0.0]])[0, 1]
        assert np.median(rows) > floor_row - 80, "footholds lie on the floor, low in the picture"
    finally:
        post(srv, "/api/pause", {"paused": False})
        post(srv, "/api/mode", {"mode": "stand", "first_s": 1.0, "duration_s": 0.1, "period_s": 3.0})


def test_dragging_moves_this_pages_camera_only(browser, lab_server):
    srv = lab_server
    post(srv, "/api/mode", {"mode": "stand"})
    post(srv, "/api/pause", {"paused": False})
    ctx_a = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx_b = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        a, b = ctx_a.new_page(), ctx_b.new_page()
        for p in (a, b):
            open_lab(p, srv)
        box = a.locator("#view").bounding_box()
        cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        a.mouse.move(cx, cy)
        a.mouse.down()
        for i in range(1, 11):
            a.mouse.move(cx + 25 * i, cy)
        a.mouse.up()
        a.wait_for_function("window.labView3d.camera && window.labView3d.camera.shared === false", timeout=20000)
        cam_a = a.evaluate("window.labView3d.camera")
        assert abs(((cam_a["azimuth"] - 145.0 + 180) % 360) - 180) > 20
        assert b.evaluate("window.labView3d.camera") is None  # b was never told of a camera change
        wait_until(lambda: srv.app.extensions["lab"]["hub"].cameras == 2, 20)
        # wheel zooms, double-click re-centres on the body under the cursor, the reset button shares again
        a.mouse.move(cx, cy)
        a.mouse.wheel(0, -300)
        a.wait_for_function(f"window.labView3d.camera.distance < {cam_a['distance'] - 0.05}", timeout=20000)
        a.evaluate("window.labSocket.on('picked', (m) => { window.__picked = m; })")
        a.mouse.dblclick(cx, cy)  # the robot is under the middle of the view: centre on the body there
        a.wait_for_function("window.__picked !== undefined", timeout=20000)
        picked = a.evaluate("window.__picked")
        assert picked["body"], "a double-click on the robot picks a body"
        a.wait_for_function("(b) => window.labView3d.camera.body === b", arg=picked["body_id"], timeout=20000)
        a.click(".v3-reset")
        a.wait_for_function("window.labView3d.camera.shared === true", timeout=20000)
        wait_until(lambda: srv.app.extensions["lab"]["hub"].cameras == 1, 20)
    finally:
        ctx_a.close()
        ctx_b.close()


def test_ctrl_drag_pulls_the_robot_and_the_readout_shows_it(page, lab_server):
    srv = lab_server
    post(srv, "/api/mode", {"mode": "stand"})
    post(srv, "/api/pause", {"paused": False})
    post(srv, "/api/reset")
    open_lab(page, srv)
    page.wait_for_function("window.labView.fps() > 5", timeout=20000)
    box = page.locator("#view").bounding_box()
    cx, cy = box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.45
    page.keyboard.down("Control")
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.wait_for_function("window.labView3d.pullActive === true", timeout=20000)
    for i in range(1, 16):
        page.mouse.move(cx + 12 * i, cy)
    page.wait_for_selector(".v3-pull:not([hidden])", timeout=20000)
    assert "pulling" in page.locator(".v3-pull").inner_text()
    page.mouse.up()
    page.keyboard.up("Control")
    page.wait_for_selector(".v3-pull", state="hidden", timeout=20000)
    events = requests.get(srv.url + "/api/events", timeout=5).json()["events"]
    assert events and events[-1]["kind"] == "perturb" and events[-1]["peak_force_n"] > 0
    assert not page.errors
