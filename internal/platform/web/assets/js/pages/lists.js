// Shared lists: block and allow lists several policies use (a global fraud
// list), and number groups rules match with group:<id>.
import { api, h, replace, table, field, statusLine, clearErrors, showError, setStatus, fmtNum, download, errorText, actionFields } from '../ui.js';

const SEL_KEY = 'signalbox.list';
const KINDS = { block: 'Block list', allow: 'Allow list', group: 'Number group' };

export function render(root) {
  let lid = sessionStorage.getItem(SEL_KEY) || '';
  let lists = [];
  const listBox = h('div', { id: 'shared-lists', 'aria-live': 'polite' });

  const cId = h('input', { type: 'text', required: true }), cName = h('input', { type: 'text', required: true });
  const cKind = h('select', {}, Object.entries(KINDS).map(([k, l]) => h('option', { value: k }, l)));
  const cPolicies = h('input', { type: 'text', placeholder: 'every policy' });
  const cAct = actionFields('action', ['', 'deny', 'divert', 'permit'], '');
  const actBox = h('details', {}, h('summary', {}, 'What a hit does (empty: the policy\'s list action)'), cAct.row);
  cKind.addEventListener('change', () => { actBox.hidden = cKind.value === 'group'; cPolicies.disabled = cKind.value === 'group'; });
  const createForm = h('form', { id: 'list-form' },
    h('div', { class: 'row' }, field('Id', 'id', cId, 'Lower-case; a group is named in rules as group:<id>'), field('Name', 'name', cName),
      field('Kind', 'kind', cKind), field('Applies to policies', 'policies', cPolicies, 'Comma-separated ids; empty: every policy')),
    actBox, h('button', { type: 'submit' }, 'Create list'), statusLine());
  createForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(createForm);
    const body = { id: cId.value.trim(), name: cName.value.trim(), kind: cKind.value };
    if (cKind.value !== 'group') {
      const ps = cPolicies.value.split(',').map(x => x.trim()).filter(Boolean);
      if (ps.length) body.policies = ps;
      const a = cAct.get();
      if (a) body.action = a;
    }
    try {
      const l = await api('POST', '/lists', body);
      setStatus(createForm, `List "${l.id}" created.`, 'ok');
      cId.value = cName.value = cPolicies.value = ''; cAct.set(null);
      select(l.id); loadLists();
    } catch (e) { showError(createForm, e); }
  });

  function select(id) { lid = id; sessionStorage.setItem(SEL_KEY, id); }
  function appliesTo(l) { return l.kind === 'group' ? 'rules naming group:' + l.id : (l.policies && l.policies.length ? l.policies.join(', ') : 'every policy'); }

  async function loadLists() {
    try {
      lists = (await api('GET', '/lists')).lists;
      if (!lists.some(l => l.id === lid)) lid = lists.length ? lists[0].id : '';
      replace(listBox, table('Shared lists and groups', ['Id', 'Name', 'Kind', 'Applies to', 'Entries', ''], lists.map(l => h('tr', { dataset: { list: l.id } },
        h('td', { class: 'mono' }, l.id), h('td', {}, l.name), h('td', {}, KINDS[l.kind] || l.kind), h('td', {}, appliesTo(l)),
        h('td', { class: 'num' }, fmtNum(l.entries)),
        h('td', {}, h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'secondary small', 'aria-label': 'Open list ' + l.id, onclick: () => { select(l.id); drawSelected(true); } }, 'Open'),
          h('button', { type: 'button', class: 'danger small', 'aria-label': 'Delete list ' + l.id, onclick: () => delList(l) }, 'Delete'))))),
      'No shared lists: create a block list every policy enforces, or a group rules can match.'));
      drawSelected(false);
    } catch (e) { replace(listBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }

  async function delList(l) {
    if (!confirm(`Delete ${KINDS[l.kind].toLowerCase()} ${l.id} and its ${l.entries} entries?`)) return;
    try {
      await api('DELETE', '/lists/' + encodeURIComponent(l.id));
      setStatus(createForm, `List "${l.id}" deleted.`, 'ok');
      loadLists();
    } catch (e) { setStatus(createForm, errorText(e), 'error'); }
  }

  const selBox = h('div', { id: 'list-open' });
  const entriesBox = h('div', { id: 'shared-entries', 'aria-live': 'polite' });
  const eCalling = h('input', { type: 'text' }), eNote = h('input', { type: 'text' });
  const entryForm = h('form', { id: 'shared-entry-form' }, h('div', { class: 'row' },
    field('Number', 'calling', eCalling, 'Exact digits, prefix:+1900, pattern:9.1[2-9]XXXXXX, or group:<id> in a group'), field('Note', 'note', eNote)),
  h('button', { type: 'submit' }, 'Add entry'), statusLine());
  entryForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(entryForm);
    try {
      await api('POST', entriesPath(), { calling: eCalling.value.trim(), note: eNote.value.trim() });
      setStatus(entryForm, 'Entry added.', 'ok');
      eCalling.value = eNote.value = '';
      loadEntries(); loadLists();
    } catch (e) { showError(entryForm, e); }
  });
  const csvFile = h('input', { type: 'file', accept: '.csv,text/csv' });
  const importForm = h('form', { id: 'shared-import-form' }, h('div', { class: 'toolbar' },
    field('CSV file (calling,called,expires_at,note,action)', 'csv', csvFile), h('button', { type: 'submit' }, 'Import'),
    h('button', { type: 'button', class: 'secondary', onclick: exportCSV }, 'Export CSV')), statusLine());
  importForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(importForm);
    const f = csvFile.files[0];
    if (!f) { showError(importForm, { field: 'csv', message: 'Choose a CSV file first.' }); return; }
    try {
      const r = await api('POST', entriesPath(), { raw: await f.text(), type: 'text/csv' });
      setStatus(importForm, `Imported ${r.entries.length} entr${r.entries.length === 1 ? 'y' : 'ies'}.`, 'ok');
      csvFile.value = '';
      loadEntries(); loadLists();
    } catch (e) { showError(importForm, e); }
  });
  async function exportCSV() {
    try { download(await api('GET', entriesPath() + '?format=csv', undefined, { blob: true }), `list-${lid}.csv`); } catch (e) { setStatus(importForm, errorText(e), 'error'); }
  }
  function entriesPath() { return `/lists/${encodeURIComponent(lid)}/entries`; }

  async function loadEntries() {
    try {
      const r = await api('GET', entriesPath());
      replace(entriesBox, h('div', { class: 'scroll' }, table(`Entries of ${lid} (${r.entries.length})`, ['Number', 'Called', 'Note', ''], r.entries.map(e => h('tr', {},
        h('td', { class: 'mono' }, e.calling), h('td', { class: 'mono' }, e.called || ''), h('td', {}, e.note || ''),
        h('td', {}, h('button', { type: 'button', class: 'danger small', 'aria-label': 'Delete entry ' + e.calling, onclick: async () => {
          try { await api('DELETE', `${entriesPath()}/${e.id}`); loadEntries(); loadLists(); } catch (err) { setStatus(entryForm, errorText(err), 'error'); }
        } }, 'Delete')))), 'The list is empty.')));
    } catch (e) { replace(entriesBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }

  function drawSelected(force) {
    const l = lists.find(x => x.id === lid);
    if (!l) { replace(selBox); return; }
    if (!force && selBox.dataset.list === lid) return;
    selBox.dataset.list = lid;
    replace(selBox, h('h2', {}, `${KINDS[l.kind]} ${l.name} (${l.id})`),
      h('p', { class: 'muted' }, l.kind === 'group' ? `Rules match it with group:${l.id} in a number field; an entry group:<id> includes another group.`
        : `Checked by ${appliesTo(l)} after the policy's own ${l.kind} list.`),
      entriesBox, h('h3', {}, 'Add an entry'), entryForm, h('h3', {}, 'Import and export'), importForm);
    loadEntries();
  }

  root.append(
    h('div', { class: 'card' }, h('h2', {}, 'Shared lists and number groups'), listBox, h('details', {}, h('summary', {}, 'Create a list or group'), createForm)),
    h('div', { class: 'card' }, selBox));
  loadLists();
}
