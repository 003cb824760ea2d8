// The walk panel of the Lab page (templates/_walk_panel.html): the feedback walker's velocity command
// (sliders, typed values, buttons and arrow keys -> POST /api/walk, which selects `walk` first in any
// other mode), the controller's state, and three live charts drawn from the metrics stream's `extras`:
// lateral and sagittal DCM / ZMP / CoM over time, and a top-down view of the feet, the support polygon
// and the points that matter, following the robot.
//
// Metrics come from the page's one WebSocket (lab.js's StreamSocket, window.labSocket): this module
// chains itself after lab.js's handler as soon as lab.js (a later module of the page) has made it, so the
// page keeps a single stream. Without that socket (no lab.js) it polls GET /api/metrics.
import { $, api, fmt } from './util.js';

const KEYS = ['vx', 'vy', 'yaw_rate'];
const ZERO = { vx: 0, vy: 0, yaw_rate: 0 };
const NUDGE = { vx: 0.05, vy: 0.05, yaw_rate: 0.25 }; // one key press / button click
const ACTS = {
  forward: ['vx', +1], back: ['vx', -1], left: ['vy', +1], right: ['vy', -1],
  turn_left: ['yaw_rate', +1], turn_right: ['yaw_rate', -1],
};
const TRAIL_S = 1.5; // top view: DCM and CoM trails
const TICK_MS = 100; // redraws at most 10 Hz, one chart per tick (see tick())
const REPLY_HOLD_MS = 400; // after a reply, the stream's (older) command does not overwrite it
const PHASES = { ds0: 'first DS', ds: 'double support', ss: 'single support', stand: 'stand' };
const PHASE_CODES = { 0: 'double support', 1: 'single support', 2: 'stand' };
const C = { // colours: the Lab's palette (plots.js, lab.js)
  dcm: '#c792ea', zmp: '#ff6b81', zmpRef: '#ffd166', cop: '#7ee081', com: '#5fb3ff', comPlan: '#f39a2e',
  left: '#5fb3ff', right: '#f39a2e', poly: '#44d17a', sat: '#ff2e4c',
};

const panel = $('walk-panel');
let bounds = { vx: 0.3, vy: 0.15, yaw_rate: 1.0 };
let mode = panel.dataset.mode;
let held = null; // {vx, vy, yaw_rate} the feedback walker holds (server), or null: not walking
let pending = {}; // fields waiting to be sent
let inflight = null; // fields being sent
let lastReply = -Infinity; // performance.now() of the last accepted reply
let errorKey = null; // the typed field the last refusal was about: its input keeps what was typed

// ---------------------------------------------------------------------------------------------
// the command: what is held, what is shown, what is sent
// ---------------------------------------------------------------------------------------------
const round = (v) => Math.round(v * 1000) / 1000;
const clamp = (k, v) => Math.max(-bounds[k], Math.min(bounds[k], v));

/** The command as it will be once what is pending has been sent. */
function target() { return { ...(held || ZERO), ...(inflight || {}), ...pending }; }

/** Queue `changes`; outside the feedback walk the whole vector shown is sent (so that what the panel
 * shows is what the new walker gets, not its own start command). */
function command(changes) {
  if (!held) Object.assign(pending, target());
  Object.assign(pending, changes);
  showTarget();
  send();
}

// one request at a time; what piles up meanwhile goes in the next one (the latest value of each field)
async function send() {
  if (inflight || !Object.keys(pending).length) return;
  inflight = pending;
  pending = {};
  try {
    const r = await api('/api/walk', inflight);
    held = r.command;
    lastReply = performance.now();
    errorKey = null;
    showError(null);
    setMode(r.mode || 'walk');
    flashHeld();
  } catch (e) {
    const bad = Object.keys(inflight).find((k) => e.message.includes(`'${k}'`));
    errorKey = bad || null;
    showError(e);
  } finally {
    inflight = null;
    showHeld();
    showTarget();
    if (Object.keys(pending).length) send();
  }
}

function nudge(act) {
  if (act === 'stop') { command({ ...ZERO }); return; }
  const [k, sign] = ACTS[act];
  const t = target();
  command({ [k]: round(clamp(k, t[k] + sign * NUDGE[k])) });
}

function showHeld() {
  const el = $('walk-held');
  el.dataset.walking = held ? '1' : '';
  el.textContent = held
    ? `vx ${sgn(held.vx, 2)} m/s · vy ${sgn(held.vy, 2)} m/s · yaw ${sgn(held.yaw_rate, 2)} rad/s`
    : mode === 'walk' ? 'walk: command –' : 'not walking';
  for (const k of KEYS) el.dataset[k] = held ? String(held[k]) : '';
}

let flashTimer = null;
function flashHeld() {
  const el = $('walk-held');
  el.classList.add('flash');
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => el.classList.remove('flash'), 300);
}

