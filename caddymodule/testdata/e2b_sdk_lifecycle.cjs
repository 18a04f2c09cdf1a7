// Drives the unmodified npm `e2b` SDK against a gateway on Caddyfile.example through what a sandbox's lifecycle
// does at its timeout and beyond: lifecycle.onTimeout 'pause' (frozen at the timeout, a background process alive
// after connect), with and without autoResume (traffic resumes it only with), and keepMemory false (stopped at
// the timeout, files kept, processes not); the logs routes (the container's output, both versions' shapes); and
// updateNetwork. Owner B's key (OTHER_KEY) is tried on each of A's new routes. Prints one JSON line.
const { Sandbox, SandboxNotFoundError } = require('e2b')

const report = {}
const other = { apiKey: process.env.OTHER_KEY }
const api = process.env.E2B_API_URL

async function classOf(p) {
  try {
    await p
    return 'ok'
  } catch (e) {
    return `${e.constructor.name}: ${e.message}`
  }
}

// until polls getInfo until the sandbox reads state (the timeout acts in the gateway, not in this script).
async function until(id, state) {
  const deadline = Date.now() + 90_000
  for (;;) {
    const info = await Sandbox.getInfo(id)
    if (info.state === state) return info
    if (Date.now() > deadline) throw new Error(`sandbox ${id} never became ${state} (still ${info.state})`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function logs(path, key) {
  const res = await fetch(`${api}${path}`, { headers: { 'X-API-Key': key || process.env.E2B_API_KEY } })
  return { status: res.status, body: await res.json() }
}

async function main() {
  const run = Math.random().toString(16).slice(2)
  const made = []
  const create = async (lifecycle) => {
    const s = await Sandbox.create('base', { metadata: { run }, timeoutMs: 600_000, lifecycle })
    made.push(s)
    return s
  }
  try {
    const [frozen, resumable, fsOnly] = await Promise.all([
      create({ onTimeout: 'pause', autoResume: false }),
      create({ onTimeout: 'pause', autoResume: true }),
      create({ onTimeout: { action: 'pause', keepMemory: false } }),
    ])
    const info = await frozen.getInfo()
    report.lifecycle = info.lifecycle
    report.resumableLifecycle = (await resumable.getInfo()).lifecycle
    // timeoutMs 0: the SDK's default command timeout (60 s) would end the process itself, and on a busy machine
    // this script reaches its checks more than 60 s after starting it.
    const bg = await frozen.commands.run('sleep 600', { background: true, timeoutMs: 0 })
    report.bgPid = bg.pid
    await fsOnly.files.write('/home/user/kept.txt', 'kept')
    const fsBg = await fsOnly.commands.run('sleep 600', { background: true, timeoutMs: 0 })

    // The timeout: each one is paused (or stopped) at its TTL, not deleted.
    await Promise.all([frozen, resumable, fsOnly].map((s) => s.setTimeout(3_000)))
    await Promise.all([frozen, resumable, fsOnly].map((s) => until(s.sandboxId, 'paused')))
    report.pausedAtTimeout = true
    report.listedPaused = (await Sandbox.list({ query: { metadata: { run }, state: ['paused'] } }).nextItems()).length
    // Without autoResume, traffic does not wake it: only connect does.
    report.trafficWhilePaused = await classOf(frozen.commands.run('true'))
    report.stillPaused = (await Sandbox.getInfo(frozen.sandboxId)).state
    // Owner B cannot resume, read or re-network A's sandbox.
    report.bConnects = await classOf(Sandbox.connect(frozen.sandboxId, other))
    report.bUpdatesNetwork = await classOf(Sandbox.updateNetwork(frozen.sandboxId, { allowInternetAccess: false }, other))
    report.bLogs = (await logs(`/v2/sandboxes/${frozen.sandboxId}/logs`, process.env.OTHER_KEY)).status
    report.bLogsV1 = (await logs(`/sandboxes/${frozen.sandboxId}/logs`, process.env.OTHER_KEY)).status

    const back = await Sandbox.connect(frozen.sandboxId, { timeoutMs: 300_000 })
    const after = await back.getInfo()
    report.resumed = { state: after.state, lifetimeS: Math.round((after.endAt - Date.now()) / 1000) }
    report.bgAlive = (await back.commands.list()).some((p) => p.pid === bg.pid)

    // With autoResume, the first command wakes it.
    // (It lives its 3 s TTL again, then pauses again: only the command is checked.)
    report.autoResumed = (await resumable.commands.run('echo awake')).stdout.trim()

    // keepMemory false: a stop; files stay, processes do not, and traffic does not wake it.
    report.fsOnlyTraffic = await classOf(fsOnly.commands.run('true'))
    const fsBack = await Sandbox.connect(fsOnly.sandboxId, { timeoutMs: 300_000 })
    report.fsOnlyFile = await fsBack.files.read('/home/user/kept.txt')
    report.fsOnlyBgAlive = (await fsBack.commands.list()).some((p) => p.pid === fsBg.pid)

    // Logs: the container's output (the agent's own log lines are structured JSON).
    const v2 = await logs(`/v2/sandboxes/${frozen.sandboxId}/logs?limit=1000`)
    report.logsV2 = { status: v2.status, n: v2.body.logs.length,
      agent: v2.body.logs.some((l) => l.message === 'agent listening' && l.level === 'info' && l.fields.stream === 'stderr' && !isNaN(Date.parse(l.timestamp))) }
    const v1 = await logs(`/sandboxes/${frozen.sandboxId}/logs?limit=2`)
    report.logsV1 = { status: v1.status, lines: v1.body.logs.length, entries: v1.body.logEntries.length,
      line: typeof v1.body.logs[0]?.line === 'string' }
    const onlyErrors = await logs(`/v2/sandboxes/${frozen.sandboxId}/logs?level=error`)
    report.logsErrorsOnly = onlyErrors.body.logs.every((l) => l.level === 'error')
    const back1 = await logs(`/v2/sandboxes/${frozen.sandboxId}/logs?direction=backward&limit=1&cursor=${Date.now()}`)
    report.logsBackward = back1.body.logs.length
    report.logsBadQuery = (await logs(`/v2/sandboxes/${frozen.sandboxId}/logs?direction=sideways`)).status

    // updateNetwork: what the template's profile enforces (it reaches nothing: cutting internet is recorded), and
    // what it cannot (denying a name needs the egress proxy) refused with the reason.
    await back.updateNetwork({ allowInternetAccess: false })
    report.afterNetwork = (await back.getInfo()).allowInternetAccess
    report.networkDenyName = await classOf(back.updateNetwork({ denyOut: ['evil.example.com'] }))
    report.networkRules = await classOf(back.updateNetwork({ allowOut: ['x.example.com'], rules: { 'x.example.com': [{ transform: { headers: { a: 'b' } } }] } }))
    report.afterRefusal = (await back.getInfo()).allowInternetAccess
    await back.updateNetwork({})
    report.afterClear = (await back.getInfo()).allowInternetAccess
  } finally {
    for (const s of made) await Sandbox.kill(s.sandboxId).catch(() => {})
  }
  report.goneLogs = (await logs(`/v2/sandboxes/${made[0].sandboxId}/logs`)).status
  report.notFoundClass = (await Sandbox.connect(made[0].sandboxId).catch((e) => e)) instanceof SandboxNotFoundError
}

main().then(
  () => console.log(JSON.stringify(report)),
  (e) => {
    report.fatal = `${e.constructor.name}: ${e.stack || e.message}`
    console.log(JSON.stringify(report))
  },
)
