// The Sim2Sim page: both engines' live views (plus an optional overlay), modes, per-engine readouts and curves.
// Message names follow lab/web/messages.py; metrics carry engines.<name>.*, divergence.* and (walk) steps.
// In walk: the velocity pad (POST /api/walk) and the footsteps card (GET /api/steps, polled while walking).
import { StreamSocket, FrameView } from './socket.js';
import { View3d } from './view3d.js';
import { StripChart } from './plots.js';
import { $, act, api, fmt, showSim } from './util.js';
import { installShortcuts, modeKeys, viewKeys } from './keys.js';
import './record.js'; // the record button and the recordings (templates/_record.html)

const ENGINES = $('views').dataset.engines.split(',');
const [A, B] = ENGINES;
const COLORS = { mujoco: '#5fb3ff', pybullet: '#ff7a7a' };
const NAMES = { mujoco: 'MuJoCo', pybullet: 'PyBullet' };
const HELP = {
  stand: 'hold the nominal pose',
  squat: 'squat then rise every 4 s: tracking a moving pelvis height',
  push: 'stand, pushed on the torso at a fixed period (the same force in both engines)',
  zero: 'control off (zero torque): both robots fall',
  walk: 'feedback walk (DCM tracking, step adjustment), the same walker and gains in both engines: footsteps compared below',
};
const WALK = { // the velocity pad: what each button sends to POST /api/walk
  forward: { vx: 0.15, vy: 0, yaw_rate: 0 },
  back: { vx: -0.1, vy: 0, yaw_rate: 0 },
  turn_left: { vx: 0.1, vy: 0, yaw_rate: 0.3 },
  turn_right: { vx: 0.1, vy: 0, yaw_rate: -0.3 },
  stop: { vx: 0, vy: 0, yaw_rate: 0 },
};
const STEP_ROWS = 40; // footsteps fetched; the table scrolls through them, newest first
const STEP_WINDOW = 20; // steps the chart shows
const BIG_DT_S = 0.05; // a step whose touchdowns or footholds differ by this much [s, m] is marked
const BIG_DXY_M = 0.05;

// A stream client that can be closed for good (the overlay's socket lives only while the overlay is on).
class ViewSocket extends StreamSocket {
  connect() { if (!this.closed) super.connect(); }
  close() { this.closed = true; this.ws?.close(); }
}

const views = {};
for (const v of [...ENGINES, 'overlay']) views[v] = new FrameView($(`view-${v}`));

const color = (n) => COLORS[n] || '#c792ea';
const name = (n) => NAMES[n] || n;
const charts = {
  err: new StripChart($('plot-err'), { title: 'max joint error', unit: 'rad',
    series: ENGINES.map((n) => ({ name: name(n), color: color(n) })) }),
  div: new StripChart($('plot-div'), { title: `divergence, ${name(B)} − ${name(A)}`, unit: '', series: [
    { name: 'pelvis z [mm]', color: '#f39a2e' }, { name: 'joint RMS [mrad]', color: '#7ee081' }] }),
  z: new StripChart($('plot-z'), { title: 'pelvis height', unit: 'm',
    series: [...ENGINES.map((n) => ({ name: name(n), color: color(n) })), { name: 'target', color: '#aaa', dash: 'dot' }] }),
  pitch: new StripChart($('plot-pitch'), { title: 'torso pitch', unit: 'deg',
    series: ENGINES.map((n) => ({ name: name(n), color: color(n) })) }),
};
// per step, not per sample: x is the step index (the strip chart's window counts steps here)
const stepChart = new StripChart($('plot-steps'), { title: '', unit: '', window: STEP_WINDOW, series: [
  { name: 'touchdown Δt [ms]', color: '#f39a2e' }, { name: 'foothold Δxy [mm]', color: '#7ee081' },
  { name: 'first contact Δt [ms]', color: '#c792ea', dash: 'dot' }] });
Plotly.relayout($('plot-steps'), { 'xaxis.title.text': 'step', 'margin.t': 34 });
Plotly.restyle($('plot-steps'), { mode: 'lines+markers', 'marker.size': 5 });

let lastSimTime = -1;
let currentMode = document.querySelector('#modes button.on')?.dataset.mode;
setMode(currentMode);

