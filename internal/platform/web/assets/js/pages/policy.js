// Call policy: policies, ordered rules (drag or buttons to reorder), allow
// and block lists with CSV import/export, a dry-run "test a call" form and
// the call log with a live tail.
import { api, h, replace, table, field, statusLine, clearErrors, showError, setStatus, every, fmtTime, fmtNum, download, errorText, actionFields } from '../ui.js';

const SEL_KEY = 'signalbox.policy';
const MATCH_FIELDS = [['calling', 'Calling number'], ['called', 'Called number'], ['transformed_calling', 'Transformed calling'],
  ['transformed_called', 'Transformed called'], ['trigger_point', 'Trigger point'], ['device_name', 'Device name']];
const REASONS = ['unknown', 'user-busy', 'no-answer', 'unavailable', 'unconditional', 'time-of-day', 'do-not-disturb', 'deflection',
  'follow-me', 'out-of-service', 'away', 'blocked', 'chaperone'];
const PATTERN_HINT = 'Exact digits, prefix:+1900, pattern:9.1[2-9]XXXXXX or regex:^\\+1…';
const LIST_HINT = 'Exact digits, prefix:+1900 or pattern:9.1[2-9]XXXXXX';

export function render(root, ctx) {
  let pid = sessionStorage.getItem(SEL_KEY) || 'default';
  const stops = [];

  // Policies.
  const select = h('select', { id: 'policy-select' });
  const polStatus = statusLine();
  const pId = h('input', { type: 'text', required: true, pattern: '[a-z0-9][a-z0-9_-]{0,63}' });
  const pName = h('input', { type: 'text' });
  const pDefault = h('select', {}, ['permit', 'deny'].map(d => h('option', { value: d }, d)));
  const polForm = h('form', { id: 'policy-form' },
    h('div', { class: 'row' }, field('New policy id', 'id', pId, 'Lower-case; used in the CURRI URL /curri/<id>'),
      field('Name', 'name', pName), field('Default decision', 'default_action.decision', pDefault)),
    h('button', { type: 'submit' }, 'Create policy'), statusLine());
  polForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(polForm);
    try {
      const p = await api('POST', '/policies', { id: pId.value.trim(), name: pName.value.trim(), default_action: { decision: pDefault.value } });
      setStatus(polForm, `Policy "${p.id}" created.`, 'ok');
      pId.value = pName.value = '';
      pid = p.id; sessionStorage.setItem(SEL_KEY, pid);
      await loadPolicies(); loadAll();
    } catch (e) { showError(polForm, e); }
  });
  select.addEventListener('change', () => { pid = select.value; sessionStorage.setItem(SEL_KEY, pid); fillSettings(); loadAll(); });

  // Policy settings: the default action, what list hits do, rate limits.
  let policies = [];
  const defAct = actionFields('default_action', ['permit', 'deny', 'divert'], 'permit');
  const allowAct = actionFields('allow_action', ['', 'permit', 'divert'], '');
  const blockAct = actionFields('block_action', ['', 'deny', 'divert', 'permit'], '');
  const LIMITS = [['per_calling', 'Per calling number'], ['per_called', 'Per called number (one DID flooded)'], ['overall', 'Whole policy']];
  const lim = Object.fromEntries(LIMITS.map(([k]) => [k, {
    calls: h('input', { type: 'number', min: '1', step: '1' }), window: h('input', { type: 'number', min: '1', step: '1' }),
    block: h('input', { type: 'number', min: '0', step: '1' }), act: actionFields('rate_limit.' + k + '.action', ['', 'deny', 'divert'], '') }]));
  const settingsForm = h('form', { id: 'policy-settings-form', novalidate: true },
    h('fieldset', {}, h('legend', {}, 'When no rule matches (default action)'), defAct.row),
    h('fieldset', {}, h('legend', {}, 'Allow-list hit (empty: continue)'), allowAct.row),
    h('fieldset', {}, h('legend', {}, 'Block-list hit (empty: reject, reason blocked)'), blockAct.row),
    LIMITS.map(([k, label]) => h('fieldset', {}, h('legend', {}, 'Rate limit: ' + label + ' (empty calls: none)'),
      h('div', { class: 'row' }, field('Calls', `rate_limit.${k}.calls`, lim[k].calls), field('In seconds', `rate_limit.${k}.window_seconds`, lim[k].window),
        field('Block for seconds', `rate_limit.${k}.block_seconds`, lim[k].block, '0: the window')),
      lim[k].act.row)),
    h('button', { type: 'submit' }, 'Save policy settings'), statusLine());
  settingsForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(settingsForm);
    const cur = policies.find(p => p.id === pid);
    if (!cur) return;
    const body = { name: cur.name, description: cur.description, default_action: defAct.get() };
    const a = allowAct.get(), b = blockAct.get();
    if (a) body.allow_action = a;
    if (b) body.block_action = b;
    const rl = {};
    for (const [k] of LIMITS) {
      const L = lim[k];
      if (!L.calls.value) continue;
      rl[k] = { calls: Number(L.calls.value), window_seconds: Number(L.window.value || 60) };
      if (L.block.value) rl[k].block_seconds = Number(L.block.value);
      const la = L.act.get();
      if (la) rl[k].action = la;
    }
    if (cur.rate_limit && cur.rate_limit.block_seconds && Object.keys(rl).length) rl.block_seconds = cur.rate_limit.block_seconds;
    if (cur.rate_limit && cur.rate_limit.action && Object.keys(rl).length) rl.action = cur.rate_limit.action;
    if (Object.keys(rl).length) body.rate_limit = rl;
    try {
      await api('PUT', '/policies/' + encodeURIComponent(pid), body);
      setStatus(settingsForm, 'Policy settings saved.', 'ok');
      await loadPolicies();
    } catch (e) { showError(settingsForm, e); }
  });
  function fillSettings() {
    const p = policies.find(x => x.id === pid);
    if (!p) return;
    defAct.set(p.default_action); allowAct.set(p.allow_action); blockAct.set(p.block_action);
    for (const [k] of LIMITS) {
      const l = (p.rate_limit || {})[k], L = lim[k];
      L.calls.value = l ? String(l.calls) : ''; L.window.value = l ? String(l.window_seconds) : ''; L.block.value = l && l.block_seconds ? String(l.block_seconds) : '';
      L.act.set(l && l.action);
    }
  }

  async function loadPolicies() {
    try {
      const r = await api('GET', '/policies');
      policies = r.policies;
      if (!r.policies.some(p => p.id === pid) && r.policies.length) pid = r.policies[0].id;
      replace(select, r.policies.map(p => h('option', { value: p.id, selected: p.id === pid }, `${p.name} (${p.id}) — default ${p.default_action.decision}`)));
      select.value = pid;
      fillSettings();
    } catch (e) { polStatus.className = 'form-status error'; polStatus.textContent = errorText(e); }
  }

  // Rules.
  let rules = [];
  const rulesBox = h('div', { 'aria-live': 'polite', id: 'rules' }, h('p', { class: 'muted' }, 'Loading rules…'));
  const rulesStatus = statusLine();
  const ruleForm = buildRuleForm();

  async function loadRules() {
    try {
      const r = await api('GET', `/policies/${encodeURIComponent(pid)}/rules`);
      rules = r.rules.sort((a, b) => a.priority - b.priority || a.id - b.id);
      drawRules();
    } catch (e) { replace(rulesBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }

  function matchText(m) {
    const parts = MATCH_FIELDS.filter(([k]) => m[k]).map(([k]) => `${k} ${m[k]}`);
    return parts.length ? parts.join(', ') : 'every call';
  }
  function actionText(a) {
    let s = a.decision;
    if (a.destination) s += ' → ' + a.destination;
    if (a.announce) s += ` (announce ${a.announce})`;
    if (a.reason) s += ` “${a.reason}”`;
    if (a.modify && a.modify.calling_name) s += ` name ${a.modify.calling_name}`;
    return s;
  }

  function drawRules() {
    let dragFrom = -1;
    const rows = rules.map((r, i) => {
      const toggle = h('input', { type: 'checkbox', checked: r.enabled, 'aria-label': `Rule ${r.id} enabled` });
      toggle.addEventListener('change', () => saveRule({ ...r, enabled: toggle.checked }, `Rule ${r.id} ${toggle.checked ? 'enabled' : 'disabled'}.`, () => { toggle.checked = r.enabled; }));
      const tr = h('tr', { draggable: 'true', dataset: { ruleId: r.id } },
        h('td', { class: 'handle', title: 'Drag to reorder', 'aria-hidden': 'true' }, '⋮⋮'),
        h('td', { class: 'num' }, String(r.priority)),
        h('td', {}, toggle),
        h('td', {}, matchText(r.match)),
        h('td', {}, h('span', { class: 'badge b-' + r.action.decision }, r.action.decision), ' ', actionText(r.action).slice(r.action.decision.length)),
        h('td', {}, r.description || ''),
        h('td', { class: 'num' }, fmtNum(r.hits)),
        h('td', {}, h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'secondary small', disabled: i === 0, 'aria-label': `Move rule ${r.id} up`, onclick: () => move(i, i - 1) }, '↑'),
          h('button', { type: 'button', class: 'secondary small', disabled: i === rules.length - 1, 'aria-label': `Move rule ${r.id} down`, onclick: () => move(i, i + 1) }, '↓'),
          h('button', { type: 'button', class: 'secondary small', 'aria-label': `Edit rule ${r.id}`, onclick: () => ruleForm.edit(r) }, 'Edit'),
          h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete rule ${r.id}`, onclick: () => del(r) }, 'Delete'))));
      tr.addEventListener('dragstart', ev => { dragFrom = i; tr.classList.add('dragging'); ev.dataTransfer.effectAllowed = 'move'; ev.dataTransfer.setData('text/plain', String(r.id)); });
      tr.addEventListener('dragend', () => tr.classList.remove('dragging'));
      tr.addEventListener('dragover', ev => { ev.preventDefault(); tr.classList.add('drop-target'); });
      tr.addEventListener('dragleave', () => tr.classList.remove('drop-target'));
      tr.addEventListener('drop', ev => { ev.preventDefault(); tr.classList.remove('drop-target'); if (dragFrom >= 0 && dragFrom !== i) move(dragFrom, i); });
      return tr;
    });
    replace(rulesBox, table(`Rules of policy ${pid}, first match wins (top to bottom)`,
      ['', 'Priority', 'On', 'Match', 'Action', 'Description', 'Hits', ''], rows, 'No rules: every call gets the default action.'));
  }

  // move reorders and saves the new priorities (10, 20, …) of the rules
  // whose priority changed, each with a PUT of the whole rule.
  async function move(from, to) {
    const order = rules.slice();
    const [r] = order.splice(from, 1);
    order.splice(to, 0, r);
    const changed = [];
    order.forEach((x, i) => { const p = (i + 1) * 10; if (x.priority !== p) changed.push({ ...x, priority: p }); });
    try {
      for (const x of changed) await api('PUT', '/rules/' + x.id, ruleBody(x));
      rulesStatus.className = 'form-status ok';
      rulesStatus.textContent = `Order saved (${changed.length} rule${changed.length === 1 ? '' : 's'} renumbered).`;
    } catch (e) {
      rulesStatus.className = 'form-status error';
      rulesStatus.textContent = 'Reorder failed: ' + errorText(e);
    }
    await loadRules();
    const row = rulesBox.querySelector(`tr[data-rule-id="${r.id}"] button[aria-label^="Move rule ${r.id} ${to < from ? 'up' : 'down'}"]`);
    if (row && !row.disabled) row.focus();
  }

  async function saveRule(r, okText, onFail) {
    try {
      await api('PUT', '/rules/' + r.id, ruleBody(r));
      rulesStatus.className = 'form-status ok'; rulesStatus.textContent = okText;
      await loadRules();
    } catch (e) {
      rulesStatus.className = 'form-status error'; rulesStatus.textContent = errorText(e);
      if (onFail) onFail();
    }
  }

  async function del(r) {
    if (!confirm(`Delete rule ${r.id} (${matchText(r.match)})?`)) return;
    try {
      await api('DELETE', '/rules/' + r.id);
      rulesStatus.className = 'form-status ok'; rulesStatus.textContent = `Rule ${r.id} deleted.`;
      loadRules();
    } catch (e) { rulesStatus.className = 'form-status error'; rulesStatus.textContent = errorText(e); }
  }

  function ruleBody(r) {
    const { hits, last_hit_at, created_at, updated_at, ...rest } = r;
    return rest;
  }

  function buildRuleForm() {
    let editing = null;
    const title = h('h3', {}, 'New rule');
    const priority = h('input', { type: 'number', step: '1', value: '100' });
    const enabled = h('input', { type: 'checkbox', checked: true });
    const match = Object.fromEntries(MATCH_FIELDS.map(([k]) => [k, h('input', { type: 'text', spellcheck: 'false' })]));
    const decision = h('select', {}, ['permit', 'deny', 'divert'].map(d => h('option', { value: d }, d)));
    const destination = h('input', { type: 'text' });
    const announce = h('input', { type: 'text' });
    const reason = h('select', {}, h('option', { value: '' }, '(none)'), REASONS.map(r => h('option', { value: r }, r)));
    const callingName = h('input', { type: 'text', spellcheck: 'false' });
    const description = h('input', { type: 'text' });
    const cancel = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Cancel edit');
    const form = h('form', { id: 'rule-form', novalidate: true }, title,
      h('div', { class: 'row' }, field('Priority', 'priority', priority, 'Lower runs first'),
        h('div', { class: 'field check', dataset: { field: 'enabled' } }, enabled, h('label', { for: 'rule-enabled' }, 'Enabled'), h('span', { class: 'field-error' }))),
      h('fieldset', {}, h('legend', {}, 'Match (empty fields match anything)'),
        h('div', { class: 'row' }, MATCH_FIELDS.map(([k, label]) => field(label, 'match.' + k, match[k], k.includes('calling') || k.includes('called') ? PATTERN_HINT : null)))),
      h('fieldset', {}, h('legend', {}, 'Action'),
        h('div', { class: 'row' }, field('Decision', 'action.decision', decision), field('Divert destination', 'action.destination', destination),
          field('Announcement', 'action.announce', announce, 'e.g. user_unavailable'), field('Reason (sent to CUCM)', 'action.reason', reason),
          field('Calling name', 'action.modify.calling_name', callingName, 'A name, or directory:<id> to name the caller from a directory'))),
      field('Description', 'description', description),
      h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Save rule'), cancel), statusLine());
    enabled.id = 'rule-enabled';
    const reset = () => {
      editing = null; title.textContent = 'New rule'; cancel.hidden = true;
      priority.value = String(((rules[rules.length - 1] || {}).priority || 0) + 10);
      enabled.checked = true; Object.values(match).forEach(i => { i.value = ''; });
      decision.value = 'deny'; destination.value = announce.value = reason.value = description.value = callingName.value = '';
    };
    cancel.addEventListener('click', () => { reset(); clearErrors(form); });
    form.addEventListener('submit', async ev => {
      ev.preventDefault(); clearErrors(form);
      const m = {};
      for (const [k, i] of Object.entries(match)) if (i.value.trim()) m[k] = i.value.trim();
      const base = editing ? ruleBody(editing) : {};
      const action = { ...(base.action || {}), decision: decision.value };
      for (const [k, i] of [['destination', destination], ['announce', announce], ['reason', reason]]) {
        if (i.value.trim()) action[k] = i.value.trim(); else delete action[k];
      }
      const modify = { ...(action.modify || {}) };
      if (callingName.value.trim()) modify.calling_name = callingName.value.trim(); else delete modify.calling_name;
      if (Object.keys(modify).length) action.modify = modify; else delete action.modify;
      const body = { ...base, priority: priority.value === '' ? 0 : Number(priority.value), enabled: enabled.checked, match: m, action, description: description.value.trim() };
      if (!Number.isInteger(body.priority)) { showError(form, { field: 'priority', message: 'priority: a whole number is required' }); return; }
      try {
        const saved = editing ? await api('PUT', '/rules/' + editing.id, body) : await api('POST', `/policies/${encodeURIComponent(pid)}/rules`, body);
        await loadRules();
        reset();
        setStatus(form, `Rule ${saved.id} saved.`, 'ok');
      } catch (e) { showError(form, e); }
    });
    form.edit = r => {
      editing = r; title.textContent = `Edit rule ${r.id}`; cancel.hidden = false; clearErrors(form);
      priority.value = String(r.priority); enabled.checked = r.enabled;
      for (const [k, i] of Object.entries(match)) i.value = r.match[k] || '';
      decision.value = r.action.decision; destination.value = r.action.destination || '';
      announce.value = r.action.announce || ''; reason.value = r.action.reason || ''; description.value = r.description || '';
      callingName.value = (r.action.modify && r.action.modify.calling_name) || '';
      form.scrollIntoView({ block: 'nearest' }); priority.focus();
    };
    form.reset2 = reset;
    return form;
  }

  // Lists.
  let listKind = 'block';
  const listBox = h('div', { 'aria-live': 'polite', id: 'list-entries' });
  const listStatus = statusLine();
  const search = h('input', { type: 'search', id: 'list-search', placeholder: 'number or note' });
  let searchTimer = 0;
  search.addEventListener('input', () => { clearTimeout(searchTimer); searchTimer = setTimeout(loadList, 250); });
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'List' }, ['block', 'allow'].map(k =>
    h('button', { type: 'button', role: 'tab', id: 'tab-' + k, 'aria-selected': String(k === listKind), onclick: () => {
      listKind = k; tabs.querySelectorAll('button').forEach(b => b.setAttribute('aria-selected', String(b.id === 'tab-' + k))); loadList();
    } }, k === 'block' ? 'Block list' : 'Allow list')));
  const eCalling = h('input', { type: 'text' }), eCalled = h('input', { type: 'text' });
  const eExpires = h('input', { type: 'datetime-local' }), eNote = h('input', { type: 'text' });
  const eAct = actionFields('action', ['', 'deny', 'divert', 'permit'], '');
  const entryForm = h('form', { id: 'entry-form' }, h('div', { class: 'row' },
    field('Calling', 'calling', eCalling, LIST_HINT), field('Called (optional)', 'called', eCalled),
    field('Expires (optional)', 'expires_at', eExpires), field('Note', 'note', eNote)),
  h('details', {}, h('summary', {}, 'This entry\'s own action (empty: the list\'s)'), eAct.row),
  h('button', { type: 'submit' }, 'Add entry'), statusLine());
  entryForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(entryForm);
    const body = { calling: eCalling.value.trim(), called: eCalled.value.trim(), note: eNote.value.trim() };
    if (eExpires.value) body.expires_at = new Date(eExpires.value).toISOString();
    const ea = eAct.get();
    if (ea) body.action = ea;
    try {
      await api('POST', listPath(), body);
      setStatus(entryForm, 'Entry added.', 'ok');
      eCalling.value = eCalled.value = eNote.value = eExpires.value = ''; eAct.set(null);
      loadList();
    } catch (e) { showError(entryForm, e); }
  });
  const csvFile = h('input', { type: 'file', accept: '.csv,text/csv' });
  const importForm = h('form', { id: 'import-form' }, h('div', { class: 'toolbar' },
    field('CSV file (calling,called,expires_at,note,action)', 'csv', csvFile),
    h('button', { type: 'submit' }, 'Import'),
    h('button', { type: 'button', class: 'secondary', id: 'export-csv', onclick: exportCSV }, 'Export CSV')), statusLine());
  importForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(importForm);
    const f = csvFile.files[0];
    if (!f) { showError(importForm, { field: 'csv', message: 'Choose a CSV file first.' }); return; }
    try {
      const r = await api('POST', listPath(), { raw: await f.text(), type: 'text/csv' });
      setStatus(importForm, `Imported ${r.entries.length} entr${r.entries.length === 1 ? 'y' : 'ies'} into the ${listKind} list.`, 'ok');
      csvFile.value = '';
      loadList();
    } catch (e) { showError(importForm, e); }
  });
  async function exportCSV() {
    try {
      const blob = await api('GET', listPath() + '?format=csv', undefined, { blob: true });
      download(blob, `${pid}-${listKind}.csv`);
      setStatus(importForm, 'Exported.', 'ok');
    } catch (e) { setStatus(importForm, errorText(e), 'error'); }
  }
  function listPath() { return `/policies/${encodeURIComponent(pid)}/lists/${listKind}/entries`; }
  async function loadList() {
    const q = search.value.trim();
    try {
      const r = await api('GET', listPath() + (q ? '?q=' + encodeURIComponent(q) : ''));
      replace(listBox, h('div', { class: 'scroll' }, table(`${listKind === 'block' ? 'Block' : 'Allow'} list of ${pid}: ${r.entries.length} entr${r.entries.length === 1 ? 'y' : 'ies'}${q ? ` matching “${q}”` : ''}`,
        ['Calling', 'Called', 'Expires', 'Note', 'Action', ''], r.entries.map(e => h('tr', {},
          h('td', { class: 'mono' }, e.calling), h('td', { class: 'mono' }, e.called || ''), h('td', {}, e.expires_at ? fmtTime(e.expires_at) : 'never'),
          h('td', {}, e.action ? actionText(e.action) : 'the list\'s'),
          h('td', {}, e.note || ''), h('td', {}, h('button', { type: 'button', class: 'danger small', 'aria-label': 'Delete entry ' + e.calling, onclick: async () => {
            try { await api('DELETE', listPath() + '/' + e.id); loadList(); } catch (err) { listStatus.className = 'form-status error'; listStatus.textContent = errorText(err); }
          } }, 'Delete')))), q ? 'No entry matches.' : 'The list is empty.')));
    } catch (e) { replace(listBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }

  // Test a call.
  const tIn = Object.fromEntries(MATCH_FIELDS.map(([k]) => [k, h('input', { type: 'text', spellcheck: 'false' })]));
  const result = h('div', { id: 'eval-result', 'aria-live': 'polite' });
  const testForm = h('form', { id: 'test-form' },
    h('div', { class: 'row' }, MATCH_FIELDS.map(([k, label]) => field(label, k, tIn[k]))),
    h('button', { type: 'submit' }, 'Test'), statusLine(), result);
  testForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(testForm); replace(result);
    const call = {};
    for (const [k, i] of Object.entries(tIn)) if (i.value.trim()) call[k] = i.value.trim();
    try {
      const r = await api('POST', `/policies/${encodeURIComponent(pid)}/evaluate`, call);
      const d = r.decision;
      result.dataset.decision = d.action.decision;
      replace(result, h('p', { class: 'decision' }, 'Decision: ', h('span', { class: 'badge b-' + d.action.decision, id: 'eval-decision' }, d.action.decision),
        ' ', actionText(d.action).slice(d.action.decision.length)),
      h('dl', { class: 'kv' }, h('dt', {}, 'Why'), h('dd', { id: 'eval-why' }, d.explanation || d.step),
        h('dt', {}, 'Step'), h('dd', {}, d.step),
        d.rule_id ? [h('dt', {}, 'Rule'), h('dd', {}, String(d.rule_id))] : null,
        d.entry_id ? [h('dt', {}, 'List entry'), h('dd', {}, String(d.entry_id))] : null,
        d.matched_form ? [h('dt', {}, 'Matched on'), h('dd', { id: 'eval-form' }, d.matched_form.replaceAll('_', ' '))] : null,
        d.name_lookup ? [h('dt', {}, 'Caller name'), h('dd', { id: 'eval-name' }, d.name_lookup)] : null,
        h('dt', {}, 'Note'), h('dd', { class: 'muted' }, 'Dry run: no hit counted, no rate limit, nothing logged.')));
    } catch (e) { showError(testForm, e); }
  });

  // Call log.
  const cNumber = h('input', { type: 'search' });
  const cDecision = h('select', {}, h('option', { value: '' }, 'any'), ['permit', 'deny', 'divert', 'indeterminate'].map(d => h('option', { value: d }, d)));
  const cSince = h('select', {}, [['-15m', 'last 15 minutes'], ['-1h', 'last hour'], ['-24h', 'last 24 hours'], ['', 'all kept']].map(([v, l]) => h('option', { value: v }, l)));
  const cPolicyOnly = h('input', { type: 'checkbox' });
  const cSource = h('select', { id: 'calls-source' }, h('option', { value: 'log' }, 'Call log (this store)'),
    h('option', { value: 'stream' }, 'CALLS stream (every node, from Kafka)'));
  const tail = h('input', { type: 'checkbox', id: 'tail' });
  const callsBox = h('div', { id: 'calls', 'aria-live': 'off' });
  const callsForm = h('form', { id: 'calls-form' }, h('div', { class: 'toolbar' },
    field('Source', 'source', cSource), field('Number', 'number', cNumber), field('Decision', 'decision', cDecision), field('Since', 'since', cSince),
    h('div', { class: 'field check' }, cPolicyOnly, h('label', { for: 'calls-policy-only' }, 'This policy only')),
    h('button', { type: 'submit' }, 'Search'),
    h('div', { class: 'field check' }, tail, h('label', { for: 'tail' }, 'Live tail (every 2 s)'))), statusLine(), callsBox);
  cPolicyOnly.id = 'calls-policy-only';
  cSource.id = 'calls-source';
  callsForm.addEventListener('submit', ev => { ev.preventDefault(); loadCalls(); });
  let stopTail = null;
  tail.addEventListener('change', () => {
    if (stopTail) { stopTail(); stopTail = null; }
    if (tail.checked) stopTail = every(2000, loadCalls);
  });
  stops.push(() => stopTail && stopTail());
  // A caller who presented no number in either form shows as anonymous; the
  // transformed (usually globalized) form is the cell's title.
  function callingCell(c) {
    if (!c.calling && !c.transformed_calling) return h('td', { class: 'muted' }, 'anonymous');
    return h('td', { class: 'mono', title: c.transformed_calling || '' }, c.calling || c.transformed_calling);
  }
  cSource.addEventListener('change', () => { cSince.disabled = cSource.value === 'stream'; loadCalls(); });
  async function loadCalls() {
    clearErrors(callsForm);
    if (cSource.value === 'stream') return loadStream();
    const q = new URLSearchParams({ limit: '100' });
    if (cNumber.value.trim()) q.set('number', cNumber.value.trim());
    if (cDecision.value) q.set('decision', cDecision.value);
    if (cSince.value) q.set('since', cSince.value);
    if (cPolicyOnly.checked) q.set('policy', pid);
    try {
      const r = await api('GET', '/calls?' + q);
      replace(callsBox, h('div', { class: 'scroll' }, table(`Calls, newest first (${r.calls.length}${r.calls.length === 100 ? '+' : ''})`,
        ['Time', 'Policy', 'Calling', 'Called', 'Decision', 'Step', 'Rule', 'Sent to CUCM', 'Latency'], r.calls.map(c => h('tr', {},
          h('td', {}, fmtTime(c.time)), h('td', {}, c.policy), callingCell(c), h('td', { class: 'mono', title: c.transformed_called || '' }, c.called),
          h('td', {}, h('span', { class: 'badge b-' + c.decision }, c.decision)),
          h('td', { title: c.matched_form ? 'matched on ' + c.matched_form.replaceAll('_', ' ') : '' }, c.step), h('td', {}, c.rule_id ? String(c.rule_id) : ''),
          h('td', { class: c.error ? 'muted' : 'mono' }, c.sent || c.error || ''),
          h('td', { class: 'num' }, c.latency_us + ' µs'))), 'No calls match.')));
    } catch (e) { showError(callsForm, e); }
  }
  // The newest records on the CALLS topic, as a SIEM reading it gets them,
  // filtered here by number, decision and policy.
  async function loadStream() {
    try {
      const num = cNumber.value.trim();
      const recs = (await api('GET', '/calls/stream?limit=200')).records.filter(c =>
        (!num || [c.calling, c.called, c.transformed_calling, c.transformed_called].some(x => x && x.includes(num))) &&
        (!cDecision.value || c.decision === cDecision.value) && (!cPolicyOnly.checked || c.policy === pid));
      replace(callsBox, h('div', { class: 'scroll' }, table(`CALLS stream, newest first (${recs.length})`,
        ['Time', 'Node', 'Policy', 'Calling', 'Called', 'Decision', 'Step', 'Rule', 'Sent to CUCM', 'Latency'], recs.map(c => h('tr', {},
          h('td', {}, fmtTime(c.time)), h('td', { class: 'mono' }, c.node), h('td', {}, c.policy), callingCell(c),
          h('td', { class: 'mono', title: c.transformed_called || '' }, c.called),
          h('td', {}, h('span', { class: 'badge b-' + c.decision }, c.decision)), h('td', {}, c.step),
          h('td', {}, c.rule_id ? String(c.rule_id) : ''), h('td', { class: c.error ? 'muted' : 'mono' }, c.sent || c.error || ''),
          h('td', { class: 'num' }, c.latency_us + ' µs'))), 'No call records on the stream yet.')));
    } catch (e) { showError(callsForm, e); }
  }

  root.append(
    h('div', { class: 'card' }, h('h2', {}, 'Policy'),
      h('div', { class: 'toolbar' }, h('div', { class: 'field' }, h('label', { for: 'policy-select' }, 'Policy shown below'), select)), polStatus,
      h('details', {}, h('summary', {}, 'Create a policy'), polForm),
      h('details', { id: 'policy-settings' }, h('summary', {}, 'Default action, list actions and rate limits'), settingsForm)),
    h('div', { class: 'card' }, h('h2', {}, 'Rules'),
      h('p', { class: 'muted' }, 'Drag a row, or use ↑ ↓, to change the order; the new priorities are saved at once.'),
      rulesStatus, rulesBox, ruleForm),
    h('div', { class: 'grid' },
      h('div', { class: 'card' }, h('h2', {}, 'Allow and block lists'), tabs,
        h('div', { class: 'toolbar' }, h('div', { class: 'field' }, h('label', { for: 'list-search' }, 'Search'), search)),
        listStatus, listBox, h('h3', {}, 'Add an entry'), entryForm, h('h3', {}, 'Import and export'), importForm),
      h('div', { class: 'card' }, h('h2', {}, 'Test a call'), h('p', { class: 'muted' }, 'Evaluates the call against the live policy without side effects.'), testForm)),
    h('div', { class: 'card' }, h('h2', {}, 'Call log'), callsForm));

  function loadAll() { loadRules().then(() => ruleForm.reset2()); loadList(); loadCalls(); }
  loadPolicies().then(loadAll);
  return () => stops.forEach(f => f());
}

