"""char_gpt's data and schedule in Python, draw for draw: the corpus, its character set and 90/10
split, the splitmix64 windows and nanoGPT's learning-rate schedule of examples/char_gpt.cpp.
Needs numpy only; examples/python/char_gpt.py (xgrad) and bench/char_gpt_torch.py (PyTorch)
both read their batches from here.
"""

import math
import os

import numpy as np

DEFAULT_CORPUS = "/usr/share/games/fortunes"
MASK64 = (1 << 64) - 1


class SplitMix64:
    """char_gpt's window generator, draw for draw."""

    def __init__(self, state):
        self.state = state & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def load_corpus(path):
    """(train ids, val ids, character set) as char_gpt reads them: bytes, 90% / 10%."""
    if path:
        with open(path, "rb") as f:
            text = f.read()
    else:
        names = sorted(f for f in os.listdir(DEFAULT_CORPUS)
                       if not f.endswith(".dat") and not os.path.islink(os.path.join(DEFAULT_CORPUS, f))
                       and os.path.isfile(os.path.join(DEFAULT_CORPUS, f)))
        text = b"".join(open(os.path.join(DEFAULT_CORPUS, f), "rb").read() for f in names)
    chars = sorted(set(text))
    lookup = np.zeros(256, dtype=np.int64)
    lookup[chars] = np.arange(len(chars))
    ids = lookup[np.frombuffer(text, dtype=np.uint8)]
    split = len(text) * 9 // 10
    return ids[:split], ids[split:], bytes(chars)


def windows(tokens, batch, block, rng):
    starts = [rng.next() % (len(tokens) - block) for _ in range(batch)]
    x = np.stack([tokens[s:s + block] for s in starts])
    y = np.stack([tokens[s + 1:s + block + 1] for s in starts])
    return x, y


def learning_rate(lr, warmup, decay_steps, it):
    """nanoGPT's schedule: linear warm-up, then a cosine down to lr / 10 at decay_steps."""
    min_lr = lr / 10
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it >= decay_steps:
        return min_lr
    ratio = (it - warmup) / (decay_steps - warmup)
    return min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (lr - min_lr)