function addSample(m) {
  const e = m.engines;
  const d = m.divergence;
  charts.err.add(m.sim_time, ENGINES.map((n) => e[n].max_joint_err));
  charts.div.add(m.sim_time, [d.pelvis_dz * 1000, d.joint_rms * 1000]);
  charts.z.add(m.sim_time, [...ENGINES.map((n) => e[n].pelvis_z), e[A].pelvis_z_target]);
  charts.pitch.add(m.sim_time, ENGINES.map((n) => e[n].pitch_deg));
}

function onMetrics(m) {
  if (m.sim_time < lastSimTime - 1e-9) Object.values(charts).forEach((c) => c.clear()); // a reset
  lastSimTime = m.sim_time;
  for (const n of ENGINES) {
    const e = m.engines[n];
    $(`r-${n}-pelvis_z`).textContent = fmt(e.pelvis_z, 4);
    $(`r-${n}-forward_x`).textContent = fmt(e.forward_x, 4);
    $(`r-${n}-pitch_deg`).textContent = fmt(e.pitch_deg, 2);
    $(`r-${n}-max_joint_err`).textContent = fmt(e.max_joint_err, 4);
    $(`r-${n}-support`).textContent = e.fall_time === null ? e.support : 'fallen'; // on the floor: no support
    $(`r-${n}-support`).className = e.fall_time === null ? '' : 'bad';
    $(`r-${n}-fall_time`).textContent = e.fall_time === null ? 'standing' : fmt(e.fall_time, 2);
    $(`r-${n}-fall_time`).className = e.fall_time === null ? '' : 'bad';
  }
  const d = m.divergence;
  $('d-pelvis_dz').textContent = fmt(d.pelvis_dz * 1000, 2);
  $('d-joint_rms').textContent = fmt(d.joint_rms * 1000, 2);
  $('d-joint_max').textContent = fmt(d.joint_max * 1000, 1);
  $('d-base_dxy').textContent = fmt(d.base_dxy * 1000, 1);
  $('m-sim_time').textContent = fmt(m.sim_time, 2);
  $('m-rtf').textContent = fmt(m.rtf, 2);
  const stepping = !m.sim || m.sim.state === 'running'; // paused or stopped by an error: no rtf to judge
  $('m-rtf').className = !stepping || m.paused ? '' : m.rtf < 0.95 ? 'warn' : 'ok';
  addSample(m);
  showStepSummary(m.steps);
  if (m.mode !== currentMode) setMode(m.mode);
  $('pause').textContent = m.paused ? 'Resume' : 'Pause';
  showSimAll(m.sim, m.sim_time);
}

// the simulation's own state (one lockstep for both engines) over every view
function showSimAll(sim, t) {
  for (const v of Object.keys(views)) showSim($(`sim-${v}`), sim, { t, fix: 'press Reset both' });
}

function setMode(mode) {
  const changed = mode !== currentMode;
  currentMode = mode;
  $('steps-card').dataset.walking = mode === 'walk' ? 'yes' : 'no';
  $('steps-state').textContent = mode === 'walk' ? 'walking' : 'not walking';
  if (changed) { pollSteps(); pollWalk(); }
  for (const b of document.querySelectorAll('#modes button')) b.classList.toggle('on', b.dataset.mode === mode);
  for (const el of document.querySelectorAll('.mode-badge')) { el.textContent = mode; el.dataset.mode = mode; }
  $('mode-help').textContent = HELP[mode] || '';
}

function showMsg(view, text) {
  const el = $(`msg-${view}`);
  el.hidden = !text;
  if (text) el.textContent = text;
}

const sockState = {};
function onState(which, state) {
  for (const v of which) {
    sockState[v] = state;
    showMsg(v, state === 'live' ? null : state === 'connecting' ? 'connecting…'
      : 'disconnected from Sim2Sim — showing the last frame; reconnecting by itself');
  }
}

const onFrame = (v, blob, h, done) => { if (views[v]) views[v].push(blob, done); else done(); };
const sock = new ViewSocket({
  path: `/ws?views=${ENGINES.join(',')}`,
  onFrame,
  onMetrics,
  onStatus: (s) => { setMode(s.mode); $('preset').value = s.preset; if (s.sim) showSimAll(s.sim, lastSimTime >= 0 ? lastSimTime : null); },
  onState: (state) => onState(ENGINES, state),
});

