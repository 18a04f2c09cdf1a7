// sandgate's Node.js kernel: one persistent vm context, requests and results as JSON lines.
// Requests arrive on fd 3 ({id, code, timeout_ms}); results leave on fd 4. The process's own stdout/stderr are
// captured per execution, so user code never corrupts the protocol. A request with stream set also gets what its
// cell prints as it is printed, as output lines ({id, stream, text}) before its result, which still holds it all. The agent (Go) owns the process: it restarts it
// when an execution overruns its deadline (a synchronous loop inside an async continuation cannot be interrupted).
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
const net = require('net');
const readline = require('readline');
const { createRequire } = require('module');

// Node's own REPL transform for top-level await: it hoists declarations out of the async wrapper (so they persist
// in the context) and returns the last expression's value. It is internal; without it top-level await still works
// but declarations inside awaited code stay local to that execution.
let processTopLevelAwait = null;
try {
  ({ processTopLevelAwait } = require('internal/repl/await'));
} catch (_) {
  processTopLevelAwait = null;
}

const OUTPUT_LIMIT = 1 << 20;
const workspace = process.env.SANDGATE_WORKSPACE || process.cwd();

let current = null; // {stdout, stderr, truncated, id?} of the running execution; id when it streams
let between = { stdout: '', stderr: '', truncated: false }; // output of timers firing between executions

function append(which, chunk) {
  const target = current || between;
  const s = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
  const room = OUTPUT_LIMIT - target[which].length;
  if (room <= 0) {
    target.truncated = true;
    return;
  }
  if (s.length > room) target.truncated = true;
  const kept = s.slice(0, room);
  target[which] += kept;
  if (target.id && kept) emit(target.id, which, kept);
}

function emit(id, which, text) {
  fs.writeSync(4, JSON.stringify({ id, stream: which, text }) + '\n');
}

for (const which of ['stdout', 'stderr']) {
  process[which].write = function write(chunk, encoding, cb) {
    append(which, chunk);
    const done = typeof encoding === 'function' ? encoding : cb;
    if (typeof done === 'function') process.nextTick(done);
    return true;
  };
}

process.on('uncaughtException', (err) => append('stderr', 'Uncaught ' + describe(err).stack + '\n'));
process.on('unhandledRejection', (err) => append('stderr', 'Unhandled rejection ' + describe(err).stack + '\n'));

const userRequire = createRequire(path.join(workspace, '[node-kernel]'));
const sandbox = {
  console: new console.Console({ stdout: process.stdout, stderr: process.stderr }),
  require: userRequire,
  module: { exports: {}, require: userRequire },
  process,
  Buffer,
  URL,
  URLSearchParams,
  TextEncoder,
  TextDecoder,
  AbortController,
  AbortSignal,
  setTimeout,
  clearTimeout,
  setInterval,
  clearInterval,
  setImmediate,
  clearImmediate,
  queueMicrotask,
  structuredClone: globalThis.structuredClone,
  fetch: globalThis.fetch,
  __dirname: workspace,
  __filename: path.join(workspace, '[node-kernel]'),
};
sandbox.exports = sandbox.module.exports;
sandbox.global = sandbox;
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox, { name: 'sandgate' });

let executionCount = 0;

function describe(err) {
  if (err !== null && typeof err === 'object' && typeof err.message === 'string') {
    return {
      name: typeof err.name === 'string' ? err.name : 'Error',
      message: err.message,
      stack: typeof err.stack === 'string' ? err.stack : String(err.message),
    };
  }
  const text = util.inspect(err);
  return { name: 'Uncaught', message: text, stack: 'Uncaught ' + text };
}

function isThenable(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';
}

class TimeoutError extends Error {}

function within(promise, ms) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`execution timed out after ${ms} ms; the promise keeps running in the background`)), ms);
  });
  return Promise.race([Promise.resolve(promise), deadline]).finally(() => clearTimeout(timer));
}

function compile(code, filename) {
  if (processTopLevelAwait) {
    let transformed = null;
    try {
      transformed = processTopLevelAwait(code);
    } catch (_) {
      transformed = null; // a syntax error: compiling the original reports it properly
    }
    if (transformed !== null) return { script: new vm.Script(transformed, { filename }), wrapped: true };
    return { script: new vm.Script(code, { filename }), wrapped: false };
  }
  try {
    return { script: new vm.Script(code, { filename }), wrapped: false };
  } catch (err) {
    if (!(err instanceof SyntaxError) || !/await/.test(err.message)) throw err;
    return { script: new vm.Script(`(async () => {\n${code}\n})()`, { filename }), wrapped: false };
  }
}

async function execute(req) {
  const started = Date.now();
  executionCount += 1;
  current = between;
  between = { stdout: '', stderr: '', truncated: false };
  if (req.stream) {
    // Output of timers that fired before this execution is its own: it goes out first.
    current.id = String(req.id);
    for (const which of ['stdout', 'stderr']) if (current[which]) emit(current.id, which, current[which]);
  }
  const timeout = req.timeout_ms > 0 ? req.timeout_ms : 30000;
  const res = { id: req.id, execution_count: executionCount, success: false, result: null, timed_out: false };
  try {
    const { script, wrapped } = compile(String(req.code), `cell-${executionCount}.js`);
    let value = script.runInContext(context, { timeout, displayErrors: false, breakOnSigint: false });
    if (wrapped) {
      const remaining = Math.max(1, timeout - (Date.now() - started));
      const box = await within(value, remaining);
      value = box !== undefined && box !== null && 'value' in box ? box.value : undefined;
    }
    if (isThenable(value)) {
      value = await within(value, Math.max(1, timeout - (Date.now() - started)));
    }
    if (value !== undefined) res.result = util.inspect(value, { depth: 4, maxArrayLength: 100, maxStringLength: 100000, breakLength: 120 });
    res.success = true;
  } catch (err) {
    if (err instanceof TimeoutError || (err && err.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT')) {
      res.timed_out = true;
      res.error = { name: 'TimeoutError', message: err.message, stack: err.message };
    } else {
      res.error = describe(err);
    }
  }
  // Let output written by already-settled callbacks (nextTick, microtasks) land in this execution.
  await new Promise((resolve) => setImmediate(resolve));
  res.stdout = current.stdout;
  res.stderr = current.stderr;
  res.output_truncated = current.truncated;
  current = null;
  res.execution_time_ms = Date.now() - started;
  fs.writeSync(4, JSON.stringify(res) + '\n');
}

// A socket, not fs.createReadStream: a blocking read would hold a libuv worker thread forever (and process.exit
// waits for it).
const requests = readline.createInterface({ input: new net.Socket({ fd: 3, readable: true, writable: false }), crlfDelay: Infinity });
let queue = Promise.resolve();
requests.on('line', (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (err) {
    fs.writeSync(4, JSON.stringify({ id: null, success: false, error: { name: 'ProtocolError', message: String(err), stack: '' } }) + '\n');
    return;
  }
  queue = queue.then(() => execute(req));
});
requests.on('close', () => process.exit(0));
fs.writeSync(4, JSON.stringify({ id: 'ready', top_level_await_transform: processTopLevelAwait !== null }) + '\n');
