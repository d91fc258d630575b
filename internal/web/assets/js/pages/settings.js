// Settings: API tokens. A new token's secret is shown once, with a copy button.
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
    } catch (e) { showError(form, e); }
  });

  root.append(h('div', { class: 'card' }, h('h2', {}, 'Create a token'), form, shown),
    h('div', { class: 'card' }, h('h2', {}, 'Tokens'), list));
  if (ctx.role !== 'admin') replace(list, h('p', { class: 'muted' }, 'Tokens are visible to the admin role only.'));
  else load();
}
