// Drives every browser flow of the README against the gateway running the unmodified Caddyfile.example, in Debian's
// Chromium with playwright-core. Run by example_browser_test.go, which prepares the sandboxes and the ticket URLs
// (from the API, as a user would) and passes them in the environment; prints "RESULT <json>" on success.
const { chromium } = require('playwright-core');
const { launch } = require('./chromium.cjs');
const path = require('path');

const env = process.env;
const base = env.BASE; // https://localhost:<port>, the console and API origin
const shots = env.SCREENSHOTS;

function check(cond, msg) { if (!cond) throw new Error(msg); }
function log(msg) { console.log(new Date().toISOString() + ' ' + msg); }

// watch records what each page saw, for the log of a failed run: console messages, script errors, failed requests
// and every WebSocket's life (open, the first frames each way, socket errors, close). Under load the failures are
// rare and vary; this is the evidence.
function watch(context) {
  let n = 0;
  context.on('page', (p) => {
    const tag = 'page' + (++n);
    const short = (u) => String(u).replace(/ticket=[^&\s]+/, 'ticket=…').slice(0, 160);
    p.on('framenavigated', (f) => { if (f === p.mainFrame()) log(tag + ' navigated ' + short(f.url())); });
    p.on('console', (m) => log(tag + ' console.' + m.type() + ': ' + m.text().slice(0, 300)));
    p.on('pageerror', (e) => log(tag + ' pageerror: ' + String(e).slice(0, 300)));
    p.on('requestfailed', (r) => log(tag + ' requestfailed ' + r.method() + ' ' + short(r.url()) + ': ' + (r.failure() || {}).errorText));
    p.on('response', (r) => { if (r.status() >= 400) log(tag + ' response ' + r.status() + ' ' + r.request().method() + ' ' + short(r.url())); });
    p.on('websocket', (ws) => {
      const w = tag + ' ws ' + short(ws.url());
      log(w + ' opening');
      let sent = 0, got = 0;
      const frame = (dir, f) => {
        const c = dir === 'sent' ? ++sent : ++got;
        if (c <= 3) log(w + ' ' + dir + ' #' + c + ': ' + (typeof f.payload === 'string' ? f.payload.slice(0, 120) : '<' + f.payload.length + ' bytes>'));
      };
      ws.on('framesent', (f) => frame('sent', f));
      ws.on('framereceived', (f) => frame('received', f));
      ws.on('socketerror', (e) => log(w + ' socketerror: ' + e));
      ws.on('close', () => log(w + ' closed after ' + sent + ' sent, ' + got + ' received frames'));
    });
  });
}

async function screenText(page) {
  return page.evaluate(() => {
    const buf = window.sandgateTerminal.term.buffer.active;
    const lines = [];
    for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i).translateToString(true));
    return lines.join('\n');
  });
}

async function waitScreen(page, re, what) {
  const deadline = Date.now() + 60000;
  for (;;) {
    const text = await screenText(page);
    const m = text.match(re);
    if (m) return m;
    if (Date.now() > deadline) throw new Error('screen never showed ' + what + ':\n' + text);
    await page.waitForTimeout(100);
  }
}

async function typeLine(page, line) {
  await page.keyboard.type(line);
  await page.keyboard.press('Enter');
}

async function litPixels(page) {
  return page.evaluate(() => {
    const c = document.querySelector('#screen canvas');
    if (!c || !c.width) return 0;
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] || d[i + 1] || d[i + 2]) n++;
    return n;
  });
}

async function waitLit(page, what) {
  const deadline = Date.now() + 120000;
  let lit = 0;
  while (Date.now() < deadline) {
    lit = await litPixels(page);
    if (lit > 1000) return lit;
    await page.waitForTimeout(300);
  }
  throw new Error(what + ': the desktop canvas stayed blank (' + lit + ' lit pixels)');
}

// The README: the terminal URL the API answered opens the terminal; typing, resizing and a reconnect work.
async function terminal(context) {
  const term = await context.newPage();
  await term.goto(env.TERMINAL_URL);
  check(!term.url().includes('ticket='), 'the ticket stayed in the address bar: ' + term.url());
  await term.waitForFunction(() => window.sandgateTerminal && window.sandgateTerminal.connected, null, { timeout: 120000 });
  await term.locator('#terminal').click();
  await typeLine(term, 'echo typed-$((6*7))');
  await waitScreen(term, /^typed-42$/m, 'typed-42');
  await typeLine(term, 'stty size');
  const first = (await waitScreen(term, /^(\d+) (\d+)$/m, 'stty size'))[0];
  await term.setViewportSize({ width: 700, height: 380 });
  let second;
  const deadline = Date.now() + 60000;
  for (;;) {
    await typeLine(term, 'stty size');
    await term.waitForTimeout(300);
    const sizes = [...(await screenText(term)).matchAll(/^(\d+) (\d+)$/mg)].map((m) => m[0]);
    second = sizes[sizes.length - 1];
    if (second && second !== first) break;
    check(Date.now() < deadline, 'stty size did not change after the resize: ' + first);
  }
  await term.evaluate(() => window.sandgateTerminal.dropConnection());
  await term.waitForFunction(() => window.sandgateTerminal.connected, null, { timeout: 120000 });
  await typeLine(term, 'echo after-$((40+2))');
  await waitScreen(term, /^after-42$/m, 'after-42 (after the reconnect)');
  await term.screenshot({ path: path.join(shots, 'example-terminal.png') });
  await term.close();
  return { first, second };
}

