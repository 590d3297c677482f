#!/usr/bin/python3
"""One training step of two models in xgrad and in PyTorch eager, side by side (issue 19).

    /usr/bin/python3 bench/model_compare.py --xgrad build/bench/xgrad_model_bench [--steps 20] [--rounds 3]
                                            [--threads 1,2] [--dtypes float32,float64] [--out table.md]

Models (examples/char_gpt.hpp's, and bench/char_gpt_torch.py's GPT in PyTorch, from the same
kind of initial values, on random tokens over 114 characters):
  stack      2 layers, B 16, T 64, d 128, 4 heads, MLP 512 (issue 19's "transformer-like stack")
  char_gpt   char_gpt's default model: 4 layers, B 12, T 64, d 128, 4 heads
  char_gpt@32x256  the same at batch 32, block 256 (the 2-thread target)
A step: the loss and its gradients (xgrad: a lean replay; PyTorch: forward, zero_grad, backward),
gradient clipping at 1, AdamW on two groups. Each measurement is its own process with
OPENBLAS_NUM_THREADS=N (and for PyTorch torch.set_num_threads(N), OMP_WAIT_POLICY=passive), the
median over --steps steps after 3; xgrad and PyTorch alternate, --rounds times, and the table
holds the medians of the rounds. Memory: the peak RSS of the timed steps (restarted after the first
3, freed heap returned first) less the RSS before the model was built.
xgrad's bare GEMMs: the same step's products alone (xgrad_model_bench's gemm_ms).
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time

MODELS = {"stack": (2, 16, 64), "char_gpt": (4, 12, 64), "char_gpt@32x256": (4, 32, 256)}


def status_mib(key):
    """A line of /proc/self/status in MiB: VmRSS (the resident set now) or VmHWM (its peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return float(line.split()[1]) / 1024
    return 0.0


def restart_peak():
    """Freed heap back to the system, and the peak restarted from now (as xgrad_model_bench does)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def torch_worker(model, dtype, steps, threads):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import char_gpt_torch as cg
    torch.set_num_threads(threads)
    layers, batch, block = MODELS[model]
    baseline = status_mib("VmRSS")
    torch.manual_seed(1)
    net = cg.GPT(114, layers, 4, 128, block).to(torch.float32 if dtype == "float32" else torch.float64)
    with torch.no_grad():
        for p in net.parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.02)
    opt = cg.make_optimizer(net, 0.1)
    times = []
    for s in range(steps + 3):
        x = torch.randint(0, 114, (batch, block))
        y = torch.randint(0, 114, (batch, block))
        t0 = time.perf_counter()
        cg.train_step(net, opt, x, y, 1e-3)
        if s == 2:
            restart_peak()
        if s >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
    # The OpenBLAS kernels PyTorch ran (the library its libblas.so.3 resolves to, if OpenBLAS).
    try:
        corename = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
        corename.restype = ctypes.c_char_p
        kernels = corename().decode()
    except (OSError, AttributeError):
        kernels = "unknown"
    print(f"step_ms {statistics.median(times):.3f} step_peak_MiB {status_mib('VmHWM') - baseline:.1f} kernels {kernels}")


def run(cmd, threads, torch_side):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    if torch_side:
        env["OMP_WAIT_POLICY"] = "passive"
    out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout.split()
    r = {out[i]: float(out[i + 1]) for i in range(len(out) - 1) if out[i] in ("step_ms", "gemm_ms", "step_peak_MiB")}
    r["kernels"] = next((out[i + 1] for i in range(len(out) - 1) if out[i] == "kernels"), "unknown")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--xgrad", help="the xgrad_model_bench binary")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--models", default="stack,char_gpt,char_gpt@32x256")
    ap.add_argument("--out")
    ap.add_argument("--worker", nargs=4, metavar=("MODEL", "DTYPE", "STEPS", "THREADS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        torch_worker(a.worker[0], a.worker[1], int(a.worker[2]), int(a.worker[3]))
        return
    kernels = {"xgrad": set(), "PyTorch": set()}
    rows = ["| model | dtype | threads | xgrad step ms | PyTorch step ms | xgrad / PyTorch | xgrad bare GEMMs ms | "
            "step / GEMMs | xgrad step MiB | PyTorch step MiB |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for model in a.models.split(","):
        layers, batch, block = MODELS[model]
        name = model.split("@")[0]
        for dtype in a.dtypes.split(","):
            for threads in (int(t) for t in a.threads.split(",")):
                xs, ts = [], []
                for _ in range(a.rounds):
                    xs.append(run([a.xgrad, "--model", name, "--dtype", dtype, "--steps", str(a.steps),
                                   "--batch", str(batch), "--block", str(block)], threads, False))
                    ts.append(run([sys.executable, os.path.abspath(__file__), "--worker", model, dtype, str(a.steps),
                                   str(threads)], threads, True))
                kernels["xgrad"].update(r["kernels"] for r in xs)
                kernels["PyTorch"].update(r["kernels"] for r in ts)
                med = lambda rs, k: statistics.median(r[k] for r in rs)
                x, t, gm = med(xs, "step_ms"), med(ts, "step_ms"), med(xs, "gemm_ms")
                rows.append(f"| {model} | {dtype} | {threads} | {x:.1f} | {t:.1f} | {x / t:.2f} | {gm:.1f} | {x / gm:.2f} "
                            f"| {med(xs, 'step_peak_MiB'):.0f} | {med(ts, 'step_peak_MiB'):.0f} |")
                print(rows[-1], flush=True)
    # The kernels decide the GEMMs' speed (OPENBLAS_CORETYPE, docs/performance.md): a table is
    # like for like only where both sides ran the same.
    rows.append("")
    rows.append("OpenBLAS kernels: " + "; ".join(f"{side} {', '.join(sorted(k))}" for side, k in kernels.items()) +
                f" (OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')})")
    table = "\n".join(rows) + "\n"
    print("\n" + table)
    if a.out:
        open(a.out, "w").write(table)


if __name__ == "__main__":
    main()
