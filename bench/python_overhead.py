#!/usr/bin/python3
"""The Python module's overhead over the C++ library (issue 33), measured in one script.

1. The documented example (float32 attention and its gradients), built fresh and replayed, per
   call: the C++ times are the speed guard's (build/tests/xgrad_speed_guard prints them), the
   Python ones timed here the same way (2000 calls a round, the median of 5 rounds).
2. A training step of char_gpt's default model: examples/char_gpt (C++) and
   examples/python/char_gpt.py with the same settings, alternating, 3 runs each; a step's time
   is (wall time of 80 steps - wall time of 40 steps) / 40, so that start-up, reading the
   corpus, building the graphs and the two evaluations every run makes cancel.

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
    """(80 steps - 40 steps) / 40, in ms."""
    settings = ["--eval-every", "1000", "--eval-batches", "1", "--seed", "1"]
    short = wall(command + settings + ["--steps", str(steps)], env)
    long = wall(command + settings + ["--steps", str(2 * steps)], env)
    return (long - short) / steps * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=3)
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


if __name__ == "__main__":
    main()