// The README's python-isolated: its terminal (the isolated tour's ticket URL) reads gVisor's kernel.
async function isolatedTerminal(context) {
  const term = await context.newPage();
  await term.goto(env.ISOLATED_TERMINAL_URL);
  await term.waitForFunction(() => window.sandgateTerminal && window.sandgateTerminal.connected, null, { timeout: 120000 });
  await term.locator('#terminal').click();
  await typeLine(term, 'uname -r');
  const release = (await waitScreen(term, /^\S*gvisor\S*$/m, "gVisor's kernel release"))[0];
  await typeLine(term, 'echo isolated-$((6*7))');
  await waitScreen(term, /^isolated-42$/m, 'isolated-42');
  await term.screenshot({ path: path.join(shots, 'example-terminal-isolated.png') });
  await term.close();
  return release;
}

// The console: log in with the key from credentials.json, create a python-default sandbox and see it ready.
async function consoleCreate(page) {
  await page.goto(base + '/console/');
  await page.getByLabel('API key').fill(env.KEY);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForSelector('#sandboxes', { timeout: 60000 });
  await page.waitForFunction(() => document.getElementById('live').textContent === 'Live', null, { timeout: 60000 });
  // The list shows the sandboxes made through the API before the new one is told apart from them.
  const known = env.KNOWN.split(',');
  await page.waitForFunction((ids) => ids.every((id) => document.querySelector(`tr[data-id="${id}"]`)), known, { timeout: 60000 });
  return consoleCreateFrom(page, 'python-default', 'example-console.png');
}