// the sliders and the typed values follow the command, except the one being dragged or typed in
const dragging = new Set();
function showTarget() {
  const t = target();
  for (const k of KEYS) {
    const range = $(`walk-${k}-range`);
    const num = $(`walk-${k}-num`);
    if (!dragging.has(k)) range.value = String(t[k]);
    if (document.activeElement !== num && errorKey !== k) {
      num.value = String(round(t[k]));
      num.classList.remove('changed');
    }
    num.classList.toggle('nonzero', Math.abs(t[k]) > 1e-9);
  }
}

function showError(e) {
  const box = $('walk-error');
  box.hidden = !e;
  if (!e) return;
  box.querySelector('b').textContent = e.message;
  box.querySelector('span').textContent = e.hint ? ` — ${e.hint}` : '';
}

function sgn(v, d) {
  const s = fmt(v, d);
  return /^-0\.?0*$/.test(s) ? s.slice(1) : Number(v) > 0 && s !== fmt(0, d) ? `+${s}` : s;
}

function setBounds(b) {
  if (!b) return;
  bounds = { ...bounds, ...b };
  for (const k of KEYS) {
    $(`walk-${k}-range`).min = String(-bounds[k]);
    $(`walk-${k}-range`).max = String(bounds[k]);
    $(`walk-${k}-bound`).textContent = `±${bounds[k]}`;
  }
}

// ---- inputs ----
for (const k of KEYS) {
  const range = $(`walk-${k}-range`);
  const num = $(`walk-${k}-num`);
  range.addEventListener('pointerdown', () => dragging.add(k));
  range.addEventListener('input', () => { num.value = range.value; command({ [k]: Number(range.value) }); });
  range.addEventListener('change', () => { if (!dragging.has(k)) showTarget(); });
  num.addEventListener('input', () => num.classList.add('changed'));
  num.addEventListener('change', () => { // Enter or leaving the field: sent as typed, the server checks it
    const v = num.value.trim() === '' ? NaN : Number(num.value);
    command({ [k]: Number.isFinite(v) ? v : num.value });
  });
  num.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') num.blur(); });
  num.addEventListener('blur', () => { if (errorKey !== k) showTarget(); });
  num.addEventListener('focus', () => { if (errorKey === k) errorKey = null; });
}
window.addEventListener('pointerup', () => { // a slider let go gives the keys back to the panel
  if (!dragging.size) return;
  for (const k of dragging) $(`walk-${k}-range`).blur();
  dragging.clear();
  showTarget();
});

const buttons = {};
for (const b of document.querySelectorAll('#walk-pad button[data-act]')) {
  buttons[b.dataset.act] = b;
  b.addEventListener('click', () => nudge(b.dataset.act));
}

function pressed(act) {
  const b = buttons[act];
  if (!b) return;
  b.classList.add('pressed');
  setTimeout(() => b.classList.remove('pressed'), 150);
}

function keyAct(ev) {
  switch (ev.key) {
    case 'ArrowUp': return 'forward';
    case 'ArrowDown': return 'back';
    case 'ArrowLeft': return ev.shiftKey ? 'left' : 'turn_left';
    case 'ArrowRight': return ev.shiftKey ? 'right' : 'turn_right';
    case 'Escape': return 'stop'; // Space is the page's pause (keys.js)
    default: return null;
  }
}

// typing somewhere (or a slider with its own arrow keys): the keys are that field's
function typing(ev) {
  const t = ev.target;
  return Boolean(t && t.closest && (t.closest('input, textarea, select') || t.isContentEditable));
}

document.addEventListener('keydown', (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev)) return;
  const act = keyAct(ev);
  if (!act) return;
  ev.preventDefault(); // no scrolling
  if (act === 'stop' && ev.repeat) return;
  pressed(act);
  nudge(act);
});

// ---------------------------------------------------------------------------------------------
// the mode: the state and the charts while walking, a hint otherwise
// ---------------------------------------------------------------------------------------------
function setMode(m) {
  if (!m) return;
  mode = m;
  panel.dataset.mode = m;
  if (m !== 'walk') held = null;
  $('walk-hint-mode').textContent = m;
  $('walk-sub').textContent = m === 'walk_pd'
    ? 'velocity command · showing the PD baseline (walk_pd); a command switches to the DCM feedback walker'
    : 'velocity command · DCM feedback walker';
  showHeld();
}

// 'walk' (the feedback walker's extras), 'walk_pd' (the PD walk's) or '' (nothing to chart)
function liveKind(m) {
  const ex = m.extras;
  if (!ex) return '';
  if (m.mode === 'walk' && ex.controller === 'feedback') return 'walk';
  if (m.mode === 'walk_pd' && 'zmp_plan_x' in ex) return 'walk_pd';
  return '';
}

