// Drives sandgate's OpenSandbox dialect with OpenSandbox's own SDK (@alibaba-group/opensandbox), the way FastGPT's
// opensandbox provider does, and prints one JSON report for opensandbox_integration_test.go.
// Env: OSB_DOMAIN (http://127.0.0.1:port), OSB_KEY, OSB_OTHER_KEY, OSB_IMAGE, BAY_URL (the REST API, same keys).
const assert = require('node:assert/strict');
const { Sandbox, SandboxManager, ConnectionConfig } = require('@alibaba-group/opensandbox');

const domain = process.env.OSB_DOMAIN;
const image = process.env.OSB_IMAGE;
const conn = (apiKey) => new ConnectionConfig({ domain, apiKey, useServerProxy: true, requestTimeoutSeconds: 120, disableMetrics: true });
const report = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const code = (e) => (e && e.error && e.error.code) || String(e);

// FastGPT polls the lifecycle every second until Running (execd's ping is the SDK's default check).
async function waitState(sbx, want, limitMs = 240000) {
  const seen = [];
  const end = Date.now() + limitMs;
  for (;;) {
    const st = (await sbx.getInfo()).status.state;
    if (seen[seen.length - 1] !== st) seen.push(st);
    if (st === want) return seen;
    if (Date.now() > end) throw new Error(`state ${want} not reached: ${seen.join(' -> ')}`);
    await sleep(250);
  }
}

const WS = '/workspace';
const HOME = '/home/sandbox';

async function failure(promise) {
  try { await promise; } catch (e) { return { code: e && e.error && e.error.code, status: e && e.statusCode }; }
  return { code: 'no error' };
}

async function execdThroughGateway(report) {
  const sbx = await Sandbox.create({
    connectionConfig: conn(process.env.OSB_KEY), image, entrypoint: ['tail', '-f', '/dev/null'], timeoutSeconds: 600,
    readyTimeoutSeconds: 240,
  });
  const out = { id: sbx.id };
  try {
    // commands.run: stdout, stderr, exit code, cwd, env; a timeout ends the command.
    await sbx.files.createDirectories([{ path: WS + '/sub', mode: 755 }]);
    let ex = await sbx.commands.run('echo "$GREETING from $(pwd)"; echo warn >&2; exit 5', {
      workingDirectory: WS + '/sub', envs: { GREETING: 'hello' }, timeoutSeconds: 60,
    });
    assert.deepEqual(ex.logs.stdout.map((m) => m.text), ['hello from ' + WS + '/sub']);
    assert.deepEqual(ex.logs.stderr.map((m) => m.text), ['warn']);
    assert.equal(ex.exitCode, 5);
    ex = await sbx.commands.run('echo before; sleep 60', { timeoutSeconds: 1 });
    assert.deepEqual(ex.logs.stdout.map((m) => m.text), ['before']);
    out.timeoutExit = ex.exitCode;
    const types = [];
    for await (const ev of sbx.commands.runStream('echo streamed; echo err >&2')) {
      if (ev.type !== 'ping') types.push(ev.type + (ev.text && ev.type !== 'init' ? ':' + ev.text : ''));
    }
    out.stream = types;

    // Files as FastGPT writes them (package mirrors into HOME) and every file and directory call the SDK has.
    await sbx.files.writeFiles([
      { path: HOME + '/.npmrc', data: 'registry=http://mirror/\n' },
      { path: WS + '/src/a.txt', data: 'l1\nl2\nl3', mode: 600 },
      { path: WS + '/src/deep/b.md', data: '# b' },
    ]);
    assert.equal(await sbx.files.readFile(HOME + '/.npmrc'), 'registry=http://mirror/\n');
    assert.equal(await sbx.files.readFile(WS + '/src/a.txt', { offset: 2, limit: 1 }), 'l2');
    const info = await sbx.files.getFileInfo([WS + '/src/a.txt']);
    assert.equal(info[WS + '/src/a.txt'].type, 'file');
    assert.equal(info[WS + '/src/a.txt'].mode, 600);
    out.missing = await failure(sbx.files.getFileInfo([WS + '/nope']));
    out.missingRead = await failure(sbx.files.readFile(WS + '/nope'));
    out.outside = await failure(sbx.files.readFile('/etc/passwd'));
    const found = await sbx.files.search({ path: WS + '/src', pattern: '*.md' });
    assert.deepEqual(found.map((f) => f.path), [WS + '/src/deep/b.md']);
    await sbx.files.moveFiles([{ src: WS + '/src/deep/b.md', dest: WS + '/moved/b.md' }]);
    const replaced = await sbx.files.replaceContentsDetailed([{ path: WS + '/moved/b.md', oldContent: 'b', newContent: 'c' }]);
    assert.deepEqual(replaced, [{ path: WS + '/moved/b.md', replacedCount: 1 }]);
    assert.equal(await sbx.files.readFile(WS + '/moved/b.md'), '# c');
    await sbx.files.setPermissions([{ path: WS + '/moved/b.md', mode: 640 }]);
    assert.equal((await sbx.files.getFileInfo([WS + '/moved/b.md']))[WS + '/moved/b.md'].mode, 640);
    await sbx.files.deleteFiles([WS + '/moved/b.md']);
    out.deleted = await failure(sbx.files.getFileInfo([WS + '/moved/b.md']));
    await sbx.files.createDirectories([{ path: WS + '/d1/d2', mode: 700 }]);
    const names = (await sbx.files.listDirectory({ path: WS, depth: 2 })).map((f) => f.path);
    assert.ok(names.includes(WS + '/d1/d2') && names.includes(WS + '/src/a.txt'), names.join(','));
    await sbx.files.deleteDirectories([WS + '/d1']);
    assert.ok(!(await sbx.files.listDirectory({ path: WS, depth: 1 })).some((f) => f.path === WS + '/d1'));
    const m = await sbx.getMetrics();
    assert.ok(m.cpuCount > 0 && m.memoryTotalMiB > 0, JSON.stringify(m));
    out.ok = true;
  } finally {
    report.execd = out;
    await sbx.kill();
    await sbx.close();
  }
}

