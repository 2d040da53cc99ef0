// /ui/rules: the set in force (GET /v1/rules), edited in the browser, validated
// (POST /v1/rules/validate: errors and warnings), pushed (PUT /v1/rules with If-Match; the
// API runs the set's rule tests first and a failing one refuses the push unless the operator
// pushes anyway, "skip_tests") or rolled back (POST /v1/rules/rollback with the version
// GET /v1/rules/rollback names, once the operator has confirmed it). "What would change?"
// asks POST /v1/rules/whatif what the edited set would have decided of the logged decisions.
// A running canary (GET /v1/rules/canary, every 2 s once /metrics says there is one) shows its two arms side by side, with
// Abort (DELETE /v1/rules/canary); once it ended, how it ended.
'use strict';

Rebound.start(async () => {
  const { h, api, show, notice, explain, filesDiff, confirmAction, table, fmtNum, every, metrics } = Rebound;
  const LINE_PX = 18;
  let loaded = null;   // {version, loaded_at, source, files, rollback_to}
  let edits = {};      // name → text as edited
  let current = null;  // the file shown
  const gutter = h('pre', { class: 'gutter', 'aria-hidden': 'true' });
  const editor = h('textarea', { id: 'editor', spellcheck: 'false', wrap: 'off', 'aria-label': 'file' });
  const fileList = h('ul', { class: 'files', id: 'files' });
  const result = h('div', { id: 'result' });
  const facts = h('dl', { class: 'facts', id: 'facts' });
  const canaryBox = h('section', { id: 'canary', hidden: true });

  const numberLines = () => {
    const n = editor.value.split('\n').length;
    gutter.textContent = Array.from({ length: n }, (_, i) => i + 1).join('\n');
    gutter.scrollTop = editor.scrollTop;
  };
  editor.addEventListener('input', () => { edits[current] = editor.value; numberLines(); listFiles(); });
  editor.addEventListener('scroll', () => { gutter.scrollTop = editor.scrollTop; });

  function listFiles() {
    fileList.replaceChildren(...Object.keys(edits).sort().map((name) => h('li', {},
      h('button', {
        type: 'button', 'data-file': name,
        class: [name === current ? 'current' : '', edits[name] !== loaded.files[name] ? 'edited' : ''].join(' ').trim() || null,
        onclick: () => open(name),
      }, name))));
  }

  function open(name) {
    current = name;
    editor.value = edits[name];
    editor.setAttribute('data-file', name);
    numberLines();
    listFiles();
  }

  /** The file an error names: the same name, or the one its path ends with. */
  function fileOf(err) {
    const f = err.file || '';
    if (f in edits) return f;
    return Object.keys(edits).find((n) => f.endsWith('/' + n)) || null;
  }

  /** Shows line `line` of `name`: selected in the editor, and around it below the errors. */
  function showLine(name, line, column) {
    open(name);
    const lines = editor.value.split('\n');
    const i = Math.min(Math.max(1, line), lines.length) - 1;
    const start = lines.slice(0, i).reduce((n, l) => n + l.length + 1, 0);
    editor.focus();
    editor.setSelectionRange(start, start + lines[i].length);
    editor.scrollTop = Math.max(0, (i - 5) * LINE_PX);
    gutter.scrollTop = editor.scrollTop;
    const from = Math.max(0, i - 3), to = Math.min(lines.length, i + 4);
    const view = h('div', { id: 'line-view' },
      h('p', { class: 'muted' }, `${name}, line ${line}` + (column ? `, column ${column}` : '') + ':'),
      h('pre', { class: 'view' }, lines.slice(from, to).map((l, k) => h('span', {
        class: from + k === i ? 'line-shown' : null,
        'data-line': from + k + 1,
      }, String(from + k + 1).padStart(4) + '  ' + l + '\n'))));
    document.getElementById('line-view')?.remove();
    result.append(view);
  }

  /** A list of errors or warnings (`kind`), each a button that shows the line it names. */
  function placeList(kind, items) {
    return h('ul', { class: kind, id: kind }, items.map((e) => {
      const at = [e.file, e.line, e.column].filter((v) => v !== undefined && v !== null).join(':');
      const name = fileOf(e);
      return h('li', {}, h('button', {
        type: 'button', class: kind === 'errors' ? 'error' : 'warning', 'data-at': at,
        disabled: name === null || !e.line,
        onclick: () => showLine(name, e.line, e.column),
      }, `${at}: ${e.message}` + (e.help ? ` (${e.help})` : '')));
    }));
  }

  const plural = (n, what) => `${n} ${what}${n === 1 ? '' : 's'}`;

  function showErrors(errors, heading) {
    result.replaceChildren(h('h2', {}, heading || plural(errors.length, 'error')), placeList('errors', errors));
  }

  /** The warnings of a valid set, below what `head` says of it. */
  function showWarnings(head, warnings) {
    result.replaceChildren(head);
    if (warnings && warnings.length) {
      result.append(h('h2', {}, plural(warnings.length, 'warning')), placeList('warnings', warnings));
    }
  }

  function showFacts() {
    facts.replaceChildren(
      h('dt', {}, 'version'), h('dd', { id: 'version' }, loaded.version),
      h('dt', {}, 'loaded at'), h('dd', {}, loaded.loaded_at),
      h('dt', {}, 'source'), h('dd', {}, loaded.source),
      h('dt', {}, 'files'), h('dd', {}, String(Object.keys(loaded.files).length)),
      h('dt', {}, 'rollback goes to'), h('dd', { id: 'rollback-to' }, loaded.rollback_to || 'nothing earlier is kept'));
    rollbackButton.disabled = !loaded.rollback_to;
  }

  /** The version a rollback would go back to now, or null. */
  const rollbackTarget = async () => (await api('GET', '/v1/rules/rollback')).data.version;

  async function load(keepNotice) {
    const [rules, to] = await Promise.all([api('GET', '/v1/rules'), rollbackTarget()]);
    loaded = Object.assign(rules.data, { rollback_to: to });
    edits = Object.assign({}, loaded.files);
    showFacts();
    const names = Object.keys(edits).sort();
    open(current in edits ? current : names[0]);
    result.replaceChildren();
    if (!keepNotice) notice('');
  }

  async function validate() {
    try {
      const { data } = await api('POST', '/v1/rules/validate', { files: edits });
      const warnings = data.warnings || [];
      showWarnings(h('p', { id: 'valid' }, `Valid: it would be version ${data.version}. ` +
        'A push also runs the set\'s rule tests.'), warnings);
      if (warnings.length) notice(`The edited set is valid, with ${plural(warnings.length, 'warning')}: see below before you push.`);
      else notice('The edited set is valid.', 'ok');
    } catch (e) {
      if (e.status === 422 && e.body && e.body.errors) {
        notice('The edited set is not valid: nothing was changed.', 'error');
        showErrors(e.body.errors);
      } else notice(explain(e), 'error');
    }
  }

  async function push(skipTests) {
    try {
      const body = skipTests ? { files: edits, skip_tests: true } : { files: edits };
      const { data } = await api('PUT', '/v1/rules', body, { 'If-Match': loaded.version });
      await load(true);
      const warnings = data.warnings || [];
      const tests = skipTests ? ' Its rule tests were skipped.' : '';
      notice(`Pushed: version ${data.version} is in force.${tests}` +
        (warnings.length ? ` It has ${plural(warnings.length, 'warning')}, below.` : ''), 'ok');
      if (warnings.length) showWarnings(h('p', {}, `Version ${data.version}:`), warnings);
    } catch (e) {
      if (e.status === 409 && e.message === 'a canary is running') {
        notice('The push was refused: a canary is running. Abort it (below) first, or wait until ' +
          'it is promoted or rolled back. Nothing was changed.', 'error');
      } else if (e.status === 409) {
        const now = (await api('GET', '/v1/rules')).data;
        notice(`Someone else pushed first: the set is now version ${now.version}, not ${loaded.version}. ` +
          'Nothing of yours was pushed; what changed meanwhile is below.', 'error');
        result.replaceChildren(h('div', { id: 'conflict' },
          h('h2', {}, `What changed from ${loaded.version} to ${now.version}`),
          filesDiff(loaded.files, now.files, loaded.version, now.version),
          h('button', { type: 'button', class: 'secondary', onclick: () => load() }, 'Load the current version (drops your edits)')));
      } else if (e.status === 422 && e.body && e.body.tests) {
        const { passed, failed } = e.body.tests;
        notice(`The push was refused: ${failed} of ${passed + failed} rule tests failed. Nothing was changed.`, 'error');
        showErrors(e.body.errors, `${plural(failed, 'rule test')} failed`);
        result.append(h('div', { class: 'actions' },
          h('button', { type: 'button', id: 'push-skip-tests', class: 'danger', onclick: () => push(true) },
            'Push anyway (skip the tests)')));
      } else if (e.status === 422 && e.body && e.body.errors) {
        notice('The push was refused: nothing was changed.', 'error');
        showErrors(e.body.errors);
      } else notice(explain(e), 'error');
    }
  }

  async function rollback() {
    let to;
    try { to = await rollbackTarget(); } catch (e) { notice(explain(e), 'error'); return; }
    if (!to) { notice('There is no earlier version to roll back to.', 'error'); return; }
    const yes = await confirmAction(`Roll back from version ${loaded.version} to version ${to}? ` +
      'Its files replace those in the rules directory and it decides from now on.', `Roll back to ${to}`);
    if (!yes) { notice('Nothing was rolled back.'); return; }
    try {
      const { data } = await api('POST', '/v1/rules/rollback', { version: to });
      await load(true);
      notice(`Rolled back: version ${data.version} is in force.`, 'ok');
    } catch (e) { notice(explain(e), 'error'); }
  }

  const verdict = (v) => `${v.rule} · ${v.action}` + (v.label ? ` · ${v.label}` : '');
  const delays = (d) => (d && typeof d.p50 === 'number'
    ? `p50 ${fmtNum(d.p50, 0)} ms, p99 ${fmtNum(d.p99, 0)} ms` : '–');

  /** What the edited set would have decided of the logged decisions, as a table of changes. */
  async function whatIf() {
    try {
      const { data } = await api('POST', '/v1/rules/whatif', { files: edits });
      const rows = data.by || [];
      result.replaceChildren(h('div', { id: 'whatif' },
        h('h2', {}, 'What would change'),
        h('p', { id: 'whatif-summary' }, `Of ${fmtNum(data.total, 0)} logged decisions, ` +
          `${fmtNum(data.changed, 0)} would change (version ${data.version} → ${data.candidate}).`),
        table([
          ['was decided by', (r) => verdict(r.old)],
          ['would be decided by', (r) => verdict(r.new)],
          ['count', (r) => fmtNum(r.count, 0), 'num'],
          ['delay before', (r) => delays(r.delay_ms && r.delay_ms.old), 'nowrap'],
          ['delay after', (r) => delays(r.delay_ms && r.delay_ms.new), 'nowrap'],
        ], rows, null, 'whatif-rows')));
      notice(data.changed ? `${plural(data.changed, 'decision')} of ${data.total} would change.`
        : `None of ${plural(data.total, 'logged decision')} would change.`, data.changed ? null : 'ok');
    } catch (e) {
      if (e.status === 422 && e.body && e.body.errors) {
        notice('The edited set is not valid: nothing to compare.', 'error');
        showErrors(e.body.errors);
      } else notice(explain(e), 'error');
    }
  }

  const ARM_ROWS = [
    ['first deliveries', (a) => fmtNum(a.first_deliveries, 0)],
    ['retries', (a) => fmtNum(a.retries, 0)],
    ['dead letters', (a) => fmtNum(a.dead_letters, 0)],
    ['retry ratio', (a) => fmtNum(a.retry_ratio, 3)],
    ['dead-letter ratio', (a) => fmtNum(a.dead_letter_ratio, 3)],
    ['success by attempt', (a) => (a.success_by_attempt || []).map((n, i) => `#${i + 1}: ${n}`).join(', ') || '–'],
  ];

  /** The last canary: its state, and its two arms side by side; Abort while it runs. */
  async function showCanary() {
    // rebound_canary_state is 0 until a canary starts: GET /v1/rules/canary would be a 404
    // (an error in the browser's log), so it is asked only once there is one to show.
    const state = (await metrics()).find((m) => m.name === 'rebound_canary_state');
    if (!state || state.value === 0) { canaryBox.hidden = true; return; }
    const c = (await api('GET', '/v1/rules/canary')).data;
    const running = c.state === 'running' || c.state === 'held';
    const badge = { running: '', held: 'warn', promoted: 'ok', rolled_back: 'bad' }[c.state] || '';
    canaryBox.hidden = false;
    canaryBox.replaceChildren(
      h('h2', {}, running ? 'Canary' : 'Last canary'),
      h('dl', { class: 'facts' },
        h('dt', {}, 'state'), h('dd', {}, h('span', { id: 'canary-state', class: ('badge ' + badge).trim() }, c.state)),
        h('dt', {}, 'version'), h('dd', { id: 'canary-version' }, `${c.version} (stable ${c.stable_version || '–'})`),
        h('dt', {}, 'since'), h('dd', {}, c.since),
        h('dt', {}, 'slice'), h('dd', {}, `${c.percent}% of ` + (c.biz && c.biz.length ? c.biz.join(', ') : 'every biz')),
        h('dt', {}, 'promote after'), h('dd', {}, c.promote_after || '–'),
        ...(c.reason ? [h('dt', {}, 'reason'), h('dd', { id: 'canary-reason' }, c.reason)] : [])),
      table([
        ['', (r) => r[0]],
        ['stable', (r) => r[1](c.arms.stable), 'num'],
        ['canary', (r) => r[1](c.arms.canary), 'num'],
      ].map(([head, cell, cls], i) => [i === 0 ? { hidden: 'figure' } : head, cell, cls]), ARM_ROWS, null, 'canary-arms'),
      running ? h('div', { class: 'actions' },
        h('button', { type: 'button', id: 'canary-abort', class: 'danger', onclick: abortCanary }, 'Abort canary…')) : '');
  }

  async function abortCanary() {
    const yes = await confirmAction('Abort the canary? The stable set decides every message again; ' +
      'the canary is recorded in the history as rolled back.', 'Abort canary');
    if (!yes) { notice('The canary runs on.'); return; }
    try {
      await api('DELETE', '/v1/rules/canary');
      notice('The canary was aborted: the stable set decides every message.', 'ok');
      await showCanary();
    } catch (e) { notice(explain(e), 'error'); }
  }

  const rollbackButton = h('button', { type: 'button', id: 'rollback', class: 'danger apart', onclick: rollback }, 'Rollback…');

  // What Validate and Push say goes right under their buttons, above the editor, where the
  // operator who pressed them is looking.
  show(facts, canaryBox,
    h('div', { class: 'actions' },
      h('button', { type: 'button', id: 'validate', onclick: validate }, 'Validate'),
      h('button', { type: 'button', id: 'whatif-button', class: 'secondary', onclick: whatIf }, 'What would change?'),
      h('button', { type: 'button', id: 'push', onclick: () => push(false) }, 'Push'),
      h('button', { type: 'button', id: 'revert', class: 'secondary', onclick: () => load() }, 'Drop my edits'),
      rollbackButton),
    result,
    h('div', { class: 'editor' }, h('nav', { 'aria-label': 'Files' }, fileList), h('div', { class: 'code' }, gutter, editor)));
  await load();
  every(2000, showCanary);
});
