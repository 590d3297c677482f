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
// tensor included). Its last result must agree with expected.npy: max |got - want| / max |want|
// at most 1e-12 in float64 (exact up to the order of the sums), 1e-5 in float32.
// Prints one JSON line per model, {model: "<case>/<name>", median_ms, max_error}; exit 0 if every
// result agrees, 1 otherwise, 77 (a skip) when onnxruntime-node is not installed.
'use strict';
const fs = require('fs');
const path = require('path');

const runtime = path.join(__dirname, '..', 'tests', 'onnx', 'runtime', 'node_modules', 'onnxruntime-node');
let ort;
try {
  ort = require(runtime);
} catch (e) {
  console.log(`SKIPPED: onnxruntime-node is not installed in ${path.dirname(path.dirname(runtime))} ` +
              `(tools/setup test installs it: npm ci --ignore-scripts there): ${e.message.split('\n')[0]}`);
  process.exit(77);
}

const tolerance = {float32: 1e-5, float64: 1e-12};

// A little-endian .npy file (versions 1 to 3, C order) as {dtype, shape, data}.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const headerLen = buf[6] === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (buf[6] === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', start - headerLen, start);
  const descr = /'descr': *'([^']*)'/.exec(header)[1];
  const shape = /'shape': *\(([^)]*)\)/.exec(header)[1].split(',').filter((s) => s.trim()).map(Number);
  if (/'fortran_order': *True/.test(header)) throw new Error(`${file}: Fortran order`);
  const types = {'<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array]};
  if (!(descr in types)) throw new Error(`${file}: dtype ${descr}`);
  const [dtype, Type] = types[descr];
  const bytes = buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length);  // a copy, aligned
  return {dtype, shape, data: new Type(bytes)};
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// max |got - want| / max |want| (absolute when want is all zeros).
function maxError(got, want) {
  let scale = 0, worst = 0;
  for (let i = 0; i < want.length; ++i) scale = Math.max(scale, Math.abs(want[i]));
  for (let i = 0; i < want.length; ++i) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  return worst / (scale || 1);
}

async function timeModel(dir, file, data) {
  const session = await ort.InferenceSession.create(path.join(dir, file), {intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3});
  const feeds = {ids: new ort.Tensor('int64', data.ids.data, data.ids.shape),
                 grad: new ort.Tensor(data.grad.dtype, data.grad.data, data.grad.shape)};
  let result;
  for (let i = 0; i < 5; ++i) result = await session.run(feeds);
  const times = [];
  for (let i = 0; i < 50; ++i) {
    const start = process.hrtime.bigint();
    result = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  await session.release();
  const got = result.grad_table;
  if (JSON.stringify(Array.from(got.dims)) !== JSON.stringify(data.expected.shape)) {
    throw new Error(`grad_table is [${got.dims}], not [${data.expected.shape}]`);
  }
  return {median_ms: +median(times).toFixed(4), max_error: maxError(got.data, data.expected.data)};
}

async function main() {
  const root = process.argv[2];
  if (!root) {
    console.error('usage: node bench/onnx_time.js DIR');
    process.exit(2);
  }
  const cases = fs.readdirSync(root).filter((c) => fs.existsSync(path.join(root, c, 'expected.npy'))).sort();
  if (cases.length === 0) {
    console.error(`${root}: no cases (run bench/onnx_embedding_vjp.py)`);
    process.exit(1);
  }
  let failed = 0;
  for (const c of cases) {
    const dir = path.join(root, c);
    const data = {};
    for (const key of ['ids', 'grad', 'expected']) data[key] = readNpy(path.join(dir, `${key}.npy`));
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.onnx')).sort()) {
      const model = `${c}/${path.basename(file, '.onnx')}`;
      try {
        const r = await timeModel(dir, file, data);
        console.log(JSON.stringify({model, ...r}));
        if (!(r.max_error <= tolerance[data.grad.dtype])) {
          console.error(`FAIL ${model}: error ${r.max_error.toExponential(2)} > ${tolerance[data.grad.dtype]}`);
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
