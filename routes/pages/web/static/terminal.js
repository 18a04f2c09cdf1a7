// The terminal page: xterm.js attached to a PTY session in the sandbox, through the gateway. The session outlives
// the WebSocket: after a drop the page reattaches with ?since=<offset> and the agent replays what was missed.
import { Terminal } from '../vendor/xterm/xterm.mjs';
import { FitAddon } from '../vendor/xterm/addon-fit.mjs';

// Every import arrived: boot.js need not reload the page.
document.documentElement.dataset.started = '1';

const body = document.body;
const base = body.dataset.base;              // /sandboxes/{id}/terminal/
const storageKey = 'sandgate.pty.' + body.dataset.sandbox;
const statusEl = document.getElementById('status');
const banner = document.getElementById('banner');
const restartBtn = document.getElementById('restart');

// xterm.js measures and themes with <style> elements it creates; the page's CSP admits only those carrying the
// response's nonce, so stamp it on every <style> made from here on.
const nonce = document.querySelector('meta[name="csp-nonce"]').content;
const createElement = Document.prototype.createElement;
Document.prototype.createElement = function (tag, options) {
  const el = createElement.call(this, tag, options);
  if (String(tag).toLowerCase() === 'style') el.nonce = nonce;
  return el;
};

// Its DOM renderer also writes some styles (selection, custom colours) with setAttribute('style', ...), which the
// policy blocks as inline style; the same declarations set through the CSSOM are allowed.
const setAttribute = Element.prototype.setAttribute;
Element.prototype.setAttribute = function (name, value) {
  if (String(name).toLowerCase() === 'style') {
    this.style.cssText = String(value);
    return;
  }
  setAttribute.call(this, name, value);
};

const CH_STDIN = 0x00, CH_STDOUT = 0x01, CH_REPLAY = 0x03;
const encoder = new TextEncoder();

const term = new Terminal({ cursorBlink: true, scrollback: 10000, fontFamily: 'ui-monospace, monospace', fontSize: 14 });
const fit = new FitAddon();
term.loadAddon(fit);
term.open(document.getElementById('terminal'));
fit.fit();
term.focus();

let ws = null;          // the current WebSocket
let ptyID = null;       // the PTY session
let offset = 0;         // offset of the next output byte the screen has not shown
let liveOffset = 0;     // where live output starts on the current connection
let attempts = 0;       // reconnects since the last good connection
let ended = false;      // no more reconnects (exit, expiry, death, takeover)
let timer = null;
let diedReason = null;  // the sandbox died and is being rebuilt: the next session is a new shell
let watchdog = null;    // drops a stream that never said "connected"
let greeted = false;    // the current stream said "connected": the shell is attached

// A WebSocket whose opening handshake stalls (a proxy or a network hiccup under load) would leave the page on
// "Connecting…" for good: browsers give a handshake no deadline. A stream that has not said "connected" within
// this long is dropped and retried like any lost stream.
const connectTimeoutMs = 20000;
// Bounds each of the page's own requests; the gateway gives a sandbox 60 s to start, so this is above that.
const requestTimeoutMs = 90000;

// request is fetch on the page's own origin with a deadline: a request lost on the way fails instead of hanging.
function request(url, init) {
  return fetch(url, Object.assign({ credentials: 'same-origin', cache: 'no-store', signal: AbortSignal.timeout(requestTimeoutMs) }, init));
}

function setStatus(text) { statusEl.textContent = text; }
// kind names the banner for scripts and tests (data-kind): died, rebuilt, expired, gone, ...
function showBanner(text, fatal, kind) {
  banner.textContent = text;
  banner.classList.toggle('fatal', !!fatal);
  banner.dataset.kind = kind || '';
  banner.hidden = false;
}
function hideBanner() { banner.hidden = true; banner.textContent = ''; banner.dataset.kind = ''; }
function stop(text, kind) {
  ended = true;
  clearTimeout(timer);
  clearTimeout(watchdog);
  setStatus(kind === 'expired' ? 'Ticket expired' : 'Disconnected');
  showBanner(text, true, kind);
}

function send(bytes) {
  if (!ws || ws.readyState !== WebSocket.OPEN) return false;
  ws.send(bytes);
  return true;
}
function sendInput(text) {
  const data = encoder.encode(text);
  const frame = new Uint8Array(data.length + 1);
  frame[0] = CH_STDIN;
  frame.set(data, 1);
  send(frame);
}
function sendControl(msg) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
}
function sendResize() { sendControl({ type: 'resize', cols: term.cols, rows: term.rows }); }

