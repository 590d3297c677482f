#!/usr/bin/python3
"""Writes the PyTorch reference fixtures of the transformer building blocks (tests/ops/*_test.cpp,
tests/lib/optim_test.cpp) as .npy files in tests/data/torch/, with Debian's python3-torch (1.13)
in float64. Run from the repository root: /usr/bin/python3 tests/data/make_torch_fixtures.py

Each part below is one function writing the files named after it (<part>_<what>.npy); the
inputs are seeded, so a run reproduces every file bit for bit."""
import numpy as np
import torch

out = "tests/data/torch/"


def save(name, tensor):
    """One fixture: a float64 (or int64) array in little-endian C order."""
    a = tensor.detach().numpy() if isinstance(tensor, torch.Tensor) else np.asarray(tensor)
    np.save(out + name + ".npy", np.ascontiguousarray(a))


parts = []  # the functions below, in the order they run


def part(f):
    parts.append(f)
    return f


# (each part follows here)


@part
def embedding():
    """torch.nn.functional.embedding: a (7, 4) table, ids (3, 5) with repeats, a rank-1 ids (4,)
    and a scalar id; for each, the output and the table's gradient for a seeded grad_out. The
    ids are saved as float64 (integers, exact): the tests read them as a Var or an index leaf."""
    g = torch.Generator().manual_seed(17)
    table = torch.randn(7, 4, generator=g)
    save("embedding_table", table)
    cases = {
        "matrix": torch.tensor([[0, 3, 3, 6, 1], [2, 2, 2, 0, 5], [6, 4, 3, 0, 0]]),
        "vector": torch.tensor([5, 1, 5, 5]),
        "scalar": torch.tensor(3),
    }
    for what, ids in cases.items():
        t = table.clone().requires_grad_(True)
        y = torch.nn.functional.embedding(ids, t)
        grad_out = torch.randn(y.shape, generator=g)
        y.backward(grad_out)
        save("embedding_" + what + "_ids", ids.to(torch.float64))
        save("embedding_" + what + "_y", y)
        save("embedding_" + what + "_grad_out", grad_out)
        save("embedding_" + what + "_grad_table", t.grad)


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    for f in parts:
        f()
