// Opens URL in Chromium launched by testdata/chromium.cjs and prints "RESULT <json>": the page's text, or the error
// that failed the navigation. The server behind URL changes the machine's network while the request is in flight.
const { launch } = require('../../../../testdata/chromium.cjs');

(async () => {
  const browser = await launch();
  const out = {};
  try {
    const page = await (await browser.newContext({ ignoreHTTPSErrors: true })).newPage();
    try {
      const res = await page.goto(process.env.URL, { timeout: 120000 });
      out.text = await res.text();
    } catch (e) {
      out.error = String(e).split('\n')[0];
    }
  } finally {
    await browser.close();
  }
  console.log('RESULT ' + JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