term.onData(sendInput);
term.onBinary((s) => {
  const frame = new Uint8Array(s.length + 1);
  frame[0] = CH_STDIN;
  for (let i = 0; i < s.length; i++) frame[i + 1] = s.charCodeAt(i) & 0xff;
  send(frame);
});
term.onResize(sendResize);
new ResizeObserver(() => fit.fit()).observe(document.getElementById('terminal'));
window.addEventListener('resize', () => fit.fit());

// Copy and paste: Ctrl+Shift+C / Ctrl+Shift+V (Ctrl+C stays the shell's interrupt), and the two buttons.
async function copySelection() {
  const text = term.getSelection();
  if (text) await navigator.clipboard.writeText(text);
  term.focus();
}
async function pasteClipboard() {
  try {
    const text = await navigator.clipboard.readText();
    if (text) term.paste(text);
  } catch (e) {
    showBanner('The browser refused clipboard access; use the keyboard shortcut or the context menu to paste.');
  }
  term.focus();
}
term.attachCustomKeyEventHandler((e) => {
  if (e.type !== 'keydown' || !e.ctrlKey || !e.shiftKey) return true;
  if (e.code === 'KeyC') { copySelection(); return false; }
  if (e.code === 'KeyV') { pasteClipboard(); return false; }
  return true;
});
document.getElementById('copy').addEventListener('click', copySelection);
document.getElementById('paste').addEventListener('click', pasteClipboard);
restartBtn.addEventListener('click', () => {
  restartBtn.hidden = true;
  hideBanner();
  ended = false;
  term.reset();
  createSession();
});

function onBinary(buf) {
  const b = new Uint8Array(buf);
  if (b.length === 0) return;
  if (b[0] === CH_STDOUT) {
    if (offset < liveOffset) offset = liveOffset; // the agent's ring no longer had the gap
    term.write(b.subarray(1));
    offset += b.length - 1;
  } else if (b[0] === CH_REPLAY && b.length >= 9) {
    const start = Number(new DataView(b.buffer, b.byteOffset + 1, 8).getBigUint64(0));
    const bytes = b.subarray(9);
    const skip = Math.max(0, offset - start); // bytes already on screen
    if (skip < bytes.length) term.write(bytes.subarray(skip));
    offset = Math.max(offset, start + bytes.length);
  }
}

function onControl(msg) {
  switch (msg.type) {
    case 'connected':
      clearTimeout(watchdog);
      greeted = true;
      liveOffset = msg.offset || 0;
      attempts = 0;
      // A rebuilt sandbox's notice stays: the person should know this is a new shell.
      if (banner.dataset.kind !== 'rebuilt') hideBanner();
      setStatus('Connected');
      sendResize();
      break;
    case 'exit':
      ended = true;
      sessionStorage.removeItem(storageKey);
      setStatus('Exited');
      showBanner('The shell exited' + (msg.exit_code != null ? ' with code ' + msg.exit_code : '') + '.');
      restartBtn.hidden = false;
      restartBtn.focus();
      break;
    case 'error':
      if (msg.code === 'container_died') {
        // The gateway rebuilds a dead sandbox on its workspace unless it crashed too often; the probe after the
        // drop tells which (503 recovering, or 410 for good).
        diedReason = (msg.details && msg.details.reason) || 'died';
        showBanner('The sandbox died' + (msg.message ? ': ' + msg.message : '') + '. Waiting for it to be rebuilt…', false, 'died');
      } else {
        showBanner('Terminal error: ' + (msg.message || msg.code));
      }
      break;
  }
}

function connect(since) {
  const u = new URL(base + 'ws', location.href);
  u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  u.searchParams.set('pty', ptyID);
  u.searchParams.set('since', String(since));
  u.searchParams.set('takeover', '1');
  const sock = new WebSocket(u.href);
  sock.binaryType = 'arraybuffer';
  ws = sock;
  greeted = false;
  setStatus(attempts > 0 ? 'Connecting (attempt ' + (attempts + 1) + ')…' : since > 0 ? 'Reconnecting…' : 'Connecting…');
  clearTimeout(watchdog);
  // Each retry waits longer, so a machine merely slow still connects.
  watchdog = setTimeout(() => { if (ws === sock) sock.close(4000, 'no answer'); }, Math.min(connectTimeoutMs * (attempts + 1), 60000));
  sock.onmessage = (ev) => {
    if (typeof ev.data === 'string') {
      try { onControl(JSON.parse(ev.data)); } catch (e) { /* not a control frame */ }
    } else {
      onBinary(ev.data);
    }
  };
  sock.onclose = (ev) => {
    if (ws !== sock) return; // a stream this page already replaced
    ws = null;
    clearTimeout(watchdog);
    if (ended) return;
    if (ev.code === 4001) {
      stop('This terminal was opened in another window; this one let go of it. Reload to take it back.', 'taken');
      return;
    }
    setStatus('Connection lost, reconnecting…');
    scheduleReconnect();
  };
}

