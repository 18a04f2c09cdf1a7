// The console: list, create, stop, pause, resume, extend, delete and open sandboxes. Live updates arrive as Server-Sent Events;
// every action carries the session's CSRF token.
const csrf = document.querySelector('meta[name="csrf-token"]').content;
const canOpen = document.body.dataset.canOpen === 'true';
const tbody = document.querySelector('#sandboxes tbody');
const empty = document.getElementById('empty');
const message = document.getElementById('message');
const live = document.getElementById('live');
const profileSelect = document.getElementById('profile');
let profiles = {};
let rows = [];
let clockSkew = 0; // server time minus our time

function say(text) { message.textContent = text || ''; }

async function api(method, path, body) {
  const opts = { method, credentials: 'same-origin', cache: 'no-store', headers: { 'X-CSRF-Token': csrf } };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  // Reads and ticket minting are safe to repeat, so a dropped connection (a network change, a gateway reload) is
  // retried; other actions are not, so they never apply twice.
  const retries = method === 'GET' || path.endsWith('/open') ? 2 : 0;
  let res;
  for (let i = 0; ; i++) {
    try {
      res = await fetch('/console/' + path, opts);
      break;
    } catch (e) {
      if (i >= retries) throw e;
      await new Promise((r) => setTimeout(r, 300 * (i + 1)));
    }
  }
  if (res.status === 401) {
    location.reload(); // the login expired: show the login form
    throw new Error('logged out');
  }
  if (!res.ok) {
    let err = {};
    try { err = (await res.json()).error || {}; } catch (e) { /* not JSON */ }
    throw new Error(err.message || ('HTTP ' + res.status));
  }
  return res.status === 204 ? null : res.json();
}

function ago(t) {
  if (!t) return '—';
  const s = Math.round((Date.now() + clockSkew - new Date(t).getTime()) / 1000);
  return human(Math.abs(s)) + (s >= 0 ? ' ago' : ' from now');
}
function until(t) {
  if (!t) return 'never';
  const s = Math.round((new Date(t).getTime() - Date.now() - clockSkew) / 1000);
  return s <= 0 ? 'now' : 'in ' + human(s);
}
function human(s) {
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
}
function bytes(n) {
  if (n == null) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + ' ' + units[i];
}

function button(label, title, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.title = title;
  b.addEventListener('click', onClick);
  return b;
}
function cell(tr, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

async function open(sb, kind, readOnly) {
  // Open the tab inside the click (pop-up blockers allow that), then send it to the ticket URL once minted.
  const w = window.open('', '_blank');
  if (!w) { say('The browser blocked the new tab; allow pop-ups for this site.'); return; }
  w.opener = null;
  try {
    const r = await api('POST', 'api/sandboxes/' + encodeURIComponent(sb.id) + '/open', { kind, read_only: !!readOnly });
    w.location.replace(r.url);
  } catch (e) {
    w.close();
    say('Could not open ' + kind + ': ' + e.message);
  }
}
async function act(label, fn) {
  say('');
  try { await fn(); await refresh(); } catch (e) { say(label + ' failed: ' + e.message); }
}

// render updates the table in place: rows are keyed by sandbox id and their buttons are rebuilt only when the
// set of actions changes, so a refresh never steals keyboard focus or a click in progress.
const rowByID = new Map();

function actionsOf(sb) {
  const caps = sb.capabilities || [];
  const alive = sb.status !== 'expired' && sb.status !== 'failed';
  const list = [];
  if (canOpen && alive) {
    if (caps.includes('shell')) list.push('terminal');
    if (caps.includes('vnc') || caps.includes('browser')) list.push('desktop', 'view');
    if (profiles[sb.profile] && profiles[sb.profile].app_port) list.push('app');
  }
  if (sb.status === 'ready') list.push('pause');
  if (sb.status === 'paused') list.push('resume');
  if (sb.status === 'ready' || sb.status === 'starting' || sb.status === 'paused') list.push('stop');
  if (sb.expires_at) list.push('extend');
  list.push('delete');
  return list;
}

function actionButton(sb, a) {
  const id = encodeURIComponent(sb.id);
  switch (a) {
    case 'terminal': return button('Terminal', 'Open the terminal of ' + sb.id, () => open(sb, 'terminal'));
    case 'desktop': return button('Desktop', 'Open the desktop of ' + sb.id, () => open(sb, 'desktop'));
    case 'view': return button('View', 'Watch the desktop of ' + sb.id + ' (view only)', () => open(sb, 'desktop', true));
    case 'app': return button('App', 'Open the app of ' + sb.id, () => open(sb, 'app'));
    case 'stop': return button('Stop', 'Stop ' + sb.id + ' (keeps its workspace)', () =>
      act('Stop', () => api('POST', 'api/sandboxes/' + id + '/stop')));
    case 'pause': return button('Pause', 'Pause ' + sb.id + ' (freezes its processes, keeps its memory)', () =>
      act('Pause', () => api('POST', 'api/sandboxes/' + id + '/pause')));
    case 'resume': return button('Resume', 'Resume ' + sb.id, () =>
      act('Resume', () => api('POST', 'api/sandboxes/' + id + '/resume')));
    case 'extend': return button('+1h', 'Extend the lifetime of ' + sb.id + ' by one hour', () =>
      act('Extend', () => api('POST', 'api/sandboxes/' + id + '/extend', { seconds: 3600 })));
    case 'delete': return button('Delete', 'Delete ' + sb.id + ' and its workspace', () => {
      if (!window.confirm('Delete sandbox ' + sb.id + ' and its workspace? This cannot be undone.')) return;
      act('Delete', () => api('DELETE', 'api/sandboxes/' + id));
    });
  }
  return null;
}

function render() {
  empty.hidden = rows.length > 0;
  const keep = new Set(rows.map((sb) => sb.id));
  for (const [id, r] of rowByID) {
    if (!keep.has(id)) { r.tr.remove(); rowByID.delete(id); }
  }
  let prev = null;
  for (const sb of rows) {
    let r = rowByID.get(sb.id);
    if (!r) {
      const tr = document.createElement('tr');
      tr.dataset.id = sb.id;
      const cells = [];
      for (let i = 0; i < 9; i++) cells.push(cell(tr, '', ['id', '', 'status', '', '', '', '', '', 'actions'][i]));
      r = { tr, cells, actions: '' };
      rowByID.set(sb.id, r);
    }
    const u = sb.usage;
    const texts = [sb.id, sb.profile, sb.status, ago(sb.created_at), until(sb.expires_at),
      sb.idle_expires_at ? until(sb.idle_expires_at) : '—',
      u && u.cpu_percent != null ? u.cpu_percent.toFixed(1) + '%' : '—',
      u ? bytes(u.memory_bytes) + (u.memory_limit ? ' / ' + bytes(u.memory_limit) : '') : '—'];
    texts.forEach((t, i) => { if (r.cells[i].textContent !== t) r.cells[i].textContent = t; });
    r.cells[2].className = 'status st-' + sb.status;
    r.cells[2].title = sb.died ? sb.died.message : (sb.last_error || '');
    const acts = actionsOf(sb);
    if (acts.join() !== r.actions) {
      r.actions = acts.join();
      r.cells[8].textContent = '';
      for (const a of acts) r.cells[8].appendChild(actionButton(sb, a));
    }
    // Keep the server's order (newest first) without moving rows that are already in place.
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== r.tr) tbody.insertBefore(r.tr, want);
    prev = r.tr;
  }
}

