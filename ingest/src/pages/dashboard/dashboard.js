// Tocsin's dashboard. Every action is a call to the admin API (/admin/v1)
// with the admin token the operator pasted, kept in session storage (this
// tab only, gone when it closes) and sent only as a bearer token: no
// cookies, never in a URL. Names and other stored text are only ever set
// with textContent.
'use strict';
(() => {
  const STORAGE = 'tocsin.admin';
  const PROJECT = 'tocsin.dashboard.project';
  const VIEWS = ['projects', 'keys', 'devices', 'destinations', 'audit'];
  const AUDIT_PAGE = 50;

  const $ = (id) => document.getElementById(id);

  const state = {
    token: null,
    orgs: [],
    projects: [],
    project: null,
    auditCursor: null,
    view: null,
    // The last test of each destination shown, by its id.
    tests: new Map(),
  };

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // ---- DOM helpers ----

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }

  function button(cls, text, onClick, label) {
    const b = el('button', cls, text);
    b.type = 'button';
    if (label) b.setAttribute('aria-label', label);
    b.addEventListener('click', onClick);
    return b;
  }

  function cell(row, label, content) {
    const td = el('td');
    td.dataset.label = label;
    if (content instanceof Node) td.append(content);
    else td.textContent = content == null ? '—' : String(content);
    row.append(td);
    return td;
  }

  function chips(values, cls) {
    const box = el('span', 'chips');
    for (const v of values) box.append(el('span', 'chip' + (cls ? ' ' + cls : ''), v));
    return box;
  }

  const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

  function time(iso) {
    if (!iso) return null;
    const t = el('time', null, dateFormat.format(new Date(iso)));
    t.dateTime = iso;
    t.title = iso;
    return t;
  }

  // ---- the admin API ----

  async function api(method, path, body) {
    const init = {
      method,
      headers: { Authorization: 'Bearer ' + state.token, Accept: 'application/json' },
      cache: 'no-store',
      credentials: 'omit',
    };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch('/admin/v1' + path, init);
    } catch (_) {
      throw new ApiError(0, 'cannot reach the server');
    }
    let envelope = null;
    try {
      envelope = await res.json();
    } catch (_) {
      // not an envelope
    }
    if (!res.ok) {
      let message = (envelope && envelope.error) || res.statusText || 'request failed';
      const details = (envelope && envelope.details) || [];
      if (details.length) {
        message += ': ' + details.map((d) => d.message).join('; ');
      }
      throw new ApiError(res.status, message);
    }
    return envelope && envelope.data;
  }

  // ---- messages ----

  function showError(text) {
    const box = $('error');
    box.textContent = text;
    box.hidden = false;
  }

  function hideError() {
    $('error').hidden = true;
  }

  function notify(text) {
    $('notice').textContent = text;
  }

  function fail(err) {
    if (err.status === 401) {
      signOut();
      showError('This admin token was not accepted (' + err.message + '). Paste a valid one to sign in again.');
    } else if (err.status === 0) {
      showError('Cannot reach the server. Check your connection, then try again.');
    } else {
      showError(err.message + (err.status ? ' (' + err.status + ')' : ''));
    }
  }

  // Runs an action, showing its failure; returns whether it succeeded.
  async function attempt(action) {
    hideError();
    try {
      await action();
      return true;
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      fail(err);
      return false;
    }
  }

  // ---- confirmation and prompts ----

  // Opens the dialog; resolves with the field's value (or true), or null.
  function ask({ title, text, field, value, ok, danger, type }) {
    const dialog = $('dialog');
    $('dialog-title').textContent = title;
    $('dialog-text').textContent = text || '';
    $('dialog-field').hidden = !field;
    const input = $('dialog-input');
    input.required = !!field;
    input.type = type || 'text';
    if (field) {
      $('dialog-label').textContent = field;
      input.value = value == null ? '' : String(value);
    }
    const okButton = $('dialog-ok');
    okButton.textContent = ok;
    okButton.classList.toggle('danger-fill', !!danger);
    return new Promise((resolve) => {
      const done = (answer) => {
        $('dialog-form').onsubmit = null;
        $('dialog-cancel').onclick = null;
        dialog.onclose = null;
        if (dialog.open) dialog.close();
        resolve(answer);
      };
      $('dialog-form').onsubmit = (e) => {
        e.preventDefault();
        done(field ? input.value.trim() : true);
      };
      $('dialog-cancel').onclick = () => done(null);
      dialog.onclose = () => done(null);
      dialog.showModal();
      if (field) input.select();
      else $('dialog-cancel').focus();
    });
  }

  // ---- signing in and out ----

  async function signIn(token) {
    state.token = token;
    let me;
    try {
      me = await api('GET', '/me');
    } catch (err) {
      state.token = null;
      if (err.status === 401) {
        sessionStorage.removeItem(STORAGE);
        showLogin();
        showError('This admin token was not accepted (' + err.message + ').');
      } else {
        fail(err);
        showLogin();
      }
      return;
    }
    sessionStorage.setItem(STORAGE, token);
    hideError();
    $('who').textContent = 'Signed in as ' + me.name;
    $('sign-out').hidden = false;
    $('login').hidden = true;
    $('app').hidden = false;
    $('token-input').value = '';
    state.project = sessionStorage.getItem(PROJECT);
    await attempt(loadProjects);
    route();
  }

  function showLogin() {
    $('login').hidden = false;
    $('app').hidden = true;
    $('sign-out').hidden = true;
    $('who').textContent = '';
  }

  function signOut() {
    state.token = null;
    state.orgs = [];
    state.projects = [];
    sessionStorage.removeItem(STORAGE);
    sessionStorage.removeItem(PROJECT);
    for (const id of ['orgs', 'audit']) $(id).replaceChildren();
    for (const id of ['keys', 'devices', 'destinations']) $(id).tBodies[0].replaceChildren();
    hideSecret();
    hideDestSecret();
    notify('');
    showLogin();
    $('token-input').focus();
  }

  // ---- organizations and projects ----

  async function loadProjects() {
    const [orgs, projects] = await Promise.all([api('GET', '/organizations'), api('GET', '/projects')]);
    state.orgs = orgs.items;
    state.projects = projects.items;
    if (!state.projects.some((p) => p.id === state.project)) {
      state.project = state.projects.length ? state.projects[0].id : null;
    }
    renderOrgs();
    renderProjectPicker();
  }

  function currentProject() {
    return state.projects.find((p) => p.id === state.project) || null;
  }

  function projectLabel(p) {
    return p.organizationName + ' / ' + p.name;
  }

  function renderProjectPicker() {
    const select = $('project');
    select.replaceChildren();
    for (const org of state.orgs) {
      const group = el('optgroup');
      group.label = org.name;
      for (const p of state.projects.filter((p) => p.organizationId === org.id)) {
        const option = el('option', null, p.name);
        option.value = p.id;
        option.selected = p.id === state.project;
        group.append(option);
      }
      if (group.children.length) select.append(group);
    }
    if (state.project) sessionStorage.setItem(PROJECT, state.project);
  }

  function renderOrgs() {
    const box = $('orgs');
    box.replaceChildren();
    if (!state.orgs.length) {
      box.append(el('p', 'empty', 'No organizations yet: create the first one above.'));
    }
    for (const org of state.orgs) {
      const card = el('section', 'card org');
      card.dataset.id = org.id;
      const head = el('div', 'org-head');
      const title = el('h3', 'name', org.name);
      title.id = 'org-' + org.id;
      card.setAttribute('aria-labelledby', title.id);
      const count = org.projectCount === 1 ? '1 project' : org.projectCount + ' projects';
      head.append(
        title,
        el('span', 'count', count),
        button('quiet rename', 'Rename', () => renameOrg(org), 'Rename organization ' + org.name)
      );
      const list = el('ul', 'projects');
      for (const p of state.projects.filter((p) => p.organizationId === org.id)) {
        const li = el('li');
        li.dataset.id = p.id;
        if (p.id === state.project) li.setAttribute('aria-current', 'true');
        li.append(
          el('span', 'name', p.name),
          el('span', 'count', p.keyCount + ' keys · ' + p.deviceCount + ' devices'),
          button('quiet keys', 'API keys', () => openProject(p, 'keys'), 'API keys of ' + p.name),
          button('quiet devices', 'Devices', () => openProject(p, 'devices'), 'Devices of ' + p.name),
          button('quiet destinations', 'Destinations', () => openProject(p, 'destinations'), 'Destinations of ' + p.name),
          button('quiet rename', 'Rename', () => renameProject(p), 'Rename project ' + p.name)
        );
        list.append(li);
      }
      card.append(head, list, projectForm(org));
      box.append(card);
    }
  }

  function projectForm(org) {
    const form = el('form', 'add');
    const id = 'new-project-' + org.id;
    const label = el('label', null, 'New project in ' + org.name);
    label.htmlFor = id;
    const input = el('input');
    Object.assign(input, { id, name: 'name', maxLength: 100, required: true, autocomplete: 'off' });
    input.pattern = '[A-Za-z0-9._\\-]+';
    const submit = el('button', null, 'Create project');
    submit.type = 'submit';
    const row = el('div', 'row');
    row.append(input, submit);
    form.append(label, row);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const name = input.value.trim();
      await attempt(async () => {
        const project = await api('POST', '/organizations/' + org.id + '/projects', { name });
        state.project = project.id;
        notify('Created project ' + project.name + ' in ' + org.name + '.');
        await loadProjects();
      });
    });
    return form;
  }

  function openProject(p, view) {
    selectProject(p.id);
    location.hash = '#' + view;
  }

  function selectProject(id) {
    state.project = id;
    sessionStorage.setItem(PROJECT, id);
    $('project').value = id;
    hideSecret();
    hideDestSecret();
    state.tests.clear();
  }

  async function rename(kind, current, path) {
    const name = await ask({ title: 'Rename ' + kind, field: 'New name of ' + current, value: current, ok: 'Rename' });
    if (!name || name === current) return;
    await attempt(async () => {
      await api('PATCH', path, { name });
      notify('Renamed ' + kind + ' ' + current + ' to ' + name + '.');
      await loadProjects();
    });
  }

  const renameOrg = (org) => rename('organization', org.name, '/organizations/' + org.id);
  const renameProject = (p) => rename('project', p.name, '/projects/' + p.id);

  // ---- API keys ----

  async function loadKeys() {
    const project = currentProject();
    const body = $('keys').tBodies[0];
    if (!project) return body.replaceChildren();
    const { items } = await api('GET', '/projects/' + project.id + '/keys');
    if (project.id !== state.project) return;
    body.replaceChildren(...items.map(keyRow));
    $('keys-empty').hidden = items.length > 0;
  }

  function keyStatus(key) {
    if (key.revokedAt) return chips(['Revoked'], 'bad');
    const status = chips(['Active'], 'good');
    if (key.previousSecretExpiresAt && new Date(key.previousSecretExpiresAt) > new Date()) {
      const note = el('span', 'chip', 'old secret until ');
      note.append(time(key.previousSecretExpiresAt));
      status.append(note);
    }
    return status;
  }

  function keyRow(key) {
    const row = el('tr', key.revokedAt ? 'revoked' : null);
    row.dataset.id = key.id;
    const label = key.name || key.prefix;
    cell(row, 'Name', key.name || 'unnamed');
    cell(row, 'Prefix', el('code', 'prefix', key.prefix + '…'));
    cell(row, 'Scopes', chips(key.scopes));
    cell(row, 'Rate limit', key.rateLimit == null ? 'default' : key.rateLimit + '/min');
    cell(row, 'Created', time(key.createdAt));
    cell(row, 'Last used', key.lastUsedAt ? time(key.lastUsedAt) : 'never');
    cell(row, 'Status', keyStatus(key));
    const actions = cell(row, 'Actions', '');
    actions.className = 'actions';
    if (!key.revokedAt) {
      actions.append(
        button('quiet rotate', 'Rotate', () => rotateKey(key), 'Rotate key ' + label),
        ' ',
        button('quiet danger revoke', 'Revoke', () => revokeKey(key), 'Revoke key ' + label)
      );
    }
    return row;
  }

  async function createKey(e) {
    e.preventDefault();
    const project = currentProject();
    if (!project) return;
    const form = $('key-form');
    const scopes = [...form.querySelectorAll('input[name=scope]:checked')].map((c) => c.value);
    if (!scopes.length) return showError('Choose at least one scope.');
    const body = { scopes };
    const name = $('key-name').value.trim();
    if (name) body.name = name;
    const rate = $('key-rate').value.trim();
    if (rate) body.rateLimit = Number(rate);
    await attempt(async () => {
      const created = await api('POST', '/projects/' + project.id + '/keys', body);
      form.reset();
      showSecret('New key ' + (created.key.name || created.key.prefix) + ' in ' + projectLabel(project), created);
      await loadKeys();
    });
  }

  async function revokeKey(key) {
    const ok = await ask({
      title: 'Revoke ' + (key.name || key.prefix) + '?',
      text: 'Requests with this key get 401 from now on, and it cannot be used again. It stays listed, marked revoked.',
      ok: 'Revoke key',
      danger: true,
    });
    if (!ok) return;
    await attempt(async () => {
      await api('POST', '/keys/' + key.id + '/revoke');
      notify('Revoked key ' + (key.name || key.prefix) + '.');
      await loadKeys();
    });
  }

  async function rotateKey(key) {
    const hours = await ask({
      title: 'Rotate ' + (key.name || key.prefix) + '?',
      text: 'The key gets a new secret with the same scopes and rate limit. The old secret keeps working for the grace period, then gets 401.',
      field: 'Grace period in hours (0 ends the old secret now)',
      value: 24,
      type: 'number',
      ok: 'Rotate key',
      danger: true,
    });
    if (hours == null) return;
    const seconds = Math.round(Number(hours) * 3600);
    if (!Number.isFinite(seconds) || seconds < 0) return showError('The grace period is a number of hours, 0 or more.');
    const project = currentProject();
    await attempt(async () => {
      const rotated = await api('POST', '/keys/' + key.id + '/rotate', { gracePeriodSeconds: seconds });
      showSecret('New secret for ' + (rotated.key.name || rotated.key.prefix) + ' in ' + projectLabel(project), rotated);
      await loadKeys();
    });
  }

  function showSecret(title, { key, secret }) {
    const origin = location.origin;
    $('secret-title').textContent = title;
    $('secret-value').textContent = secret;
    $('secret-curl').textContent =
      'curl -s ' + origin + '/v1/events \\\n' +
      "  -H 'Authorization: Bearer " + secret + "' \\\n" +
      "  -H 'Content-Type: application/json' \\\n" +
      '  -d \'{"channelName":"test","title":"Hello from Tocsin","icon":"👋"}\'';
    $('secret-client').textContent =
      'import { Tocsin } from "@tocsin/client";\n\n' +
      '// Keep the key on the server side: a key shipped to a browser can be read by anyone.\n' +
      'const tocsin = new Tocsin(' + JSON.stringify(secret) + ', { baseUrl: ' + JSON.stringify(origin) + ' });\n' +
      'await tocsin.events.create({ channelName: "test", title: "Hello from Tocsin", icon: "👋" });';
    const note = $('secret-scope-note');
    note.hidden = key.scopes.includes('events:write');
    note.textContent = 'This key lacks events:write: the server answers these examples with 403.';
    const box = $('secret');
    box.hidden = false;
    box.focus();
  }

  function hideSecret() {
    $('secret').hidden = true;
    for (const id of ['secret-value', 'secret-curl', 'secret-client']) $(id).textContent = '';
  }

  // The Clipboard API where the page is a secure context (https, or
  // loopback), else the selection and the older copy command.
  async function copy(e) {
    const source = $(e.currentTarget.dataset.copy);
    const text = source.textContent;
    let copied = false;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(text);
        copied = true;
      }
    } catch (_) {
      // fall back below
    }
    if (!copied) {
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      copied = document.execCommand('copy');
    }
    notify(copied ? 'Copied to the clipboard.' : 'Selected: press Ctrl+C (⌘C) to copy.');
  }

  // ---- devices ----

  async function loadDevices() {
    const project = currentProject();
    const body = $('devices').tBodies[0];
    if (!project) return body.replaceChildren();
    const { items } = await api('GET', '/projects/' + project.id + '/devices');
    if (project.id !== state.project) return;
    body.replaceChildren(...items.map((d) => deviceRow(project, d)));
    $('devices-empty').hidden = items.length > 0;
  }

  function shortToken(token) {
    if (!token) return null;
    return token.length > 20 ? token.slice(0, 10) + '…' + token.slice(-6) : token;
  }

  // A device's alert rules in a line: "≥ normal · quiet 22:00–07:00
  // Europe/Berlin (high through) · 5/10 min · #payments · tagged db";
  // "all alerts" when it has none.
  function rulesText(d) {
    const q = d.quietHours;
    const through = q && (q.allowPriority ? q.allowPriority + (q.allowPriority === 'high' ? '' : '+') : 'nothing');
    return (
      [
        d.minPriority && d.minPriority !== 'low' && '≥ ' + d.minPriority,
        q && 'quiet ' + q.start + '–' + q.end + ' ' + q.timeZone + ' (' + through + ' through)',
        d.burst && d.burst.max + '/' + d.burst.perMinutes + ' min',
        d.channels && d.channels.map((c) => '#' + c).join(' '),
        d.tags && 'tagged ' + d.tags.join(', '),
      ]
        .filter(Boolean)
        .join(' · ') || 'all alerts'
    );
  }

  function deviceRow(project, d) {
    const row = el('tr', d.active === false ? 'revoked' : null);
    row.dataset.id = d.id;
    const label = d.name || shortToken(d.token) || d.id;
    cell(row, 'Name', d.name || 'unnamed');
    cell(row, 'Kind', [d.kind || null, d.environment || null].filter(Boolean).join(' · ') || null);
    const token = el('code', null, shortToken(d.token || d.endpoint) || '—');
    cell(row, 'Token', token);
    cell(row, 'Rules', rulesText(d)).className = 'rules';
    cell(row, 'Status', d.active === false ? chips(['Inactive' + (d.deactivatedReason ? ': ' + d.deactivatedReason : '')], 'bad') : chips(['Active'], 'good'));
    cell(row, 'Connected', time(d.createdAt));
    const actions = cell(row, 'Actions', '');
    actions.className = 'actions';
    actions.append(button('quiet danger delete', 'Delete', () => deleteDevice(project, d, label), 'Delete device ' + label));
    return row;
  }

  async function deleteDevice(project, d, label) {
    const ok = await ask({
      title: 'Delete device ' + label + '?',
      text: 'It gets no more alerts from ' + projectLabel(project) + ' until it connects again.',
      ok: 'Delete device',
      danger: true,
    });
    if (!ok) return;
    await attempt(async () => {
      await api('DELETE', '/projects/' + project.id + '/devices/' + d.id);
      notify('Deleted device ' + label + '.');
      await loadDevices();
    });
  }

  // ---- destinations ----

  const KINDS = { webhook: 'Webhook', slack: 'Slack', discord: 'Discord', telegram: 'Telegram', ntfy: 'ntfy', email: 'Email' };
  const SECRETS = { secret: 'Signing secret', webhookUrl: 'Webhook URL', botToken: 'Bot token', token: 'Access token' };
  const HEALTH = { untested: 'Untested', healthy: 'Healthy', unhealthy: 'Unhealthy', disabled: 'Disabled' };
  const FAILED = { retryable: 'failed (retried for alerts)', rejected: 'rejected', gone: 'gone: now disabled' };

  const destPath = (project, id) => '/projects/' + project.id + '/destinations' + (id ? '/' + id : '');

  async function loadDestinations() {
    const project = currentProject();
    const body = $('destinations').tBodies[0];
    if (!project) return body.replaceChildren();
    const { items } = await api('GET', destPath(project));
    if (project.id !== state.project) return;
    body.replaceChildren(...items.map((d) => destinationRow(project, d)));
    $('destinations-empty').hidden = items.length > 0;
  }

  // Where it sends, and its secret's hint, from its settings (which have
  // only hints of secrets).
  function sendsTo(d) {
    const s = d.settings || {};
    const [where, secret] = {
      webhook: [s.url, 'secret ' + s.secret],
      telegram: ['chat ' + s.chatId, 'bot ' + s.botToken],
      ntfy: [s.serverUrl + '/' + s.topic, s.token && 'token ' + s.token],
      email: [(s.to || []).join(', ')],
    }[d.kind] || [s.webhookUrl];
    const box = el('div', null, where);
    if (secret) box.append(el('p', 'hint', secret));
    return box;
  }

  function destinationHealth(d) {
    const h = d.health;
    const box = el('div');
    const cls = { healthy: 'good', unhealthy: 'bad', disabled: 'bad' }[h.status];
    box.append(chips([HEALTH[h.status] || h.status], cls));
    let note = null;
    if (h.status === 'disabled') {
      note = el('p', 'hint', d.disabledReason || 'turned off');
    } else if (h.failures && h.lastError) {
      note = el('p', 'hint', (h.failures === 1 ? '1 failure' : h.failures + ' failures in a row') + ': ' + h.lastError + ' ');
      note.append(time(h.lastErrorAt) || '');
    } else if (h.lastDeliveredAt) {
      note = el('p', 'hint', 'delivered ');
      note.append(time(h.lastDeliveredAt));
    }
    if (note) box.append(note);
    const tried = state.tests.get(d.id);
    const outcome = el('p', 'outcome' + (tried ? (tried.outcome === 'delivered' ? ' good' : ' bad') : ''), tried && tried.text);
    outcome.setAttribute('role', 'status');
    box.append(outcome);
    return box;
  }

  function destinationRow(project, d) {
    const row = el('tr', d.enabled ? null : 'revoked');
    row.dataset.id = d.id;
    cell(row, 'Name', d.name);
    cell(row, 'Kind', KINDS[d.kind] || d.kind);
    cell(row, 'Sends to', sendsTo(d)).className = 'rules';
    cell(row, 'Rules', rulesText(d)).className = 'rules';
    cell(row, 'Health', destinationHealth(d));
    const actions = cell(row, 'Actions', '');
    actions.className = 'actions';
    const toggle = d.enabled ? 'Disable' : 'Enable';
    actions.append(
      button('quiet test', 'Send test', (e) => testDestination(project, d, e.currentTarget), 'Send a test to ' + d.name),
      ' ',
      button('quiet toggle', toggle, () => toggleDestination(project, d), toggle + ' destination ' + d.name),
      ' ',
      button('quiet danger delete', 'Delete', () => deleteDestination(project, d), 'Delete destination ' + d.name)
    );
    return row;
  }

  function showKind() {
    const kind = $('dest-kind').value;
    for (const set of $('dest-form').querySelectorAll('fieldset.kind')) {
      set.hidden = set.disabled = set.dataset.kind !== kind;
    }
  }

  const splitList = (text) => text.split(',').map((v) => v.trim()).filter(Boolean);

  async function createDestination(e) {
    e.preventDefault();
    const project = currentProject();
    if (!project) return;
    const form = $('dest-form');
    const kind = $('dest-kind').value;
    const settings = {};
    for (const input of form.querySelectorAll('fieldset.kind:not([disabled]) input')) {
      const value = input.value.trim();
      if (value) settings[input.name] = input.name === 'to' ? splitList(value) : value;
    }
    const body = { kind, name: $('dest-name').value.trim(), settings };
    const channels = splitList($('dest-channels').value);
    if (channels.length) body.channels = channels;
    if ($('dest-priority').value) body.minPriority = $('dest-priority').value;
    await attempt(async () => {
      const { destination, secrets } = await api('POST', destPath(project), body);
      form.reset();
      showKind();
      if (Object.keys(secrets).length) showDestSecret(destination, secrets);
      else notify('Created destination ' + destination.name + '.');
      await loadDestinations();
    });
  }

  function showDestSecret(d, secrets) {
    $('dest-secret-title').textContent = 'New destination ' + d.name + ' (' + (KINDS[d.kind] || d.kind) + ')';
    const box = $('dest-secrets');
    box.replaceChildren();
    for (const [field, value] of Object.entries(secrets)) {
      const id = 'dest-secret-' + field;
      const code = el('code', 'value', value);
      code.id = id;
      const copyButton = button('quiet', 'Copy', copy, 'Copy the ' + (SECRETS[field] || field).toLowerCase());
      copyButton.dataset.copy = id;
      const row = el('div', 'copyable');
      row.append(code, copyButton);
      box.append(el('h4', null, SECRETS[field] || field), row);
    }
    if (secrets.secret) {
      box.append(el('p', 'hint', "Your endpoint checks each request's webhook-signature header with it (Standard Webhooks)."));
    }
    const section = $('dest-secret');
    section.hidden = false;
    section.focus();
  }

  function hideDestSecret() {
    $('dest-secret').hidden = true;
    $('dest-secrets').replaceChildren();
  }

  async function testDestination(project, d, trigger) {
    trigger.disabled = true;
    const outcome = trigger.closest('tr').querySelector('.outcome');
    outcome.className = 'outcome';
    outcome.textContent = 'Sending a test…';
    const ok = await attempt(async () => {
      const r = await api('POST', destPath(project, d.id) + '/test');
      const text = r.outcome === 'delivered' ? '✓ test delivered in ' + r.latencyMs + ' ms' : '✗ test ' + (FAILED[r.outcome] || r.outcome) + ': ' + r.error;
      state.tests.set(d.id, { outcome: r.outcome, text });
      notify('Test to ' + d.name + ': ' + text);
      const row = trigger.closest('tr');
      if (row && row.isConnected) {
        const fresh = destinationRow(project, r.destination);
        row.replaceWith(fresh);
        fresh.querySelector('button.test').focus();
      }
    });
    if (!ok) {
      outcome.textContent = '';
      trigger.disabled = false;
    }
  }

  async function toggleDestination(project, d) {
    await attempt(async () => {
      await api('PATCH', destPath(project, d.id), { enabled: !d.enabled });
      notify((d.enabled ? 'Disabled' : 'Enabled') + ' destination ' + d.name + '.');
      await loadDestinations();
    });
  }

  async function deleteDestination(project, d) {
    const ok = await ask({
      title: 'Delete destination ' + d.name + '?',
      text: 'Alerts from ' + projectLabel(project) + ' stop going to it. What was delivered stays delivered.',
      ok: 'Delete destination',
      danger: true,
    });
    if (!ok) return;
    await attempt(async () => {
      await api('DELETE', destPath(project, d.id));
      state.tests.delete(d.id);
      notify('Deleted destination ' + d.name + '.');
      await loadDestinations();
    });
  }

  // ---- audit log ----

  async function loadAudit(more) {
    const query = '?limit=' + AUDIT_PAGE + (more && state.auditCursor ? '&cursor=' + encodeURIComponent(state.auditCursor) : '');
    const page = await api('GET', '/audit' + query);
    const list = $('audit');
    if (!more) list.replaceChildren();
    list.append(...page.items.map(auditItem));
    state.auditCursor = page.nextCursor;
    $('audit-more').hidden = !page.nextCursor;
    $('audit-empty').hidden = list.children.length > 0;
  }

  function auditItem(entry) {
    const li = el('li');
    li.dataset.id = entry.id;
    const what = el('div', 'what');
    const target = entry.target || {};
    what.append(
      el('span', 'action', entry.action),
      el('span', 'target', target.type + ' ' + (target.name || target.id || '')),
      time(entry.at)
    );
    const actor = entry.actor || {};
    const by = 'by ' + (actor.name || 'unknown') + ' (' + actor.kind + ')' + (entry.address ? ' from ' + entry.address : '');
    li.append(what, el('p', 'by', by));
    const details = entry.details && Object.keys(entry.details).length ? JSON.stringify(entry.details) : null;
    if (details) li.append(el('p', 'details', details));
    return li;
  }

  // ---- views ----

  const loaders = {
    projects: loadProjects,
    keys: loadKeys,
    devices: loadDevices,
    destinations: loadDestinations,
    audit: () => loadAudit(false),
  };

  async function route() {
    if (!state.token) return;
    const view = VIEWS.includes(location.hash.slice(1)) ? location.hash.slice(1) : 'projects';
    const changed = view !== state.view;
    state.view = view;
    for (const name of VIEWS) $('view-' + name).hidden = name !== view;
    for (const a of document.querySelectorAll('.tabs a')) {
      if (a.dataset.view === view) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const perProject = ['keys', 'devices', 'destinations'].includes(view);
    $('project-bar').hidden = !perProject || !state.projects.length;
    $('no-project').hidden = !perProject || state.projects.length > 0;
    if (perProject && !state.projects.length) $('view-' + view).hidden = true;
    if (changed) $(view + '-title').focus();
    await attempt(loaders[view]);
  }

  function start() {
    $('token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const token = $('token-input').value.trim();
      if (token) signIn(token);
    });
    $('sign-out').addEventListener('click', () => {
      signOut();
      notify('Signed out.');
    });
    $('org-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      const name = $('org-name').value.trim();
      await attempt(async () => {
        const org = await api('POST', '/organizations', { name });
        $('org-name').value = '';
        notify('Created organization ' + org.name + '.');
        await loadProjects();
      });
    });
    $('project').addEventListener('change', (e) => {
      selectProject(e.target.value);
      route();
    });
    $('key-form').addEventListener('submit', createKey);
    $('secret-done').addEventListener('click', hideSecret);
    $('dest-form').addEventListener('submit', createDestination);
    $('dest-kind').addEventListener('change', showKind);
    $('dest-secret-done').addEventListener('click', hideDestSecret);
    for (const b of document.querySelectorAll('[data-copy]')) b.addEventListener('click', copy);
    $('audit-more').addEventListener('click', () => attempt(() => loadAudit(true)));
    window.addEventListener('hashchange', route);

    const saved = sessionStorage.getItem(STORAGE);
    if (saved) signIn(saved);
    else showLogin();
  }

  start();
})();
