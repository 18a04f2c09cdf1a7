// Launches Debian's Chromium for the browser tests, the one way every script does: through
// internal/testing/chromiumns, which testenv.RunNode builds and names in SANDGATE_CHROMIUM. That command gives the
// browser a network namespace of its own, so the containers other tests start, whose interfaces come and go, never
// make it drop a request (net::ERR_NETWORK_CHANGED).
const { chromium } = require('playwright-core');

// launch starts headless Chromium with the tests' flags and any extra args.
function launch(args = []) {
  const executablePath = process.env.SANDGATE_CHROMIUM;
  if (!executablePath) throw new Error('SANDGATE_CHROMIUM is not set: run the browser scripts from their Go tests (testenv.RunNode)');
  return chromium.launch({
    executablePath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run',
      // Caddy offers HTTP/3; QUIC with the test's internal CA only adds fallbacks to debug. Test over TCP.
      '--disable-quic', ...args],
  });
}

module.exports = { launch };
