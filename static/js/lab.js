// The Lab page: live view, modes, push, pause/reset, preset, readouts and strip charts.
import { StreamSocket, FrameView } from './socket.js';
import { StripChart } from './plots.js';
import { $, act, api, fmt, showSim } from './util.js';
import './signals.js'; // any signal: picker and live chart (templates/_signals.html)
import './record.js'; // the record button and the recordings (templates/_record.html)
import { installShortcuts, modeKeys, viewKeys } from './keys.js';
import { View3d } from './view3d.js';

const view = new FrameView($('view'));
const HELP = {
  stand: 'hold the nominal pose',
  squat: 'squat then rise every 4 s: tracking a moving pelvis height',
  push: 'stand, pushed on the torso at a fixed period',
  zero: 'control off (zero torque): the robot falls',
  walk: 'feedback walk: DCM tracking, ZMP feedback and step adjustment; steer it in the Walk card (arrow keys)',
  walk_pd: 'baseline walk: the LIPM plan tracked by joint PD alone; it falls sideways at ~2.6 s',
  pose: 'hold joint targets set per joint (sliders in the Robot panel)',
};

const charts = {
  z: new StripChart($('plot-z'), { title: 'pelvis height', unit: 'm', series: [
    { name: 'actual', color: '#5fb3ff' }, { name: 'target', color: '#f39a2e', dash: 'dot' }] }),
  pitch: new StripChart($('plot-pitch'), { title: 'torso pitch', unit: 'deg', series: [{ name: 'pitch', color: '#7ee081' }] }),
  err: new StripChart($('plot-err'), { title: 'max joint error', unit: 'rad', series: [{ name: 'max |q* − q|', color: '#ff6b81' }] }),
  x: new StripChart($('plot-x'), { title: 'forward: pelvis, CoM and (walk) plan', unit: 'm', series: [
    { name: 'pelvis x', color: '#c792ea' }, { name: 'CoM x', color: '#5fb3ff' },
    { name: 'CoM plan x', color: '#f39a2e', dash: 'dot' }, { name: 'ZMP plan x', color: '#ffd166', dash: 'dash' }] }),
};

let lastSimTime = -1;
let fallTime = null; // sim time [s] the robot fell, or null
let currentMode = document.querySelector('#modes button.on')?.dataset.mode;
showHelp(currentMode);

function onMetrics(m) {
  if (m.sim_time < lastSimTime - 1e-9) Object.values(charts).forEach((c) => c.clear()); // reset
  lastSimTime = m.sim_time;
  $('m-sim_time').textContent = fmt(m.sim_time, 2);
  $('m-pelvis_z').textContent = fmt(m.pelvis_z, 4);
  $('m-forward_x').textContent = fmt(m.forward_x, 4);
  $('m-pitch_deg').textContent = fmt(m.pitch_deg, 2);
  $('m-max_joint_err').textContent = fmt(m.max_joint_err, 4);
  $('m-rtf').textContent = fmt(m.rtf, 2);
  const stepping = !m.sim || m.sim.state === 'running'; // paused or stopped by an error: no rtf to judge
  $('m-rtf').className = !stepping || m.paused ? '' : m.rtf < 0.95 ? 'warn' : 'ok';
  showFall(m.fall_time);
  $('m-support').textContent = fallTime !== null ? 'fallen' : m.support; // on the floor: no support, whatever touches
  $('m-support').className = fallTime !== null ? 'bad' : '';
  $('m-support').title = fallTime !== null ? `contact: ${m.support}` : '';
  $('m-margin').textContent = m.margin === null ? '–' : fmt(m.margin * 1000, 1);
  $('m-margin').className = m.margin !== null && m.margin < 0 ? 'bad' : '';
  $('m-cop').textContent = m.cop ? `${fmt(m.cop[0], 3)}, ${fmt(m.cop[1], 3)}` : '–';
  const ex = m.extras || {};
  charts.z.add(m.sim_time, [m.pelvis_z, m.pelvis_z_target]);
  charts.pitch.add(m.sim_time, [m.pitch_deg]);
  charts.err.add(m.sim_time, [m.max_joint_err]);
  charts.x.add(m.sim_time, [m.forward_x, m.com ? m.com[0] : null, ex.com_plan_x, ex.zmp_plan_x]);
  if (m.mode !== currentMode) setMode(m.mode);
  $('pause').textContent = m.paused ? 'Resume' : 'Pause';
  showSim($('sim-banner'), m.sim, { t: m.sim_time });
}

