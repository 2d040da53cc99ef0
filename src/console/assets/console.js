// What every console page shares. No value from the API is ever parsed as HTML: pages are
// built with `h`, whose children become text nodes.
'use strict';

const Rebound = (() => {
  const TOKEN_KEY = 'rebound.admin-token';

  /** An element `tag` with `attrs` (on* are listeners) and `kids` (strings become text). */
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'value') el.value = v;
      else if (k === 'checked') el.checked = !!v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    append(el, kids);
    return el;
  }

  function append(el, kids) {
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }

  const SVG = 'http://www.w3.org/2000/svg';
  /** An SVG element with attributes. */
  function s(tag, attrs, ...kids) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    append(el, kids);
    return el;
  }

  /** Replaces the page's content with `kids`. */
  function show(...kids) {
    const app = document.getElementById('app');
    app.replaceChildren();
    append(app, kids);
  }

  /** A message above the page: `kind` is '', 'ok' or 'error'. */
  function notice(text, kind) {
    const n = document.getElementById('notice');
    n.className = 'notice' + (kind ? ' ' + kind : '');
    n.textContent = text;
    n.hidden = !text;
  }

  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  function tokenState() {
    const el = document.getElementById('token-state');
    if (!el) return;
    el.replaceChildren();
    if (sessionStorage.getItem(TOKEN_KEY)) {
      append(el, ['token kept for this tab ', h('button', {
        class: 'secondary', type: 'button', id: 'token-forget',
        onclick: () => { sessionStorage.removeItem(TOKEN_KEY); tokenState(); },
      }, 'Forget')]);
    }
  }

  /** Asks for the admin token in the page's dialog; null when cancelled. */
  function askToken() {
    const dialog = document.getElementById('token-dialog');
    const input = document.getElementById('token-input');
    const form = document.getElementById('token-form');
    input.value = '';
    return new Promise((resolve) => {
      const done = (value) => {
        form.removeEventListener('submit', submit);
        cancel.removeEventListener('click', cancelled);
        dialog.close();
        resolve(value);
      };
      const submit = (e) => { e.preventDefault(); done(input.value.trim() || null); };
      const cancelled = () => done(null);
      const cancel = document.getElementById('token-cancel');
      form.addEventListener('submit', submit);
      cancel.addEventListener('click', cancelled);
      dialog.showModal();
      input.focus();
    });
  }

  /**
   * Asks the operator to confirm `question` (text, or nodes) in a modal dialog: resolves to
   * true for `yes` (the button's label), false for Cancel or Escape.
   */
  function confirmAction(question, yes) {
    const ok = h('button', { type: 'button', id: 'confirm-ok', class: 'danger' }, yes);
    const cancel = h('button', { type: 'button', id: 'confirm-cancel', class: 'secondary' }, 'Cancel');
    const text = h('p', { id: 'confirm-text' }, question);
    const dialog = h('dialog', { id: 'confirm-dialog', 'aria-labelledby': 'confirm-text' }, text,
      h('div', { class: 'buttons' }, cancel, ok));
    document.body.append(dialog);
    return new Promise((resolve) => {
      const done = (answer) => { dialog.close(); dialog.remove(); resolve(answer); };
      ok.addEventListener('click', () => done(true));
      cancel.addEventListener('click', () => done(false));
      dialog.addEventListener('cancel', (e) => { e.preventDefault(); done(false); });
      dialog.showModal();
      cancel.focus();
    });
  }

  // The POSTs the API lets anyone make (they change nothing): no token asked for or sent.
  const UNGUARDED = ['/v1/rules/validate', '/v1/rules/whatif', '/v1/decide'];

  /**
   * Calls the admin API. A write sends the token kept for the tab; if the API says 401, it
   * asks for the token once, keeps it, and tries again. Resolves to {data, res}; rejects
   * with an ApiError carrying the JSON body of an error answer.
   */
  async function api(method, path, body, headers) {
    const write = method !== 'GET' && method !== 'HEAD' && !UNGUARDED.includes(path);
    const send = async () => {
      const hs = Object.assign({ Accept: 'application/json' }, headers || {});
      if (body !== undefined) hs['Content-Type'] = 'application/json';
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (write && token) hs.Authorization = 'Bearer ' + token;
      return fetch(path, {
        method, headers: hs, credentials: 'omit', cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    };
    // Asked before the first write when the API says writes need it (no 401 to recover from).
    if (write && !sessionStorage.getItem(TOKEN_KEY) && (await facts()).writes_need_token) {
      const token = await askToken();
      if (token === null) throw new ApiError(401, 'this action needs the admin token', null);
      sessionStorage.setItem(TOKEN_KEY, token);
      tokenState();
    }
    let res = await send();
    if (res.status === 401 && write) {
      sessionStorage.removeItem(TOKEN_KEY);
      const token = await askToken();
      if (token === null) throw new ApiError(401, 'this action needs the admin token', null);
      sessionStorage.setItem(TOKEN_KEY, token);
      tokenState();
      res = await send();
      if (res.status === 401) sessionStorage.removeItem(TOKEN_KEY);
      tokenState();
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = text; }
    if (!res.ok) {
      const message = (data && data.error) || (typeof data === 'string' && data) || res.statusText;
      throw new ApiError(res.status, message, data);
    }
    return { data, res };
  }

  let factsOnce = null;
  /** What GET /v1/overview says of the process: `shared`, `writes_need_token`, … (asked once). */
  function facts() {
    factsOnce ||= fetch('/v1/overview', { cache: 'no-store', credentials: 'omit' })
      .then((r) => (r.ok ? r.json() : {})).catch(() => ({}));
    return factsOnce;
  }

  /** GET `path` with `params` (empty ones left out) as the query. */
  function query(path, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== undefined && v !== null && v !== '' && v !== false) q.set(k, String(v));
    }
    const qs = q.toString();
    return qs ? path + '?' + qs : path;
  }

  /** What an error says, for a notice. */
  function explain(e) {
    if (e instanceof ApiError) return e.status + ': ' + e.message;
    return String(e && e.message ? e.message : e);
  }

  /**
   * A table: `cols` are [heading, cell(row) → node or text, class?]. A heading given as
   * {hidden: TEXT} is read by screen readers only (a column of checkboxes or buttons): no
   * heading is ever empty. `id`, if given, is the table's.
   */
  function table(cols, rows, rowClass, id) {
    const heading = (head) => (head && head.hidden ? h('span', { class: 'sr-only' }, head.hidden) : head);
    return h('div', { class: 'table-wrap' }, h('table', { id: id || null },
      h('thead', {}, h('tr', {}, cols.map(([head, , cls]) => h('th', { class: cls || null, scope: 'col' }, heading(head))))),
      h('tbody', {}, rows.length === 0
        ? h('tr', {}, h('td', { colspan: cols.length, class: 'muted' }, 'Nothing here.'))
        : rows.map((r) => h('tr', { class: rowClass ? rowClass(r) : null },
          cols.map(([, cell, cls]) => h('td', { class: cls || null }, cell(r))))))));
  }

  /** How long ago `ms` (since the epoch) was, e.g. "3m 20s". */
  function age(ms) {
    let secs = Math.max(0, Math.round((Date.now() - ms) / 1000));
    const parts = [];
    for (const [unit, n] of [['d', 86400], ['h', 3600], ['m', 60]]) {
      if (secs >= n) { parts.push(Math.floor(secs / n) + unit); secs %= n; }
      if (parts.length === 2) break;
    }
    if (parts.length < 2) parts.push(secs + 's');
    return parts.join(' ');
  }

  function time(ms) {
    return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }

  function fmtNum(x, digits) {
    if (typeof x !== 'number' || !isFinite(x)) return '–';
    return x.toLocaleString('en-US', { maximumFractionDigits: digits === undefined ? 1 : digits });
  }

  /** `x` in a few characters: 2.5k, 1.2M. */
  function compact(x) {
    for (const [n, unit] of [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) {
      if (Math.abs(x) >= n) return fmtNum(x / n, x / n < 10 ? 1 : 0) + unit;
    }
    return fmtNum(x, x < 10 ? 1 : 0);
  }

  function link(href, text) { return h('a', { href }, text); }
  function messageLink(id) { return link('/ui/messages/' + encodeURIComponent(id), id); }

  /** A line chart of `points` ([x, y]) with its title and the last value. */
  function chart(title, points, fmt) {
    const W = 300, H = 120, L = 36, B = 16;
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title });
    const ys = points.map((p) => p[1]);
    const max = Math.max(1e-9, ...ys);
    const x0 = points.length ? points[0][0] : 0;
    const x1 = points.length ? points[points.length - 1][0] : 1;
    const sx = (x) => L + ((x - x0) / Math.max(1, x1 - x0)) * (W - L - 4);
    const sy = (y) => H - B - (y / max) * (H - B - 6);
    svg.append(s('line', { class: 'axis', x1: L, y1: H - B, x2: W - 4, y2: H - B }));
    svg.append(s('line', { class: 'axis', x1: L, y1: 6, x2: L, y2: H - B }));
    // The axis label in at most five characters (1,997.8 would not fit left of the axis).
    const top = fmt(max);
    svg.append(s('text', { x: L - 4, y: 12, 'text-anchor': 'end' }, top.length > 5 ? compact(max) : top));
    svg.append(s('text', { x: L - 4, y: H - B, 'text-anchor': 'end' }, '0'));
    const span = Math.round((x1 - x0) / 1000);
    const ago = span < 60 ? `-${span}s` : `-${Math.floor(span / 60)}m` + (span % 60 ? ` ${span % 60}s` : '');
    svg.append(s('text', { x: L, y: H - 3 }, points.length ? ago : ''));
    svg.append(s('text', { x: W - 4, y: H - 3, 'text-anchor': 'end' }, 'now'));
    if (points.length > 1) {
      const d = points.map((p, i) => (i ? 'L' : 'M') + sx(p[0]).toFixed(1) + ' ' + sy(p[1]).toFixed(1)).join(' ');
      svg.append(s('path', { class: 'line', d }));
    }
    const last = points.length ? fmt(points[points.length - 1][1]) : '–';
    return h('div', { class: 'chart' }, h('div', { class: 'title' }, title + ': ', h('strong', {}, last)), svg);
  }

  /** The lines of `a` against `b`: [['same'|'del'|'add', line]] (a longest common subsequence). */
  function diffLines(a, b) {
    const x = a.split('\n'), y = b.split('\n');
    const n = x.length, m = y.length;
    if (n * m > 4e6) return [...x.map((l) => ['del', l]), ...y.map((l) => ['add', l])];
    const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    const out = [];
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (x[i] === y[j]) { out.push(['same', x[i]]); i++; j++; }
      else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(['del', x[i++]]);
      else out.push(['add', y[j++]]);
    }
    while (i < n) out.push(['del', x[i++]]);
    while (j < m) out.push(['add', y[j++]]);
    return out;
  }

  /** The differences between two sets of files ({name: text}), file by file. */
  function filesDiff(before, after, beforeName, afterName) {
    const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    const parts = [];
    for (const name of names) {
      const a = before[name], b = after[name];
      if (a === b) continue;
      const lines = diffLines(a === undefined ? '' : a, b === undefined ? '' : b);
      const head = a === undefined ? `${name}: only in ${afterName}`
        : b === undefined ? `${name}: only in ${beforeName}` : name;
      parts.push(h('h2', {}, head));
      parts.push(h('pre', { class: 'diff' }, lines.map(([kind, line]) =>
        h('span', { class: kind }, (kind === 'add' ? '+ ' : kind === 'del' ? '- ' : '  ') + line))));
    }
    if (!parts.length) parts.push(h('p', { class: 'muted' }, 'The two versions hold the same files.'));
    return parts;
  }

  /** Calls `f` now and every `ms`; a failing call shows a notice and keeps the last view. */
  function every(ms, f) {
    let timer = null;
    const run = async () => {
      try { await f(); } catch (e) { notice(explain(e), 'error'); }
      timer = setTimeout(run, ms);
    };
    run();
    return () => clearTimeout(timer);
  }

  /** The operator and reason inputs of an action bar, and a getter that checks them. */
  function operatorFields() {
    const operator = h('input', { id: 'operator', name: 'operator', required: true, placeholder: 'who' });
    const reason = h('input', { id: 'reason', name: 'reason', required: true, placeholder: 'why' });
    const get = () => {
      const o = operator.value.trim(), r = reason.value.trim();
      if (!o || !r) { notice('Say who acts and why: operator and reason are required.', 'error'); return null; }
      return { operator: o, reason: r };
    };
    return { nodes: [h('label', {}, 'Operator', operator), h('label', {}, 'Reason', reason)], get };
  }

  /** Parses the Prometheus text of /metrics into [{name, labels, value}]. */
  function parseMetrics(text) {
    const out = [];
    for (const line of text.split('\n')) {
      if (!line || line.startsWith('#')) continue;
      const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      const re = /(\w+)="((?:[^"\\]|\\.)*)"/g;
      let l;
      while ((l = re.exec(m[3] || '')) !== null) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
      out.push({ name: m[1], labels, value: Number(m[4]) });
    }
    return out;
  }

  async function metrics() {
    const res = await fetch('/metrics', { cache: 'no-store', credentials: 'omit' });
    if (!res.ok) throw new ApiError(res.status, 'GET /metrics failed', null);
    return parseMetrics(await res.text());
  }

  /** A node's rule errors (`rules_errors` of GET /v1/nodes), as text. */
  function nodeErrors(n) {
    const e = n.rules_errors;
    if (e === undefined || e === null || (Array.isArray(e) && !e.length)) return '–';
    if (!Array.isArray(e)) return typeof e === 'string' ? e : JSON.stringify(e);
    return e.map((x) => (typeof x === 'string' ? x
      : [x.file, x.line, x.column].filter((v) => v !== undefined).join(':') + ' ' + (x.message || ''))).join('; ');
  }

  /** Runs the page's `main`, showing what went wrong if it throws. */
  function start(main) {
    const go = () => {
      tokenState();
      Promise.resolve().then(main).catch((e) => {
        notice(explain(e), 'error');
        show(h('p', { class: 'muted' }, 'This page could not be loaded.'));
      });
    };
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', go);
    else go();
  }

  return {
    h, s, show, notice, api, query, explain, table, age, time, fmtNum, link, messageLink,
    chart, diffLines, filesDiff, every, operatorFields, metrics, nodeErrors, facts, start, ApiError,
    confirmAction,
  };
})();
