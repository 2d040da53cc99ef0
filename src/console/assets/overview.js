// /ui/: the live overview, refreshed every 2 s, from GET /v1/overview (the process's own
// last 15 minutes; a relay's source and handler), GET /metrics (dead letters, the fuse and
// breakers) and, in shared mode, GET /v1/nodes.
'use strict';

Rebound.start(() => {
  const { h, api, metrics, show, chart, fmtNum, notice, table } = Rebound;

  const card = (label, value, id, unit) =>
    h('div', { class: 'card', id }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value),
      unit ? h('div', { class: 'unit' }, unit) : null);

  // The rates seen so far: each refresh asks only for the newer ones.
  let rates = [];
  const KEEP_MS = 15 * 60 * 1000;
  Rebound.every(2000, async () => {
    const since = rates.length ? rates[rates.length - 1].at_ms : 0;
    const [{ data: o }, ms] = await Promise.all([api('GET', Rebound.query('/v1/overview', { since })), metrics()]);
    const nodes = o.shared ? (await api('GET', '/v1/nodes')).data : null;
    notice('');
    rates = rates.concat(o.rates || []);
    if (rates.length) {
      const from = rates[rates.length - 1].at_ms - KEEP_MS;
      rates = rates.filter((r) => r.at_ms > from);
    }
    const last = rates.length ? rates[rates.length - 1] : null;
    const pct = (x) => fmtNum(100 * x, 1) + '%';
    const millis = (x) => (x === null ? '–' : fmtNum(x, 2) + ' ms');
    const letters = {};
    const breakers = [];
    let fuse = o.now.fuse_open;
    for (const m of ms) {
      if (m.name === 'rebound_dead_letters_open') (letters[m.labels.label] ||= {}).open = m.value;
      if (m.name === 'rebound_dead_letters_overdue') (letters[m.labels.label] ||= {}).overdue = m.value;
      if (m.name === 'rebound_breaker_state' && m.value === 1) breakers.push(m.labels);
      if (m.name === 'rebound_retry_fuse_open') fuse = m.value === 1;
    }
    const labelRows = Object.entries(letters).sort();
    // The API's rates are means over a window (GET /v1/overview's window_s), not one-second
    // samples: say so wherever one is shown.
    const mean = `${o.window_s || 1} s mean`;
    const perSecond = `per second, ${mean}`;
    const chartOf = (title, unit, f, fmt) =>
      chart(`${title} (${unit})`, rates.filter((r) => f(r) !== null).map((r) => [r.at_ms, f(r)]), fmt);
    show(
      h('div', { class: 'cards' },
        card('new messages', last ? fmtNum(last.new_per_s) : '–', 'new-rate', perSecond),
        card('retries fired', last ? fmtNum(last.retries_per_s) : '–', 'retry-rate', perSecond),
        card('retry ratio', last && last.retry_ratio !== null ? pct(last.retry_ratio) : '–', 'retry-ratio',
          `retries / new, ${mean}`),
        card('acked', last ? fmtNum(last.acked_per_s) : '–', 'acked-rate', perSecond),
        card('pending', fmtNum(o.now.pending, 0), 'pending'),
        card('retry queue depth', fmtNum(o.now.retry_queue_depth, 0), 'queue-depth'),
        card('retry fuse', h('span', { class: 'badge ' + (fuse ? 'bad' : 'ok') }, fuse ? 'open' : 'closed'), 'fuse'),
        card('rule set', o.version, 'version'),
        o.adaptive_scope ? card('budgets and breakers',
          h('span', { class: 'badge ' + (o.shared && o.adaptive_scope === 'node' ? 'bad' : 'ok') }, o.adaptive_scope),
          'adaptive-scope', o.adaptive_scope === 'fleet' ? "the fleet's, synced" : "this node's own") : null),
      h('div', { class: 'charts' },
        chartOf('new messages', perSecond, (r) => r.new_per_s, fmtNum),
        chartOf('retries fired', perSecond, (r) => r.retries_per_s, fmtNum),
        chartOf('retry ratio', mean, (r) => r.retry_ratio, pct),
        chartOf('acked', perSecond, (r) => r.acked_per_s, fmtNum)),
      h('h2', {}, 'Dead letters by label'),
      table([
        ['label', ([l]) => Rebound.link('/ui/dead-letters?label=' + encodeURIComponent(l), l)],
        ['open', ([, v]) => fmtNum(v.open || 0, 0), 'num'],
        ['overdue', ([, v]) => (v.overdue ? h('span', { class: 'badge bad' }, fmtNum(v.overdue, 0)) : '0'), 'num'],
      ], labelRows),
      h('h2', {}, 'Breakers'),
      table([
        ['breaker', (b) => b.breaker],
        ['key', (b) => b.key || '–'],
        ['state', (b) => h('span', { class: 'badge state-' + b.state }, b.state)],
      ], breakers),
      o.sources ? [h('h2', {}, 'Source'), table([
        ['source', (x) => x.name],
        ['lag', (x) => fmtNum(x.lag, 0), 'num'],
        ['unacked', (x) => fmtNum(x.unacked, 0), 'num'],
        ['received', (x) => fmtNum(x.received, 0), 'num'],
        ['custody: retained', (x) => fmtNum(x.custody.retained, 0), 'num'],
        ['custody: acked', (x) => fmtNum(x.custody.acked, 0), 'num'],
        ['custody: dead-lettered', (x) => fmtNum(x.custody.dead_lettered, 0), 'num'],
        ['broker', (x) => (x.reachable
          ? h('span', { class: 'badge ok' }, 'reachable')
          : h('span', { class: 'badge bad' }, 'unreachable since ' + x.unreachable_since))],
      ], o.sources, null, 'sources')] : null,
      o.handler ? [h('h2', {}, 'Handler'), table([
        ...Object.keys(o.handler.answers).map((c) => [c, (x) => fmtNum(x.answers[c], 0), 'num']),
        ['latency p50', (x) => millis(x.latency_ms.p50), 'num'],
        ['latency p99', (x) => millis(x.latency_ms.p99), 'num'],
      ], [o.handler], null, 'handler')] : null,
      nodes ? [h('h2', {}, 'Nodes'), table([
        ['node', (n) => n.node],
        ['rule-set version', (n) => n.rules_version],
        ['errors', (n) => Rebound.nodeErrors(n)],
      ], nodes)] : null);
  });
});