// consoleCreateFrom creates a sandbox of profile from the logged-in console and waits for its row to read ready.
async function consoleCreateFrom(page, profile, shot) {
  const before = await page.locator('#sandboxes tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  await page.getByLabel('Profile').selectOption(profile);
  await page.getByRole('button', { name: 'Create' }).click();
  const row = await page.waitForFunction((before) => {
    const fresh = [...document.querySelectorAll('#sandboxes tbody tr')].find((r) => !before.includes(r.dataset.id));
    if (fresh) return fresh.dataset.id;
    const said = (document.getElementById('message') || {}).textContent || '';
    return /failed/i.test(said) ? 'failed: ' + said : null;
  }, before, { timeout: 180000 });
  const id = await row.jsonValue();
  check(!id.startsWith('failed: '), 'the console could not create the sandbox: ' + id);
  await page.locator(`tr[data-id="${id}"] td.status`).filter({ hasText: /^ready$/ }).waitFor({ timeout: 180000 });
  await page.screenshot({ path: path.join(shots, shot) });
  return id;
}

// The console's profile list says which profile runs under gVisor; creating from python-isolated works.
async function consoleIsolated(page) {
  const option = page.locator('#profile option[value="python-isolated"]');
  const text = await option.textContent();
  const runtime = await option.getAttribute('data-runtime');
  const created = await consoleCreateFrom(page, 'python-isolated', 'example-console-isolated.png');
  return { option: text, runtime, created };
}

// An app page: it fetched data.txt over HTTP and got its WebSocket message echoed.
async function appResult(page) {
  await page.waitForFunction(() => window.appResult, null, { timeout: 60000 });
  return page.evaluate(() => window.appResult);
}

// The console's App button opens the content origin, never a path of the console's own origin.
async function consoleApp(context, page) {
  const [tab] = await Promise.all([
    context.waitForEvent('page'),
    page.locator(`tr[data-id="${env.APP_SANDBOX}"]`).getByRole('button', { name: 'App', exact: true }).click(),
  ]);
  await tab.waitForURL((u) => u.hostname.endsWith('.sandbox.localhost'), { timeout: 60000 });
  await tab.waitForLoadState('domcontentloaded');
  const res = await appResult(tab);
  const url = tab.url();
  await tab.close();
  return { url, res };
}

// The attack: an HTML page the sandbox serves, opened by the logged-in operator, tries the console.
async function attack(context) {
  const page = await context.newPage();
  await page.goto(env.APP_URL);
  const app = await appResult(page);
  await page.screenshot({ path: path.join(shots, 'example-app.png') });
  await page.goto(new URL('/attack.html', page.url()).toString());
  await page.waitForFunction(() => window.attackResult, null, { timeout: 60000 });
  const res = await page.evaluate(() => window.attackResult);
  await page.close();
  return { app, attack: res, appURL: page.url() };
}

// A workspace HTML file opened through a files ticket is a download: it never renders on the console's origin.
async function download(context) {
  const page = await context.newPage();
  const [dl, nav] = await Promise.all([
    page.waitForEvent('download', { timeout: 60000 }),
    page.goto(env.FILES_URL).then(() => 'rendered', (e) => String(e)),
  ]);
  const ran = await page.evaluate(() => !!window.attackResult).catch(() => false);
  const name = dl.suggestedFilename();
  await page.close();
  return { name, nav, ran };
}

// The desktop of the browser sandbox with a write ticket (canvas renders), then with a read ticket.
async function desktop(context) {
  const desk = await context.newPage();
  await desk.goto(env.DESKTOP_URL);
  await desk.waitForFunction(() => window.sandgateDesktop && window.sandgateDesktop.connected, null, { timeout: 120000 });
  const lit = await waitLit(desk, 'write ticket');
  await desk.screenshot({ path: path.join(shots, 'example-desktop.png') });
  await desk.close();
  const view = await context.newPage();
  await view.goto(env.VIEW_URL);
  await view.waitForFunction(() => window.sandgateDesktop && (window.sandgateDesktop.connected || window.sandgateDesktop.stopped),
    null, { timeout: 120000 });
  const viewOnly = await view.evaluate(() => window.sandgateDesktop.viewOnly);
  const viewState = await view.evaluate(() => window.sandgateDesktop.connected ? 'connected' : String(window.sandgateDesktop.stopped));
  const mode = await view.locator('#mode').textContent();
  await view.screenshot({ path: path.join(shots, 'example-desktop-view.png') });
  await view.close();
  return { lit, viewOnly, viewState, mode };
}

// Playwright connectOverCDP on the CDP URL the API answered: drive a page in the sandbox's Chromium.
async function cdp() {
  const remote = await chromium.connectOverCDP(env.CDP_URL, { timeout: 120000 });
  try {
    const ctx = remote.contexts()[0] || await remote.newContext();
    const p = await ctx.newPage();
    await p.setContent('<title>driven</title><p id=x>over cdp</p>');
    const text = await p.locator('#x').textContent();
    const title = await p.title();
    await p.close();
    return { text, title };
  } finally {
    await remote.close();
  }
}

// ONLY=shared: the console and apps on one origin (shared_origin). The operator is logged in; the attack page,
// served in path form under Content-Security-Policy: sandbox, tries the console.
async function shared(context) {
  const page = await context.newPage();
  await page.goto(base + '/console/');
  await page.getByLabel('API key').fill(env.KEY);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForSelector('#sandboxes', { timeout: 60000 });
  await page.goto(env.ATTACK_URL);
  await page.waitForFunction(() => window.attackResult, null, { timeout: 90000 });
  const res = await page.evaluate(() => window.attackResult);
  const origin = await page.evaluate(() => String(self.origin));
  return { attack: res, origin };
}

(async () => {
  const browser = await launch();
  const out = {};
  let context;
  try {
    context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1000, height: 600 }, acceptDownloads: true });
    watch(context);
    if (env.ONLY === 'shared') {
      console.log('RESULT ' + JSON.stringify(await shared(context)));
      return;
    }
    log('terminal from the API ticket URL');
    out.terminal = await terminal(context);
    log('terminal of the python-isolated sandbox');
    out.isolated = { release: await isolatedTerminal(context) };
    const page = await context.newPage();
    log('console: log in and create');
    out.created = await consoleCreate(page);
    log('console: the python-isolated profile');
    Object.assign(out.isolated, await consoleIsolated(page));
    log('console: open the app');
    out.consoleApp = await consoleApp(context, page);
    log('app ticket URL and the attack page');
    Object.assign(out, await attack(context));
    log('workspace HTML through a files ticket');
    out.download = await download(context);
    log('desktop');
    out.desktop = await desktop(context);
    log('connectOverCDP');
    out.cdp = await cdp();
    console.log('RESULT ' + JSON.stringify(out));
  } catch (e) {
    if (context) {
      for (const p of context.pages()) {
        const text = await p.locator('body').innerText().catch(() => '');
        const status = await p.locator('#status').textContent({ timeout: 1000 }).catch(() => '');
        const shot = path.join(shots, 'example-failed-' + context.pages().indexOf(p) + '.png');
        console.error('PAGE ' + p.url().replace(/ticket=[^&\s]+/, 'ticket=…') + (status ? ' status "' + status + '"' : '') + ' screenshot ' + shot + '\n' + text.slice(0, 2000));
        await p.screenshot({ path: shot }).catch(() => {});
      }
    }
    console.error('PARTIAL ' + JSON.stringify(out));
    throw e;
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error('FAILED ' + (e && e.stack || e)); process.exit(1); });
