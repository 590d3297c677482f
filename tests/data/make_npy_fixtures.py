#!/usr/bin/python3
"""Writes the .npy fixtures of tests/lib/array_io_test.cpp with numpy itself (Debian's
python3-numpy): every dtype, byte order, memory order and format version the reader supports.
Run from the repository root: /usr/bin/python3 tests/data/make_npy_fixtures.py

The array is arange(24).reshape(2, 3, 4) * 0.5 - 3 with element 1 = -0.0, 2 = inf, 3 = -inf,
4 = nan and 5 = the smallest subnormal of the dtype."""
import numpy as np

out = "tests/data/npy/"
for code, dtype in (("f4", np.float32), ("f8", np.float64)):
    a = (np.arange(24, dtype=np.float64) * 0.5 - 3).astype(dtype)
    a[1], a[2], a[3], a[4] = -0.0, np.inf, -np.inf, np.nan
    a[5] = np.finfo(dtype).smallest_subnormal
    a = a.reshape(2, 3, 4)
    for endian in ("<", ">"):
        for order in ("C", "F"):
            for version in ((1, 0), (2, 0), (3, 0)):
                b = np.asarray(a, dtype=np.dtype(endian + code), order=order)
                name = f"{out}{code}_{'le' if endian == '<' else 'be'}_{order}_v{version[0]}.npy"
                with open(name, "wb") as f:
                    np.lib.format.write_array(f, b, version=version)
np.save(out + "f8_scalar.npy", np.float64(2.5))
np.save(out + "f8_vector.npy", np.array([1.0, 2.0, 3.0]))
np.save(out + "f4_empty.npy", np.zeros((0, 3), dtype=np.float32))
np.save(out + "i8_matrix.npy", np.arange(6, dtype=np.int64).reshape(2, 3))
