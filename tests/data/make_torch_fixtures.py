#!/usr/bin/python3
"""Writes the PyTorch reference fixtures of the transformer building blocks (tests/ops/*_test.cpp,
tests/lib/optim_test.cpp, tests/lib/loss_test.cpp) as .npy files in tests/data/torch/, with Debian's python3-torch (1.13)
in float64. Run from the repository root: /usr/bin/python3 tests/data/make_torch_fixtures.py

Each part below is one function writing the files named after it (<part>_<what>.npy); the
inputs are seeded, so a run reproduces every file bit for bit."""
import math

import numpy as np
import torch

out = "tests/data/torch/"


def save(name, tensor):
    """One fixture: a float64 (or int64) array in little-endian C order."""
    a = tensor.detach().numpy() if isinstance(tensor, torch.Tensor) else np.asarray(tensor)
    np.save(out + name + ".npy", np.array(a, order="C"))  # 0-d stays 0-d


parts = []  # the functions below, in the order they run


def part(f):
    parts.append(f)
    return f


# (each part follows here)


@part
def elementwise():
    """Every unary row on x (positive for log, sqrt, reciprocal and rsqrt) and its gradient for an
    upstream u (silu, x sigmoid(x), is a composition of rows in xgrad);
    sub, div, maximum and minimum with b (2, 1, 4) broadcast against a (3, 4) and their gradients."""
    g = torch.Generator().manual_seed(17)
    x = torch.randn(3, 4, generator=g, dtype=torch.float64)
    p = torch.rand(3, 4, generator=g, dtype=torch.float64) * 1.5 + 0.5
    u = torch.randn(3, 4, generator=g, dtype=torch.float64)
    save("elementwise_x", x)
    save("elementwise_p", p)
    save("elementwise_u", u)
    for name, f, arg in (("neg", torch.neg, x), ("exp", torch.exp, x), ("log", torch.log, p),
                         ("sqrt", torch.sqrt, p), ("tanh", torch.tanh, x), ("erf", torch.erf, x),
                         ("sin", torch.sin, x), ("cos", torch.cos, x), ("sigmoid", torch.sigmoid, x),
                         ("silu", torch.nn.functional.silu, x), ("abs", torch.abs, x),
                         ("reciprocal", torch.reciprocal, p), ("rsqrt", torch.rsqrt, p)):
        a = arg.clone().requires_grad_(True)
        y = f(a)
        (ga,) = torch.autograd.grad(y, a, u)
        save(f"elementwise_{name}_y", y)
        save(f"elementwise_{name}_grad", ga)
    a0 = torch.randn(3, 4, generator=g, dtype=torch.float64)
    b0 = torch.rand(2, 1, 4, generator=g, dtype=torch.float64) + 0.5
    w = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    save("elementwise_a", a0)
    save("elementwise_b", b0)
    save("elementwise_w", w)
    for name, f in (("sub", torch.sub), ("div", torch.div), ("maximum", torch.maximum), ("minimum", torch.minimum)):
        a, b = a0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
        y = f(a, b)
        ga, gb = torch.autograd.grad(y, (a, b), w)
        save(f"elementwise_{name}_y", y)
        save(f"elementwise_{name}_grad_a", ga)
        save(f"elementwise_{name}_grad_b", gb)


@part
def comparisons():
    """The comparisons and the logic of masks, as 1.0 and 0.0: a (3, 4) against b (2, 1, 4)
    broadcast, with ties, signed zeros, infinities and NaN among them (torch.eq, lt, le, gt, ge,
    logical_and, logical_or; logical_not of a). PyTorch gives no gradient through them."""
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([[0.0, -0.0, 1.0, nan], [2.0, inf, -inf, 3.0], [0.5, 1.0, nan, -2.0]], dtype=torch.float64)
    b = torch.tensor([[[-0.0, 0.0, 1.0, 1.0]], [[nan, inf, 0.0, -2.0]]], dtype=torch.float64)
    save("comparisons_a", a)
    save("comparisons_b", b)
    for name, f in (("equal", torch.eq), ("less", torch.lt), ("less_equal", torch.le), ("greater", torch.gt),
                    ("greater_equal", torch.ge), ("logical_and", torch.logical_and),
                    ("logical_or", torch.logical_or)):
        save(f"comparisons_{name}_y", f(a, b).to(torch.float64))
    save("comparisons_logical_not_y", torch.logical_not(a).to(torch.float64))


@part
def where():
    """torch.where(cond, a, b) with cond (2, 1, 4) (nonzero, NaN included, is true), a (3, 4) and
    b (4) broadcast to (2, 3, 4); the gradients w.r.t. a and b for an upstream u that holds inf and
    NaN, each where only one branch takes it (the other gets 0, not NaN)."""
    g = torch.Generator().manual_seed(32)
    c = torch.tensor([[[1.0, 0.0, float("nan"), 0.0]], [[0.0, 2.0, 0.0, -1.0]]], dtype=torch.float64)
    a0 = torch.randn(3, 4, generator=g, dtype=torch.float64)
    b0 = torch.randn(4, generator=g, dtype=torch.float64)
    u = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    u[0, 1, 1] = float("inf")  # cond 0 there: b's
    u[1, 2, 1] = float("nan")  # cond 2 there: a's
    save("where_cond", c)
    save("where_a", a0)
    save("where_b", b0)
    save("where_u", u)
    a, b = a0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
    y = torch.where(c != 0, a, b)
    ga, gb = torch.autograd.grad(y, (a, b), u)
    save("where_y", y)
    save("where_grad_a", ga)
    save("where_grad_b", gb)


