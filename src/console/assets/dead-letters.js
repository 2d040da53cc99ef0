// /ui/dead-letters: the letters (GET /v1/dead-letters) filtered and paged with the API's
// cursor; selected letters replayed or skipped one by one (POST /v1/dead-letters/{id}/replay,
// /skip), or every letter of the filter at once (POST /v1/dead-letters/replay, /skip).
'use strict';

Rebound.start(async () => {
  const { h, api, query, show, notice, explain, table, age, messageLink, operatorFields } = Rebound;
  const FIELDS = ['label', 'status', 'biz', 'code', 'rule', 'q'];
  const url = new URL(location.href);
  const filter = {};
  for (const f of [...FIELDS, 'overdue']) if (url.searchParams.get(f)) filter[f] = url.searchParams.get(f);
  const pages = [null];          // the `before` cursor of each page shown so far
  const selected = new Set();
  const ops = operatorFields();
  const list = h('div', { id: 'letters' });
  const pager = h('div', { class: 'pager' });
  const total = h('span', { id: 'total', class: 'muted' });

  const inputs = {};
  const form = h('form', { class: 'filters', id: 'filters', onsubmit: (e) => { e.preventDefault(); apply(); } },
    FIELDS.map((f) => h('label', {}, f === 'q' ? 'text' : f,
      inputs[f] = f === 'status'
        ? h('select', { name: f }, ['', 'dead', 'replayed', 'skipped', 'expired'].map((v) =>
          h('option', { value: v, selected: filter[f] === v || null }, v || 'any')))
        : h('input', { name: f, value: filter[f] || '', size: f === 'q' ? 18 : 10 }))),
    h('label', {}, 'overdue', inputs.overdue = h('input', { type: 'checkbox', name: 'overdue', checked: filter.overdue === 'true' })),
    h('button', { type: 'submit', id: 'apply' }, 'Filter'));

  function apply() {
    for (const f of FIELDS) { const v = inputs[f].value.trim(); if (v) filter[f] = v; else delete filter[f]; }
    if (inputs.overdue.checked) filter.overdue = 'true'; else delete filter.overdue;
    const u = new URL(location.href);
    u.search = new URLSearchParams(filter).toString();
    history.replaceState(null, '', u);
    pages.length = 1;
    selected.clear();
    load();
  }

  async function load() {
    const before = pages[pages.length - 1];
    const { data } = await api('GET', query('/v1/dead-letters', Object.assign({ limit: 50, before }, filter)));
    total.textContent = `${data.total} letter${data.total === 1 ? '' : 's'} match`;
    const now = data.dead_letters;
    list.replaceChildren(table([
      [{ hidden: 'select' }, (d) => h('input', {
        type: 'checkbox', class: 'pick', value: d.id, 'aria-label': 'select ' + d.id, checked: selected.has(d.id),
        onchange: (e) => { if (e.target.checked) selected.add(d.id); else selected.delete(d.id); },
      })],
      ['message', (d) => messageLink(d.id), 'nowrap'],
      ['biz', (d) => d.biz, 'nowrap'],
      ['code', (d) => d.last_code, 'nowrap'],
      ['label', (d) => d.label, 'nowrap'],
      ['status', (d) => h('span', { class: 'badge ' + (d.status === 'dead' ? 'bad' : '') }, d.status), 'nowrap'],
      ['age', (d) => age(d.last_time_ms), 'num nowrap'],
      ['overdue', (d) => (d.overdue ? h('span', { class: 'badge bad' }, 'overdue') : ''), 'nowrap'],
      ['rule', (d) => d.rule, 'nowrap'],
      // Two lines at most, so that a row stays a row (the whole text is on the message's page).
      ['last failure', (d) => h('div', { class: 'clamp', title: d.last_message }, d.last_message), 'msg'],
    ], now, (d) => (d.overdue ? 'overdue' : null)));
    pager.replaceChildren(
      h('button', { type: 'button', class: 'secondary', id: 'prev', disabled: pages.length === 1,
        onclick: () => { pages.pop(); load().catch((e) => notice(explain(e), 'error')); } }, '← Newer'),
      h('span', { class: 'muted' }, `page ${pages.length}`),
      h('button', { type: 'button', class: 'secondary', id: 'next', disabled: !data.next,
        onclick: () => { pages.push(data.next); load().catch((e) => notice(explain(e), 'error')); } }, 'Older →'));
  }

  async function act(action) {
    const who = ops.get();
    if (!who) return;
    const ids = [...selected];
    if (!ids.length) { notice('Select letters first, or act on the whole filter.', 'error'); return; }
    let done = 0;
    const failed = [];
    for (const id of ids) {
      try { await api('POST', `/v1/dead-letters/${encodeURIComponent(id)}/${action}`, who); done++; selected.delete(id); }
      catch (e) { failed.push(`${id}: ${explain(e)}`); if (e.status === 401) break; }
    }
    const verb = action === 'replay' ? 'replayed' : 'skipped';
    notice(`${done} letter${done === 1 ? '' : 's'} ${verb}.` + (failed.length ? ' Not done: ' + failed.join('; ') : ''), failed.length ? 'error' : 'ok');
    await load();
  }

  async function actAll(action) {
    const who = ops.get();
    if (!who) return;
    try {
      const { data } = await api('POST', `/v1/dead-letters/${action}`, Object.assign({ filter: Object.assign({}, filter) }, who));
      const n = data.replayed !== undefined ? data.replayed : data.skipped;
      notice(`${n} letter${n === 1 ? '' : 's'} ${action === 'replay' ? 'replayed' : 'skipped'} (every open letter of the filter).`, 'ok');
      selected.clear();
      await load();
    } catch (e) { notice(explain(e), 'error'); }
  }

  show(form,
    h('div', { class: 'actions' }, ops.nodes,
      h('button', { type: 'button', id: 'replay', onclick: () => act('replay') }, 'Replay selected'),
      h('button', { type: 'button', id: 'skip', class: 'secondary', onclick: () => act('skip') }, 'Skip selected'),
      h('button', { type: 'button', id: 'replay-all', class: 'secondary', onclick: () => actAll('replay') }, 'Replay all matching'),
      h('button', { type: 'button', id: 'skip-all', class: 'secondary', onclick: () => actAll('skip') }, 'Skip all matching')),
    total, list, pager);
  await load();
});
