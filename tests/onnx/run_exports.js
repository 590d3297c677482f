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
// Each model runs at ONNX Runtime's four optimization levels (disabled, basic, extended, all: its
// default), or at XGRAD_ORT_LEVEL only. (tools/ort_run.js's comparison, which users run on their
// own models.) Prints one line per case;
// exit 0 if every output of every case agrees, 1 otherwise, 77 (ctest's skip) when
// onnxruntime-node is not installed.
'use strict';
const fs = require('fs');
const path = require('path');

const {loadRuntime, number, compare, tensorOf, tolerance, caseDirs} = require('../../tools/ort_run.js');
const ort = loadRuntime();
if (!ort) {
  console.log('SKIPPED: onnxruntime-node is not installed in tests/onnx/runtime (tools/setup test installs it: ' +
              'npm ci --ignore-scripts there)');
  process.exit(77);
}

// ONNX Runtime's optimization levels: each model runs at every one (its default is all), or
// at XGRAD_ORT_LEVEL alone.
const levels = process.env.XGRAD_ORT_LEVEL ? [process.env.XGRAD_ORT_LEVEL] : ['disabled', 'basic', 'extended', 'all'];

async function runCase(dir) {
  const spec = JSON.parse(fs.readFileSync(path.join(dir, 'case.json'), 'utf8'));
  const feeds = {};
  for (const [name, value] of Object.entries(spec.feeds)) feeds[name] = tensorOf(ort, value.dtype, value.data, value.shape);
  const tol = tolerance[spec.dtype];
  let ok = true, worst = 0, worstName = '', ms = 0;
  const problems = [];
  for (const level of levels) {
    const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {graphOptimizationLevel: level, logSeverityLevel: 3});
    const start = process.hrtime.bigint();
    const results = await session.run(feeds);
    if (level === 'all' || levels.length === 1) ms = Number(process.hrtime.bigint() - start) / 1e6;
    for (const [name, want] of Object.entries(spec.expected)) {
      if (!(name in results)) {
        problems.push(`${level}: ${name}: not an output of the model`);
        ok = false;
        continue;
      }
      const r = compare(results[name], want);
      if (r.fail) {
        problems.push(`${level}: ${name}: ${r.fail}`);
        ok = false;
        continue;
      }
      if (r.worst > tol) {
        problems.push(`${level}: ${name}: element ${r.at} is ${Number(results[name].data[r.at])}, xgrad's ` +
                      `${number(want.data[r.at])}: error ${r.worst.toExponential(2)} of ${r.scale} > ${tol}`);
        ok = false;
      }
      if (r.worst >= worst) { worst = r.worst; worstName = `${name}, ${level}`; }
    }
  }
  const outputs = Object.keys(spec.expected).length;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${path.basename(dir)} (${spec.dtype}): ${outputs} outputs at ${levels.length} ` +
              `optimization levels, worst error ${worst.toExponential(2)} (${worstName}), tolerance ${tol}, run ${ms.toFixed(1)} ms`);
  for (const p of problems) console.log(`     ${p}`);
  return ok;
}

async function main() {
  const {root, cases} = caseDirs(process.argv, 'tests/onnx/run_exports.js', 'case.json', 'run the onnx_export suite first');
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
