// The mass/inertia parity card (Sim2Sim, GET /api/parity) and the PyBullet notes card (Lab,
// GET /api/pybullet_notes). Field names follow lab/web/parity_api.py.
import { $, api, fmt } from './util.js';

const pct = (v) => (v === null || v === undefined ? '–' : `${fmt(v * 100, 1)} %`);
const kg = (v) => (v === null || v === undefined ? '–' : Number(v).toPrecision(4));

function cell(text, cls = '') {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function fillList(ul, notes) {
  ul.replaceChildren(...notes.map((n) => { const li = document.createElement('li'); li.textContent = n; return li; }));
}

function totalLine(t) {
  if (!t) return '';
  return `total mass: MuJoCo ${kg(t.mujoco)} kg · PyBullet raw ${kg(t.pybullet_raw)} kg · PyBullet now ${kg(t.pybullet)} kg`;
}

export async function showParity() {
  const card = $('parity-card');
  const r = await api(card.dataset.source, undefined, 'GET');
  const summary = $('parity-summary');
  if (!r.applicable) { summary.textContent = 'no PyBullet engine in this run'; return; }
  const rows = r.rows.filter((row) => row.disagrees || row.merged);
  const after = Object.fromEntries((r.after || []).map((row) => [row.link, row]));
  const before = r.summary.before;
  if (!rows.length) {
    summary.className = 'parity-agree';
    summary.textContent = `engines agree on every link (${before.links} links, max diff ${pct(before.max_diff)})`;
  } else {
    const left = r.summary.after.disagree.length;
    summary.className = left ? 'parity-disagree' : '';
    summary.textContent = `${before.disagree.length} of ${before.links} links disagree as PyBullet loads them; `
      + (left ? `${left} still disagree` : `corrected to MuJoCo's values (now max diff ${pct(r.summary.after.max_diff)})`);
  }
  const body = $('parity-table').querySelector('tbody');
  body.replaceChildren(...rows.map((row) => {
    const tr = document.createElement('tr');
    tr.className = row.disagrees ? 'disagree' : '';
    tr.dataset.link = row.link;
    const now = after[row.link];
    const fixed = r.corrected.includes(row.link);
    tr.append(
      cell(row.link),
      cell(row.merged ? 'merged' : kg(row.mujoco_mass)),
      cell(kg(row.pybullet_mass)),
      cell(pct(row.rel_diff), 'diff'),
      cell(pct(row.inertia_rel_diff), 'diff'),
      cell(fmt(row.com_diff * 1000, 1)),
      cell(fixed ? `corrected: ${kg(now?.pybullet_mass)} kg` : row.merged ? 'not compared' : 'as loaded', fixed ? 'fixed' : ''),
    );
    return tr;
  }));
  $('parity-table').hidden = !rows.length;
  $('parity-total').textContent = totalLine(r.total);
  fillList($('parity-notes'), r.notes);
}

export async function showPybulletNotes() {
  const card = $('pybullet-notes');
  const r = await api(card.dataset.source, undefined, 'GET');
  card.hidden = !r.applicable || !r.notes || !r.notes.length;
  if (card.hidden) return;
  card.classList.toggle('error', !!r.error);
  fillList($('pybullet-notes-list'), r.notes);
  $('pybullet-notes-total').textContent = totalLine(r.total);
}

if ($('parity-card')) showParity().catch((e) => { $('parity-summary').textContent = `parity unavailable: ${e.message}`; });
if ($('pybullet-notes')) showPybulletNotes().catch(() => {});
