// The Sim2Sim page: both engines' live views (plus an optional overlay), modes, per-engine readouts and curves.
// Message names follow lab/web/messages.py; metrics carry engines.<name>.* and divergence.*.
import { StreamSocket, FrameView } from './socket.js';
import { StripChart } from './plots.js';
import { $, act, api, fmt, showSim } from './util.js';

const ENGINES = $('views').dataset.engines.split(',');
const [A, B] = ENGINES;
const COLORS = { mujoco: '#5fb3ff', pybullet: '#ff7a7a' };
const NAMES = { mujoco: 'MuJoCo', pybullet: 'PyBullet' };
const HELP = {
  stand: 'hold the nominal pose',
  squat: 'squat then rise every 4 s: tracking a moving pelvis height',
  push: 'stand, pushed on the torso at a fixed period (the same force in both engines)',
  zero: 'control off (zero torque): both robots fall',
};

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
  if (m.mode !== currentMode) setMode(m.mode);
  $('pause').textContent = m.paused ? 'Resume' : 'Pause';
  showSimAll(m.sim, m.sim_time);
}

// the simulation's own state (one lockstep for both engines) over every view
function showSimAll(sim, t) {
  for (const v of Object.keys(views)) showSim($(`sim-${v}`), sim, { t, fix: 'press Reset both' });
}

function setMode(mode) {
  currentMode = mode;
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

let overlaySock = null;
function setOverlay(on) {
  $('card-overlay').hidden = !on;
  if (on && !overlaySock) {
    overlaySock = new ViewSocket({ path: '/ws?views=overlay', onFrame, onState: (s) => onState(['overlay'], s) });
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

window.s2s = { sock, views, charts, setOverlay };