// the robot's fall (the one fall rule of lab/robots/model.py): the readout and a badge over the view
function showFall(t) {
  fallTime = t === undefined ? null : t;
  const words = fallTime === null ? 'standing' : `fell at ${fmt(fallTime, 1)} s`;
  $('m-fall').textContent = words;
  $('m-fall').className = fallTime === null ? 'ok' : 'bad';
  $('fall-badge').hidden = fallTime === null;
  $('fall-badge').textContent = fallTime === null ? '' : words;
}

function onStatus(s) {
  setMode(s.mode);
  if ('fall_time' in s) showFall(s.fall_time);
  if (s.sim) showSim($('sim-banner'), s.sim, { t: lastSimTime >= 0 ? lastSimTime : null });
  $('preset').value = s.preset;
  $('preset-label').textContent = s.preset;
}

function setMode(mode) {
  currentMode = mode;
  for (const b of document.querySelectorAll('#modes button')) b.classList.toggle('on', b.dataset.mode === mode);
  $('mode-badge').textContent = mode;
  $('mode-badge').dataset.mode = mode;
  showHelp(mode);
}

function showHelp(mode) { $('mode-help').textContent = HELP[mode] || ''; }

const sock = new StreamSocket({
  onFrame: (v, blob, h, done) => { view.push(blob, done); },
  onMetrics,
  onStatus,
  onState: (state) => {
    const msg = $('view-msg');
    if (state === 'live') { msg.hidden = true; return; }
    msg.hidden = false;
    msg.textContent = state === 'connecting' ? 'connecting to the simulation…'
      : 'disconnected from the Lab server — showing the last frame; reconnecting by itself';
  },
});

// Curves redraw at 4 Hz, one chart per tick, so that a redraw never holds up the frames (Plotly's
// SVG redraw is the dearest thing on this page when the browser renders in software).
let chartTurn = 0;
const chartList = Object.values(charts);
setInterval(() => {
  if (document.hidden) return;
  chartList[chartTurn].flush();
  chartTurn = (chartTurn + 1) % chartList.length;
}, 1000 / (4 * chartList.length));

setInterval(() => {
  const fps = view.fps();
  $('fps').textContent = `${fps} fps`;
  $('m-fps').textContent = String(fps);
  const age = sock.frameAgeP95();
  $('age').textContent = age === null ? 'age – ms' : `age p95 ${age.toFixed(0)} ms`;
}, 100);

for (const b of document.querySelectorAll('#modes button')) {
  b.addEventListener('click', () => act(async () => { const s = await api('/api/mode', { mode: b.dataset.mode }); setMode(s.mode); }));
}
$('pause').addEventListener('click', () => act(() => api('/api/pause', { paused: $('pause').textContent === 'Pause' })));
$('reset').addEventListener('click', () => act(async () => { await api('/api/reset'); Object.values(charts).forEach((c) => c.clear()); }, 'reset'));
$('preset').addEventListener('change', () => act(() => api('/api/render', { preset: $('preset').value }), `quality: ${$('preset').value}`));
$('push-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const body = {};
  for (const [k, v] of f.entries()) body[k] = Number(v);
  act(() => api('/api/push', body), `push: ${body.force_n} N for ${body.duration_s} s every ${body.period_s} s`);
});

// the keys (static/js/keys.js); the walk panel's own keys (walk_panel.js) are listed with them
const WALK_KEYS = [
  { keys: ['ArrowUp', 'ArrowDown'], label: 'walk: forward / back, vx ±0.05 m/s (Walk card)' },
  { keys: ['ArrowLeft', 'ArrowRight'], label: 'walk: turn, yaw rate ±0.25 rad/s' },
  { keys: ['Shift+ArrowLeft', 'Shift+ArrowRight'], label: 'walk: sideways, vy ±0.05 m/s' },
  { keys: ['Escape'], label: 'walk: stop (all zero)' },
];
installShortcuts([
  { keys: [' '], label: 'pause / resume', run: () => $('pause').click() },
  { keys: ['r', 'Backspace'], label: 'reset', run: () => $('reset').click() },
  ...modeKeys(document.querySelectorAll('#modes button')),
  ...viewKeys(),
  ...($('walk-panel') ? WALK_KEYS : []),
], { hint: document.querySelector('.viewer-stats') });

// the 3D view: own camera, overlays, double-click centre, Ctrl+drag pull (the keys c, f, o reach it here)
window.labView3d = new View3d(sock, [{ canvas: $('view'), view: 'lab' }], { perturb: true, bar: $('view').parentElement });
window.labSocket = sock;
window.labView = view;
