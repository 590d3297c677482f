#!/usr/bin/python3
"""examples/char_gpt.cpp's training loop in Python: the same model, data, schedule and AdamW.

A character-level GPT (nanoGPT's shape: token and position embeddings, pre-norm blocks of
causal multi-head attention and a GELU MLP, a final layer norm and a head), built with the
xgrad module. For the same settings and seed it draws the same windows (splitmix64), the same
initial weights (xgrad.random_array: the C++ generator) and makes the same library calls, so
it prints the C++ program's evaluation losses (tests/python/char_gpt_matches_cpp.cmake compares
them; docs/python.md gives the tolerance).

    PYTHONPATH=build/python examples/python/char_gpt.py --steps 200 --eval-every 50
"""

import argparse
import math
import sys
import time

import numpy as np

import xgrad
from char_data import DEFAULT_CORPUS, SplitMix64, learning_rate, load_corpus, windows

BETA1, BETA2, ADAM_EPS, MAX_GRAD_NORM = 0.9, 0.99, 1e-8, 1.0


class Model:
    """examples/char_gpt.hpp's build_model: parameters drawn in the same order from the same seeds."""

    def __init__(self, g, a, vocab, batch):
        self.g, self.decayed, self.not_decayed = g, [], []
        self.next_seed = a.seed
        d, dtype = a.d_model, g.dtype
        residual_std = 0.02 / math.sqrt(2.0 * a.layers)

        def weight(name, rows, cols, stddev=0.02):
            p = g.parameter(name, xgrad.random_array((rows, cols), self.next_seed, stddev, dtype))
            self.next_seed += 1
            self.decayed.append(p)
            return p

        def vector(name, n, value):
            self.next_seed += 1
            p = g.parameter(name, np.full(n, value, dtype=dtype))
            self.not_decayed.append(p)
            return p

        def norm(x, name):
            return xgrad.layer_norm(x, vector(name + ".g", d, 1), vector(name + ".b", d, 0))

        self.ids = g.indices("ids", np.zeros((batch, a.block), dtype=np.int64))
        self.targets = g.input("targets", np.zeros((batch, a.block, vocab)))
        with g.scope("embed"):
            wte = weight("wte", vocab, d)
            x = xgrad.embedding(wte, self.ids) + weight("wpe", a.block, d)
        mask = xgrad.causal_mask(a.block, a.block)
        for layer in range(a.layers):
            h = f"h{layer}."
            with g.scope(f"h{layer}"):
                ln1 = [vector(h + "ln1.g", d, 1), vector(h + "ln1.b", d, 0)]
                attn = xgrad.AttentionParams(
                    w_q=weight(h + "attn.w_q", d, d), b_q=vector(h + "attn.b_q", d, 0),
                    w_k=weight(h + "attn.w_k", d, d), b_k=vector(h + "attn.b_k", d, 0),
                    w_v=weight(h + "attn.w_v", d, d), b_v=vector(h + "attn.b_v", d, 0),
                    w_o=weight(h + "attn.w_o", d, d, residual_std), b_o=vector(h + "attn.b_o", d, 0))
                ln2 = [vector(h + "ln2.g", d, 1), vector(h + "ln2.b", d, 0)]
                w1, b1 = weight(h + "mlp.w1", d, 4 * d), vector(h + "mlp.b1", 4 * d, 0)
                w2, b2 = weight(h + "mlp.w2", 4 * d, d, residual_std), vector(h + "mlp.b2", d, 0)
                a_ = xgrad.layer_norm(x, *ln1)
                x = x + xgrad.multi_head_attention(a_, a_, attn, a.heads, mask)
                u = xgrad.layer_norm(x, *ln2)
                with g.scope("mlp"):
                    x = x + xgrad.linear(xgrad.gelu(xgrad.linear(u, w1, b1)), w2, b2)
        with g.scope("head"):
            self.logits = xgrad.matmul(norm(x, "lnf"), weight("head.w", d, vocab))
        with g.scope("loss"):
            self.loss = xgrad.cross_entropy(self.logits, self.targets)

    def parameters(self):
        return self.decayed + self.not_decayed

    def feed(self, x, y):
        """The ids (B, T) and the one-hot targets of their successors."""
        targets = np.zeros(self.targets.shape)
        np.put_along_axis(targets, y[..., None], 1.0, axis=-1)
        self.g.set_value(self.ids, x)
        self.g.set_value(self.targets, targets)


