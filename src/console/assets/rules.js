// /ui/rules: the set in force (GET /v1/rules), edited in the browser, validated
// (POST /v1/rules/validate), pushed (PUT /v1/rules with If-Match) or rolled back
// (POST /v1/rules/rollback).
'use strict';

Rebound.start(async () => {
  const { h, api, show, notice, explain, filesDiff } = Rebound;
  const LINE_PX = 18;
  let loaded = null;   // {version, loaded_at, source, files}
  let edits = {};      // name → text as edited
  let current = null;  // the file shown
  const gutter = h('pre', { class: 'gutter', 'aria-hidden': 'true' });
  const editor = h('textarea', { id: 'editor', spellcheck: 'false', wrap: 'off', 'aria-label': 'file' });
  const fileList = h('ul', { class: 'files', id: 'files' });
  const result = h('div', { id: 'result' });
  const facts = h('dl', { class: 'facts', id: 'facts' });

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

  function showErrors(errors) {
    result.replaceChildren(h('h2', {}, `${errors.length} error${errors.length === 1 ? '' : 's'}`),
      h('ul', { class: 'errors', id: 'errors' }, errors.map((e) => {
        const at = `${e.file}:${e.line}:${e.column}`;
        const name = fileOf(e);
        return h('li', {}, h('button', {
          type: 'button', class: 'error', 'data-at': at, disabled: name === null,
          onclick: () => showLine(name, e.line, e.column),
        }, `${at}: ${e.message}`));
      })));
  }

  function showFacts() {
    facts.replaceChildren(
      h('dt', {}, 'version'), h('dd', { id: 'version' }, loaded.version),
      h('dt', {}, 'loaded at'), h('dd', {}, loaded.loaded_at),
      h('dt', {}, 'source'), h('dd', {}, loaded.source),
      h('dt', {}, 'files'), h('dd', {}, String(Object.keys(loaded.files).length)));
  }

  async function load(keepNotice) {
    loaded = (await api('GET', '/v1/rules')).data;
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
      result.replaceChildren(h('p', { id: 'valid' }, `Valid: it would be version ${data.version}.`));
      notice('The edited set is valid.', 'ok');
    } catch (e) {
      if (e.status === 422 && e.body && e.body.errors) {
        notice('The edited set is not valid: nothing was changed.', 'error');
        showErrors(e.body.errors);
      } else notice(explain(e), 'error');
    }
  }

  async function push() {
    try {
      const { data } = await api('PUT', '/v1/rules', { files: edits }, { 'If-Match': loaded.version });
      await load(true);
      notice(`Pushed: version ${data.version} is in force.`, 'ok');
    } catch (e) {
      if (e.status === 409) {
        const now = (await api('GET', '/v1/rules')).data;
        notice(`Someone else pushed first: the set is now version ${now.version}, not ${loaded.version}. ` +
          'Nothing of yours was pushed; what changed meanwhile is below.', 'error');
        result.replaceChildren(h('div', { id: 'conflict' },
          h('h2', {}, `What changed from ${loaded.version} to ${now.version}`),
          filesDiff(loaded.files, now.files, loaded.version, now.version),
          h('button', { type: 'button', class: 'secondary', onclick: () => load() }, 'Load the current version (drops your edits)')));
      } else if (e.status === 422 && e.body && e.body.errors) {
        notice('The push was refused: nothing was changed.', 'error');
        showErrors(e.body.errors);
      } else notice(explain(e), 'error');
    }
  }

  async function rollback() {
    try {
      const { data } = await api('POST', '/v1/rules/rollback');
      await load(true);
      notice(`Rolled back: version ${data.version} is in force.`, 'ok');
    } catch (e) { notice(explain(e), 'error'); }
  }

  // What Validate and Push say goes right under their buttons, above the editor, where the
  // operator who pressed them is looking.
  show(facts,
    h('div', { class: 'actions' },
      h('button', { type: 'button', id: 'validate', onclick: validate }, 'Validate'),
      h('button', { type: 'button', id: 'push', onclick: push }, 'Push'),
      h('button', { type: 'button', id: 'revert', class: 'secondary', onclick: () => load() }, 'Drop my edits'),
      h('button', { type: 'button', id: 'rollback', class: 'danger', onclick: rollback }, 'Rollback')),
    result,
    h('div', { class: 'editor' }, h('nav', {}, fileList), h('div', { class: 'code' }, gutter, editor)));
  await load();
});
