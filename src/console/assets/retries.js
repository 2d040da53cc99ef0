// /ui/retries: the scheduled retries, soonest first (GET /v1/retries, paged with `after`);
// each can be fired now (POST /v1/retries/{id}/now) or killed (POST /v1/retries/{id}/kill).
'use strict';

Rebound.start(async () => {
  const { h, api, query, show, notice, explain, table, messageLink, operatorFields } = Rebound;
  const filter = {};
  const pages = [null];
  const ops = operatorFields();
  const list = h('div', { id: 'retries' });
  const pager = h('div', { class: 'pager' });
  const inputs = {};
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); apply(); } },
    ['biz', 'code', 'rule'].map((f) => h('label', {}, f, inputs[f] = h('input', { name: f, size: 10 }))),
    h('button', { type: 'submit' }, 'Filter'));

  function apply() {
    for (const f of Object.keys(inputs)) { const v = inputs[f].value.trim(); if (v) filter[f] = v; else delete filter[f]; }
    pages.length = 1;
    load().catch((e) => notice(explain(e), 'error'));
  }

  async function act(id, action) {
    const who = ops.get();
    if (!who) return;
    try {
      await api('POST', `/v1/retries/${encodeURIComponent(id)}/${action}`, who);
      notice(action === 'now' ? `${id} fires now.` : `${id} was killed: it is a dead letter now.`, 'ok');
      await load();
    } catch (e) { notice(explain(e), 'error'); }
  }

  async function load() {
    const { data } = await api('GET', query('/v1/retries', Object.assign({ limit: 50, after: pages[pages.length - 1] }, filter)));
    list.replaceChildren(table([
      ['message', (r) => messageLink(r.id)],
      ['biz', (r) => r.biz],
      ['due', (r) => r.due],
      ['attempt', (r) => String(r.attempt), 'num'],
      ['rule', (r) => r.rule || '–'],
      ['last code', (r) => r.last_code || '–'],
      [{ hidden: 'actions' }, (r) => [
        h('button', { type: 'button', class: 'secondary now', 'data-id': r.id, onclick: () => act(r.id, 'now') }, 'Retry now'), ' ',
        h('button', { type: 'button', class: 'danger kill', 'data-id': r.id, onclick: () => act(r.id, 'kill') }, 'Kill')]],
    ], data.retries));
    pager.replaceChildren(
      h('button', { type: 'button', class: 'secondary', disabled: pages.length === 1,
        onclick: () => { pages.pop(); load().catch((e) => notice(explain(e), 'error')); } }, '← Sooner'),
      h('span', { class: 'muted' }, `page ${pages.length}`),
      h('button', { type: 'button', class: 'secondary', disabled: !data.next,
        onclick: () => { pages.push(data.next); load().catch((e) => notice(explain(e), 'error')); } }, 'Later →'));
  }

  show(form, h('div', { class: 'actions' }, ops.nodes), list, pager);
  await load();
});
