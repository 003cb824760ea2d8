// Keyboard shortcuts of a page with a live view, and the list of them that `?` (or the "? shortcuts"
// button by the view) shows and `?`/Esc hides (styled in static/css/keys.css).
//   installShortcuts(actions, {hint}) with actions = [{keys: ['r', 'Backspace'], label: 'reset', run}]
// An action without `run` is only listed: keys another module handles (the walk panel's arrows).
// No shortcut fires while typing in an input, textarea, select or contenteditable, nor with Ctrl, Meta
// or Alt held (the browser's own shortcuts keep working), nor again while a key is held down.
import { toast } from './util.js';

const NAMES = { ' ': 'Space', Escape: 'Esc', ArrowUp: '↑', ArrowDown: '↓', ArrowLeft: '←', ArrowRight: '→' };

// a key as the list shows it: 'Shift+ArrowLeft' -> ['Shift', '←'], 'r' -> ['R']
const shown = (key) => (key.length > 1 ? key.split('+') : [key]).map((k) => NAMES[k] || (k.length === 1 ? k.toUpperCase() : k));

// the key an event is bound under: one character in lower case ('R' with Shift is 'r'), names as they are
const keyOf = (ev) => (ev.key.length === 1 ? ev.key.toLowerCase() : ev.key);

/** True while the event's target is a field that takes typing (its keys are that field's). */
export function typing(ev) {
  const t = ev.target;
  return Boolean(t && t.closest && (t.closest('input, textarea, select') || t.isContentEditable));
}

/** Keys 1-5: the first five of the page's mode buttons (clicked, as a person would). */
export function modeKeys(buttons) {
  return [...buttons].slice(0, 5).map((b, i) => ({ keys: [String(i + 1)], label: `mode: ${b.dataset.mode}`, run: () => b.click() }));
}

/** c, f, o: the 3D view's toggles (window.labView3d, static/js/view3d.js); a toast where the page has none. */
export function viewKeys() {
  const call = (what, method, ...args) => () => {
    const v = window.labView3d;
    if (v && typeof v[method] === 'function') v[method](...args);
    else toast(`${what}: not available`, 'info', 'this view has no 3D controls');
  };
  return [
    { keys: ['c'], label: 'contact overlay on / off', run: call('contact overlay', 'toggleOverlay', 'contacts') },
    { keys: ['f'], label: 'camera follows the robot on / off', run: call('camera follow', 'toggleFollow') },
    { keys: ['o'], label: 'all overlays on / off', run: call('overlays', 'toggleOverlays') },
  ];
}

/** Bind `actions` on the page, add `?` for the list; `hint`: an element the "? shortcuts" button goes in. */
export function installShortcuts(actions, { hint = null } = {}) {
  const help = helpBox();
  const toggle = () => { help.hidden = !help.hidden; };
  const all = [...actions, { keys: ['?'], label: 'show / hide this list (Esc hides it too)', run: toggle }];
  help.querySelector('tbody').replaceChildren(...all.map(row));

  const bound = new Map();
  for (const a of all) if (a.run) for (const k of a.keys) bound.set(k, a);

  // on window, capturing: before the page's other key listeners, so that Esc closing the list does not
  // also reach them (the walk panel's Esc stops the walk)
  window.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev)) return;
    if (ev.key === 'Escape' && !help.hidden) {
      ev.preventDefault();
      ev.stopPropagation();
      help.hidden = true;
      return;
    }
    const a = bound.get(keyOf(ev));
    if (!a) return;
    ev.preventDefault(); // no scrolling, and Space does not also press the focused button
    if (!ev.repeat) a.run();
  }, true);
  window.addEventListener('keyup', (ev) => { // a focused button presses itself on Space's keyup
    if (!ev.ctrlKey && !ev.metaKey && !ev.altKey && !typing(ev) && bound.has(keyOf(ev))) ev.preventDefault();
  }, true);

  help.addEventListener('click', (ev) => { if (ev.target === help || ev.target.closest('.keys-close')) help.hidden = true; });
  if (hint) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'keys-hint';
    b.id = 'keys-hint';
    b.title = 'keyboard shortcuts (?)';
    b.innerHTML = '<kbd>?</kbd> shortcuts';
    b.addEventListener('click', toggle);
    hint.appendChild(b);
  }
  return { help, toggle };
}

function helpBox() {
  const box = document.createElement('div');
  box.className = 'keys-help';
  box.id = 'keys-help';
  box.hidden = true;
  box.setAttribute('role', 'dialog');
  box.setAttribute('aria-labelledby', 'keys-help-title');
  box.innerHTML = `<div class="keys-card">
    <div class="keys-head"><h2 id="keys-help-title">Keyboard shortcuts</h2><button type="button" class="keys-close" aria-label="close">×</button></div>
    <table class="keys-list"><tbody></tbody></table>
    <p class="keys-note">Not while typing in a field; Ctrl, Alt and ⌘ combinations stay the browser's.</p>
  </div>`;
  document.body.appendChild(box);
  return box;
}

function row(a) {
  const tr = document.createElement('tr');
  const keys = document.createElement('td');
  a.keys.forEach((k, i) => {
    if (i) keys.append(' ');
    shown(k).forEach((part, j) => {
      if (j) keys.append('+');
      const kbd = document.createElement('kbd');
      kbd.textContent = part;
      keys.append(kbd);
    });
  });
  const label = document.createElement('td');
  label.textContent = a.label;
  if (!a.run) tr.className = 'keys-elsewhere';
  tr.append(keys, label);
  return tr;
}
