// stats.js: polls /api/v1/stats while signed in, keeps a short history and
// turns counter totals into rates (the server only reports totals).
import { api, h } from './ui.js';

const INTERVAL_MS = 2000;
const KEEP = 180; // six minutes at 2 s

export class StatsPoller {
  constructor() { this.snaps = []; this.subs = new Set(); this.error = ''; this.stop = null; }

  start() {
    if (this.stop) return;
    let timer = 0, stopped = false;
    const tick = async () => {
      try {
        const s = await api('GET', '/stats');
        this.error = '';
        this.snaps.push(s);
        if (this.snaps.length > KEEP) this.snaps.shift();
      } catch (e) {
        this.error = e.message;
      }
      for (const f of this.subs) { try { f(this); } catch (e) { console.warn(e); } }
      if (!stopped) timer = setTimeout(tick, INTERVAL_MS);
    };
    tick();
    this.stop = () => { stopped = true; clearTimeout(timer); this.stop = null; };
  }

  halt() { if (this.stop) this.stop(); this.snaps = []; }

  // subscribe calls f after every poll (and now, if there is data); returns
  // the unsubscribe function.
  subscribe(f) {
    this.subs.add(f);
    if (this.snaps.length) f(this);
    return () => this.subs.delete(f);
  }

  latest() { return this.snaps[this.snaps.length - 1]; }

  // series: x = unix seconds of each interval's end; for every key that
  // pick(snap) returns, the rate per second over the interval. pick answers
  // {key: counterTotal}.
  rates(pick) {
    const xs = [], cols = {};
    const keys = new Set();
    for (const s of this.snaps) for (const k of Object.keys(pick(s) || {})) keys.add(k);
    const sorted = [...keys].sort();
    for (const k of sorted) cols[k] = [];
    for (let i = 1; i < this.snaps.length; i++) {
      const a = this.snaps[i - 1], b = this.snaps[i];
      const dt = (b.unix_ms - a.unix_ms) / 1000;
      if (dt <= 0) continue;
      xs.push(b.unix_ms / 1000);
      const pa = pick(a) || {}, pb = pick(b) || {};
      for (const k of sorted) {
        const d = (pb[k] ?? 0) - (pa[k] ?? 0);
        cols[k].push(pb[k] === undefined ? null : Math.max(0, d) / dt);
      }
    }
    return { xs, keys: sorted, cols };
  }

  // latency: windowed p50/p95/p99 (seconds) of a histogram per interval,
  // from the difference of its cumulative buckets between polls.
  latency(pick) {
    const xs = [], cols = { p50: [], p95: [], p99: [] };
    for (let i = 1; i < this.snaps.length; i++) {
      const a = pick(this.snaps[i - 1]), b = pick(this.snaps[i]);
      xs.push(this.snaps[i].unix_ms / 1000);
      const n = b && a ? b.count - a.count : (b ? b.count : 0);
      for (const [k, q] of [['p50', 0.5], ['p95', 0.95], ['p99', 0.99]]) {
        if (!b || n <= 0) { cols[k].push(null); continue; }
        const bk = b.buckets.map((x, j) => [x[0], x[1] - (a ? a.buckets[j][1] : 0)]);
        cols[k].push(quantile(q, bk, n));
      }
    }
    return { xs, keys: ['p50', 'p95', 'p99'], cols };
  }
}

// quantile interpolates inside the bucket holding the rank, like the server
// (and Prometheus' histogram_quantile).
export function quantile(q, buckets, total) {
  if (!total) return null;
  const rank = q * total;
  let lower = 0, below = 0;
  for (const [upper, cum] of buckets) {
    if (cum >= rank && cum > below) return lower + (upper - lower) * (rank - below) / (cum - below);
    lower = upper; below = cum;
  }
  return buckets.length ? buckets[buckets.length - 1][0] : null;
}

const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];
const COLORS = { permit: '#16a34a', deny: '#dc2626', divert: '#2563eb', indeterminate: '#ca8a04', p50: '#2563eb', p95: '#ea580c', p99: '#dc2626' };

// Chart is a uPlot line chart in a figure; it is rebuilt when its series
// change (a feed or an NF type appears). data-points on the figure counts
// the plotted x values, for tests and for people inspecting the page.
export class Chart {
  constructor(title, unit, fmt) {
    this.title = title; this.unit = unit; this.fmt = fmt || (v => v == null ? '–' : v.toFixed(v < 10 ? 2 : 0));
    this.plot = null; this.keys = '';
    this.box = h('div', { class: 'chart-box' });
    this.el = h('figure', { class: 'chart', dataset: { points: '0', series: '' } },
      h('figcaption', {}, title, h('span', { class: 'unit' }, ' (' + unit + ')')), this.box);
  }

  update({ xs, keys, cols }) {
    const sig = keys.join(',');
    const data = [xs, ...keys.map(k => cols[k])];
    if (!window.uPlot) { this.box.textContent = 'Chart library missing.'; return; }
    if (!xs.length) { this.el.dataset.points = '0'; if (!this.plot) this.box.textContent = 'Waiting for data…'; return; }
    const width = Math.max(280, this.box.clientWidth || this.el.clientWidth - 16 || 400);
    if (!this.plot || sig !== this.keys) {
      if (this.plot) this.plot.destroy();
      this.box.textContent = '';
      this.keys = sig;
      const fmt = this.fmt;
      this.plot = new window.uPlot({
        width, height: 180,
        legend: { live: false },
        cursor: { drag: { x: false, y: false } },
        // One point (or all at one time) would stretch the time axis over
        // years: show the minute up to it instead.
        scales: { x: { time: true, range: (u, min, max) => (max - min < 1 ? [max - 60, max + 1] : [min, max]) },
                  y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        // The value axis as wide as its longest label ("100.0 ms"), not clipped.
        axes: [{}, { values: (u, vals) => vals.map(fmt),
                     size: (u, vals) => Math.max(48, 14 + 7 * Math.max(0, ...(vals || []).map(v => String(v).length))) }],
        series: [{}, ...keys.map((k, i) => ({ label: k, stroke: COLORS[k] || PALETTE[i % PALETTE.length], width: 2, spanGaps: false, value: (u, v) => fmt(v) }))],
      }, data, this.box);
    } else {
      if (Math.abs(this.plot.width - width) > 20) this.plot.setSize({ width, height: 180 });
      this.plot.setData(data);
    }
    this.el.dataset.points = String(xs.length);
    this.el.dataset.series = sig;
  }

  destroy() { if (this.plot) this.plot.destroy(); this.plot = null; }
}
