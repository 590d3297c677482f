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
    np.save(out + name + ".npy", np.array(a, order="C"))  # 0-d stays 0-d


parts = []  # the functions below, in the order they run


def part(f):
    parts.append(f)
    return f


# (each part follows here)


@part
def elementwise():
    """Every unary row on x (positive for log and sqrt) and its gradient for an upstream u;
    sub, div, maximum and minimum with b (2, 1, 4) broadcast against a (3, 4) and their gradients."""
    g = torch.Generator().manual_seed(17)
    x = torch.randn(3, 4, generator=g, dtype=torch.float64)
    p = torch.rand(3, 4, generator=g, dtype=torch.float64) * 1.5 + 0.5
    u = torch.randn(3, 4, generator=g, dtype=torch.float64)
    save("elementwise_x", x)
    save("elementwise_p", p)
    save("elementwise_u", u)
    for name, f, arg in (("neg", torch.neg, x), ("exp", torch.exp, x), ("log", torch.log, p),
                         ("sqrt", torch.sqrt, p), ("tanh", torch.tanh, x), ("erf", torch.erf, x)):
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


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    for f in parts:
        f()
