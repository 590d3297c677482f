#!/usr/bin/python3
"""Scaled dot-product attention in numpy and PyTorch, beside the bare GEMMs, with xgrad's results.

    out = softmax(q k^T * s) v,   s = 1 / sqrt(d_k)
    q: (T_q, d_k), k: (T_k, d_k), v: (T_k, d_v), no batch axes.

Modes: `fwd` (out only) and `fwd_bwd` (out and the gradients of sum(out * g) with respect to
q, k and v, for a fixed random g of out's shape).

Implementations:
  numpy_plain    written plainly: every step allocates its result.
  numpy_inplace  preallocated buffers and in-place ufuncs (out=), s folded into q, and
                 rowsum(dW * w) computed as rowsum(g * out), a T_q x d_v pass.
  torch          PyTorch eager: torch.matmul / torch.softmax, out.backward(g); the forward
                 alone under no_grad.
  numpy GEMMs    (rows with modes gemms_fwd, gemms_fwd_bwd) the bare matrix products alone,
                 np.matmul into preallocated outputs: 2 forward (q k^T, w v), 6 with backward
                 (+ g v^T, w^T g, dS k, dS^T q). Each worker times them alternately with its own
                 computation; that is the `/ GEMMs` column. These rows are the baseline timed
                 in the numpy_inplace worker (or the first worker that ran).
  xgrad          rows read from a Google Benchmark JSON file (--xgrad-json), see below.

Run it with Debian's interpreter (numpy 1.24; PyTorch from the python3-torch package):

    /usr/bin/python3 bench/compare.py                      # everything (takes a while)
    /usr/bin/python3 bench/compare.py --quick --shapes 2x2x1x2,128x128x64x64 --threads 1,2
    /usr/bin/python3 bench/compare.py --xgrad-json xgrad.json --out table.md
    build/bench/xgrad_bench --benchmark_repetitions=5 --benchmark_out=xgrad.json --benchmark_out_format=json

How it measures:
  * Every (impl, mode, dtype, shape, threads) runs in its own fresh subprocess (the script runs
    itself with --worker) with OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS set to the
    thread count before numpy/torch are imported (and OMP_WAIT_POLICY=passive for PyTorch with
    more than one thread, else its OpenMP pool spins against OpenBLAS's pthreads). The worker
    prints one JSON line.
  * Peak extra memory, first in that fresh process: the BLAS and the implementation are primed
    (the computation on a 32 x 32 problem, and the same GEMMs with at most 2048 rows, whose arrays
    stay alive, so OpenBLAS's packing buffers are touched before the baseline), the inputs
    allocated, ru_maxrss read as the baseline, the computation run a few times, ru_maxrss read
    again: extra = peak - baseline. Preallocated buffers (numpy_inplace) and the outputs
    (out, and the gradients) count as extra. Reported in M = one T_q x T_k array of the dtype
    and in MiB. RSS moves by pages (4 KiB, 2 MiB for huge pages), so for tiny shapes the M column
    says nothing; glibc's allocator's caching is part of what is measured.
  * Time: after those runs (which warm up), calls are timed in batches (time.perf_counter) of a
    size that takes ~10 ms, batches alternating with batches of the bare GEMMs; the time is the
    median over the batches (>= 5 batches, ~0.4 s of each), the `/ GEMMs` ratio is the ratio of
    the two medians. GFLOP/s counts the GEMMs' flops: 2 T_q T_k (d_k + d_v) forward, 3x that with
    backward.
  * `/ numpy` and `/ PyTorch`: time over the numpy_inplace (resp. torch) row of the same mode,
    dtype, shape and threads (for gemms_* rows, over numpy's bare GEMMs), timed in other processes.
  * Correctness is checked once per (dtype, shape) in a separate process: numpy_plain,
    numpy_inplace and torch agree on out, dq, dk, dv within max|a - b| / max|b| <= 1e-4 (float32)
    or 1e-10 (float64); a note is printed when they do not.

xgrad's results (--xgrad-json FILE): the JSON of a Google Benchmark program (--benchmark_out=FILE
--benchmark_out_format=json), entries named xgrad/<mode>/<f32|f64>/<T_q>x<T_k>x<d_k>x<d_v>/threads:<n>
(Google Benchmark may add "/manual_time" and aggregate suffixes "_median", "_mean", ...). The
"_median" aggregate is used when present, else the median of the plain entries. Modes are
fwd, fwd_bwd, fused_fwd, fused_fwd_bwd, gemms_fwd, gemms_fwd_bwd (and any other <word>_fwd[_bwd],
such as build_fwd_bwd). loop_fwd and loop_fwd_bwd rows (the same products with the row passes in
place between them, in C++ through the row functions of xgrad's softmax and softmax_vjp ops: the
floor of a materialising implementation) are labelled "C loop". Their `/ GEMMs` is xgrad's own "ratio" counter, their peak extra its
"peak_extra_M" counter. Other names are ignored. Options --dtypes, --shapes, --threads and
--modes, when given, filter xgrad's rows too. `--impls none` only tabulates xgrad's rows.

The header gives the load average at start and end, and how many CPUs other processes kept busy
during the measurements (the machine's busy time in /proc/stat, less the worker's own CPU time):
measurements during which they kept more than 0.25 CPU busy are listed as suspect. It also gives the
measured cost of a first touch of a fresh 4 KiB page: on some VMs it is ~100x that of bare metal, and it dominates
implementations that allocate their T_q x T_k temporaries on every call (numpy only asks for huge
pages from 4 MiB up; PyTorch 1.13 never does).

The table goes to stdout (and to --out FILE); progress goes to stderr.
"""

