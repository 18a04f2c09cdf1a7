// Create-to-first-command through OpenSandbox's SDK: Sandbox.create (with the SDK's own readiness check, execd's
// /ping through the gateway's proxy), then commands.run('true'), each sample right after its baseline, `docker run
// --rm --entrypoint true` of the same image, so both see the same load. One untimed sample first: a process's first
// SDK call pays the SDK's own start-up (its HTTP client, code not yet compiled), which is not the gateway's.
// Env: OSB_DOMAIN, OSB_KEY, OSB_IMAGE, PROFILE, SAMPLES, PAUSE_MS (after each sample: lets a warm pool refill),
// ENTRYPOINT (a JSON array; default tail -f /dev/null, which keeps a pool claim possible), CREATE_ENV (a JSON object:
// the create's env, as FastGPT sends its session's).
// Prints one JSON object {sdk: [ms...], base: [ms...]}.
const { spawnSync } = require('child_process');
const { Sandbox, ConnectionConfig } = require('@alibaba-group/opensandbox');

const image = process.env.OSB_IMAGE;
const entrypoint = JSON.parse(process.env.ENTRYPOINT || '["tail","-f","/dev/null"]');
const env = JSON.parse(process.env.CREATE_ENV || '{}');
const pause = () => new Promise((r) => setTimeout(r, Number(process.env.PAUSE_MS || 0)));

async function sample() {
  const connectionConfig = new ConnectionConfig({ domain: process.env.OSB_DOMAIN, apiKey: process.env.OSB_KEY, disableMetrics: true });
  const start = performance.now();
  const sbx = await Sandbox.create({
    connectionConfig, image, entrypoint, env, timeoutSeconds: 600,
    extensions: { 'sandgate.profile': process.env.PROFILE }, readyTimeoutSeconds: 240, healthCheckPollingInterval: 20,
  });
  const ex = await sbx.commands.run('true');
  if (ex.exitCode !== 0) throw new Error('first command exited ' + ex.exitCode);
  const ms = performance.now() - start;
  await sbx.kill();
  await sbx.close();
  await pause();
  return ms;
}

function dockerRun() {
  const start = performance.now();
  const r = spawnSync('docker', ['run', '--rm', '--entrypoint', 'true', image], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error('docker run: ' + (r.error || r.stderr));
  return performance.now() - start;
}

(async () => {
  await sample();
  const out = { sdk: [], base: [] };
  for (let i = 0; i < Number(process.env.SAMPLES || 5); i++) {
    out.base.push(dockerRun());
    out.sdk.push(await sample());
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
