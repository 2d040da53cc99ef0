// /ui/rules/history: every reload, newest first (GET /v1/rules/history), the diff between
// two accepted versions (GET /v1/rules/history/{version}), and a rollback to any accepted
// version kept (POST /v1/rules/rollback with {"version"}).
'use strict';

Rebound.start(async () => {
  const { h, api, show, notice, explain, table, filesDiff, confirmAction } = Rebound;
  const { data: entries } = await api('GET', '/v1/rules/history');
  const diff = h('div', { id: 'diff' });
  const pick = { from: null, to: null };
  const accepted = entries.filter((e) => e.result === 'accepted');
  // By default: the newest accepted version against the one before it.
  if (accepted.length >= 2) { pick.to = accepted[0].version; pick.from = accepted[1].version; }

  const radio = (side, e) => e.result !== 'accepted' ? '' : h('input', {
    type: 'radio', name: side, value: e.version, 'aria-label': `${side} ${e.version}`,
    checked: pick[side] === e.version, onchange: () => { pick[side] = e.version; },
  });
  const errors = (e) => (e.errors || []).map((x) => h('div', { class: 'msg' },
    typeof x === 'string' ? x : `${x.file}:${x.line}:${x.column}: ${x.message}`));

  async function compare() {
    if (!pick.from || !pick.to) { notice('Pick two accepted versions: one "from", one "to".', 'error'); return; }
    try {
      const [a, b] = await Promise.all([pick.from, pick.to].map((v) =>
        api('GET', '/v1/rules/history/' + encodeURIComponent(v)).then((r) => r.data)));
      notice('');
      diff.replaceChildren(h('h2', {}, `From ${a.version} to ${b.version}`), ...filesDiff(a.files, b.files, a.version, b.version));
    } catch (e) { notice(explain(e), 'error'); }
  }

  async function rollbackTo(version) {
    const now = entries.find((e) => e.result === 'accepted');
    const yes = await confirmAction(`Roll back ${now ? `from version ${now.version} ` : ''}to version ${version}? ` +
      'Its files replace those in the rules directory and it decides from now on.', `Roll back to ${version}`);
    if (!yes) { notice('Nothing was rolled back.'); return; }
    try {
      const { data } = await api('POST', '/v1/rules/rollback', { version });
      notice(`Rolled back: version ${data.version} is in force.`, 'ok');
      setTimeout(() => location.reload(), 800);
    } catch (e) { notice(explain(e), 'error'); }
  }

  show(
    h('div', { class: 'actions' }, h('button', { type: 'button', id: 'compare', onclick: compare }, 'Diff the two picked versions')),
    table([
      ['from', (e) => radio('from', e)],
      ['to', (e) => radio('to', e)],
      ['at', (e) => e.at],
      ['version', (e) => e.version],
      ['result', (e) => h('span', { class: 'badge ' + (e.result === 'accepted' ? 'ok' : 'bad') }, e.result)],
      ['source', (e) => e.source],
      ['errors', errors, 'msg'],
      [{ hidden: 'rollback' }, (e) => (e.result !== 'accepted' ? '' : h('button', {
        type: 'button', class: 'secondary rollback-to', 'data-version': e.version,
        onclick: () => rollbackTo(e.version),
      }, 'Roll back to this'))],
    ], entries),
    diff);
});