import argparse
import datetime
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time

DEFAULT_SHAPES = [(2, 2, 1, 2), (128, 128, 64, 64), (512, 512, 64, 64), (1024, 1024, 64, 64),
                  (2048, 2048, 64, 64), (4096, 4096, 64, 64), (1024, 4096, 128, 128)]
DTYPES = {"f32": "float32", "f64": "float64"}
ITEMSIZE = {"f32": 4, "f64": 8}
MODES = ["fwd", "fwd_bwd"]
IMPLS = ["numpy_plain", "numpy_inplace", "torch"]
TOLERANCE = {"f32": 1e-4, "f64": 1e-10}


def flops(shape, backward):
    t_q, t_k, d_k, d_v = shape
    return (6 if backward else 2) * t_q * t_k * (d_k + d_v)


def shape_str(shape):
    return "x".join(str(n) for n in shape)


def parse_shape(text):
    parts = text.lower().split("x")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: want T_qxT_kxd_kxd_v, e.g. 512x512x64x64")
    return tuple(int(p) for p in parts)


# ----------------------------------------------------------------------------------------------
# The computations (numpy and torch are passed in: only workers import them).

def numpy_plain_forward(np, q, k, v, scale):
    s = q @ k.T * scale
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def numpy_plain_fwd_bwd(np, q, k, v, g, scale):
    out, w = numpy_plain_forward(np, q, k, v, scale)
    dw = g @ v.T
    dv = w.T @ g
    ds = w * (dw - (dw * w).sum(axis=-1, keepdims=True))  # dL/dS for S = scale q k^T, unscaled
    dq = ds @ k * scale
    dk = ds.T @ q * scale
    return out, dq, dk, dv


class NumpyInplace:
    """Attention into buffers allocated once; w overwrites the scores, dS overwrites dW."""

    def __init__(self, np, shape, dtype, backward):
        t_q, t_k, d_k, d_v = shape
        self.np, self.scale = np, 1.0 / math.sqrt(d_k)
        self.qs = np.empty((t_q, d_k), dtype)      # scale * q
        self.w = np.empty((t_q, t_k), dtype)       # scores, then softmax
        self.row = np.empty((t_q, 1), dtype)       # row max, row sum, rowsum(g * out)
        self.out = np.empty((t_q, d_v), dtype)
        if backward:
            self.dw = np.empty((t_q, t_k), dtype)  # dW, then dS (unscaled)
            self.gout = np.empty((t_q, d_v), dtype)
            self.dq = np.empty((t_q, d_k), dtype)
            self.dk = np.empty((t_k, d_k), dtype)
            self.dv = np.empty((t_k, d_v), dtype)

    def forward(self, q, k, v):
        np, w, row = self.np, self.w, self.row
        np.multiply(q, self.scale, out=self.qs)
        np.matmul(self.qs, k.T, out=w)
        np.max(w, axis=1, keepdims=True, out=row)
        np.subtract(w, row, out=w)
        np.exp(w, out=w)
        np.sum(w, axis=1, keepdims=True, out=row)
        np.reciprocal(row, out=row)
        np.multiply(w, row, out=w)
        np.matmul(w, v, out=self.out)
        return self.out

    def backward(self, q, k, v, g):
        np, w, dw, row = self.np, self.w, self.dw, self.row
        np.matmul(g, v.T, out=dw)
        np.matmul(w.T, g, out=self.dv)
        np.multiply(g, self.out, out=self.gout)  # rowsum(dW * w) == rowsum(g * out)
        np.sum(self.gout, axis=1, keepdims=True, out=row)
        np.subtract(dw, row, out=dw)
        np.multiply(dw, w, out=dw)
        np.matmul(dw, k, out=self.dq)
        np.multiply(self.dq, self.scale, out=self.dq)
        np.matmul(dw.T, self.qs, out=self.dk)  # scale * dS^T q == dS^T (scale q)
        return self.out, self.dq, self.dk, self.dv


