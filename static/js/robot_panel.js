// The robot panel of the Lab page: every actuated joint (GET /api/robot, polled at 4 Hz while the page
// is visible), gains and nominal angles edited and applied live (POST /api/robot), the sidecar export,
// and in pose mode one slider per joint (POST /api/pose, throttled).
import { $, api, fmt } from './util.js';

/** An editable value as the input shows it: angles to 0.1 mrad, gains to 6 significant digits, dust as 0. */
function shown(v, field) {
  if (v === null || v === undefined || !Number.isFinite(Number(v))) return '';
  const x = Number(v);
  if (Math.abs(x) < 1e-9) return '0';
  return String(field === 'nominal' ? +x.toFixed(4) : +x.toPrecision(6));
}

const POLL_MS = 250; // live error and torque at 4 Hz
const POSE_MS = 80; // at most one POST /api/pose per this many ms while a slider moves
const UNLIMITED = Math.PI; // [rad] a slider's range for a joint without limits: ±pi
const EDITS = ['kp', 'kd', 'nominal'];

const panel = $('robot-panel');
const rows = $('robot-rows');
let joints = []; // the last GET /api/robot joints
let signature = ''; // joint names: the table is rebuilt when the robot changes (model picker)
let mode = panel.dataset.mode;
let polling = false;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// fmt without a minus on a value that rounds to zero ('-0.000' reads as a fault)
function num(v, digits) {
  const s = fmt(v, digits);
  return /^-0\.?0*$/.test(s) ? s.slice(1) : s;
}

function rangeText(j) {
  return j.lower === null ? 'unlimited' : `${fmt(j.lower, 2)} … ${fmt(j.upper, 2)}`;
}

function numberInput(j, field, step) {
  const inp = el('input', `edit ${field}`);
  inp.type = 'number';
  inp.step = step;
  inp.dataset.joint = j.name;
  inp.dataset.field = field;
  inp.setAttribute('aria-label', `${field} of ${j.name}`);
  if (field === 'nominal') {
    if (j.lower !== null) { inp.min = j.lower; inp.max = j.upper; }
  } else {
    inp.min = 0;
  }
  inp.value = shown(j[field], field);
  inp.dataset.server = shown(j[field], field);
  inp.addEventListener('input', () => markDirty(inp));
  inp.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') apply(); });
  return inp;
}

function build(list) {
  rows.replaceChildren();
  for (const j of list) {
    const tr = el('tr');
    tr.dataset.joint = j.name;
    const name = el('td', 'jname');
    name.textContent = j.name;
    name.title = j.gain_note ? `${j.name} (${j.actuator}): ${j.gain_note}` : `${j.name}, driven by ${j.actuator}`;
    tr.append(name, el('td', 'num muted', rangeText(j)), el('td', 'num muted', fmt(j.tau_limit, 1)));
    for (const [field, step] of [['kp', '1'], ['kd', '0.1'], ['nominal', '0.01']]) {
      const td = el('td', 'num');
      td.append(numberInput(j, field, step));
      tr.append(td);
    }
    const pose = el('td', 'pose-col');
    const slider = el('input', 'pose-slider');
    slider.type = 'range';
    slider.min = j.lower === null ? -UNLIMITED : j.lower;
    slider.max = j.upper === null ? UNLIMITED : j.upper;
    slider.step = '0.005';
    slider.value = String(j.target ?? j.nominal);
    slider.dataset.joint = j.name;
    slider.setAttribute('aria-label', `pose target of ${j.name}`);
    const val = el('output', 'pose-val', num(j.target, 2));
    slider.addEventListener('input', () => { val.textContent = num(slider.value, 2); poseChanged(j.name, Number(slider.value)); });
    pose.append(slider, val);
    tr.append(pose, el('td', 'num err'), el('td', 'num tau'));
    rows.append(tr);
  }
}

function update(r) {
  const names = [r.file, ...r.joints.map((j) => `${j.name}:${j.lower}:${j.upper}`)].join(',');
  if (names !== signature) { build(r.joints); signature = names; }
  joints = r.joints;
  setMode(r.mode);
  $('robot-summary').textContent = `${r.file} · ${r.kind.toUpperCase()} · ${r.nu} actuated joints · ${fmt(r.total_mass, 2)} kg · `
    + `stands ${fmt(r.standing_height, 3)} m · gains by ${r.gains_source}`;
  const trs = rows.children;
  r.joints.forEach((j, i) => {
    const tr = trs[i];
    const err = tr.querySelector('.err');
    err.textContent = j.error === null ? '–' : num(j.error, 3);
    err.classList.toggle('big', j.error !== null && Math.abs(j.error) > 0.1);
    const tau = tr.querySelector('.tau');
    tau.textContent = j.tau === null ? '–' : num(j.tau, 1);
    tau.classList.toggle('sat', j.saturated);
    const frac = j.tau === null || !j.tau_limit ? 0 : Math.min(1, Math.abs(j.tau) / j.tau_limit);
    tau.style.setProperty('--frac', `${(frac * 100).toFixed(0)}%`);
    tau.title = `${fmt(j.tau, 2)} of ±${fmt(j.tau_limit, 1)} N·m${j.saturated ? ' — saturated' : ''}`;
    for (const field of EDITS) { // a value someone else changed shows, unless it is being edited here
      const inp = tr.querySelector(`input.${field}`);
      const server = shown(j[field], field);
      if (inp.dataset.server !== server && !inp.classList.contains('changed') && document.activeElement !== inp) inp.value = server;
      inp.dataset.server = server;
    }
    const slider = tr.querySelector('.pose-slider');
    if (!dragging.has(j.name) && !(j.name in pending) && !poseBusy && j.target !== null) {
      slider.value = String(j.target);
      tr.querySelector('.pose-val').textContent = num(j.target, 2);
    }
  });
}

