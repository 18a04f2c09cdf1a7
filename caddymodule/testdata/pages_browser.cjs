// Drives the gateway's pages in Debian's Chromium with playwright-core. Run by pages_browser_test.go with
// STEP=<name> and the gateway's address in the environment; prints "RESULT <json>" on success.
const { launch } = require('../../testdata/chromium.cjs');
const path = require('path');

const base = process.env.BASE;             // https://localhost:<port>
const key = process.env.CONSOLE_KEY;
const shots = process.env.SCREENSHOTS;     // directory for screenshots
const step = process.env.STEP;
// Every wait is for a state the pages show; none races the clock. The only limit is the Go test's own deadline
// (STEP_DEADLINE, ms since the epoch), which guards against a hang: on a busy machine a sandbox's desktop may take
// minutes to paint, and that is not a failure.
const deadline = Number(process.env.STEP_DEADLINE) || Date.now() + 10 * 60 * 1000;
function remaining() { return Math.max(deadline - Date.now(), 1000); }

function check(cond, msg) { if (!cond) throw new Error(msg); }

// waitDesktop waits until the desktop page's stream is connected, or fails at once when the page gave up (its
// banner says why).
async function waitDesktop(tab) {
  await tab.waitForFunction(() => window.sandgateDesktop && (window.sandgateDesktop.connected || window.sandgateDesktop.stopped),
    null, { timeout: remaining() });
  const stopped = await tab.evaluate(() => window.sandgateDesktop.stopped);
  check(!stopped, 'the desktop page stopped (' + stopped + '): ' + await tab.locator('#banner').textContent());
}

