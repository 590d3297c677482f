#!/usr/bin/python3
"""Writes the PyTorch reference of examples/mlm_encoder.hpp (tests/examples/mlm_encoder_test.cpp)
in tests/data/mlm/, with Debian's python3-torch (1.13) in float64. Run from the repository root:
/usr/bin/python3 tests/data/make_mlm_fixture.py

The model is the header's, op for op: a 2-layer pre-LN encoder (token and position embeddings,
multi-head attention under a key-padding mask, GELU MLP, final layer norm, a linear head), a
masked-language-model loss (cross-entropy over the masked positions only, ignore_index -100),
AdamW with nanoGPT's two groups (weight decay on the rank >= 2 tensors only). Five steps, each on
a batch of other lengths. Files: param_<name>.npy (the initial parameters), ids_<s>.npy,
labels_<s>.npy, lengths_<s>.npy (step s's batch), loss.npy (each step's loss, before its update),
final_<name>.npy (the parameters after the five updates). Seeded: a run reproduces every file."""
import os

import numpy as np
import torch
import torch.nn.functional as F

out = "tests/data/mlm/"
layers, heads, d, block, vocab, batch, steps = 2, 2, 16, 8, 12, 4, 5
pad_id, mask_id, ignore = 0, 1, -100
lr, betas, eps, weight_decay = 1e-2, (0.9, 0.99), 1e-8, 0.01

rng = np.random.RandomState(36)


def save(name, a):
    np.save(out + name + ".npy", np.ascontiguousarray(a))


# The parameters in the header's order and names.
params = {}


def weight(name, rows, cols):
    params[name] = rng.normal(0, 0.1, (rows, cols))


def vector(name, n, value, noise=0.0):
    params[name] = value + rng.normal(0, noise, n) if noise else np.full(n, float(value))


weight("wte", vocab, d)
weight("wpe", block, d)
for l in range(layers):
    h = f"l{l}."
    vector(h + "ln1.g", d, 1, 0.1)
    vector(h + "ln1.b", d, 0, 0.1)
    for p in ["q", "k", "v", "o"]:
        weight(h + "attn.w_" + p, d, d)
        vector(h + "attn.b_" + p, d, 0, 0.1)
    vector(h + "ln2.g", d, 1, 0.1)
    vector(h + "ln2.b", d, 0, 0.1)
    weight(h + "mlp.w1", d, 4 * d)
    vector(h + "mlp.b1", 4 * d, 0, 0.1)
    weight(h + "mlp.w2", 4 * d, d)
    vector(h + "mlp.b2", d, 0, 0.1)
vector("lnf.g", d, 1, 0.1)
vector("lnf.b", d, 0, 0.1)
weight("head.w", d, vocab)
vector("head.b", vocab, 0, 0.1)


def make_batch():
    """Sequences of tokens 2.. of lengths 2..block, padded with pad_id; about a quarter of the real
    positions masked (input mask_id, label the token), at least one per batch; -100 elsewhere."""
    lengths = rng.randint(2, block + 1, batch)
    ids = np.full((batch, block), pad_id, dtype=np.int64)
    labels = np.full((batch, block), ignore, dtype=np.int64)
    for b in range(batch):
        tokens = rng.randint(2, vocab, lengths[b])
        chosen = rng.rand(lengths[b]) < 0.25
        if b == 0:
            chosen[0] = True
        ids[b, : lengths[b]] = np.where(chosen, mask_id, tokens)
        labels[b, : lengths[b]] = np.where(chosen, tokens, ignore)
    return ids, labels, lengths.astype(np.int64)


tensors = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params.items()}


def attention(x, pad, h):
    """lib/multi_head.cpp's block: projections, heads by reshape + permute, scaled scores with
    -inf at padded keys (mask (B, 1, 1, T)), softmax, merged heads, output projection."""
    B, T, _ = x.shape
    P = tensors

    def split(y):
        return y.reshape(B, T, heads, d // heads).permute(0, 2, 1, 3)

    q = split(x @ P[h + "attn.w_q"] + P[h + "attn.b_q"])
    k = split(x @ P[h + "attn.w_k"] + P[h + "attn.b_k"])
    v = split(x @ P[h + "attn.w_v"] + P[h + "attn.b_v"])
    s = (q * (1 / np.sqrt(d // heads))) @ k.transpose(-1, -2)
    s = s.masked_fill(~pad, float("-inf"))
    o = torch.softmax(s, -1) @ v
    o = o.permute(0, 2, 1, 3).reshape(B, T, d)
    return o @ P[h + "attn.w_o"] + P[h + "attn.b_o"]


def loss_of(ids, labels, lengths):
    P = tensors
    ids_t = torch.tensor(ids)
    pad = torch.arange(block)[None, None, None, :] < torch.tensor(lengths)[:, None, None, None]
    x = F.embedding(ids_t, P["wte"]) + P["wpe"]
    for l in range(layers):
        h = f"l{l}."
        a = F.layer_norm(x, (d,), P[h + "ln1.g"], P[h + "ln1.b"], 1e-5)
        x = x + attention(a, pad, h)
        u = F.layer_norm(x, (d,), P[h + "ln2.g"], P[h + "ln2.b"], 1e-5)
        x = x + F.gelu(u @ P[h + "mlp.w1"] + P[h + "mlp.b1"]) @ P[h + "mlp.w2"] + P[h + "mlp.b2"]
    logits = F.layer_norm(x, (d,), P["lnf.g"], P["lnf.b"], 1e-5) @ P["head.w"] + P["head.b"]
    return F.cross_entropy(logits.reshape(-1, vocab), torch.tensor(labels).reshape(-1), ignore_index=ignore)


def main():
    os.makedirs(out, exist_ok=True)
    for name, value in params.items():
        save("param_" + name, value)
    decayed = [t for t in tensors.values() if t.dim() >= 2]
    others = [t for t in tensors.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": weight_decay}, {"params": others, "weight_decay": 0.0}],
                            lr=lr, betas=betas, eps=eps)
    losses = []
    for s in range(steps):
        ids, labels, lengths = make_batch()
        save(f"ids_{s}", ids)
        save(f"labels_{s}", labels)
        save(f"lengths_{s}", lengths)
        opt.zero_grad()
        loss = loss_of(ids, labels, lengths)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    save("loss", np.array(losses))
    for name, t in tensors.items():
        save("final_" + name, t.detach().numpy())
    print("losses", losses)


main()