// ---------------------------------------------------------------------------------------------
// samples: the frame the time charts use, the buffers
// ---------------------------------------------------------------------------------------------
const SERIES = [ // the time charts' traces: which walk reports each
  { key: 'dcm', name: 'DCM', color: C.dcm, width: 2, kinds: ['walk'] },
  { key: 'dcmRef', name: 'DCM ref', color: C.dcm, dash: 'dot', kinds: ['walk'] },
  { key: 'zmp', name: 'ZMP cmd p*', color: C.zmp, kinds: ['walk'] },
  { key: 'zmpRef', name: 'ZMP ref (sole)', color: C.zmpRef, dash: 'dash', width: 1.2, kinds: ['walk', 'walk_pd'] },
  { key: 'cop', name: 'CoP measured', color: C.cop, width: 1, kinds: ['walk', 'walk_pd'] },
  { key: 'com', name: 'CoM', color: C.com, width: 2, kinds: ['walk', 'walk_pd'] },
  { key: 'comPlan', name: 'CoM plan', color: C.comPlan, dash: 'dot', kinds: ['walk_pd'] },
];
const BUFFER_S = 10; // what the buffers keep [s]; the charts show `windowS` of it
let windowS = 5;
let buf = null; // {t: [], lat: {key: []}, sag: {key: []}, sat: {t: [], lat: [], sag: []}}
let trail = { t: [], dcm: [], com: [] };
let lastT = -1;
let latest = null; // the last sample charted: {m, ex, pts}
let satHist = []; // [t, saturated] for the share over the last 2 s
let feet = [null, null]; // last landed sole centre of each side [x, y]
let lastOrigin = null;
let footSize = [0.137, 0.038]; // [m] sole length, width: measured from a single-support polygon
let seenSteps = []; // planned footholds seen [x, y, yaw, side]: a landed one takes its yaw from here
let follow = null; // the top view's centre: the CoM smoothed, with its lag put back {c, v, t}

function clearData() {
  const series = () => Object.fromEntries(SERIES.map((s) => [s.key, []]));
  buf = { t: [], lat: series(), sag: series(), sat: { t: [], lat: [], sag: [] } };
  trail = { t: [], dcm: [], com: [] };
  satHist = [];
  feet = [null, null];
  lastOrigin = null;
  seenSteps = [];
  latest = null;
  follow = null;
  dirty.y = dirty.x = dirty.top = true;
}

function centroid(poly) {
  let x = 0; let y = 0;
  for (const p of poly) { x += p[0]; y += p[1]; }
  return [x / poly.length, y / poly.length];
}

const ok = (p) => p && p[0] !== null && p[0] !== undefined && p[1] !== null && p[1] !== undefined;

/** The frame the time charts are drawn in: origin and heading [rad]. The feedback walk: the middle of
 * the two last landed footholds (before both feet have landed: the support polygon's centre), axes along
 * and across the robot's heading, so that x and y stay on scale whatever the path. The PD walk (no
 * footholds, no heading): world axes, x from the planned CoM. */
function frameOf(ex) {
  if (ex.controller !== 'feedback') return { o: [ex.com_plan_x ?? 0, 0], h: 0 };
  for (const [x, y, side] of ex.landed || []) if (side === 0 || side === 1) feet[side] = [x, y];
  const o = feet[0] && feet[1] ? [(feet[0][0] + feet[1][0]) / 2, (feet[0][1] + feet[1][1]) / 2]
    : ex.polygon && ex.polygon.length ? centroid(ex.polygon) : [ex.com_x ?? 0, ex.com_y ?? 0];
  return { o, h: ((ex.heading_deg || 0) * Math.PI) / 180, jumps: true };
}

function rel(f, p) {
  if (!ok(p)) return [null, null];
  const dx = p[0] - f.o[0]; const dy = p[1] - f.o[1];
  const c = Math.cos(f.h); const s = Math.sin(f.h);
  return [c * dx + s * dy, -s * dx + c * dy]; // [sagittal, lateral]
}

function onMetrics(m) {
  if (!m) return;
  if (m.mode && m.mode !== mode) setMode(m.mode);
  const ex = m.extras || {};
  if (ex.controller === 'feedback' && ex.cmd_vx !== undefined && !inflight && !Object.keys(pending).length
      && performance.now() - lastReply > REPLY_HOLD_MS) { // a command from elsewhere (another page, a script)
    const now = { vx: ex.cmd_vx, vy: ex.cmd_vy, yaw_rate: ex.cmd_yaw_rate };
    if (!held || KEYS.some((k) => Math.abs(now[k] - held[k]) > 1e-9)) { held = now; showHeld(); showTarget(); }
  }
  const kind = liveKind(m);
  setLive(kind);
  if (!kind || typeof m.sim_time !== 'number') return;
  if (m.sim_time < lastT - 1e-9) clearData(); // a reset
  if (m.sim_time === lastT) return; // the same sample again (paused)
  lastT = m.sim_time;
  add(m, ex);
}

