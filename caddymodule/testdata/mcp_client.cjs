// Drives the gateway's MCP server with the official MCP TypeScript SDK, as an MCP client (Claude Desktop, Cursor)
// would: over Streamable HTTP at $BASE/mcp (MODE=http), or through the stdio bridge `caddy sandgate-mcp`
// (MODE=stdio). Prints one line `RESULT <json>` with what it saw; the Go test asserts on it.
// Env: MODE, BASE, KEY, OTHER_KEY, PROFILE, CADDY and KEY_FILE/OTHER_KEY_FILE (stdio), NODE_EXTRA_CA_CERTS.
'use strict';
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const env = process.env;

function transport(key, keyFile) {
  if (env.MODE === 'stdio') {
    return new StdioClientTransport({
      command: env.CADDY,
      args: ['sandgate-mcp', '--url', env.BASE, '--key-file', keyFile],
      env: { ...process.env },
      stderr: 'inherit',
    });
  }
  return new StreamableHTTPClientTransport(new URL(env.BASE + '/mcp'), {
    requestInit: { headers: { Authorization: 'Bearer ' + key } },
  });
}

async function connect(key, keyFile) {
  const client = new Client({ name: 'sandgate-test', version: '1.0.0' });
  await client.connect(transport(key, keyFile));
  return client;
}

