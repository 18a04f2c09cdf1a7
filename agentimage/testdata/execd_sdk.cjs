// Drives the agent's execd API with the real OpenSandbox SDK (@alibaba-group/opensandbox), its execd client pointed
// straight at the agent: AGENT is the agent's base URL, TOKEN its token; WS, HOMEDIR and OWNER default to our image's
// /workspace, /home/sandbox and sandbox. Prints "OK <json>" when every check passes;
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

const WS = process.env.WS || "/workspace";
const HOME = process.env.HOMEDIR || "/home/sandbox";
const OWNER = process.env.OWNER || "sandbox";

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
    workingDirectory: WS, envs: { GREETING: "hello" }, timeoutSeconds: 60,
  });
  assert.deepEqual(ex.logs.stdout.map((m) => m.text), ["hello from " + WS]);
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
  const bg = await commands.run("echo first; while [ ! -e go ]; do sleep 0.05; done; echo second; sleep 60", { background: true });
  let logs = { content: "", cursor: 0 };
  while (logs.content === "") logs = await commands.getBackgroundCommandLogs(bg.id, 0);
  assert.equal(logs.content, "first\n");
  assert.equal(logs.cursor, 6);
  await files.writeFiles([{ path: WS + "/go", data: "" }]);
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
    { path: HOME + "/.npmrc", data: "registry=http://mirror/\n" },
    { path: WS + "/src/a.txt", data: "l1\nl2\r\nl3\nl4", mode: 600 },
    { path: WS + "/src/deep/b.md", data: "# b" },
  ]);
  assert.equal(await files.readFile(HOME + "/.npmrc"), "registry=http://mirror/\n");
  assert.equal(await files.readFile(WS + "/src/a.txt", { offset: 2, limit: 2 }), "l2\nl3");
  assert.equal(await files.readFile(WS + "/src/a.txt", { range: "bytes=0-1" }), "l1");
  const info = await files.getFileInfo([WS + "/src/a.txt"]);
  assert.equal(info[WS + "/src/a.txt"].type, "file");
  assert.equal(info[WS + "/src/a.txt"].mode, 600);
  assert.equal(info[WS + "/src/a.txt"].owner, OWNER);
  assert.ok(info[WS + "/src/a.txt"].modifiedAt instanceof Date);
  out.missing = await code(files.getFileInfo([WS + "/src/a.txt", WS + "/nope"]));
  out.outside = await code(files.readFile("/etc/passwd"));
  out.outsideInfo = await code(files.getFileInfo(["/etc/passwd"]));
  const found = await files.search({ path: WS + "/src", pattern: "*.md" });
  assert.deepEqual(found.map((f) => f.path), [WS + "/src/deep/b.md"]);
  await files.moveFiles([{ src: WS + "/src/deep/b.md", dest: WS + "/moved/b.md" }]);
  const replaced = await files.replaceContentsDetailed([{ path: WS + "/moved/b.md", oldContent: "b", newContent: "c" }]);
  assert.deepEqual(replaced, [{ path: WS + "/moved/b.md", replacedCount: 1 }]);
  assert.equal(await files.readFile(WS + "/moved/b.md"), "# c");
  await files.setPermissions([{ path: WS + "/moved/b.md", mode: 640 }]);
  assert.equal((await files.getFileInfo([WS + "/moved/b.md"]))[WS + "/moved/b.md"].mode, 640);
  await files.deleteFiles([WS + "/moved/b.md"]);
  out.deleted = await code(files.getFileInfo([WS + "/moved/b.md"]));

  // directories
  await files.createDirectories([{ path: WS + "/d1/d2", mode: 700 }]);
  const listed = await files.listDirectory({ path: WS, depth: 2 });
  const names = listed.map((f) => f.path);
  assert.ok(names.includes(WS + "/d1/d2") && names.includes(WS + "/src/a.txt"), names.join(","));
  await files.deleteDirectories([WS + "/d1"]);
  assert.ok(!(await files.listDirectory({ path: WS, depth: 1 })).some((f) => f.path === WS + "/d1"));

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
