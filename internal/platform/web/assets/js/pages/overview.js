// Overview: health, active alarms and live rates from /api/v1/stats.
import { api, h, replace, table, every, fmtNum, fmtSecs, fmtBytes, fmtTime } from '../ui.js';
import { Chart } from '../stats.js';

export function render(root, ctx) {
  const health = h('p', { 'aria-live': 'polite' }, h('span', { class: 'muted' }, 'Checking readiness…'));
  const alarmBox = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading alarms…'));
  const tiles = h('div', { class: 'tiles', 'aria-live': 'off' });
  const statsErr = h('p', { class: 'form-status error', role: 'status' });

  const calls = new Chart('CURRI calls by decision', 'calls/s');
  const copies = new Chart('Copies ingested per NF type', 'copies/s');
  const feeds = new Chart('Feed delivery', 'copies/s');
  const lat = new Chart('CURRI response time', 'p50 / p95 / p99', fmtSecs);
  calls.el.id = 'chart-calls'; copies.el.id = 'chart-copies'; feeds.el.id = 'chart-feeds'; lat.el.id = 'chart-latency';

  root.append(
    h('div', { class: 'grid' },
      h('div', { class: 'card' }, h('h2', {}, 'Health'), health),
      h('div', { class: 'card' }, h('h2', {}, 'Active alarms'), alarmBox)),
    h('h2', { style: 'margin-top:1rem' }, 'Live'), statsErr, tiles,
    h('div', { class: 'grid' },
      h('div', { class: 'card' }, calls.el), h('div', { class: 'card' }, lat.el),
      h('div', { class: 'card' }, copies.el), h('div', { class: 'card' }, feeds.el)));

  const stopHealth = every(5000, async () => {
    const resp = await fetch('/readyz').catch(e => ({ ok: false, text: async () => e.message }));
    const text = (await resp.text()).trim().split('\n');
    replace(health, h('span', { class: 'badge ' + (resp.ok ? 'b-ready' : 'b-notready'), id: 'health' }, resp.ok ? 'Ready' : 'Not ready'),
      text.length > 1 ? ' ' + text.slice(1).join(', ') : '');
  });
  const stopAlarms = every(5000, async () => {
    try {
      const a = await api('GET', '/alarms?limit=0');
      replace(alarmBox, a.active.length
        ? table('Active alarms', ['Severity', 'Source', 'Description', 'Since'], a.active.map(x =>
          h('tr', {}, h('td', {}, h('span', { class: 'badge b-' + x.severity }, x.severity)), h('td', {}, x.source),
            h('td', {}, x.description), h('td', {}, fmtTime(x.first_seen)))), undefined, true)
        : h('p', {}, h('span', { class: 'badge b-ready' }, 'None'), ' No active alarms.'));
    } catch (e) { replace(alarmBox, h('p', { class: 'form-status error' }, e.message)); }
  });

  const tile = (k, v) => h('div', { class: 'tile' }, h('div', { class: 'v' }, v), h('div', { class: 'k' }, k));
  const unsub = ctx.stats.subscribe(p => {
    statsErr.textContent = p.error ? 'Statistics unavailable: ' + p.error : '';
    const s = p.latest();
    if (!s) return;
    const cr = p.rates(x => ({ all: x.curri.requests }));
    const last = (r, k) => { const c = r.cols[k] || []; return c.length ? c[c.length - 1] : null; };
    const ir = p.rates(x => ({ all: Object.values(x.ingest.copies).reduce((a, b) => a + b, 0) }));
    const prev = p.snaps[p.snaps.length - 2];
    const cpu = prev ? (s.process.cpu_seconds - prev.process.cpu_seconds) / ((s.unix_ms - prev.unix_ms) / 1000) * 100 : null;
    replace(tiles,
      tile('Calls/s', fmtNum(last(cr, 'all'), 1)),
      tile('Calls since start', fmtNum(s.curri.requests)),
      tile('CURRI p99 (since start)', fmtSecs(s.curri.latency ? s.curri.latency.p99 : null)),
      tile('Copies/s in', fmtNum(last(ir, 'all'), 1)),
      tile('Feeds', fmtNum(s.feeds.length)),
      tile('CPU', cpu === null ? '–' : fmtNum(cpu, 1) + ' %'),
      tile('Memory (RSS)', fmtBytes(s.process.rss_bytes)),
      tile('Uptime', fmtNum(s.process.uptime_seconds / 60, 1) + ' min'));
    calls.update(p.rates(x => x.curri.by_decision));
    copies.update(p.rates(x => x.ingest.copies));
    feeds.update(p.rates(x => Object.fromEntries(x.feeds.map(f => [f.name, f.delivered]))));
    lat.update(p.latency(x => x.curri.latency));
  });

  return () => { stopHealth(); stopAlarms(); unsub(); [calls, copies, feeds, lat].forEach(c => c.destroy()); };
}
