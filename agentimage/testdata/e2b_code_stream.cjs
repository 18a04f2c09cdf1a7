// Drives the code interpreter through the unmodified npm `@e2b/code-interpreter` SDK: a JavaScript cell and an R
// cell each print a first line, then wait for a flag file that this script writes through envd only once onStdout
// has delivered that line, then print "second" (or "no flag" after 30 s). "first\nsecond\n" means the first chunk
// reached us while the cell was still running. Where the sandbox is (E2B_SANDBOX_URL) is the caller's business.
// Prints one JSON line.
const { Sandbox } = require('@e2b/code-interpreter')

const report = {}

async function streamed(sbx, language, code) {
  const flag = '/home/user/e2b-stream-flag-' + Math.random().toString(16).slice(2)
  let written = null
  const chunks = []
  const exec = await sbx.runCode(code(flag), {
    language,
    onStdout: (m) => {
      chunks.push(m.line)
      if (!written && m.line.includes('first')) written = sbx.files.write(flag, 'go')
    },
  })
  await written
  return { stdout: exec.logs.stdout.join(''), chunks: chunks.length, error: exec.error ? exec.error.value : null }
}

async function main() {
  const sbx = await Sandbox.create()
  report.js = await streamed(sbx, 'js', (flag) => `console.log('first')
const fs = require('fs')
const seen = await new Promise((resolve) => {
  const started = Date.now()
  const t = setInterval(() => {
    if (fs.existsSync(${JSON.stringify(flag)})) { clearInterval(t); resolve(true) }
    else if (Date.now() - started > 30000) { clearInterval(t); resolve(false) }
  }, 10)
})
console.log(seen ? 'second' : 'no flag')`)
  report.r = await streamed(sbx, 'r', (flag) => `cat("first\\n")
for (i in 1:3000) { if (file.exists(${JSON.stringify(flag)})) break; Sys.sleep(0.01) }
cat(if (file.exists(${JSON.stringify(flag)})) "second\\n" else "no flag\\n")`)
  // Output after the stream, with a value and an error, still arrives whole and once.
  const r = await sbx.runCode('for (i in 1:3) print(i)\nmessage("to stderr")\n42', { language: 'r' })
  report.rAfter = { stdout: r.logs.stdout.join(''), stderr: r.logs.stderr.join('') }
  const js = await sbx.runCode('console.log("a"); console.error("b"); 7', { language: 'js' })
  report.jsAfter = { stdout: js.logs.stdout.join(''), stderr: js.logs.stderr.join(''), text: js.text }
}

main()
  .catch((e) => { report.fatal = `${e.constructor.name}: ${e.message}\n${e.stack}` })
  .finally(() => console.log(JSON.stringify(report)))