// After a drop, ask the page's own endpoint why before reconnecting: a WebSocket handshake's status is invisible
// to scripts, a fetch's is not.
function scheduleReconnect() {
  clearTimeout(timer);
  const delay = Math.min(500 * 2 ** attempts, 8000);
  attempts++;
  timer = setTimeout(async () => {
    let res;
    try {
      res = await request(base + 'session?pty=' + encodeURIComponent(ptyID));
    } catch (e) {
      setStatus('Offline, retrying…');
      scheduleReconnect();
      return;
    }
    if (res.ok) { connect(offset); return; }
    if (!(await explain(res))) scheduleReconnect();
  }, delay);
}

// explain turns a failed answer into a message; it returns false when retrying may help.
async function explain(res) {
  let err = {};
  try { err = (await res.json()).error || {}; } catch (e) { /* not JSON */ }
  if (res.status === 401) {
    stop('Your ticket has expired. Open the terminal again from the console (or ask for a new ticket); the shell keeps running meanwhile.', 'expired');
    return true;
  }
  if (res.status === 503 && err.details && err.details.recovering) {
    diedReason = err.details.reason || 'died';
    showBanner('The sandbox died (' + diedReason + ') and is being rebuilt on the same workspace; its processes are gone. Reconnecting…', false, 'died');
    setStatus('Sandbox rebuilding…');
    return false;
  }
  if (err.code === 'container_died' || res.status === 410) {
    const reason = err.details && err.details.reason ? ' (' + err.details.reason + ')' : '';
    stop('The sandbox died' + reason + ': ' + (err.message || 'its container stopped') + '.', 'died');
    return true;
  }
  if (err.code === 'not_found' || err.code === 'sandbox_expired') {
    stop('This sandbox no longer exists.', 'gone');
    return true;
  }
  if (err.code === 'pty_not_found' && diedReason) {
    // The rebuilt sandbox has no old shell: open a new one on the same workspace.
    showBanner('The sandbox was rebuilt after its container died (' + diedReason + '); this is a new shell on the same workspace.', false, 'rebuilt');
    diedReason = null;
    sessionStorage.removeItem(storageKey);
    offset = 0;
    createSession();
    return true;
  }
  if (err.code === 'pty_not_found') {
    ended = true;
    sessionStorage.removeItem(storageKey);
    setStatus('Ended');
    showBanner('The terminal session ended.');
    restartBtn.hidden = false;
    return true;
  }
  setStatus('Sandbox unavailable (' + (err.code || res.status) + '), retrying…');
  return false;
}

async function createSession() {
  let res;
  try {
    res = await request(base + 'session', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ cols: term.cols, rows: term.rows }),
    });
  } catch (e) {
    setStatus('Offline, retrying…');
    timer = setTimeout(createSession, 2000);
    return;
  }
  if (!res.ok) {
    if (!(await explain(res))) timer = setTimeout(createSession, 2000);
    return;
  }
  const s = await res.json();
  ptyID = s.pty;
  offset = 0;
  sessionStorage.setItem(storageKey, ptyID);
  connect(0);
}

async function start() {
  if (body.dataset.permission !== 'write') {
    stop('This link is read-only; a terminal needs a write ticket. Open it from the console.', 'readonly');
    return;
  }
  const known = sessionStorage.getItem(storageKey);
  if (known) {
    // A reload of this tab: reattach to the same shell and replay its buffer onto the empty screen.
    let res;
    try {
      res = await request(base + 'session?pty=' + encodeURIComponent(known));
    } catch (e) {
      setStatus('Offline, retrying…');
      timer = setTimeout(start, 2000);
      return;
    }
    if (res.ok) {
      ptyID = known;
      connect(0);
      return;
    }
    if (res.status !== 404 && await explain(res)) return;
    sessionStorage.removeItem(storageKey);
  }
  createSession();
}

// Keep idle connections alive through proxies that drop silent streams.
setInterval(() => sendControl({ type: 'ping' }), 25000);

// For tests and debugging: the terminal and a way to cut the connection as a network failure would.
window.sandgateTerminal = {
  term,
  get offset() { return offset; },
  // Open and attached: an open stream that never said "connected" is not a terminal yet.
  get connected() { return !!ws && ws.readyState === WebSocket.OPEN && greeted; },
  dropConnection() { if (ws) ws.close(4000, 'dropped'); },
};

start();
