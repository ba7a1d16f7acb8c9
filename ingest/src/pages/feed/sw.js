// Tocsin's service worker, served at /sw.js so its scope covers the feed at
// /. It shows the alerts the notifier sends by Web Push (a JSON payload of
// title, body, channel and eventId) and opens the feed at the event when
// one is clicked. No fetch handler: the feed always comes from the server.
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

self.addEventListener('push', (event) => {
  const alert = alertOf(event.data);
  const text = (v) => (typeof v === 'string' && v ? v : null);
  const eventId = text(alert.eventId);
  const lines = [text(alert.body), text(alert.channel) && '#' + alert.channel].filter(Boolean);
  const options = { icon: ICON, badge: BADGE, body: lines.join('\n'), data: { eventId } };
  // One notification per event: a push sent again replaces it.
  if (eventId) options.tag = eventId;
  // A push the page was subscribed for must show something (userVisibleOnly).
  event.waitUntil(self.registration.showNotification(text(alert.title) || 'Tocsin', options));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const eventId = event.notification.data && event.notification.data.eventId;
  const url = new URL(eventId ? '/#event=' + encodeURIComponent(eventId) : '/', self.location.origin);
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
    })()
  );
});