const FOLLOW_TAU = 0.4; // [s]
function add(m, ex) {
  const t = m.sim_time;
  const f = frameOf(ex);
  if (f.jumps && lastOrigin && Math.hypot(f.o[0] - lastOrigin[0], f.o[1] - lastOrigin[1]) > 0.005) {
    buf.t.push(t); // the frame moved (a foot landed): break the lines rather than join across
    for (const s of SERIES) { buf.lat[s.key].push(null); buf.sag[s.key].push(null); }
  }
  lastOrigin = f.o;
  const pts = {
    dcm: [ex.dcm_x, ex.dcm_y], dcmRef: [ex.dcm_ref_x, ex.dcm_ref_y], zmp: [ex.zmp_cmd_x, ex.zmp_cmd_y],
    zmpRef: [ex.zmp_plan_x, ex.zmp_plan_y], cop: m.cop || [null, null],
    com: [ex.com_x ?? m.com?.[0], ex.com_y ?? m.com?.[1]], comPlan: [ex.com_plan_x, ex.com_plan_y],
  };
  buf.t.push(t);
  for (const s of SERIES) {
    const [sag, lat] = rel(f, pts[s.key]);
    buf.sag[s.key].push(sag);
    buf.lat[s.key].push(lat);
  }
  const sat = ex.saturated === 1;
  if (sat && ok(pts.zmp)) {
    const [sag, lat] = rel(f, pts.zmp);
    buf.sat.t.push(t); buf.sat.sag.push(sag); buf.sat.lat.push(lat);
  }
  trim(buf, t - BUFFER_S);
  satHist.push([t, sat ? 1 : 0]);
  while (satHist.length && satHist[0][0] < t - 2) satHist.shift();
  trail.t.push(t);
  trail.dcm.push(pts.dcm);
  trail.com.push(pts.com);
  while (trail.t.length && trail.t[0] < t - TRAIL_S) { trail.t.shift(); trail.dcm.shift(); trail.com.shift(); }
  for (const s of ex.footsteps || []) {
    const near = seenSteps.find((q) => q[3] === s[3] && Math.hypot(q[0] - s[0], q[1] - s[1]) < 0.002);
    if (near) near[2] = s[2]; else seenSteps.push(s.slice());
  }
  if (seenSteps.length > 40) seenSteps.splice(0, seenSteps.length - 40);
  if (ex.phase === 1 && ex.polygon && ex.polygon.length === 4) {
    const [a, b, c] = ex.polygon;
    const l1 = Math.hypot(b[0] - a[0], b[1] - a[1]); const l2 = Math.hypot(c[0] - b[0], c[1] - b[1]);
    if (l1 > 0.01 && l2 > 0.01) footSize = [Math.max(l1, l2), Math.min(l1, l2)];
  }
  if (ok(pts.com)) { // the top view's centre: a low-passed CoM, plus its velocity times the lag
    const c = pts.com;
    if (!follow || Math.hypot(c[0] - follow.c[0], c[1] - follow.c[1]) > 0.5 || t <= follow.t) {
      follow = { c: [c[0], c[1]], v: [0, 0], t };
    } else {
      const dt = t - follow.t; const a = Math.min(1, dt / FOLLOW_TAU); const b = Math.min(1, dt / 1.0);
      const n = [follow.c[0] + a * (c[0] - follow.c[0]), follow.c[1] + a * (c[1] - follow.c[1])];
      const v = [(n[0] - follow.c[0]) / dt, (n[1] - follow.c[1]) / dt];
      follow = { c: n, v: [follow.v[0] + b * (v[0] - follow.v[0]), follow.v[1] + b * (v[1] - follow.v[1])], t };
    }
  }
  latest = { m, ex, pts };
  dirty.y = dirty.x = dirty.top = true;
}

function trim(b, tmin) { // drop what is older than tmin
  let k = 0;
  while (k < b.t.length && b.t[k] < tmin) k++;
  if (k) {
    b.t.splice(0, k);
    for (const s of SERIES) { b.lat[s.key].splice(0, k); b.sag[s.key].splice(0, k); }
  }
  let j = 0;
  while (j < b.sat.t.length && b.sat.t[j] < tmin) j++;
  if (j) { b.sat.t.splice(0, j); b.sat.lat.splice(0, j); b.sat.sag.splice(0, j); }
}

