#!/usr/bin/env node
// Runs an ONNX model in ONNX Runtime (npm onnxruntime-node) and, given the xgrad graph file it was
// written from, compares every output with xgrad's values.
//
//   node tools/ort_run.js MODEL.onnx [--graph GRAPH.json] [--input NAME=FILE]... [--runs N]
//                         [--level disabled|basic|extended|all]
//
//   --graph GRAPH.json  the graph file (`xgrad export`, `xgrad import`, with every value) the model
//                       was written from (`xgrad onnx`): its leaves feed the model's inputs, and each
//                       output is compared with the graph's value of the same name (a gradient
//                       grad_<name> with the graph's gradient <name>)
//   --input NAME=FILE   the value of input NAME, from a .npy file (float32, float64, int32, int64,
//                       bool) or a .json nested array; over the graph file's value
//   --runs N            run N times more and print the median time of a run
//   --level L           ONNX Runtime's graph optimizations (default all, its own default)
//
// Prints one line per output: its shape and, with --graph, the worst error against xgrad's value
// relative to the array's largest magnitude (absolute below 1), or its first values. ONNX Runtime
// is looked up from the current directory, then in tests/onnx/runtime (where tools/setup test
// installs it). Exit status: 0, 1 an output differs from xgrad's beyond the tolerance (1e-12 in
// float64, 2e-5 in float32), 2 bad usage or input.
'use strict';
const fs = require('fs');
const path = require('path');

