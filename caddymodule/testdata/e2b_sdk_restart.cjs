// The autoPause half of a gateway crash, with the unmodified npm `e2b` SDK. MODE=before: a sandbox created with
// lifecycle.onTimeout 'pause' runs a background process and is paused by its timeout; prints its id and the pid.
// MODE=after (the gateway was killed with SIGKILL and started again; ID and PID from before): it still reads
// paused, connect resumes it with the process alive, and it is killed. Prints one JSON line.
const { Sandbox } = require('e2b')

const report = {}

async function until(id, state) {
  const deadline = Date.now() + 90_000
  for (;;) {
    const info = await Sandbox.getInfo(id)
    if (info.state === state) return info
    if (Date.now() > deadline) throw new Error(`sandbox ${id} never became ${state} (still ${info.state})`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function before() {
  const sbx = await Sandbox.create('base', { timeoutMs: 600_000, lifecycle: { onTimeout: 'pause' } })
  report.id = sbx.sandboxId
  // timeoutMs 0: no deadline (the SDK's default of 60 s would end the command a minute in, paused or not), and the
  // script lets go of it so that node can exit while it runs on.
  const bg = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 })
  report.pid = bg.pid
  await bg.disconnect()
  await sbx.files.write('/home/user/before.txt', 'written before the crash')
  await sbx.setTimeout(3_000)
  await until(sbx.sandboxId, 'paused')
  report.paused = true
}

async function after() {
  const id = process.env.ID
  const pid = Number(process.env.PID)
  report.stateAfterRestart = (await Sandbox.getInfo(id)).state
  const sbx = await Sandbox.connect(id, { timeoutMs: 300_000 })
  report.resumedState = (await sbx.getInfo()).state
  report.bgAlive = (await sbx.commands.list()).some((p) => p.pid === pid)
  report.file = await sbx.files.read('/home/user/before.txt')
  report.killed = await sbx.kill()
}

;(process.env.MODE === 'after' ? after() : before()).then(
  () => console.log(JSON.stringify(report)),
  (e) => {
    report.fatal = `${e.constructor.name}: ${e.stack || e.message}`
    console.log(JSON.stringify(report))
  },
)