// the 3D view: one camera for this viewer moves both engine views together (the server applies it to
// every view of the socket); the overlay view, on its own socket, is sent the same camera
const view3d = new View3d(sock, ENGINES.map((v) => ({ canvas: $(`view-${v}`), view: v })),
  { bar: $(`view-${ENGINES[0]}`).parentElement });
window.labView3d = view3d;
const absolute = (c) => (c.follow ? { type: 'camera', azimuth: c.azimuth, elevation: c.elevation, distance: c.distance, follow: true }
  : { type: 'camera', azimuth: c.azimuth, elevation: c.elevation, distance: c.distance, lookat: c.lookat });
sock.on('camera', (c) => overlaySock?.send(c.shared ? { type: 'camera', reset: true, follow: true } : absolute(c)));
sock.on('overlays', (m) => overlaySock?.send({ type: 'overlays', on: m.on }));

let overlaySock = null;
function setOverlay(on) {
  $('card-overlay').hidden = !on;
  if (on && !overlaySock) {
    overlaySock = new ViewSocket({ path: '/ws?views=overlay', onFrame, onState: (s) => onState(['overlay'], s) });
    overlaySock.onOpen((s) => {
      if (view3d.camera && !view3d.camera.shared) s.send(absolute(view3d.camera));
      if (view3d.on.size) s.send({ type: 'overlays', on: [...view3d.on] });
    });
  } else if (!on && overlaySock) {
    overlaySock.close();
    overlaySock = null;
  }
}
$('overlay').addEventListener('change', (ev) => setOverlay(ev.target.checked));

// fill the curves with what the server already has
api('/api/history?since=-1', undefined, 'GET').then((r) => {
  if (lastSimTime < 0) r.samples.forEach(addSample);
}).catch(() => {});

setInterval(() => {
  for (const c of Object.values(charts)) c.flush();
  for (const [v, fv] of Object.entries(views)) $(`fps-${v}`).textContent = `${fv.fps()} fps`;
}, 100);

for (const b of document.querySelectorAll('#modes button')) {
  b.addEventListener('click', () => act(async () => { const s = await api('/api/mode', { mode: b.dataset.mode }); setMode(s.mode); }));
}
$('pause').addEventListener('click', () => act(() => api('/api/pause', { paused: $('pause').textContent === 'Pause' })));
$('reset').addEventListener('click', () => act(async () => {
  await api('/api/reset');
  Object.values(charts).forEach((c) => c.clear());
}, 'both engines reset'));
$('preset').addEventListener('change', () => act(() => api('/api/render', { preset: $('preset').value }), `quality: ${$('preset').value}`));
$('push-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const body = {};
  for (const [k, v] of new FormData(ev.target).entries()) body[k] = Number(v);
  act(() => api('/api/push', body), `push: ${body.force_n} N for ${body.duration_s} s every ${body.period_s} s`);
});

// ---- the walk: velocity pad and footsteps ----------------------------------------------------------
const ms = (v, d = 0) => (v === null || v === undefined ? '–' : fmt(v * 1000, d));
const pair = (a, b, d = 0) => (a === null || a === undefined ? '–' : `${ms(a, d)} / ${ms(b, d)}`);

function showStepSummary(s) {
  $('s-paired').textContent = s ? String(s.paired) : '–';
  $('s-counts').textContent = s ? ENGINES.map((n) => `${name(n)} ${s.steps[n]}`).join(' · ') : '';
  $('s-dt').textContent = s ? pair(s.mean_dt_s, s.max_dt_s) : '–';
  $('s-dxy').textContent = s ? pair(s.mean_dxy_m, s.max_dxy_m) : '–';
  $('s-cdt').textContent = s ? pair(s.contact_mean_dt_s, s.contact_max_dt_s) : '–';
  $('s-dt').className = s && s.max_dt_s >= BIG_DT_S ? 'warn' : '';
  $('s-dxy').className = s && s.max_dxy_m >= BIG_DXY_M ? 'warn' : '';
}

