#!/usr/bin/env node
// Times each model that bench/onnx_embedding_vjp.py wrote in ONNX Runtime (npm onnxruntime-node,
// installed in tests/onnx/runtime by tools/setup) and checks its result (issue 21).
//
//   node bench/onnx_time.js DIR
//
// DIR holds one directory per case: models *.onnx with inputs `ids` (int64) and `grad` (float32
// or float64) and output `grad_table`, and ids.npy, grad.npy and expected.npy (float64). Each
// model runs in its own session with one intra-op thread and the default optimizations: 5 runs
// untimed, then 50 timed `session.run` calls (as node sees them: the output copied into a JS
// tensor included). Its last result must agree with expected.npy (tools/ort_run.js's comparison:
// relative to the largest magnitude, absolute below 1) within 1e-12 in float64 (exact up to the
// order of the sums), 1e-5 in float32.
// Prints one JSON line per model, {model: "<case>/<name>", median_ms, max_error}; exit 0 if every
// result agrees, 1 otherwise, 77 (a skip) when onnxruntime-node is not installed.
'use strict';
const fs = require('fs');
const path = require('path');

const {loadRuntime, compare, tensorOf, readArray, caseDirs} = require('../tools/ort_run.js');
const ort = loadRuntime();
if (!ort) {
  console.log('SKIPPED: onnxruntime-node is not installed (tools/setup test installs it in tests/onnx/runtime)');
  process.exit(77);
}

const tolerance = {float32: 1e-5, float64: 1e-12};

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function timeModel(dir, file, data) {
  const session = await ort.InferenceSession.create(path.join(dir, file), {intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3});
  const dtype = session.inputMetadata.find((m) => m.name === 'grad').type;
  const feeds = {ids: tensorOf(ort, 'int64', data.ids.data, data.ids.shape),
                 grad: tensorOf(ort, dtype, data.grad.data, data.grad.shape)};
  let result;
  for (let i = 0; i < 5; ++i) result = await session.run(feeds);
  const times = [];
  for (let i = 0; i < 50; ++i) {
    const start = process.hrtime.bigint();
    result = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  await session.release();
  const c = compare(result.grad_table, data.expected);
  if (c.fail) throw new Error(`grad_table: ${c.fail}`);
  return {dtype, median_ms: +median(times).toFixed(4), max_error: c.worst};
}

async function main() {
  const {root, cases} = caseDirs(process.argv, 'bench/onnx_time.js', 'expected.npy', 'run bench/onnx_embedding_vjp.py');
  let failed = 0;
  for (const c of cases) {
    const dir = path.join(root, c);
    const data = {};
    for (const key of ['ids', 'grad', 'expected']) data[key] = readArray(path.join(dir, `${key}.npy`));
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.onnx')).sort()) {
      const model = `${c}/${path.basename(file, '.onnx')}`;
      try {
        const r = await timeModel(dir, file, data);
        console.log(JSON.stringify({model, ...r}));
        if (!(r.max_error <= tolerance[r.dtype])) {
          console.error(`FAIL ${model}: error ${r.max_error.toExponential(2)} > ${tolerance[r.dtype]}`);
          ++failed;
        }
      } catch (e) {
        console.error(`FAIL ${model}: ${e.message.split('\n')[0]}`);
        ++failed;
      }
    }
  }
  process.exit(failed ? 1 : 0);
}

main();
