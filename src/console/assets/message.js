// /ui/messages/{id}: one message (GET /v1/messages/{id}): its state, its payload (the API
// bounds it: text, or hex when it is not UTF-8), every failure kept (cycle after cycle: a
// replay or a redrive starts a new one), its dead letters and audit entries, and the actions
// that apply to it.
'use strict';

Rebound.start(async () => {
  const { h, api, show, notice, explain, table, time, operatorFields } = Rebound;
  const id = decodeURIComponent(location.pathname.replace(/^\/ui\/messages\//, ''));
  document.getElementById('title').textContent = 'Message ' + id;
  const ops = operatorFields();
  const enc = encodeURIComponent(id);

  async function act(path, done) {
    const who = ops.get();
    if (!who) return;
    try { await api('POST', path, who); notice(done, 'ok'); await load(); }
    catch (e) { notice(explain(e), 'error'); }
  }

  /** The payload as the API gives it: text as it is, hex as lines of 16 bytes. */
  function payload(p) {
    if (!p) return h('p', { class: 'muted', id: 'payload' }, 'No payload is kept for this message.');
    const shown = p.encoding === 'hex' ? p.data.match(/.{1,32}/g)?.map((l) => l.match(/../g).join(' ')).join('\n') || '' : p.data;
    const note = `${p.bytes} byte${p.bytes === 1 ? '' : 's'}` + (p.encoding === 'hex' ? ', not UTF-8: shown as hex' : '') +
      (p.truncated ? `; the first ${p.encoding === 'hex' ? p.data.length / 2 : new TextEncoder().encode(p.data).length} shown` : '');
    return [h('p', { class: 'muted', id: 'payload-note' }, note),
      h('pre', { class: 'view payload', id: 'payload', 'data-encoding': p.encoding, tabindex: '0' }, shown)];
  }

  async function load() {
    let m;
    try { m = (await api('GET', '/v1/messages/' + enc)).data; }
    catch (e) { if (e.status === 404) { show(h('p', { id: 'unknown' }, `The store knows nothing of ${id}.`)); return; } throw e; }
    const open = (m.dead_letters || []).some((d) => d.status === 'dead');
    const actions = [];
    if (open) {
      actions.push(h('button', { type: 'button', id: 'replay', onclick: () => act(`/v1/dead-letters/${enc}/replay`, 'Replayed.') }, 'Replay'));
      actions.push(h('button', { type: 'button', id: 'skip', class: 'secondary', onclick: () => act(`/v1/dead-letters/${enc}/skip`, 'Skipped.') }, 'Skip'));
    }
    if (m.state === 'scheduled') {
      actions.push(h('button', { type: 'button', id: 'retry-now', onclick: () => act(`/v1/retries/${enc}/now`, 'It fires now.') }, 'Retry now'));
      actions.push(h('button', { type: 'button', id: 'kill', class: 'danger', onclick: () => act(`/v1/retries/${enc}/kill`, 'Killed: it is a dead letter now.') }, 'Kill'));
    }
    show(
      h('dl', { class: 'facts' },
        h('dt', {}, 'state'), h('dd', { id: 'state' }, h('span', { class: 'badge' }, m.state)),
        h('dt', {}, 'biz'), h('dd', {}, m.biz || '–'),
        h('dt', {}, 'attempts'), h('dd', {}, String(m.attempts)),
        m.scheduled ? [h('dt', {}, 'scheduled'), h('dd', {}, `attempt ${m.scheduled.attempt} due ${m.scheduled.due} (rule ${m.scheduled.rule || '–'})`)] : null),
      actions.length ? h('div', { class: 'actions' }, ops.nodes, actions) : null,
      h('h2', {}, 'Payload'),
      payload(m.payload),
      h('h2', {}, 'Failures'),
      m.failures_dropped ? h('p', { class: 'muted', id: 'failures-dropped' },
        `${m.failures_dropped} failure${m.failures_dropped === 1 ? '' : 's'} between the first and the last kept were dropped.`) : null,
      table([
        ['cycle', (f) => String(f.cycle), 'num'],
        ['attempt', (f) => String(f.attempt), 'num'],
        ['at', (f) => f.at],
        ['code', (f) => f.code],
        ['message', (f) => f.message, 'msg'],
        ['rule', (f) => f.rule],
        ['delay chosen', (f) => (f.delay_ms === undefined || f.delay_ms === null ? '–' : f.delay_ms + ' ms'), 'num'],
      ], m.failures || [], null, 'failures'),
      h('h2', {}, 'Dead letters'),
      table([
        ['status', (d) => d.status],
        ['label', (d) => d.label],
        ['reason', (d) => d.reason],
        ['at', (d) => time(d.last_time_ms)],
        ['rule', (d) => d.rule],
        ['last failure', (d) => d.last_message, 'msg'],
      ], m.dead_letters || []),
      h('h2', {}, 'Audit'),
      table([
        ['at', (e) => e.at],
        ['action', (e) => e.action],
        ['operator', (e) => e.operator],
        ['reason', (e) => e.reason, 'msg'],
      ], m.audit || []));
  }
  await load();
});
