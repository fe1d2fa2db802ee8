#!/usr/bin/env node
// BullMQ FlowProducer runner for the machinist benchmark (bench/bullmq.go).
//
//   node flow.js --redis HOST:PORT --shape children1000|tree3 [--timed N] [--concurrency C]
//
// Runs one warm-up flow and N timed flows of the given shape through one
// BullMQ Worker (concurrency C) in this process, all in queue "bench" under a
// key prefix unique to this process. A run is timed from just before
// FlowProducer.add to when the root job's return value is known (through
// QueueEvents and Job.waitUntilFinished). Prints one JSON line per timed run,
// {"shape":…,"nodes":…,"ms":…}, then {"done":true,"runs":N+1,"nodes_per_run":…}.
// Errors go to stderr with exit code 1.
'use strict';

const { FlowProducer, QueueEvents, Worker } = require('bullmq');

const QUEUE = 'bench';
const RUN_TIMEOUT_MS = 60000;
const STARTUP_TIMEOUT_MS = 15000;
const CLOSE_TIMEOUT_MS = 5000;

function usage(msg) {
  throw new Error(`${msg}\nusage: node flow.js --redis HOST:PORT --shape children1000|tree3 [--timed N] [--concurrency C]`);
}

function parseArgs(argv) {
  const opts = { redis: '', shape: '', timed: 5, concurrency: 10 };
  for (let i = 0; i < argv.length; i++) {
    let name = argv[i];
    let value;
    const eq = name.indexOf('=');
    if (name.startsWith('--') && eq > 0) {
      value = name.slice(eq + 1);
      name = name.slice(0, eq);
    } else {
      value = argv[++i];
    }
    if (value === undefined) usage(`missing value for ${name}`);
    switch (name) {
      case '--redis': opts.redis = value; break;
      case '--shape': opts.shape = value; break;
      case '--timed': opts.timed = intArg(name, value, 1); break;
      case '--concurrency': opts.concurrency = intArg(name, value, 1); break;
      default: usage(`unknown argument ${name}`);
    }
  }
  if (!opts.redis) usage('--redis is required');
  const m = /^(.*):(\d+)$/.exec(opts.redis);
  if (!m) usage(`--redis ${opts.redis}: want HOST:PORT`);
  opts.host = m[1].replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
  opts.port = Number(m[2]);
  if (!SHAPES[opts.shape]) usage(`--shape ${JSON.stringify(opts.shape)}: want one of ${Object.keys(SHAPES).join(', ')}`);
  return opts;
}

function intArg(name, value, min) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) usage(`${name} ${value}: want an integer >= ${min}`);
  return n;
}

// Each shape builds a fresh FlowJob tree and knows its node count and the
// root's expected return value.
const SHAPES = {
  children1000: () => {
    const children = [];
    for (let i = 0; i < 1000; i++) {
      children.push({ name: 'add', queueName: QUEUE, data: { args: [i + 1, i + 1] } });
    }
    return { tree: { name: 'sum', queueName: QUEUE, data: {}, children }, nodes: 1001, want: 1001000 };
  },
  tree3: () => {
    const mids = [];
    for (let i = 0; i < 10; i++) {
      const leaves = [];
      for (let j = 0; j < 10; j++) {
        leaves.push({ name: 'add', queueName: QUEUE, data: { args: [1, 1] } });
      }
      mids.push({ name: 'sum', queueName: QUEUE, data: {}, children: leaves });
    }
    return { tree: { name: 'sum', queueName: QUEUE, data: {}, children: mids }, nodes: 111, want: 200 };
  },
};

function sumArgs(args) {
  if (args === undefined || args === null) return 0;
  if (!Array.isArray(args)) throw new Error(`args is not an array: ${JSON.stringify(args)}`);
  let s = 0;
  for (const a of args) {
    if (!Number.isInteger(a)) throw new Error(`arg is not an integer: ${JSON.stringify(a)}`);
    s += a;
  }
  return s;
}

async function processor(job) {
  switch (job.name) {
    case 'add':
      return sumArgs(job.data.args);
    case 'sum': {
      const values = (await job.getChildrenValues()) || {};
      let s = sumArgs(job.data.args);
      for (const v of Object.values(values)) {
        if (!Number.isInteger(v)) throw new Error(`child value is not an integer: ${JSON.stringify(v)}`);
        s += v;
      }
      return s;
    }
    default:
      throw new Error(`unknown job name ${job.name}`);
  }
}