// retryDelay is how long to wait before the nth retry of a failed load: a network change or a gateway reload drops
// requests for a moment, a gateway that is down for longer is asked every 10 s.
function retryDelay(n) { return Math.min(500 * 2 ** n, 10000); }

// refresh loads the list and shows it. A call while a load is in flight asks for one more load after it, so an
// event that arrives mid-load is never answered with the older list. A failed load tries again by itself: the
// periodic refresh only runs while rows are shown, and the list must not stay empty because its first load was lost.
let loading = null;
let loadAgain = false;
let listRetry = null;
let listFailures = 0;
function refresh() {
  if (loading) { loadAgain = true; return loading; }
  clearTimeout(listRetry);
  loading = (async () => {
    try {
      const r = await api('GET', 'api/sandboxes');
      clockSkew = new Date(r.now).getTime() - Date.now();
      rows = r.sandboxes || [];
      render();
      listFailures = 0;
      if (message.textContent.startsWith('Could not load the list')) say('');
    } catch (e) {
      say('Could not load the list: ' + e.message);
      listRetry = setTimeout(refresh, retryDelay(listFailures++));
    } finally {
      loading = null;
      if (loadAgain) { loadAgain = false; refresh(); }
    }
  })();
  return loading;
}

// runtimeLabel says how a profile's sandboxes are isolated: gVisor's own kernel (runsc) or a container on the
// host's kernel (runc); another runtime is named as it is.
function runtimeLabel(rt) {
  if (rt === 'runsc') return 'isolated: gVisor (runsc)';
  if (!rt || rt === 'runc') return 'container (runc)';
  return 'runtime ' + rt;
}

// loadProfiles fills the create form's profile list and tries again until it has it.
async function loadProfiles(failures = 0) {
  let r;
  try {
    r = await api('GET', 'api/profiles');
  } catch (e) {
    say('Could not load profiles: ' + e.message);
    setTimeout(() => loadProfiles(failures + 1), retryDelay(failures));
    return;
  }
  if (message.textContent.startsWith('Could not load profiles')) say('');
  profileSelect.textContent = '';
  for (const p of r.profiles || []) {
    profiles[p.id] = p;
    const o = document.createElement('option');
    o.value = p.id;
    o.textContent = p.id + (p.description ? ' — ' + p.description : '') + ' [' + (p.capabilities || []).join(', ') + ']' +
      ' · ' + runtimeLabel(p.runtime);
    o.dataset.runtime = p.runtime || 'runc';
    profileSelect.appendChild(o);
  }
  render(); // a profile's app port adds the App button
}

document.getElementById('create').addEventListener('submit', (e) => {
  e.preventDefault();
  const btn = e.target.querySelector('button[type=submit]');
  btn.disabled = true;
  act('Create', () => api('POST', 'api/sandboxes', {
    profile: profileSelect.value, ttl_seconds: Number(document.getElementById('ttl').value),
  })).finally(() => { btn.disabled = false; });
});

let pending = null;
function connectEvents() {
  const es = new EventSource('/console/events');
  es.onopen = () => { live.textContent = 'Live'; refresh(); };
  es.onerror = () => { live.textContent = 'Reconnecting live updates…'; };
  const onEvent = () => { clearTimeout(pending); pending = setTimeout(refresh, 150); };
  for (const t of ['created', 'ready', 'stopped', 'started', 'paused', 'resumed', 'deleted', 'died', 'recovering', 'oom', 'failed', 'gc']) es.addEventListener(t, onEvent);
  es.addEventListener('logout', () => location.reload());
}

setInterval(() => { if (rows.length) refresh(); }, 10000); // ages, expiry countdowns and CPU move on their own
loadProfiles();
refresh();
connectEvents();
