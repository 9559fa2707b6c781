#!/usr/bin/env python3
"""One-call H100 measurements for zerosim's kernel and link models.

Sections, in order of importance (each guarded by a deadline; partial CSVs are flushed row by row):
  env        GPU / driver / torch / CUDA / clocks / power (nvidia-smi), before and after
  gemm       bf16 GEMMs of Llama-2/3 training layers (forward F.linear, backward dX and dW) + a square sweep
  attention  F.scaled_dot_product_attention, causal, per backend (flash, cudnn, efficient, default), fwd and fwd+bwd
  memory     HBM: copy / add / fill / sum of large buffers; AdamW step (fused and foreach) on ~6e8 fp32 params
  pcie       host<->device copies, pinned and pageable, 1 MiB .. 1 GiB
  extra      a few tf32 / fp32 / fp16 GEMMs
A background thread samples nvidia-smi (SM clock, power, temperature, clock-event reasons) once a second.

Output files (at most 8, flat, in $OUT): gemm.csv (zerosim calibrate --gemm format, bf16 rows), gemm_detail.csv
(all GEMM rows incl. tf32/fp16/fp32),
attention.csv, memory.csv, pcie.csv, env.json, smi.csv, log.txt.

Usage: OUT=dir python3 measure.py [--dry]   (--dry: tiny sizes, for a logic check without a GPU)
"""
import csv
import datetime
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback

DRY = "--dry" in sys.argv
OUT = os.environ.get("OUT") or "./out"
os.makedirs(OUT, exist_ok=True)
T0 = time.monotonic()
BUDGET = float(os.environ.get("MEASURE_BUDGET_S", "330"))
# cumulative deadlines (seconds from start) per section
DEADLINE = {"gemm": 150, "attention": 195, "memory": 235, "pcie": 280, "extra": 305}
if DRY:
    DEADLINE = {k: v / 5 for k, v in DEADLINE.items()}
    BUDGET = 60

PEAK_BF16 = 989e12  # H100 SXM dense bf16, as topologies/dgx-h100.yaml and calibration/kernels.yaml use
PEAK_TF32 = 494e12
PEAK_FP32 = 67e12

_log = open(os.path.join(OUT, "log.txt"), "a")


def elapsed():
    return time.monotonic() - T0


def log(*a):
    msg = "[%7.1fs] %s" % (elapsed(), " ".join(str(x) for x in a))
    print(msg, flush=True)
    _log.write(msg + "\n")
    _log.flush()


class Csv:
    def __init__(self, name, header):
        self.f = open(os.path.join(OUT, name), "w", newline="")
        self.w = csv.writer(self.f, lineterminator="\n")
        self.w.writerow(header)
        self.f.flush()
        self.n = len(header)

    def row(self, *vals):
        assert len(vals) == self.n, (len(vals), self.n)
        self.w.writerow([fmt(v) for v in vals])
        self.f.flush()


def fmt(v):
    if isinstance(v, float):
        return "%.6g" % v
    return v


def sh(cmd, timeout=30):
    try:
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout + r.stderr
    except Exception as e:  # noqa: BLE001
        return -1, repr(e)


# ----------------------------------------------------------------------------------------------------------
# torch (or a stand-in for --dry on a machine without it)
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    if not DRY:
        raise
    from unittest import mock

    torch = mock.MagicMock()
    F = torch.nn.functional
    torch.__version__ = "dry"

HAVE_CUDA = (not DRY) and torch.cuda.is_available()
DEV = "cuda"


class Marks:
    """n time marks on the current stream: CUDA events (or perf_counter in --dry)."""

    def __init__(self, n=2):
        if HAVE_CUDA:
            self.ev = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        else:
            self.ev = None
            self.t = [0.0] * n

    def mark(self, i):
        if self.ev is not None:
            self.ev[i].record()
        else:
            self.t[i] = time.perf_counter()

    def between(self, i, j):
        if self.ev is not None:
            return float(self.ev[i].elapsed_time(self.ev[j])) / 1e3
        return max(self.t[j] - self.t[i], 1e-9)


class Timer(Marks):
    def __init__(self):
        super().__init__(2)

    def start(self):
        self.mark(0)

    def stop(self):
        self.mark(1)

    def seconds(self):
        return self.between(0, 1)


