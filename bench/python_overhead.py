#!/usr/bin/python3
"""The Python module's overhead over the C++ library (issue 33), measured in one script.

1. The documented example (float32 attention and its gradients), built fresh and replayed, per
   call: the C++ times are the speed guard's (build/tests/xgrad_speed_guard prints them), the
   Python ones timed here the same way (2000 calls a round, the median of 5 rounds).
2. A training step of char_gpt's default model: examples/char_gpt (C++) and
   examples/python/char_gpt.py with the same settings, alternating, 5 runs each; a step's time
   is (wall time of 160 steps - wall time of 40 steps) / 120, so that start-up, reading the
   corpus, building the graphs and the two evaluations every run makes cancel. On a noisy
   machine that difference moves by several percent, so
3. the same Python step timed part by part in this process: the library's work (the replay,
   clipping and AdamW, each one call) against the Python around it (drawing the windows, the
   one-hot targets, set_value, the calls themselves).

    PYTHONPATH=build/python bench/python_overhead.py --build build
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import xgrad


def example(g):
    q = g.input("q", np.array([[np.log(2)], [0]]))
    k = g.input("k", np.array([[1.0], [0]]))
    v = g.input("v", np.array([[3.0, 0], [0, 6]]))
    out = xgrad.attention(q, k, v)
    xgrad.grad(out, [q, k, v])


def python_example_times(calls=2000, rounds=5):
    fresh, replay = [], []
    g = xgrad.Graph("float32")
    example(g)
    for _ in range(rounds + 1):
        start = time.perf_counter()
        for _ in range(calls):
            g.replay()
        replay.append((time.perf_counter() - start) / calls * 1e6)
        start = time.perf_counter()
        for _ in range(calls):
            example(xgrad.Graph("float32"))
        fresh.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(fresh[1:]), statistics.median(replay[1:])


def cpp_example_times(guard, env):
    out = subprocess.run([guard], env=env, capture_output=True, text=True, check=True).stdout
    fresh = float(re.search(r"documented example, fresh +([0-9.]+) us", out).group(1))
    replay = float(re.search(r"documented example, replay +([0-9.]+) us", out).group(1))
    return fresh, replay


def wall(command, env):
    start = time.perf_counter()
    subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start


def step_ms(command, env, steps=40):
    """(160 steps - 40 steps) / 120, in ms."""
    settings = ["--eval-every", "1000", "--eval-batches", "1", "--seed", "1"]
    short = wall(command + settings + ["--steps", str(steps)], env)
    long = wall(command + settings + ["--steps", str(4 * steps)], env)
    return (long - short) / (3 * steps) * 1e3


def python_step_parts(steps=60, warm=10):
    """ms per step of char_gpt.py's step: the replay, the rest of the library's calls, the Python around them."""
    import types

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
    import char_gpt

    a = types.SimpleNamespace(layers=4, heads=4, d_model=128, block=64, seed=1)
    train, _, chars = char_gpt.load_corpus("")
    g = xgrad.Graph("float32")
    m = char_gpt.Model(g, a, len(chars), 12)
    trainer = char_gpt.Trainer(m, 0.1)
    rng = char_gpt.SplitMix64(1)
    parts = {"windows and targets (Python)": 0.0, "replay (library)": 0.0, "clip and AdamW (library calls)": 0.0}
    for step in range(steps):
        t0 = time.perf_counter()
        m.feed(*char_gpt.windows(train, 12, 64, rng))
        t1 = time.perf_counter()
        g.replay()
        t2 = time.perf_counter()
        float(m.loss.value)
        xgrad.clip_grad_norm(trainer.grads, 1.0)
        split = len(m.decayed)
        trainer.decayed.lr = trainer.other.lr = 1e-3
        trainer.decayed.step(trainer.grads[:split])
        trainer.other.step(trainer.grads[split:])
        t3 = time.perf_counter()
        if step >= warm:
            for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
                parts[key] += dt * 1e3 / (steps - warm)
    return parts


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", XGRAD_BLAS_WARNING="0")
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; OpenBLAS kernels: OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', '(unset)')}")

    c_fresh, c_replay = cpp_example_times(os.path.join(a.build, "tests", "xgrad_speed_guard"), env)
    p_fresh, p_replay = python_example_times()
    print("| documented example | C++ us | Python us | Python / C++ |\n|---|---:|---:|---:|")
    print(f"| fresh (build + grad) | {c_fresh:.2f} | {p_fresh:.2f} | {p_fresh / c_fresh:.2f} |")
    print(f"| replay | {c_replay:.2f} | {p_replay:.2f} | {p_replay / c_replay:.2f} |")

    here = os.path.dirname(os.path.abspath(__file__))
    cpp = [os.path.join(a.build, "char_gpt")]
    py = [sys.executable, os.path.join(here, "..", "examples", "python", "char_gpt.py")]
    c_ms, p_ms = [], []
    for _ in range(a.runs):
        c_ms.append(step_ms(cpp, env))
        p_ms.append(step_ms(py, env))
    c, q = statistics.median(c_ms), statistics.median(p_ms)
    print("\n| char_gpt step (default model, float32, 1 thread) | C++ ms | Python ms | Python / C++ |\n|---|---:|---:|---:|")
    print(f"| median of {a.runs} | {c:.1f} | {q:.1f} | {q / c:.3f} |")
    print(f"(runs: C++ {', '.join(f'{x:.1f}' for x in c_ms)}; Python {', '.join(f'{x:.1f}' for x in p_ms)})")

    parts = python_step_parts()
    total = sum(parts.values())
    print("\n| char_gpt.py's step, part by part (this process) | ms | share |\n|---|---:|---:|")
    for key, ms in parts.items():
        print(f"| {key} | {ms:.2f} | {ms / total:.1%} |")


if __name__ == "__main__":
    main()
