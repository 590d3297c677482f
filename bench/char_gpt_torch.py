#!/usr/bin/python3
"""examples/char_gpt's model in PyTorch, trained on the same windows from the same initial weights.

The model (docs/char-gpt.md names every parameter on both sides), the data (the same corpus,
character set, 90/10 split and splitmix64 windows), the schedule (warm-up, cosine to lr / 10),
AdamW with two groups (weight decay on the 2-D weights only, betas 0.9 and 0.99) and gradient
clipping at 1 are char_gpt's; so the two runs differ only in floating-point rounding.

    /usr/bin/python3 bench/char_gpt_torch.py --xgrad build/char_gpt [char_gpt options...]

runs `char_gpt --steps 0 --save` to get its initial parameters, trains the PyTorch model from them
with the same options, then runs char_gpt itself, and prints both runs' evaluations side by side
with the final val losses and times. Exit status 1 if the final val losses differ by more than
--tolerance (default 0.03, issue 18's target). Options it understands (the rest are char_gpt's
defaults): --layers --heads --d-model --block --batch --steps --lr --warmup --weight-decay
--seed --dtype --eval-every --eval-batches --data, and --log and --plot for the char_gpt run;
--threads N sets torch's threads (default 2).

tests/data/make_char_gpt_fixture.py imports the model and the safetensors reader and writer.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The data and the schedule, shared with examples/python/char_gpt.py (numpy only).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
from char_data import DEFAULT_CORPUS, SplitMix64, learning_rate, load_corpus  # noqa: E402,F401
from char_data import windows as numpy_windows  # noqa: E402


def windows(tokens, batch, block, rng):
    x, y = numpy_windows(tokens, batch, block, rng)
    return torch.from_numpy(x), torch.from_numpy(y)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask, dropout):
        b, t, d = x.shape
        a = self.ln1(x)
        split = lambda z: z.view(b, t, self.heads, d // self.heads).transpose(1, 2)  # (B, H, T, dh)
        q, k, v = split(self.q(a)), split(self.k(a)), split(self.v(a))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        merged = (weights @ v).transpose(1, 2).reshape(b, t, d)
        x = x + F.dropout(self.o(merged), dropout, self.training)
        return x + F.dropout(self.proj(F.gelu(self.fc(self.ln2(x)))), dropout, self.training)


class GPT(nn.Module):
    def __init__(self, vocab, layers, heads, d, block, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)))

    def forward(self, x, y):
        h = F.dropout(self.wte(x) + self.wpe.weight, self.dropout, self.training)
        for block in self.h:
            h = block(h, self.mask, self.dropout)
        logits = self.head(self.ln_f(h))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def xgrad_names(model):
    """PyTorch parameter name -> (xgrad parameter name, transposed): nn.Linear keeps (out, in),
    xgrad's products x @ w keep (in, out)."""
    names = {"wte.weight": ("wte", False), "wpe.weight": ("wpe", False), "ln_f.weight": ("lnf.g", False),
             "ln_f.bias": ("lnf.b", False), "head.weight": ("head.w", True)}
    for l in range(len(model.h)):
        for ln in ("ln1", "ln2"):
            names[f"h.{l}.{ln}.weight"] = (f"h{l}.{ln}.g", False)
            names[f"h.{l}.{ln}.bias"] = (f"h{l}.{ln}.b", False)
        for m, x in (("q", "attn.w_q"), ("k", "attn.w_k"), ("v", "attn.w_v"), ("o", "attn.w_o"),
                     ("fc", "mlp.w1"), ("proj", "mlp.w2")):
            names[f"h.{l}.{m}.weight"] = (f"h{l}.{x}", True)
            names[f"h.{l}.{m}.bias"] = (f"h{l}.{x.replace('.w', '.b')}", False)
    return names


def to_xgrad(model):
    """The parameters as xgrad names and layouts: {name: numpy array}."""
    out = {}
    for name, (xname, transposed) in xgrad_names(model).items():
        p = dict(model.named_parameters())[name].detach()
        out[xname] = (p.t() if transposed else p).contiguous().numpy()
    return out


def from_xgrad(model, tensors):
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, (xname, transposed) in xgrad_names(model).items():
            t = torch.from_numpy(np.ascontiguousarray(tensors[xname])).to(params[name].dtype)
            params[name].copy_(t.t() if transposed else t)


def param_groups(model, weight_decay):
    """nanoGPT's groups: 2-D weights decay, biases and layer norms do not."""
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": other, "weight_decay": 0.0}]


def make_optimizer(model, weight_decay):
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=0.0, betas=(0.9, 0.99), eps=1e-8)


