// ui.js: DOM building, the API client and small formatting helpers shared by
// every page. Content from the API is always inserted as text, never HTML.

const TOKEN_KEY = 'signalbox.token';

export function getToken() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) { t ? sessionStorage.setItem(TOKEN_KEY, t) : sessionStorage.removeItem(TOKEN_KEY); }

// A person signed in through the identity provider has a session cookie
// (HttpOnly: not readable here) and its CSRF token, sent with every call.
let csrfToken = '';
export function setCsrf(t) { csrfToken = t || ''; }

// h builds an element: h('button', {type: 'button', onclick: f}, 'Save').
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function replace(el, ...children) { el.replaceChildren(); append(el, children); return el; }

// ApiError carries the API's {"error","field"} and the HTTP status.
export class ApiError extends Error {
  constructor(status, message, field) { super(message); this.status = status; this.field = field || ''; }
}

// api calls the REST API with the session's token. body: an object (sent
// as JSON) or {raw, type} for other content types. Answers parsed JSON, the
// text for non-JSON answers, or null for 204.
export async function api(method, path, body, opts = {}) {
  const token = opts.token || getToken();
  const headers = token ? { Authorization: 'Bearer ' + token } : { 'X-CSRF-Token': csrfToken };
  let payload;
  if (body && body.raw !== undefined) { payload = body.raw; headers['Content-Type'] = body.type; }
  else if (body !== undefined) { payload = JSON.stringify(body); headers['Content-Type'] = 'application/json'; }
  if (opts.accept) headers.Accept = opts.accept;
  let resp;
  try {
    resp = await fetch((opts.base || '/api/v1') + path, { method, headers, body: payload, credentials: 'same-origin' });
  } catch (e) {
    throw new ApiError(0, 'cannot reach the server: ' + e.message);
  }
  if (resp.status === 401 && !opts.token && !opts.quiet) window.dispatchEvent(new CustomEvent('signalbox:unauthorized'));
  const ct = resp.headers.get('Content-Type') || '';
  if (!resp.ok) {
    let msg = resp.status + ' ' + resp.statusText, field = '';
    if (ct.includes('json')) { try { const e = await resp.json(); msg = e.error || msg; field = e.field || ''; } catch (_) { /* keep status */ } }
    throw new ApiError(resp.status, msg, field);
  }
  if (resp.status === 204) return null;
  if (opts.blob) return resp.blob();
  return ct.startsWith('application/json') ? resp.json() : resp.text(); // x-ndjson is text
}

// errorText says what went wrong, with the status for 403 so a viewer sees why.
export function errorText(e) {
  if (e instanceof ApiError && e.status === 403) return 'Not allowed (403): ' + e.message;
  return e.message || String(e);
}

// Forms: each input sits in a .field with data-field naming the API field
// (match.calling); an API error naming that field is shown next to it.
export function field(label, name, input, hint) {
  const id = 'f-' + name.replace(/[^a-z0-9]+/gi, '-') + '-' + (++fieldSeq);
  input.id = id;
  if (!input.name) input.name = name;
  const err = h('span', { class: 'field-error', id: id + '-err', role: 'alert' });
  input.setAttribute('aria-describedby', id + '-err' + (hint ? ' ' + id + '-hint' : ''));
  return h('div', { class: 'field', dataset: { field: name } },
    h('label', { for: id }, label), input,
    hint ? h('small', { id: id + '-hint', class: 'hint' }, hint) : null, err);
}
let fieldSeq = 0;

export function clearErrors(form) {
  form.querySelectorAll('.field-error').forEach(e => { e.textContent = ''; });
  form.querySelectorAll('[aria-invalid]').forEach(e => e.removeAttribute('aria-invalid'));
  const st = form.querySelector('.form-status');
  if (st) { st.textContent = ''; st.className = 'form-status'; }
}

