// Create-to-first-result through the unmodified @e2b/code-interpreter SDK: Sandbox.create(TEMPLATE), then
// runCode('1 + 1') until its result, each sample right after its baselines, `docker run --rm --entrypoint true` and
// `docker run --rm --entrypoint python3 <image> -c 'print(1 + 1)'` of the same image, so all see the same load. One
// untimed sample first: a process's first SDK call pays the SDK's own start-up, which is not the gateway's.
// Env: E2B_API_URL, E2B_DOMAIN, E2B_API_KEY (as an E2B user sets them), TEMPLATE, IMAGE, SAMPLES, PAUSE_MS (after
// each sample: lets a warm pool refill). Prints one JSON object {sdk: [ms...], base: [ms...], basePy: [ms...]}.
const { spawnSync } = require('child_process')
const { Sandbox } = require('@e2b/code-interpreter')

const image = process.env.IMAGE
const pause = () => new Promise((r) => setTimeout(r, Number(process.env.PAUSE_MS || 0)))

async function sample() {
  const start = performance.now()
  const sbx = await Sandbox.create(process.env.TEMPLATE, { timeoutMs: 600_000 })
  const ex = await sbx.runCode('1 + 1')
  if (ex.text !== '2') throw new Error('first result: ' + JSON.stringify(ex.toJSON()))
  const ms = performance.now() - start
  await sbx.kill()
  await pause()
  return ms
}

function dockerRun(args) {
  const start = performance.now()
  const r = spawnSync('docker', ['run', '--rm', ...args], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error('docker run: ' + (r.error || r.stderr))
  return performance.now() - start
}

(async () => {
  await sample()
  const out = { sdk: [], base: [], basePy: [] }
  for (let i = 0; i < Number(process.env.SAMPLES || 5); i++) {
    out.base.push(dockerRun(['--entrypoint', 'true', image]))
    out.basePy.push(dockerRun(['--entrypoint', 'python3', image, '-c', 'print(1 + 1)']))
    out.sdk.push(await sample())
  }
  console.log(JSON.stringify(out))
})().catch((e) => { console.error(e); process.exit(1) })