// ---------------------------------------------------------------------------------------------
// charts: Plotly, with few traces, fixed margins and the legends in HTML (a Plotly legend or an
// automatic margin redraws at every update: on a CPU-rendered page that costs more than the data)
// ---------------------------------------------------------------------------------------------
const BASE = { // the look of plots.js's strip charts
  paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)',
  font: { color: '#c9d1dc', size: 11 }, hovermode: false, showlegend: false,
};
const AXIS = { gridcolor: '#273041', zerolinecolor: '#3a4457' };
const CONFIG = { displayModeBar: false, staticPlot: true }; // nothing to hover or drag: cheaper redraws
// each chart follows its own box (the window, the card's layout, a legend that wraps), not only the window
const sized = 'ResizeObserver' in window ? new ResizeObserver((es) => {
  for (const e of es) if (e.target.data && e.contentRect.width > 0) Plotly.Plots.resize(e.target);
}) : null;
let charts = null;
const dirty = { y: false, x: false, top: false };

function stripLayout(title) {
  return {
    ...structuredClone(BASE),
    title: { text: title, font: { size: 12 }, x: 0.01, xanchor: 'left' },
    margin: { l: 48, r: 10, t: 26, b: 30 },
    xaxis: { ...AXIS, title: { text: 'sim time [s]', standoff: 4 }, range: [0, windowS] },
    yaxis: { ...AXIS, tickformat: '.2f' },
  };
}

function seriesFor(kind) { return SERIES.filter((s) => s.kinds.includes(kind)); }

function stripTraces(kind) {
  const traces = seriesFor(kind).map((s) => ({
    x: [], y: [], name: s.name, mode: 'lines', connectgaps: false,
    line: { color: s.color, width: s.width || 1.6, dash: s.dash || 'solid' },
  }));
  if (kind === 'walk') traces.push({ x: [], y: [], name: 'p* clamped', mode: 'markers', marker: { color: C.sat, size: 6, symbol: 'x-thin', line: { color: C.sat, width: 1.5 } } });
  return traces;
}

const TITLES = {
  walk: { y: 'lateral y: across the heading, from mid-stance [m]', x: 'sagittal x: along the heading, from mid-stance [m]' },
  walk_pd: { y: 'lateral y (world) [m]', x: 'sagittal x, from the planned CoM [m]' },
};

function makeCharts(kind) {
  legends(kind); // first: the legends take their room before the plots measure theirs
  charts = { y: { el: $('walk-plot-y'), key: 'lat' }, x: { el: $('walk-plot-x'), key: 'sag' }, top: { el: $('walk-plot-top') } };
  for (const c of ['y', 'x']) Plotly.newPlot(charts[c].el, stripTraces(kind), stripLayout(TITLES[kind][c]), CONFIG);
  Plotly.newPlot(charts.top.el, topTraces(), topLayout(), CONFIG);
  charts.kind = kind;
  for (const c of [charts.y, charts.x, charts.top]) sized?.observe(c.el);
}

function rekind(kind) { // walk <-> walk_pd: other series
  legends(kind);
  for (const c of ['y', 'x']) Plotly.react(charts[c].el, stripTraces(kind), stripLayout(TITLES[kind][c]), CONFIG);
  charts.kind = kind;
}

function swatch(color, { dash = 'solid', glyph = null, fill = null } = {}) {
  const i = document.createElement('i');
  if (glyph) { i.className = 'sw glyph'; i.textContent = glyph; i.style.color = color; } else {
    i.className = `sw line${fill ? ' fill' : ''}`;
    i.style.borderTopColor = color;
    i.style.borderTopStyle = dash === 'dot' ? 'dotted' : dash === 'dash' ? 'dashed' : 'solid';
    if (fill) i.style.background = fill;
  }
  return i;
}

function legend(el, items) {
  el.replaceChildren();
  for (const [name, sw] of items) {
    const s = document.createElement('span');
    s.append(sw, document.createTextNode(name));
    el.append(s);
  }
}

function legends(kind) {
  const strip = seriesFor(kind).map((s) => [s.name, swatch(s.color, { dash: s.dash })]);
  if (kind === 'walk') strip.push(['p* clamped', swatch(C.sat, { glyph: '×' })]);
  legend($('walk-legend-strips'), strip);
  const fb = kind === 'walk';
  legend($('walk-legend-top'), [
    ...(fb ? [
      ['support polygon', swatch(C.poly, { fill: 'rgba(68, 209, 122, .25)' })],
      ['left foot', swatch(C.left, { fill: 'rgba(95, 179, 255, .2)' })], ['right foot', swatch(C.right, { fill: 'rgba(243, 154, 46, .2)' })],
      ['planned', swatch('#c9d1dc', { dash: 'dot' })], ['next foothold', swatch('#ffffff', { dash: 'dash' })],
      ['DCM', swatch(C.dcm, { glyph: '●' })], ['DCM ref', swatch(C.dcm, { glyph: '○' })],
      ['p*', swatch(C.zmp, { glyph: '◆' })],
    ] : [['CoM plan', swatch(C.comPlan, { glyph: '○' })]]),
    ['ZMP ref', swatch(C.zmpRef, { glyph: '□' })], ['CoP', swatch(C.cop, { glyph: '×' })],
    ['CoM', swatch(C.com, { glyph: '●' })],
  ]);
}

