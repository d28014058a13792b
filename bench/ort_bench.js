#!/usr/bin/env node
// bench/ort_bench.js — ONNX Runtime's side of bench/ort_compare: the median time of N forward
// passes of one ONNX model on random inputs, printed as one line:
//   ort MODEL batch B threads T median_ms X fastest_ms Y
// Usage: node bench/ort_bench.js MODEL.onnx [--batch B] [--threads T] [--steps N]
// The session is ONNX Runtime at its best on a CPU: all graph optimizations, T intra-op
// threads, one inter-op thread, sequential execution. Dimensions that are not fixed numbers
// (a symbolic batch) take B; fixed ones are kept. Warm-up runs (a tenth of N, at least 10) come
// before the timed ones so first-touch page faults are not measured.
'use strict';
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

function parseArgs(argv) {
  const a = {model: null, batch: 1, threads: 1, steps: 300};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--help' || k === '-h') {
      console.log('usage: node bench/ort_bench.js MODEL.onnx [--batch B] [--threads T] [--steps N]');
      process.exit(0);
    } else if (k === '--batch') a.batch = Number(argv[++i]);
    else if (k === '--threads') a.threads = Number(argv[++i]);
    else if (k === '--steps') a.steps = Number(argv[++i]);
    else if (a.model === null) a.model = k;
    else throw new Error('unexpected argument ' + k);
  }
  if (!a.model) throw new Error('no model given (--help)');
  return a;
}

// Random data for one input: floats in [-1, 1), integers in [0, 4) (token ids, indices).
function makeTensor(meta, batch) {
  const dims = meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : batch));
  const n = dims.reduce((x, y) => x * y, 1);
  switch (meta.type) {
    case 'float32': {
      const v = new Float32Array(n);
      for (let i = 0; i < n; i++) v[i] = Math.random() * 2 - 1;
      return new ort.Tensor('float32', v, dims);
    }
    case 'int64': {
      const v = new BigInt64Array(n);
      for (let i = 0; i < n; i++) v[i] = BigInt(Math.floor(Math.random() * 4));
      return new ort.Tensor('int64', v, dims);
    }
    case 'int32': {
      const v = new Int32Array(n);
      for (let i = 0; i < n; i++) v[i] = Math.floor(Math.random() * 4);
      return new ort.Tensor('int32', v, dims);
    }
    default:
      throw new Error('input ' + meta.name + ': type ' + meta.type + ' not handled');
  }
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const session = await ort.InferenceSession.create(a.model, {
    graphOptimizationLevel: 'all',
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const feeds = {};
  for (const meta of session.inputMetadata) {
    if (!meta.isTensor) throw new Error('input ' + meta.name + ' is not a tensor');
    feeds[meta.name] = makeTensor(meta, a.batch);
  }
  const warm = Math.max(10, Math.floor(a.steps / 10));
  for (let i = 0; i < warm; i++) await session.run(feeds);
  const ts = [];
  for (let i = 0; i < a.steps; i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    ts.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  ts.sort((x, y) => x - y);
  const med = ts[Math.floor(ts.length / 2)];
  console.log(`ort ${path.basename(a.model)} batch ${a.batch} threads ${a.threads} ` +
              `median_ms ${med.toFixed(4)} fastest_ms ${ts[0].toFixed(4)}`);
}

main().catch((e) => {
  console.error('ort_bench: ' + e.message);
  process.exit(1);
});
