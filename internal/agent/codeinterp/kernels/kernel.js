// Warren's JavaScript/TypeScript kernel. One process per context.
//
// Protocol: requests are JSON lines on stdin, {"id": n, "code": "..."};
// messages go out as JSON lines on fd 3:
//   {"type": "stdout"|"stderr", "text": "..."}
//   {"type": "result", "id": n, "text": "..."}        value of the last expression
//   {"type": "error", "id": n, "name", "value", "traceback"}
//   {"type": "done", "id": n}
//
// Code runs through Node's own REPL evaluator, so state persists across
// executions (const/let/functions in one vm context), top-level await
// works, and the completion value of the last statement is the result.
// Static `import` statements, which the REPL rejects, are rewritten into
// dynamic imports. With --typescript, code is first transpiled by the
// `typescript` package (types stripped, no type checking).
'use strict';

const fs = require('node:fs');
const readline = require('node:readline');
const repl = require('node:repl');
const util = require('node:util');
const { PassThrough } = require('node:stream');

function send(msg) {
  fs.writeSync(3, JSON.stringify(msg) + '\n');
}

// Everything the code prints through process.stdout/stderr (console
// included) becomes a protocol message, so it is ordered with results.
for (const name of ['stdout', 'stderr']) {
  process[name].write = (chunk, encoding, cb) => {
    if (typeof encoding === 'function') cb = encoding;
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    if (text) send({ type: name, text });
    if (typeof cb === 'function') process.nextTick(cb);
    return true;
  };
}

const server = repl.start({
  input: new PassThrough(),
  output: new PassThrough().resume(),
  terminal: false,
  prompt: '',
  useGlobal: false,
  ignoreUndefined: true,
  breakEvalOnSigint: true, // an interrupt stops synchronous loops
});
server.context.console = new console.Console(process.stdout, process.stderr);

let pending = null; // settles the running execution, once

// The REPL routes exceptions of evaluated code to its domain and prints
// them; take them over so they end the execution as an error.
server._domain.removeAllListeners('error');
server._domain.on('error', (err) => {
  if (pending) pending(err);
  else send({ type: 'stderr', text: `Uncaught ${util.inspect(err)}\n` });
});

// An interrupt while the code awaits something abandons the execution;
// one between executions is ignored. While code runs synchronously the
// REPL's own watchdog handles it instead, which it only does when no other
// SIGINT listener exists: see execute.
function onSigint() {
  if (pending) pending(new Error('Execution interrupted'), undefined, 'KeyboardInterrupt');
}
process.on('SIGINT', onSigint);

let ts = null;
function loadTypeScript() {
  for (const path of ['typescript', '/usr/share/nodejs/typescript', '/usr/lib/node_modules/typescript']) {
    try {
      return require(path);
    } catch {
      // try the next place
    }
  }
  throw new Error('TypeScript needs the "typescript" package (Debian: node-typescript)');
}

function transpile(code) {
  ts = ts || loadTypeScript();
  return ts.transpileModule(code, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
  }).outputText;
}

// rewriteImports turns `import ... from 'm'` statements (at line starts)
// into `var` bindings of `await import('m')`, which the REPL accepts.
function rewriteImports(code) {
  let n = 0;
  return code.replace(
    /^([ \t]*)import\s+(?:([\w$]+)\s*,?\s*)?(\*\s+as\s+[\w$]+|\{[^}]*\})?\s*(?:from\s*)?(['"][^'"\n]+['"])\s*;?/gm,
    (_, indent, def, named, spec) => {
      const mod = `__warren_import_${n++}`;
      const out = [`var ${mod} = await import(${spec});`];
      if (def) out.push(`var ${def} = ${mod}.default;`);
      if (named && named.startsWith('*')) out.push(`var ${named.replace(/^\*\s+as\s+/, '')} = ${mod};`);
      else if (named) out.push(`var ${named.replace(/\s+as\s+/g, ': ')} = ${mod};`);
      return indent + out.join(' ');
    },
  );
}

function execute(req) {
  return new Promise((resolve) => {
    let settled = false;
    pending = (err, value, name) => {
      if (settled) return;
      settled = true;
      pending = null;
      resolve({ err, value, name });
    };
    let code = req.code;
    try {
      if (process.argv.includes('--typescript')) code = transpile(code);
      code = rewriteImports(code);
    } catch (err) {
      pending(err);
      return;
    }
    process.removeListener('SIGINT', onSigint);
    try {
      server.eval(code, server.context, 'cell', (err, value) => {
        if (err instanceof repl.Recoverable) err = err.err; // incomplete code
        if (pending) pending(err, value);
      });
    } finally {
      process.on('SIGINT', onSigint);
    }
  });
}

async function handle(req) {
  const { err, value, name } = await execute(req);
  if (err) {
    const isError = err instanceof Error || (err && typeof err.stack === 'string');
    send({
      type: 'error',
      id: req.id,
      name: name || (isError ? err.name : 'Error'),
      value: isError ? err.message : String(err),
      traceback: isError ? err.stack : '',
    });
  } else if (value !== undefined) {
    send({ type: 'result', id: req.id, text: typeof value === 'string' ? value : util.inspect(value) });
  }
  send({ type: 'done', id: req.id });
}

// Requests are handled one at a time, in order.
let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const req = JSON.parse(line);
  queue = queue.then(() => handle(req));
}).on('close', () => process.exit(0));