// litPixels waits until the page's desktop canvas shows more than 1000 non-black pixels and returns the count. It
// fails at once if the page gives up on its stream; a stream that drops and reconnects is waited for.
async function litPixels(tab) {
  await tab.locator('#screen canvas').waitFor({ timeout: remaining() });
  for (;;) {
    const { lit, stopped } = await tab.evaluate(() => {
      const c = document.querySelector('#screen canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i] || d[i + 1] || d[i + 2]) n++;
      return { lit: n, stopped: window.sandgateDesktop.stopped };
    });
    if (lit > 1000) return lit;
    check(!stopped, 'the desktop page stopped (' + stopped + ') with a blank canvas (' + lit + ' lit pixels)');
    check(Date.now() < deadline, 'the desktop canvas stayed blank until the test deadline (' + lit + ' lit pixels)');
    await tab.waitForTimeout(300);
  }
}

// login signs in to the console.
async function login(page) {
  await page.goto(base + '/console/');
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#sandboxes').waitFor({ timeout: remaining() });
  await page.waitForFunction(() => document.getElementById('live').textContent === 'Live', null, { timeout: remaining() });
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

// openFromConsole clicks an open button of the sandbox's row and returns the page it opened.
async function openFromConsole(context, page, id, label) {
  const [tab] = await Promise.all([
    context.waitForEvent('page'),
    page.locator(`tr[data-id="${id}"]`).getByRole('button', { name: label, exact: true }).click(),
  ]);
  await tab.waitForURL(/\/sandboxes\/[^/]+\/(terminal|vnc|app)\//, { timeout: remaining() });
  await tab.waitForLoadState('domcontentloaded');
  return tab;
}

const steps = {
  // Log in, create a sandbox of PROFILE, wait until the list shows it ready.
  async create(context, page) {
    await login(page);
    const before = await page.locator('#sandboxes tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.id));
    await page.getByLabel('Profile').selectOption(process.env.PROFILE);
    await page.getByRole('button', { name: 'Create' }).click();
    let id = null;
    while (!id) {
      const ids = await page.locator('#sandboxes tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.id));
      id = ids.find((x) => !before.includes(x)) || null;
      if (!id) {
        check(Date.now() < deadline, 'the new sandbox never appeared in the list');
        await page.waitForTimeout(200);
      }
    }
    // Live updates (SSE) turn the status to ready without a reload.
    await page.locator(`tr[data-id="${id}"] td.status`).filter({ hasText: /^ready$/ }).waitFor({ timeout: remaining() });
    // CPU and memory come from the engine's stats; CPU needs two samples (the list refreshes every 10 s).
    const cells = page.locator(`tr[data-id="${id}"] td`);
    await cells.nth(7).filter({ hasText: /iB/ }).waitFor({ timeout: remaining() });
    await cells.nth(6).filter({ hasText: /%$/ }).waitFor({ timeout: remaining() });
    const usage = { cpu: await cells.nth(6).textContent(), memory: await cells.nth(7).textContent() };
    if (process.env.SHOT) await page.screenshot({ path: path.join(shots, process.env.SHOT) });
    return { id, usage };
  },

  async terminal(context, page) {
    const id = process.env.SANDBOX;
    await login(page);
    const term = await openFromConsole(context, page, id, 'Terminal');
    check(!term.url().includes('ticket='), 'the ticket stayed in the address bar: ' + term.url());
    await term.waitForFunction(() => window.sandgateTerminal && window.sandgateTerminal.connected, null, { timeout: remaining() });
    await term.locator('#terminal').click();
    await typeLine(term, 'echo hello');
    await waitScreen(term, /^hello$/m, 'hello');
    await typeLine(term, 'stty size');
    const first = await waitScreen(term, /^(\d+) (\d+)$/m, 'stty size');
    await term.setViewportSize({ width: 700, height: 380 });
    await term.waitForTimeout(500);
    await typeLine(term, 'stty size');
    let second;
    for (;;) {
      const sizes = [...(await screenText(term)).matchAll(/^(\d+) (\d+)$/mg)].map((m) => m[0]);
      second = sizes[sizes.length - 1];
      if (second && second !== first[0]) break;
      check(Date.now() < deadline, 'stty size did not change after the resize: ' + first[0]);
      await term.waitForTimeout(200);
    }
    await term.setViewportSize({ width: 1000, height: 600 });
    await typeLine(term, 'echo before-drop');
    await waitScreen(term, /^before-drop$/m, 'before-drop');
    // Output produced while the page is disconnected must arrive by replay: hold the page's reconnect probe for
    // 3 s while a background job prints after 2 s.
    await term.route('**/terminal/session?pty=*', async (route) => {
      await new Promise((r) => setTimeout(r, 3000));
      await route.continue();
    });
    await typeLine(term, '(sleep 2; echo during-$((1+1)))&');
    await waitScreen(term, /\[1\] \d+/m, 'the background job');
    // A network blip: the page's WebSocket dies; the shell lives on and the page reattaches with replay.
    const offsetBefore = await term.evaluate(() => window.sandgateTerminal.offset);
    await term.evaluate(() => window.sandgateTerminal.dropConnection());
    await term.waitForFunction(() => !window.sandgateTerminal.connected, null, { timeout: remaining() });
    await term.waitForFunction(() => window.sandgateTerminal.connected, null, { timeout: remaining() });
    await waitScreen(term, /during-2$/m, 'during-2 (output produced while disconnected)');
    await typeLine(term, 'echo after-$((40+2))');
    await waitScreen(term, /^after-42$/m, 'after-42');
    const text = await screenText(term);
    check(/^hello$/m.test(text) && /^before-drop$/m.test(text), 'earlier output lost after the reconnect:\n' + text);
    // Paste from the clipboard (button) into the shell, and copy the terminal's selection out.
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    await term.evaluate(() => navigator.clipboard.writeText('echo pasted-$((2*3))'));
    await term.getByRole('button', { name: 'Paste' }).click();
    await waitScreen(term, /\$ echo pasted-\$\(\(2\*3\)\)/m, 'the pasted command');
    await term.locator('#terminal').click(); // Enter goes to the shell, not to the focused button
    await term.keyboard.press('Enter');
    await waitScreen(term, /^pasted-6$/m, 'pasted-6');
    await term.evaluate(() => window.sandgateTerminal.term.selectAll());
    await term.getByRole('button', { name: 'Copy' }).click();
    const copied = await term.evaluate(() => navigator.clipboard.readText());
    check(/^hello$/m.test(copied), 'the copied selection lacks hello: ' + copied.slice(0, 200));
    await term.screenshot({ path: path.join(shots, 'terminal.png') });
    // The session cookie expires (the browser drops it): the next reconnect is refused and the page says why.
    await term.unroute('**/terminal/session?pty=*');
    await context.clearCookies();
    await term.evaluate(() => window.sandgateTerminal.dropConnection());
    await term.locator('#banner[data-kind="expired"]').waitFor({ timeout: remaining() });
    const expiredBanner = await term.locator('#banner').textContent();
    await term.screenshot({ path: path.join(shots, 'terminal-expired.png') });
    return { first: first[0], second, offsetBefore, expiredBanner };
  },

  // The failures a busy machine or a slow network cause, on the way to a working terminal. In the console: its
  // first two list loads lost with all their retries (a storm of network changes does that; the list must still
  // appear), and its first profile load. In the terminal, each once: a file of the page's module graph lost (the
  // page must reload itself, not sit on "Connecting…"), the session request lost (retried), and a WebSocket whose
  // handshake never completes (mocked open and silent: the page must drop it and connect again). Then typing works.
  async faults(context, page) {
    const id = process.env.SANDBOX;
    const seen = { list: 0, profiles: 0, module: 0, session: 0, ws: 0 };
    const listLost = 6; // two loads of three tries each (console.js api retries a read twice)
    await context.route('**/console/api/sandboxes', (route) =>
      route.request().method() === 'GET' && seen.list++ < listLost ? route.abort('internetdisconnected') : route.continue());
    await context.route('**/console/api/profiles', (route) =>
      seen.profiles++ < 3 ? route.abort('internetdisconnected') : route.continue());
    await context.route('**/vendor/xterm/addon-fit.mjs', (route) =>
      seen.module++ === 0 ? route.abort('internetdisconnected') : route.continue());
    await context.route('**/terminal/session', (route) =>
      route.request().method() === 'POST' && seen.session++ === 0 ? route.abort('connectionreset') : route.continue());
    await context.routeWebSocket(/\/terminal\/ws/, (ws) => {
      if (seen.ws++ > 0) ws.connectToServer();
      // The first stays mocked: open, never a word, as a handshake stuck in a proxy looks to the page's script.
    });
    await login(page);
    await page.locator('#profile option').first().waitFor({ state: 'attached', timeout: remaining() });
    const term = await openFromConsole(context, page, id, 'Terminal');
    await term.waitForFunction(() => window.sandgateTerminal && window.sandgateTerminal.connected,
      null, { timeout: remaining() });
    await term.locator('#terminal').click();
    await typeLine(term, 'echo faults-$((6*7))');
    await waitScreen(term, /^faults-42$/m, 'faults-42');
    return seen;
  },

  // The sandbox's container is killed under an open terminal: the page says the sandbox died, with the reason, and
  // reconnects to a new shell once the gateway has rebuilt it on its workspace.
  async died(context, page) {
    const id = process.env.SANDBOX;
    await login(page);
    const term = await openFromConsole(context, page, id, 'Terminal');
    await term.waitForFunction(() => window.sandgateTerminal && window.sandgateTerminal.connected, null, { timeout: remaining() });
    require('child_process').execFileSync('sh', ['-c',
      `docker kill $(docker ps -q --filter label=${process.env.NAMESPACE}.id=${id})`]);
    await term.locator('#banner[data-kind="died"]').waitFor({ timeout: remaining() });
    const banner = await term.locator('#banner').textContent();
    await term.screenshot({ path: path.join(shots, 'terminal-died.png') });
    // The gateway rebuilds the sandbox on its workspace: the page opens a new shell there and says so.
    await term.locator('#banner[data-kind="rebuilt"]').waitFor({ timeout: remaining() });
    await term.waitForFunction(() => window.sandgateTerminal && window.sandgateTerminal.connected, null, { timeout: remaining() });
    const rebuilt = await term.locator('#banner').textContent();
    await term.screenshot({ path: path.join(shots, 'terminal-rebuilt.png') });
    return { banner, rebuilt };
  },

  async desktop(context, page) {
    const id = process.env.SANDBOX;
    // One file of noVNC's module graph is lost on the first load (a network change does that): the page reloads
    // itself instead of staying on "Connecting…".
    let rfbLoads = 0;
    await context.route('**/vendor/novnc/core/rfb.js', (route) => rfbLoads++ === 0 ? route.abort('internetdisconnected') : route.continue());
    await login(page);
    const desk = await openFromConsole(context, page, id, 'Desktop');
    await waitDesktop(desk);
    check(rfbLoads >= 2, 'noVNC was loaded ' + rfbLoads + ' times');
    const canvas = desk.locator('#screen canvas');
    const lit = await litPixels(desk);
    const box = await canvas.boundingBox();
    const vp = desk.viewportSize();
    check(box.width <= vp.width + 1 && box.height <= vp.height + 1, 'the canvas is not scaled to the window');
    await desk.screenshot({ path: path.join(shots, 'desktop.png') });
    // A read ticket streams the desktop view-only (the agent drops the viewer's input).
    const view = await openFromConsole(context, page, id, 'View');
    await waitDesktop(view);
    const viewOnly = await view.evaluate(() => window.sandgateDesktop.viewOnly);
    const mode = await view.locator('#mode').textContent();
    const viewLit = await litPixels(view);
    // Read after the pixels arrived: the stream is still up (the agent did not close it for a viewer message).
    const viewState = await view.evaluate(() => window.sandgateDesktop.connected ? 'connected' : (window.sandgateDesktop.stopped || 'reconnecting'));
    await view.screenshot({ path: path.join(shots, 'desktop-view.png') });
    return { lit, viewOnly, viewState, mode, view_lit: viewLit };
  },

  async expired(context, page) {
    const res = await page.goto(base + process.env.URL);
    const msg = await page.locator('#message').textContent();
    await page.screenshot({ path: path.join(shots, 'expired.png') });
    return { status: res.status(), message: msg };
  },

  async remove(context, page) {
    const id = process.env.SANDBOX;
    await login(page);
    page.once('dialog', (d) => d.accept());
    await page.locator(`tr[data-id="${id}"]`).getByRole('button', { name: 'Delete', exact: true }).click();
    await page.locator(`tr[data-id="${id}"]`).waitFor({ state: 'detached', timeout: remaining() });
    return { gone: true };
  },
};

(async () => {
  const browser = await launch();
  const violations = [];
  try {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1000, height: 600 } });
    context.setDefaultTimeout(remaining());
    context.on('page', (p) => p.on('console', (m) => {
      if (/Content Security Policy|Refused to/.test(m.text())) violations.push(m.text());
    }));
    const page = await context.newPage();
    page.on('console', (m) => { if (/Content Security Policy|Refused to/.test(m.text())) violations.push(m.text()); });
    let out;
    try {
      out = await steps[step](context, page);
    } catch (e) {
      // Say what every open page showed: the failure is usually visible there.
      for (const p of context.pages()) {
        const text = await p.locator('body').innerText().catch(() => '');
        console.error('PAGE ' + p.url() + '\n' + text.slice(0, 2000));
        await p.screenshot({ path: path.join(shots, 'failed-' + step + '-' + context.pages().indexOf(p) + '.png') }).catch(() => {});
      }
      throw e;
    }
    out.csp_violations = [...new Set(violations)];
    console.log('RESULT ' + JSON.stringify(out));
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error('FAILED ' + (e && e.stack || e)); process.exit(1); });
