#!/usr/bin/python3
"""The ctest entry numpy_reads_xgrad_checkpoints: numpy reads what xgrad writes.
  /usr/bin/python3 tests/data/check_numpy_reads.py DIR
DIR holds the files suite checkpoint writes (writes_npz_files_for_numpy): np.load must read the
.npz files, and the safetensors file must pass the checks of the safetensors format (read here
from its description, with json and numpy). Exit 0 when all agree, 1 otherwise, 77 (skipped)
without numpy."""
import json
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed (python3-numpy): skipped")
    sys.exit(77)

d = sys.argv[1]
tiny = {np.float32: np.finfo(np.float32).smallest_subnormal, np.float64: 5e-324}


def expected(dtype):
    t = dtype
    return {
        "layer.0.weight": np.array([[t(0.1), -0.0, np.inf], [-np.inf, np.nan, tiny[t]]], dtype=t),
        "bias": np.array([1e-30, -tiny[t], np.finfo(t).max, np.finfo(t).min], dtype=t),
        "scalar": np.array(2.5, dtype=t),
        "empty": np.zeros((0, 3), dtype=t),
    }


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


failures = []
for name, dtype, metadata in (("xgrad_float64.npz", np.float64, {"config": '{"d": 2}'}),
                              ("xgrad_float32.npz", np.float32, {})):
    with np.load(f"{d}/{name}") as z:
        want = expected(dtype)
        arrays = [k for k in z.files if k != "__metadata__.json"]
        if sorted(arrays) != sorted(want):
            failures.append(f"{name}: members {z.files}")
        for k, a in want.items():
            if not same(np.asarray(z[k]), a):
                failures.append(f"{name}: {k} is {z[k]!r}, expected {a!r}")
        if metadata:
            if json.loads(z.zip.read("__metadata__.json")) != metadata:
                failures.append(f"{name}: metadata differs")

raw = open(f"{d}/xgrad_float64.safetensors", "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header_text = raw[8:8 + n]
if (8 + n) % 8 or not header_text.startswith(b"{") or header_text.rstrip(b" ") != header_text.strip():
    failures.append("safetensors: header not '{' ... padded with spaces to a multiple of 8")
header = json.loads(header_text)
if header.pop("__metadata__", None) != {"config": '{"d": 2}'}:
    failures.append("safetensors: __metadata__ differs")
data = raw[8 + n:]
end = 0
for k, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
    begin, stop = info["data_offsets"]
    want = expected(np.float64)[k]
    if info["dtype"] != "F64" or info["shape"] != list(want.shape) or begin != end or stop - begin != want.nbytes:
        failures.append(f"safetensors: {k}: {info}")
    elif not same(np.frombuffer(data[begin:stop], dtype="<f8").reshape(want.shape), want):
        failures.append(f"safetensors: {k}: values differ")
    end = stop
if end != len(data):
    failures.append("safetensors: the tensors do not tile the data")

for f in failures:
    print(f)
print(f"{'FAIL' if failures else 'PASS'}: numpy read xgrad's .npz files and safetensors file")
sys.exit(1 if failures else 0)
