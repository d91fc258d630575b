// Subscriber traces: start one (SUPI, GPSI or PEI; minutes; look-back),
// watch what it catches, download it as pcap or JSON lines, stop it.
// For the admin and tracer roles; every start, stop and download is audited.
import { api, h, replace, table, field, statusLine, clearErrors, showError, setStatus, errorText, fmtTime, fmtBytes, download, every } from '../ui.js';

export function render(root) {
  const kind = h('select', {}, [['supi', 'SUPI / IMSI'], ['gpsi', 'GPSI / MSISDN'], ['pei', 'PEI / IMEI']].map(([v, l]) => h('option', { value: v }, l)));
  const who = h('input', { type: 'text', required: true, placeholder: 'imsi-234300000000001' });
  const minutes = h('input', { type: 'number', min: '1', max: '240', value: '15' });
  const lookback = h('input', { type: 'number', min: '0', max: '60', value: '0' });
  const form = h('form', { id: 'trace-form' },
    h('div', { class: 'row' }, field('Identity', 'kind', kind), field('Subscriber', 'supi', who, 'imsi-…, msisdn-…, imei-… (or the digits)'),
      field('Minutes', 'minutes', minutes), field('Look back (minutes)', 'lookback_minutes', lookback, 'Start from this far back in Kafka retention')),
    h('button', { type: 'submit' }, 'Start trace'), statusLine());
  form.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(form);
    const body = { minutes: Number(minutes.value), lookback_minutes: Number(lookback.value) };
    body[kind.value] = who.value.trim();
    try {
      const t = await api('POST', '/traces', body);
      setStatus(form, `Trace ${t.id} of ${who.value.trim()} running until ${fmtTime(t.end)}.`, 'ok');
      load();
    } catch (e) { showError(form, e); }
  });
  const listBox = h('div', { id: 'traces', 'aria-live': 'off' });
  const status = h('p', { class: 'form-status', role: 'status', 'aria-live': 'polite' });
  async function get(t, format) {
    try { download(await api('GET', `/traces/${encodeURIComponent(t.id)}/${format}`, undefined, { blob: true }), `${t.id}.${format}`); }
    catch (e) { status.textContent = errorText(e); }
  }
  // The live view: the newest copies the open trace caught (its JSON
  // lines), refreshed with the list.
  let open = '';
  const liveBox = h('div', { id: 'trace-live', 'aria-live': 'off' });
  async function live() {
    if (!open) { replace(liveBox); return; }
    try {
      const text = await api('GET', `/traces/${encodeURIComponent(open)}/jsonl`);
      const copies = String(text).split('\n').filter(Boolean).slice(-50).reverse().map(l => { try { return JSON.parse(l); } catch (_) { return null; } }).filter(Boolean);
      const hv = (c, n) => { const v = (c['header-list'] || {})[n]; return Array.isArray(v) ? v[0] : (v || ''); };
      replace(liveBox, table(`Copies caught by ${open}, newest first (${copies.length})`, ['Time', 'NF', 'Direction', 'Method / status', 'Path', 'Correlation id'],
        copies.map(c => { const m = c['metadata-list'] || {}; return h('tr', {},
          h('td', {}, m.timestamp ? fmtTime(new Date(Number(String(m.timestamp).slice(0, 13))).toISOString()) : ''),
          h('td', {}, (m['feed-source'] || {})['nf-type'] || ''), h('td', {}, m['message-direction'] || ''),
          h('td', { class: 'mono' }, hv(c, ':method') || hv(c, ':status')), h('td', { class: 'mono' }, hv(c, ':path')),
          h('td', { class: 'mono' }, m['correlation-id'] || '')); }),
        'Nothing caught yet: copies appear here within seconds of the NFs sending them.'),
        h('button', { type: 'button', class: 'secondary small', onclick: () => get({ id: open }, 'pcap') }, 'Open the pcap'));
    } catch (e) { replace(liveBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }
  async function stop(t) {
    try { await api('DELETE', '/traces/' + encodeURIComponent(t.id)); load(); } catch (e) { status.textContent = errorText(e); }
  }
  async function load() {
    try {
      const ts = (await api('GET', '/traces')).traces;
      replace(listBox, table('Traces, newest first', ['Subscriber', 'State', 'Started', 'Ends', 'By, on node', 'Caught', ''], ts.map(t => h('tr', { dataset: { trace: t.id, state: t.state } },
        h('td', { class: 'mono' }, t.supi || t.gpsi || t.pei || t.filter), h('td', {}, h('span', { class: 'badge b-' + (t.state === 'running' ? 'connected' : 'disconnected') }, t.state)),
        h('td', {}, fmtTime(t.start)), h('td', {}, fmtTime(t.end)), h('td', {}, t.node ? `${t.created_by} on ${t.node}` : t.created_by),
        h('td', { class: 'num' }, `${fmtBytes(t.pcap_bytes)} pcap, ${fmtBytes(t.jsonl_bytes)} JSON`),
        h('td', {}, h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'secondary small', onclick: () => { open = t.id; live(); } }, 'Live'),
          h('button', { type: 'button', class: 'secondary small', onclick: () => get(t, 'pcap') }, 'pcap'),
          h('button', { type: 'button', class: 'secondary small', onclick: () => get(t, 'jsonl') }, 'JSON lines'),
          t.state === 'running' ? h('button', { type: 'button', class: 'danger small', onclick: () => stop(t) }, 'Stop') : null)))),
      'No traces. Start one above: its copies appear here as they are caught.'));
      if (!open && ts.length && ts[0].state === 'running') open = ts[0].id;
      await live();
    } catch (e) { replace(listBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }
  // Stored transaction records, searched by subscriber, correlation id or cause.
  const sKey = h('select', {}, [['supi', 'SUPI'], ['gpsi', 'GPSI'], ['correlation_id', 'Correlation id'], ['cause', 'Cause'], ['service', 'Service']].map(([v, l]) => h('option', { value: v }, l)));
  const sVal = h('input', { type: 'search', id: 'xdr-search' });
  const sBox = h('div', { id: 'xdr-results', 'aria-live': 'polite' });
  const sForm = h('form', { id: 'xdr-search-form' }, h('div', { class: 'toolbar' }, field('Search by', 'key', sKey), field('Value', 'value', sVal),
    h('button', { type: 'submit' }, 'Search')), statusLine(), sBox);
  sVal.id = 'xdr-search'; // field() names it; the tests find it by this
  sForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(sForm);
    try {
      const q = { [sKey.value]: sVal.value.trim() };
      const r = await api('GET', '/xdrs?' + new URLSearchParams({ ...q, limit: '100' }));
      // The copies of every matching transaction (up to 500), one flow each.
      const pcap = h('button', { type: 'button', class: 'secondary small', id: 'xdr-pcap' }, 'Download pcap of these transactions');
      pcap.addEventListener('click', async () => {
        try {
          download(await api('GET', '/xdrs/pcap?' + new URLSearchParams(q), undefined, { blob: true }), `signalbox-xdrs-${sKey.value}.pcap`);
          setStatus(sForm, 'Downloaded.', 'ok');
        } catch (e) { setStatus(sForm, errorText(e), 'error'); }
      });
      replace(sBox, r.records.length ? h('div', { class: 'actions' }, pcap) : null, h('div', { class: 'scroll' }, table(`Transaction records, newest first (${r.records.length})`,
        ['End', 'Service', 'Status', 'Cause', 'Result', 'Hops', 'Latency', 'SUPI', 'Correlation id'], r.records.map(x => h('tr', {},
          h('td', {}, fmtTime(new Date(x.end / 1e6).toISOString())), h('td', {}, x.service || ''), h('td', { class: 'num' }, x.status || ''),
          h('td', { class: 'mono' }, x.cause || ''), h('td', {}, x.result),
          h('td', {}, (x.hops || []).map(hp => hp.nf_type + ' ' + hp.direction.toLowerCase().replace('_', ' ')).join(', ')),
          h('td', { class: 'num' }, (x.latency_ns / 1e6).toFixed(2) + ' ms'), h('td', { class: 'mono' }, x.supi || ''), h('td', { class: 'mono' }, x.correlation_id))),
        'No stored record matches.')));
    } catch (e) { showError(sForm, e); }
  });

  root.append(h('div', { class: 'card' }, h('h2', {}, 'Search transaction records'), sForm),
    h('div', { class: 'card' }, h('h2', {}, 'Trace a subscriber'),
    h('p', { class: 'muted' }, 'Every copy of the subscriber, and the rest of each of its transactions, as pcap and JSON lines. Starts, stops and downloads are audited.'), form),
  h('div', { class: 'card' }, listBox, status, liveBox));
  return every(2000, load);
}
