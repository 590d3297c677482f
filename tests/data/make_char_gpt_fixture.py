#!/usr/bin/python3
"""The PyTorch fixture of tests/examples/char_gpt_test.cpp: 10 AdamW steps of char_gpt's model.

A 2-layer model (2 heads, d_model 16, block 8, a vocabulary of 11) in float64, the model of
bench/char_gpt_torch.py (the PyTorch side of examples/char_gpt.hpp), trained on one fixed batch
of 4 windows for 10 steps of char_gpt's training step: warm-up over 3 steps and cosine decay
to step 10 from lr 0.01, AdamW (betas 0.9, 0.99, eps 1e-8) with weight decay 0.1 on the 2-D
weights only, and the gradients' global norm clipped at 1. Writes, in xgrad's names and layouts:

  tests/data/char_gpt/init.safetensors    the initial parameters (the config in the metadata)
  tests/data/char_gpt/final.safetensors   the parameters after the 10 steps
  tests/data/char_gpt/steps.safetensors   x and y (4, 8) as float64, the 11 losses (before each
                                          step and after the last), the 10 gradient norms
                                          before clipping, and the 10 learning rates

The initial weights are N(0, 0.2^2) (ten times GPT-2's, so that the steps move the loss and the
clipping acts), biases N(0, 0.1^2), layer-norm gains 1 + N(0, 0.1^2): every parameter matters.
Run with Debian's interpreter (needs python3-torch): /usr/bin/python3 tests/data/make_char_gpt_fixture.py
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import char_gpt_torch as cg  # noqa: E402

LAYERS, HEADS, D, BLOCK, VOCAB, BATCH, STEPS = 2, 2, 16, 8, 11, 4, 10
LR, WARMUP, DECAY_STEPS, WEIGHT_DECAY = 0.01, 3, 10, 0.1


def main():
    torch.manual_seed(18)
    model = cg.GPT(VOCAB, LAYERS, HEADS, D, BLOCK).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.2)
            elif name.endswith("weight"):  # layer-norm gains
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.1)
    x = torch.randint(0, VOCAB, (BATCH, BLOCK))
    y = torch.randint(0, VOCAB, (BATCH, BLOCK))
    out = os.path.join(HERE, "char_gpt")
    os.makedirs(out, exist_ok=True)
    config = {"layers": str(LAYERS), "heads": str(HEADS), "d_model": str(D), "block": str(BLOCK),
              "vocab": str(VOCAB), "lr": repr(LR), "warmup": str(WARMUP), "decay_steps": str(DECAY_STEPS),
              "weight_decay": repr(WEIGHT_DECAY)}
    cg.write_safetensors(os.path.join(out, "init.safetensors"), cg.to_xgrad(model), config)

    opt = cg.make_optimizer(model, WEIGHT_DECAY)
    losses, norms, lrs = [], [], []
    for step in range(STEPS):
        lr = cg.learning_rate(LR, WARMUP, DECAY_STEPS, step)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        losses.append(loss.item())
        lrs.append(lr)
    with torch.no_grad():
        losses.append(model(x, y).item())
    cg.write_safetensors(os.path.join(out, "final.safetensors"), cg.to_xgrad(model))
    cg.write_safetensors(os.path.join(out, "steps.safetensors"),
                         {"x": x.double().numpy(), "y": y.double().numpy(), "losses": np.array(losses),
                          "grad_norms": np.array(norms), "lr": np.array(lrs)})
    print("losses", " ".join(f"{v:.6f}" for v in losses))
    print("grad norms", " ".join(f"{v:.3f}" for v in norms))
    print("parameters", sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
