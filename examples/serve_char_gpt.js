#!/usr/bin/env node
// Serves a char_gpt model that `char_gpt --onnx MODEL.onnx` wrote, in ONNX Runtime (npm
// onnxruntime-node), without xgrad: generates text one character at a time, as char_gpt's own
// --sample does (the same sampling from the same seed, so a float64 model prints the same text).
//
//   node examples/serve_char_gpt.js MODEL.onnx [--chars N] [--temperature X] [--seed S]
//
// The model maps ids (1, block) int64 to logits (1, block, vocab) and outputs chars (vocab), the
// byte of each token. Each step feeds the last `block` ids (causal attention: the logits at
// position i depend on ids 0..i only) and draws the next token from softmax(logits / X) at the
// last position. ONNX Runtime is looked up from the current directory, then in tests/onnx/runtime.
'use strict';
const {loadRuntime} = require('../tools/ort_run.js');

// char_gpt's generator: splitmix64 (examples/char_gpt.cpp, SplitMix64).
function splitmix64(seed) {
  const mask = (1n << 64n) - 1n;
  let state = BigInt(seed) & mask;
  return () => {
    state = (state + 0x9e3779b97f4a7c15n) & mask;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
    return z ^ (z >> 31n);
  };
}

async function main(argv) {
  const options = {'--chars': 200, '--temperature': 1, '--seed': 1};
  let model;
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] in options && i + 1 < argv.length) options[argv[i]] = Number(argv[++i]);
    else if (!argv[i].startsWith('-') && !model) model = argv[i];
    else throw new Error(`unknown or incomplete option '${argv[i]}'`);
  }
  const n = options['--chars'], temperature = options['--temperature'];
  if (!model || !Number.isInteger(n) || n < 0 || !(temperature > 0) || !Number.isInteger(options['--seed'])) {
    throw new Error('usage: node examples/serve_char_gpt.js MODEL.onnx [--chars N] [--temperature X] [--seed S]');
  }
  const ort = loadRuntime();
  if (!ort) throw new Error('onnxruntime-node is not installed (npm install --ignore-scripts onnxruntime-node@1.30.0)');
  const session = await ort.InferenceSession.create(model, {logSeverityLevel: 3});
  const block = Number(session.inputMetadata.find((m) => m.name === 'ids').shape[1]);
  const ids = new BigInt64Array(block);
  const run = async () => session.run({ids: new ort.Tensor('int64', ids, [1, block])});
  const chars = Array.from((await run()).chars.data, Number);  // bytes
  const vocab = chars.length;
  const next = splitmix64(options['--seed'] + 2);  // char_gpt samples with seed + 2
  const newline = chars.indexOf(10);
  const context = [newline < 0 ? 0 : newline];
  const text = [];
  for (let k = 0; k < n; ++k) {
    const len = Math.min(context.length, block);
    for (let t = 0; t < len; ++t) ids[t] = BigInt(context[context.length - len + t]);
    const logits = (await run()).logits.data;
    const row = (len - 1) * vocab;
    let hi = -Infinity, total = 0;
    for (let v = 0; v < vocab; ++v) hi = Math.max(hi, logits[row + v] / temperature);
    const p = new Array(vocab);
    for (let v = 0; v < vocab; ++v) total += p[v] = Math.exp(logits[row + v] / temperature - hi);
    let u = Number(next() >> 11n) * 2 ** -53 * total;
    let pick = 0;
    while (pick + 1 < vocab && u >= p[pick]) u -= p[pick++];
    context.push(pick);
    text.push(chars[pick]);
  }
  process.stdout.write(Buffer.concat([Buffer.from(`--- ${n} sampled characters (temperature ${temperature}) ---\n`),
                                     Buffer.from(text), Buffer.from('\n---\n')]));
}

main(process.argv.slice(2)).catch((e) => {
  console.error(`serve_char_gpt: ${e.message.split('\n')[0]}`);
  process.exit(2);
});