def torch_forward(torch, q, k, v, scale):
    s = torch.matmul(q, k.t()) * scale
    w = torch.softmax(s, dim=-1)
    return torch.matmul(w, v)


def torch_fwd_bwd(torch, q, k, v, g, scale):
    q.grad = k.grad = v.grad = None
    out = torch_forward(torch, q, k, v, scale)
    out.backward(g)
    return out, q.grad, k.grad, v.grad


def gemm_list(shape, backward):
    """The GEMMs of the computation as (m, n, k, A transposed, B transposed): C(m x n) = op(A) op(B)."""
    t_q, t_k, d_k, d_v = shape
    gemms = [(t_q, t_k, d_k, False, True),    # S = q k^T
             (t_q, d_v, t_k, False, False)]   # out = w v
    if backward:
        gemms += [(t_q, t_k, d_v, False, True),   # dW = g v^T
                  (t_k, d_v, t_q, True, False),   # dv = w^T g
                  (t_q, d_k, t_k, False, False),  # dq = dS k
                  (t_k, d_k, t_q, True, False)]   # dk = dS^T q
    return gemms


def make_bare_gemms(np, shape, dtype, q, k, v, g, backward):
    """The bare GEMMs of the computation, into outputs allocated here once."""
    t_q, t_k, d_k, d_v = shape
    w = np.matmul(q, k.T)
    out = np.empty((t_q, d_v), dtype)
    if backward:
        dw = np.matmul(g, v.T)
        dq, dk, dv = np.empty((t_q, d_k), dtype), np.empty((t_k, d_k), dtype), np.empty((t_k, d_v), dtype)

    def run():
        np.matmul(q, k.T, out=w)
        np.matmul(w, v, out=out)
        if backward:
            np.matmul(g, v.T, out=dw)
            np.matmul(w.T, g, out=dv)
            np.matmul(dw, k, out=dq)
            np.matmul(dw.T, q, out=dk)
    return run


def inputs(np, shape, dtype):
    t_q, t_k, d_k, d_v = shape
    sizes = [(t_q, d_k), (t_k, d_k), (t_k, d_v), (t_q, d_v)]
    return [np.random.default_rng(seed).standard_normal(size).astype(dtype) for seed, size in enumerate(sizes, 1)]


def make_call(impl, mode, shape, dtype, arrays, np, torch):
    """A no-argument function running one call of impl's mode (allocating what it keeps)."""
    q, k, v, g = arrays
    scale = 1.0 / math.sqrt(shape[2])
    backward = mode == "fwd_bwd"
    if impl == "numpy_plain":
        if backward:
            return lambda: numpy_plain_fwd_bwd(np, q, k, v, g, scale)
        return lambda: numpy_plain_forward(np, q, k, v, scale)[0]
    if impl == "numpy_inplace":
        ws = NumpyInplace(np, shape, dtype, backward)
        if not backward:
            return lambda: ws.forward(q, k, v)

        def fwd_bwd():
            ws.forward(q, k, v)
            return ws.backward(q, k, v, g)
        return fwd_bwd
    if impl == "torch":
        tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
        tg = torch.from_numpy(g)
        if backward:
            return lambda: torch_fwd_bwd(torch, tq, tk, tv, tg, scale)
        return lambda: torch_forward(torch, tq, tk, tv, scale)
    raise ValueError(impl)


# ----------------------------------------------------------------------------------------------
# Workers: run in a fresh process with the thread environment set; print one JSON line.

