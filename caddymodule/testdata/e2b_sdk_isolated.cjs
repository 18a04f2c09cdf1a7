// The E2B SDK choosing gVisor: Sandbox.create('base-isolated'), Caddyfile.example's template of the python-isolated
// profile (runtime runsc), then a command and a file through envd in it. E2B_API_URL, E2B_DOMAIN and E2B_API_KEY
// come from the environment as an E2B user sets them. Prints one JSON line.
const { Sandbox } = require('e2b')

;(async () => {
  const report = {}
  const sbx = await Sandbox.create('base-isolated', { timeoutMs: 300_000 })
  try {
    report.kernel = (await sbx.commands.run('uname -r; uname -v')).stdout.trim()
    await sbx.files.write('/home/user/isolated.txt', 'under gVisor')
    report.file = await sbx.files.read('/home/user/isolated.txt')
    report.python = (await sbx.commands.run('python3 -c "print(6 * 7)"')).stdout.trim()
  } finally {
    report.killed = await sbx.kill()
  }
  console.log(JSON.stringify(report))
})().catch((e) => {
  console.log(JSON.stringify({ fatal: (e && e.stack) || String(e) }))
})
