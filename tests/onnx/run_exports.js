#!/usr/bin/env node
// Runs each ONNX model that xgrad's onnx_export suite wrote in ONNX Runtime (npm onnxruntime-node,
// installed in tests/onnx/runtime by tools/setup) and compares every output with xgrad's values.
//
//   node tests/onnx/run_exports.js DIR
//
// DIR holds one directory per case: model.onnx and case.json, {"dtype": "float32"|"float64",
// "feeds": {name: {"dtype", "shape", "data"}}, "expected": {name: {"shape", "data"}}}, numbers
// as JSON numbers, non-finite ones as "nan", "inf", "-inf" (as xgrad's JSON writes them).
// An output agrees when its shape is xgrad's, it has NaN exactly where xgrad has NaN, the same
// infinities, and every other element is within tol * max(1, max|xgrad's finite values|) of
// xgrad's: tol 1e-12 in float64, 2e-5 in float32, relative to the array's largest magnitude
// (absolute where that is below 1: a gradient that is 0 up to rounding, as a key bias's).
// Prints one line per case; exit 0 if every output of every case agrees, 1 otherwise, 77 (ctest's
// skip) when onnxruntime-node is not installed.
'use strict';
const fs = require('fs');
const path = require('path');

const runtime = path.join(__dirname, 'runtime', 'node_modules', 'onnxruntime-node');
let ort;
try {
  ort = require(runtime);
} catch (e) {
  console.log(`SKIPPED: onnxruntime-node is not installed in ${path.dirname(path.dirname(runtime))} ` +
              `(tools/setup test installs it: npm ci --ignore-scripts there): ${e.message.split('\n')[0]}`);
  process.exit(77);
}

const tolerance = {float64: 1e-12, float32: 2e-5};

function number(x) {
  if (typeof x === 'number') return x;
  if (x === 'nan') return NaN;
  if (x === 'inf') return Infinity;
  if (x === '-inf') return -Infinity;
  throw new Error(`not a number: ${JSON.stringify(x)}`);
}

function tensor(spec) {
  const data = spec.data.map(number);
  switch (spec.dtype) {
    case 'float32': return new ort.Tensor('float32', Float32Array.from(data), spec.shape);
    case 'float64': return new ort.Tensor('float64', Float64Array.from(data), spec.shape);
    case 'int64': return new ort.Tensor('int64', BigInt64Array.from(data.map(BigInt)), spec.shape);
    default: throw new Error(`feed dtype ${spec.dtype}`);
  }
}

// The worst error of `got` against `want`, relative to want's largest finite magnitude, or a
// string saying why they disagree outright.
function compare(got, want) {
  const shape = Array.from(got.dims);
  if (JSON.stringify(shape) !== JSON.stringify(want.shape)) {
    return {fail: `shape [${shape}] is not xgrad's [${want.shape}]`};
  }
  const w = want.data.map(number);
  let scale = 0;
  for (const x of w) if (Number.isFinite(x)) scale = Math.max(scale, Math.abs(x));
  let worst = 0, at = -1;
  for (let i = 0; i < w.length; ++i) {
    const a = Number(got.data[i]), b = w[i];
    if (Number.isNaN(b) || Number.isNaN(a)) {
      if (Number.isNaN(a) !== Number.isNaN(b)) return {fail: `element ${i} is ${a}, xgrad's ${b}`};
      continue;
    }
    if (!Number.isFinite(b) || !Number.isFinite(a)) {
      if (a !== b) return {fail: `element ${i} is ${a}, xgrad's ${b}`};
      continue;
    }
    const err = Math.abs(a - b) / Math.max(scale, 1);
    if (err > worst) { worst = err; at = i; }
  }
  return {worst, at, scale};
}

async function runCase(dir) {
  const spec = JSON.parse(fs.readFileSync(path.join(dir, 'case.json'), 'utf8'));
  // ONNX Runtime's extended optimizations fuse MatMul and a scalar Mul into com.microsoft's
  // FusedMatMul, whose alpha is a float attribute: in a float64 model that rounds the scale to
  // float32 (errors of 1e-8). float64 models run with the basic optimizations (docs/onnx.md).
  const level = process.env.XGRAD_ORT_LEVEL || (spec.dtype === 'float64' ? 'basic' : 'all');
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {graphOptimizationLevel: level, logSeverityLevel: 3});
  const feeds = {};
  for (const [name, value] of Object.entries(spec.feeds)) feeds[name] = tensor(value);
  const start = process.hrtime.bigint();
  const results = await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const tol = tolerance[spec.dtype];
  let ok = true, worst = 0, worstName = '';
  const problems = [];
  for (const [name, want] of Object.entries(spec.expected)) {
    if (!(name in results)) {
      problems.push(`${name}: not an output of the model`);
      ok = false;
      continue;
    }
    const r = compare(results[name], want);
    if (r.fail) {
      problems.push(`${name}: ${r.fail}`);
      ok = false;
    } else {
      if (r.worst > tol) {
        problems.push(`${name}: element ${r.at} is ${Number(results[name].data[r.at])}, xgrad's ` +
                      `${number(want.data[r.at])}: error ${r.worst.toExponential(2)} of ${r.scale} > ${tol}`);
        ok = false;
      }
      if (r.worst >= worst) { worst = r.worst; worstName = name; }
    }
  }
  const outputs = Object.keys(spec.expected).length;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${path.basename(dir)} (${spec.dtype}): ${outputs} outputs, worst error ` +
              `${worst.toExponential(2)} (${worstName}), tolerance ${tol}, run ${ms.toFixed(1)} ms`);
  for (const p of problems) console.log(`     ${p}`);
  return ok;
}

async function main() {
  const root = process.argv[2];
  if (!root) {
    console.error('usage: node tests/onnx/run_exports.js DIR');
    process.exit(2);
  }
  const cases = fs.readdirSync(root).filter((d) => fs.existsSync(path.join(root, d, 'case.json'))).sort();
  if (cases.length === 0) {
    console.error(`${root}: no cases (run the onnx_export suite first)`);
    process.exit(1);
  }
  let failed = 0;
  for (const c of cases) {
    try {
      if (!(await runCase(path.join(root, c)))) ++failed;
    } catch (e) {
      console.log(`FAIL ${c}: ${e.message.split('\n')[0]}`);
      ++failed;
    }
  }
  console.log(`${cases.length - failed} of ${cases.length} cases agree with xgrad (onnxruntime-node ${ort.env.versions.common})`);
  process.exit(failed ? 1 : 0);
}

main();
