// About: version and build information.
import { api, h, replace } from '../ui.js';

export function render(root) {
  const box = h('div', { class: 'card', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  root.append(box, h('div', { class: 'card' }, h('h2', {}, 'Endpoints'), h('ul', {},
    h('li', {}, 'REST API: ', h('code', {}, '/api/v1'), ' (bearer token)'),
    h('li', {}, h('a', { href: '/metrics' }, 'Prometheus metrics'), ' · ', h('a', { href: '/healthz' }, 'liveness'), ' · ', h('a', { href: '/readyz' }, 'readiness')),
    h('li', {}, 'Charts drawn with uPlot (MIT), bundled in the binary.'))));
  api('GET', '/version').then(v => replace(box, h('h2', {}, 'signalbox'), h('dl', { class: 'kv', id: 'version' },
    h('dt', {}, 'Version'), h('dd', {}, v.version),
    h('dt', {}, 'Go'), h('dd', {}, v.go),
    h('dt', {}, 'Config store'), h('dd', {}, v.store),
    h('dt', {}, 'Config version'), h('dd', {}, String(v.config_version)))))
    .catch(e => replace(box, h('p', { class: 'form-status error' }, e.message)));
}
