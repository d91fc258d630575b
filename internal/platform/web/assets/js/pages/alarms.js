// Alarms: the active list and the history of cleared alarms.
import { api, h, replace, table, every, fmtTime, fmtNum } from '../ui.js';

export function render(root) {
  const active = h('div', { 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const hist = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  root.append(h('div', { class: 'card' }, h('h2', {}, 'Active'), active),
    h('div', { class: 'card' }, h('h2', {}, 'History (cleared, newest first)'), hist));
  const sev = x => h('td', {}, h('span', { class: 'badge b-' + x.severity }, x.severity));
  return every(5000, async () => {
    try {
      const a = await api('GET', '/alarms?limit=200');
      replace(active, table('Active alarms', ['Severity', 'Kind', 'Source', 'Description', 'First seen', 'Last seen', 'Count'],
        a.active.map(x => h('tr', {}, sev(x), h('td', {}, x.kind), h('td', {}, x.source), h('td', {}, x.description),
          h('td', {}, fmtTime(x.first_seen)), h('td', {}, fmtTime(x.last_seen)), h('td', { class: 'num' }, fmtNum(x.count)))),
        'No active alarms.', true));
      replace(hist, table('Cleared alarms', ['Severity', 'Kind', 'Source', 'Description', 'Raised', 'Cleared', 'Count'],
        a.history.map(x => h('tr', {}, sev(x), h('td', {}, x.kind), h('td', {}, x.source), h('td', {}, x.description),
          h('td', {}, fmtTime(x.first_seen)), h('td', {}, fmtTime(x.cleared_at)), h('td', { class: 'num' }, fmtNum(x.count)))),
        'No alarm has been cleared yet.', true));
    } catch (e) { replace(active, h('p', { class: 'form-status error' }, e.message)); }
  });
}
