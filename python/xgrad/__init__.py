"""xgrad: reverse-mode autodiff over an expression graph, from Python.

The C++ library as a module (docs/python.md in the source tree): a Graph of float32 or float64
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
from ._xgrad import Error, Graph, Var  # noqa: F401

__all__ = [name for name in dir() if not name.startswith("_")]


# Methods a PyTorch user reaches for, each the module function of the same name (no new semantics).
def _as_method(function):
    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)

    method.__name__ = function.__name__
    method.__doc__ = f"x.{function.__name__}(...) is xgrad.{function.__name__}(x, ...).\n\n{function.__doc__}"
    return method


for _name in ("sum", "mean", "reshape", "permute", "transpose", "softmax", "log_softmax", "matmul", "exp", "log",
              "sqrt", "tanh", "sigmoid", "relu", "abs", "gelu", "pow", "broadcast_to"):
    setattr(Var, _name, _as_method(globals()[_name]))


def _item(self):
    """The value of a Var of one element, as a Python float (torch's item())."""
    value = self.value
    if value.size != 1:
        raise Error(f"item(): the Var holds {value.size} elements, not 1 (shape {value.shape})")
    return value.item()


Var.item = _item
Var.T = property(transpose, doc="transpose(x): the last two axes swapped.")
del _name
