#!/usr/bin/python3
"""The entropy-collapse experiment of docs/attention-variants.md (issue 31): examples/char_gpt at
the default learning rate and at 3e-2, where the baseline's attention collapses, for the baseline
and each remedy, same seed and steps. Writes each run's log and plot to docs/variants/ and prints
the table of the page: final val loss, mean and min head entropy at the last evaluation, and the
time per step (evaluations included, one thread).

    /usr/bin/python3 bench/attention_variants.py [--char-gpt build/char_gpt] [--steps 300]

Only the standard library: the numbers come from char_gpt's --log CSV and its last line.
"""
import argparse
import csv
import os
import re
import subprocess
import sys

RUNS = [  # name, flags, what it is
    ("baseline", [], "GPT-2 block (softmax, layer norm)"),
    ("qk_norm", ["--qk-norm"], "QK-norm (RMS, learned gains)"),
    ("softcap", ["--softcap", "5"], "tanh soft-cap 5"),
    ("sigmoid", ["--attn", "sigmoid"], "sigmoid attention, b = -log T"),
    ("qk_norm_softcap", ["--qk-norm", "--softcap", "5"], "QK-norm and soft-cap 5"),
]
RATES = ["1e-3", "3e-2"]


def run(char_gpt, out_dir, name, flags, lr, steps, seed):
    stem = os.path.join(out_dir, f"{name}_lr{lr}")
    cmd = [char_gpt, "--steps", str(steps), "--seed", str(seed), "--lr", lr, "--eval-every", "25",
           "--log", stem + ".csv", "--plot", stem + ".svg"] + flags
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # xgrad's own threads follow it
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    m = re.search(r"trained (\d+) steps in ([0-9.]+) (ms|s|min)", p.stdout)
    seconds = None
    if m:
        t = float(m.group(2))
        seconds = t / 1000 if m.group(3) == "ms" else t * 60 if m.group(3) == "min" else t
    m2 = re.search(r"trained (\d+) steps in .*\(([0-9]+) tokens/s", p.stdout)
    with open(stem + ".csv") as f:
        rows = list(csv.DictReader(f))
    last = rows[-1]
    entropies = [float(v) for k, v in last.items() if k.startswith("entropy_")]
    return {
        "val": float(last["val_loss"]),
        "mean_h": sum(entropies) / len(entropies),
        "min_h": min(entropies),
        "tokens_per_s": float(m2.group(2)) if m2 else None,
        "stdout": p.stdout,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--char-gpt", default="build/char_gpt")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="docs/variants")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print("| run | lr | final val loss | mean head entropy | min head entropy | ms per step |")
    print("|---|---:|---:|---:|---:|---:|")
    for lr in RATES:
        for name, flags, what in RUNS:
            r = run(a.char_gpt, a.out, name, flags, lr, a.steps, a.seed)
            # batch 12 x block 64 tokens per step (char_gpt's defaults)
            ms = 1000 * 12 * 64 / r["tokens_per_s"] if r["tokens_per_s"] else float("nan")
            print(f"| {what} (`{' '.join(flags) or 'no flag'}`) | {lr} | {r['val']:.3f} | {r['mean_h']:.3f} | "
                  f"{r['min_h']:.3f} | {ms:.0f} |", flush=True)


if __name__ == "__main__":
    main()