// the upright cell: [text, class]; a step one engine has not taken (yet) says which and why
function uprightText(s, newest) {
  const fell = ENGINES.filter((n) => !s.upright[n]);
  if (fell.length) return [fell.length === 2 ? 'both fell' : `${name(fell[0])} fell`, 'bad'];
  if (s.paired) return ['both', ''];
  const missing = name(s.landed[A] ? B : A);
  return newest ? [`${missing} landing…`, 'muted'] : [`${missing} stopped`, 'warn'];
}

function cell(text, cls = '') {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function showSteps(r) {
  const body = $('steps-rows');
  stepChart.clear();
  for (const s of r.steps) stepChart.add(s.step, [s.dt_s === null ? null : s.dt_s * 1000, s.dxy_m === null ? null : s.dxy_m * 1000,
    s.contact_dt_s === null ? null : s.contact_dt_s * 1000]);
  stepChart.flush();
  if (!r.steps.length) {
    const msg = r.walking ? 'Walking: the first touchdown is on its way…'
      : 'Select <b>walk</b>: each touchdown of the two engines is compared here, step by step.';
    body.innerHTML = `<tr class="steps-empty"><td colspan="8">${msg}</td></tr>`;
    return;
  }
  const rows = [];
  [...r.steps].reverse().forEach((s, i) => {
    const tr = document.createElement('tr');
    if (i === 0) tr.className = 'latest';
    const t = s.t_s[A] ?? s.t_s[B];
    const [up, upCls] = uprightText(s, i === 0);
    const dtCls = s.dt_s !== null && Math.abs(s.dt_s) >= BIG_DT_S ? 'num warn' : 'num';
    const dxyCls = s.dxy_m !== null && s.dxy_m >= BIG_DXY_M ? 'num warn' : 'num';
    tr.append(cell(String(s.step)), cell(s.side), cell(fmt(t, 2), 'num'), cell(ms(s.dt_s), dtCls),
      cell(ms(s.dx_m, 1), 'num'), cell(ms(s.dy_m, 1), 'num'), cell(ms(s.dxy_m, 1), dxyCls),
      cell(up, upCls));
    rows.push(tr);
  });
  body.replaceChildren(...rows);
}

let stepsBusy = false;
async function pollSteps() {
  if (stepsBusy) return;
  stepsBusy = true;
  try {
    const r = await api(`/api/steps?last=${STEP_ROWS}`, undefined, 'GET');
    showSteps(r);
    showStepSummary(r.summary);
  } catch (e) { /* the socket's state already says when the service is away */ } finally { stepsBusy = false; }
}

function showWalk(w) {
  const c = w && w.command;
  $('walk-cmd').textContent = c ? `vx ${fmt(c.vx, 2)} m/s · vy ${fmt(c.vy, 2)} m/s · yaw ${fmt(c.yaw_rate, 2)} rad/s`
    : 'not walking — a command selects walk';
  for (const b of document.querySelectorAll('#walk-pad button')) {
    const want = WALK[b.dataset.walk];
    b.classList.toggle('on', !!c && want.vx === c.vx && want.vy === c.vy && want.yaw_rate === c.yaw_rate);
  }
}

async function pollWalk() {
  try {
    const w = await api('/api/walk', undefined, 'GET');
    showWalk(w.walking ? w : null);
  } catch (e) { /* as above */ }
}

for (const b of document.querySelectorAll('#walk-pad button')) {
  b.addEventListener('click', () => act(async () => {
    const r = await api('/api/walk', WALK[b.dataset.walk]);
    setMode(r.mode);
    showWalk(r);
  }));
}
setInterval(() => { if (currentMode === 'walk') pollSteps(); }, 500);
setInterval(() => { if (currentMode === 'walk') pollWalk(); }, 2000);
pollSteps();
pollWalk();

// the keys (static/js/keys.js); the list's button sits by the first engine's view
installShortcuts([
  { keys: [' '], label: 'pause / resume both engines', run: () => $('pause').click() },
  { keys: ['r', 'Backspace'], label: 'reset both engines', run: () => $('reset').click() },
  ...modeKeys(document.querySelectorAll('#modes button')),
  ...viewKeys(),
], { hint: $(`fps-${A}`).parentElement });

window.s2s = { sock, views, charts, stepChart, setOverlay, pollSteps };
