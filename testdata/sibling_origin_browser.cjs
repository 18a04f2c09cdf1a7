// Drives Chromium for sibling_origin_browser_test.go: the victim's browser holds a session cookie for a route on
// the gateway (gw.sb.localhost); a page on an app subdomain of the same site (9000-{id}.sb.localhost) tries to open
// that route's WebSocket with it. Prints RESULT {"own": ..., "sibling": ...}: what a WebSocket opened from the
// gateway's own origin and from the sibling page got ("open:<echo>", "blocked" or "timeout").
const { launch } = require('./chromium.cjs');

const env = process.env;

async function tryWebSocket(page, url) {
  return page.evaluate((u) => new Promise((resolve) => {
    const ws = new WebSocket(u);
    const bound = setTimeout(() => resolve('timeout'), 15000);
    ws.onopen = () => ws.send('ping');
    ws.onmessage = (e) => { clearTimeout(bound); resolve('open:' + e.data); ws.close(); };
    ws.onerror = () => { clearTimeout(bound); resolve('blocked'); };
  }), url);
}

(async () => {
  const browser = await launch();
  try {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    // The victim opens their route with a ticket: the gateway sets the session cookie.
    const first = await page.goto(env.VICTIM_URL);
    const cookies = await context.cookies();
    // The gateway's own (unsandboxed) page opens the route's WebSocket on the cookie: allowed.
    await page.goto(env.GW + '/');
    const own = await tryWebSocket(page, env.WS_URL);
    // The attacker's page on a sibling app subdomain tries the same with the victim's cookie.
    await page.goto(env.ATTACK_URL);
    const sibling = await tryWebSocket(page, env.WS_URL);
    console.log('RESULT ' + JSON.stringify({ victimStatus: first.status(), cookies: cookies.map((c) => c.name + ' ' + c.path + ' ' + c.sameSite), own, sibling }));
  } finally {
    await browser.close();
  }
})().catch((err) => { console.error(err); process.exit(1); });