// withTimeout rejects with msg if p has not settled within ms.
function withTimeout(p, ms, msg) {
  let timer;
  return Promise.race([
    p,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(msg)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const connection = { host: opts.host, port: opts.port };
  const prefix = `bench-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const shape = SHAPES[opts.shape];

  const closers = [];
  // fatal receives errors raised outside the awaited chain (worker failures,
  // connection errors) and makes the current wait fail at once.
  let fatal;
  const fatalP = new Promise((_, reject) => { fatal = reject; });
  fatalP.catch(() => {});
  let failed = false;

  try {
    const worker = new Worker(QUEUE, processor, { connection, prefix, concurrency: opts.concurrency });
    closers.push(() => worker.close());
    worker.on('error', (err) => fatal(new Error(`worker: ${err.message}`)));
    worker.on('failed', (job, err) => fatal(new Error(`job ${job && job.name} ${job && job.id} failed: ${err && err.message}`)));

    // The event stream is empty under a fresh prefix, so reading it from the
    // start ('0-0' instead of the default '$') loses nothing even if a root
    // completed before QueueEvents issued its first XREAD.
    const queueEvents = new QueueEvents(QUEUE, { connection, prefix, lastEventId: '0-0' });
    closers.push(() => queueEvents.close());
    queueEvents.on('error', (err) => fatal(new Error(`queue events: ${err.message}`)));

    const flowProducer = new FlowProducer({ connection, prefix });
    closers.push(() => flowProducer.close());
    flowProducer.on('error', (err) => fatal(new Error(`flow producer: ${err.message}`)));

    await Promise.race([
      fatalP,
      withTimeout(
        Promise.all([worker.waitUntilReady(), queueEvents.waitUntilReady(), flowProducer.waitUntilReady()]),
        STARTUP_TIMEOUT_MS,
        `could not connect to Redis at ${opts.redis} within ${STARTUP_TIMEOUT_MS} ms`),
    ]);

    const runs = opts.timed + 1;
    for (let r = 0; r < runs; r++) {
      const { tree, nodes, want } = shape();
      const t0 = process.hrtime.bigint();
      const got = await Promise.race([fatalP, (async () => {
        const { job } = await flowProducer.add(tree);
        return job.waitUntilFinished(queueEvents, RUN_TIMEOUT_MS);
      })()]).catch((err) => {
        throw new Error(`${opts.shape} run ${r}${r === 0 ? ' (warm-up)' : ''}: ${err.message}`);
      });
      const t1 = process.hrtime.bigint();
      if (got !== want) {
        throw new Error(`${opts.shape} run ${r}${r === 0 ? ' (warm-up)' : ''}: root returned ${JSON.stringify(got)}, want ${want}`);
      }
      if (r > 0) {
        const ms = Number(t1 - t0) / 1e6;
        process.stdout.write(JSON.stringify({ shape: opts.shape, nodes, ms: Math.round(ms * 1000) / 1000 }) + '\n');
      }
    }
    process.stdout.write(JSON.stringify({ done: true, runs, nodes_per_run: shape().nodes }) + '\n');
  } catch (err) {
    // Exit at once: closing half-connected clients only adds noise (ioredis
    // errors) after the message; the connections end with the process.
    process.stderr.write(`flow.js: ${err && err.message ? err.message : err}\n`);
    process.exit(1);
  }
  // Close everything at once (the worker waits for its active jobs); a hung
  // close must not keep the process alive forever.
  try {
    const results = await withTimeout(
      Promise.allSettled(closers.map((close) => Promise.resolve().then(close))),
      CLOSE_TIMEOUT_MS, `closing timed out after ${CLOSE_TIMEOUT_MS} ms`);
    const errs = results.filter((r) => r.status === 'rejected').map((r) => r.reason && r.reason.message);
    if (errs.length) throw new Error(errs.join('; '));
  } catch (err) {
    process.stderr.write(`flow.js: closing: ${err.message}\n`);
    failed = true;
  }
  return failed;
}

main().then(
  // On failure, exit at once rather than wait for connections still retrying.
  (failed) => { if (failed) process.exit(1); },
  (err) => {
    process.stderr.write(`flow.js: ${err && err.message ? err.message : err}\n`);
    process.exit(1);
  },
);
