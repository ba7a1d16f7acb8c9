// Tocsin's service worker, served at /sw.js so its scope covers the feed at
// /. It shows the alerts the notifier sends by Web Push (a JSON payload of
// title, body, channel, eventId or, for a summary of alerts held back,
// summaryId, alertKey and tag) and opens the feed at the event, or at the
// summary's channel, when one is clicked. No fetch handler: the feed always
// comes from the server.
'use strict';

const ICON = "/feed/icon-192.png";
const BADGE = "/feed/badge-96.png";

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

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
  const data = event.notification.data || {};
  const eventId = data.eventId;
  // A summary has no event of its own: the feed opens at its channel.
  const channel = !eventId && data.summaryId ? data.channel : null;
  const at = eventId ? 'event=' + encodeURIComponent(eventId) : channel ? 'channel=' + encodeURIComponent(channel) : '';
  const url = new URL(at ? '/#' + at : '/', self.location.origin);
  event.waitUntil(
    (async () => {
      const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
      const feed = windows.find((w) => new URL(w.url).pathname === '/');
      if (!feed) {
        await self.clients.openWindow(url.href);
        return;
      }
      await feed.focus();
      if (eventId) feed.postMessage({ type: 'tocsin:event', eventId });
      else if (channel) feed.postMessage({ type: 'tocsin:channel', channel });
    })()
  );
});