// onnxruntime-node from the usual places; null when it is not installed.
function loadRuntime() {
  for (const from of [process.cwd(), path.join(__dirname, '..', 'tests', 'onnx', 'runtime')]) {
    try {
      return require(require.resolve('onnxruntime-node', {paths: [from]}));
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  return null;
}

// A JSON number, or one of xgrad's strings for the non-finite ones.
function number(x) {
  if (typeof x === 'number') return x;
  if (x === 'nan') return NaN;
  if (x === 'inf') return Infinity;
  if (x === '-inf') return -Infinity;
  throw new Error(`not a number: ${JSON.stringify(x)}`);
}

const tolerance = {float32: 2e-5, float64: 1e-12};

// The worst error of `got` (an ONNX Runtime tensor) against want = {shape, data}, relative to
// want's largest finite magnitude (absolute where that is below 1): {worst, at, scale}, or
// {fail} when the shapes differ, NaN sits elsewhere or an infinity differs.
function compare(got, want) {
  const shape = Array.from(got.dims, Number);
  if (JSON.stringify(shape) !== JSON.stringify(want.shape)) return {fail: `shape [${shape}] is not xgrad's [${want.shape}]`};
  const w = want.data.map(number);
  let scale = 0;
  for (const x of w) if (Number.isFinite(x)) scale = Math.max(scale, Math.abs(x));
  let worst = 0, at = -1;
  for (let i = 0; i < w.length; ++i) {
    const a = Number(got.data[i]), b = w[i];
    if (Number.isNaN(a) || Number.isNaN(b) || !Number.isFinite(a) || !Number.isFinite(b)) {
      if (!(Number.isNaN(a) && Number.isNaN(b)) && a !== b) return {fail: `element ${i} is ${a}, xgrad's ${b}`};
      continue;
    }
    const err = Math.abs(a - b) / Math.max(scale, 1);
    if (err > worst) { worst = err; at = i; }
  }
  return {worst, at, scale};
}

// An ONNX Runtime tensor of `type` (float32, float64, int64) from row-major values and a shape.
function tensorOf(ort, type, data, shape) {
  const values = data.map(number);
  if (type === 'int64') return new ort.Tensor('int64', BigInt64Array.from(values.map(BigInt)), shape);
  if (type === 'bool') return new ort.Tensor('bool', Uint8Array.from(values.map((x) => (x ? 1 : 0))), shape);
  return new ort.Tensor(type, type === 'float32' ? Float32Array.from(values) : Float64Array.from(values), shape);
}

// {data, shape} of a .npy file (C order; float32/64, int32/64, bool) or a .json nested array.
function readArray(file) {
  if (file.endsWith('.json')) {
    const shape = [];
    for (let a = JSON.parse(fs.readFileSync(file, 'utf8')); Array.isArray(a); a = a[0]) shape.push(a.length);
    return {data: JSON.parse(fs.readFileSync(file, 'utf8'), (k, v) => v).flat(Infinity), shape};
  }
  const b = fs.readFileSync(file);
  if (b.length < 10 || b.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const long = b[6] >= 2;
  const headerLength = long ? b.readUInt32LE(8) : b.readUInt16LE(8);
  const start = (long ? 12 : 10) + headerLength;
  const header = b.toString('latin1', long ? 12 : 10, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header), shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape || /'fortran_order':\s*True/.test(header)) throw new Error(`${file}: a C-order .npy header is expected`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const n = dims.reduce((p, d) => p * d, 1);
  const readers = {'<f4': [4, (o) => b.readFloatLE(o)], '<f8': [8, (o) => b.readDoubleLE(o)], '<i4': [4, (o) => b.readInt32LE(o)],
                   '<i8': [8, (o) => Number(b.readBigInt64LE(o))], '|b1': [1, (o) => b[o]]};
  const reader = readers[descr[1]];
  if (!reader) throw new Error(`${file}: dtype '${descr[1]}' is not read here`);
  if (b.length !== start + n * reader[0]) throw new Error(`${file}: ${b.length - start} data bytes for ${n} elements of ${descr[1]}`);
  const data = new Array(n);
  for (let i = 0; i < n; ++i) data[i] = reader[1](start + i * reader[0]);
  return {data, shape: dims};
}

// The graph file's leaves by name ({data, shape, int}) and its named values ({name: {shape, data}},
// gradients as grad_<name>), from `xgrad export` / `xgrad import` JSON with every value.
function readGraph(file) {
  const g = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (g.format !== 'xgrad-graph') throw new Error(`${file}: not an xgrad graph file`);
  const leaves = {}, named = {};
  for (const n of g.nodes) {
    if (['input', 'indices', 'parameter'].includes(n.op) && n.outputs[0].data) {
      leaves[n.name] = {data: n.outputs[0].data, shape: n.outputs[0].shape, int: n.op === 'indices'};
    }
  }
  const value = (slot, name) => {
    const out = g.nodes[slot[0]].outputs[slot[1]];
    if (!out.data) throw new Error(`${file}: no stored value of ${name}: export it with --values all`);
    return {shape: out.shape, data: out.data};
  };
  for (const [name, slot] of Object.entries(g.outputs || {})) named[name] = value(slot, name);
  for (const [name, slot] of Object.entries(g.grads || {})) named[`grad_${name}`] = value(slot, `gradient ${name}`);
  return {dtype: g.dtype, leaves, named};
}

// The case directories of the directory named by a script's argument argv[2], each one holding
// `marker`, sorted; exits 2 with the script's usage line without the argument, 1 when there are
// none (saying what makes them).
function caseDirs(argv, script, marker, makes) {
  const root = argv[2];
  if (!root) {
    console.error(`usage: node ${script} DIR`);
    process.exit(2);
  }
  const cases = fs.readdirSync(root).filter((c) => fs.existsSync(path.join(root, c, marker))).sort();
  if (cases.length === 0) {
    console.error(`${root}: no cases (${makes})`);
    process.exit(1);
  }
  return {root, cases};
}

function usage(message) {
  console.error(`ort_run: ${message}\nusage: node tools/ort_run.js MODEL.onnx [--graph GRAPH.json] [--input NAME=FILE]... [--runs N] [--level L]`);
  process.exit(2);
}

async function main(argv) {
  const inputs = {};
  let model, graph, runs = 0, level;
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i], value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    if (a === '--graph') graph = value();
    else if (a === '--runs') runs = Number(value());
    else if (a === '--level') level = value();
    else if (a === '--input') {
      const spec = value(), eq = spec.indexOf('=');
      if (eq <= 0) usage(`--input needs NAME=FILE, not '${spec}'`);
      inputs[spec.slice(0, eq)] = spec.slice(eq + 1);
    } else if (a.startsWith('-')) usage(`unknown option '${a}'`);
    else if (model === undefined) model = a;
    else usage(`a second model '${a}'`);
  }
  if (!model) usage('missing MODEL.onnx');
  if (!Number.isInteger(runs) || runs < 0) usage('--runs needs a count');
  const ort = loadRuntime();
  if (!ort) usage('onnxruntime-node is not installed (npm install --ignore-scripts onnxruntime-node@1.30.0)');
  const g = graph ? readGraph(graph) : null;
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: level || 'all', logSeverityLevel: 3});
  const feeds = {};
  for (const meta of session.inputMetadata) {
    const name = meta.name, type = meta.type;
    const v = inputs[name] ? readArray(inputs[name]) : g && g.leaves[name];
    if (!v) usage(`no value for input '${name}': give --input ${name}=FILE or --graph`);
    feeds[name] = tensorOf(ort, type, v.data, v.shape);
  }
  let results = await session.run(feeds);
  let failed = false;
  for (const name of session.outputNames) {
    const r = results[name], shape = `(${Array.from(r.dims).join(', ')})`;
    if (g && g.named[name]) {
      const c = compare(r, g.named[name]), tol = tolerance[g.dtype];
      if (c.fail || c.worst > tol) failed = true;
      console.log(`${name} ${shape}: ${c.fail ? `differs: ${c.fail}` : `worst error ${c.worst.toExponential(2)}${c.worst > tol ? ` > ${tol}` : ''}`}`);
    } else {
      const first = Array.from(r.data.slice(0, 6), Number).map((x) => +x.toPrecision(6));
      console.log(`${name} ${shape}: [${first.join(', ')}${r.data.length > 6 ? ', ...' : ''}]`);
    }
  }
  if (runs > 0) {
    const times = [];
    for (let i = 0; i < runs; ++i) {
      const t0 = process.hrtime.bigint();
      results = await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(`median of ${runs} runs: ${times[runs >> 1].toFixed(3)} ms (onnxruntime-node ${ort.env.versions.common})`);
  }
  process.exit(failed ? 1 : 0);
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((e) => {
    console.error(`ort_run: ${e.message.split('\n')[0]}`);
    process.exit(2);
  });
}

module.exports = {loadRuntime, number, compare, tensorOf, tolerance, readArray, caseDirs};