def sync():
    if HAVE_CUDA:
        torch.cuda.synchronize()


def stats(ts):
    ts = sorted(ts)
    n = len(ts)
    return {
        "median": statistics.median(ts),
        "min": ts[0],
        "p90": ts[min(n - 1, int(math.ceil(0.9 * n)) - 1)],
        "n": n,
    }


def bench(fns, warm=5, target_s=0.15, min_reps=20, max_reps=100):
    """Time fns[i % len(fns)]() per call with events; warm-ups first; reps sized to ~target_s."""
    nf = len(fns)
    for i in range(warm):
        fns[i % nf]()
    sync()
    t = Timer()
    t.start()
    for i in range(3):
        fns[i % nf]()
    t.stop()
    sync()
    est = t.seconds() / 3
    reps = int(max(min_reps, min(max_reps, target_s / max(est, 1e-7))))
    timers = [Timer() for _ in range(reps)]
    for i in range(reps):
        timers[i].start()
        fns[i % nf]()
        timers[i].stop()
    sync()
    return stats([x.seconds() for x in timers])


def free():
    gc.collect()
    if HAVE_CUDA:
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------------------
# nvidia-smi sampler
SMI_FIELDS = [
    "timestamp", "clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "utilization.gpu",
    "clocks_event_reasons.active",
]


class Sampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.stop_ev = threading.Event()
        self.f = open(os.path.join(OUT, "smi.csv"), "w")
        self.fields = list(SMI_FIELDS)
        self.f.write("elapsed_s," + ",".join(self.fields) + "\n")
        self.f.flush()

    def run(self):
        while not self.stop_ev.is_set():
            rc, out = sh("nvidia-smi --query-gpu=%s --format=csv,noheader,nounits" % ",".join(self.fields), 10)
            if rc != 0 and "clocks_event_reasons.active" in self.fields:
                self.fields[-1] = "clocks_throttle_reasons.active"
                continue
            line = out.strip().splitlines()[0] if out.strip() else "?"
            self.f.write("%.1f,%s\n" % (elapsed(), line))
            self.f.flush()
            self.stop_ev.wait(1.0)


# ----------------------------------------------------------------------------------------------------------
ENV = {}


def env_snapshot(tag):
    d = {}
    q = ("name,driver_version,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
         "pcie.link.width.max,power.limit,power.default_limit,power.max_limit,enforced.power.limit,clocks.sm,"
         "clocks.mem,clocks.max.sm,clocks.max.mem,clocks.applications.graphics,clocks.applications.memory,"
         "temperature.gpu,persistence_mode,compute_mode,mig.mode.current,memory.total,ecc.mode.current")
    d["smi_query_fields"] = q
    d["smi_query"] = sh("nvidia-smi --query-gpu=%s --format=csv" % q)[1]
    d["smi_q_clock_power_perf"] = sh("nvidia-smi -q -d CLOCK,POWER,PERFORMANCE,TEMPERATURE")[1]
    ENV[tag] = d


def env_static():
    d = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(), "python": sys.version,
         "platform": platform.platform(), "uname": " ".join(platform.uname()), "dry": DRY}
    d["nvidia_smi"] = sh("nvidia-smi")[1]
    d["nvidia_smi_q"] = sh("nvidia-smi -q")[1]
    d["nvidia_smi_topo"] = sh("nvidia-smi topo -m")[1]
    d["cpu_model"] = sh("grep -m1 'model name' /proc/cpuinfo")[1].strip()
    d["nproc"] = os.cpu_count()
    d["meminfo"] = sh("head -3 /proc/meminfo")[1]
    d["numa"] = sh("ls /sys/devices/system/node/ 2>&1; cat /sys/devices/system/node/node*/cpulist 2>&1")[1]
    d["kernel"] = sh("uname -a")[1].strip()
    d["torch"] = str(torch.__version__)
    try:
        d["torch_cuda"] = str(torch.version.cuda)
        d["cudnn"] = str(torch.backends.cudnn.version())
        if HAVE_CUDA:
            p = torch.cuda.get_device_properties(0)
            d["device_name"] = p.name
            d["sm_count"] = p.multi_processor_count
            d["total_memory"] = p.total_memory
            d["capability"] = "%d.%d" % (p.major, p.minor)
            d["l2_bytes"] = getattr(p, "L2_cache_size", None)
            d["torch_cuda_driver_api"] = str(getattr(torch._C, "_cuda_getDriverVersion", lambda: None)())
        d["float32_matmul_precision_default"] = torch.get_float32_matmul_precision()
    except Exception as e:  # noqa: BLE001
        d["torch_info_error"] = repr(e)
    try:
        from importlib import metadata
        vers = {}
        for dist in metadata.distributions():
            n = (dist.metadata["Name"] or "").lower()
            if n.startswith("nvidia") or n in ("torch", "triton", "numpy", "cuda-toolkit", "cuda-bindings"):
                vers[n] = dist.version
        d["packages"] = dict(sorted(vers.items()))
    except Exception as e:  # noqa: BLE001
        d["packages_error"] = repr(e)
    ENV["static"] = d


