#!/usr/bin/python3
"""Writes the checkpoint fixtures of tests/lib/checkpoint_test.cpp (numpy only, Debian's
python3-numpy). Run from the repository root: /usr/bin/python3 tests/data/make_checkpoint_fixtures.py

The arrays (the same in every file):
  w  float64 (2, 3): [[0.5, -0.0, inf], [-inf, nan, 5e-324]]
  b  float32 (4,):   [1.5, -2.25, the smallest float32 subnormal, 3e38]
  s  float64 ():     2.5
  e  float32 (0, 3): empty
  f  float64 (2, 2): [[1, 2], [3, 4]] stored in Fortran order (in the .npz files)
  be float32 (3,):   [1, -2, 0.125] stored big-endian (in the .npz files)

Files, under tests/data/checkpoint/:
  savez.npz             np.savez (stored members, numpy's ZIP64 local extra fields)
  savez_compressed.npz  np.savez_compressed (deflated members)
  zip64.npz             the same stored members with ZIP64 central-directory records and the
                        ZIP64 end of central directory (zipfile's limit lowered to force them)
  bad_dtype.npz         np.savez of an int64 array a (a dtype xgrad refuses)
  bad_metadata.npz      a.npy and a __metadata__.json whose value is a number, {"k": 123}
  nested_metadata.npz   a.npy and a __metadata__.json nested deeper than strings, {"k": [1]}
  hand.safetensors      safetensors written byte by byte from the format's description: the
                        header's keys out of data order, __metadata__ last, padded with spaces;
                        w, b, s, e only (row-major little-endian)
"""
import json
import struct
import zipfile

import numpy as np

out = "tests/data/checkpoint/"

w = np.array([[0.5, -0.0, np.inf], [-np.inf, np.nan, 5e-324]], dtype=np.float64)
b = np.array([1.5, -2.25, np.finfo(np.float32).smallest_subnormal, 3e38], dtype=np.float32)
s = np.float64(2.5)
e = np.zeros((0, 3), dtype=np.float32)
f = np.asfortranarray(np.array([[1.0, 2.0], [3.0, 4.0]]))
be = np.array([1.0, -2.0, 0.125], dtype=">f4")
arrays = {"w": w, "b": b, "s": s, "e": e, "f": f, "be": be}

np.savez(out + "savez.npz", **arrays)
np.savez_compressed(out + "savez_compressed.npz", **arrays)

# ZIP64 throughout: zipfile writes ZIP64 records once sizes and offsets pass ZIP64_LIMIT.
limit = zipfile.ZIP64_LIMIT
zipfile.ZIP64_LIMIT = 16
try:
    with zipfile.ZipFile(out + "zip64.npz", "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, a in arrays.items():
            with z.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(a), allow_pickle=False)
finally:
    zipfile.ZIP64_LIMIT = limit
raw = open(out + "zip64.npz", "rb").read()
assert b"PK\x06\x06" in raw and b"PK\x06\x07" in raw, "no ZIP64 end of central directory"

for name in ("savez.npz", "savez_compressed.npz", "zip64.npz"):
    with np.load(out + name) as z:
        for key, a in arrays.items():
            assert z[key].shape == np.shape(a) and z[key].dtype.itemsize == np.asarray(a).dtype.itemsize
            assert np.array_equal(z[key], a, equal_nan=True), (name, key)

np.savez(out + "bad_dtype.npz", a=np.arange(3, dtype=np.int64))
for name, text in (("bad_metadata.npz", '{"k": 123}'), ("nested_metadata.npz", '{"k": [1]}')):
    with zipfile.ZipFile(out + name, "w") as z:
        with z.open("a.npy", "w") as member:
            np.lib.format.write_array(member, np.array([1.0]))
        z.writestr("__metadata__.json", text)

# safetensors, from the format: u64 little-endian N, N bytes of JSON, the data.
data = b""
entries = {}
for name, a, code in (("b", b, "F32"), ("w", w, "F64"), ("e", e, "F32"), ("s", np.asarray(s), "F64")):
    raw = np.ascontiguousarray(a, dtype="<f4" if code == "F32" else "<f8").tobytes()
    entries[name] = {"dtype": code, "shape": list(np.shape(a)), "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
header = {"s": entries["s"], "w": entries["w"], "e": entries["e"], "b": entries["b"],
          "__metadata__": {"format": "pt", "config": json.dumps({"d_model": 4})}}
text = json.dumps(header).encode()
text += b" " * (-(8 + len(text)) % 8 + 8)
with open(out + "hand.safetensors", "wb") as fh:
    fh.write(struct.pack("<Q", len(text)) + text + data)
print("checkpoint fixtures written under " + out)
