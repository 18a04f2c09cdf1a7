// Drives envd through the unmodified npm `e2b` SDK (gzip and streamed uploads too): commands (blocking, streamed, non-zero exit, root refused, 2 MB,
// background with list/sendStdin/connect/kill), files (text, 3 MB binary, several at once, list, exists, getInfo,
// rename, remove, makeDir, metadata, watchDir with entries) and a PTY (input, resize, kill). Where envd is (E2B_SANDBOX_URL, or E2B_API_URL
// and E2B_DOMAIN for a real gateway) is the caller's business. Prints "E2B SDK OK" at the end; any failure throws.
const { Sandbox, CommandExitError } = require('e2b');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');

async function waitFor(what, ok) {
  const deadline = Date.now() + 30000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main() {
  const sbx = await Sandbox.create({ envs: { SBX_VAR: 'from-create' } });
  const step = (name) => console.log('step:', name);

  step('commands');
  let r = await sbx.commands.run('echo hello; echo err >&2');
  assert.equal(r.stdout, 'hello\n');
  assert.equal(r.stderr, 'err\n');
  assert.equal(r.exitCode, 0);
  r = await sbx.commands.run('echo "$HOME|$(pwd)|$SBX_VAR|$CMD_VAR"', { envs: { CMD_VAR: 'from-run' } });
  assert.equal(r.stdout, '/home/user|/home/user|from-create|from-run\n');
  assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
  const chunks = [];
  await sbx.commands.run('for i in 1 2 3; do echo line$i; done', { onStdout: (d) => chunks.push(d) });
  assert.equal(chunks.join(''), 'line1\nline2\nline3\n');
  await assert.rejects(sbx.commands.run('echo bad >&2; exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3 && e.stderr === 'bad\n');
  await assert.rejects(sbx.commands.run('id', { user: 'root' }), (e) => /no root/.test(e.message));
  r = await sbx.commands.run("head -c 2000000 /dev/zero | tr '\\0' a");
  assert.equal(r.stdout.length, 2000000);

  // a figure, not a check: the round trip of a trivial command through envd
  const times = [];
  for (let i = 0; i < 15; i++) {
    const t0 = process.hrtime.bigint();
    await sbx.commands.run('true');
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(`figure: commands.run('true') p50 ${times[7].toFixed(1)} ms, max ${times[14].toFixed(1)} ms`);

  step('background');
  const bg = await sbx.commands.run('cat', { background: true, stdin: true });
  assert.ok((await sbx.commands.list()).some((p) => p.pid === bg.pid), 'background process listed');
  const seen = [];
  const conn = await sbx.commands.connect(bg.pid, { onStdout: (d) => seen.push(d) });
  await sbx.commands.sendStdin(bg.pid, 'ping\n');
  await waitFor('the echoed stdin', () => seen.join('').includes('ping\n'));
  assert.equal(await sbx.commands.kill(bg.pid), true);
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === bg.pid), 'killed process gone from list');
  await assert.rejects(conn.wait(), (e) => e instanceof CommandExitError);
  await bg.wait().catch(() => {});
  assert.equal(await sbx.commands.kill(bg.pid), false);

  step('files');
  const dir = '/home/user/m-' + crypto.randomBytes(4).toString('hex');
  await sbx.files.write('/home/user/hello.txt', 'hello world');
  assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hello world');
  assert.equal((await sbx.commands.run('cat hello.txt')).stdout, 'hello world');
  const bin = crypto.randomBytes(3 * 1024 * 1024);
  await sbx.files.write('/home/user/bin.dat', bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.length));
  const back = await sbx.files.read('/home/user/bin.dat', { format: 'bytes' });
  assert.ok(Buffer.from(back).equals(bin), '3 MB binary round trip');
  const written = await sbx.files.write([
    { path: dir + '/a.txt', data: 'a' },
    { path: dir + '/b.txt', data: 'bb' },
  ]);
  assert.equal(written.length, 2);
  let ls = await sbx.files.list(dir);
  assert.deepEqual(ls.map((e) => e.name).sort(), ['a.txt', 'b.txt']);
  assert.ok(ls.every((e) => e.type === 'file' && e.path.startsWith(dir + '/')));
  assert.equal(await sbx.files.exists(dir + '/a.txt'), true);
  assert.equal(await sbx.files.exists(dir + '/none'), false);
  const info = await sbx.files.getInfo(dir + '/b.txt');
  assert.equal(info.size, 2);
  assert.equal(info.type, 'file');
  const renamed = await sbx.files.rename(dir + '/a.txt', dir + '/c.txt');
  assert.equal(renamed.path, dir + '/c.txt');
  await sbx.files.remove(dir + '/b.txt');
  ls = await sbx.files.list(dir);
  assert.deepEqual(ls.map((e) => e.name), ['c.txt']);
  assert.equal(await sbx.files.makeDir(dir), false);
  assert.equal(await sbx.files.makeDir(dir + '/sub/dir'), true);
  await sbx.files.write(dir + '/up/gz.txt', 'zipped', { gzip: true });
  assert.equal(await sbx.files.read(dir + '/up/gz.txt'), 'zipped');
  const parts = ['str', 'eamed'].map((s) => new TextEncoder().encode(s));
  await sbx.files.write(dir + '/up/stream.txt', new ReadableStream({ start(c) { parts.forEach((p) => c.enqueue(p)); c.close(); } }));
  assert.equal(await sbx.files.read(dir + '/up/stream.txt'), 'streamed');
  const meta = await sbx.files.write(dir + '/meta.txt', 'm', { metadata: { Owner: 'alice' } });
  assert.deepEqual(meta.metadata, { owner: 'alice' });
  assert.deepEqual((await sbx.files.getInfo(dir + '/meta.txt')).metadata, { owner: 'alice' });
  await sbx.files.remove(dir + '/meta.txt');
  await assert.rejects(sbx.files.read('/etc/passwd'));
  await assert.rejects(sbx.files.read(dir + '/none'), (e) => e.name === 'FileNotFoundError' || e.name === 'NotFoundError');

  step('watchDir');
  const events = [];
  const wh = await sbx.files.watchDir(dir, (e) => events.push(e), { recursive: true, includeEntry: true });
  await sbx.files.write(dir + '/sub/w.txt', 'x');
  await waitFor('a watch event for sub/w.txt', () => events.some((e) => e.name === 'sub/w.txt' && e.entry && e.entry.path === dir + '/sub/w.txt'));
  await wh.stop();

  step('pty');
  let out = '';
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += Buffer.from(d).toString(); } });
  assert.ok((await sbx.commands.list()).some((p) => p.pid === pty.pid), 'PTY listed');
  await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 });
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo size=$(stty size) $((6*7))\n'));
  await waitFor('the PTY output', () => out.includes('size=30 100 42'));
  assert.equal(await sbx.pty.kill(pty.pid), true);
  await pty.wait().catch(() => {});

  await sbx.kill();
  console.log('E2B SDK OK');
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
