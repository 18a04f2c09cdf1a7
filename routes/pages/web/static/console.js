// The console: list, create, stop, extend, delete and open sandboxes. Live updates arrive as Server-Sent Events;
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
  const res = await fetch('/console/' + path, opts);
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

function render() {
  tbody.textContent = '';
  empty.hidden = rows.length > 0;
  for (const sb of rows) {
    const tr = document.createElement('tr');
    tr.dataset.id = sb.id;
    cell(tr, sb.id, 'id');
    cell(tr, sb.profile);
    const st = cell(tr, sb.status, 'status st-' + sb.status);
    if (sb.died) st.title = sb.died.message;
    else if (sb.last_error) st.title = sb.last_error;
    cell(tr, ago(sb.created_at));
    cell(tr, until(sb.expires_at));
    cell(tr, sb.idle_expires_at ? until(sb.idle_expires_at) : '—');
    const u = sb.usage;
    cell(tr, u && u.cpu_percent != null ? u.cpu_percent.toFixed(1) + '%' : '—');
    cell(tr, u ? bytes(u.memory_bytes) + (u.memory_limit ? ' / ' + bytes(u.memory_limit) : '') : '—');
    const actions = cell(tr, '', 'actions');
    const caps = sb.capabilities || [];
    const live = sb.status !== 'expired' && sb.status !== 'failed';
    if (canOpen && live) {
      if (caps.includes('shell')) actions.appendChild(button('Terminal', 'Open the terminal of ' + sb.id, () => open(sb, 'terminal')));
      if (caps.includes('vnc') || caps.includes('browser')) {
        actions.appendChild(button('Desktop', 'Open the desktop of ' + sb.id, () => open(sb, 'desktop')));
        actions.appendChild(button('View', 'Watch the desktop of ' + sb.id + ' (view only)', () => open(sb, 'desktop', true)));
      }
      actions.appendChild(button('App', 'Open the app of ' + sb.id, () => open(sb, 'app')));
    }
    if (sb.status === 'ready' || sb.status === 'starting') {
      actions.appendChild(button('Stop', 'Stop ' + sb.id + ' (keeps its workspace)', () =>
        act('Stop', () => api('POST', 'api/sandboxes/' + encodeURIComponent(sb.id) + '/stop'))));
    }
    if (sb.expires_at) {
      actions.appendChild(button('+1h', 'Extend the lifetime of ' + sb.id + ' by one hour', () =>
        act('Extend', () => api('POST', 'api/sandboxes/' + encodeURIComponent(sb.id) + '/extend', { seconds: 3600 }))));
    }
    actions.appendChild(button('Delete', 'Delete ' + sb.id + ' and its workspace', () => {
      if (!window.confirm('Delete sandbox ' + sb.id + ' and its workspace? This cannot be undone.')) return;
      act('Delete', () => api('DELETE', 'api/sandboxes/' + encodeURIComponent(sb.id)));
    }));
    tbody.appendChild(tr);
  }
}

let refreshing = null;
async function refresh() {
  if (refreshing) return refreshing;
  refreshing = (async () => {
    try {
      const r = await api('GET', 'api/sandboxes');
      clockSkew = new Date(r.now).getTime() - Date.now();
      rows = r.sandboxes || [];
      render();
    } catch (e) { say('Could not load the list: ' + e.message); }
    finally { refreshing = null; }
  })();
  return refreshing;
}

async function loadProfiles() {
  const r = await api('GET', 'api/profiles');
  profileSelect.textContent = '';
  for (const p of r.profiles || []) {
    profiles[p.id] = p;
    const o = document.createElement('option');
    o.value = p.id;
    o.textContent = p.id + (p.description ? ' — ' + p.description : '') + ' [' + (p.capabilities || []).join(', ') + ']';
    profileSelect.appendChild(o);
  }
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
  for (const t of ['created', 'ready', 'stopped', 'started', 'deleted', 'died', 'oom', 'failed', 'gc']) es.addEventListener(t, onEvent);
  es.addEventListener('logout', () => location.reload());
}

setInterval(() => { if (rows.length) refresh(); }, 10000); // ages, expiry countdowns and CPU move on their own
loadProfiles().catch((e) => say('Could not load profiles: ' + e.message));
refresh();
connectEvents();
