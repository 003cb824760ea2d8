// The 3D view you drive: each viewer's own camera, overlays drawn into the scene, picking and (the Lab)
// Ctrl+drag to pull a body. The server renders; this module turns the mouse into WS messages
// (lab/web/view_api.py) and keeps a small toolbar over the view.
//   drag: orbit · Shift+drag or right-drag: pan · wheel / pinch: zoom · double-click: centre on the body
//   Ctrl+drag (Lab): pull the body with a limited spring · Follow / Reset view / Overlays in the toolbar
import { toast } from './util.js';

export const OVERLAY_LABELS = {
  contacts: 'contact forces', com: 'CoM + ground projection', support: 'support polygon', cop: 'CoP / ZMP',
  push: 'push and pull forces', footsteps: 'footsteps + swing paths', frames: 'joint frames', dcm: 'DCM / capture point',
};
const DEFAULT_SET = ['contacts', 'com', 'support', 'cop', 'push', 'footsteps'];
const ZOOM_PER_PIXEL = 0.0015; // log distance per wheel pixel

export class View3d {
  // views: [{canvas, view}] (one per engine view; in Sim2Sim they move together); wraps: where the toolbar goes
  // overlays: the names this page offers (default: what the service's hello names)
  constructor(sock, views, { perturb = false, bar = null, overlays = null } = {}) {
    Object.assign(this, { sock, views, perturbAllowed: perturb, names: overlays || Object.keys(OVERLAY_LABELS) });
    this.fixedNames = overlays !== null;
    this.camera = null;       // the server's last word on this viewer's camera
    this.on = new Set();      // overlays on
    this.lastSet = DEFAULT_SET.filter((n) => this.names.includes(n));
    this.pending = { orbit: [0, 0], pan: [0, 0], zoom: 0 };
    this.drag = null;         // {mode: orbit|pan|perturb, view, x, y, rect}
    this.pointers = new Map();// touch pointers for pinch
    this.pulling = null;      // {x, y, view} to send for the pull this frame
    this.raf = 0;
    for (const v of views) this.attach(v);
    this.bar = bar ? this.makeBar(bar) : null;
    sock.on('hello', (m) => { if (Array.isArray(m.overlays) && !this.fixedNames) this.setNames(m.overlays); });
    sock.on('camera', (m) => this.onCamera(m));
    sock.on('overlays', (m) => { this.on = new Set(m.on); this.showOverlays(); });
    sock.on('picked', (m) => { if (!m.body) toast('nothing to centre on there', 'info'); });
    sock.on('perturb', (m) => this.onPerturb(m));
    sock.on('error', (m) => { if (['camera', 'overlays', 'pick', 'perturb'].includes(m.about)) toast(m.error, 'error', m.hint); });
    sock.on('metrics', (m) => this.showPull(m.perturb));
    sock.onOpen(() => this.restore());
  }

  // after a (re)connect the server knows nothing of this viewer: say who it is and what it looks at
  restore() {
    const token = localStorage.getItem('labToken');
    if (token) this.sock.send({ type: 'auth', token });
    const c = this.camera;
    if (c && !c.shared) {
      const msg = { type: 'camera', azimuth: c.azimuth, elevation: c.elevation, distance: c.distance };
      if (!c.follow) msg.lookat = c.lookat; else msg.follow = true;
      this.sock.send(msg);
    }
    if (this.on.size) this.sock.send({ type: 'overlays', on: [...this.on] });
  }