(async () => {
  // FastGPT's create body (runtimeProfile/opensandbox.ts, Docker mode) with our image.
  const sbx = await Sandbox.create({
    connectionConfig: conn(process.env.OSB_KEY),
    image,
    entrypoint: ['/home/sandbox/entrypoint.sh'],
    timeoutSeconds: 3600,
    resource: { cpu: '1', memory: '512Mi' },
    env: { FASTGPT_SESSION_ID: 'sess-1', IDE_AGENT_ENABLED: 'true' },
    metadata: { sessionId: 'sess-1' },
    networkPolicy: {
      defaultAction: 'allow',
      egress: [
        { action: 'deny', target: 'localhost' },
        { action: 'deny', target: 'host.docker.internal' },
        { action: 'deny', target: 'host.orb.internal' },
        { action: 'deny', target: 'docker.orb.internal' },
        { action: 'deny', target: 'gateway.orb.internal' },
        { action: 'deny', target: 'proxyproxy.orb.internal' },
        { action: 'deny', target: '*.orb.internal' },
        { action: 'deny', target: '*.orb.local' },
      ],
    },
    skipHealthCheck: true,
  });
  report.id = sbx.id;
  report.createStates = await waitState(sbx, 'Running');
  const info = await sbx.getInfo();
  report.info = { image: info.image && info.image.uri, entrypoint: info.entrypoint, metadata: info.metadata, expiresAt: info.expiresAt };

  // FastGPT's lookup: list by metadata sessionId, pageSize 100.
  const mgr = SandboxManager.create({ connectionConfig: conn(process.env.OSB_KEY) });
  const found = await mgr.listSandboxInfos({ metadata: { sessionId: 'sess-1' }, pageSize: 100 });
  report.listed = found.items.map((x) => x.id);
  report.listedOther = (await mgr.listSandboxInfos({ metadata: { sessionId: 'nope' } })).items.length;
  const patched = await sbx.patchMetadata({ team: 'a', sessionId: 'sess-1' });
  report.patched = patched.metadata;

  // Endpoints go through the gateway with the sandbox's proxy key; a server inside the sandbox answers there.
  report.endpoint1318 = await sbx.getEndpointUrl(1318);
  const bay = process.env.BAY_URL;
  const ex = await fetch(`${bay}/v1/sandboxes/${sbx.id}/shell/exec`, {
    method: 'POST', headers: { Authorization: `Bearer ${process.env.OSB_KEY}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ command: 'mkdir -p /tmp/www && echo hello-from-sandbox > /tmp/www/index.html && (nohup python3 -m http.server 8000 -d /tmp/www >/dev/null 2>&1 &)' }),
  });
  report.execStatus = ex.status;
  const url8000 = await sbx.getEndpointUrl(8000);
  // python's server takes its time on a loaded machine: wait for it, bounded.
  for (const end = Date.now() + 240000; Date.now() < end;) {
    const r = await fetch(url8000 + '/index.html');
    report.app = { status: r.status, body: (await r.text()).trim() };
    if (r.status === 200) break;
    await sleep(250);
  }
  // Without the key in the URL the proxy wants the owner's API key; another owner's is a not-found.
  const bare = url8000.replace(/\/sandboxes\/([^./]+)\.[0-9a-f]+\//, '/sandboxes/$1/');
  report.bareNoKey = (await fetch(bare + '/index.html')).status;
  report.bareOwnerKey = (await fetch(bare + '/index.html', { headers: { 'OPEN-SANDBOX-API-KEY': process.env.OSB_KEY } })).status;
  report.bareOtherKey = (await fetch(bare + '/index.html', { headers: { 'OPEN-SANDBOX-API-KEY': process.env.OSB_OTHER_KEY } })).status;

  // Another owner sees nothing of it.
  const other = SandboxManager.create({ connectionConfig: conn(process.env.OSB_OTHER_KEY) });
  report.otherListed = (await other.listSandboxInfos({ metadata: { sessionId: 'sess-1' } })).items.length;
  try { await other.getSandboxInfo(sbx.id); report.otherGet = 'visible'; } catch (e) { report.otherGet = code(e); }
  try { await other.killSandbox(sbx.id); report.otherKill = 'killed'; } catch (e) { report.otherKill = code(e); }

  // Renew, pause, resume (and resume of a running sandbox, which FastGPT treats as "connect instead").
  const before = (await sbx.getInfo()).expiresAt;
  const renewed = await sbx.renew(7200);
  report.renewed = { before: before && before.toISOString(), after: renewed.expiresAt && renewed.expiresAt.toISOString() };
  await sbx.pause();
  report.afterPause = (await sbx.getInfo()).status.state;
  const resumed = await sbx.resume({ skipHealthCheck: true });
  report.resumeStates = await waitState(resumed, 'Running');
  try { await mgr.resumeSandbox(sbx.id); report.resumeRunning = 'ok'; } catch (e) { report.resumeRunning = code(e); }

  // A wrong key.
  const bad = SandboxManager.create({ connectionConfig: conn('not-a-key') });
  try { await bad.listSandboxInfos({}); report.wrongKey = 'listed'; } catch (e) { report.wrongKey = code(e); }

  // execd through the gateway: the SDK's own readiness check (execd's /ping through the proxy), commands and files.
  await execdThroughGateway(report);

  // FastGPT's stop(): kill, then poll until not found.
  await sbx.kill();
  try { await sbx.getInfo(); report.afterKill = 'still there'; } catch (e) { report.afterKill = code(e); }
  await Promise.all([mgr.close(), other.close(), bad.close(), sbx.close(), resumed.close()]);
  console.log(JSON.stringify(report));
})().catch((e) => {
  console.log(JSON.stringify({ ...report, fatal: String(e && e.stack || e), code: code(e) }));
  process.exit(1);
});