@part
def pow():  # the op's name (the builtin pow is not used in this file)
    """torch.pow(x, p) for a scalar p: its values, the gradient for an upstream u and the second
    derivative's VJP for v (the gradient of <grad, v> w.r.t. x), for p = 2 on x with zeros,
    p = 0.5 and 1.5 on positive x, p = -1 and 3 on negative x, p = 0 and 1 on x with zeros."""
    g = torch.Generator().manual_seed(33)
    real = torch.randn(3, 4, generator=g, dtype=torch.float64)
    real[0, 0] = 0.0
    real[1, 2] = 0.0
    positive = torch.rand(3, 4, generator=g, dtype=torch.float64) * 1.5 + 0.5
    negative = -(torch.rand(3, 4, generator=g, dtype=torch.float64) * 1.5 + 0.5)
    u = torch.randn(3, 4, generator=g, dtype=torch.float64)
    v = torch.randn(3, 4, generator=g, dtype=torch.float64)
    save("pow_real", real)
    save("pow_positive", positive)
    save("pow_negative", negative)
    save("pow_u", u)
    save("pow_v", v)
    for name, p, x0 in (("2", 2.0, real), ("0.5", 0.5, positive), ("1.5", 1.5, positive), ("-1", -1.0, negative),
                        ("3", 3.0, negative), ("0", 0.0, real), ("1", 1.0, real)):
        x = x0.clone().requires_grad_(True)
        y = torch.pow(x, p)
        (gx,) = torch.autograd.grad(y, x, u, create_graph=True)
        # p = 0: the gradient is a constant 0 (no grad_fn); p = 1: grad_out, not a function of x.
        (ggx,) = torch.autograd.grad(gx, x, v, allow_unused=True) if gx.requires_grad else (None,)
        save(f"pow_{name}_y", y)
        save(f"pow_{name}_grad", gx)
        save(f"pow_{name}_grad2", torch.zeros_like(x0) if ggx is None else ggx)


@part
def rope():
    """Rotary position embeddings, the half-split form (GPT-NeoX, Llama's rotate_half), in float64:
    x (2, 3, 5, 8) at positions 0..4, and at positions (2, 1, 5) of every batch its own; the
    gradients w.r.t. x and the positions for an upstream u."""
    g = torch.Generator().manual_seed(31)
    x0 = torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64)
    u = torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64)
    p_batch = torch.rand(2, 1, 5, generator=g, dtype=torch.float64) * 20
    save("rope_x", x0)
    save("rope_u", u)
    save("rope_positions_batch", p_batch)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float64) / 8))
    for name, p0 in (("t", torch.arange(5, dtype=torch.float64)), ("batch", p_batch)):
        x = x0.clone().requires_grad_(True)
        p = p0.clone().requires_grad_(True)
        angle = p[..., None] * inv                      # (..., T, d/2)
        c, s = torch.cos(angle), torch.sin(angle)
        x1, x2 = x[..., :4], x[..., 4:]
        y = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        gx, gp = torch.autograd.grad(y, (x, p), u)
        save(f"rope_{name}_y", y)
        save(f"rope_{name}_grad_x", gx)
        save(f"rope_{name}_grad_positions", gp)


