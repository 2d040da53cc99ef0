// /ui/paths: every rule's retry path (GET /v1/paths) as its chart (GET /v1/paths/{rule}.svg),
// with where it ends.
'use strict';

Rebound.start(async () => {
  const { h, api, show } = Rebound;
  const { data } = await api('GET', '/v1/paths');
  const paths = data.paths || [];
  const secs = (ms) => (ms >= 60000 ? (ms / 60000).toFixed(1) + ' min' : (ms / 1000).toFixed(ms < 1000 ? 2 : 1) + ' s');
  const ends = (p) => {
    const e = p.end || {};
    const parts = [`ends in ${e.dead_letter} (${e.reason}) after ${e.retries} retr${e.retries === 1 ? 'y' : 'ies'}`];
    if (p.redrives && p.redrives.length) {
      parts.push(`then redriven ${p.redrives.length}× (${p.redrives[0].redrive}/${p.redrives[0].of})`);
    }
    const worst = p.total_worst_ms !== undefined && p.total_worst_ms !== null ? p.total_worst_ms
      : (p.retries.length ? p.retries[p.retries.length - 1].total_worst_ms : 0);
    parts.push('worst case ' + secs(worst));
    return parts.join(', ');
  };
  show(
    h('p', { class: 'muted' }, `Rule set ${data.version}. Delay against retry number, log scale; the band is the jitter's min–max, the line the cumulative worst case.`),
    h('div', { class: 'paths', id: 'paths' }, paths.map((p) => h('figure', { 'data-rule': p.rule },
      h('img', { src: '/v1/paths/' + encodeURIComponent(p.rule) + '.svg', alt: `retry path of ${p.rule}`, loading: 'lazy' }),
      h('figcaption', {}, h('strong', {}, p.rule), ' · ', p.at, ' · ', p.give_up ? 'never retried' : (p.backoff || ''), ' · ', ends(p))))));
});
