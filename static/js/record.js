// The record panel (templates/_record.html) of the Lab and Sim2Sim pages: one button starts and stops a
// recording of the run (POST /api/recordings, POST /api/recordings/<id>/stop), the time and size recorded
// show beside it while it runs, why a recording ended shows under it (red when it failed), and the list of
// recordings has replay (the Lab's /replay?id=ID), download (.mcap) and delete links. Everything comes from
// GET /api/recordings, polled twice a second while recording and every 3 s otherwise.
import { $, act, api } from './util.js';

const panel = $('record-panel');
const FAST_MS = 500;
const SLOW_MS = 3000;
const SHOWN = 8; // rows of the list
// the Lab's replay page, as the navigation links to it (from Sim2Sim: the Lab's port; same recordings folder)
const REPLAY = document.querySelector('header a[data-nav="replay"]')?.href || '/replay';

let active = null; // the recording being recorded (its info), or null
let watching = null; // id of the recording this page started or saw running, until its end is shown
let busy = false;
let timer = null;

function size(bytes) {
  if (bytes < 1e3) return `${bytes} B`;
  if (bytes < 1e6) return `${(bytes / 1e3).toFixed(1)} kB`;
  return `${(bytes / 1e6).toFixed(bytes < 1e8 ? 2 : 1)} MB`;
}

function clock(s) {
  const m = Math.floor(s / 60);
  return `${m}:${(s - 60 * m).toFixed(1).padStart(4, '0')}`;
}

function message(text, kind) {
  const el = $('record-msg');
  el.hidden = !text;
  el.textContent = text || '';
  el.dataset.kind = kind || '';
}

function cell(tr, text, cls) {
  const td = tr.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function rows(list) {
  const body = $('record-rows');
  body.replaceChildren();
  $('record-count').textContent = list.length ? `(${list.length})` : '(none)';
  if (!list.length) {
    cell(body.insertRow(), 'none yet', 'muted');
    return;
  }
  for (const r of list.slice(0, SHOWN)) {
    const tr = body.insertRow();
    tr.dataset.id = r.id;
    cell(tr, r.label ? `${r.label} · ${r.id}` : r.id, 'rec-name').title = r.reason || '';
    cell(tr, clock(r.duration_s));
    cell(tr, size(r.bytes));
    cell(tr, r.state, `rec-state-${r.state}`).title = r.reason || '';
    const links = tr.insertCell();
    if (r.state !== 'recording') {
      const a = document.createElement('a');
      a.href = `/api/recordings/${r.id}/file`;
      a.textContent = 'download';
      a.setAttribute('download', `${r.id}.mcap`);
      const del = document.createElement('a');
      del.href = '#';
      del.textContent = 'delete';
      del.className = 'rec-delete';
      del.addEventListener('click', async (ev) => {
        ev.preventDefault();
        if (await act(() => api(`/api/recordings/${r.id}`, undefined, 'DELETE'), `deleted ${r.id}`)) refresh();
      });
      const replay = document.createElement('a');
      replay.href = `${REPLAY}?id=${encodeURIComponent(r.id)}`;
      replay.textContent = 'replay';
      replay.className = 'rec-replay';
      links.append(replay, a, del);
    }
  }
}

function show(list) {
  active = list.find((r) => r.state === 'recording') || null;
  panel.dataset.state = active ? 'recording' : 'idle';
  $('record-btn-label').textContent = active ? 'Stop' : 'Record';
  $('record-time').textContent = clock(active ? active.duration_s : 0);
  $('record-size').textContent = size(active ? active.bytes : 0);
  if (active) {
    watching = active.id;
    message(`recording ${active.id}${active.label ? ` (${active.label})` : ''} — up to ${active.max_s} s / ${active.max_mb} MB`, 'recording');
  } else if (watching) {
    const r = list.find((x) => x.id === watching);
    if (r) message(`${r.id} ${r.state === 'failed' ? 'FAILED' : 'done'}: ${r.reason || 'stopped'} (${clock(r.duration_s)}, ${size(r.bytes)})`, r.state);
    watching = null;
  }
  rows(list);
}

async function refresh() {
  clearTimeout(timer);
  try {
    const r = await fetch('/api/recordings', { headers: { Accept: 'application/json' } });
    if (r.ok) show((await r.json()).recordings);
  } catch (e) { /* the service is away: try again later */ }
  timer = setTimeout(refresh, active ? FAST_MS : SLOW_MS);
}

async function toggle() {
  if (busy) return;
  busy = true;
  $('record-btn').disabled = true;
  try {
    if (active) {
      await act(() => api(`/api/recordings/${active.id}/stop`));
    } else {
      const label = $('record-label').value.trim();
      const r = await act(() => api('/api/recordings', label ? { label } : {}));
      if (r) watching = r.id;
    }
  } finally {
    busy = false;
    $('record-btn').disabled = false;
    refresh();
  }
}

if (panel) {
  $('record-btn').addEventListener('click', toggle);
  refresh();
}
