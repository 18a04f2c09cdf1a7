// Create-to-first-command through OpenSandbox's SDK: Sandbox.create (with the SDK's own readiness check, execd's
// /ping through the gateway's proxy), then commands.run('true'). Env: OSB_DOMAIN, OSB_KEY, OSB_IMAGE, PROFILE,
// SAMPLES. Prints one JSON array of milliseconds.
const { Sandbox, ConnectionConfig } = require('@alibaba-group/opensandbox');

(async () => {
  const out = [];
  for (let i = 0; i < Number(process.env.SAMPLES || 5); i++) {
    const connectionConfig = new ConnectionConfig({ domain: process.env.OSB_DOMAIN, apiKey: process.env.OSB_KEY, disableMetrics: true });
    const start = performance.now();
    const sbx = await Sandbox.create({
      connectionConfig, image: process.env.OSB_IMAGE, entrypoint: ['tail', '-f', '/dev/null'], timeoutSeconds: 600,
      extensions: { 'sandgate.profile': process.env.PROFILE }, readyTimeoutSeconds: 240, healthCheckPollingInterval: 20,
    });
    const ex = await sbx.commands.run('true');
    if (ex.exitCode !== 0) throw new Error('first command exited ' + ex.exitCode);
    out.push(performance.now() - start);
    await sbx.kill();
    await sbx.close();
    // Let the warm pool refill before the next claim.
    await new Promise((r) => setTimeout(r, Number(process.env.PAUSE_MS || 0)));
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
