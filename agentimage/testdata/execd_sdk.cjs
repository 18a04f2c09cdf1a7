// Drives the agent's execd API with the real OpenSandbox SDK (@alibaba-group/opensandbox), its execd client pointed
// straight at the agent: AGENT is the agent's base URL, TOKEN its token. Prints "OK <json>" when every check passes;
// any failed check throws (non-zero exit).
const assert = require("node:assert/strict");
const { ConnectionConfig, DefaultAdapterFactory } = require("@alibaba-group/opensandbox");

async function code(promise) {
  try {
    await promise;
  } catch (e) {
    return { code: e?.error?.code, status: e?.statusCode };
  }
  throw new Error("expected a failure");
}

async function main() {
  const connectionConfig = new ConnectionConfig({ domain: process.env.AGENT, headers: { "X-Sandgate-Token": process.env.TOKEN } });
  const { commands, files, health, metrics } = new DefaultAdapterFactory().createExecdStack({
    connectionConfig,
    execdBaseUrl: process.env.AGENT + "/execd",
  });
  const out = {};

  assert.equal(await health.ping(), true);

  // commands.run: stdout, stderr, exit code, cwd, env
  let ex = await commands.run("echo \"$GREETING from $(pwd)\"; echo warn >&2; exit 5", {
    workingDirectory: "/workspace", envs: { GREETING: "hello" }, timeoutSeconds: 60,
  });
  assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["hello from /workspace"]);
  assert.deepEqual(ex.logs.stderr.map((m) => m.text), ["warn"]);
  assert.equal(ex.exitCode, 5);
  assert.ok(ex.id.startsWith("proc_"));
  ex = await commands.run("printf 'a\\nb\\n'");
  assert.equal(ex.exitCode, 0);
  assert.ok(ex.complete);
  assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["a", "b"]);
  // timeout: the process group is ended
  ex = await commands.run("echo before; sleep 60", { timeoutSeconds: 1 });
  assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["before"]);
  assert.equal(ex.exitCode, 143);
  out.timeoutError = ex.error.traceback.join(" ");

  // runStream: raw events
  const types = [];
  for await (const ev of commands.runStream("echo streamed")) types.push(ev.type + (ev.text && ev.type !== "init" ? ":" + ev.text : ""));
  assert.deepEqual(types.filter((t) => t !== "ping"), ["init", "stdout:streamed", "execution_complete"]);

  // background, logs with cursor, status, interrupt
  const bg = await commands.run("echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo second; sleep 60", { background: true });
  let logs = { content: "", cursor: 0 };
  while (logs.content === "") logs = await commands.getBackgroundCommandLogs(bg.id, 0);
  assert.equal(logs.content, "first\n");
  assert.equal(logs.cursor, 6);
  await files.writeFiles([{ path: "/workspace/go", data: "" }]);
  let more = { content: "" };
  while (more.content === "") more = await commands.getBackgroundCommandLogs(bg.id, logs.cursor);
  assert.equal(more.content, "second\n");
  let st = await commands.getCommandStatus(bg.id);
  assert.equal(st.running, true);
  await commands.interrupt(bg.id);
  st = await commands.getCommandStatus(bg.id);
  assert.equal(st.running, false);
  assert.ok(st.finishedAt instanceof Date);

  // files, as FastGPT writes package mirrors (into HOME) and the workspace
  await files.writeFiles([
    { path: "/home/sandbox/.npmrc", data: "registry=http://mirror/\n" },
    { path: "/workspace/src/a.txt", data: "l1\nl2\r\nl3\nl4", mode: 600 },
    { path: "/workspace/src/deep/b.md", data: "# b" },
  ]);
  assert.equal(await files.readFile("/home/sandbox/.npmrc"), "registry=http://mirror/\n");
  assert.equal(await files.readFile("/workspace/src/a.txt", { offset: 2, limit: 2 }), "l2\nl3");
  assert.equal(await files.readFile("/workspace/src/a.txt", { range: "bytes=0-1" }), "l1");
  const info = await files.getFileInfo(["/workspace/src/a.txt"]);
  assert.equal(info["/workspace/src/a.txt"].type, "file");
  assert.equal(info["/workspace/src/a.txt"].mode, 600);
  assert.equal(info["/workspace/src/a.txt"].owner, "sandbox");
  assert.ok(info["/workspace/src/a.txt"].modifiedAt instanceof Date);
  out.missing = await code(files.getFileInfo(["/workspace/src/a.txt", "/workspace/nope"]));
  out.outside = await code(files.readFile("/etc/passwd"));
  out.outsideInfo = await code(files.getFileInfo(["/etc/passwd"]));
  const found = await files.search({ path: "/workspace/src", pattern: "*.md" });
  assert.deepEqual(found.map((f) => f.path), ["/workspace/src/deep/b.md"]);
  await files.moveFiles([{ src: "/workspace/src/deep/b.md", dest: "/workspace/moved/b.md" }]);
  const replaced = await files.replaceContentsDetailed([{ path: "/workspace/moved/b.md", oldContent: "b", newContent: "c" }]);
  assert.deepEqual(replaced, [{ path: "/workspace/moved/b.md", replacedCount: 1 }]);
  assert.equal(await files.readFile("/workspace/moved/b.md"), "# c");
  await files.setPermissions([{ path: "/workspace/moved/b.md", mode: 640 }]);
  assert.equal((await files.getFileInfo(["/workspace/moved/b.md"]))["/workspace/moved/b.md"].mode, 640);
  await files.deleteFiles(["/workspace/moved/b.md"]);
  out.deleted = await code(files.getFileInfo(["/workspace/moved/b.md"]));

  // directories
  await files.createDirectories([{ path: "/workspace/d1/d2", mode: 700 }]);
  const listed = await files.listDirectory({ path: "/workspace", depth: 2 });
  const names = listed.map((f) => f.path);
  assert.ok(names.includes("/workspace/d1/d2") && names.includes("/workspace/src/a.txt"), names.join(","));
  await files.deleteDirectories(["/workspace/d1"]);
  assert.ok(!(await files.listDirectory({ path: "/workspace", depth: 1 })).some((f) => f.path === "/workspace/d1"));

  const m = await metrics.getMetrics();
  assert.ok(m.cpuCount > 0 && m.memoryTotalMiB > 0 && m.memoryUsedMiB > 0, JSON.stringify(m));
  out.metrics = m;

  console.log("OK " + JSON.stringify(out));
  await connectionConfig.closeTransport?.();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
