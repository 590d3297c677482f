#!/usr/bin/python3
"""A transformer block of today's attention variants, exported by PyTorch 1.13's torch.onnx.export
at opsets 14 and 17 in float64, with PyTorch's input, output and input gradient (issue 31):
RMSNorm (pre-norm, learned gain), grouped-query attention (4 query heads sharing 2 k/v heads,
repeat_interleave), QK-norm (RMSNorm of q and k per head), rotary embeddings (half-split, base
10000), a tanh soft-cap of the scores (cap 5), a causal sliding window of 3 keys, softmax, and a
SiLU-gated MLP (SwiGLU). Regenerate from the repository root:

    /usr/bin/python3 tests/data/onnx/make_variant_block_fixture.py

Writes tests/data/onnx/variant_block_opset{14,17}_float64.onnx and a directory of the same stem
with input_x.npy (2, 8, 16), output_y.npy (2, 8, 16) and grad_input_x.npy, the gradient of
y.sum() by autograd. Seeded: a rerun writes the same arrays.
"""
import math
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
B, T, D, HQ, HKV = 2, 8, 16, 4, 2
DH = D // HQ


class RMSNorm(torch.nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.w = torch.nn.Parameter(1 + 0.1 * torch.randn(n, dtype=torch.float64))
        self.eps = eps

    def forward(self, x):  # torch 1.13 has no F.rms_norm: its formula
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, cap=5.0, window=3):
        super().__init__()

        def weight(a, b):
            return torch.nn.Parameter(torch.randn(a, b, dtype=torch.float64) * 0.3)

        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.wq, self.wk, self.wv, self.wo = weight(D, D), weight(D, HKV * DH), weight(D, HKV * DH), weight(D, D)
        self.qn, self.kn = RMSNorm(DH), RMSNorm(DH)
        self.w1, self.w3, self.w2 = weight(D, 2 * D), weight(D, 2 * D), weight(2 * D, D)
        self.cap = cap
        inv = 1.0 / (10000 ** (torch.arange(0, DH, 2, dtype=torch.float64) / DH))
        angle = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        angle = torch.cat([angle, angle], -1)
        self.register_buffer("cos", angle.cos())
        self.register_buffer("sin", angle.sin())
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        self.register_buffer("allowed", (j <= i) & (j > i - window))

    def forward(self, x):
        h = self.n1(x)
        q = (h @ self.wq).view(B, T, HQ, DH).transpose(1, 2)
        k = (h @ self.wk).view(B, T, HKV, DH).transpose(1, 2)
        v = (h @ self.wv).view(B, T, HKV, DH).transpose(1, 2)
        q, k = self.qn(q), self.kn(k)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        k = k.repeat_interleave(HQ // HKV, dim=1)
        v = v.repeat_interleave(HQ // HKV, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(DH)
        s = self.cap * torch.tanh(s / self.cap)
        s = s.masked_fill(~self.allowed, float("-inf"))
        a = torch.softmax(s, -1) @ v
        x = x + a.transpose(1, 2).reshape(B, T, D) @ self.wo
        u = self.n2(x)
        return x + (torch.nn.functional.silu(u @ self.w1) * (u @ self.w3)) @ self.w2


def main():
    torch.manual_seed(31)
    model = Block().eval()
    x = torch.randn(B, T, D, dtype=torch.float64, requires_grad=True)
    y = model(x)
    y.sum().backward()
    for opset in (14, 17):
        stem = os.path.join(HERE, f"variant_block_opset{opset}_float64")
        torch.onnx.export(model, (x.detach(),), stem + ".onnx", input_names=["x"], output_names=["y"],
                          opset_version=opset)
        os.makedirs(stem, exist_ok=True)
        np.save(os.path.join(stem, "input_x.npy"), x.detach().numpy())
        np.save(os.path.join(stem, "output_y.npy"), y.detach().numpy())
        np.save(os.path.join(stem, "grad_input_x.npy"), x.grad.numpy())


if __name__ == "__main__":
    main()