def openblas_info():
    """(config string, threads) of the OpenBLAS loaded in this process, or (None, None)."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line})
        for path in paths:
            lib = ctypes.CDLL(path)
            if hasattr(lib, "openblas_get_config"):
                lib.openblas_get_config.restype = ctypes.c_char_p
                return lib.openblas_get_config().decode(), lib.openblas_get_num_threads()
    except OSError:
        pass
    return None, None


def import_torch():
    try:
        import torch
        return torch, None
    except Exception as e:  # noqa: BLE001 -- any failure means "no torch"
        return None, f"{type(e).__name__}: {e}"


def maxrss_kib():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def seconds_per_call(fn, n=1):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def worker_time(args):
    """Peak extra memory, then time, of one (impl, mode, dtype, shape, threads), fresh process."""
    import gc
    import numpy as np
    torch = None
    if args.impl == "torch":
        torch, error = import_torch()
        if torch is None:
            print(json.dumps({"error": error}))
            return
        torch.set_num_threads(args.threads)
    dtype, shape, mode = np.dtype(DTYPES[args.dtype]), args.shape, args.mode
    backward = mode == "fwd_bwd"
    if torch is not None:
        torch.set_grad_enabled(backward)
    small = (min(shape[0], 32), min(shape[1], 32), shape[2], shape[3])
    budget, batch_time, min_reps = (0.05, 0.002, 3) if args.quick else (0.4, 0.01, 5)

    # Peak extra memory: prime, baseline, a few calls, peak.
    small_call = make_call(args.impl, mode, small, dtype, inputs(np, small, dtype), np, torch)
    for _ in range(2):
        small_call()
    del small_call
    primed = []  # OpenBLAS packs into buffers it touches on first use: touch them now, keep arrays alive
    for m, n, k, ta, tb in gemm_list(shape, backward):
        m = min(m, 2048)
        a = np.ones((k, m) if ta else (m, k), dtype)
        b = np.ones((n, k) if tb else (k, n), dtype)
        c = np.empty((m, n), dtype)
        np.matmul(a.T if ta else a, b.T if tb else b, out=c)
        primed += [a, b, c]
    arrays = inputs(np, shape, dtype)
    gc.collect()
    base = maxrss_kib()
    call = make_call(args.impl, mode, shape, dtype, arrays, np, torch)
    mem_runs = 2 if args.quick else 3
    extra_runs = []  # the peak after each call: growth after the first is the allocator's doing
    for _ in range(mem_runs):
        call()
        extra_runs.append(maxrss_kib() - base)
    extra_kib = extra_runs[-1]
    del primed

    # Time: batches of calls alternating with batches of the bare GEMMs; medians.
    gemms = make_bare_gemms(np, shape, dtype, *arrays, backward)
    gemms()
    first, first_gemms = seconds_per_call(call), seconds_per_call(gemms)  # one warm call each, to size the batches

    n_call = max(1, round(batch_time / first))
    n_gemms = max(1, round(batch_time / first_gemms))
    reps = max(min_reps, min(101, round(budget / (n_call * first))))
    own, ref = [], []
    gc.collect()
    gc.disable()
    for _ in range(reps):
        own.append(seconds_per_call(call, n_call))
        ref.append(seconds_per_call(gemms, n_gemms))
    gc.enable()
    median = lambda xs: sorted(xs)[len(xs) // 2]
    print(json.dumps({"time": median(own), "gemm_time": median(ref), "reps": reps, "calls": n_call,
                      "gemm_calls": n_gemms, "extra_kib": extra_kib, "extra_kib_runs": extra_runs,
                      "blas_threads": openblas_info()[1],
                      "torch_threads": torch.get_num_threads() if torch is not None else None}))


def worker_check(args):
    """Versions, and whether the implementations agree, per (dtype, shape)."""
    import platform
    import numpy as np
    torch, torch_error = import_torch() if "torch" in args.impls else (None, "not requested")
    result = {"python": platform.python_version(), "numpy": np.__version__,
              "torch": torch.__version__ if torch is not None else None, "torch_error": torch_error,
              "openblas": openblas_info()[0], "checks": []}
    for dtype_name in args.dtypes:
        dtype = np.dtype(DTYPES[dtype_name])
        for shape in args.shapes:
            arrays = inputs(np, shape, dtype)
            got = {impl: [np.array(x.detach().numpy() if hasattr(x, "detach") else x, copy=True)
                          for x in make_call(impl, "fwd_bwd", shape, dtype, arrays, np, torch)()]
                   for impl in ["numpy_plain", "numpy_inplace"] + (["torch"] if torch is not None else [])}
            reference = got.pop("numpy_plain")
            rel = {impl: max(float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-300)
                             for a, b in zip(xs, reference)) for impl, xs in got.items()}
            result["checks"].append({"dtype": dtype_name, "shape": shape, "rel": rel,
                                     "ok": all(r <= TOLERANCE[dtype_name] for r in rel.values())})
    print(json.dumps(result))


# ----------------------------------------------------------------------------------------------
# The driver.

def busy_cpu_seconds():
    """CPU seconds the whole machine has spent busy (or stolen by the hypervisor), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return float("nan")