function setMode(m) {
  mode = m;
  panel.dataset.mode = m;
}

// ---- edits: Apply sends what changed, Revert puts the server's values back ----
function changedInputs() { return [...rows.querySelectorAll('input.edit.changed')]; }

function markDirty(inp) {
  inp.classList.toggle('changed', inp.value !== inp.dataset.server);
  const n = changedInputs().length;
  $('robot-apply').disabled = n === 0;
  $('robot-revert').disabled = n === 0;
  $('robot-dirty').hidden = n === 0;
  $('robot-dirty').textContent = `${n} change${n === 1 ? '' : 's'} not applied`;
}

function showError(e) {
  const box = $('robot-error');
  box.hidden = !e;
  if (!e) return;
  box.querySelector('b').textContent = e.message;
  box.querySelector('span').textContent = e.hint ? ` — ${e.hint}` : '';
}

async function apply() {
  const edits = changedInputs();
  if (!edits.length) return;
  const body = {};
  const byJoint = Object.fromEntries(joints.map((j) => [j.name, j]));
  for (const inp of edits) {
    const name = inp.dataset.joint;
    const field = inp.dataset.field;
    const v = inp.value.trim() === '' ? NaN : Number(inp.value);
    const value = Number.isFinite(v) ? v : inp.value; // not a number: the server says what is wrong
    if (field === 'nominal') {
      (body.nominal ||= {})[name] = value;
    } else {
      const row = rows.querySelector(`tr[data-joint="${CSS.escape(name)}"]`);
      const other = field === 'kp' ? 'kd' : 'kp';
      const o = row.querySelector(`input.${other}`);
      const ov = o.classList.contains('changed') ? Number(o.value) : byJoint[name][other];
      const pair = field === 'kp' ? [value, ov] : [ov, value];
      (body.gains ||= {})[name] = pair;
    }
  }
  $('robot-apply').disabled = true;
  try {
    const r = await api('/api/robot', body);
    showError(null);
    for (const inp of edits) inp.classList.remove('changed');
    const j = Object.fromEntries(r.joints.map((x) => [x.name, x]));
    for (const inp of edits) { inp.value = shown(j[inp.dataset.joint][inp.dataset.field], inp.dataset.field); inp.dataset.server = inp.value; }
    markDirty(edits[0]);
    update(r);
    flash(`applied ${edits.length} change${edits.length === 1 ? '' : 's'}`);
  } catch (e) {
    showError(e);
    $('robot-apply').disabled = false;
  }
}

function revert() {
  for (const inp of changedInputs()) { inp.value = inp.dataset.server; inp.classList.remove('changed'); }
  showError(null);
  markDirty(rows.querySelector('input.edit') || $('robot-apply'));
}

function flash(text) {
  const d = $('robot-dirty');
  d.hidden = false;
  d.textContent = text;
  d.classList.add('ok');
  setTimeout(() => { d.classList.remove('ok'); if (!changedInputs().length) d.hidden = true; }, 2500);
}

// ---- pose sliders: the latest value of each moved joint, sent at most every POSE_MS ----
let pending = {};
let poseTimer = null;
let poseBusy = false;
const dragging = new Set();
rows.addEventListener('pointerdown', (ev) => { if (ev.target.classList.contains('pose-slider')) dragging.add(ev.target.dataset.joint); });
window.addEventListener('pointerup', () => dragging.clear());

function poseChanged(name, value) {
  pending[name] = value;
  if (!poseTimer) poseTimer = setTimeout(sendPose, POSE_MS);
}

async function sendPose() {
  poseTimer = null;
  if (poseBusy) { poseTimer = setTimeout(sendPose, POSE_MS); return; }
  const q = pending;
  pending = {};
  if (!Object.keys(q).length) return;
  poseBusy = true;
  try {
    await api('/api/pose', { q });
    showError(null);
  } catch (e) {
    showError(e);
  } finally {
    poseBusy = false;
  }
}

// ---- polling ----
async function poll() {
  if (polling || document.hidden) return;
  polling = true;
  try {
    const res = await fetch('/api/robot');
    if (res.ok) update(await res.json());
  } catch (e) {
    // the server is away: the socket's banner says so; the table keeps its last values
  } finally {
    polling = false;
  }
}

$('robot-apply').addEventListener('click', apply);
$('robot-revert').addEventListener('click', revert);
$('robot-to-pose').addEventListener('click', async () => {
  try {
    const s = await api('/api/mode', { mode: 'pose' });
    setMode(s.mode);
    showError(null);
  } catch (e) {
    showError(e);
  }
});
document.addEventListener('visibilitychange', poll);
setInterval(poll, POLL_MS);
poll();
window.robotPanel = { poll, get mode() { return mode; } };
