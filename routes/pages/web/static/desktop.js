// The desktop page: noVNC's RFB client on the sandbox's VNC server, through the gateway's websockify route.
import RFB from '../vendor/novnc/core/rfb.js';

// Every import arrived: boot.js need not reload the page.
document.documentElement.dataset.started = '1';

const body = document.body;
const base = body.dataset.base;               // /sandboxes/{id}/vnc/
const viewOnly = body.dataset.permission !== 'write';
const screen = document.getElementById('screen');
const statusEl = document.getElementById('status');
const banner = document.getElementById('banner');

let rfb = null;
let attempts = 0;
let ended = false;
let timer = null;
let watchdog = null;

// noVNC has no connect timeout: a WebSocket whose opening handshake stalls (a proxy or network hiccup under load)
// would leave the page on "Connecting…" for good. A stream not connected within this long is dropped and retried
// like any lost stream.
const connectTimeoutMs = 20000;

document.getElementById('mode').textContent = viewOnly ? 'view only' : '';

function setStatus(text) { statusEl.textContent = text; }
function stop(text, kind) {
  ended = true;
  clearTimeout(timer);
  setStatus('Disconnected');
  banner.textContent = text;
  banner.classList.add('fatal');
  banner.dataset.kind = kind;
  banner.hidden = false;
}

function connect() {
  const u = new URL(base + 'websockify', location.href);
  u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  setStatus(attempts ? 'Reconnecting…' : 'Connecting…');
  rfb = new RFB(screen, u.href, { shared: true });
  rfb.scaleViewport = true;  // fit the remote screen to the window
  rfb.resizeSession = false; // never resize other viewers' desktop
  rfb.viewOnly = viewOnly;
  rfb.focusOnClick = !viewOnly;
  const current = rfb;
  clearTimeout(watchdog);
  watchdog = setTimeout(() => {
    if (rfb === current && !statusEl.textContent.startsWith('Connected')) current.disconnect();
  }, connectTimeoutMs);
  rfb.addEventListener('connect', () => {
    clearTimeout(watchdog);
    attempts = 0;
    banner.hidden = true;
    setStatus(viewOnly ? 'Connected (view only)' : 'Connected');
    if (!viewOnly) rfb.focus();
  });
  rfb.addEventListener('disconnect', () => {
    rfb = null;
    if (!ended) probe();
  });
  rfb.addEventListener('credentialsrequired', () => stop('The VNC server asked for a password the gateway does not have.', 'auth'));
  rfb.addEventListener('securityfailure', (e) => stop('VNC security negotiation failed: ' + (e.detail.reason || 'unknown reason') + '.', 'auth'));
}

// Why did the stream end? The page's URL answers 401 when the session cookie expired; other failures retry.
async function probe() {
  let res = null;
  try {
    res = await fetch(base, { method: 'HEAD', credentials: 'same-origin', cache: 'no-store' });
  } catch (e) { /* offline: retry */ }
  if (res && res.status === 401) {
    stop('Your ticket has expired. Open the desktop again from the console.', 'expired');
    return;
  }
  if (res && (res.status === 404 || res.status === 410)) {
    stop('This sandbox is gone.', 'gone');
    return;
  }
  if (res && res.status === 503) {
    // The sandbox died and is being rebuilt on its workspace (or is starting): keep trying.
    setStatus('The sandbox is being rebuilt after its container died; reconnecting…');
  }
  const delay = Math.min(1000 * 2 ** attempts, 10000);
  attempts++;
  if (!res || res.status !== 503) setStatus('Connection lost, reconnecting…');
  timer = setTimeout(connect, delay);
}

document.getElementById('fullscreen').addEventListener('click', () => {
  if (document.fullscreenElement) document.exitFullscreen();
  else screen.requestFullscreen();
});

window.sandgateDesktop = {
  get connected() { return !!rfb && statusEl.textContent.startsWith('Connected'); },
  get stopped() { return ended ? banner.dataset.kind : ''; },
  get viewOnly() { return viewOnly; },
};

connect();
