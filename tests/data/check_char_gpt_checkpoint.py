#!/usr/bin/python3
"""The ctest entry numpy_reads_char_gpt_checkpoint: np.load reads the .npz that char_gpt_short saves.
  /usr/bin/python3 tests/data/check_char_gpt_checkpoint.py FILE.npz
Checks the parameters and AdamW moments (names, shapes from the config in __metadata__.json,
float32, finite) and the metadata that --resume needs. Exit 0 when all agree, 1 otherwise,
77 (skipped) without numpy."""
import json
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed (python3-numpy): skipped")
    sys.exit(77)

z = np.load(sys.argv[1])
meta = json.loads(bytes(z["__metadata__.json"]).decode()) if "__metadata__.json" in z.files else None
if meta is None:  # np.load names a member "x.npy" as "x"; a .json member keeps its name in z.files
    meta = json.loads(z.zip.read("__metadata__.json"))
L, d, T, V = (int(meta[k]) for k in ("layers", "d_model", "block", "vocab"))
shapes = {"wte": (V, d), "wpe": (T, d), "lnf.g": (d,), "lnf.b": (d,), "head.w": (d, V)}
for l in range(L):
    h = f"h{l}."
    for name in ("ln1.g", "ln1.b", "ln2.g", "ln2.b", "attn.b_q", "attn.b_k", "attn.b_v", "attn.b_o", "mlp.b2"):
        shapes[h + name] = (d,)
    for name in ("attn.w_q", "attn.w_k", "attn.w_v", "attn.w_o"):
        shapes[h + name] = (d, d)
    shapes[h + "mlp.w1"], shapes[h + "mlp.b1"], shapes[h + "mlp.w2"] = (d, 4 * d), (4 * d,), (4 * d, d)
expected = dict(shapes)
for name, shape in shapes.items():
    expected["adamw.m." + name] = expected["adamw.v." + name] = shape
bad = []
names = set(n for n in z.files if n != "__metadata__.json")
if names != set(expected):
    bad.append(f"tensors {sorted(names ^ set(expected))} are missing or unexpected")
for name in names & set(expected):
    a = z[name]
    if a.shape != expected[name] or a.dtype != np.float32 or not np.all(np.isfinite(a)):
        bad.append(f"{name}: {a.dtype} {a.shape}, expected float32 {expected[name]}, finite")
for key in ("program", "step", "data_rng", "chars", "lr", "warmup", "decay_steps", "seed"):
    if key not in meta:
        bad.append(f"the metadata has no {key}")
if meta.get("program") != "char_gpt" or meta.get("step") != "100":
    bad.append(f"metadata program {meta.get('program')}, step {meta.get('step')}")
print("\n".join(bad) if bad else f"np.load read {len(names)} tensors of a char_gpt checkpoint at step {meta['step']}")
sys.exit(1 if bad else 0)
