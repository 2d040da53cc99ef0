// /ui/audit: the audit log, newest first (GET /v1/audit, paged with `before`).
'use strict';

Rebound.start(async () => {
  const { h, api, query, show, notice, explain, table, messageLink } = Rebound;
  const filter = {};
  const pages = [null];
  const list = h('div', { id: 'audit' });
  const pager = h('div', { class: 'pager' });
  const inputs = {};
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); apply(); } },
    ['message', 'operator', 'action'].map((f) => h('label', {}, f, inputs[f] = h('input', { name: f, size: 12 }))),
    h('button', { type: 'submit' }, 'Filter'));

  function apply() {
    for (const f of Object.keys(inputs)) { const v = inputs[f].value.trim(); if (v) filter[f] = v; else delete filter[f]; }
    pages.length = 1;
    load().catch((e) => notice(explain(e), 'error'));
  }

  async function load() {
    const { data } = await api('GET', query('/v1/audit', Object.assign({ limit: 50, before: pages[pages.length - 1] }, filter)));
    list.replaceChildren(table([
      ['at', (e) => e.at],
      ['action', (e) => e.action],
      ['message', (e) => messageLink(e.message)],
      ['operator', (e) => e.operator],
      ['reason', (e) => e.reason, 'msg'],
    ], data.audit));
    pager.replaceChildren(
      h('button', { type: 'button', class: 'secondary', disabled: pages.length === 1,
        onclick: () => { pages.pop(); load().catch((e) => notice(explain(e), 'error')); } }, '← Newer'),
      h('span', { class: 'muted' }, `page ${pages.length}`),
      h('button', { type: 'button', class: 'secondary', disabled: !data.next,
        onclick: () => { pages.push(data.next); load().catch((e) => notice(explain(e), 'error')); } }, 'Older →'));
  }

  show(form, list, pager);
  await load();
});