// showError puts err next to its field when the form has it (trying the
// field and then its parents: rules[0].match.called → match.called), and
// always in the form's status line.
export function showError(form, err) {
  let target = null;
  if (err.field) {
    const parts = err.field.replace(/^[a-z]+\[\d+\]\./, '').split('.');
    while (parts.length && !target) {
      target = form.querySelector(`.field[data-field="${CSS.escape(parts.join('.'))}"]`);
      parts.pop();
    }
  }
  if (target) {
    target.querySelector('.field-error').textContent = err.message;
    const input = target.querySelector('input,select,textarea');
    if (input) { input.setAttribute('aria-invalid', 'true'); input.focus(); }
  }
  setStatus(form, target ? 'Not saved: ' + (err.field || 'a field') + ' needs fixing (see above).' : errorText(err), 'error');
}

export function setStatus(form, text, kind) {
  const st = form.querySelector('.form-status');
  if (st) { st.textContent = text; st.className = 'form-status ' + (kind || ''); }
}

export function statusLine() { return h('p', { class: 'form-status', role: 'status', 'aria-live': 'polite' }); }

export function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

export function fmtNum(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function fmtSecs(s) {
  if (s === null || s === undefined) return '–';
  if (s < 1e-3) return (s * 1e6).toFixed(0) + ' µs';
  if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + ' ms';
  return s.toFixed(2) + ' s';
}

export function fmtBytes(b) {
  if (!b) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return b.toFixed(i ? 1 : 0) + ' ' + u[i];
}

// table renders a semantic table with a caption and an empty-state row.
// table is a table with a caption; hideCaption keeps the caption for screen
// readers only, where a heading right above says the same.
export function table(caption, headers, rows, empty, hideCaption) {
  return h('table', {},
    h('caption', hideCaption ? { class: 'sr-only' } : {}, caption),
    h('thead', {}, h('tr', {}, headers.map(x => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: headers.length, class: 'empty' }, empty || 'None.'))));
}

// every runs f now and then every ms until the returned stop is called;
// runs never overlap.
export function every(ms, f) {
  let stopped = false, timer = 0;
  const tick = async () => {
    try { await f(); } catch (e) { console.warn(e); }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

// download saves a blob under name.
export function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// actionFields builds the inputs of one action (decision, divert
// destination, announcement, greeting, calling name) named after the API
// field prefix, so errors land next to them. decisions[0] === '' offers
// "none" (get() then answers null).
export function actionFields(prefix, decisions, initial) {
  const decision = h('select', {}, decisions.map(d => h('option', { value: d }, d || '(none)')));
  const destination = h('input', { type: 'text' }), announce = h('input', { type: 'text' });
  const greeting = h('input', { type: 'text' }), name = h('input', { type: 'text', spellcheck: 'false' });
  decision.value = initial;
  const row = h('div', { class: 'row' }, field('Decision', prefix + '.decision', decision),
    field('Divert to', prefix + '.destination', destination), field('Announcement (deny)', prefix + '.announce', announce),
    field('Greeting (permit)', prefix + '.greeting', greeting),
    field('Calling name', prefix + '.modify.calling_name', name, 'A name (e.g. SPAM?) or directory:<id>'));
  return {
    row,
    get() {
      if (!decision.value) return null;
      const a = { decision: decision.value };
      if (destination.value.trim()) a.destination = destination.value.trim();
      if (announce.value.trim()) a.announce = announce.value.trim();
      if (greeting.value.trim()) a.greeting = greeting.value.trim();
      if (name.value.trim()) a.modify = { calling_name: name.value.trim() };
      if (a.decision === 'deny' && prefix !== 'default_action') a.reason = 'blocked';
      return a;
    },
    set(a) {
      decision.value = a ? a.decision : (decisions[0] === '' ? '' : initial);
      destination.value = (a && a.destination) || ''; announce.value = (a && a.announce) || '';
      greeting.value = (a && a.greeting) || ''; name.value = (a && a.modify && a.modify.calling_name) || '';
    },
  };
}
