// main.js: sign-in, the page router (#/page) and the navigation. Each page
// module exports render(main, ctx) and may return a cleanup function that
// stops its polling when the operator leaves the page.
import { api, h, replace, getToken, setToken, setCsrf, field, statusLine, showError, clearErrors, ApiError } from './ui.js';
import { StatsPoller } from './stats.js';
import * as overview from './pages/overview.js';
import * as policy from './pages/policy.js';
import * as directories from './pages/directories.js';
import * as lists from './pages/lists.js';
import * as director from './pages/director.js';
import * as alarms from './pages/alarms.js';
import * as webhooks from './pages/webhooks.js';
import * as traces from './pages/traces.js';
import * as settings from './pages/settings.js';
import * as about from './pages/about.js';

const PAGES = [
  ['overview', 'Overview', overview],
  ['policy', 'Call policy', policy],
  ['lists', 'Shared lists', lists],
  ['directories', 'Directories', directories],
  ['director', 'Director', director],
  ['traces', 'Traces', traces],
  ['alarms', 'Alarms', alarms],
  ['webhooks', 'Webhooks', webhooks],
  ['settings', 'Settings', settings],
  ['about', 'About', about],
];

const ctx = { role: '', name: '', sso: false, stats: new StatsPoller() };
let cleanup = null;

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');

// roleOf finds the token's role: only admins may list tokens, and only
// admins and tracers traces.
async function roleOf(token) {
  await api('GET', '/version', undefined, { token });
  try {
    await api('GET', '/tokens', undefined, { token });
    return 'admin';
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 403)) throw e;
  }
  try {
    await api('GET', '/traces', undefined, { token });
    return 'tracer';
  } catch (e) {
    if (e instanceof ApiError && (e.status === 403 || e.status === 503)) return 'viewer';
    throw e;
  }
}

// ssoSession asks whether the browser holds a sign-in session from the
// identity provider; it answers the session or null.
async function ssoSession() {
  try {
    return await api('GET', '/session', undefined, { base: '/auth', quiet: true });
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 404)) return null;
    throw e;
  }
}

async function ssoInfo() {
  try { return await api('GET', '/info', undefined, { base: '/auth', quiet: true }); } catch (_) { return { oidc: false }; }
}

function signInPage(message) {
  if (cleanup) { cleanup(); cleanup = null; }
  ctx.stats.halt();
  replace(nav);
  replace(who);
  document.body.dataset.signedIn = 'false';
  const input = h('input', { type: 'password', autocomplete: 'current-password', required: true, spellcheck: 'false' });
  const sso = h('div', { id: 'signin-sso' });
  const form = h('form', { class: 'card signin', id: 'signin-form' },
    h('h1', { tabindex: '-1' }, 'Sign in'),
    sso,
    h('p', {}, 'Paste an API token. The admin token is generated at first start and kept in the data directory: ',
      h('code', {}, 'cat signalbox-data/admin-token'), ' (a package install: ', h('code', {}, 'sudo cat /var/lib/signalbox/admin-token'),
      '), unless serve was started with -admin-token or SIGNALBOX_ADMIN_TOKEN. More tokens (viewer, tracer) are made under Settings.'),
    field('API token', 'token', input),
    h('button', { type: 'submit' }, 'Sign in'),
    statusLine());
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    clearErrors(form);
    const token = input.value.trim();
    try {
      const role = await roleOf(token);
      setToken(token);
      ctx.role = role;
      ctx.name = '';
      ctx.sso = false;
      startSession();
    } catch (e) {
      showError(form, e.status === 401 ? new ApiError(401, 'That token is not valid.', 'token') : e);
    }
  });
  replace(main, form);
  if (message) form.querySelector('.form-status').textContent = message;
  input.focus();
  ssoInfo().then(info => {
    if (!info.oidc) return;
    replace(sso,
      h('p', {}, h('a', { href: info.login, id: 'signin-oidc', class: 'button' }, 'Sign in with ' + info.provider)),
      h('p', {}, 'Or, for an API token:'));
  });
}

function startSession() {
  document.body.dataset.signedIn = 'true';
  document.body.dataset.role = ctx.role;
  replace(who,
    ctx.name ? h('span', { class: 'who-name', id: 'who-name' }, ctx.name) : null,
    h('span', { class: 'role role-' + ctx.role, id: 'role' }, ctx.role),
    h('button', { type: 'button', class: 'link', id: 'signout', onclick: signOut }, 'Sign out'));
  replace(nav, h('ul', {}, PAGES.map(([id, label]) =>
    h('li', {}, h('a', { href: '#/' + id, id: 'nav-' + id }, label)))));
  ctx.stats.start();
  if (!location.hash || location.hash === '#/') location.hash = '#/overview';
  route();
}

async function signOut() {
  if (ctx.sso) {
    try { await api('POST', '/logout', undefined, { base: '/auth', quiet: true }); } catch (e) { if (!(e instanceof ApiError && e.status === 401)) { alert('Sign-out failed: ' + e.message); return; } }
    setCsrf('');
  }
  setToken('');
  ctx.role = '';
  ctx.sso = false;
  history.replaceState(null, '', location.pathname);
  signInPage('Signed out.');
}

function route() {
  if (!ctx.role) return;
  const id = (location.hash.match(/^#\/([a-z]+)/) || [])[1] || 'overview';
  const page = PAGES.find(p => p[0] === id) || PAGES[0];
  if (cleanup) { cleanup(); cleanup = null; }
  nav.querySelectorAll('a').forEach(a => a.toggleAttribute('aria-current', a.id === 'nav-' + page[0]));
  nav.querySelectorAll('a[aria-current]').forEach(a => a.setAttribute('aria-current', 'page'));
  document.title = page[1] + ' · signalbox';
  const section = h('section', { class: 'page', id: 'page-' + page[0], 'aria-labelledby': 'h-' + page[0] });
  replace(main, section);
  section.append(h('h1', { id: 'h-' + page[0], tabindex: '-1' }, page[1]));
  if ((ctx.role === 'viewer' || ctx.role === 'tracer') && ['policy', 'lists', 'directories', 'director', 'webhooks', 'settings'].includes(page[0])) {
    section.append(h('p', { class: 'readonly-note', role: 'note' }, 'You have the ' + ctx.role + ' role: you can look, but the server refuses changes.'));
  }
  cleanup = page[2].render(section, ctx) || null;
  section.querySelector('h1').focus({ preventScroll: true });
}

window.addEventListener('hashchange', route);
window.addEventListener('signalbox:unauthorized', () => {
  setToken(''); setCsrf(''); ctx.role = '';
  signInPage(ctx.sso ? 'Your sign-in has ended; sign in again.' : 'Your token was refused; sign in again.');
});

(async () => {
  const token = getToken();
  if (!token) {
    try {
      const se = await ssoSession();
      if (!se) return signInPage();
      setCsrf(se.csrf);
      Object.assign(ctx, { role: se.role, name: se.name, sso: true });
      return startSession();
    } catch (e) {
      return signInPage(e.message);
    }
  }
  try {
    ctx.role = await roleOf(token);
    startSession();
  } catch (e) {
    signInPage(e.message);
  }
})();
