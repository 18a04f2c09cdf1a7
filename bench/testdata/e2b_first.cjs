// Create-to-first-command (MODE=command, the unmodified `e2b` SDK: Sandbox.create(TEMPLATE), then
// commands.run('true')) or create-to-first-result (MODE=code, the unmodified `@e2b/code-interpreter` SDK:
// Sandbox.create(TEMPLATE), then runCode('1 + 1') until its result). Each sample runs right after its baselines,
// `docker run --rm --entrypoint true <image>` and, in code mode, `docker run --rm --entrypoint python3 <image> -c
// 'print(1 + 1)'`, so all see the same load. One untimed sample first: a process's first SDK call pays the SDK's own
// start-up, which is not the gateway's.
// Env: E2B_API_URL, E2B_DOMAIN, E2B_API_KEY (as an E2B user sets them), MODE, TEMPLATE, IMAGE, SAMPLES, PAUSE_MS
// (after each sample: lets a warm pool refill). Prints one JSON object {sdk: [ms...], base: [ms...], basePy: [ms...]}
// (basePy empty in command mode).
const { spawnSync } = require('child_process')

const mode = process.env.MODE
if (mode !== 'command' && mode !== 'code') throw new Error('MODE must be command or code, not ' + JSON.stringify(mode))
const { Sandbox } = require(mode === 'code' ? '@e2b/code-interpreter' : 'e2b')

const image = process.env.IMAGE
const pause = () => new Promise((r) => setTimeout(r, Number(process.env.PAUSE_MS || 0)))

// first does the mode's first piece of work in a new sandbox and checks its answer.
async function first(sbx) {
  if (mode === 'code') {
    const ex = await sbx.runCode('1 + 1')
    if (ex.text !== '2') throw new Error('first result: ' + JSON.stringify(ex.toJSON()))
    return
  }
  const r = await sbx.commands.run('true')
  if (r.exitCode !== 0) throw new Error('first command exited ' + r.exitCode)
}

async function sample() {
  const start = performance.now()
  const sbx = await Sandbox.create(process.env.TEMPLATE, { timeoutMs: 600_000 })
  await first(sbx)
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
    if (mode === 'code') out.basePy.push(dockerRun(['--entrypoint', 'python3', image, '-c', 'print(1 + 1)']))
    out.sdk.push(await sample())
  }
  console.log(JSON.stringify(out))
})().catch((e) => { console.error(e); process.exit(1) })