class Trainer:
    """char_gpt::Trainer: replay, clip the global norm at 1, AdamW on the two groups."""

    def __init__(self, m, weight_decay):
        self.m = m
        self.decayed = xgrad.AdamW(m.decayed, lr=0.0, betas=(BETA1, BETA2), eps=ADAM_EPS, weight_decay=weight_decay)
        self.other = xgrad.AdamW(m.not_decayed, lr=0.0, betas=(BETA1, BETA2), eps=ADAM_EPS, weight_decay=0.0)
        self.grads = xgrad.grad(m.loss, m.parameters())

    def step(self, lr):
        self.m.g.replay()
        loss = float(self.m.loss.value)
        xgrad.clip_grad_norm(self.grads, MAX_GRAD_NORM)
        split = len(self.m.decayed)
        self.decayed.lr = lr
        self.other.lr = lr
        self.decayed.step(self.grads[:split])
        self.other.step(self.grads[split:])
        return loss


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--decay-steps", type=int, default=None, help="default: --steps")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="", help=f"a text file (default: the fortunes of {DEFAULT_CORPUS})")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    a = p.parse_args()
    if a.d_model % a.heads:
        p.error(f"--heads {a.heads} does not divide --d-model {a.d_model}")
    decay_steps = a.steps if a.decay_steps is None else a.decay_steps

    train, val, chars = load_corpus(a.data)
    if len(val) < a.block + 1:
        sys.exit(f"char_gpt.py: the corpus is too short for --block {a.block}")
    g = xgrad.Graph(a.dtype)
    m = Model(g, a, len(chars), a.batch)
    trainer = Trainer(m, a.weight_decay)
    ge = xgrad.Graph(a.dtype)  # evaluation: a forward-only copy fed the current parameters
    me = Model(ge, a, len(chars), a.batch)
    ge.set_training(False)
    eval_rng = SplitMix64(a.seed + 1)
    val_batches = [windows(val, a.batch, a.block, eval_rng) for _ in range(a.eval_batches)]
    train_batches = [windows(train, a.batch, a.block, eval_rng) for _ in range(a.eval_batches)]

    evaluations = []  # per evaluation, each attention layer's fraction of saturated rows

    def evaluate(step):
        for p_, q_ in zip(m.parameters(), me.parameters()):
            ge.set_value(q_, p_.value)
        losses = []
        for batches in (train_batches, val_batches):
            total = 0.0
            for x, y in batches:
                me.feed(x, y)
                ge.replay()
                total += float(me.loss.value)
            losses.append(total / len(batches))
        # The attention statistics, as char_gpt gathers them for its log: the training graph
        # replayed on a val batch in evaluation mode, its softmax rows' saturation.
        g.set_training(False)
        m.feed(*val_batches[0])
        g.replay()
        saturation = xgrad.softmax_diagnostics(g, 0.99, rows=True)
        g.set_training(True)
        evaluations.append([d["saturated_fraction"] for d in saturation if not d.get("in_backward")])
        lr = learning_rate(a.lr, a.warmup, decay_steps, max(step - 1, 0))
        print(f"step {step:5d}  train {losses[0]:.4f}  val {losses[1]:.4f}  lr {lr:.2e}", flush=True)

    print(f"char_gpt.py: {len(train) + len(val)} characters, {len(chars)} tokens; {a.layers} layers, {a.heads} heads, "
          f"d_model {a.d_model}, block {a.block}, {a.dtype}; batch {a.batch}, {a.steps} steps", flush=True)
    rng = SplitMix64(a.seed)
    start = time.perf_counter()
    evaluate(0)
    for step in range(a.steps):
        m.feed(*windows(train, a.batch, a.block, rng))
        g.set_step(step)
        trainer.step(learning_rate(a.lr, a.warmup, decay_steps, step))
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            evaluate(step + 1)
    elapsed = time.perf_counter() - start
    print("saturated rows per layer: " + ", ".join(f"{f:.3f}" for f in evaluations[-1]))
    print(f"trained {a.steps} steps in {elapsed:.1f}s ({a.steps * a.batch * a.block / elapsed:.0f} tokens/s, "
          "evaluations included)")


if __name__ == "__main__":
    main()
