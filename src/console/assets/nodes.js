// /ui/nodes: in shared mode, the live nodes (GET /v1/nodes), refreshed every 2 s.
'use strict';

Rebound.start(() => {
  const { h, api, show, table, notice, nodeErrors, facts } = Rebound;
  return facts().then((f) => {
    if (!f.shared) {
      show(h('p', { id: 'no-fleet' }, 'This process runs the embedded store: it has no fleet. ' +
        'Nodes share work on a Redis store (rebound serve --store redis://…).'));
      return;
    }
    Rebound.every(2000, refresh);
  });

  async function refresh() {
    const nodes = (await api('GET', '/v1/nodes')).data;
    notice('');
    show(table([
      ['node', (n) => n.node],
      ['started', (n) => n.started_at],
      ['last seen', (n) => n.last_seen],
      ['rule-set version', (n) => n.rules_version],
      ['rule errors', (n) => nodeErrors(n), 'msg'],
      ['partitions', (n) => (n.partitions || []).join(', ')],
      ['in flight', (n) => String(n.in_flight), 'num'],
      ['retries claimed', (n) => String(n.retries_claimed), 'num'],
      ['breakers', (n) => (n.breakers || []).filter((b) => b.state !== 'closed')
        .map((b) => `${b.breaker}${b.key ? '/' + b.key : ''}: ${b.state}`).join(', ') || '–'],
    ], nodes));
  }
});