function drawStrip(c) {
  const kind = charts.kind;
  const ts = buf.t;
  const tmax = ts.length ? ts[ts.length - 1] : 0;
  const list = seriesFor(kind);
  const xs = list.map(() => ts);
  const ys = list.map((s) => buf[c.key][s.key]);
  if (kind === 'walk') { xs.push(buf.sat.t); ys.push(buf.sat[c.key]); }
  const range = [Math.max(0, tmax - windowS), Math.max(tmax, windowS)];
  Plotly.update(c.el, { x: xs, y: ys }, { 'xaxis.range': range }, xs.map((_, i) => i));
}

// ---- the top-down view: 8 traces, every point marker in one ----
const TOP = ['polygon', 'landedL', 'landedR', 'planned', 'next', 'dcmTrail', 'comTrail', 'points'];
const VIEW_HALF = 0.3; // [m] half the shorter side shown
const TOP_MARGIN = { l: 44, r: 10, t: 26, b: 24 };

function topTraces() {
  const line = (color, width, dash = 'solid') => ({ color, width, dash });
  const t = {
    polygon: { mode: 'lines', fill: 'toself', fillcolor: 'rgba(68, 209, 122, .16)', line: line(C.poly, 1.5) },
    landedL: { mode: 'lines', fill: 'toself', fillcolor: 'rgba(95, 179, 255, .10)', line: line(C.left, 1) },
    landedR: { mode: 'lines', fill: 'toself', fillcolor: 'rgba(243, 154, 46, .10)', line: line(C.right, 1) },
    planned: { mode: 'lines', line: line('#c9d1dc', 1, 'dot'), opacity: 0.7 },
    next: { mode: 'lines', line: line('#ffffff', 1.6, 'dash') },
    dcmTrail: { mode: 'lines', line: line(C.dcm, 1), opacity: 0.6 },
    comTrail: { mode: 'lines', line: line(C.com, 1.2), opacity: 0.8 }, // and the heading, from the CoM
    points: { mode: 'markers', marker: { symbol: [], color: [], size: [], line: { color: [], width: [] } } },
  };
  return TOP.map((k) => ({ x: [], y: [], hoverinfo: 'skip', ...t[k] }));
}

function topLayout() {
  return {
    ...structuredClone(BASE),
    title: { text: 'top view [m] · x right, y up · following the CoM', font: { size: 12 }, x: 0.01, xanchor: 'left' },
    margin: { ...TOP_MARGIN },
    xaxis: { ...AXIS, range: [-VIEW_HALF, VIEW_HALF], tickformat: '.2f', zeroline: false },
    yaxis: { ...AXIS, range: [-VIEW_HALF, VIEW_HALF], scaleanchor: 'x', scaleratio: 1, tickformat: '.2f', zeroline: false },
  };
}

function rect(x, y, yaw, [l, w]) {
  const c = Math.cos(yaw); const s = Math.sin(yaw);
  const pts = [[l / 2, w / 2], [-l / 2, w / 2], [-l / 2, -w / 2], [l / 2, -w / 2], [l / 2, w / 2]];
  return pts.map(([a, b]) => [x + c * a - s * b, y + s * a + c * b]);
}

function shapes(list) { // several outlines in one trace, split by nulls
  const xs = []; const ys = [];
  for (const poly of list) {
    for (const p of poly) { xs.push(p[0]); ys.push(p[1]); }
    xs.push(null); ys.push(null);
  }
  return [xs, ys];
}

// [name, symbol, colour, size, outline colour, outline width]; drawn in this order (the CoM on top)
const POINTS = [
  ['zmpRef', 'square-open', C.zmpRef, 9, C.zmpRef, 1.5], ['comPlan', 'circle-open', C.comPlan, 12, C.comPlan, 1.5],
  ['dcmRef', 'circle-open', C.dcm, 12, C.dcm, 1.5], ['cop', 'x-thin', C.cop, 11, C.cop, 2.5],
  ['zmp', 'diamond', C.zmp, 10, C.zmp, 1], ['dcm', 'circle', C.dcm, 9, C.dcm, 1], ['com', 'circle', C.com, 13, '#0e1117', 2],
];

