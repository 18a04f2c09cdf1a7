// Drives the unmodified npm `e2b` SDK against a gateway on Caddyfile.example: the control plane (create with
// metadata, envs and a timeout; getInfo; list by metadata; setTimeout; pause and connect; kill) and what the edge
// refuses before anything reaches a sandbox (envd without its token, another sandbox's token, a private port
// without the traffic token, a forged file signature). E2B_API_URL, E2B_DOMAIN and E2B_API_KEY (owner A) come
// from the environment as an E2B user sets them; OTHER_KEY is owner B's. Prints one JSON line.
const { Sandbox, AuthenticationError, SandboxNotFoundError } = require('e2b')

const report = {}
const other = { apiKey: process.env.OTHER_KEY }

async function status(url, headers) {
  const res = await fetch(url, { headers: headers || {} })
  await res.arrayBuffer()
  return res.status
}

async function classOf(p) {
  try {
    await p
    return 'ok'
  } catch (e) {
    return `${e.constructor.name}: ${e.message}`
  }
}

async function main() {
  const run = Math.random().toString(16).slice(2)
  const sbx = await Sandbox.create('base', { metadata: { run, who: 'a b&c=d' }, envs: { FOO: 'bar' }, timeoutMs: 600_000 })
  report.id = sbx.sandboxId
  report.domain = sbx.sandboxDomain
  report.hasToken = typeof sbx.envdAccessToken === 'string' && sbx.envdAccessToken.length >= 32
  const info = await sbx.getInfo()
  report.envdVersion = info.envdVersion
  report.info = { state: info.state, templateId: info.templateId, metadata: info.metadata,
    lifetimeS: Math.round((info.endAt - info.startedAt) / 1000) }

  const listed = await Sandbox.list({ query: { metadata: { run, who: 'a b&c=d' } } }).nextItems()
  report.listed = listed.map((s) => s.sandboxId)
  report.listedWrong = (await Sandbox.list({ query: { metadata: { run: run + 'x' } } }).nextItems()).length

  await sbx.setTimeout(120_000)
  const after = await sbx.getInfo()
  report.afterSetTimeoutS = Math.round((after.endAt - Date.now()) / 1000)

  report.paused = await sbx.pause()
  report.pausedState = (await sbx.getInfo()).state
  report.pausedAgain = await Sandbox.pause(sbx.sandboxId)
  await sbx.connect({ timeoutMs: 300_000 })
  report.resumedState = (await sbx.getInfo()).state

  const metrics = await sbx.getMetrics()
  report.metrics = metrics.map((m) => ({ memTotal: m.memTotal, cpuCount: m.cpuCount, at: m.timestamp instanceof Date }))

  // Snapshots and fork, onto sandgate's: a snapshot's id is a template a create can name.
  const snap = await sbx.createSnapshot({ name: `snap-${run}` })
  report.snapshotListed = (await sbx.listSnapshots().nextItems()).map((s) => s.snapshotId).includes(snap.snapshotId)
  const fromSnap = await Sandbox.create(snap.snapshotId, { metadata: { run: run + 'snap' } })
  report.fromSnapshot = (await fromSnap.getInfo()).templateId === snap.snapshotId
  await fromSnap.kill()
  report.snapshotDeleted = await Sandbox.deleteSnapshot(snap.snapshotId)
  report.snapshotDeletedAgain = await Sandbox.deleteSnapshot(snap.snapshotId)
  const forks = await sbx.fork()
  const fork = forks[0]
  report.fork = fork instanceof Error ? `${fork.constructor.name}: ${fork.message}` : fork.sandboxId
  if (!(fork instanceof Error)) {
    const fi = await fork.getInfo()
    report.forkInfo = { templateId: fi.templateId, run: fi.metadata.run, private: !!fork.trafficAccessToken }
    await fork.kill()
  }

  // The edge: envd needs the sandbox's own token, before anything is forwarded.
  const host = `https://${sbx.getHost(49983)}`
  report.envdNoToken = await status(`${host}/files?path=/etc/hostname`)
  report.envdBadToken = await status(`${host}/files?path=/etc/hostname`, { 'X-Access-Token': 'x'.repeat(32) })
  // E2B's header routing on the domain itself (E2B_SANDBOX_URL): the same refusal.
  report.headerRoutedNoToken = await status(`https://${process.env.E2B_DOMAIN}/files?path=/etc/hostname`,
    { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' })
  const signed = await sbx.downloadUrl('/etc/hostname')
  report.signedURLRefused = (await status(signed)) === 401
  report.forgedSignature = await status(signed.replace(/signature=v1_[^&]+/, 'signature=v1_AAAA'))

  // Owner B: A's key cannot see, extend or kill B's sandbox; A's envd token does not open B's envd; B's private
  // ports need B's traffic token.
  const b = await Sandbox.create('base', { ...other, metadata: { run }, network: { allowPublicTraffic: false } })
  report.bHasTrafficToken = typeof b.trafficAccessToken === 'string' && b.trafficAccessToken.length >= 32
  report.aGetsB = await classOf(Sandbox.getInfo(b.sandboxId))
  report.aSetsTimeoutOfB = await classOf(Sandbox.setTimeout(b.sandboxId, 60_000))
  report.aKillsB = await Sandbox.kill(b.sandboxId)
  report.aListsB = (await Sandbox.list({ query: { metadata: { run } } }).nextItems()).map((s) => s.sandboxId).includes(b.sandboxId)
  report.aTokenOnB = await status(`https://${b.getHost(49983)}/files?path=/etc/hostname`, { 'X-Access-Token': sbx.envdAccessToken })
  report.bPortNoToken = await status(`https://${b.getHost(8000)}/`)
  report.bPortAToken = await status(`https://${b.getHost(8000)}/`, { 'e2b-traffic-access-token': sbx.envdAccessToken })
  report.bCodeNoToken = await status(`https://${b.getHost(49999)}/contexts`)
  report.bStillThere = (await Sandbox.getInfo(b.sandboxId, other)).state
  report.bKilled = await Sandbox.kill(b.sandboxId, other)

  // Bad input.
  report.wrongKey = await classOf(Sandbox.create('base', { apiKey: 'not-a-key' }))
  report.wrongKeyIsAuth = (await Sandbox.create('base', { apiKey: 'not-a-key' }).catch((e) => e)) instanceof AuthenticationError
  report.unknownTemplate = await classOf(Sandbox.create('no-such-template'))

  report.killed = await sbx.kill()
  report.killedAgain = await Sandbox.kill(sbx.sandboxId)
  report.goneInfo = (await Sandbox.getInfo(sbx.sandboxId).catch((e) => e)) instanceof SandboxNotFoundError
  report.goneEnvd = await status(`${host}/health`)
}

main().then(
  () => console.log(JSON.stringify(report)),
  (e) => {
    report.fatal = `${e.constructor.name}: ${e.stack || e.message}`
    console.log(JSON.stringify(report))
  },
)
