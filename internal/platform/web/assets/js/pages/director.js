// Director: feeds with their runtime state and rates, a create/edit form,
// and NF ingest rates by type.
import { api, h, replace, table, field, statusLine, clearErrors, showError, setStatus, every, fmtNum, fmtSecs, fmtTime, errorText } from '../ui.js';
import { Chart } from '../stats.js';

const TYPES = [['synthetic', 'Synthetic packets (pcap over TCP/TLS)'], ['http2', 'HTTP/2 JSON'], ['kafka', 'Kafka topic'],
  ['xdr', 'Transaction records (xDR) to a Kafka topic']];

export function render(root, ctx) {
  const feedsBox = h('div', { id: 'feeds', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading feeds…'));
  const feedsStatus = statusLine();
  const ingestBox = h('div', { id: 'ingest' });
  const ingestChart = new Chart('Copies ingested per NF type', 'copies/s');
  let specs = [], statuses = {};

  // Form.
  const f = {
    name: h('input', { type: 'text', required: true }),
    type: h('select', {}, TYPES.map(([v, l]) => h('option', { value: v }, l))),
    sources: h('input', { type: 'text', placeholder: 'SCP, NRF' }),
    directions: h('input', { type: 'text' }),
    enabled: h('input', { type: 'checkbox', checked: true, id: 'feed-enabled' }),
    start: h('select', {}, h('option', { value: '' }, 'latest (new copies only)'), h('option', { value: 'earliest' }, 'earliest (all retained)')),
    endpoint: h('input', { type: 'text', placeholder: 'probe.example.net:5000' }),
    url: h('input', { type: 'url', placeholder: 'https://collector.example.net/copies' }),
    topic: h('input', { type: 'text' }),
    filter: h('textarea', { rows: 2, spellcheck: 'false', placeholder: 'e.g. status >= 400 && service == "nudm-sdm"' }),
    tls: h('input', { type: 'checkbox', id: 'feed-tls' }),
    serverName: h('input', { type: 'text' }),
    caFile: h('input', { type: 'text' }),
    insecure: h('input', { type: 'checkbox', id: 'feed-insecure' }),
  };
  const title = h('h2', {}, 'Create a feed');
  const cancel = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Cancel edit');
  let editing = null;
  const perType = {
    synthetic: h('div', { class: 'row' }, field('Endpoint (host:port)', 'endpoint', f.endpoint)),
    http2: h('div', { class: 'row' }, field('URL', 'url', f.url)),
    kafka: h('div', { class: 'row' }, field('Topic', 'topic', f.topic, 'On the director\'s own Kafka')),
  };
  perType.xdr = perType.kafka; // xDR records go to a topic too
  const showType = () => {
    for (const el of new Set(Object.values(perType))) el.hidden = perType[f.type.value] !== el;
  };
  f.type.addEventListener('change', showType);
  const form = h('form', { id: 'feed-form', novalidate: true }, title,
    h('div', { class: 'row' }, field('Name', 'name', f.name, 'Lower-case letters, digits, _ . -'), field('Type', 'type', f.type),
      field('Sources (NF types)', 'sources', f.sources, 'Comma-separated'), field('Directions', 'directions', f.directions, 'Optional, comma-separated'),
      field('Start at', 'start', f.start)),
    h('div', { class: 'field check', dataset: { field: 'enabled' } }, f.enabled, h('label', { for: 'feed-enabled' }, 'Enabled'), h('span', { class: 'field-error' })),
    perType.synthetic, perType.http2, perType.kafka,
    h('fieldset', {}, h('legend', {}, 'TLS'),
      h('div', { class: 'row' }, h('div', { class: 'field check', dataset: { field: 'tls.enabled' } }, f.tls, h('label', { for: 'feed-tls' }, 'Use TLS'), h('span', { class: 'field-error' })),
        field('Server name', 'tls.server_name', f.serverName), field('CA file', 'tls.ca_file', f.caFile),
        h('div', { class: 'field check', dataset: { field: 'tls.insecure_skip_verify' } }, f.insecure, h('label', { for: 'feed-insecure' }, 'Skip verification'), h('span', { class: 'field-error' })))),
    field('Filter expression', 'filter', f.filter, 'Only matching copies are delivered; empty = all'),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Save feed'), cancel), statusLine());
  showType();
  const list = s => s.split(',').map(x => x.trim()).filter(Boolean);
  const reset = () => {
    editing = null; title.textContent = 'Create a feed'; cancel.hidden = true; f.name.disabled = false;
    for (const k of ['name', 'sources', 'directions', 'endpoint', 'url', 'topic', 'filter', 'serverName', 'caFile']) f[k].value = '';
    f.type.value = 'synthetic'; f.start.value = ''; f.enabled.checked = true; f.tls.checked = f.insecure.checked = false; showType();
  };
  cancel.addEventListener('click', () => { reset(); clearErrors(form); });
  form.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(form);
    const spec = editing ? { ...editing } : {};
    Object.assign(spec, { name: f.name.value.trim(), type: f.type.value, sources: list(f.sources.value), enabled: f.enabled.checked });
    const dirs = list(f.directions.value); if (dirs.length) spec.directions = dirs; else delete spec.directions;
    if (f.start.value) spec.start = f.start.value; else delete spec.start;
    if (f.filter.value.trim()) spec.filter = f.filter.value.trim(); else delete spec.filter;
    for (const k of ['endpoint', 'url', 'topic']) delete spec[k];
    const t = f.type.value === 'synthetic' ? 'endpoint' : f.type.value === 'http2' ? 'url' : 'topic';
    if (f[t].value.trim()) spec[t] = f[t].value.trim();
    if (f.tls.checked || f.serverName.value.trim() || f.caFile.value.trim()) {
      spec.tls = { ...(spec.tls || {}), enabled: f.tls.checked, server_name: f.serverName.value.trim() || undefined, ca_file: f.caFile.value.trim() || undefined, insecure_skip_verify: f.insecure.checked || undefined };
    } else delete spec.tls;
    try {
      if (editing) await api('PUT', '/feeds/' + encodeURIComponent(editing.name), spec);
      else await api('POST', '/feeds', spec);
      setStatus(form, `Feed "${spec.name}" saved.`, 'ok');
      reset();
      load();
    } catch (e) { showError(form, e); }
  });
  const edit = s => {
    editing = s; title.textContent = `Edit feed ${s.name}`; cancel.hidden = false; f.name.disabled = true; clearErrors(form);
    f.name.value = s.name; f.type.value = s.type; f.sources.value = (s.sources || []).join(', '); f.directions.value = (s.directions || []).join(', ');
    f.enabled.checked = s.enabled !== false; f.start.value = s.start || ''; f.filter.value = s.filter || '';
    f.endpoint.value = s.endpoint || ''; f.url.value = s.url || ''; f.topic.value = s.topic || '';
    f.tls.checked = !!(s.tls && s.tls.enabled); f.serverName.value = (s.tls && s.tls.server_name) || ''; f.caFile.value = (s.tls && s.tls.ca_file) || '';
    f.insecure.checked = !!(s.tls && s.tls.insecure_skip_verify); showType();
    form.scrollIntoView({ block: 'nearest' }); f.type.focus();
  };

  async function load() {
    try {
      const r = await api('GET', '/feeds');
      specs = r.feeds;
      const st = await Promise.all(specs.map(s => api('GET', `/feeds/${encodeURIComponent(s.name)}/status`).catch(e => ({ error: e.message }))));
      statuses = Object.fromEntries(specs.map((s, i) => [s.name, st[i]]));
      draw();
    } catch (e) { replace(feedsBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }

  function draw() {
    const rates = ctx.stats.rates(x => Object.fromEntries(x.feeds.map(f => [f.name, f.delivered])));
    const rate = n => { const c = rates.cols[n]; return c && c.length ? c[c.length - 1] : null; };
    replace(feedsBox, table('Feeds', ['Name', 'Type', 'Sources', 'Destination', 'State', 'Delivered/s', 'Delivered', 'Failed', 'Lag', 'Latency p50 / p99', 'Last error', ''],
      specs.map(s => {
        const w = statuses[s.name] || {};
        const st = w.status || {};
        const state = w.error ? 'unknown' : w.running ? st.state : (s.enabled === false ? 'disabled' : 'not running');
        return h('tr', { dataset: { feed: s.name, state } },
          h('td', {}, s.name), h('td', {}, s.type), h('td', {}, (s.sources || []).join(', ')),
          h('td', { class: 'mono' }, s.endpoint || s.url || s.topic || '', s.tls && s.tls.enabled ? ' (TLS)' : ''),
          h('td', {}, h('span', { class: 'badge b-' + state.replace(/\s/g, ''), 'data-testid': 'feed-state' }, state),
            // Shared: the feed reads through its sources' one reader; own: its own Kafka consumer.
            w.running && st.reader ? [h('br'), h('small', { class: 'muted', title: st.reader === 'shared'
              ? 'Reads through the one reader shared by the feeds of these sources'
              : 'Reads with its own Kafka consumer (xdr feeds, sharing off, or taken off the shared reader until it catches up)' },
            st.reader + ' reader')] : []),
          h('td', { class: 'num' }, fmtNum(rate(s.name), 1)),
          h('td', { class: 'num' }, fmtNum(st.delivered)), h('td', { class: 'num' }, fmtNum(st.failed)), h('td', { class: 'num' }, fmtNum(st.lag)),
          h('td', {}, st.delivered ? fmtSecs(st.latency_p50) + ' / ' + fmtSecs(st.latency_p99) : '–'),
          h('td', {}, st.last_error ? [st.last_error, h('br'), h('small', { class: 'muted' }, fmtTime(st.last_error_at))] : (w.error || '')),
          h('td', {}, h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'secondary small', 'aria-label': 'Edit feed ' + s.name, onclick: () => edit(s) }, 'Edit'),
            h('button', { type: 'button', class: 'danger small', 'aria-label': 'Delete feed ' + s.name, onclick: async () => {
              if (!confirm(`Delete feed "${s.name}"? Delivery stops.`)) return;
              try { await api('DELETE', '/feeds/' + encodeURIComponent(s.name)); load(); } catch (e) { feedsStatus.className = 'form-status error'; feedsStatus.textContent = errorText(e); }
            } }, 'Delete'))));
      }), 'No feeds yet: create one below.', true));
  }

  // Recent transaction records of the xdr feeds (GET /feeds/{name}/records).
  const recFeed = h('select', { id: 'xdr-feed' });
  const recBox = h('div', { 'aria-live': 'polite' });
  const loadRecords = async () => {
    const xdrs = specs.filter(s => s.type === 'xdr').map(s => s.name);
    const cur = recFeed.value;
    if (recFeed.options.length !== xdrs.length || [...recFeed.options].some((o, i) => o.value !== xdrs[i])) {
      replace(recFeed, ...xdrs.map(n => h('option', { value: n }, n)));
      if (xdrs.includes(cur)) recFeed.value = cur;
    }
    if (!xdrs.length) { replace(recBox, h('p', { class: 'muted' }, 'No xdr feed: create one (type "Transaction records") to see transactions here.')); return; }
    try {
      const r = await api('GET', `/feeds/${encodeURIComponent(recFeed.value)}/records?limit=25`);
      replace(recBox, table('Latest transaction records, newest first', ['End', 'Service', 'Method', 'Path', 'Status', 'Result', 'Hops', 'Latency', 'SUPI'],
        r.records.map(x => h('tr', {},
          h('td', {}, fmtTime(new Date(x.end / 1e6).toISOString())), h('td', {}, x.service || ''), h('td', {}, x.method || ''),
          h('td', { class: 'mono' }, x.path || ''), h('td', { class: 'num' }, x.status || ''),
          h('td', {}, h('span', { class: 'badge b-' + (x.result === 'complete' ? 'connected' : 'disconnected') }, x.result)),
          h('td', {}, (x.hops || []).map(hp => hp.nf_type).filter((v, i, a) => a.indexOf(v) === i).join(' → ')),
          h('td', { class: 'num' }, fmtSecs(x.latency_ns / 1e9)), h('td', { class: 'mono' }, x.supi || ''))),
        'No records delivered yet.'));
    } catch (e) { replace(recBox, h('p', { class: 'form-status error' }, errorText(e))); }
  };
  recFeed.addEventListener('change', loadRecords);

  // KPIs of the xdr feeds: per service, and the failures by ProblemDetails cause.
  const kpiBox = h('div', { id: 'xdr-kpis', 'aria-live': 'off' }), causeBox = h('div', { id: 'xdr-causes', 'aria-live': 'off' });
  function drawKPIs(s) {
    const x = s.xdr || { services: [], causes: {} };
    replace(kpiBox, table('Transactions by service', ['Service', 'Transactions', 'Failed', 'Success'], x.services.slice(0, 20).map(k => h('tr', {},
      h('td', { class: 'mono' }, k.service), h('td', { class: 'num' }, fmtNum(k.transactions)), h('td', { class: 'num' }, fmtNum(k.failed)),
      h('td', { class: 'num' }, fmtNum(100 * k.success_ratio, 2) + ' %'))), 'No transaction records yet: an xdr feed makes them.'));
    const causes = Object.entries(x.causes).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).slice(0, 15);
    replace(causeBox, table('Failed transactions by cause', ['Cause', 'Transactions'], causes.map(([c, n]) =>
      h('tr', {}, h('td', { class: 'mono' }, c), h('td', { class: 'num' }, fmtNum(n)))), 'No failures.'));
  }

  root.append(h('div', { class: 'card' }, h('h2', {}, 'Feeds'), feedsStatus, h('div', { class: 'scroll' }, feedsBox)),
    h('div', { class: 'grid' }, h('div', { class: 'card' }, form),
      h('div', { class: 'card' }, h('h2', {}, 'NF ingest'), ingestBox, ingestChart.el)),
    h('div', { class: 'card' }, h('h2', {}, 'Recent transaction records (xDR)'),
      field('xdr feed', 'xdr-feed', recFeed), h('div', { class: 'scroll' }, recBox)),
    h('div', { class: 'grid' },
      h('div', { class: 'card' }, h('h2', {}, 'Service KPIs (xdr feeds, since start)'), kpiBox),
      h('div', { class: 'card' }, h('h2', {}, 'Failures by cause'), causeBox)));
  const unsub = ctx.stats.subscribe(p => {
    const r = p.rates(x => x.ingest.copies);
    ingestChart.update(r);
    const s = p.latest();
    if (!s) return;
    drawKPIs(s);
    const nfs = Object.keys(s.ingest.copies).sort();
    replace(ingestBox, table('Copies written to NF topics (Kafka producers and HTTP/2 ingest)', ['NF type', 'Copies/s', 'Total'], nfs.map(k =>
      h('tr', {}, h('td', {}, k), h('td', { class: 'num' }, fmtNum((r.cols[k] || []).slice(-1)[0], 1)), h('td', { class: 'num' }, fmtNum(s.ingest.copies[k])))),
    'No copies ingested yet.'),
    h('p', { class: 'muted' }, `Undecodable copies (dead-lettered): ${fmtNum(s.ingest.invalid)}.`));
    if (specs.length) draw();
  });

  const stop = every(3000, async () => { await load(); await loadRecords(); });
  return () => { stop(); unsub(); ingestChart.destroy(); };
}
