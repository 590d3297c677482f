#!/usr/bin/python3
"""The gradient of an embedding lookup in ONNX Runtime: ScatterND or a one-hot product (issue 21).

    /usr/bin/python3 bench/onnx_embedding_vjp.py [--out DIR]     # DIR: build/bench/onnx_embedding_vjp

For a table (V, d) read at int64 ids (B, T), the gradient of the table is grad (B, T, d) summed
into the rows of the ids. Two models of it, opset 17, IR 8, inputs `ids` and `grad`, output
`grad_table` (V, d):
  scatternd      xgrad's lowering (ops/embedding.cpp): ScatterND(Expand(0, [V, d]),
                 Unsqueeze(ids, [-1]), grad, reduction='add')
  onehot_matmul  Cast(Equal(Unsqueeze(ids, [-1]), arange(V))) reshaped (B*T, V), transposed, times
                 grad reshaped (B*T, d) (Equal and Cast rather than OneHot: ONNX Runtime has no
                 float64 OneHot kernel)
for V 65 (char_gpt's vocabulary) at ids (8, 64) and (32, 256), and V 50257 (GPT-2's) at (8, 64),
d 64, float32 and float64. DIR/<case>/ gets both models, the inputs ids.npy and grad.npy (random,
fixed seed) and expected.npy (np.add.at in float64); then bench/onnx_time.js times each model in
ONNX Runtime (npm onnxruntime-node, one thread, the median of 50 runs after 5) and checks its
result, and this prints the table. Exit 1 if a result is wrong, 77 without python3-onnx, node or
onnxruntime-node (tools/setup test installs it in tests/onnx/runtime).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"SKIPPED: python3-onnx is not installed (tools/setup test installs it): {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIME = os.path.join(ROOT, "tests", "onnx", "runtime", "node_modules", "onnxruntime-node")
CASES = [(65, 64, (8, 64)), (65, 64, (32, 256)), (50257, 64, (8, 64))]
DTYPES = {"float32": (np.float32, TensorProto.FLOAT), "float64": (np.float64, TensorProto.DOUBLE)}


def scatternd(V, d, elem):
    """xgrad's lowering: zeros by Expand of a scalar 0, ScatterND add of grad at (ids..., 1)."""
    nodes = [helper.make_node("Expand", ["zero", "table_shape"], ["zeros"]),
             helper.make_node("Unsqueeze", ["ids", "last"], ["index"]),
             helper.make_node("ScatterND", ["zeros", "index", "grad"], ["grad_table"], reduction="add")]
    return nodes, {"zero": np.array(0, elem), "table_shape": np.array([V, d], np.int64),
                   "last": np.array([-1], np.int64)}


def onehot_matmul(V, d, elem, n):
    """onehot (n, V) = Cast(ids[..., None] == arange(V)), then onehot^T (V, n) @ grad (n, d)."""
    to = DTYPES[np.dtype(elem).name][1]
    nodes = [helper.make_node("Unsqueeze", ["ids", "last"], ["ids1"]),
             helper.make_node("Equal", ["ids1", "arange"], ["hit"]),
             helper.make_node("Cast", ["hit"], ["onehot3"], to=to),
             helper.make_node("Reshape", ["onehot3", "onehot_shape"], ["onehot"]),
             helper.make_node("Transpose", ["onehot"], ["onehot_t"], perm=[1, 0]),
             helper.make_node("Reshape", ["grad", "grad_shape"], ["grad2"]),
             helper.make_node("MatMul", ["onehot_t", "grad2"], ["grad_table"])]
    return nodes, {"last": np.array([-1], np.int64), "arange": np.arange(V, dtype=np.int64),
                   "onehot_shape": np.array([n, V], np.int64), "grad_shape": np.array([n, d], np.int64)}


def save_model(path, nodes, inits, V, d, ids_shape, dtype):
    elem = DTYPES[dtype][1]
    graph = helper.make_graph(
        nodes, "embedding_vjp",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, list(ids_shape)),
         helper.make_tensor_value_info("grad", elem, list(ids_shape) + [d])],
        [helper.make_tensor_value_info("grad_table", elem, [V, d])],
        [numpy_helper.from_array(a, name) for name, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def build(out):
    """Writes every case's models and data; returns {case name: (V, d, ids shape, dtype)}."""
    rng = np.random.default_rng(21)
    cases = {}
    for V, d, ids_shape in CASES:
        for dtype, (elem, _) in DTYPES.items():
            name = f"V{V}_d{d}_{ids_shape[0]}x{ids_shape[1]}_{dtype}"
            case = os.path.join(out, name)
            os.makedirs(case, exist_ok=True)
            ids = rng.integers(0, V, size=ids_shape, dtype=np.int64)
            grad = rng.standard_normal(ids_shape + (d,)).astype(elem)
            expected = np.zeros((V, d), np.float64)
            np.add.at(expected, ids, grad.astype(np.float64))
            for key, a in (("ids", ids), ("grad", grad), ("expected", expected)):
                np.save(os.path.join(case, key + ".npy"), a)
            save_model(os.path.join(case, "scatternd.onnx"), *scatternd(V, d, elem), V, d, ids_shape, dtype)
            save_model(os.path.join(case, "onehot_matmul.onnx"), *onehot_matmul(V, d, elem, ids.size),
                       V, d, ids_shape, dtype)
            cases[name] = (V, d, ids_shape, dtype)
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/bench/onnx_embedding_vjp", help="directory of the models")
    args = ap.parse_args()
    node = shutil.which("node")
    if node is None:
        print("SKIPPED: node is not installed (tools/setup test installs nodejs)")
        sys.exit(77)
    if not os.path.isdir(RUNTIME):
        print(f"SKIPPED: onnxruntime-node is not installed in {os.path.dirname(os.path.dirname(RUNTIME))} "
              "(tools/setup test installs it: npm ci --ignore-scripts there)")
        sys.exit(77)
    cases = build(args.out)
    run = subprocess.run([node, os.path.join(ROOT, "bench", "onnx_time.js"), args.out],
                         stdout=subprocess.PIPE, text=True)
    if run.returncode != 0:
        print(run.stdout, end="")
        sys.exit(run.returncode)
    ms = {}
    for line in run.stdout.splitlines():
        r = json.loads(line)
        ms[r["model"]] = r["median_ms"]
    print("| V | d | ids | dtype | ScatterND ms | one-hot MatMul ms | one-hot / ScatterND |")
    print("|---:|---:|---|---|---:|---:|---:|")
    for name, (V, d, ids_shape, dtype) in cases.items():
        a, b = ms[f"{name}/scatternd"], ms[f"{name}/onehot_matmul"]
        print(f"| {V} | {d} | ({ids_shape[0]}, {ids_shape[1]}) | {dtype} | {a:.3g} | {b:.3g} | {b / a:.3g} |")


if __name__ == "__main__":
    main()
