// Settings: API tokens (a new token's secret is shown once, with a copy
// button) and the audit log of changes made through the API.
import { api, h, replace, table, field, statusLine, clearErrors, showError, setStatus, fmtTime, errorText } from '../ui.js';

export function render(root, ctx) {
  const list = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const shown = h('div', { 'aria-live': 'polite', id: 'new-token' });
  const name = h('input', { type: 'text', required: true, maxlength: 64 });
  const role = h('select', {}, h('option', { value: 'viewer' }, 'viewer (read only)'), h('option', { value: 'admin' }, 'admin'));
  const form = h('form', { id: 'token-form' },
    h('div', { class: 'row' }, field('Name', 'name', name, 'Who or what uses it, e.g. grafana'), field('Role', 'role', role)),
    h('button', { type: 'submit' }, 'Create token'), statusLine());

  async function load() {
    try {
      const r = await api('GET', '/tokens');
      replace(list, table('API tokens', ['Name', 'Role', 'Created', 'ID', ''], r.tokens.map(t =>
        h('tr', {}, h('td', {}, t.name), h('td', {}, h('span', { class: 'badge' }, t.role)), h('td', {}, fmtTime(t.created_at)),
          h('td', { class: 'mono' }, t.id),
          h('td', {}, h('button', { type: 'button', class: 'danger small', 'aria-label': 'Revoke token ' + t.name, onclick: async () => {
            if (!confirm(`Revoke token "${t.name}"? Clients using it stop working.`)) return;
            try { await api('DELETE', '/tokens/' + encodeURIComponent(t.id)); setStatus(form, `Token "${t.name}" revoked.`, 'ok'); load(); } catch (e) { setStatus(form, errorText(e), 'error'); }
          } }, 'Revoke')))), 'No tokens besides the admin token.'));
    } catch (e) { replace(list, h('p', { class: 'form-status error' }, errorText(e))); }
  }

  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    clearErrors(form);
    try {
      const t = await api('POST', '/tokens', { name: name.value.trim(), role: role.value });
      const code = h('code', { id: 'new-token-secret' }, t.token);
      const copyStatus = h('span', { role: 'status' });
      replace(shown, h('div', { class: 'secret' },
        h('span', {}, `Token "${t.name}" (${t.role}) — copy it now, it is not shown again:`), code,
        h('button', { type: 'button', class: 'secondary small', onclick: async () => {
          try { await navigator.clipboard.writeText(t.token); copyStatus.textContent = 'Copied.'; }
          catch (_) { getSelection().selectAllChildren(code); copyStatus.textContent = 'Selected; press Ctrl+C to copy.'; }
        } }, 'Copy'), copyStatus));
      setStatus(form, 'Token created.', 'ok');
      name.value = '';
      load();
      loadAudit();
    } catch (e) { showError(form, e); }
  });

  // The audit log: who changed what, newest first.
  const audit = h('div', { id: 'audit', 'aria-live': 'polite' });
  const aActor = h('input', { type: 'search', id: 'audit-actor', placeholder: 'token or person' });
  const aSince = h('select', { id: 'audit-since' }, [['-24h', 'last 24 hours'], ['-168h', 'last 7 days'], ['', 'all kept']].map(([v, l]) => h('option', { value: v }, l)));
  async function loadAudit() {
    const q = new URLSearchParams({ limit: '200' });
    if (aActor.value.trim()) q.set('actor', aActor.value.trim());
    if (aSince.value) q.set('since', aSince.value);
    try {
      const r = await api('GET', '/audit?' + q);
      replace(audit, h('div', { class: 'scroll' }, table(`Changes, newest first (${r.records.length}${r.records.length === 200 ? '+' : ''})`,
        ['Time', 'Who', 'Role', 'What', 'Id', 'Detail', 'From'], r.records.map(a => h('tr', {},
          h('td', {}, fmtTime(a.time)), h('td', {}, a.actor), h('td', {}, a.role), h('td', {}, a.action),
          h('td', { class: 'mono' }, a.target), h('td', { class: 'mono' }, a.detail || ''), h('td', { class: 'mono' }, a.client || ''))),
        'No changes in that time.')));
    } catch (e) { replace(audit, h('p', { class: 'form-status error' }, errorText(e))); }
  }
  aActor.addEventListener('change', loadAudit);
  aSince.addEventListener('change', loadAudit);

  root.append(h('div', { class: 'card' }, h('h2', {}, 'Create a token'), form, shown),
    h('div', { class: 'card' }, h('h2', {}, 'Tokens'), list),
    h('div', { class: 'card' }, h('h2', {}, 'Audit log'),
      h('div', { class: 'toolbar' }, h('div', { class: 'field' }, h('label', { for: 'audit-actor' }, 'Who'), aActor),
        h('div', { class: 'field' }, h('label', { for: 'audit-since' }, 'Since'), aSince)), audit));
  if (ctx.role !== 'admin') {
    replace(list, h('p', { class: 'muted' }, 'Tokens are visible to the admin role only.'));
    replace(audit, h('p', { class: 'muted' }, 'The audit log is visible to the admin role only.'));
  } else {
    load();
    loadAudit();
  }
}
