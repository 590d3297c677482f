"""xgrad: reverse-mode autodiff over an expression graph, from Python.

The C++ library (github's xgrad, docs/python.md) as a module: a Graph of float32 or float64
nodes, Vars with numpy values, every op and block, grad and gradcheck, optimizers,
checkpoints, saturation diagnostics, JSON/DOT/ONNX export.

    import numpy as np, xgrad
    g = xgrad.Graph("float64")
    q = g.input("q", [[np.log(2)], [0]])
    k = g.input("k", [[1], [0]])
    v = g.input("v", [[3, 0], [0, 6]])
    out = xgrad.attention(q, k, v)
    gq, gk, gv = xgrad.grad(out, [q, k, v])
    out.value   # [[2, 2], [1.5, 3]]

Errors are xgrad.Error (a ValueError) carrying the library's message: the op, the node and the
shapes. Values are copies: Var.value is a new numpy array each time it is read.
"""

from ._xgrad import *  # noqa: F401,F403
from ._xgrad import Error, Graph, Var, __doc__ as _core_doc  # noqa: F401

__all__ = [name for name in dir() if not name.startswith("_")]