function text(res) {
  return (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

async function call(client, name, args, opts) {
  const res = await client.callTool({ name, arguments: args }, undefined, Object.assign({ timeout: 300000 }, opts || {}));
  return res;
}

async function ok(client, name, args, opts) {
  const res = await call(client, name, args, opts);
  if (res.isError) throw new Error(`${name} failed: ${text(res)}`);
  return res;
}

// fetchFollow follows redirects by hand, carrying cookies, as a browser would.
async function fetchFollow(url) {
  let cookies = [];
  for (let i = 0; i < 5; i++) {
    const resp = await fetch(url, { redirect: 'manual', headers: cookies.length ? { Cookie: cookies.join('; ') } : {} });
    const set = resp.headers.getSetCookie ? resp.headers.getSetCookie() : [];
    cookies = cookies.concat(set.map((c) => c.split(';')[0]));
    if (resp.status >= 300 && resp.status < 400 && resp.headers.get('location')) {
      url = new URL(resp.headers.get('location'), url).href;
      continue;
    }
    return { status: resp.status, body: await resp.text(), cookies };
  }
  throw new Error('too many redirects');
}

async function main() {
  const out = {};
  // A wrong key is refused before any session exists.
  try {
    const bad = await connect('sk-wrong-key', env.BAD_KEY_FILE);
    await bad.listTools();
    out.wrongKey = 'accepted';
  } catch (e) {
    out.wrongKey = 'refused: ' + String(e.message || e).slice(0, 200);
  }

  const client = await connect(env.KEY, env.KEY_FILE);
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name).sort();
  out.schemaOK = tools.tools.every((t) => t.inputSchema && t.inputSchema.type === 'object' && t.description);

  const created = await ok(client, 'create_sandbox', { profile: env.PROFILE });
  const id = created.structuredContent.id;
  out.id = id;

  await ok(client, 'run_code', { sandbox_id: id, code: 'x = 41' });
  const second = await ok(client, 'run_code', { sandbox_id: id, code: 'x + 1' });
  out.state = second.structuredContent.output;

  const plot = await ok(client, 'run_code', {
    sandbox_id: id,
    code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
  });
  const img = (plot.content || []).find((c) => c.type === 'image');
  out.image = img ? { mimeType: img.mimeType, pngMagic: Buffer.from(img.data, 'base64').subarray(1, 4).toString() } : null;

  const raised = await call(client, 'run_code', { sandbox_id: id, code: 'raise ValueError("boom")' });
  out.raised = { isError: !!raised.isError, text: text(raised).slice(0, 300) };

  const sh = await ok(client, 'run_command', { sandbox_id: id, command: 'echo hello; uname -s' });
  out.shell = sh.structuredContent;

  let progress = [];
  const long = await ok(client, 'run_long_command', {
    sandbox_id: id, command: 'for i in 1 2 3 4; do echo step $i; sleep 1; done', timeout_seconds: 120,
  }, { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true });
  out.long = { exit: long.structuredContent.exit_code, stdout: long.structuredContent.stdout, progress: progress.length };

  await ok(client, 'write_file', { sandbox_id: id, path: 'notes/hello.txt', content: 'hello from mcp\nsecond line\n' });
  await ok(client, 'edit_file', { sandbox_id: id, path: 'notes/hello.txt', old_string: 'second line', new_string: 'edited line' });
  const read = await ok(client, 'read_file', { sandbox_id: id, path: 'notes/hello.txt' });
  out.read = text(read);
  const listed = await ok(client, 'list_files', { sandbox_id: id, path: 'notes' });
  out.listed = listed.structuredContent.entries.map((e) => e.name);
  const found = await ok(client, 'search_files', { sandbox_id: id, pattern: 'edited' });
  out.found = found.structuredContent.matches.map((m) => m.path + ':' + m.line);
  // Import and export: a second sandbox copies the file the first one exported; an unexported one is refused.
  const second2 = await ok(client, 'create_sandbox', { profile: env.PROFILE });
  const id2 = second2.structuredContent.id;
  await ok(client, 'export_files', { sandbox_id: id, paths: ['notes/hello.txt'] });
  const imported = await ok(client, 'import_file', { sandbox_id: id2, from_sandbox: id, path: 'notes/hello.txt', destination: 'copy.txt' });
  const copied = await ok(client, 'read_file', { sandbox_id: id2, path: 'copy.txt' });
  const unexported = await call(client, 'import_file', { sandbox_id: id2, from_sandbox: id, path: 'other.txt' });
  out.transfer = {
    size: imported.structuredContent.size, copy: text(copied),
    unexported: unexported.structuredContent && unexported.structuredContent.error.code,
  };
  await ok(client, 'delete_sandbox', { sandbox_id: id2 });
  const escape = await call(client, 'read_file', { sandbox_id: id, path: '../etc/passwd' });
  out.escape = { isError: !!escape.isError, code: escape.structuredContent && escape.structuredContent.error.code };
  const badArgs = await call(client, 'run_code', { sandbox_id: id, language: 'cobol', code: '1' });
  out.badArgs = { isError: !!badArgs.isError, code: badArgs.structuredContent && badArgs.structuredContent.error.code };

  const open = await ok(client, 'open_in_browser', { sandbox_id: id, view: 'terminal' });
  out.ticketURL = open.structuredContent.url;
  const page = await fetchFollow(open.structuredContent.url);
  out.terminalPage = { status: page.status, hasTerminal: /terminal/i.test(page.body) && /<html/i.test(page.body) };
  const again = await fetchFollow(open.structuredContent.url);
  out.ticketReuse = again.status;

  // Another owner sees nothing of it.
  const other = await connect(env.OTHER_KEY, env.OTHER_KEY_FILE);
  const otherList = await ok(other, 'list_sandboxes', {});
  out.otherSees = otherList.structuredContent.sandboxes.map((s) => s.id).includes(id);
  const otherRun = await call(other, 'run_command', { sandbox_id: id, command: 'id' });
  out.otherRun = { isError: !!otherRun.isError, code: otherRun.structuredContent && otherRun.structuredContent.error.code };
  const otherDelete = await call(other, 'delete_sandbox', { sandbox_id: id });
  out.otherDelete = !otherDelete.isError;
  await other.close();

  const mine = await ok(client, 'list_sandboxes', {});
  out.mineSees = mine.structuredContent.sandboxes.map((s) => s.id).includes(id);

  await ok(client, 'delete_sandbox', { sandbox_id: id });
  const after = await ok(client, 'list_sandboxes', {});
  out.afterDelete = after.structuredContent.sandboxes.map((s) => s.id).includes(id);
  await client.close();
  console.log('RESULT ' + JSON.stringify(out));
}

// passthrough: the sandbox's own agent MCP server at /sandboxes/{id}/mcp, with an API key, with an mcp ticket
// (the gateway turns it into a session cookie, so this client keeps cookies), and refused without either.
async function passthrough() {
  const url = new URL(env.BASE + '/sandboxes/' + env.SANDBOX + '/mcp');
  const out = {};
  const tryList = async (transport) => {
    const client = new Client({ name: 'sandgate-passthrough', version: '1.0.0' });
    try {
      await client.connect(transport);
      const tools = await client.listTools();
      await client.close();
      return tools.tools.map((t) => t.name).sort();
    } catch (e) {
      return 'refused: ' + String(e.message || e).slice(0, 200);
    }
  };
  out.withKey = await tryList(new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: 'Bearer ' + env.KEY } },
  }));
  const jar = new Map();
  const cookieFetch = async (input, init) => {
    init = Object.assign({}, init || {});
    const headers = new Headers(init.headers || {});
    if (jar.size) headers.set('Cookie', [...jar].map(([k, v]) => k + '=' + v).join('; '));
    init.headers = headers;
    const resp = await fetch(input, init);
    for (const c of resp.headers.getSetCookie()) {
      const [kv] = c.split(';');
      const i = kv.indexOf('=');
      jar.set(kv.slice(0, i), kv.slice(i + 1));
    }
    return resp;
  };
  const ticketURL = new URL(url.href);
  ticketURL.searchParams.set('ticket', env.TICKET);
  out.withTicket = await tryList(new StreamableHTTPClientTransport(ticketURL, { fetch: cookieFetch }));
  out.without = await tryList(new StreamableHTTPClientTransport(url));
  out.otherOwner = await tryList(new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: 'Bearer ' + env.OTHER_KEY } },
  }));
  console.log('RESULT ' + JSON.stringify(out));
}

(env.MODE === 'passthrough' ? passthrough() : main()).then(() => process.exit(0), (e) => {
  console.error(e && e.stack || e);
  process.exit(1);
});
