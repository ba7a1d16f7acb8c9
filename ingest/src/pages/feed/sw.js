// Tocsin's service worker, served at /sw.js so its scope covers the feed at
// /. It shows the alerts the notifier sends by Web Push (a JSON payload of
// title, body, channel, eventId or, for a summary of alerts held back,
// summaryId, alertKey, tag and url) and, when one is clicked, opens the
// event's url, or else the feed at the event, or at the summary's channel.
// No fetch handler: the feed always comes from the server.
'use strict';

const ICON = "/feed/icon-192.png";
const BADGE = "/feed/badge-96.png";

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

// `value` as a link a click may open: an absolute http(s) URL, or null.
// The server sends only those; the worker checks again, since what it opens
// must never be a javascript: or data: URL, whoever sent the push.
function webLink(value) {
  if (typeof value !== 'string' || !value) return null;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch (_) {
    return null;
  }
}

// Whether `url` is the feed's own page (this origin, at /), whatever its
// fragment (#event=…, #channel=…).
function isFeed(url) {
  return url.origin === self.location.origin && url.pathname === '/';
}

function alertOf(data) {
  if (!data) return {};
  try {
    const alert = data.json();
    return alert && typeof alert === 'object' ? alert : {};
  } catch (_) {
    return { body: data.text() };
  }
}

// Shows the alert under its tag, replacing what the tag shows. Another
// alert replacing it (a later event with the same alertKey) alerts anew,
// so the update is noticed; the same alert again (a push retried after
// its first try arrived) replaces it quietly.
async function showAlert(title, options) {
  if (options.tag) {
    const [shown] = await self.registration.getNotifications({ tag: options.tag }).catch(() => []);
    const id = (data) => data && (data.eventId || data.summaryId);
    options.renotify = !!shown && id(shown.data) !== id(options.data);
  }
  await self.registration.showNotification(title, options);
}

self.addEventListener('push', (event) => {
  const alert = alertOf(event.data);
  const text = (v) => (typeof v === 'string' && v ? v : null);
  const eventId = text(alert.eventId);
  const summaryId = text(alert.summaryId);
  const channel = text(alert.channel);
  const lines = [text(alert.body), channel && '#' + channel].filter(Boolean);
  const options = { icon: ICON, badge: BADGE, body: lines.join('\n'), data: { eventId, summaryId, channel } };
  const url = webLink(alert.url);
  if (url) options.data.url = url;
  // The server's tag (the project's alertKey, or the event's or summary's
  // id): an alert with the same tag replaces this one. A payload without
  // one (an older server) falls back to the alertKey, then the id.
  const tag = text(alert.tag) || text(alert.alertKey) || eventId || summaryId;
  if (tag) options.tag = tag;
  // A push the page was subscribed for must show something (userVisibleOnly).
  event.waitUntil(showAlert(text(alert.title) || 'Tocsin', options));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  event.waitUntil(openAlert(event.notification.data || {}));
});

// Where a click on an alert leads: the event's url when it has one (an
// http(s) URL: anything else is ignored), else the feed at the event, or at
// the summary's channel. A window already showing it is focused rather
// than another opened: the open feed for a link into the feed (it is told,
// or sent to the link, and shows the event), a window at the very URL for
// any other page of this origin (other origins' windows are not the
// worker's to see).
async function openAlert(data) {
  const link = webLink(data.url);
  const eventId = typeof data.eventId === 'string' ? data.eventId : null;
  // A summary has no event of its own: the feed opens at its channel.
  const channel = !eventId && data.summaryId && typeof data.channel === 'string' ? data.channel : null;
  const at = eventId ? 'event=' + encodeURIComponent(eventId) : channel ? 'channel=' + encodeURIComponent(channel) : '';
  const target = link ? new URL(link) : new URL(at ? '/#' + at : '/', self.location.origin);
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  if (!isFeed(target)) {
    const shown = windows.find((w) => w.url === target.href);
    if (shown) await shown.focus();
    else await self.clients.openWindow(target.href);
    return;
  }
  let feed = windows.find((w) => isFeed(new URL(w.url)));
  if (!feed) {
    await self.clients.openWindow(target.href);
    return;
  }
  if (link) {
    // A link into the feed (an event, a channel): the open feed goes there;
    // a change of fragment is no reload, and the feed follows it.
    if (feed.url !== target.href && feed.navigate) feed = (await feed.navigate(target.href).catch(() => null)) || feed;
    await feed.focus();
    return;
  }
  await feed.focus();
  if (eventId) feed.postMessage({ type: 'tocsin:event', eventId });
  else if (channel) feed.postMessage({ type: 'tocsin:channel', channel });
}
