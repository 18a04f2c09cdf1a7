// Drives the unmodified npm `@e2b/desktop` SDK against a gateway on Caddyfile.example: create on the `desktop`
// template (the SDK starts Xvfb and XFCE through commands and waits for them), a screenshot, the mouse, typing into
// a page Chromium shows (launch) and xdg-open, then stream.start() and its URL opened in Chromium (playwright-core)
// until noVNC's canvas shows the desktop. E2B_API_URL, E2B_DOMAIN and E2B_API_KEY come from the environment as an
// E2B user sets them. Prints one JSON line.
const { Sandbox } = require('@e2b/desktop')
const { launch } = require('../../testdata/chromium.cjs')

const report = {}
// The backstop for a hang only: the steps wait for the desktop's state, and on a busy machine (CI, make test-stress)
// the whole walk has taken over 4 minutes.
const deadline = Date.now() + Number(process.env.DEADLINE_MS || 900_000)
const remaining = () => Math.max(1000, deadline - Date.now())

// until polls an SDK call until it gives a truthy value: the desktop's state is the sandbox's, not ours.
async function until(what, fn) {
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what)
    await new Promise((r) => setTimeout(r, 250))
  }
}

// windowTitles lists the titles of Chromium's visible windows.
async function windowTitles(desktop) {
  const ids = await desktop.getApplicationWindows('chromium').catch(() => [])
  const titles = []
  for (const id of ids.filter(Boolean)) titles.push(await desktop.getWindowTitle(id).catch(() => ''))
  return titles
}

async function main() {
  const desktop = await Sandbox.create({ timeoutMs: 1_200_000 })
  try {
    report.id = desktop.sandboxId
    const shot = Buffer.from(await desktop.screenshot())
    report.screenshot = { magic: shot.subarray(0, 8).toString('hex'), bytes: shot.length }
    report.screen = await desktop.getScreenSize()

    await desktop.moveMouse(100, 120)
    report.cursor = await desktop.getCursorPosition()
    await desktop.leftClick(300, 300)
    await desktop.rightClick(300, 300)
    await desktop.press('escape')
    await desktop.doubleClick(310, 310)
    await desktop.scroll('down', 2)
    await desktop.drag([50, 50], [80, 80])
    report.afterClicks = await desktop.getCursorPosition()

    // A page whose title is what is typed into it: typing shows in the window title xdotool reads back.
    await desktop.files.write('/home/user/type.html',
      '<title>empty</title><textarea autofocus oninput="document.title = \'typed:\' + this.value"></textarea>')
    await desktop.launch('chromium', 'file:///home/user/type.html')
    const window = await until('the launched Chromium window', async () => (await windowTitles(desktop)).find((t) => t.startsWith('empty')))
    report.launched = window
    const [id] = await desktop.getApplicationWindows('chromium')
    await desktop.commands.run(`xdotool windowactivate --sync ${id} || true`)
    const box = await desktop.getCurrentWindowId()
    report.focused = box !== ''
    await desktop.write('hello sandgate', { chunkSize: 5, delayInMs: 20 })
    report.typed = await until('the typed title', async () => (await windowTitles(desktop)).find((t) => t.startsWith('typed:hello sandgate')))
    await desktop.press(['ctrl', 'a'])
    await desktop.press('backspace')
    report.cleared = await until('the cleared title', async () => (await windowTitles(desktop)).find((t) => t.startsWith('typed:') && !t.includes('hello')))

    await desktop.files.write('/home/user/opened.html', '<title>opened by xdg-open</title>')
    await desktop.open('/home/user/opened.html')
    report.opened = await until('the opened page', async () => (await windowTitles(desktop)).find((t) => t.startsWith('opened by xdg-open')))

    await desktop.stream.start()
    const url = desktop.stream.getUrl()
    report.streamUrl = url
    report.streamTwice = await desktop.stream.start().then(() => 'started twice', (e) => e.message)
    report.stream = await viewStream(url)

    await desktop.stream.stop()
    await desktop.stream.start({ requireAuth: true })
    const key = desktop.stream.getAuthKey()
    report.authStream = await viewStream(desktop.stream.getUrl({ authKey: key, viewOnly: true }))
    report.noKey = await viewStream(desktop.stream.getUrl({ viewOnly: true }), { expectFailure: true })
    await desktop.stream.stop()
  } finally {
    await desktop.kill()
  }
}

// viewStream opens a noVNC URL in Chromium and waits until its canvas shows more than 1000 non-black pixels
// (XFCE's backdrop), or, with expectFailure, until noVNC reports the connection failed.
async function viewStream(url, { expectFailure = false } = {}) {
  const browser = await launch()
  try {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1024, height: 768 } })
    context.setDefaultTimeout(remaining())
    const page = await context.newPage()
    const resp = await page.goto(url)
    const out = { status: resp.status(), attempts: 1 }
    const status = () => page.locator('#noVNC_status').innerText().catch(() => '')
    const asks = async () => (await page.locator('#noVNC_credentials_dlg.noVNC_open').count()) > 0
    const lit = () => page.evaluate(() => {
      const c = document.querySelector('#noVNC_container canvas')
      if (!c || c.width === 0) return 0
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data
      let n = 0
      for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] > 30) n++
      return n > 1000 ? n : 0
    }).catch(() => 0)
    // noVNC connects once, when the page loads. Right after stream.start() the VNC server behind websockify may
    // not be listening yet; noVNC then reports the connection failed or closed and stays so. Load the page again,
    // as a user would, until it shows what is awaited: the desktop on its canvas, or (without the password) its
    // credentials dialog.
    // A load that shows neither within 90 s (a connection that hangs) is loaded again too.
    for (;;) {
      const loaded = Date.now()
      const seen = await until('noVNC to show the desktop, ask for the password or fail', async () => {
        if (Date.now() - loaded > 90_000) return 'failed'
        if (expectFailure && await asks()) return 'asks'
        if (!expectFailure) {
          const n = await lit()
          if (n) return n
        }
        return /Failed|closed|Disconnected|wrong/i.test(await status()) ? 'failed' : ''
      })
      if (seen !== 'failed' || out.attempts >= 20) {
        if (expectFailure) out.asksPassword = seen === 'asks'
        else if (seen !== 'failed') out.lit = seen
        break
      }
      out.attempts++
      await page.reload()
    }
    out.status_text = await page.locator('#noVNC_status').innerText().catch(() => '')
    return out
  } finally {
    await browser.close()
  }
}

main()
  .catch((e) => { report.fatal = `${e.constructor.name}: ${e.message}\n${e.stack}` })
  .finally(() => console.log(JSON.stringify(report)))
