// The feed page's alerts in this browser: "Notify me in this browser"
// subscribes to Web Push with the server's VAPID key (GET /v1/webpush/key)
// through the service worker at /sw.js, registers the subscription as a
// device (POST /v1/devices, with the feed's key: it needs devices:write) and
// remembers the device, to offer "Stop notifications" (unsubscribe, then
// DELETE /v1/devices/{id}). Hidden when the server has no VAPID key;
// explained when the browser cannot receive pushes, or is an iPhone or iPad
// outside a Home Screen app (iOS delivers Web Push only there).
'use strict';
(() => {
  const KEY = 'tocsin.key';
  const DEVICE = 'tocsin.device';
  const WORKER = '/sw.js';

  const $ = (id) => document.getElementById(id);

  const supported = () => 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
  const iOS = () =>
    /iPad|iPhone|iPod/.test(navigator.userAgent) || (navigator.platform === 'MacIntel' && navigator.maxTouchPoints > 1);
  const standalone = () => navigator.standalone === true || matchMedia('(display-mode: standalone)').matches;

  function show(text, action, isError) {
    $('notify').hidden = false;
    const status = $('notify-status');
    status.textContent = text;
    status.classList.toggle('error-text', !!isError);
    $('notify-on').hidden = action !== 'on';
    $('notify-off').hidden = action !== 'off';
  }

  function remembered() {
    try {
      return JSON.parse(localStorage.getItem(DEVICE));
    } catch (_) {
      return null;
    }
  }

  // The applicationServerKey: base64url to bytes.
  function bytes(base64url) {
    const b64 = base64url.replace(/-/g, '+').replace(/_/g, '/');
    return Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
  }

  // "Chrome on Android": the device's name in the dashboard's list (the
  // first of each list the user agent names: Edge's also names Chrome).
  function deviceName() {
    const ua = navigator.userAgent;
    const first = (names) => names.find((n) => ua.includes(n));
    const browser = { 'Edg/': 'Edge', 'Firefox/': 'Firefox', 'Chrome/': 'Chrome', 'Safari/': 'Safari' }[
      first(['Edg/', 'Firefox/', 'Chrome/', 'Safari/'])
    ];
    const os = first(['iPhone', 'iPad', 'Android', 'CrOS', 'Windows', 'Mac', 'Linux']);
    return (browser || 'Browser') + (os ? ' on ' + os.replace('Mac', 'macOS') : '');
  }

  async function call(method, path, body) {
    const headers = { Authorization: 'Bearer ' + localStorage.getItem(KEY), Accept: 'application/json' };
    if (body) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, { method, headers, body: body && JSON.stringify(body), cache: 'no-store' });
    } catch (_) {
      return { status: 0, message: 'cannot reach the server' };
    }
    let envelope = null;
    try {
      envelope = await res.json();
    } catch (_) {
      // no body
    }
    return { status: res.status, data: envelope && envelope.data, message: (envelope && envelope.error) || res.statusText };
  }

  function refusal(res, doing) {
    if (res.status === 403) {
      return (
        'This key lacks the devices:write scope, which ' + doing + ' needs. Open the feed with a key ' +
        'that has events:read and devices:write (ingest keys create --scopes events:read,devices:write).'
      );
    }
    return 'The server answered ' + (res.status || 'nothing') + ': ' + res.message;
  }

  async function subscription() {
    const registration = await navigator.serviceWorker.getRegistration('/');
    return registration ? registration.pushManager.getSubscription() : null;
  }

  async function turnOn(publicKey) {
    $('notify-on').disabled = true;
    try {
      if ((await Notification.requestPermission()) !== 'granted') {
        show('Notifications are blocked for this page: allow them in the browser\'s site settings, then try again.', 'on', true);
        return;
      }
      await navigator.serviceWorker.register(WORKER, { scope: '/' });
      const registration = await navigator.serviceWorker.ready;
      const options = { userVisibleOnly: true, applicationServerKey: bytes(publicKey) };
      let sub;
      try {
        sub = await registration.pushManager.subscribe(options);
      } catch (err) {
        // Subscribed with another server key (the VAPID key was replaced).
        const old = err && err.name === 'InvalidStateError' && (await registration.pushManager.getSubscription());
        if (!old) throw err;
        await old.unsubscribe();
        sub = await registration.pushManager.subscribe(options);
      }
      const res = await call('POST', '/v1/devices', {
        kind: 'webpush',
        subscription: sub.toJSON(),
        name: deviceName(),
      });
      if (res.status !== 200 && res.status !== 201) {
        // No device holds it: nothing would ever be sent to it.
        await sub.unsubscribe().catch(() => {});
        show(refusal(res, 'turning alerts on'), 'on', true);
        return;
      }
      localStorage.setItem(DEVICE, JSON.stringify({ id: res.data.id, endpoint: sub.endpoint }));
      show('Alerts are on in this browser.', 'off');
    } catch (err) {
      show('This browser could not subscribe (' + ((err && err.message) || err) + ').', 'on', true);
    } finally {
      $('notify-on').disabled = false;
    }
  }

  async function turnOff() {
    const device = remembered();
    $('notify-off').disabled = true;
    try {
      // The browser first: once unsubscribed, nothing reaches it, and the
      // push service's 404/410 deactivates a device the server still has.
      const sub = await subscription();
      if (sub) await sub.unsubscribe();
      localStorage.removeItem(DEVICE);
      const res = device ? await call('DELETE', '/v1/devices/' + encodeURIComponent(device.id)) : { status: 404 };
      if (res.status === 200 || res.status === 404) {
        show('Alerts are off in this browser.', 'on');
      } else {
        show('Alerts are off in this browser, but the device stays listed: ' + refusal(res, 'removing it'), 'on', true);
      }
    } catch (err) {
      show('Could not stop the alerts (' + ((err && err.message) || err) + ').', 'off', true);
    } finally {
      $('notify-off').disabled = false;
    }
  }

  async function init() {
    let publicKey = null;
    try {
      const res = await fetch('/v1/webpush/key', { headers: { Accept: 'application/json' }, cache: 'no-store' });
      if (res.ok) publicKey = (await res.json()).data.publicKey;
    } catch (_) {
      // the server cannot be reached: no button
    }
    // The worker also makes the page installable, with or without alerts.
    if ('serviceWorker' in navigator) navigator.serviceWorker.register(WORKER, { scope: '/' }).catch(() => {});
    // No VAPID key: this server sends no Web Push (404), nothing to offer.
    if (!publicKey) return;
    if (iOS() && !standalone()) {
      show(
        'On iPhone and iPad, alerts come to the Home Screen app: tap Share, then "Add to Home Screen", ' +
          'open Tocsin from its icon and turn alerts on there.'
      );
      return;
    }
    if (!supported()) {
      show('This browser cannot receive push notifications.');
      return;
    }
    if (Notification.permission === 'denied') {
      show('Notifications are blocked for this page: allow them in the browser\'s site settings to get alerts here.');
      return;
    }
    $('notify-on').addEventListener('click', () => turnOn(publicKey));
    $('notify-off').addEventListener('click', turnOff);
    const device = remembered();
    const sub = await subscription().catch(() => null);
    if (device && sub && sub.endpoint === device.endpoint) {
      show('Alerts are on in this browser.', 'off');
    } else {
      // A device the browser no longer has a subscription for is forgotten.
      if (device) localStorage.removeItem(DEVICE);
      show('Get an alert on this device for each event that notifies.', 'on');
    }
  }

  init();
})();