def children_cpu_seconds():
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_worker(argv, threads, torch_pool):
    env = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    if torch_pool and threads > 1:
        env["OMP_WAIT_POLICY"] = "passive"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker"] + argv
    busy, own, start = busy_cpu_seconds(), children_cpu_seconds(), time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    # CPUs other processes kept busy meanwhile, on average: the machine's busy time not spent by the worker.
    other = ((busy_cpu_seconds() - busy) - (children_cpu_seconds() - own)) / (time.perf_counter() - start)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"worker exited with {proc.returncode}: {tail}"}
    result = json.loads(lines[-1])
    result["other_cpus"] = max(0.0, other)
    return result


def read_xgrad(path):
    """{(mode, dtype, shape, threads): {"time", "ratio", "peak_extra_M"}} from Google Benchmark JSON."""
    with open(path) as f:
        data = json.load(f)
    pattern = re.compile(r"^xgrad/(?P<mode>(?:[a-z]+_)?fwd(?:_bwd)?)/(?P<dtype>f32|f64)/"
                         r"(?P<shape>\d+x\d+x\d+x\d+)/threads:(?P<threads>\d+)(?P<rest>(?:/[A-Za-z_]+(?::[\w.]+)?)*)$")
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    plain, medians, ignored = {}, {}, 0
    for b in data.get("benchmarks", []):
        name = b.get("name", "")
        aggregate = b.get("aggregate_name")
        suffix = re.search(r"_(mean|median|stddev|cv)$", name)
        if suffix:
            aggregate = aggregate or suffix.group(1)
            name = name[:suffix.start()]
        match = pattern.match(name)
        if (not match or b.get("error_occurred") or b.get("time_unit") not in unit
                or aggregate not in (None, "median") or "real_time" not in b):
            ignored += 1
            continue
        key = (match["mode"], match["dtype"], parse_shape(match["shape"]), int(match["threads"]))
        entry = {"time": b["real_time"] * unit[b["time_unit"]], "ratio": b.get("ratio"),
                 "peak_extra_M": b.get("peak_extra_M")}
        if aggregate == "median":
            medians[key] = entry
        else:
            plain.setdefault(key, []).append(entry)
    rows = dict(medians)
    for key, entries in plain.items():
        if key not in rows:  # repetitions without aggregates: the median entry by time
            rows[key] = sorted(entries, key=lambda e: e["time"])[len(entries) // 2]
    return rows, ignored, data.get("context", {})


def fmt_num(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x == 0:
        return "0"
    ax = abs(float(f"{x:.3g}"))  # decide the format on the value rounded to 3 significant digits
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}" if ax >= 1e-4 else f"{x:.1e}"


def fmt_time(s):
    if s < 1e-6:
        return f"{fmt_num(s * 1e9)} ns"
    if s < 1e-3:
        return f"{fmt_num(s * 1e6)} us"
    return f"{fmt_num(s * 1e3)} ms"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} logical CPUs)"
    except OSError:
        pass
    return "unknown CPU"


