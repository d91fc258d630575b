// Webhooks: endpoints told of rule hits, rate-limit trips, block-list hits
// and alarms by signed JSON POSTs; made, tested and deleted here.
import { api, h, replace, table, field, statusLine, clearErrors, showError, setStatus, errorText } from '../ui.js';

const EVENTS = {
  rule_hit: 'A rule decided a call', rate_limited: 'A rate limit decided a call', block_list_hit: 'A block list decided a call',
  alarm_raised: 'An alarm was raised', alarm_cleared: 'An alarm cleared',
};

export function render(root) {
  const listBox = h('div', { id: 'webhooks', 'aria-live': 'polite' });
  const cName = h('input', { type: 'text', required: true }), cURL = h('input', { type: 'url', required: true, placeholder: 'https://' });
  const cThrottle = h('input', { type: 'number', min: '0', value: '0' });
  const cPolicies = h('input', { type: 'text', placeholder: 'every policy' });
  const boxes = Object.entries(EVENTS).map(([k, label]) =>
    h('label', { class: 'check' }, h('input', { type: 'checkbox', value: k, checked: k !== 'rule_hit' }), ' ' + label));
  const secretNote = h('p', { id: 'webhook-secret', class: 'mono', role: 'status', 'aria-live': 'polite' });
  const form = h('form', { id: 'webhook-form' },
    h('div', { class: 'row' }, field('Name', 'name', cName, 'Lower-case letters, digits, _ . -'), field('URL', 'url', cURL),
      field('Throttle (seconds)', 'throttle_seconds', cThrottle, 'Only the first event per rule, caller or alarm in this window; 0: every event'),
      field('Policies', 'policies', cPolicies, 'Comma-separated; empty: every policy')),
    h('fieldset', { 'data-field': 'events' }, h('legend', {}, 'Events'), ...boxes),
    h('button', { type: 'submit' }, 'Create webhook'), statusLine(), secretNote);
  form.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(form); secretNote.textContent = '';
    const body = {
      name: cName.value.trim(), url: cURL.value.trim(), throttle_seconds: Number(cThrottle.value) || 0,
      events: boxes.map(b => b.querySelector('input')).filter(i => i.checked).map(i => i.value),
    };
    const ps = cPolicies.value.split(',').map(x => x.trim()).filter(Boolean);
    if (ps.length) body.policies = ps;
    try {
      const w = await api('POST', '/webhooks', body);
      setStatus(form, `Webhook "${w.name}" created.`, 'ok');
      secretNote.textContent = 'Its signing secret, shown this once: ' + w.secret;
      cName.value = cURL.value = cPolicies.value = '';
      load();
    } catch (e) { showError(form, e); }
  });

  const testStatus = h('p', { id: 'webhook-test-status', class: 'form-status', role: 'status', 'aria-live': 'polite' });
  async function test(w) {
    testStatus.textContent = `Sending a test event to ${w.name}…`;
    try {
      const r = await api('POST', '/webhooks/' + encodeURIComponent(w.name) + '/test');
      testStatus.className = 'form-status ' + (r.delivered ? 'ok' : 'error');
      testStatus.textContent = r.delivered ? `${w.name}: delivered, HTTP ${r.status} in ${r.ms} ms.`
        : `${w.name}: not delivered (${r.status ? 'HTTP ' + r.status : r.error}).`;
    } catch (e) { testStatus.className = 'form-status error'; testStatus.textContent = errorText(e); }
  }
  async function del(w) {
    if (!confirm(`Delete webhook ${w.name}? Its queued events are dropped.`)) return;
    try { await api('DELETE', '/webhooks/' + encodeURIComponent(w.name)); load(); } catch (e) { testStatus.textContent = errorText(e); }
  }
  async function load() {
    try {
      const ws = (await api('GET', '/webhooks')).webhooks;
      replace(listBox, table('Webhooks', ['Name', 'URL', 'Events', 'Throttle', ''], ws.map(w => h('tr', { dataset: { webhook: w.name } },
        h('td', { class: 'mono' }, w.name), h('td', { class: 'mono' }, w.url), h('td', {}, w.events.join(', ')),
        h('td', { class: 'num' }, w.throttle_seconds ? w.throttle_seconds + ' s' : '—'),
        h('td', {}, h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'secondary small', 'aria-label': 'Send a test event to ' + w.name, onclick: () => test(w) }, 'Send test event'),
          h('button', { type: 'button', class: 'danger small', 'aria-label': 'Delete webhook ' + w.name, onclick: () => del(w) }, 'Delete'))))),
      'No webhooks: create one to have rate-limit trips or alarms POSTed to your systems.'));
    } catch (e) { replace(listBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }
  root.append(h('details', {}, h('summary', {}, 'New webhook'), form), listBox, testStatus);
  load();
}
