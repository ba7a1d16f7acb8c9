// The feed page's alerts in this browser: "Notify me in this browser"
// subscribes to Web Push with the server's VAPID key (GET /v1/webpush/key)
// through the service worker at /sw.js, registers the subscription as a
// device (POST /v1/devices, with the feed's key: it needs devices:write) and
// remembers the device, to offer "Stop notifications" (unsubscribe, then
// DELETE /v1/devices/{id}) and "Alert settings": this device's own rules
// (channels, minimum priority, quiet hours, burst limit), read from the
// server each time they are opened and changed with PATCH /v1/devices/{id}.
// Hidden when the server has no VAPID key; explained when the browser
// cannot receive pushes, or is an iPhone or iPad outside a Home Screen app
// (iOS delivers Web Push only there).
'use strict';
(() => {
  const KEY = 'tocsin.key';
  const DEVICE = 'tocsin.device';
  const WORKER = '/sw.js';
  // A new device may alert at most this often; the rest of a burst comes
  // as one digest (a noisy source must not make the browser unusable).
  const BURST = { max: 5, perMinutes: 10 };

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
    return {
      status: res.status,
      data: envelope && envelope.data,
      message: (envelope && envelope.error) || res.statusText,
      details: (envelope && envelope.details) || [],
    };
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
        burst: BURST,
      });
      if (res.status !== 200 && res.status !== 201) {
        // No device holds it: nothing would ever be sent to it.
        await sub.unsubscribe().catch(() => {});
        show(refusal(res, 'turning alerts on'), 'on', true);
        return;
      }
      localStorage.setItem(DEVICE, JSON.stringify({ id: res.data.id, endpoint: sub.endpoint }));
      show('Alerts are on in this browser.', 'off');
      offerRules();
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
      offerRules();
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

  // ---- alert settings ----

  // Where each field of the API's 400 `details` is on the form, by its
  // path: the label it is told by and the control marked invalid.
  const FIELDS = {
    channels: ['Channels', 'rules-some'],
    minPriority: ['Minimum priority', 'rules-priority'],
    quietHours: ['Quiet hours', 'rules-quiet'],
    'quietHours.start': ['Quiet hours from', 'rules-start'],
    'quietHours.end': ['Quiet hours to', 'rules-end'],
    'quietHours.timeZone': ['Time zone', 'rules-zone'],
    'quietHours.allowPriority': ['Still alerting', 'rules-allow'],
    burst: ['Burst limit', 'rules-burst'],
    'burst.max': ['At most', 'rules-max'],
    'burst.perMinutes': ['Per minutes', 'rules-per'],
  };

  const browserZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

  function rulesStatus(text, errors) {
    $('rules-status').textContent = text;
    const list = $('rules-errors');
    list.replaceChildren(
      ...(errors || []).map((e) => {
        const li = document.createElement('li');
        li.textContent = e;
        return li;
      })
    );
    list.hidden = !list.children.length;
  }

  // The settings are offered while this browser has a device; they are
  // read from the server each time they are unfolded.
  function offerRules() {
    const box = $('rules');
    box.hidden = !remembered();
    if (box.hidden) box.open = false;
    rulesStatus('');
  }

  // The quiet hours' and the burst limit's fields follow their switches;
  // the channels' boxes count only with "Only these".
  function syncRules() {
    $('rules-quiet-set').disabled = !$('rules-quiet').checked;
    $('rules-burst-set').disabled = !$('rules-burst').checked;
    for (const box of $('rules-channels').querySelectorAll('input')) box.disabled = $('rules-all').checked;
  }

  function option(select, value, text) {
    const o = document.createElement('option');
    o.value = value;
    o.textContent = text || value;
    select.append(o);
  }

  // Selects `value`, offered first if the list lacks it (a zone this
  // browser names otherwise, a rule set through the API), so what is
  // stored shows, and is kept on saving.
  function choose(id, value) {
    const select = $(id);
    if (![...select.options].some((o) => o.value === value)) option(select, value);
    select.value = value;
  }

  // Every zone this browser knows, its own among them.
  function zones() {
    const select = $('rules-zone');
    if (select.options.length) return;
    const names = new Set(typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : []);
    names.add('UTC');
    names.add(browserZone());
    for (const zone of [...names].sort()) option(select, zone, zone.replace(/_/g, ' '));
  }

  // The form from the device as stored; `channels` are the project's (its
  // own may name one that has no event yet).
  function fill(device, channels) {
    const mine = device.channels || [];
    const list = $('rules-channels');
    const names = [...new Set([...channels, ...mine])];
    list.replaceChildren(
      ...names.map((name) => {
        const label = document.createElement('label');
        const box = document.createElement('input');
        box.type = 'checkbox';
        box.name = 'rules-channel';
        box.value = name;
        box.checked = mine.includes(name);
        label.append(box, ' #' + name);
        return label;
      })
    );
    $('rules-all').checked = !device.channels;
    $('rules-some').checked = !!device.channels;
    $('rules-some').disabled = !names.length;
    choose('rules-priority', device.minPriority || 'low');
    // Off, the quiet hours offer a night in this browser's zone.
    const quiet = device.quietHours;
    $('rules-quiet').checked = !!quiet;
    $('rules-start').value = quiet ? quiet.start : '22:00';
    $('rules-end').value = quiet ? quiet.end : '07:00';
    zones();
    choose('rules-zone', quiet ? quiet.timeZone : browserZone());
    choose('rules-allow', quiet ? quiet.allowPriority || 'none' : 'high');
    const burst = device.burst || BURST;
    $('rules-burst').checked = !!device.burst;
    $('rules-max').value = burst.max;
    $('rules-per').value = burst.perMinutes;
    syncRules();
  }

  // A device gone from the server (removed on the dashboard): forgotten,
  // and turning alerts on again registers the browser anew.
  function deviceGone() {
    localStorage.removeItem(DEVICE);
    offerRules();
    show('This browser is no longer registered for alerts: turn them on again to get them.', 'on', true);
  }

  // This device's rules as the server has them. GET /v1/devices needs
  // devices:read, which a key made for the feed (events:read,
  // devices:write) lacks: an empty PATCH answers with the device as
  // stored and changes nothing (its updatedAt stays).
  async function loadRules() {
    const device = remembered();
    if (!device) return;
    const submit = $('rules-form').querySelector('button[type=submit]');
    submit.disabled = true;
    rulesStatus('Loading…');
    const path = '/v1/devices/' + encodeURIComponent(device.id);
    const [listed, channels] = await Promise.all([call('GET', '/v1/devices'), call('GET', '/v1/channels')]);
    let res = listed;
    if (listed.status === 200) {
      const found = listed.data.devices.find((d) => d.id === device.id);
      res = found ? { status: 200, data: found } : { status: 404 };
    } else if (listed.status === 403) {
      res = await call('PATCH', path, {});
    }
    if (res.status === 404) return deviceGone();
    if (res.status !== 200) {
      // Not knowing what is stored, saving would overwrite it blindly.
      rulesStatus('', [refusal(res, 'changing alert settings')]);
      return;
    }
    submit.disabled = false;
    fill(res.data, channels.status === 200 ? channels.data.items.map((c) => c.name) : []);
    rulesStatus('');
  }

  // The change asked for: every rule the form has (tags, which it does
  // not show, are left as they are).
  function asked() {
    const priority = (id) => ($(id).value === 'none' ? null : $(id).value);
    const chosen = [...$('rules-channels').querySelectorAll('input:checked')].map((b) => b.value);
    return {
      channels: $('rules-all').checked ? null : chosen,
      minPriority: $('rules-priority').value,
      quietHours: $('rules-quiet').checked
        ? {
            start: $('rules-start').value,
            end: $('rules-end').value,
            timeZone: $('rules-zone').value,
            allowPriority: priority('rules-allow'),
          }
        : null,
      burst: $('rules-burst').checked
        ? { max: Number($('rules-max').value), perMinutes: Number($('rules-per').value) }
        : null,
    };
  }

  async function saveRules(e) {
    e.preventDefault();
    const device = remembered();
    if (!device) return;
    const body = asked();
    for (const field of $('rules-form').querySelectorAll('[aria-invalid]')) {
      field.removeAttribute('aria-invalid');
      field.removeAttribute('aria-describedby');
    }
    if (body.channels && !body.channels.length) {
      rulesStatus('', ['Channels: choose at least one, or All channels.']);
      return;
    }
    const submit = e.submitter || $('rules-form').querySelector('button[type=submit]');
    submit.disabled = true;
    rulesStatus('Saving…');
    const res = await call('PATCH', '/v1/devices/' + encodeURIComponent(device.id), body);
    submit.disabled = false;
    if (res.status === 200) {
      fill(res.data, [...$('rules-channels').querySelectorAll('input')].map((b) => b.value));
      rulesStatus('Saved.');
    } else if (res.status === 404) {
      deviceGone();
    } else if (res.status === 400 && res.details.length) {
      // Each fault beside the form, worded by the server, and its field
      // marked for assistive technology.
      const errors = res.details.map((d) => {
        const path = d.path || [];
        const [label, id] = FIELDS[path.slice(0, 2).join('.')] ||
          FIELDS[path[0]] || [path.join(' › ') || 'Alert settings'];
        if (id) {
          $(id).setAttribute('aria-invalid', 'true');
          $(id).setAttribute('aria-describedby', 'rules-errors');
        }
        return label + ': ' + d.message;
      });
      rulesStatus('Not saved.', errors);
    } else {
      rulesStatus('Not saved.', [refusal(res, 'changing alert settings')]);
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
    $('rules').addEventListener('toggle', () => $('rules').open && loadRules());
    $('rules-form').addEventListener('submit', saveRules);
    $('rules-form').addEventListener('change', syncRules);
    const device = remembered();
    const sub = await subscription().catch(() => null);
    if (device && sub && sub.endpoint === device.endpoint) {
      show('Alerts are on in this browser.', 'off');
      offerRules();
    } else {
      // A device the browser no longer has a subscription for is forgotten.
      if (device) localStorage.removeItem(DEVICE);
      show('Get an alert on this device for each event that notifies.', 'on');
    }
  }

  init();
})();
