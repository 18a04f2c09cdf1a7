// FastGPT's create body through OpenSandbox's own SDK (@alibaba-group/opensandbox), once per image, as FastGPT's
// opensandbox provider sends it; prints one JSON report for opensandbox_fastgpt_integration_test.go.
// Env: OSB_DOMAIN (http://127.0.0.1:port), OSB_KEY, OSB_IMAGES (comma-separated image references, each optionally
// followed by |<profile>: the create then names that profile in extensions, as a gateway with several admitting
// profiles needs), OSB_SESSION_PREFIX (the session id's prefix; default sess-).
const { Sandbox, ConnectionConfig } = require('@alibaba-group/opensandbox');

const domain = process.env.OSB_DOMAIN;
const conn = () => new ConnectionConfig({ domain, apiKey: process.env.OSB_KEY, useServerProxy: true, requestTimeoutSeconds: 120, disableMetrics: true });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitState(sbx, want, limitMs = 240000) {
  const seen = [];
  const end = Date.now() + limitMs;
  for (;;) {
    const st = (await sbx.getInfo()).status.state;
    if (seen[seen.length - 1] !== st) seen.push(st);
    if (st === want) return seen;
    if (st === 'Failed' || Date.now() > end) throw new Error(`state ${want} not reached: ${seen.join(' -> ')}`);
    await sleep(250);
  }
}

// One image: FastGPT's body (runtimeProfile/opensandbox.ts, Docker mode), then what FastGPT does next.
async function fastgpt(spec, i) {
  const [image, profile] = spec.split('|');
  const session = (process.env.OSB_SESSION_PREFIX || 'sess-') + i;
  const sbx = await Sandbox.create({
    ...(profile ? { extensions: { 'sandgate.profile': profile } } : {}),
    connectionConfig: conn(),
    image,
    entrypoint: ['/home/sandbox/entrypoint.sh'],
    timeoutSeconds: 3600,
    resource: { cpu: '0.5', memory: '512Mi' },
    env: { FASTGPT_SESSION_ID: session, FASTGPT_WORKDIR: '/workspace', IDE_AGENT_ENABLED: 'true' },
    metadata: { sessionId: session },
    networkPolicy: {
      defaultAction: 'allow',
      egress: ['localhost', 'host.docker.internal', 'host.orb.internal', 'docker.orb.internal', 'gateway.orb.internal',
        'proxyproxy.orb.internal', '*.orb.internal', '*.orb.local'].map((target) => ({ action: 'deny', target })),
    },
    skipHealthCheck: true,
  });
  const out = { image, profile: profile || '', id: sbx.id };
  out.states = await waitState(sbx, 'Running');
  // The SDK's own readiness check (execd's ping through the gateway), then a command as FastGPT runs them.
  await sbx.waitUntilReady({ readyTimeoutSeconds: 240, pollingIntervalMillis: 250 });
  // The entrypoint may still be writing its files when the agent answers: wait for them, bounded; with
  // OSB_WAIT_ENTRYPOINT=1 (an image whose own entrypoint writes ~/.entrypoint-ran, after the password), for that one.
  const ready = process.env.OSB_WAIT_ENTRYPOINT === '1' ? 'test -s ~/.entrypoint-ran && ' : '';
  let ex;
  for (const end = Date.now() + 120000; ;) {
    ex = await sbx.commands.run(ready + 'test -s ~/.fastgpt-ide-agent-password && id -u && echo "$HOME" && echo "$FASTGPT_SESSION_ID" && cat ~/.fastgpt-ide-agent-password && echo && cat ~/.entrypoint-ran 2>/dev/null; true', { timeoutSeconds: 60 });
    if (ex.logs.stdout.length >= 4 || Date.now() > end) break;
    await sleep(250);
  }
  out.run = { exitCode: ex.exitCode, stdout: ex.logs.stdout.map((m) => m.text).join('\n') };
  const fail = await sbx.commands.run('echo oops >&2; exit 3', { timeoutSeconds: 60 });
  out.failExit = fail.exitCode;
  out.failStderr = fail.logs.stderr.map((m) => m.text).join('\n');
  // FastGPT's provider runs some commands with workingDirectory '/tmp': any directory the user can enter.
  const tmp = await sbx.commands.run('pwd', { timeoutSeconds: 60, workingDirectory: '/tmp' });
  out.tmpPwd = tmp.logs.stdout.map((m) => m.text).join('\n');
  out.endpoint1318 = await sbx.getEndpointUrl(1318);
  return out;
}

(async () => {
  const report = { images: [] };
  try {
    const images = process.env.OSB_IMAGES.split(',');
    for (let i = 0; i < images.length; i++) report.images.push(await fastgpt(images[i], i));
  } catch (e) {
    report.fatal = (e && e.stack) || String(e);
  }
  console.log(JSON.stringify(report));
})();
