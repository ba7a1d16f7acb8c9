// The feed page's users: a user's view (properties, aliases, first and last
// seen, event count, and its events newest first, under its id and every
// alias: GET /v1/users/{id}, GET /v1/events?userId=…), opened from the user
// chip of any event (feed.js sends `tocsin:user`), and the list of users,
// most recently seen first, searched by id or alias (GET /v1/users?q=…).
// A live event of the open user (feed.js sends `tocsin:event`) joins its
// timeline. User data is user input: it is only ever set with textContent.
'use strict';
(() => {
  const KEY = 'tocsin.key';
  const PAGE_SIZE = 20;

  const $ = (id) => document.getElementById(id);
  const state = { view: null, user: null, cursor: null, gen: 0, known: new Set(), listCursor: null, listGen: 0 };

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }

  async function api(path, params) {
    const url = new URL(path, location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v != null && v !== '') url.searchParams.set(k, v);
    }
    const res = await fetch(url, {
      headers: { Authorization: 'Bearer ' + localStorage.getItem(KEY), Accept: 'application/json' },
      cache: 'no-store',
    });
    let body = null;
    try {
      body = await res.json();
    } catch (_) {
      // not JSON
    }
    if (!res.ok) {
      const error = new Error((body && body.error) || res.statusText || 'request failed');
      error.status = res.status;
      throw error;
    }
    return body.data;
  }

  function showError(err) {
    const box = $('error');
    box.textContent =
      err.status === 404 ? 'No such user in this project.' : 'The server answered ' + (err.status || 0) + ': ' + err.message;
    box.hidden = false;
  }

  function when(iso) {
    const t = el('time', null, new Date(iso).toLocaleString());
    t.dateTime = iso;
    return t;
  }

  // One view at a time in place of the feed; null shows the feed again.
  function show(view) {
    state.view = view;
    $('feed').hidden = view !== null;
    $('user-view').hidden = view !== 'user';
    $('users-view').hidden = view !== 'users';
    $('error').hidden = true;
    window.scrollTo(0, 0);
  }

  // ---- one user ----

  async function openUser(id) {
    const gen = ++state.gen;
    show('user');
    state.user = null;
    state.cursor = null;
    state.known.clear();
    $('user-title').textContent = id;
    $('user-events').replaceChildren();
    $('user-more').hidden = true;
    $('user-empty').hidden = true;
    try {
      const user = await api('/v1/users/' + encodeURIComponent(id));
      if (gen !== state.gen) return;
      state.user = user;
      renderUser();
      $('user-back').focus();
      await loadEvents(gen);
    } catch (err) {
      if (gen === state.gen) showError(err);
    }
  }

  function renderUser() {
    const u = state.user;
    $('user-title').textContent = u.user_id;
    $('user-count').textContent = u.eventCount.toLocaleString();
    $('user-first').replaceChildren(when(u.firstSeenAt));
    $('user-last').replaceChildren(when(u.lastSeenAt));
    const aliases = u.aliases.map((a) => el('li', null, a));
    $('user-aliases').replaceChildren(...(aliases.length ? aliases : [el('li', 'none', 'None')]));
    const props = [];
    for (const [key, value] of Object.entries(u.properties)) {
      const row = el('div');
      row.append(el('dt', null, key), el('dd', null, typeof value === 'string' ? value : JSON.stringify(value)));
      props.push(row);
    }
    $('user-properties').replaceChildren(...(props.length ? props : [el('div', 'none', 'None')]));
  }

  function renderEvent(ev) {
    const li = el('li', 'event');
    li.dataset.id = ev.id;
    const icon = el('span', 'icon', ev.icon || '🔔');
    icon.setAttribute('aria-hidden', 'true');
    const body = el('div', 'body');
    const head = el('div', 'head');
    head.append(el('h4', 'title', ev.title), when(ev.createdAt));
    body.append(head);
    if (ev.description) body.append(el('p', 'desc', ev.description));
    const meta = el('div', 'meta');
    meta.append(el('span', 'channel', '#' + ev.channelName));
    if (ev.userId !== state.user.user_id) meta.append(el('span', 'as', 'as ' + ev.userId));
    body.append(meta);
    li.append(icon, body);
    return li;
  }

  async function loadEvents(gen) {
    try {
      const data = await api('/v1/events', { userId: state.user.user_id, limit: PAGE_SIZE, cursor: state.cursor });
      if (gen !== state.gen) return;
      for (const ev of data.items) {
        if (state.known.has(ev.id)) continue;
        state.known.add(ev.id);
        $('user-events').append(renderEvent(ev));
      }
      state.cursor = data.nextCursor;
      $('user-more').hidden = !state.cursor;
      $('user-empty').hidden = state.known.size > 0;
    } catch (err) {
      if (gen === state.gen) showError(err);
    }
  }

  // A live event of the open user: first in its timeline, and counted.
  function live(ev) {
    const u = state.user;
    if (state.view !== 'user' || !u || state.known.has(ev.id)) return;
    if (ev.userId !== u.user_id && !u.aliases.includes(ev.userId)) return;
    state.known.add(ev.id);
    $('user-events').prepend(renderEvent(ev));
    $('user-empty').hidden = true;
    u.eventCount += 1;
    if (ev.createdAt > u.lastSeenAt) u.lastSeenAt = ev.createdAt;
    renderUser();
  }

  // ---- the list of users ----

  async function loadUsers(reset) {
    const gen = reset ? ++state.listGen : state.listGen;
    if (reset) {
      state.listCursor = null;
      $('users-list').replaceChildren();
    }
    try {
      const data = await api('/v1/users', { q: $('users-search').value.trim(), limit: PAGE_SIZE, cursor: state.listCursor });
      if (gen !== state.listGen) return;
      for (const u of data.items) {
        const li = el('li', 'user');
        const open = el('button', 'user-open', '👤 ' + u.userId);
        open.type = 'button';
        open.addEventListener('click', () => openUser(u.userId));
        const facts = el('span', 'seen', u.eventCount.toLocaleString() + (u.eventCount === 1 ? ' event · seen ' : ' events · seen '));
        facts.append(when(u.lastSeenAt));
        li.append(open, facts);
        $('users-list').append(li);
      }
      state.listCursor = data.nextCursor;
      $('users-more').hidden = !state.listCursor;
      $('users-empty').hidden = $('users-list').children.length > 0;
    } catch (err) {
      if (gen === state.listGen) showError(err);
    }
  }

  function init() {
    document.addEventListener('tocsin:user', (e) => openUser(e.detail.userId));
    document.addEventListener('tocsin:event', (e) => live(e.detail));
    document.addEventListener('tocsin:forget', () => {
      state.gen++;
      state.listGen++;
      state.view = null;
      $('user-view').hidden = true;
      $('users-view').hidden = true;
    });
    for (const back of ['user-back', 'users-back']) $(back).addEventListener('click', () => show(null));
    $('user-more').addEventListener('click', () => loadEvents(state.gen));
    $('users-open').addEventListener('click', () => {
      show('users');
      loadUsers(true);
    });
    $('users-more').addEventListener('click', () => loadUsers(false));
    let typing = 0;
    $('users-search').addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => loadUsers(true), 300);
    });
    $('users-search-form').addEventListener('submit', (e) => {
      e.preventDefault();
      clearTimeout(typing);
      loadUsers(true);
    });
  }

  init();
})();