  attach({ canvas, view }) {
    canvas.classList.add('view3d');
    canvas.addEventListener('contextmenu', (e) => e.preventDefault());
    canvas.addEventListener('pointerdown', (e) => this.down(e, canvas, view));
    canvas.addEventListener('pointermove', (e) => this.move(e));
    canvas.addEventListener('pointerup', (e) => this.up(e));
    canvas.addEventListener('pointercancel', (e) => this.up(e));
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      const px = e.deltaMode === 1 ? e.deltaY * 33 : e.deltaMode === 2 ? e.deltaY * 400 : e.deltaY;
      this.pending.zoom += px * ZOOM_PER_PIXEL;
      this.schedule();
    }, { passive: false });
    canvas.addEventListener('dblclick', (e) => {
      const p = rel(e, canvas.getBoundingClientRect());
      this.sock.send({ type: 'pick', view, x: p.x, y: p.y });
    });
    window.addEventListener('blur', () => this.endPull());
  }

  down(e, canvas, view) {
    const rect = canvas.getBoundingClientRect();
    if (e.pointerType === 'touch') this.pointers.set(e.pointerId, { x: e.clientX, y: e.clientY });
    if (this.pointers.size === 2) { this.drag = { mode: 'pinch', rect, spread: spread(this.pointers) }; return; }
    const pull = (e.ctrlKey || e.metaKey) && e.button === 0;
    if (pull && !this.perturbAllowed) { toast('pulling the robot is the Lab\u2019s (MuJoCo) view only', 'info'); return; }
    const mode = pull ? 'perturb' : e.button === 2 || e.shiftKey ? 'pan' : e.button === 0 ? 'orbit' : null;
    if (!mode) return;
    e.preventDefault();
    canvas.setPointerCapture(e.pointerId);
    this.drag = { mode, view, x: e.clientX, y: e.clientY, rect, canvas };
    canvas.dataset.drag = mode;
    if (mode === 'perturb') {
      const p = rel(e, rect);
      this.sock.send({ type: 'perturb', phase: 'start', view, x: p.x, y: p.y });
    }
  }

  move(e) {
    if (this.pointers.has(e.pointerId)) this.pointers.set(e.pointerId, { x: e.clientX, y: e.clientY });
    const d = this.drag;
    if (!d) return;
    if (d.mode === 'pinch') {
      const s = spread(this.pointers);
      if (s > 0 && d.spread > 0) this.pending.zoom -= Math.log(s / d.spread);
      d.spread = s;
      this.schedule();
      return;
    }
    if (d.mode === 'perturb') {
      const p = rel(e, d.rect);
      this.pulling = { view: d.view, x: p.x, y: p.y };
    } else {
      const dx = (e.clientX - d.x) / d.rect.width, dy = (e.clientY - d.y) / d.rect.height;
      const acc = this.pending[d.mode];
      acc[0] += dx; acc[1] += dy;
    }
    d.x = e.clientX; d.y = e.clientY;
    this.schedule();
  }

  up(e) {
    this.pointers.delete(e.pointerId);
    const d = this.drag;
    if (!d) return;
    if (d.canvas) delete d.canvas.dataset.drag;
    if (d.mode === 'perturb') this.endPull();
    this.drag = null;
  }

  endPull() {
    if (this.drag?.mode === 'perturb' || this.pullActive) this.sock.send({ type: 'perturb', phase: 'end' });
    this.pulling = null;
    this.pullActive = false;
  }

  // one message of each kind per animation frame, whatever the mouse's event rate
  schedule() { if (!this.raf) this.raf = requestAnimationFrame(() => this.flush()); }

  flush() {
    this.raf = 0;
    const p = this.pending;
    const msg = { type: 'camera' };
    if (p.orbit[0] || p.orbit[1]) msg.orbit = clampPair(p.orbit);
    if (p.pan[0] || p.pan[1]) msg.pan = clampPair(p.pan);
    if (p.zoom) msg.zoom = Math.max(-10, Math.min(10, p.zoom));
    this.pending = { orbit: [0, 0], pan: [0, 0], zoom: 0 };
    if (Object.keys(msg).length > 1) this.sock.send(msg);
    if (this.pulling) {
      this.sock.send({ type: 'perturb', phase: 'move', ...this.pulling });
      this.pulling = null;
    }
  }

  onCamera(m) {
    this.camera = m;
    if (!this.bar) return;
    this.bar.follow.classList.toggle('on', m.follow);
    this.bar.follow.title = m.follow ? `following ${m.body_name} (f)` : 'follow the robot (f)';
    this.bar.reset.disabled = m.shared;
  }

  onPerturb(m) {
    this.pullActive = m.active;
    if (m.active === false && m.body === null && !m.event) toast('nothing to pull there: Ctrl+drag on the robot', 'info');
  }

  showPull(p) {
    const el = this.bar?.pull;
    if (!el) return;
    el.hidden = !p;
    if (p) el.textContent = `pulling ${p.body} · ${p.force_n.toFixed(0)} N of ${p.max_n.toFixed(0)} N max`;
  }

  // --- what the toolbar and the keys do (window.labView3d) ---
  toggleFollow() { this.sock.send({ type: 'camera', follow: !(this.camera?.follow ?? true) }); }
  resetView() { this.sock.send({ type: 'camera', reset: true, follow: true }); }
  setOverlays(names) { this.sock.send({ type: 'overlays', on: names.filter((n) => this.names.includes(n)) }); }
  toggleOverlay(name) {
    const on = new Set(this.on);
    if (on.has(name)) on.delete(name); else on.add(name);
    this.setOverlays([...on]);
  }
  toggleOverlays() {
    if (this.on.size) { this.lastSet = [...this.on]; this.setOverlays([]); } else this.setOverlays(this.lastSet);
  }

  makeBar(wrap) {
    const bar = document.createElement('div');
    bar.className = 'view3d-bar';
    bar.innerHTML = `
      <button type="button" class="v3-follow on" title="follow the robot (f)">Follow</button>
      <button type="button" class="v3-reset" title="back to the shared default camera" disabled>Reset view</button>
      <div class="v3-overlays">
        <button type="button" class="v3-menu" aria-expanded="false" title="overlays drawn into the scene (o)">Overlays <span class="v3-count"></span></button>
        <div class="v3-panel" hidden></div>
      </div>`;
    const pull = document.createElement('div');
    pull.className = 'badge v3-pull';
    pull.hidden = true;
    // below the view's banners (paused, error, disconnected) when the page has a place for them
    const msgs = wrap.querySelector('.view-msgs');
    if (msgs) { bar.classList.add('in-msgs'); msgs.append(bar); } else wrap.append(bar);
    wrap.append(pull);
    const q = (s) => bar.querySelector(s);
    q('.v3-follow').addEventListener('click', () => this.toggleFollow());
    q('.v3-reset').addEventListener('click', () => this.resetView());
    const panel = q('.v3-panel'), menu = q('.v3-menu');
    menu.addEventListener('click', () => { panel.hidden = !panel.hidden; menu.setAttribute('aria-expanded', String(!panel.hidden)); });
    panel.addEventListener('change', (e) => {
      const box = e.target.closest('input[data-overlay]');
      if (box) this.toggleOverlay(box.dataset.overlay);
    });
    const parts = { el: bar, follow: q('.v3-follow'), reset: q('.v3-reset'), panel, count: q('.v3-count'), pull };
    this.fillPanel(panel);
    return parts;
  }

  // the overlays this service draws (its hello names them)
  setNames(names) {
    this.names = names;
    this.lastSet = DEFAULT_SET.filter((n) => names.includes(n));
    if (this.bar) { this.fillPanel(this.bar.panel); this.showOverlays(); }
  }

  fillPanel(panel) {
    panel.innerHTML = `${this.names.map((n) => `<label><input type="checkbox" data-overlay="${n}"> ${OVERLAY_LABELS[n] || n}${n === 'contacts' ? ' <kbd>c</kbd>' : ''}</label>`).join('')}
      <p class="v3-help">drag orbit · Shift/right-drag pan · wheel zoom · double-click centre${this.perturbAllowed ? ' · Ctrl+drag pull' : ''} · <kbd>o</kbd> all</p>`;
  }

  showOverlays() {
    if (!this.bar) return;
    for (const box of this.bar.panel.querySelectorAll('input[data-overlay]')) box.checked = this.on.has(box.dataset.overlay);
    this.bar.count.textContent = this.on.size ? `(${this.on.size})` : '';
  }
}

function rel(e, rect) {
  const x = (e.clientX - rect.left) / rect.width, y = (e.clientY - rect.top) / rect.height;
  return { x: Math.max(0, Math.min(1, x)), y: Math.max(0, Math.min(1, y)) };
}

function spread(pointers) {
  const [a, b] = [...pointers.values()];
  return a && b ? Math.hypot(a.x - b.x, a.y - b.y) : 0;
}

function clampPair([a, b]) { return [Math.max(-10, Math.min(10, a)), Math.max(-10, Math.min(10, b))]; }