def page_fault_cost():
    """Seconds per first touch of a fresh 4 KiB page: allocating implementations pay this per page."""
    import mmap
    size = 16 << 20
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    t = time.perf_counter()
    for offset in range(0, size, 4096):
        m[offset] = 1
    cost = (time.perf_counter() - t) / (size // 4096)
    m.close()
    return cost


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", help="comma list of f32,f64 (default both)")
    parser.add_argument("--shapes", help="comma list of T_qxT_kxd_kxd_v (default: "
                        + ",".join(shape_str(s) for s in DEFAULT_SHAPES) + ")")
    parser.add_argument("--threads", help="comma list of thread counts (default 1,2)")
    parser.add_argument("--modes", help="comma list of fwd,fwd_bwd (default both)")
    parser.add_argument("--impls", help="comma list of numpy_plain,numpy_inplace,torch (default all), or none")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions: a smoke test, not a measurement")
    parser.add_argument("--xgrad-json", metavar="FILE", help="Google Benchmark JSON output of xgrad's benchmark")
    parser.add_argument("--out", metavar="FILE", help="also write the table (Markdown) to FILE")
    # Internal: the worker side.
    parser.add_argument("--worker", choices=["time", "check"], help=argparse.SUPPRESS)
    parser.add_argument("--impl", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", help=argparse.SUPPRESS)
    parser.add_argument("--shape", type=parse_shape, help=argparse.SUPPRESS)
    args = parser.parse_args()

    def comma_list(text, allowed, default):
        if text is None:
            return list(default)
        items = [x.strip() for x in text.split(",") if x.strip()]
        if allowed is not None:
            bad = [x for x in items if x not in allowed]
            if bad:
                parser.error(f"unknown value(s) {bad}: choose from {list(allowed)}")
        return items

    dtypes = comma_list(args.dtypes, DTYPES, DTYPES)
    try:
        shapes = [parse_shape(s) for s in comma_list(args.shapes, None, map(shape_str, DEFAULT_SHAPES))]
        threads_list = [int(t) for t in comma_list(args.threads, None, ["1", "2"])]
    except (argparse.ArgumentTypeError, ValueError) as e:
        parser.error(f"{e} (--shapes wants e.g. 2x2x1x2,512x512x64x64, --threads e.g. 1,2)")
    if any(t < 1 for t in threads_list):
        parser.error("--threads wants positive integers")
    modes = comma_list(args.modes, MODES, MODES)
    impls = [] if args.impls == "none" else comma_list(args.impls, IMPLS, IMPLS)

    if args.worker == "time":
        args.threads = threads_list[0]
        return worker_time(args)
    if args.worker == "check":
        args.dtypes, args.shapes, args.impls = dtypes, shapes, impls
        return worker_check(args)

    started = time.perf_counter()
    command = shlex.join([sys.executable] + sys.argv)
    log = lambda msg: print(f"[{time.perf_counter() - started:7.1f} s] {msg}", file=sys.stderr, flush=True)
    notes = []
    started_at, load_start, fault = datetime.datetime.now().astimezone(), load_average(), page_fault_cost()

    # Versions and correctness, in one process.
    log("versions and correctness checks")
    check_argv = ["check", "--dtypes", ",".join(dtypes), "--impls", ",".join(impls) or "none"]
    if impls:
        check_argv += ["--shapes", ",".join(map(shape_str, shapes))]
    else:
        check_argv += ["--shapes", ""]
    info = run_worker(check_argv, threads_list[0], torch_pool=True)
    if "error" in info:
        hint = (f" (numpy is not importable by {sys.executable}: run with /usr/bin/python3)"
                if "No module named 'numpy'" in info["error"] else "")
        sys.exit(f"compare.py: the check worker failed: {info['error']}{hint}")
    if "torch" in impls and info["torch"] is None:
        notes.append(f"PyTorch is not importable ({info['torch_error']}): its rows are skipped.")
        impls = [i for i in impls if i != "torch"]
    for c in info["checks"]:
        rel = ", ".join(f"{impl} {r:.1e}" for impl, r in c["rel"].items())
        if not c["ok"]:
            notes.append(f"**Mismatch** {c['dtype']} {shape_str(c['shape'])}: max |a - b| / max |b| against "
                         f"numpy_plain: {rel} (tolerance {TOLERANCE[c['dtype']]:g}).")
    if info["checks"]:
        worst = {}
        for c in info["checks"]:
            for impl, r in c["rel"].items():
                worst[(c["dtype"], impl)] = max(worst.get((c["dtype"], impl), 0.0), r)
        notes.append("Correctness (out, dq, dk, dv against numpy_plain, max |a - b| / max |b| over the shapes): "
                     + "; ".join(f"{d} {impl} {r:.1e}" for (d, impl), r in sorted(worst.items()))
                     + (" — all within tolerance." if all(c["ok"] for c in info["checks"]) else "."))

    # Measurements: one fresh process per (dtype, shape, threads, mode, impl).
    results, header_extra = {}, []
    jobs = [(d, s, t, m, i) for d in dtypes for s in shapes for t in threads_list for m in modes for i in impls]
    for n, (d, s, t, m, i) in enumerate(jobs, 1):
        r = run_worker(["time", "--impl", i, "--mode", m, "--dtype", d, "--shape", shape_str(s),
                        "--threads", str(t)] + (["--quick"] if args.quick else []), t, torch_pool=(i == "torch"))
        if "error" in r:
            notes.append(f"{i} {m} {d} {shape_str(s)} threads {t}: failed, {r['error']}")
            log(f"[{n}/{len(jobs)}] {i} {m} {d} {shape_str(s)} threads {t}: FAILED {r['error']}")
            continue
        if r["blas_threads"] is not None and r["blas_threads"] != t:
            notes.append(f"{i} {m} {d} {shape_str(s)}: OpenBLAS ran {r['blas_threads']} threads, not {t}.")
        results[(d, s, t, m, i)] = r
        log(f"[{n}/{len(jobs)}] {i} {m} {d} {shape_str(s)} threads {t}: {fmt_time(r['time'])} "
            f"(GEMMs {fmt_time(r['gemm_time'])}, {r['reps']} x {r['calls']} calls), "
            f"+{r['extra_kib'] / 1024:.1f} MiB, other processes {r['other_cpus']:.2f} CPUs")

    grew = [f"{i} {m} {d} {shape_str(s)} t{t} {fmt_num(r['extra_kib_runs'][0] * 1024 / (s[0] * s[1] * ITEMSIZE[d]))}"
            f" -> {fmt_num(r['extra_kib'] * 1024 / (s[0] * s[1] * ITEMSIZE[d]))}"
            for (d, s, t, m, i), r in results.items()
            if (r["extra_kib_runs"][-1] - r["extra_kib_runs"][0]) * 1024 > max(0.25 * s[0] * s[1] * ITEMSIZE[d], 2**20)]
    if grew:
        notes.append("Peak extra grew after the first call (freed memory kept by glibc's heap and not reused; "
                     "the table has the peak after all calls), in M, first call -> all calls: " + "; ".join(grew) + ".")

    busy = [f"{i} {m} {d} {shape_str(s)} t{t} ({r['other_cpus']:.1f})"
            for (d, s, t, m, i), r in results.items() if r["other_cpus"] > 0.25]
    if busy:
        notes.append(f"Other processes kept more than 0.25 CPU busy on average (of {os.cpu_count()}) during "
                     f"{len(busy)} of {len(results)} measurements, which are suspect: " + "; ".join(busy) + ".")
    if results:
        others = [r["other_cpus"] for r in results.values()]
        header_extra.append(f"Other processes kept {sum(others) / len(others):.2f} CPUs busy on average during "
                            f"the measurements (at most {max(others):.2f} during one).")

    # Rows: (sort key, cells). Cells: impl, mode, dtype, shape, threads, time, ratio, peak M.
    rows = []
    impl_order = {"numpy GEMMs": 0, "xgrad:gemms": 1, "xgrad:loop": 2, "numpy plain": 3, "numpy inplace": 4, "PyTorch": 5,
                  "xgrad": 6}
    shape_order = {s: n for n, s in enumerate(shapes)}

    def add_row(impl, mode, d, s, t, seconds, ratio, peak_m, order):
        base = "fwd_bwd" if mode.endswith("fwd_bwd") else "fwd"
        key = (sorted(DTYPES).index(d), shape_order.get(s, len(shapes)), s, t, MODES.index(base),
               impl_order[order], mode not in (base, "gemms_" + base), mode)
        rows.append((key, dict(impl=impl, mode=mode, dtype=d, shape=s, threads=t, base=base, time=seconds,
                               ratio=ratio, peak_m=peak_m)))

    names = {"numpy_plain": "numpy plain", "numpy_inplace": "numpy inplace", "torch": "PyTorch"}
    for (d, s, t, m, i), r in results.items():
        peak_m = r["extra_kib"] * 1024 / (s[0] * s[1] * ITEMSIZE[d])
        add_row(names[i], m, d, s, t, r["time"], r["time"] / r["gemm_time"], peak_m, names[i])
    for d in dtypes:  # the baseline GEMMs, as timed in the numpy_inplace worker (else the first that ran)
        for s in shapes:
            for t in threads_list:
                for m in modes:
                    r = next((results[(d, s, t, m, i)] for i in ["numpy_inplace", "numpy_plain", "torch"]
                              if (d, s, t, m, i) in results), None)
                    if r is not None:
                        add_row("numpy GEMMs", "gemms_" + m, d, s, t, r["gemm_time"], 1.0, None, "numpy GEMMs")

    if args.xgrad_json:
        xrows, ignored, context = read_xgrad(args.xgrad_json)
        kept = 0
        for (m, d, s, t), e in xrows.items():
            base = "fwd_bwd" if m.endswith("fwd_bwd") else "fwd"
            if ((args.dtypes and d not in dtypes) or (args.shapes and s not in shapes)
                    or (args.threads and t not in threads_list) or (args.modes and base not in modes)):
                continue
            kept += 1
            order = next((o for o in ("gemms", "loop") if m.startswith(o + "_")), None)
            add_row("C loop" if order == "loop" else "xgrad", m, d, s, t, e["time"], e["ratio"], e["peak_extra_M"],
                    "xgrad:" + order if order else "xgrad")
        header_extra.append(f"xgrad: {args.xgrad_json} ({kept} rows used, {ignored} entries ignored"
                            + (f"; run {context['date']}" if context.get("date") else "")
                            + (f" by {context['executable']}" if context.get("executable") else "") + ")")
    rows.sort(key=lambda r: r[0])

    # Ratios across rows: / numpy (numpy inplace, or numpy's GEMMs for gemms_* modes), / PyTorch.
    by = {(c["impl"], c["mode"], c["dtype"], c["shape"], c["threads"]): c["time"] for _, c in rows}
    table = ["| impl | mode | dtype | T_q x T_k x d_k x d_v | threads | time | GFLOP/s | / GEMMs | / numpy | "
             "/ PyTorch | peak extra (M) | peak extra (MiB) |",
             "|---|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for _, c in rows:
        gemms_mode = c["mode"].startswith("gemms_")
        numpy_t = by.get(("numpy GEMMs", c["mode"], c["dtype"], c["shape"], c["threads"]) if gemms_mode
                         else ("numpy inplace", c["base"], c["dtype"], c["shape"], c["threads"]))
        torch_t = None if gemms_mode else by.get(("PyTorch", c["base"], c["dtype"], c["shape"], c["threads"]))
        mib = (None if c["peak_m"] is None
               else c["peak_m"] * c["shape"][0] * c["shape"][1] * ITEMSIZE[c["dtype"]] / 2**20)
        cells = [c["impl"], c["mode"], c["dtype"], shape_str(c["shape"]), str(c["threads"]), fmt_time(c["time"]),
                 fmt_num(flops(c["shape"], c["base"] == "fwd_bwd") / c["time"] / 1e9), fmt_num(c["ratio"]),
                 fmt_num(c["time"] / numpy_t if numpy_t else None), fmt_num(c["time"] / torch_t if torch_t else None),
                 fmt_num(c["peak_m"]), fmt_num(mib)]
        table.append("| " + " | ".join(cells) + " |")

    openblas = info.get("openblas")
    header = [f"Attention benchmark, {started_at.strftime('%Y-%m-%d %H:%M %Z')}, "
              f"{cpu_model()}: Python {info['python']}, numpy {info['numpy']}, "
              + (f"torch {info['torch']}" if info["torch"]
                 else "torch not used" if info["torch_error"] == "not requested" else "torch not importable")
              + (f", {openblas}" if openblas else "")
              + (" (quick: a smoke test, not a measurement)" if args.quick else ""),
              f"Command: `{command}`",
              f"Load average (1 min) at start {load_start}, at end {load_average()}; first touch of a fresh "
              f"4 KiB page costs {fmt_time(fault)} here (allocating implementations pay it per page)."] + header_extra
    legend = ("Medians. time per call; GFLOP/s = GEMM flops (2 T_q T_k (d_k + d_v), x3 with backward) / time; "
              "/ GEMMs = time over the bare GEMMs timed alternately in the same process (xgrad: its own `ratio`); "
              "/ numpy = time over numpy inplace (gemms_* rows: over numpy GEMMs), / PyTorch = time over PyTorch, "
              "both from other processes; peak extra = ru_maxrss growth over a few calls in a fresh process, "
              "in M = one T_q x T_k array of the dtype (xgrad: its heap counter `peak_extra_M`).")
    text = "\n".join(header + ["", legend, ""] + table + ([""] + [f"- {n}" for n in notes] if notes else [])) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    log(f"done ({len(jobs)} measurements)")


if __name__ == "__main__":
    main()
