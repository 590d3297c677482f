#!/usr/bin/python3
"""The spec's documented example from Python: attention's output and gradients, checked.

q = [[ln 2], [0]], k = [[1], [0]], v = [[3, 0], [0, 6]]: the scores are [[ln 2, 0], [0, 0]], the
weights [[2/3, 1/3], [1/2, 1/2]], the output [[2, 2], [1.5, 3]]; the gradients of sum(output)
have the closed forms below. Exits 1 if a value is off by more than 1e-12.

    PYTHONPATH=build/python examples/python/documented_example.py
"""

import math
import sys

import numpy as np

import xgrad

ln2 = math.log(2)
expected = {
    "weights": ("[[2/3, 1/3], [1/2, 1/2]]", [[2 / 3, 1 / 3], [1 / 2, 1 / 2]]),
    "output": ("[[2, 2], [1.5, 3]]", [[2, 2], [1.5, 3]]),
    "grad_q": ("[[-2/3], [-3/4]]", [[-2 / 3], [-3 / 4]]),
    "grad_k": ("[[-(2/3) ln 2], [(2/3) ln 2]]", [[-2 / 3 * ln2], [2 / 3 * ln2]]),
    "grad_v": ("[[7/6, 7/6], [5/6, 5/6]]", [[7 / 6, 7 / 6], [5 / 6, 5 / 6]]),
}

g = xgrad.Graph("float64")
q = g.input("q", [[ln2], [0]])
k = g.input("k", [[1], [0]])
v = g.input("v", [[3, 0], [0, 6]])
nodes = xgrad.attention_nodes(q, k, v)  # scores, weights, output: each a node to inspect
grad_q, grad_k, grad_v = xgrad.grad(nodes.output, [q, k, v])  # the gradients of sum(output)

worst = 0.0
for name, var in [("weights", nodes.weights), ("output", nodes.output), ("grad_q", grad_q), ("grad_k", grad_k),
                  ("grad_v", grad_v)]:
    formula, value = expected[name]
    error = float(np.max(np.abs(var.value - np.array(value))))
    worst = max(worst, error)
    print(f"{name:8s} {np.array2string(var.value, precision=6, separator=', ').replace(chr(10), '')}"
          f"   expected {formula}, max error {error:.1e}")
print("PASS" if worst <= 1e-12 else "FAIL")
sys.exit(0 if worst <= 1e-12 else 1)
