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