def write_env():
    ENV["elapsed_s"] = elapsed()
    with open(os.path.join(OUT, "env.json"), "w") as f:
        json.dump(ENV, f, indent=1, default=str)


# ----------------------------------------------------------------------------------------------------------
# GEMM shapes. C[m x n] = A[m x k] . B[k x n] (zerosim's convention). A linear layer in: K, out: N, tokens M.
#   fwd: Y[M,N] = F.linear(X[M,K], W[N,K])      -> m=M, n=N, k=K
#   dX : dX[M,K] = dY[M,N] @ W[N,K]              -> m=M, n=K, k=N
#   dW : dW[N,K] = dY[M,N].t() @ X[M,K]          -> m=N, n=K, k=M
MODELS = {
    # name: (hidden, heads, kv_heads, head_dim, ffn)  (models/*.yaml)
    "llama2-7b": (4096, 32, 32, 128, 11008),
    "llama2-13b": (5120, 40, 40, 128, 13824),
    "llama2-70b": (8192, 64, 8, 128, 28672),
    "llama3-8b": (4096, 32, 8, 128, 14336),
}
TOKENS = [4096, 8192, 2048, 16384]  # order = priority


def linear_layers(h, a, g, d, f):
    return [("qkv", h, h + 2 * g * d), ("o", h, h), ("gate_up", h, f), ("down", f, h)]


def gemm_plan():
    plan = {}  # (pass, M, K, N) -> labels
    order = []
    for M in TOKENS:
        for mname, (h, a, g, d, f) in MODELS.items():
            for op, K, N in linear_layers(h, a, g, d, f):
                for ps in ("fwd", "dX", "dW"):
                    key = (ps, M, K, N)
                    if key not in plan:
                        plan[key] = []
                        order.append(key)
                    plan[key].append("%s:%s" % (mname, op))
    return order, plan


def mnk(ps, M, K, N):
    return {"fwd": (M, N, K), "dX": (M, K, N), "dW": (N, K, M), "square": (M, N, K)}[ps]