function drawTop(c) {
  const { ex, pts } = latest;
  const fb = ex.controller === 'feedback';
  const heading = ((ex.heading_deg || 0) * Math.PI) / 180;
  const landed = { 0: [], 1: [] };
  for (const [x, y, side] of fb ? ex.landed || [] : []) {
    if (side !== 0 && side !== 1) continue;
    let best = null; let bd = 0.06; // the planned foothold it was (its yaw), within 6 cm
    for (const q of seenSteps) {
      const d = Math.hypot(q[0] - x, q[1] - y);
      if (q[3] === side && d < bd) { best = q; bd = d; }
    }
    landed[side].push(rect(x, y, best ? best[2] : heading, footSize));
  }
  const steps = fb ? ex.footsteps || [] : [];
  const planned = steps.slice(1).map(([x, y, yaw]) => rect(x, y, yaw, footSize));
  const next = steps.length ? [rect(steps[0][0], steps[0][1], steps[0][2], footSize)] : [];
  const poly = fb && ex.polygon && ex.polygon.length ? [[...ex.polygon, ex.polygon[0]]] : [];
  const com = pts.com;
  const comTrail = shapes([trail.com.filter(ok)]);
  if (fb && ok(com)) { // the heading: a short line forward from the CoM
    comTrail[0].push(com[0], com[0] + 0.08 * Math.cos(heading));
    comTrail[1].push(com[1], com[1] + 0.08 * Math.sin(heading));
  }
  const sat = ex.saturated === 1;
  const mk = { x: [], y: [], symbol: [], color: [], size: [], lc: [], lw: [] };
  for (const [key, symbol, color, size, lc, lw] of POINTS) {
    const p = pts[key];
    if (!ok(p) || (key === 'comPlan' && fb)) continue;
    const s = key === 'zmp' && sat;
    mk.x.push(p[0]); mk.y.push(p[1]); mk.symbol.push(symbol);
    mk.color.push(s ? C.sat : color); mk.size.push(s ? 13 : size);
    mk.lc.push(s ? '#ffffff' : lc); mk.lw.push(s ? 1.5 : lw);
  }
  const d = {
    polygon: shapes(poly), landedL: shapes(landed[0]), landedR: shapes(landed[1]),
    planned: shapes(planned), next: shapes(next), dcmTrail: shapes([trail.dcm.filter(ok)]), comTrail,
    points: [mk.x, mk.y],
  };
  // the ranges have the plot area's own aspect (equal scales without Plotly changing a range);
  // centred on the followed CoM
  const w = Math.max(50, c.el.clientWidth - TOP_MARGIN.l - TOP_MARGIN.r);
  const h = Math.max(50, c.el.clientHeight - TOP_MARGIN.t - TOP_MARGIN.b);
  const hw = w <= h ? VIEW_HALF : (VIEW_HALF * w) / h; const hh = (hw * h) / w;
  const ctr = follow ? [follow.c[0] + FOLLOW_TAU * follow.v[0], follow.c[1] + FOLLOW_TAU * follow.v[1]] : [0, 0];
  Plotly.update(c.el, {
    x: TOP.map((k) => d[k][0]), y: TOP.map((k) => d[k][1]),
    'marker.symbol': [mk.symbol], 'marker.color': [mk.color], 'marker.size': [mk.size],
    'marker.line.color': [mk.lc], 'marker.line.width': [mk.lw],
  }, { 'xaxis.range': [ctr[0] - hw, ctr[0] + hw], 'yaxis.range': [ctr[1] - hh, ctr[1] + hh] }, TOP.map((_, i) => i));
}

// ---- the state readouts ----
function showState() {
  const { m, ex } = latest;
  const fb = ex.controller === 'feedback';
  const set = (id, text, cls = '', title = '') => { const e = $(id); e.textContent = text; e.className = cls; e.title = title; };
  set('w-controller', fb ? 'DCM feedback' : 'PD baseline', fb ? 'ok' : 'warn', fb ? 'controller: feedback' : 'walk_pd: joint PD on the planned trajectory');
  const phase = fb ? PHASES[ex.phase_name] || ex.phase_name || '–' : PHASE_CODES[ex.phase] || '–';
  set('w-phase', ex.fallen === 1 ? 'fallen' : phase, ex.fallen === 1 ? 'bad' : '', fb ? `phase ${ex.phase_name} (${ex.phase})` : `phase ${ex.phase}`);
  $('w-phase').dataset.phase = fb ? ex.phase_name || '' : String(ex.phase ?? '');
  set('w-step', ex.step === undefined ? '–' : String(Math.round(ex.step)), '', 'steps taken');
  // the feedback walker's `support` is the single-support foot; in double support, the foot the weight
  // goes to next is that one in ds0 (the first shift) and the other one in ds (after a touchdown)
  const SIDES = ['left', 'right'];
  const ds = fb && (ex.phase_name === 'ds' || ex.phase_name === 'ds0' || ex.phase_name === 'stand');
  const one = ex.support === 0 || ex.support === 1 ? SIDES[ex.support] : null;
  const side = fb ? (ds ? 'both' : one || (m.support === 'none' ? 'none' : 'both')) : one || m.support || '–';
  const next = ds && one ? (ex.phase_name === 'ds' ? SIDES[1 - ex.support] : one) : null;
  set('w-support', side, side === 'left' || side === 'right' ? side : 'muted', `feet in contact: ${m.support ?? '–'}`);
  $('w-support-next').textContent = next ? `→ ${next}` : '';
  if (fb) {
    const sat = ex.saturated === 1;
    set('w-saturated', sat ? 'clamped' : 'inside', sat ? 'sat' : 'ok', 'p* (the commanded ZMP): clamped to the support polygon, or inside it');
    const share = satHist.length ? satHist.reduce((a, s) => a + s[1], 0) / satHist.length : 0;
    $('w-sat-share').textContent = `${Math.round(share * 100)}% of 2 s`;
    set('w-adjust', ex.step_adjust_x === undefined ? '–' : `${sgn(ex.step_adjust_x * 1000, 1)}, ${sgn(ex.step_adjust_y * 1000, 1)}`, '', 'the swing foothold moved by the DCM feedback');
    set('w-heading', sgn(ex.heading_deg, 1));
    const e = ex.dcm_x === undefined ? null : Math.hypot(ex.dcm_x - ex.dcm_ref_x, ex.dcm_y - ex.dcm_ref_y) * 1000;
    set('w-dcm-err', fmt(e, 1), e !== null && e > 30 ? 'warn' : '', '|DCM − DCM ref|');
  } else {
    for (const id of ['w-saturated', 'w-adjust', 'w-heading', 'w-dcm-err']) set(id, '–', 'muted', 'not reported by walk_pd');
    $('w-sat-share').textContent = '';
  }
}