def alibi_get_slopes(n):
    """get_slopes of github.com/ofirpress/attention_with_linear_biases (fairseq/models/transformer.py),
    verbatim: the ALiBi slopes of n heads."""
    def get_slopes_power_of_2(n):
        start = (2**(-2**-(math.log2(n)-3)))
        ratio = start
        return [start*ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    else:
        closest_power_of_2 = 2**math.floor(math.log2(n))
        return get_slopes_power_of_2(closest_power_of_2) + alibi_get_slopes(2*closest_power_of_2)[0::2][:n-closest_power_of_2]


def alibi_bias(heads, t_q, t_k):
    """-m_h (i' - j), i' = i + t_k - t_q: (heads, t_q, t_k)."""
    m = torch.tensor(alibi_get_slopes(heads), dtype=torch.float64)
    i = torch.arange(t_q, dtype=torch.float64)[:, None] + (t_k - t_q)
    j = torch.arange(t_k, dtype=torch.float64)[None, :]
    return -m[:, None, None] * (i - j)


def rope_of(x, positions, base=10000.0):
    """The half-split rotary embedding of x (..., T, d) at positions (T)."""
    d = x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angle = positions[..., None] * inv
    c, s = torch.cos(angle), torch.sin(angle)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def variant_attention_of(q, k, v, scale=None, softcap=0.0, bias=None, mask=None, weights="softmax", sigmoid_bias=None):
    """xgrad's variant_attention: GQA by repeat_interleave, scale, soft-cap, + bias, mask, softmax or sigmoid."""
    groups = q.shape[-3] // k.shape[-3]
    k = torch.repeat_interleave(k, groups, dim=-3)
    v = torch.repeat_interleave(v, groups, dim=-3)
    s = (q * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias
    if weights == "softmax":
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-1)
    else:
        b = sigmoid_bias if sigmoid_bias is not None else -math.log(k.shape[-2])
        w = torch.sigmoid(s + b)
        if mask is not None:
            w = w.masked_fill(~mask, 0.0)
    return w @ v


def causal(t_q, t_k):
    return torch.arange(t_k)[None, :] <= torch.arange(t_q)[:, None] + (t_k - t_q)


@part
def variants():
    """The attention variants' building blocks (lib/variants.hpp) in float64: repeat_kv as
    torch.repeat_interleave over the heads (third from last), rank 4 and 3; the ALiBi slopes of the
    reference get_slopes and the bias -m_h (i' - j); the soft-cap cap tanh(x / cap); QK-norm as a
    bias-free layer_norm over d_head; each with its gradients for an upstream u."""
    g = torch.Generator().manual_seed(32)
    for name, shape, groups in (("rank4", (2, 3, 4, 5), 2), ("rank3", (2, 4, 3), 3)):
        x = torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(True)
        y = torch.repeat_interleave(x, groups, dim=-3)
        u = torch.randn(*y.shape, generator=g, dtype=torch.float64)
        (gx,) = torch.autograd.grad(y, x, u)
        save(f"variants_repeat_kv_{name}_x", x)
        save(f"variants_repeat_kv_{name}_u", u)
        save(f"variants_repeat_kv_{name}_y", y)
        save(f"variants_repeat_kv_{name}_grad_x", gx)
    for n in (1, 3, 6, 8, 12, 20, 32):
        save(f"variants_alibi_slopes_{n}", np.array(alibi_get_slopes(n), dtype=np.float64))
    save("variants_alibi_bias_6_3_5", alibi_bias(6, 3, 5))
    save("variants_alibi_bias_8_4_4", alibi_bias(8, 4, 4))
    x = (torch.randn(3, 4, generator=g, dtype=torch.float64) * 10).requires_grad_(True)
    u = torch.randn(3, 4, generator=g, dtype=torch.float64)
    y = 5.0 * torch.tanh(x / 5.0)
    (gx,) = torch.autograd.grad(y, x, u)
    save("variants_softcap_x", x)
    save("variants_softcap_u", u)
    save("variants_softcap_y", y)
    save("variants_softcap_grad_x", gx)
    x = (torch.randn(2, 3, 4, 6, generator=g, dtype=torch.float64) * 2 + 1).requires_grad_(True)
    gain = (torch.rand(6, generator=g, dtype=torch.float64) + 0.5).requires_grad_(True)
    u = torch.randn(2, 3, 4, 6, generator=g, dtype=torch.float64)
    y = torch.nn.functional.layer_norm(x, (6,), gain, None, 1e-5)
    gx, gg = torch.autograd.grad(y, (x, gain), u)
    save("variants_qk_norm_x", x)
    save("variants_qk_norm_gain", gain)
    save("variants_qk_norm_u", u)
    save("variants_qk_norm_y", y)
    save("variants_qk_norm_grad_x", gx)
    save("variants_qk_norm_grad_gain", gg)


@part
def variant_attention():
    """variant_attention (lib/variant_attention.hpp) in float64, q (2, 4, 3, 4) over k, v of 2 or 1
    heads and T_k = 5: softmax with soft-cap 2, ALiBi and the causal mask; sigmoid (b = -log T_k)
    with the causal mask, multi-query; sigmoid with b = 0.5, scale 0.3, soft-cap 3 and a key padding
    mask (lengths 5, 3). Then the block variant_multi_head_attention, x (2, 5, 16), 4 heads over 2
    kv heads, random projections: RoPE, QK-norm (layer, gains), soft-cap 4, ALiBi, causal, softmax;
    and RoPE, 1 kv head, causal, sigmoid. The output and the gradients of every input for u."""
    g = torch.Generator().manual_seed(33)
    cases = (("softmax", 2, dict(softcap=2.0, bias=alibi_bias(4, 3, 5), mask=causal(3, 5))),
             ("sigmoid", 1, dict(mask=causal(3, 5), weights="sigmoid")),
             ("sigmoid_padded", 2, dict(scale=0.3, softcap=3.0, weights="sigmoid", sigmoid_bias=0.5,
                                        mask=(torch.arange(5)[None, :] < torch.tensor([5, 3])[:, None]).reshape(2, 1, 1, 5))))
    for name, hkv, options in cases:
        q = (torch.randn(2, 4, 3, 4, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
        k = (torch.randn(2, hkv, 5, 4, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
        v = torch.randn(2, hkv, 5, 3, generator=g, dtype=torch.float64).requires_grad_(True)
        u = torch.randn(2, 4, 3, 3, generator=g, dtype=torch.float64)
        y = variant_attention_of(q, k, v, **options)
        gq, gk, gv = torch.autograd.grad(y, (q, k, v), u)
        for what, t in (("q", q), ("k", k), ("v", v), ("u", u), ("y", y), ("grad_q", gq), ("grad_k", gk), ("grad_v", gv)):
            save(f"variant_attention_{name}_{what}", t)
    d, heads, t = 16, 4, 5
    for name, kv, qk, alibi, softcap, weights in (("softmax", 2, True, True, 4.0, "softmax"),
                                                  ("sigmoid", 1, False, False, 0.0, "sigmoid")):
        dh = d // heads
        x = torch.randn(2, t, d, generator=g, dtype=torch.float64).requires_grad_(True)
        shapes = {"w_q": (d, d), "b_q": (d,), "w_k": (d, dh * kv), "b_k": (dh * kv,), "w_v": (d, dh * kv),
                  "b_v": (dh * kv,), "w_o": (d, d), "b_o": (d,)}
        if qk:
            shapes.update(q_gain=(dh,), k_gain=(dh,))
        P = {n: (torch.randn(*s, generator=g, dtype=torch.float64) * (0.4 if n[0] == "w" else 0.1)
                 + (1.0 if n.endswith("gain") else 0.0)).requires_grad_(True) for n, s in shapes.items()}
        u = torch.randn(2, t, d, generator=g, dtype=torch.float64)

        def split(h, n):
            return h.reshape(2, t, n, dh).permute(0, 2, 1, 3)
        qh = split(x @ P["w_q"] + P["b_q"], heads)
        kh = split(x @ P["w_k"] + P["b_k"], kv)
        vh = split(x @ P["w_v"] + P["b_v"], kv)
        if qk:
            qh = torch.nn.functional.layer_norm(qh, (dh,), P["q_gain"], None, 1e-5)
            kh = torch.nn.functional.layer_norm(kh, (dh,), P["k_gain"], None, 1e-5)
        positions = torch.arange(t, dtype=torch.float64)
        qh, kh = rope_of(qh, positions), rope_of(kh, positions)
        a = variant_attention_of(qh, kh, vh, softcap=softcap, bias=alibi_bias(heads, t, t) if alibi else None,
                                 mask=causal(t, t), weights=weights)
        y = a.permute(0, 2, 1, 3).reshape(2, t, d) @ P["w_o"] + P["b_o"]
        names = list(P)
        grads = torch.autograd.grad(y, [x] + [P[n] for n in names], u)
        save(f"variant_attention_block_{name}_x", x)
        save(f"variant_attention_block_{name}_u", u)
        save(f"variant_attention_block_{name}_y", y)
        save(f"variant_attention_block_{name}_grad_x", grads[0])
        for n, gr in zip(names, grads[1:]):
            save(f"variant_attention_block_{name}_{n}", P[n])
            save(f"variant_attention_block_{name}_grad_{n}", gr)


@part
def gelu():
    """Both forms on x (with large and tiny values), their gradients for u and the second
    derivative's VJP for v (the gradient of <grad, v> w.r.t. x)."""
    g = torch.Generator().manual_seed(18)
    x0 = torch.cat([torch.randn(20, generator=g, dtype=torch.float64) * 3,
                    torch.tensor([0.0, -0.0, 1e-300, -40.0, 40.0, 8.0, -8.0], dtype=torch.float64)])
    u = torch.randn(x0.shape, generator=g, dtype=torch.float64)
    v = torch.randn(x0.shape, generator=g, dtype=torch.float64)
    save("gelu_x", x0)
    save("gelu_u", u)
    save("gelu_v", v)
    for approx in ("none", "tanh"):
        x = x0.clone().requires_grad_(True)
        y = torch.nn.functional.gelu(x, approximate=approx)
        (gx,) = torch.autograd.grad(y, x, u, create_graph=True)
        (ggx,) = torch.autograd.grad(gx, x, v)
        save(f"gelu_{approx}_y", y)
        save(f"gelu_{approx}_grad", gx)
        save(f"gelu_{approx}_grad2", ggx)


@part
def layer_norm():
    """torch.nn.functional.layer_norm over the last axis of x (2, 3, 5) with gamma, beta (5) and
    eps 1e-5, and a row of equal values; gradients for u w.r.t. x, gamma and beta."""
    g = torch.Generator().manual_seed(19)
    x0 = torch.randn(2, 3, 5, generator=g, dtype=torch.float64) * 2 + 1
    x0[1, 2] = 0.75  # a constant row: variance 0, eps alone in the square root
    gamma0 = torch.randn(5, generator=g, dtype=torch.float64)
    beta0 = torch.randn(5, generator=g, dtype=torch.float64)
    u = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    x, gamma, beta = (t.clone().requires_grad_(True) for t in (x0, gamma0, beta0))
    y = torch.nn.functional.layer_norm(x, (5,), gamma, beta, 1e-5)
    gx, gg, gb = torch.autograd.grad(y, (x, gamma, beta), u)
    for name, t in (("x", x0), ("gamma", gamma0), ("beta", beta0), ("u", u), ("y", y),
                    ("grad_x", gx), ("grad_gamma", gg), ("grad_beta", gb)):
        save("layer_norm_" + name, t)


@part
def rms_norm():
    """RMS normalisation over the last axis of x (2, 3, 5) with gamma (5) and eps 1e-5, and a row of
    zeros. torch 1.13 has no torch.nn.functional.rms_norm (it came in 2.4): the formula
    x / sqrt(mean(x^2) + eps) * gamma, as that function and ONNX's RMSNormalization define it, in
    float64 with autograd. Gradients w.r.t. x and gamma for u on y, and for u on y and w on rstd
    (xgrad's second output, 1 / sqrt(mean(x^2) + eps), (2, 3, 1))."""
    g = torch.Generator().manual_seed(23)
    x0 = torch.randn(2, 3, 5, generator=g, dtype=torch.float64) * 2 + 1
    x0[1, 2] = 0.0  # a row of zeros: eps alone in the square root
    gamma0 = torch.randn(5, generator=g, dtype=torch.float64)
    u = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    w = torch.randn(2, 3, 1, generator=g, dtype=torch.float64)
    x, gamma = (t.clone().requires_grad_(True) for t in (x0, gamma0))
    rstd = 1 / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    y = x * rstd * gamma
    gx, gg = torch.autograd.grad(y, (x, gamma), u, retain_graph=True)
    gx_both, gg_both = torch.autograd.grad((y, rstd), (x, gamma), (u, w))
    for name, t in (("x", x0), ("gamma", gamma0), ("u", u), ("w", w), ("y", y), ("rstd", rstd),
                    ("grad_x", gx), ("grad_gamma", gg), ("both_grad_x", gx_both), ("both_grad_gamma", gg_both)):
        save("rms_norm_" + name, t)


@part
def flash_attention_variants():
    """The fused attention's variants, composed in PyTorch with autograd: scores s = scale q k^T,
    capped to C tanh(s / C) (Gemma 2's soft-cap), -inf outside the mask M, out = softmax(.) v and
    lse = logsumexp(.) per row; the gradients w.r.t. q, k, v of sum(u * out) + sum(h * lse).
    "capped": C = 2 with saturated scores, no mask. "windowed": C = 3, M the causal sliding window
    of 3 keys (key j for query i when i' - 3 < j <= i', i' = i + T_k - T_q, T_q = 5 < T_k = 7) and
    a key-padding mask (2, 1, 1, 7) over 2 heads."""
    g = torch.Generator().manual_seed(41)
    for name, t_q, t_k, cap, std, windowed in (("capped", 6, 6, 2.0, 2.0, False), ("windowed", 5, 7, 3.0, 1.5, True)):
        q0 = torch.randn(2, 2, t_q, 4, generator=g, dtype=torch.float64) * std
        k0 = torch.randn(2, 2, t_k, 4, generator=g, dtype=torch.float64) * std
        v0 = torch.randn(2, 2, t_k, 3, generator=g, dtype=torch.float64)
        u = torch.randn(2, 2, t_q, 3, generator=g, dtype=torch.float64)
        h = torch.randn(2, 2, t_q, generator=g, dtype=torch.float64)
        scale = 0.5
        q, k, v = (t.clone().requires_grad_(True) for t in (q0, k0, v0))
        s = scale * q @ k.transpose(-1, -2)
        s = cap * torch.tanh(s / cap)
        if windowed:
            i = torch.arange(t_q)[:, None] + (t_k - t_q)
            j = torch.arange(t_k)[None, :]
            allowed = (j <= i) & (j > i - 3)
            pad = torch.ones(2, 1, 1, t_k, dtype=torch.bool)
            pad[0, 0, 0, 4] = False  # a hole in sequence 0, and the last key of sequence 1
            pad[1, 0, 0, 6] = False
            save(f"flash_attention_variants_{name}_key_mask", pad.to(torch.float64))
            s = s.masked_fill(~(allowed & pad), float("-inf"))
        out = torch.softmax(s, -1) @ v
        lse = torch.logsumexp(s, -1)
        gq, gk, gv = torch.autograd.grad((out * u).sum() + (lse * h).sum(), (q, k, v))
        for what, x in (("q", q0), ("k", k0), ("v", v0), ("u", u), ("h", h), ("out", out), ("lse", lse),
                        ("grad_q", gq), ("grad_k", gk), ("grad_v", gv), ("scale", torch.tensor(scale)),
                        ("softcap", torch.tensor(cap))):
            save(f"flash_attention_variants_{name}_{what}", x)


@part
def split():
    """torch.split of x (2, 7, 3) along dim 1 into sizes (2, 0, 4, 1) with only outputs 0 and 2 used
    (upstreams u0, u2: the other outputs get no gradient), and torch.chunk of x along dim -1 into 2
    with only the last part used (upstream v); the gradients w.r.t. x. And torch.chunk's sizes for
    lengths 0 to 12 and n 1 to 7: rows (length, n, sizes..., -1 after the last), as float64."""
    g = torch.Generator().manual_seed(29)
    x0 = torch.randn(2, 7, 3, generator=g, dtype=torch.float64)
    u0 = torch.randn(2, 2, 3, generator=g, dtype=torch.float64)
    u2 = torch.randn(2, 4, 3, generator=g, dtype=torch.float64)
    v = torch.randn(2, 7, 1, generator=g, dtype=torch.float64)
    x = x0.clone().requires_grad_(True)
    ys = torch.split(x, [2, 0, 4, 1], dim=1)
    (gx,) = torch.autograd.grad((ys[0], ys[2]), x, (u0, u2))
    for name, t in (("x", x0), ("u0", u0), ("u2", u2), ("v", v), ("y0", ys[0]), ("y2", ys[2]), ("y3", ys[3]),
                    ("grad_x", gx)):
        save("split_" + name, t)
    x = x0.clone().requires_grad_(True)
    parts = torch.chunk(x, 2, dim=-1)  # sizes 2, 1
    (gx,) = torch.autograd.grad(parts[-1], x, v)
    save("split_chunk_last", parts[-1])
    save("split_chunk_grad_x", gx)
    rows = []
    for length in range(13):
        for n in range(1, 8):
            sizes = [c.shape[0] for c in torch.chunk(torch.zeros(length), n)]
            rows.append([length, n] + sizes + [-1] * (7 - len(sizes)))
    save("split_chunk_sizes", np.array(rows, dtype=np.float64))  # the reader takes floats


@part
def matmul():
    """Broadcast batch axes: (2, 3, 4) @ (4, 5), (2, 2, 3, 4) @ (2, 4, 3), (3, 4) @ (2, 4, 5)
    and (2, 1, 3, 4) @ (3, 4, 2) with b transposed; gradients for u."""
    g = torch.Generator().manual_seed(20)
    cases = (("rank2_weight", (2, 3, 4), (4, 5), False),
             ("heads", (2, 2, 3, 4), (2, 4, 3), False),
             ("rank2_left", (3, 4), (2, 4, 5), False),
             ("both", (2, 1, 3, 4), (3, 2, 4), True))
    for name, sa, sb, tb in cases:
        a = torch.randn(sa, generator=g, dtype=torch.float64).requires_grad_(True)
        b = torch.randn(sb, generator=g, dtype=torch.float64).requires_grad_(True)
        y = a @ (b.transpose(-1, -2) if tb else b)
        u = torch.randn(y.shape, generator=g, dtype=torch.float64)
        ga, gb = torch.autograd.grad(y, (a, b), u)
        for what, t in (("a", a), ("b", b), ("u", u), ("y", y), ("grad_a", ga), ("grad_b", gb)):
            save(f"matmul_{name}_{what}", t)


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


@part
def optim():
    """torch.optim.SGD, Adam and AdamW over 10 steps, and clip_grad_norm_ (tests/lib/optim_test.cpp).

    Two seeded parameters a (3, 4) and b (5,), one seeded gradient per step and parameter
    (optim_grads_a (10, 3, 4), optim_grads_b (10, 5)), a learning rate per step set before it
    (optim_lr (10,): a warm-up, a cosine decay to 0, two steps after it), and each optimizer's
    parameters after every step: optim_<opt>_a (10, 3, 4), optim_<opt>_b (10, 5) for
    sgd (momentum 0.9), adam (betas 0.9, 0.999, eps 1e-8) and adamw (betas 0.8, 0.99, eps 1e-6,
    weight_decay 0.1). clip_grad_norm_: three gradients optim_clip_g<i> (3, 4), (5,), (2, 2, 2)
    and four max_norms in optim_clip_cases (4, 2) = (max_norm, total norm returned): above,
    below, and within 1e-6 below the total (which clips, as torch adds 1e-6 to the norm), and
    far above; optim_clip<k>_g<i> the gradients after case k."""
    g = torch.Generator().manual_seed(17)
    a0 = torch.randn(3, 4, generator=g)
    b0 = torch.randn(5, generator=g)
    steps = 10
    grads_a = torch.randn(steps, 3, 4, generator=g) * 0.5
    grads_b = torch.randn(steps, 5, generator=g) * 2.0
    warm = [0.01 * (k + 1) / 3 for k in range(3)]
    cosine = [0.005 * (1 + np.cos(np.pi * k / 5)) for k in range(1, 6)]  # ends at 0
    lrs = warm + cosine + [0.004, 0.004]
    save("optim_params_a", a0)
    save("optim_params_b", b0)
    save("optim_grads_a", grads_a)
    save("optim_grads_b", grads_b)
    save("optim_lr", torch.tensor(lrs))
    makers = {
        "sgd": lambda ps: torch.optim.SGD(ps, lr=lrs[0], momentum=0.9),
        "adam": lambda ps: torch.optim.Adam(ps, lr=lrs[0]),
        "adamw": lambda ps: torch.optim.AdamW(ps, lr=lrs[0], betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    }
    for name, make in makers.items():
        a = a0.clone().requires_grad_(True)
        b = b0.clone().requires_grad_(True)
        opt = make([a, b])
        after_a, after_b = [], []
        for k in range(steps):
            for group in opt.param_groups:
                group["lr"] = lrs[k]
            a.grad = grads_a[k].clone()
            b.grad = grads_b[k].clone()
            opt.step()
            after_a.append(a.detach().clone())
            after_b.append(b.detach().clone())
        save("optim_" + name + "_a", torch.stack(after_a))
        save("optim_" + name + "_b", torch.stack(after_b))
    clip = [torch.randn(3, 4, generator=g), torch.randn(5, generator=g), torch.randn(2, 2, 2, generator=g)]
    for i, c in enumerate(clip):
        save("optim_clip_g%d" % i, c)
    total = float(torch.norm(torch.stack([torch.norm(c) for c in clip])))
    cases = []
    for k, max_norm in enumerate([1.0, total * 1.5, total - 5e-7, 100.0]):
        ps = [torch.nn.Parameter(c.clone()) for c in clip]
        for p, c in zip(ps, clip):
            p.grad = c.clone()
        returned = torch.nn.utils.clip_grad_norm_(ps, max_norm)
        cases.append([max_norm, float(returned)])
        for i, p in enumerate(ps):
            save("optim_clip%d_g%d" % (k, i), p.grad)
    save("optim_clip_cases", torch.tensor(cases))


@part
def optim_groups():
    """torch.optim.SGD, Adam and AdamW over 6 steps with two parameter groups (tests/lib/optim_test.cpp).

    Three seeded parameters a (3, 4), b (5,), c (2, 3) and one seeded gradient per step and
    parameter (optim_groups_grads_<p> (6, ...)); the groups are [a, c] with its own lr and
    weight_decay and [b] taking the optimizer's defaults (AdamW: its lr, weight_decay 0):
      sgd    SGD(lr 0.03, momentum 0.9, weight_decay 0.01),   group 0 lr 0.1,  weight_decay 0.05
      adam   Adam(lr 0.01, betas 0.85, 0.98, eps 1e-7, weight_decay 0.02),
                                                              group 0 lr 0.03, weight_decay 0.1
      adamw  AdamW(lr 0.02, betas 0.9, 0.99, eps 1e-8, weight_decay 0.05),
                                                              group 0 lr 0.05, weight_decay 0.2
    The lr changes twice: before step 4 every group's becomes 0.01, before step 6 group 1's
    becomes 0.004. optim_groups_<opt>_<p> (6, ...) are the parameters after every step;
    optim_groups_<opt>_m_<p>, optim_groups_<opt>_v_<p> Adam's and AdamW's exp_avg and exp_avg_sq
    after the last one."""
    g = torch.Generator().manual_seed(23)
    shapes = {"a": (3, 4), "b": (5,), "c": (2, 3)}
    steps = 6
    start = {p: torch.randn(s, generator=g) for p, s in shapes.items()}
    grads = {p: torch.randn((steps,) + s, generator=g) * 0.5 for p, s in shapes.items()}
    for p in shapes:
        save("optim_groups_params_" + p, start[p])
        save("optim_groups_grads_" + p, grads[p])
    makers = {
        "sgd": lambda a, b, c: torch.optim.SGD([{"params": [a, c], "lr": 0.1, "weight_decay": 0.05}, {"params": [b]}],
                                               lr=0.03, momentum=0.9, weight_decay=0.01),
        "adam": lambda a, b, c: torch.optim.Adam([{"params": [a, c], "lr": 0.03, "weight_decay": 0.1}, {"params": [b]}],
                                                 lr=0.01, betas=(0.85, 0.98), eps=1e-7, weight_decay=0.02),
        "adamw": lambda a, b, c: torch.optim.AdamW([{"params": [a, c], "lr": 0.05, "weight_decay": 0.2},
                                                    {"params": [b], "weight_decay": 0.0}],
                                                   lr=0.02, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05),
    }
    for name, make in makers.items():
        ps = {p: start[p].clone().requires_grad_(True) for p in shapes}
        opt = make(ps["a"], ps["b"], ps["c"])
        after = {p: [] for p in shapes}
        for k in range(steps):
            if k == 3:
                for group in opt.param_groups:
                    group["lr"] = 0.01
            if k == 5:
                opt.param_groups[1]["lr"] = 0.004
            for p in shapes:
                ps[p].grad = grads[p][k].clone()
            opt.step()
            for p in shapes:
                after[p].append(ps[p].detach().clone())
        for p in shapes:
            save("optim_groups_%s_%s" % (name, p), torch.stack(after[p]))
            if name != "sgd":
                save("optim_groups_%s_m_%s" % (name, p), opt.state[ps[p]]["exp_avg"])
                save("optim_groups_%s_v_%s" % (name, p), opt.state[ps[p]]["exp_avg_sq"])


@part
def cross_entropy():
    """torch.nn.functional.cross_entropy with class-index targets, every option and their
    combinations (tests/lib/loss_test.cpp). Inputs, the class axis last as xgrad has it:
    logits "batch" (4, 5) with labels (4,), "seq" (2, 3, 5) with labels (2, 3) (torch gets the
    logits as (2, 5, 3)), "single" (5,) with one label (); class weights (5,) in [0.5, 2); the
    labels are saved as float64 (integers, exact), -100 where ignored ("batch_kept": batch's
    labels with the ignored one made class 1, for the cases without ignore_index, whose
    ignore_index torch gets as -1000, a value no label has). Each case of `cases`
    below (name: input, ignore_index, weights, label_smoothing, reduction) writes
    cross_entropy_<case>_loss and, w.r.t. the logits, cross_entropy_<case>_grad: of the loss for
    mean and sum, of sum(loss * u) for none, with u cross_entropy_<input>_u of the labels' shape.
    "all_ignored" cases have every label ignored (mean: NaN, gradient 0); "zero_weight" keeps
    only labels of weight 0 (mean: 0 / 0, NaN, and a NaN gradient)."""
    g = torch.Generator().manual_seed(36)
    inputs = {
        "batch": (torch.randn(4, 5, generator=g) * 2, torch.tensor([3, -100, 0, 3])),
        "seq": (torch.randn(2, 3, 5, generator=g) * 2, torch.tensor([[1, 4, -100], [2, 2, 0]])),
        "single": (torch.randn(5, generator=g) * 2, torch.tensor(4)),
        "in_range": (torch.randn(4, 5, generator=g) * 2, torch.tensor([2, 1, 2, 4])),
        "all_ignored": (torch.randn(3, 5, generator=g), torch.tensor([-100, -100, -100])),
        "zero_weight": (torch.randn(3, 5, generator=g), torch.tensor([1, 1, -100])),
    }
    weights = torch.rand(5, generator=g) * 1.5 + 0.5
    save("cross_entropy_weights", weights)
    zero_weights = weights.clone()
    zero_weights[1] = 0
    save("cross_entropy_zero_weights", zero_weights)
    upstream = {}
    for name, (logits, labels) in inputs.items():
        upstream[name] = torch.randn(labels.shape, generator=g)
        save("cross_entropy_" + name + "_logits", logits)
        save("cross_entropy_" + name + "_labels", labels.to(torch.float64))
        save("cross_entropy_" + name + "_u", upstream[name])
    # name: input, ignore_index (None: none, so torch gets a value no label has), weights
    # ("w", "zero" or None), label_smoothing, reduction
    cases = {
        "plain_mean": ("batch_kept", None, None, 0.0, "mean"),
        "plain_sum": ("batch_kept", None, None, 0.0, "sum"),
        "plain_none": ("batch_kept", None, None, 0.0, "none"),
        "ignore_mean": ("batch", -100, None, 0.0, "mean"),
        "ignore_sum": ("batch", -100, None, 0.0, "sum"),
        "ignore_none": ("batch", -100, None, 0.0, "none"),
        "ignore_in_range_mean": ("in_range", 2, None, 0.0, "mean"),
        "weights_mean": ("batch_kept", None, "w", 0.0, "mean"),
        "weights_sum": ("batch_kept", None, "w", 0.0, "sum"),
        "weights_none": ("batch_kept", None, "w", 0.0, "none"),
        "weights_ignore_mean": ("batch", -100, "w", 0.0, "mean"),
        "weights_ignore_none": ("batch", -100, "w", 0.0, "none"),
        "smoothing_mean": ("batch_kept", None, None, 0.1, "mean"),
        "smoothing_sum": ("batch_kept", None, None, 0.1, "sum"),
        "smoothing_none": ("batch_kept", None, None, 0.1, "none"),
        "smoothing_weights_mean": ("batch_kept", None, "w", 0.25, "mean"),
        "smoothing_ignore_mean": ("batch", -100, None, 0.25, "mean"),
        "smoothing_ignore_in_range_sum": ("in_range", 2, None, 0.3, "sum"),
        "all_options_mean": ("batch", -100, "w", 0.2, "mean"),
        "all_options_sum": ("batch", -100, "w", 0.2, "sum"),
        "all_options_none": ("batch", -100, "w", 0.2, "none"),
        "smoothing_one_mean": ("batch", -100, "w", 1.0, "mean"),
        "seq_all_options_mean": ("seq", -100, "w", 0.15, "mean"),
        "seq_all_options_none": ("seq", -100, "w", 0.15, "none"),
        "seq_ignore_sum": ("seq", -100, None, 0.0, "sum"),
        "single_mean": ("single", None, None, 0.0, "mean"),
        "single_smoothing_weights_none": ("single", None, "w", 0.2, "none"),
        "all_ignored_mean": ("all_ignored", -100, None, 0.0, "mean"),
        "all_ignored_sum": ("all_ignored", -100, None, 0.0, "sum"),
        "all_ignored_none": ("all_ignored", -100, None, 0.0, "none"),
        "all_ignored_all_options_mean": ("all_ignored", -100, "w", 0.2, "mean"),
        "zero_weight_mean": ("zero_weight", -100, "zero", 0.0, "mean"),
        "zero_weight_smoothing_mean": ("zero_weight", -100, "zero", 0.2, "mean"),
    }
    # "batch_kept": batch with its ignored label made class 1, for the cases without ignore_index.
    kept = torch.where(inputs["batch"][1] == -100, torch.tensor(1), inputs["batch"][1])
    save("cross_entropy_batch_kept_labels", kept.to(torch.float64))
    for name, (which, ignore_index, w, eps, reduction) in cases.items():
        source = "batch" if which == "batch_kept" else which
        logits = inputs[source][0].clone().requires_grad_(True)
        labels = kept if which == "batch_kept" else inputs[source][1]
        torch_logits = logits.movedim(-1, 1) if logits.dim() > 2 else logits
        loss = torch.nn.functional.cross_entropy(
            torch_logits, labels, weight={"w": weights, "zero": zero_weights, None: None}[w],
            ignore_index=-1000 if ignore_index is None else ignore_index, reduction=reduction,
            label_smoothing=eps)
        (grad,) = torch.autograd.grad(loss, logits, upstream[source] if reduction == "none" else torch.ones(()))
        save("cross_entropy_" + name + "_loss", loss)
        save("cross_entropy_" + name + "_grad", grad)

if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    for f in parts:
        f()