def rand(shape, dtype, scale=1.0):
    if DRY:
        shape = tuple(max(1, s // 256) for s in shape)
        return torch.randn(*shape) * scale
    return torch.randn(*shape, device=DEV, dtype=dtype) * scale


def make_fn(ps, M, K, N, dtype):
    if ps == "fwd":
        X, W = rand((M, K), dtype), rand((N, K), dtype, 0.02)
        return (lambda: F.linear(X, W)), (X, W)
    if ps == "dX":
        dY, W = rand((M, N), dtype), rand((N, K), dtype, 0.02)
        return (lambda: torch.matmul(dY, W)), (dY, W)
    if ps == "dW":
        dY, X = rand((M, N), dtype), rand((M, K), dtype)
        return (lambda: torch.matmul(dY.t(), X)), (dY, X)
    if ps == "square":  # A[M,K] @ B[K,N], both row-major
        A, B = rand((M, K), dtype), rand((K, N), dtype)
        return (lambda: torch.matmul(A, B)), (A, B)
    raise ValueError(ps)


DTYPE_NAME = {}


def dtype_bytes(name):
    return {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}[name]


def torch_dtype(name):
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}[name]


def set_precision(name):
    if name == "tf32":
        torch.set_float32_matmul_precision("high")
    elif name == "fp32":
        torch.set_float32_matmul_precision("highest")


def measure_gemm(gcsv, dcsv, ps, M, K, N, dname, labels):
    m, n, k = mnk(ps, M, K, N)
    set_precision(dname)
    set_bytes = dtype_bytes(dname) * (m * k + k * n)
    nsets = 1 if set_bytes > 150e6 else min(4, int(math.ceil(150e6 / set_bytes)))
    fns, keep = [], []
    for _ in range(nsets):
        fn, t = make_fn(ps, M, K, N, torch_dtype(dname))
        fns.append(fn)
        keep.append(t)
    s = bench(fns)
    flops = 2.0 * m * n * k
    peak = {"bf16": PEAK_BF16, "fp16": PEAK_BF16, "tf32": PEAK_TF32, "fp32": PEAK_FP32}[dname]
    tf = flops / s["median"]
    gcsv.row(m, n, k, dname, s["median"]) if gcsv is not None else None
    dcsv.row(ps, " ".join(labels), M, m, n, k, dname, nsets, s["n"], s["median"], s["min"], s["p90"],
             tf / 1e12, tf / peak, flops / s["min"] / 1e12)
    del fns, keep
    return tf


_DCSV = []


def detail_csv():
    if not _DCSV:
        _DCSV.append(Csv("gemm_detail.csv", ["pass", "used_by", "tokens_M", "m", "n", "k", "dtype", "input_sets",
                                             "reps", "median_s", "min_s", "p90_s", "tflops_median",
                                             "frac_of_peak", "tflops_best"]))
    return _DCSV[0]


def section_gemm():
    gcsv = Csv("gemm.csv", ["m", "n", "k", "dtype", "seconds"])
    dcsv = detail_csv()
    order, plan = gemm_plan()
    log("gemm: %d training shapes" % len(order))
    # square sweep first (quick reference points), then training shapes by priority
    jobs = [("square", n, n, n, ["square"]) for n in (4096, 8192, 2048, 16384)]
    jobs += [(ps, M, K, N, plan[(ps, M, K, N)]) for (ps, M, K, N) in order]
    done = 0
    for ps, M, K, N, labels in jobs:
        if elapsed() > DEADLINE["gemm"]:
            log("gemm: deadline, %d of %d done" % (done, len(jobs)))
            break
        try:
            tf = measure_gemm(gcsv, dcsv, ps, M, K, N, "bf16", labels)
            done += 1
            if done % 12 == 0 or ps == "square":
                log("gemm %s M=%d K=%d N=%d %.0f TFLOP/s" % (ps, M, K, N, tf / 1e12))
        except Exception:  # noqa: BLE001
            log("gemm FAILED %s %d %d %d\n%s" % (ps, M, K, N, traceback.format_exc()))
        free()
    log("gemm: %d of %d done" % (done, len(jobs)))
    return dcsv


# ----------------------------------------------------------------------------------------------------------
ATTN = [
    # label, batch, q heads, kv heads, seq, head_dim  (tokens per micro-batch = batch * seq)
    ("llama2-7b", 2, 32, 32, 4096, 128),
    ("llama2-7b", 4, 32, 32, 2048, 128),
    ("llama2-13b", 2, 40, 40, 4096, 128),
    ("llama2-13b", 4, 40, 40, 2048, 128),
    ("llama2-70b", 1, 64, 8, 4096, 128),
    ("llama2-70b", 2, 64, 8, 2048, 128),
    ("llama3-8b", 2, 32, 8, 4096, 128),
    ("gpt2-xl(d64)", 4, 25, 25, 2048, 64),
]


def sdpa_backends():
    if DRY and isinstance(torch, __import__("unittest.mock").mock.MagicMock):
        SDPBackend = sdpa_kernel = torch.nn.attention  # noqa: N806
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel, [("flash", [SDPBackend.FLASH_ATTENTION]), ("cudnn", [SDPBackend.CUDNN_ATTENTION]),
                         ("efficient", [SDPBackend.EFFICIENT_ATTENTION]), ("default", None)]


def section_attention():
    acsv = Csv("attention.csv", ["model", "batch", "heads", "kv_heads", "seq", "head_dim", "backend", "gqa_mode",
                                 "reps", "fwd_median_s", "fwd_min_s", "bwd_median_s", "fwdbwd_median_s",
                                 "flops_fwd_causal", "fwd_tflops", "bwd_tflops", "combined_tflops",
                                 "fwd_frac", "bwd_frac", "combined_frac"])
    sdpa_kernel, backends = sdpa_backends()
    for label, b, a, g, s, d in ATTN:
        for bname, bl in backends:
            if elapsed() > DEADLINE["attention"]:
                log("attention: deadline")
                return
            try:
                r = measure_attn(sdpa_kernel, bl, b, a, g, s, d)
            except Exception as e:  # noqa: BLE001
                log("attention FAILED %s b%d a%d s%d %s: %s" % (label, b, a, s, bname,
                                                                   str(e).splitlines()[0][:300] if str(e) else repr(e)))
                free()
                continue
            fh = 2.0 * b * s * s * a * d  # 4 b s^2 a d, halved for causal (flash-attention's benchmark count)
            tf_f = fh / r["fwd"]["median"]
            tf_b = 2.5 * fh / r["bwd"]["median"]
            tf_c = 3.5 * fh / (r["fwd"]["median"] + r["bwd"]["median"])
            acsv.row(label, b, a, g, s, d, bname, r["gqa"], r["fwd"]["n"], r["fwd"]["median"], r["fwd"]["min"],
                     r["bwd"]["median"], r["fb"]["median"], fh, tf_f / 1e12, tf_b / 1e12, tf_c / 1e12,
                     tf_f / PEAK_BF16, tf_b / PEAK_BF16, tf_c / PEAK_BF16)
            log("attn %s b%d a%d g%d s%d d%d %-9s fwd %.0f bwd %.0f comb %.0f TFLOP/s (%s)" % (
                label, b, a, g, s, d, bname, tf_f / 1e12, tf_b / 1e12, tf_c / 1e12, r["gqa"]))
            free()


def measure_attn(sdpa_kernel, bl, b, a, g, s, d, warm=3, reps=20):
    dt = torch.bfloat16
    q = rand((b, a, s, d), dt).requires_grad_(True)
    gqa = "none"
    kv_heads = a
    if g != a:
        gqa = "enable_gqa"
        kv_heads = g
    k = rand((b, kv_heads, s, d), dt).requires_grad_(True)
    v = rand((b, kv_heads, s, d), dt).requires_grad_(True)
    do = rand((b, a, s, d), dt)

    def fwd():
        if gqa == "enable_gqa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        if gqa == "expand":
            kk = k.repeat_interleave(a // g, dim=1)
            vv = v.repeat_interleave(a // g, dim=1)
            return F.scaled_dot_product_attention(q, kk, vv, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    ctx = (lambda: sdpa_kernel(bl)) if bl is not None else None

    def run(mk=None):
        if mk:
            mk.mark(0)
        o = fwd()
        if mk:
            mk.mark(1)
        torch.autograd.grad(o, (q, k, v), do)
        if mk:
            mk.mark(2)

    def go():
        for _ in range(warm):
            run()
        sync()
        mks = []
        for _ in range(reps):
            mk = Marks(3)
            run(mk)
            mks.append(mk)
        sync()
        f = [x.between(0, 1) for x in mks]
        fb = [x.between(0, 2) for x in mks]
        b = [x.between(1, 2) for x in mks]
        return {"fwd": stats(f), "fb": stats(fb), "bwd": stats(b)}

    try:
        if ctx is not None:
            with ctx():
                r = go()
        else:
            r = go()
    except Exception:
        if gqa != "enable_gqa":
            raise
        gqa = "expand"  # the backend refused enable_gqa: repeat K and V to all heads (the copy is timed too)
        if ctx is not None:
            with ctx():
                r = go()
        else:
            r = go()
    r["gqa"] = gqa
    return r


# ----------------------------------------------------------------------------------------------------------
def section_memory():
    mcsv = Csv("memory.csv", ["op", "bytes_per_buffer", "bytes_moved", "reps", "median_s", "min_s",
                              "gbps_median", "gbps_best", "frac_of_3350", "note"])
    f32 = torch.float32
    for nbytes in (256 << 20, 1 << 30, 4 << 30):
        if elapsed() > DEADLINE["memory"] - 20:
            break
        n = nbytes // 4
        try:
            a = rand((n,), f32)
            c = torch.empty_like(a)
            bb = rand((n,), f32)
            tests = [("copy d2d (dst.copy_(src))", lambda: c.copy_(a), 2 * nbytes, "read + write"),
                     ("add (torch.add out=)", lambda: torch.add(a, bb, out=c), 3 * nbytes, "2 reads + 1 write"),
                     ("fill (c.fill_)", lambda: c.fill_(1.0), nbytes, "write only"),
                     ("sum (a.sum())", lambda: a.sum(), nbytes, "read only")]
            for op, fn, moved, note in tests:
                s = bench([fn], warm=3, target_s=0.1, min_reps=10, max_reps=50)
                mcsv.row(op, nbytes, moved, s["n"], s["median"], s["min"], moved / s["median"] / 1e9,
                         moved / s["min"] / 1e9, moved / s["median"] / 3350e9, note)
                log("hbm %-28s %5d MiB: %.0f GB/s" % (op, nbytes >> 20, moved / s["median"] / 1e9))
            del a, bb, c
        except Exception:  # noqa: BLE001
            log("hbm FAILED %d\n%s" % (nbytes, traceback.format_exc()))
        free()
    # AdamW on llama2-7b-shaped parameters (3 layers ~ 6.1e8 fp32 params)
    h, f = 4096, 11008
    layer = [(3 * h, h), (h, h), (f, h), (f, h), (h, f), (h,), (h,)]
    nl = 3
    for variant in ("fused", "foreach"):
        if elapsed() > DEADLINE["memory"]:
            log("adamw: deadline")
            break
        try:
            params = []
            for _ in range(nl):
                for shp in layer:
                    p = torch.nn.Parameter(rand(shp, f32, 0.02))
                    p.grad = rand(shp, f32, 1e-3)
                    params.append(p)
            nparam = sum(int(p.numel()) for p in params)
            opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1, **{variant: True})
            s = bench([opt.step], warm=3, target_s=0.15, min_reps=10, max_reps=30)
            moved = 28 * nparam  # read p, g, m, v; write p, m, v (fp32)
            mcsv.row("AdamW step (%s=True), %d tensors" % (variant, len(params)), nparam, moved, s["n"],
                     s["median"], s["min"], moved / s["median"] / 1e9, moved / s["min"] / 1e9,
                     moved / s["median"] / 3350e9,
                     "%d fp32 params; bytes = 28 per param; %.3g ns/param" % (nparam, s["median"] / nparam * 1e9))
            log("adamw %s %d params: %.2f ms, %.0f GB/s (28 B/param)" % (variant, nparam, s["median"] * 1e3,
                                                                       moved / s["median"] / 1e9))
            del opt, params
        except Exception:  # noqa: BLE001
            log("adamw FAILED %s\n%s" % (variant, traceback.format_exc()))
        free()


# ----------------------------------------------------------------------------------------------------------
def section_pcie():
    pcsv = Csv("pcie.csv", ["direction", "host_memory", "bytes", "reps", "event_median_s", "event_min_s",
                            "wall_median_s", "gbps_event_median", "gbps_event_best", "gbps_wall_median"])
    MiB = 1 << 20
    sizes = [1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB]
    big = sizes[-1]
    if DRY:
        big = 4 * MiB
        sizes = [MiB, 4 * MiB]
    dev = torch.empty(big, dtype=torch.uint8, device=DEV) if not DRY else torch.empty(big)
    dev.fill_(7)
    hosts = []
    try:
        t = time.perf_counter()
        pinned = torch.empty(big, dtype=torch.uint8, pin_memory=True)
        pinned.fill_(3)
        log("pcie: pinned alloc+fill %d MiB %.2fs" % (big >> 20, time.perf_counter() - t))
        hosts.append(("pinned", pinned))
    except Exception:  # noqa: BLE001
        log("pcie: pinned alloc FAILED\n" + traceback.format_exc())
    pageable = torch.empty(big, dtype=torch.uint8)
    pageable.fill_(5)  # touch every page
    hosts.append(("pageable", pageable))
    for host_name, host in hosts:
        for direction in ("H2D", "D2H"):
            for nb in sizes:
                if elapsed() > DEADLINE["pcie"]:
                    log("pcie: deadline")
                    return
                try:
                    hs, ds = host[:nb], dev[:nb]
                    nbk = host_name == "pinned"
                    if direction == "H2D":
                        fn = lambda: ds.copy_(hs, non_blocking=nbk)  # noqa: E731
                    else:
                        fn = lambda: hs.copy_(ds, non_blocking=nbk)  # noqa: E731
                    for _ in range(2):
                        fn()
                    sync()
                    t0 = time.perf_counter()
                    fn()
                    sync()
                    est = time.perf_counter() - t0
                    reps = int(max(5, min(40, 0.25 / max(est, 1e-6))))
                    ev, wall = [], []
                    for _ in range(reps):
                        tm = Timer()
                        sync()
                        w0 = time.perf_counter()
                        tm.start()
                        fn()
                        tm.stop()
                        sync()
                        wall.append(time.perf_counter() - w0)
                        ev.append(tm.seconds())
                    se, sw = stats(ev), stats(wall)
                    pcsv.row(direction, host_name, nb, reps, se["median"], se["min"], sw["median"],
                             nb / se["median"] / 1e9, nb / se["min"] / 1e9, nb / sw["median"] / 1e9)
                    if nb in (MiB, 64 * MiB, big):
                        log("pcie %s %-8s %5d MiB: %.1f GB/s (events), %.1f GB/s (wall)" % (
                            direction, host_name, nb >> 20, nb / se["median"] / 1e9, nb / sw["median"] / 1e9))
                except Exception:  # noqa: BLE001
                    log("pcie FAILED %s %s %d\n%s" % (direction, host_name, nb, traceback.format_exc()))
    del hosts, pageable, dev
    free()


def section_extra_dtypes():
    # a few tf32 / fp32 / fp16 GEMMs on llama2-7b layers at M=4096 (rows appended to gemm_detail.csv)
    dcsv = detail_csv()  # same file as the bf16 rows (at most 8 files come back)
    h, a, g, d, f = MODELS["llama2-7b"]
    jobs = []
    for dname in ("tf32", "fp16", "fp32"):
        for op, K, N in linear_layers(h, a, g, d, f):
            if dname == "fp32" and op not in ("o", "gate_up"):
                continue
            jobs.append((dname, op, K, N))
    for dname, op, K, N in jobs:
        if elapsed() > DEADLINE["extra"]:
            log("extra: deadline")
            break
        try:
            tf = measure_gemm(None, dcsv, "fwd", 4096, K, N, dname, ["llama2-7b:%s" % op])
            log("extra %s fwd llama2-7b %s M=4096: %.0f TFLOP/s" % (dname, op, tf / 1e12))
        except Exception:  # noqa: BLE001
            log("extra FAILED %s %s\n%s" % (dname, op, traceback.format_exc()))
        free()
    torch.set_float32_matmul_precision("highest")


# ----------------------------------------------------------------------------------------------------------
def main():
    log("start; OUT=%s dry=%s budget=%ss" % (OUT, DRY, BUDGET))
    sampler = Sampler()
    sampler.start()
    try:
        env_static()
        env_snapshot("before")
    except Exception:  # noqa: BLE001
        log("env FAILED\n" + traceback.format_exc())
    write_env()
    if HAVE_CUDA:
        log("device: %s, torch %s, CUDA %s" % (torch.cuda.get_device_name(0), torch.__version__, torch.version.cuda))
    for name, fn in (("gemm", section_gemm), ("attention", section_attention), ("memory", section_memory),
                     ("pcie", section_pcie), ("extra", section_extra_dtypes)):
        if elapsed() > BUDGET - 10:
            log("skip %s: out of budget" % name)
            continue
        t = elapsed()
        try:
            fn()
        except Exception:  # noqa: BLE001
            log("%s FAILED\n%s" % (name, traceback.format_exc()))
        free()
        log("section %s took %.1fs" % (name, elapsed() - t))
        try:
            env_snapshot("after_" + name)
        except Exception:  # noqa: BLE001
            pass
        write_env()
    sampler.stop_ev.set()
    sampler.join(timeout=5)
    log("done in %.1fs" % elapsed())


if __name__ == "__main__":
    main()
