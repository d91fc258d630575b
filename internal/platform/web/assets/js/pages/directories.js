// Directories: caller-name directories (number or prefix → the name CUCM
// shows), with search, single entries, CSV import (add or replace) and
// export. A rule or policy names callers from one with the calling name
// directory:<id>.
import { api, h, replace, table, field, statusLine, clearErrors, showError, setStatus, fmtNum, fmtTime, download, errorText } from '../ui.js';

const SEL_KEY = 'signalbox.directory';

export function render(root) {
  let did = sessionStorage.getItem(SEL_KEY) || '';
  let dirs = [];

  const listBox = h('div', { id: 'directories', 'aria-live': 'polite' });
  const dId = h('input', { type: 'text', required: true, pattern: '[a-z0-9][a-z0-9_-]{0,63}' });
  const dName = h('input', { type: 'text', required: true });
  const dFallback = h('input', { type: 'text' });
  const createForm = h('form', { id: 'directory-form' },
    h('div', { class: 'row' }, field('Id', 'id', dId, 'Lower-case; rules name callers with directory:<id>'),
      field('Name', 'name', dName), field('Fallback name (optional)', 'fallback_name', dFallback, 'Sent when the caller is in no entry; empty leaves the name alone')),
    h('button', { type: 'submit' }, 'Create directory'), statusLine());
  createForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(createForm);
    try {
      const d = await api('POST', '/directories', { id: dId.value.trim(), name: dName.value.trim(), fallback_name: dFallback.value.trim() });
      setStatus(createForm, `Directory "${d.id}" created.`, 'ok');
      dId.value = dName.value = dFallback.value = '';
      select(d.id);
      await loadDirs();
    } catch (e) { showError(createForm, e); }
  });

  async function loadDirs() {
    try {
      dirs = (await api('GET', '/directories')).directories;
      if (!dirs.some(d => d.id === did)) did = dirs.length ? dirs[0].id : '';
      replace(listBox, table('Directories', ['Id', 'Name', 'Entries', 'Fallback', 'Updated', ''], dirs.map(d => h('tr', { dataset: { directory: d.id }, 'aria-current': d.id === did ? 'true' : null },
        h('td', { class: 'mono' }, d.id), h('td', {}, d.name), h('td', { class: 'num' }, fmtNum(d.entries)), h('td', {}, d.fallback_name || ''),
        h('td', {}, fmtTime(d.updated_at)),
        h('td', {}, h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'secondary small', 'aria-label': 'Open directory ' + d.id, onclick: () => { select(d.id); loadDirs(); } }, 'Open'),
          h('button', { type: 'button', class: 'danger small', 'aria-label': 'Delete directory ' + d.id, onclick: () => delDir(d) }, 'Delete'))))),
      'No directories yet: create one below, then import a CSV of number,name[,match].'));
      drawSelected();
    } catch (e) { replace(listBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }

  function select(id) { did = id; sessionStorage.setItem(SEL_KEY, id); }

  async function delDir(d) {
    if (!confirm(`Delete directory ${d.id} and its ${d.entries} entries?`)) return;
    try {
      await api('DELETE', '/directories/' + encodeURIComponent(d.id));
      setStatus(createForm, `Directory "${d.id}" deleted.`, 'ok');
      loadDirs();
    } catch (e) { setStatus(createForm, errorText(e), 'error'); }
  }

  // The open directory: search, entries, add, import, export.
  const selBox = h('div', { id: 'directory-open' });
  const sNumber = h('input', { type: 'search', id: 'dir-search-number', placeholder: '+1972' });
  const sName = h('input', { type: 'search', id: 'dir-search-name', placeholder: 'smith' });
  const entriesBox = h('div', { id: 'directory-entries', 'aria-live': 'polite' });
  let timer = 0;
  for (const i of [sNumber, sName]) i.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(() => loadEntries(), 250); });
  const eNumber = h('input', { type: 'text' }), eName = h('input', { type: 'text' });
  const eMatch = h('select', {}, h('option', { value: 'exact' }, 'exact number'), h('option', { value: 'prefix' }, 'prefix (a number range)'));
  const entryForm = h('form', { id: 'dir-entry-form' }, h('div', { class: 'row' },
    field('Number', 'number', eNumber, '+1 (972) 555-0100 is stored as +19725550100'), field('Name', 'name', eName), field('Match', 'match', eMatch)),
  h('button', { type: 'submit' }, 'Add or rename'), statusLine());
  entryForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(entryForm);
    try {
      const r = await api('POST', entriesPath(), { number: eNumber.value, name: eName.value, match: eMatch.value });
      setStatus(entryForm, r.change.added ? 'Entry added.' : r.change.changed ? 'Entry renamed.' : 'Already there, unchanged.', 'ok');
      eNumber.value = eName.value = '';
      loadEntries(); loadDirs();
    } catch (e) { showError(entryForm, e); }
  });
  const csvFile = h('input', { type: 'file', accept: '.csv,text/csv' });
  const mode = h('select', {}, h('option', { value: 'PUT' }, 'replace the whole directory'), h('option', { value: 'POST' }, 'add and rename only'));
  const importForm = h('form', { id: 'dir-import-form' }, h('div', { class: 'toolbar' },
    field('CSV file (number,name[,match])', 'csv', csvFile), field('Import', 'mode', mode),
    h('button', { type: 'submit' }, 'Import'),
    h('button', { type: 'button', class: 'secondary', id: 'dir-export', onclick: exportCSV }, 'Export CSV')), statusLine());
  importForm.addEventListener('submit', async ev => {
    ev.preventDefault(); clearErrors(importForm);
    const f = csvFile.files[0];
    if (!f) { showError(importForm, { field: 'csv', message: 'Choose a CSV file first.' }); return; }
    setStatus(importForm, 'Importing…', '');
    try {
      const r = await api(mode.value, entriesPath(), { raw: await f.text(), type: 'text/csv' });
      const c = r.change;
      setStatus(importForm, `Imported ${fmtNum(r.read.entries)} entries: ${fmtNum(c.added)} added, ${fmtNum(c.changed)} renamed, ${fmtNum(c.removed)} removed, ${fmtNum(c.unchanged)} unchanged` +
        (r.read.names_cut ? `; ${fmtNum(r.read.names_cut)} names cut to 64 bytes.` : '.'), 'ok');
      csvFile.value = '';
      loadEntries(); loadDirs();
    } catch (e) { showError(importForm, e); }
  });
  async function exportCSV() {
    try {
      download(await api('GET', entriesPath() + '?format=csv', undefined, { blob: true }), `directory-${did}.csv`);
      setStatus(importForm, 'Exported.', 'ok');
    } catch (e) { setStatus(importForm, errorText(e), 'error'); }
  }
  function entriesPath() { return `/directories/${encodeURIComponent(did)}/entries`; }

  async function loadEntries() {
    if (!did) return;
    const q = new URLSearchParams({ limit: '200' });
    if (sNumber.value.trim()) q.set('number', sNumber.value.trim());
    if (sName.value.trim()) q.set('name', sName.value.trim());
    try {
      const r = await api('GET', entriesPath() + '?' + q);
      replace(entriesBox, h('div', { class: 'scroll' }, table(`Entries of ${did} (${r.entries.length}${r.entries.length === 200 ? '+, refine the search' : ''})`,
        ['Number', 'Match', 'Name', ''], r.entries.map(e => h('tr', {},
          h('td', { class: 'mono' }, e.number), h('td', {}, e.match), h('td', {}, e.name),
          h('td', {}, h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete entry ${e.number}`, onclick: async () => {
            try {
              await api('DELETE', `${entriesPath()}/${encodeURIComponent(e.number)}?match=${e.match}`);
              loadEntries(); loadDirs();
            } catch (err) { setStatus(entryForm, errorText(err), 'error'); }
          } }, 'Delete')))), 'No entry matches.')));
    } catch (e) { replace(entriesBox, h('p', { class: 'form-status error' }, errorText(e))); }
  }

  function drawSelected() {
    const d = dirs.find(x => x.id === did);
    if (!d) { replace(selBox); return; }
    if (selBox.dataset.directory !== did) {
      selBox.dataset.directory = did;
      replace(selBox, h('h2', { id: 'dir-title' }, `Directory ${d.name} (${d.id})`),
        h('p', { class: 'muted' }, `Name callers from it: a rule or policy default action with calling name directory:${d.id}. An exact number beats a prefix; the longest prefix wins.`),
        h('div', { class: 'toolbar' }, h('div', { class: 'field' }, h('label', { for: 'dir-search-number' }, 'Number starts with'), sNumber),
          h('div', { class: 'field' }, h('label', { for: 'dir-search-name' }, 'Name contains'), sName)),
        entriesBox, h('h3', {}, 'Add or rename an entry'), entryForm, h('h3', {}, 'Import and export'), importForm);
      loadEntries();
    }
  }

  root.append(
    h('div', { class: 'card' }, h('h2', {}, 'Caller-name directories'), listBox, h('details', {}, h('summary', {}, 'Create a directory'), createForm)),
    h('div', { class: 'card' }, selBox));
  loadDirs();
}