function setLive(kind) {
  if ((panel.dataset.live || '') === kind) return;
  panel.dataset.live = kind;
  if (!kind) return;
  clearData();
  if (!charts) makeCharts(kind);
  else if (charts.kind !== kind) rekind(kind); // (shown again: the ResizeObserver resizes them)
}

// ---- redraws: a 10 Hz tick; the top view every other tick (5 Hz), one time chart on the others; and a
// budget: after a redraw that took c ms, the next waits 6 c ms, so that the charts never take more than
// about 1/7 of the page's main thread (the live view's frames come first) ----
let visible = true;
if ('IntersectionObserver' in window) {
  new IntersectionObserver((es) => { visible = es.some((e) => e.isIntersecting); }).observe(panel);
}
let turn = 0;
const stats = { top: 0, strip: 0, draws: 0, off: false }; // [ms] redraw costs, smoothed; off: true pauses the redraws (to measure what they cost)
const BUDGET_GAP = 6;
let nextDraw = 0;
function tick() {
  if (!charts || !latest || document.hidden || !panel.dataset.live || stats.off) return;
  showState();
  if (!visible || performance.now() < nextDraw) return;
  const which = ['top', 'y', 'top', 'x'][turn++ % 4];
  if (!dirty[which]) return;
  dirty[which] = false;
  const t0 = performance.now();
  if (which === 'top') drawTop(charts.top); else drawStrip(charts[which]);
  const cost = performance.now() - t0;
  nextDraw = t0 + cost * (1 + BUDGET_GAP);
  const k = which === 'top' ? 'top' : 'strip';
  stats[k] = stats[k] ? 0.8 * stats[k] + 0.2 * cost : cost;
  stats.draws += 1;
}
setInterval(tick, TICK_MS);

for (const b of document.querySelectorAll('#walk-window button')) {
  b.addEventListener('click', () => {
    windowS = Number(b.dataset.s);
    for (const o of document.querySelectorAll('#walk-window button')) o.classList.toggle('on', o === b);
    dirty.x = dirty.y = true;
  });
}

// ---------------------------------------------------------------------------------------------
// start: bounds and the held command, then the page's metrics stream
// ---------------------------------------------------------------------------------------------
async function loadState() {
  try {
    const res = await fetch('/api/walk');
    if (!res.ok) return;
    const s = await res.json();
    setBounds(s.bounds);
    if (s.walking && s.command && !inflight && !Object.keys(pending).length) held = s.command;
    showHeld();
    showTarget();
  } catch (e) { /* the server is away: the socket's banner says so */ }
}

let polling = false;
async function poll() { // only without lab.js's socket
  if (polling || document.hidden) return;
  polling = true;
  try {
    const res = await fetch('/api/metrics');
    if (res.ok) onMetrics(await res.json());
  } catch (e) { /* away */ } finally { polling = false; }
}

// lab.js (a later module of the page) makes window.labSocket: wait for it a little, else poll
function hook(tries = 60) {
  const sock = window.labSocket;
  if (sock) {
    const prev = sock.onMetrics;
    sock.onMetrics = (m) => { prev?.call(sock, m); onMetrics(m); };
  } else if (tries > 0) {
    setTimeout(() => hook(tries - 1), 50);
  } else {
    setInterval(poll, TICK_MS);
  }
}

setMode(mode);
showTarget();
loadState();
hook();
window.walkPanel = { stats, target, get held() { return held; }, get mode() { return mode; }, command, nudge };
