// Drives the unmodified npm `@e2b/code-interpreter` SDK against a gateway on Caddyfile.example: state across cells,
// stdout streamed while a cell runs, an exception, a matplotlib PNG, per-execution and sandbox-wide env, a second
// context, JavaScript, and a language this sandbox does not have. E2B_API_URL, E2B_DOMAIN and E2B_API_KEY come from
// the environment as an E2B user sets them. Prints one JSON line.
const { Sandbox } = require('@e2b/code-interpreter')

const report = {}

async function classOf(p) {
  try {
    await p
    return 'ok'
  } catch (e) {
    return `${e.constructor.name}: ${e.message}`
  }
}

async function main() {
  const sbx = await Sandbox.create({ envs: { WIDE: 'sandbox' }, timeoutMs: 300_000 })
  try {
    await sbx.runCode('x = 20')
    const two = await sbx.runCode('print("doubling")\nx * 2')
    report.state = { text: two.text, stdout: two.logs.stdout, count: two.executionCount }

    // Streaming: the cell waits for a flag file that a second context creates only once the first line reached us,
    // so that line cannot have come with the end of the cell.
    const helper = await sbx.createCodeContext({ language: 'python' })
    const flag = '/tmp/e2b-stream-flag-' + Math.random().toString(16).slice(2)
    let flagged = null
    const streamed = await sbx.runCode(
      `import os, time\nprint("first", flush=True)\nfor _ in range(3000):\n    if os.path.exists(${JSON.stringify(flag)}): break\n    time.sleep(0.01)\nprint("second")`,
      {
        onStdout: (m) => {
          if (!flagged && m.line.includes('first')) flagged = sbx.runCode(`open(${JSON.stringify(flag)}, "w").close()`, { context: helper })
        },
      })
    await flagged
    report.stream = { flagged: flagged !== null, stdout: streamed.logs.stdout.join('') }

    const err = await sbx.runCode('def f():\n    raise ValueError("bad")\nf()')
    report.error = { name: err.error && err.error.name, value: err.error && err.error.value, traceback: err.error && err.error.traceback }

    const plot = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()')
    const png = plot.results.length === 1 && plot.results[0].png ? Buffer.from(plot.results[0].png, 'base64') : Buffer.alloc(0)
    report.png = { results: plot.results.length, magic: png.subarray(0, 4).toString('hex'), bytes: png.length }

    const env = await sbx.runCode('import os\n(os.environ.get("WIDE"), os.environ.get("ONE"))', { envs: { ONE: 'once' } })
    const envAfter = await sbx.runCode('os.environ.get("ONE", "gone")')
    report.env = { during: env.text, after: envAfter.text }

    const second = await sbx.createCodeContext({ language: 'python', cwd: '/home/user' })
    const inSecond = await sbx.runCode('x', { context: second })
    await sbx.runCode('x = "second"', { context: second })
    const firstAgain = await sbx.runCode('x')
    const cwd = await sbx.runCode('import os; os.getcwd()', { context: second })
    const listed = await sbx.listCodeContexts()
    await sbx.removeCodeContext(second)
    const listedAfter = await sbx.listCodeContexts()
    report.contexts = { secondSeesX: inSecond.error ? inSecond.error.name : inSecond.text, firstAgain: firstAgain.text, cwd: cwd.text,
      language: second.language, listed: listed.length, listedAfter: listedAfter.length,
      gone: await classOf(sbx.runCode('1', { context: second })) }

    const js = await sbx.runCode('const a = 2; console.log("from js"); a * 21', { language: 'js' })
    const jsState = await sbx.runCode('a + 1', { language: 'javascript' })
    report.js = { text: js.text, stdout: js.logs.stdout.join(''), state: jsState.text }

    report.unsupported = await classOf(sbx.runCode('1', { language: 'java' }))
  } finally {
    await sbx.kill()
  }
}

main()
  .catch((e) => { report.fatal = `${e.constructor.name}: ${e.message}\n${e.stack}` })
  .finally(() => console.log(JSON.stringify(report)))
