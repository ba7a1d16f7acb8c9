// Tocsin's feed page. Reads only the public read API (/v1/events,
// /v1/channels, /v1/stats/events, /v1/insights, /v1/stream) with a key the reader pastes,
// kept in local storage and sent only as a bearer token, never in a URL.
// Event text is user input: it is only ever set with textContent.
'use strict';
(() => {
  const STORAGE = 'tocsin.key';
  const PAGE_SIZE = 50;
  const MAX_BACKOFF_MS = 30000;

  const $ = (id) => document.getElementById(id);

  const state = {
    key: null,
    filter: { channel: null, tag: null, userId: null, q: '' },
    cursor: null,
    loading: false,
    listGen: 0,
    statsGen: 0,
    streamGen: 0,
    streamAbort: null,
    lastEventId: null,
    retryMs: 1000,
    known: new Map(),
    channels: [],
    chart: null,
    resyncTimer: 0,
    // Insights' tiles by title; titles the stream changed while listing.
    tiles: new Map(),
    insightsGen: 0,
    touched: null,
    // An event to show once it is on the page (an alert was clicked).
    focus: null,
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

  function button(cls, text, label, onClick) {
    const b = el('button', cls, text);
    b.type = 'button';
    if (label) b.title = label;
    b.addEventListener('click', onClick);
    return b;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  // ---- the API ----

  function authHeaders(extra) {
    return Object.assign({ Authorization: 'Bearer ' + state.key }, extra);
  }

  async function errorOf(res) {
    let message = '';
    try {
      const body = await res.json();
      message = body && body.error;
    } catch (_) {
      // not an envelope
    }
    return new ApiError(res.status, message || res.statusText || 'request failed');
  }

  async function api(path, params) {
    const url = new URL(path, location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v != null && v !== '') url.searchParams.set(k, v);
    }
    let res;
    try {
      res = await fetch(url, {
        headers: authHeaders({ Accept: 'application/json' }),
        cache: 'no-store',
      });
    } catch (_) {
      throw new ApiError(0, 'cannot reach the server');
    }
    if (!res.ok) throw await errorOf(res);
    const body = await res.json();
    return body.data;
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

  function fail(err) {
    if (err.status === 401 || err.status === 403) {
      forget();
      showError(
        err.status === 403
          ? 'This key lacks the events:read scope, which the feed needs. Keys made by ' +
            '"ingest keys create" have it unless --scopes leaves it out.'
          : 'This key was not accepted (' + err.message + '). Check it and paste it again.'
      );
    } else if (err.status === 0) {
      showError('Cannot reach the server. Check your connection, then reload.');
    } else if (err.status === 429) {
      showError('Too many requests for this key (' + err.message + '). Try again in a minute.');
    } else {
      showError('The server answered ' + err.status + ': ' + err.message);
    }
  }

  function setLive(text, on) {
    const live = $('live');
    live.textContent = text;
    live.classList.toggle('on', !!on);
  }

  // ---- the key ----

  function fragment(name) {
    const match = new RegExp('(?:^#|&)' + name + '=([^&]*)').exec(location.hash);
    if (!match) return null;
    try {
      return decodeURIComponent(match[1]).trim();
    } catch (_) {
      return ''; // a malformed fragment holds nothing
    }
  }

  // `/#key=…`: stored, then removed from the address bar (and history);
  // `/#event=…` (an alert clicked): that event shown once it is listed;
  // `/#channel=…` (a summary alert clicked): the feed of that channel.
  function takeKeyFromFragment() {
    const key = fragment('key');
    const event = fragment('event');
    const channel = fragment('channel');
    if (key === null && event === null && channel === null) return false;
    history.replaceState(null, '', location.pathname + location.search);
    if (event) focusEvent(event);
    if (channel) showChannel(channel);
    if (!key) return false;
    localStorage.setItem(STORAGE, key);
    return true;
  }

  function showLogin() {
    $('feed').hidden = true;
    $('forget').hidden = true;
    $('login').hidden = false;
    setLive('', false);
    $('key-input').focus();
  }

  function forget() {
    document.dispatchEvent(new CustomEvent('tocsin:forget'));
    stopStream();
    localStorage.removeItem(STORAGE);
    state.key = null;
    state.listGen++;
    state.statsGen++;
    state.known.clear();
    state.channels = [];
    state.lastEventId = null;
    $('events').replaceChildren();
    $('more').hidden = true;
    $('empty').hidden = true;
    $('channels').replaceChildren();
    state.chart = null;
    $('chart').replaceChildren();
    state.insightsGen++;
    state.tiles.clear();
    $('insight-tiles').replaceChildren();
    $('insights').hidden = true;
    $('chart-caption').textContent = '';
    showLogin();
  }

  async function start() {
    state.key = localStorage.getItem(STORAGE);
    if (!state.key) {
      showLogin();
      return;
    }
    state.lastEventId = null;
    hideError();
    $('login').hidden = true;
    $('feed').hidden = false;
    $('forget').hidden = false;
    // Connected first, so every event is either in the first page or on the
    // stream; a key that is refused stops here.
    if ((await startStream()) === 'refused') return;
    await Promise.all([loadChannels(), reload(), loadStats()]);
  }

  // ---- events ----

  function matches(ev) {
    const f = state.filter;
    if (f.channel && ev.channelName !== f.channel) return false;
    if (f.tag && !(ev.tags || []).includes(f.tag)) return false;
    if (f.userId && ev.userId !== f.userId) return false;
    if (f.q) {
      const q = f.q.toLowerCase();
      const text = (ev.title + '\n' + (ev.description || '')).toLowerCase();
      if (!text.includes(q)) return false;
    }
    return true;
  }

  function ago(iso) {
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (seconds < 45) return 'just now';
    if (seconds < 3600) return Math.max(1, Math.round(seconds / 60)) + ' min ago';
    if (seconds < 86400) return Math.floor(seconds / 3600) + ' h ago';
    const days = Math.floor(seconds / 86400);
    if (days < 7) return days === 1 ? 'yesterday' : days + ' days ago';
    return new Date(iso).toLocaleDateString(undefined, { day: 'numeric', month: 'short', year: 'numeric' });
  }

  function refreshTimes() {
    for (const t of $('events').querySelectorAll('time[datetime]')) {
      t.textContent = ago(t.dateTime);
    }
  }

  // A link's host and path, short enough for one line.
  function linkText(url) {
    try {
      const u = new URL(url);
      const text = u.host + (u.pathname === '/' ? '' : u.pathname);
      return '↗ ' + (text.length > 60 ? text.slice(0, 59) + '…' : text);
    } catch {
      return '↗ link';
    }
  }

  function render(ev) {
    const li = el('li', 'event');
    li.dataset.id = ev.id;
    const icon = el('span', 'icon', ev.icon || '🔔');
    icon.setAttribute('aria-hidden', 'true');

    const body = el('div', 'body');
    const head = el('div', 'head');
    const time = el('time', null, ago(ev.createdAt));
    time.dateTime = ev.createdAt;
    time.title = new Date(ev.createdAt).toLocaleString();
    head.append(el('h3', 'title', ev.title), time);
    body.append(head);
    if (ev.descriptionHtml) {
      // Markdown, rendered and sanitised by the service (only markdown's
      // own tags; links to http(s) and mailto, rel="noopener noreferrer").
      // A template parses it inert: nothing in it loads or runs, and the
      // page's Content-Security-Policy forbids inline script besides.
      const desc = el('div', 'desc markdown');
      const parsed = document.createElement('template');
      parsed.innerHTML = ev.descriptionHtml;
      for (const a of parsed.content.querySelectorAll('a')) a.target = '_blank';
      desc.append(parsed.content);
      body.append(desc);
    } else if (ev.description) {
      body.append(el('p', 'desc', ev.description));
    }
    if (ev.url && /^https?:\/\//i.test(ev.url)) {
      const link = el('a', 'link', linkText(ev.url));
      link.href = ev.url;
      link.rel = 'noopener noreferrer';
      link.target = '_blank';
      body.append(link);
    }

    const meta = el('div', 'meta');
    const channel = ev.channelName;
    meta.append(button('channel', '#' + channel, 'Only #' + channel, () => setFilter({ channel })));
    for (const tag of ev.tags || []) {
      meta.append(button('tag', tag, 'Only events tagged ' + tag, () => setFilter({ tag })));
    }
    if (ev.userId) {
      const userId = ev.userId;
      // The user's own view (users.js): its properties, counts and timeline.
      const open = () => document.dispatchEvent(new CustomEvent('tocsin:user', { detail: { userId } }));
      meta.append(button('user', '👤 ' + userId, 'Open the user ' + userId, open));
    }
    body.append(meta);
    li.append(icon, body);
    li._at = Date.parse(ev.createdAt);
    li._id = ev.id;
    return li;
  }

  // The event of a clicked alert: scrolled to and outlined, now if it is
  // listed, else when it arrives (with any filter that would hide it off).
  function focusEvent(id) {
    const li = state.known.get(id);
    if (!li) {
      state.focus = id;
      const f = state.filter;
      if (state.key && (f.channel || f.tag || f.userId || f.q)) {
        $('search').value = '';
        setFilter({ channel: null, tag: null, userId: null, q: '' });
      }
      return;
    }
    state.focus = null;
    for (const other of $('events').querySelectorAll('.focus')) other.classList.remove('focus');
    li.classList.add('focus');
    li.scrollIntoView({ block: 'center' });
  }

  // A summary's channel (it tells how many alerts of it were held back):
  // its events alone, with any other filter that would hide some off.
  // Before the feed has started, the filter is only set: start() loads
  // with it.
  function showChannel(channel) {
    const filter = { channel, tag: null, userId: null, q: '' };
    $('search').value = '';
    if (state.key) setFilter(filter);
    else state.filter = filter;
  }

  // Newest first, as the API orders them: createdAt, then id.
  function newer(a, b) {
    return a._at > b._at || (a._at === b._at && a._id > b._id);
  }

  function insert(ev, live) {
    if (state.known.has(ev.id)) return;
    const li = render(ev);
    state.known.set(ev.id, li);
    const list = $('events');
    let before = null;
    for (const other of list.children) {
      if (newer(li, other)) {
        before = other;
        break;
      }
    }
    list.insertBefore(li, before);
    if (live) li.classList.add('new');
    $('empty').hidden = true;
    if (ev.id === state.focus) focusEvent(ev.id);
  }

  async function reload() {
    const gen = ++state.listGen;
    state.cursor = null;
    state.loading = false;
    state.known.clear();
    $('events').replaceChildren();
    $('more').hidden = true;
    $('empty').hidden = true;
    await loadPage(gen);
  }

  async function loadPage(gen) {
    if (state.loading || gen !== state.listGen || !state.key) return;
    state.loading = true;
    const f = state.filter;
    try {
      const data = await api('/v1/events', {
        channel: f.channel,
        tag: f.tag,
        userId: f.userId,
        q: f.q,
        limit: PAGE_SIZE,
        cursor: state.cursor,
      });
      if (gen !== state.listGen) return;
      for (const ev of data.items) insert(ev, false);
      state.cursor = data.nextCursor;
      $('more').hidden = !state.cursor;
      $('empty').hidden = state.known.size > 0;
      hideError();
    } catch (err) {
      if (gen === state.listGen) fail(err);
    } finally {
      if (gen === state.listGen) state.loading = false;
    }
  }

  // ---- filters ----

  function setFilter(patch) {
    const before = state.filter;
    state.filter = Object.assign({}, before, patch);
    renderChannels();
    renderFilters();
    if (state.filter.channel !== before.channel) loadStats();
    reload();
    window.scrollTo(0, 0);
  }

  function renderFilters() {
    const box = $('filters');
    const chips = [];
    const f = state.filter;
    if (f.tag) chips.push(button(null, 'tag: ' + f.tag + ' ✕', 'Remove the tag filter', () => setFilter({ tag: null })));
    if (f.userId) {
      chips.push(button(null, 'user: ' + f.userId + ' ✕', 'Remove the user filter', () => setFilter({ userId: null })));
    }
    box.replaceChildren(...chips);
  }

  // ---- channels ----

  async function loadChannels() {
    const key = state.key;
    try {
      const data = await api('/v1/channels');
      if (key !== state.key) return;
      state.channels = data.items;
      renderChannels();
    } catch (err) {
      if (key === state.key) fail(err);
    }
  }

  function channelItem(name, label, count) {
    const li = el('li');
    const b = button(null, null, null, () => setFilter({ channel: name }));
    b.setAttribute('aria-pressed', String(state.filter.channel === name));
    b.dataset.channel = name || '';
    const n = el('span', 'count', count);
    n.title = count + (count === 1 ? ' event' : ' events');
    b.append(el('span', 'name', label), n);
    li.append(b);
    return li;
  }

  // A live event counted at once; the next resync makes the counts exact.
  function countChannel(ev) {
    let channel = state.channels.find((c) => c.name === ev.channelName);
    if (channel) {
      state.channels.splice(state.channels.indexOf(channel), 1);
    } else {
      channel = { name: ev.channelName, eventCount: 0, lastEventAt: null };
    }
    channel.eventCount += 1;
    channel.lastEventAt = ev.createdAt;
    // Most recently active first, as the API lists them.
    state.channels.unshift(channel);
    renderChannels();
  }

  function renderChannels() {
    const total = state.channels.reduce((sum, c) => sum + c.eventCount, 0);
    const items = [channelItem(null, 'All channels', total)];
    for (const c of state.channels) items.push(channelItem(c.name, '#' + c.name, c.eventCount));
    $('channels').replaceChildren(...items);
  }

  // ---- the chart ----

  async function loadStats() {
    const gen = ++state.statsGen;
    const channel = state.filter.channel;
    try {
      const data = await api('/v1/stats/events', { channel, bucket: 'hour' });
      if (gen !== state.statsGen) return;
      state.chart = { buckets: data.buckets, channel };
      drawChart();
    } catch (err) {
      if (gen === state.statsGen) fail(err);
    }
  }

  // A live event into its hour's bar; one past the last bar means the
  // hours have moved on, so the chart is asked for again.
  function countInChart(ev) {
    const chart = state.chart;
    if (!chart || (chart.channel && chart.channel !== ev.channelName)) return;
    const at = Date.parse(ev.createdAt);
    const bucket = chart.buckets.find((b) => {
      const start = Date.parse(b.start);
      return start <= at && at < start + 3600000;
    });
    if (bucket) {
      bucket.count += 1;
      drawChart();
    } else if (chart.buckets.length && at >= Date.parse(chart.buckets[chart.buckets.length - 1].start)) {
      loadStats();
    }
  }

  function drawChart() {
    const { buckets, channel } = state.chart;
    const width = 240;
    const height = 48;
    const step = width / Math.max(1, buckets.length);
    const max = Math.max(1, ...buckets.map((b) => b.count));
    let total = 0;
    const bars = buckets.map((b, i) => {
      total += b.count;
      const h = b.count ? Math.max(2, (b.count / max) * (height - 2)) : 1;
      const bar = svg('rect', { x: i * step + 0.5, y: height - h, width: Math.max(1, step - 1), height: h });
      if (!b.count) bar.classList.add('zero');
      const hour = new Date(b.start).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
      const tip = svg('title');
      tip.textContent = hour + ': ' + b.count + (b.count === 1 ? ' event' : ' events');
      bar.append(tip);
      return bar;
    });
    $('chart').replaceChildren(...bars);
    $('chart-caption').textContent =
      total + (total === 1 ? ' event' : ' events') + ' in the last 24 h, per hour, in ' +
      (channel ? '#' + channel : 'all channels');
  }

  // Live counting can be off by an event that raced a load; the counts are
  // read again half a minute after live events, however many arrive (the
  // key's rate limit is shared with whatever records events with it).
  function resyncSoon() {
    if (state.resyncTimer) return;
    state.resyncTimer = setTimeout(() => {
      state.resyncTimer = 0;
      if (!state.key) return;
      loadChannels();
      loadStats();
    }, 30000);
  }

  // ---- insights ----

  // Numbers in the reader's locale (1,250.5), booleans as words.
  function formatValue(v) {
    if (typeof v === 'number') return v.toLocaleString();
    if (typeof v === 'boolean') return v ? 'Yes' : 'No';
    return String(v);
  }

  function renderTile(insight) {
    const li = el('li', 'tile');
    const head = el('div', 'tile-head');
    if (insight.icon) {
      const icon = el('span', 'tile-icon', insight.icon);
      icon.setAttribute('aria-hidden', 'true');
      head.append(icon);
    }
    head.append(el('span', 'tile-title', insight.title));
    const text = formatValue(insight.value);
    li.append(head, el('span', text.length > 10 ? 'tile-value long' : 'tile-value', text));
    li._insight = insight;
    return li;
  }

  // Shows `insight` in the API's order (by creation, then title), unless
  // its tile shows a later change.
  function showInsight(insight, live) {
    const old = state.tiles.get(insight.title);
    if (old && Date.parse(old._insight.updatedAt) > Date.parse(insight.updatedAt)) return;
    const li = renderTile(insight);
    if (old && old._insight.createdAt === insight.createdAt) {
      old.replaceWith(li);
    } else {
      if (old) old.remove();
      const at = Date.parse(insight.createdAt);
      const before = [...$('insight-tiles').children].find((other) => {
        const t = Date.parse(other._insight.createdAt);
        return at < t || (at === t && insight.title < other._insight.title);
      });
      $('insight-tiles').insertBefore(li, before || null);
    }
    state.tiles.set(insight.title, li);
    if (live) li.classList.add('new');
    $('insights').hidden = false;
  }

  function dropInsight(title) {
    const li = state.tiles.get(title);
    if (li) li.remove();
    state.tiles.delete(title);
    $('insights').hidden = state.tiles.size === 0;
  }

  // Read again whenever the stream (re)opens, as insights are not replayed.
  // What the stream changed while the list was on its way wins over it.
  async function loadInsights() {
    const gen = ++state.insightsGen;
    const touched = (state.touched = new Set());
    try {
      const data = await api('/v1/insights');
      if (gen !== state.insightsGen) return;
      const listed = new Set(data.insights.map((i) => i.title));
      for (const insight of data.insights) {
        // Not if deleted since.
        if (!touched.has(insight.title) || state.tiles.has(insight.title)) showInsight(insight, false);
      }
      for (const title of [...state.tiles.keys()]) {
        if (!listed.has(title) && !touched.has(title)) dropInsight(title);
      }
    } catch (err) {
      if (gen === state.insightsGen) fail(err);
    } finally {
      if (state.touched === touched) state.touched = null;
    }
  }

  // ---- the live stream ----

  function stopStream() {
    state.streamGen++;
    if (state.streamAbort) state.streamAbort.abort();
    state.streamAbort = null;
  }

  // Resolves once the first connection is open ('open'), refused for the
  // key ('refused'), or failed otherwise ('retrying'); keeps reconnecting
  // in the background until the key changes.
  function startStream() {
    stopStream();
    const gen = state.streamGen;
    return new Promise((resolve) => {
      streamLoop(gen, resolve);
    });
  }

  async function streamLoop(gen, settle) {
    let backoff = state.retryMs;
    while (gen === state.streamGen) {
      const abort = new AbortController();
      state.streamAbort = abort;
      try {
        const headers = authHeaders({ Accept: 'text/event-stream' });
        if (state.lastEventId) headers['Last-Event-ID'] = state.lastEventId;
        const res = await fetch('/v1/stream', { headers, signal: abort.signal, cache: 'no-store' });
        if (!res.ok) {
          const err = await errorOf(res);
          if (err.status === 401 || err.status === 403) {
            if (gen === state.streamGen) fail(err);
            settle('refused');
            return;
          }
          throw err;
        }
        setLive('Live', true);
        settle('open');
        loadInsights();
        backoff = state.retryMs;
        await readEvents(res.body, gen);
      } catch (err) {
        if (gen !== state.streamGen) return;
        settle('retrying');
      }
      if (gen !== state.streamGen) return;
      setLive('Reconnecting…', false);
      await new Promise((r) => setTimeout(r, backoff + Math.random() * 250));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  // Server-sent events as the HTML standard parses them: lines ending in
  // CRLF, LF or CR; `field: value`; a blank line dispatches; `:` comments.
  async function readEvents(body, gen) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let data = [];
    let type = '';
    let id = null;
    let lastWasCR = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || gen !== state.streamGen) return;
        let text = decoder.decode(value, { stream: true });
        // A CRLF split across two reads is one line end, not two.
        if (lastWasCR && text.startsWith('\n')) text = text.slice(1);
        lastWasCR = text.endsWith('\r');
        buffer += text;
        const lines = buffer.split(/\r\n|\r|\n/);
        buffer = lines.pop();
        for (const line of lines) {
          if (line === '') {
            if (id !== null) state.lastEventId = id;
            if (data.length) dispatch(type || 'message', data.join('\n'));
            data = [];
            type = '';
            id = null;
            continue;
          }
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'data') data.push(val);
          else if (field === 'event') type = val;
          else if (field === 'id' && !val.includes('\0')) id = val;
          else if (field === 'retry' && /^\d+$/.test(val)) state.retryMs = Math.max(250, Number(val));
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  function dispatch(type, data) {
    if (type !== 'event' && type !== 'insight' && type !== 'insight-deleted') return;
    let ev;
    try {
      ev = JSON.parse(data);
    } catch (_) {
      return;
    }
    if (type === 'insight' || type === 'insight-deleted') {
      if (state.touched) state.touched.add(ev.title);
      if (type === 'insight') showInsight(ev, true);
      else dropInsight(ev.title);
      return;
    }
    if (matches(ev)) insert(ev, true);
    document.dispatchEvent(new CustomEvent('tocsin:event', { detail: ev }));
    countChannel(ev);
    countInChart(ev);
    resyncSoon();
  }

  // ---- wiring ----

  function init() {
    $('key-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const input = $('key-input');
      const key = input.value.trim();
      if (!/^[\x21-\x7e]+$/.test(key)) {
        showError('That does not look like an API key: paste the whole key, without spaces.');
        return;
      }
      input.value = '';
      localStorage.setItem(STORAGE, key);
      start();
    });
    $('forget').addEventListener('click', () => {
      forget();
      hideError();
    });
    $('more').addEventListener('click', () => loadPage(state.listGen));
    if ('IntersectionObserver' in window) {
      new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting) && !$('more').hidden) loadPage(state.listGen);
      }).observe($('more'));
    }
    let typing = 0;
    const search = $('search');
    const searchNow = () => {
      clearTimeout(typing);
      const q = search.value.trim();
      if (q !== state.filter.q) setFilter({ q });
    };
    search.addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(searchNow, 300);
    });
    // Cleared with the field's own button, or committed some other way.
    search.addEventListener('search', searchNow);
    search.addEventListener('change', searchNow);
    $('search-form').addEventListener('submit', (e) => {
      e.preventDefault();
      searchNow();
    });
    window.addEventListener('hashchange', () => {
      if (takeKeyFromFragment()) start();
    });
    // An alert clicked while the feed is open (sw.js): an event's, or a
    // summary's, which names its channel.
    if ('serviceWorker' in navigator) {
      navigator.serviceWorker.addEventListener('message', (e) => {
        const m = e.data || {};
        if (m.type === 'tocsin:event' && typeof m.eventId === 'string') focusEvent(m.eventId);
        if (m.type === 'tocsin:channel' && typeof m.channel === 'string' && m.channel) showChannel(m.channel);
      });
    }
    setInterval(refreshTimes, 60000);
    // The hourly buckets slide with the clock.
    setInterval(() => state.key && loadStats(), 5 * 60000);

    takeKeyFromFragment();
    start();
  }

  init();
})();
