// A small line chart on a canvas: the last minutes of one series, drawn again on every update
// and on every resize. The canvas carries what it shows in data- attributes (points, last value,
// draws), for people's tools and for the console's browser tests.
import {h} from './dom.js';

export class Chart {
  // opts: {title, unit, color, format(v), windowMs}
  constructor(opts) {
    this.opts = Object.assign({color: '#2f6fde', windowMs: 10 * 60 * 1000, format: (v) => v.toFixed(1)}, opts);
    this.points = []; // [t ms, value]
    this.canvas = h('canvas', {class: 'chart', role: 'img', 'aria-label': this.opts.title});
    this.value = h('span', {class: 'chart-value'}, '–');
    this.el = h('figure', {class: 'chart-box'},
      h('figcaption', {}, h('span', {class: 'chart-title'}, this.opts.title), this.value), this.canvas);
    this.canvas.dataset.points = '0';
    this.canvas.dataset.draws = '0';
    this.resize = () => this.draw();
    window.addEventListener('resize', this.resize);
  }

  // add appends points ([t, v], oldest first) and drops those out of the window.
  add(points) {
    this.points.push(...points);
    const from = Date.now() - this.opts.windowMs;
    while (this.points.length && this.points[0][0] < from) this.points.shift();
    this.draw();
  }

  destroy() {
    window.removeEventListener('resize', this.resize);
  }

  draw() {
    const c = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const w = Math.max(c.clientWidth, 100);
    const hgt = Math.max(c.clientHeight, 60);
    if (c.width !== Math.round(w * ratio) || c.height !== Math.round(hgt * ratio)) {
      c.width = Math.round(w * ratio);
      c.height = Math.round(hgt * ratio);
    }
    const g = c.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, hgt);
    const now = Date.now();
    // The span shown: the history there is, from one minute up to the window.
    const first = this.points.length ? this.points[0][0] : now;
    const span = Math.min(this.opts.windowMs, Math.max(60000, now - first));
    const t0 = now - span;
    const pad = {l: 4, r: 4, t: 14, b: 14};
    const pw = w - pad.l - pad.r;
    const ph = hgt - pad.t - pad.b;
    let top = 0;
    for (const [, v] of this.points) top = Math.max(top, v);
    top = niceCeil(top);
    // Grid: the top value and the time span.
    g.strokeStyle = '#d9dee7';
    g.lineWidth = 1;
    g.beginPath();
    g.moveTo(pad.l, pad.t + 0.5);
    g.lineTo(w - pad.r, pad.t + 0.5);
    g.moveTo(pad.l, pad.t + ph + 0.5);
    g.lineTo(w - pad.r, pad.t + ph + 0.5);
    g.stroke();
    g.fillStyle = '#5b6475';
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'bottom';
    g.fillText(top > 0 ? this.opts.format(top) : '0', pad.l, pad.t - 2);
    g.textBaseline = 'top';
    g.fillText('-' + Math.round(span / 60000) + ' min', pad.l, pad.t + ph + 2);
    const nowLabel = 'now';
    g.fillText(nowLabel, w - pad.r - g.measureText(nowLabel).width, pad.t + ph + 2);
    const x = (t) => pad.l + ((t - t0) / span) * pw;
    const y = (v) => pad.t + ph - (top > 0 ? (v / top) * ph : 0);
    if (this.points.length > 0) {
      g.beginPath();
      g.moveTo(x(this.points[0][0]), y(0));
      for (const [t, v] of this.points) g.lineTo(x(t), y(v));
      g.lineTo(x(this.points[this.points.length - 1][0]), y(0));
      g.closePath();
      g.fillStyle = this.opts.color + '33';
      g.fill();
      g.beginPath();
      this.points.forEach(([t, v], i) => (i === 0 ? g.moveTo(x(t), y(v)) : g.lineTo(x(t), y(v))));
      g.strokeStyle = this.opts.color;
      g.lineWidth = 1.5;
      g.stroke();
    }
    const last = this.points.length ? this.points[this.points.length - 1][1] : 0;
    this.value.textContent = this.points.length ? this.opts.format(last) : '–';
    c.dataset.points = String(this.points.length);
    c.dataset.last = String(last);
    c.dataset.draws = String(Number(c.dataset.draws) + 1);
  }
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
function niceCeil(v) {
  if (v <= 0) return 0;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}