def train_step(model, opt, x, y, lr):
    """char_gpt::Trainer::step: the loss before the update."""
    loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    for group in opt.param_groups:
        group["lr"] = lr
    opt.step()
    return loss.item()


DTYPES = {"F32": np.float32, "F64": np.float64}


def read_safetensors(path):
    """{name: numpy array}, metadata."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(body[b:e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).copy()
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    header, offset, chunks = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}[a.dtype]
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        chunks.append(a.astype(a.dtype.newbyteorder("<")).tobytes())
        offset += a.nbytes
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--xgrad", required=True, help="the char_gpt binary")
    for name, default in (("layers", 4), ("heads", 4), ("d-model", 128), ("block", 64), ("batch", 12),
                          ("steps", 2000), ("warmup", 100), ("seed", 1), ("eval-every", 100),
                          ("eval-batches", 20), ("threads", 2)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--data", default="")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--log", help="passed to the char_gpt run (its CSV log)")
    ap.add_argument("--plot", help="passed to the char_gpt run (its SVG plot)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.float32 if a.dtype == "float32" else torch.float64
    shared = ["--layers", a.layers, "--heads", a.heads, "--d-model", a.d_model, "--block", a.block,
              "--batch", a.batch, "--steps", a.steps, "--lr", a.lr, "--warmup", a.warmup,
              "--weight-decay", a.weight_decay, "--seed", a.seed, "--dtype", a.dtype,
              "--eval-every", a.eval_every, "--eval-batches", a.eval_batches]
    if a.data:
        shared += ["--data", a.data]
    shared = [str(s) for s in shared]

    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init.safetensors")
        subprocess.run([a.xgrad] + shared + ["--steps", "0", "--save", init], check=True, stdout=subprocess.DEVNULL)
        tensors, meta = read_safetensors(init)
    train_ids, val_ids, chars = load_corpus(a.data)
    assert meta["chars"] == chars.hex(), "the character sets differ"
    model = GPT(len(chars), a.layers, a.heads, a.d_model, a.block).to(dtype)
    from_xgrad(model, tensors)
    opt = make_optimizer(model, a.weight_decay)

    eval_rng = SplitMix64(a.seed + 1)
    val_batches = [windows(val_ids, a.batch, a.block, eval_rng) for _ in range(a.eval_batches)]
    train_batches = [windows(train_ids, a.batch, a.block, eval_rng) for _ in range(a.eval_batches)]

    def evaluate():
        model.eval()
        with torch.no_grad():
            losses = [sum(model(x, y).item() for x, y in split) / len(split) for split in (train_batches, val_batches)]
        model.train()
        return losses

    rng = SplitMix64(a.seed)
    torch_evals = {0: evaluate()}
    start = time.perf_counter()
    for step in range(a.steps):
        x, y = windows(train_ids, a.batch, a.block, rng)
        train_step(model, opt, x, y, learning_rate(a.lr, a.warmup, a.steps, step))
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            torch_evals[step + 1] = evaluate()
            print(f"torch step {step + 1:5d}  train {torch_evals[step + 1][0]:.4f}  val {torch_evals[step + 1][1]:.4f}"
                  f"  {time.perf_counter() - start:.0f} s", flush=True)
    torch_seconds = time.perf_counter() - start

    start = time.perf_counter()
    logging = (["--log", a.log] if a.log else []) + (["--plot", a.plot] if a.plot else [])
    out = subprocess.run([a.xgrad] + shared + logging, check=True, stdout=subprocess.PIPE, text=True).stdout
    xgrad_seconds = time.perf_counter() - start
    xgrad_evals = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0] == "step" and f[2] == "train":
            xgrad_evals[int(f[1])] = (float(f[3]), float(f[5]))
    print(f"\n{'step':>6} {'xgrad train':>12} {'torch train':>12} {'xgrad val':>10} {'torch val':>10} {'val diff':>9}")
    for step in sorted(torch_evals):
        xt_, xv = xgrad_evals[step]
        tt, tv = torch_evals[step]
        print(f"{step:6d} {xt_:12.4f} {tt:12.4f} {xv:10.4f} {tv:10.4f} {xv - tv:+9.4f}")
    last = max(torch_evals)
    diff = abs(xgrad_evals[last][1] - torch_evals[last][1])
    print(f"\nfinal val loss: xgrad {xgrad_evals[last][1]:.4f}, PyTorch {torch_evals[last][1]:.4f}, "
          f"|difference| {diff:.4f} (tolerance {a.tolerance})")
    print(f"time: xgrad {xgrad_seconds:.0f} s (char_gpt, evaluations included), "
          f"PyTorch {torch_seconds:.0f} s ({a.threads} threads, evaluations included)")
    sys.exit(0 if diff <= a.tolerance else 1)


if __name__ == "__main__":
    main()
