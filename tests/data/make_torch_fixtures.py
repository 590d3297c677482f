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


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    for f in parts:
        f()
