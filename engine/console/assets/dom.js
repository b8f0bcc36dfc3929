// DOM and formatting helpers. Every text from the engine goes into the page through
// textContent or an attribute, never as HTML: a stored message cannot add markup or script.

// h makes an element: h('a', {href: '/x', class: 'c'}, 'text', child, ...).
// Attributes starting with "on" take a function; "dataset" and "style" an object.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style') Object.assign(el.style, v); // CSSOM: allowed by the page's CSP, a style attribute is not
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties an element and fills it again.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// link to a console view: path under /console/ and its query parameters.
export function href(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const s = q.toString();
  return '/console/' + path + (s ? '?' + s : '');
}

export function link(path, params, ...children) {
  return h('a', {href: href(path, params)}, ...children);
}

// table makes a scrollable table: heads are the column titles, rows arrays of cells.
export function table(id, heads, rows, empty) {
  const body = h('tbody', {}, rows.map((r) => h('tr', r.attrs || {}, (r.cells || r).map((c) => h('td', {}, c)))));
  if (rows.length === 0 && empty) body.append(h('tr', {}, h('td', {colspan: heads.length, class: 'empty'}, empty)));
  return h('div', {class: 'scroll'}, h('table', {id}, h('thead', {}, h('tr', {}, heads.map((t) => h('th', {}, t)))), body));
}

export function card(title, ...children) {
  return h('section', {class: 'card'}, h('h2', {}, title), ...children);
}

// kv is a definition list of [name, value] pairs.
export function kv(pairs) {
  return h('dl', {class: 'kv'}, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export function errorBox(err) {
  return h('p', {class: 'error', role: 'alert'}, String(err && err.message ? err.message : err));
}

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
export function bytes(n) {
  if (n === undefined || n === null) return '–';
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 2 : 1)) + ' ' + units[i];
}

export function num(n) {
  if (n === undefined || n === null) return '–';
  return Number(n).toLocaleString('en-US', {maximumFractionDigits: 2});
}

export function rate(n, unit) {
  if (n >= 1e6) return (n / 1e6).toFixed(2) + ' M' + unit;
  if (n >= 1e4) return (n / 1e3).toFixed(1) + ' k' + unit;
  return num(n) + ' ' + unit;
}

// time formats ms as local date and time; 0 is "–".
export function time(ms) {
  if (!ms) return '–';
  const d = new Date(ms);
  const p = (x, n = 2) => String(x).padStart(n, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

export function duration(ms) {
  if (ms === undefined || ms === null) return '–';
  if (ms < 1000) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 120) return s.toFixed(1) + ' s';
  if (s < 7200) return (s / 60).toFixed(1) + ' min';
  if (s < 172800) return (s / 3600).toFixed(1) + ' h';
  return (s / 86400).toFixed(1) + ' d';
}

// localInput is ms as a datetime-local input's value (local time), '' for none.
export function localInput(ms) {
  if (!ms) return '';
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 23); // with milliseconds: a range taken from a link keeps its ends
}

// fromParam reads a begin/end URL parameter (RFC 3339 or ms) as ms, 0 for none.
export function fromParam(s) {
  if (!s) return 0;
  if (/^\d+$/.test(s)) return Number(s);
  const t = Date.parse(s);
  return Number.isNaN(t) ? 0 : t;
}

// copyButton copies text, or selects the element showing it where the clipboard is off limits.
export function copyButton(text, target) {
  const b = h('button', {type: 'button', class: 'small'}, 'Copy');
  b.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = 'Copied';
    } catch {
      const r = document.createRange();
      r.selectNodeContents(target);
      const s = window.getSelection();
      s.removeAllRanges();
      s.addRange(r);
      b.textContent = 'Selected: copy it';
    }
  });
  return b;
}
