#!/usr/bin/env python3
"""One-call H100 measurement of whole training steps of Llama-architecture models (single GPU, plain PyTorch),
for comparison with zerosim's `ddp: {}` scenarios on one GPU (docs/ddp.md "dp = 1": the plain single-GPU loop).

Per configuration (random weights from a transformers LlamaConfig, random token ids, attn_implementation="sdpa"):
  step = forward (model(input_ids, labels=input_ids).loss, HF's causal-LM loss) ; loss.backward() ;
         optimizer.step() ; optimizer.zero_grad(set_to_none=True)
  precision "amp_bf16": fp32 parameters, forward under torch.autocast(cuda, bfloat16), torch.optim.AdamW
         (foreach = the CUDA default, or fused=True where the config says so)
  precision "bf16": model.to(bfloat16), no autocast; an fp32 master copy of every parameter; after the backward
         each bf16 grad is cast into the master's .grad, AdamW (foreach) over the masters, masters copied back
         into the bf16 parameters (zerosim's reading of `bf16` for DDP, docs/ddp.md "Precision")
  activation checkpointing "full": model.gradient_checkpointing_enable(use_reentrant=False) (every decoder layer)
Timing: step 1 (creates the optimizer state) timed alone, 2 more warm-ups, then N timed steps; each step between
torch.cuda.synchronize() calls (wall clock) and with CUDA events at start / after backward / after zero_grad.
Memory: peak allocated / reserved over step 1 (peaks reset after the model is built), and over the timed steps
(peaks reset after the warm-ups); memory_allocated between steps; NVML device memory used (sampled every 0.2 s)
and the process's own NVML figure.
Output ($OUT, flat): results.jsonl (one JSON object per configuration), env.json, smi.csv, profile.txt, log.txt.
"""
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback

OUT = os.environ.get("OUT") or "./out"
os.makedirs(OUT, exist_ok=True)
T0 = time.monotonic()
BUDGET = float(os.environ.get("STEP_BUDGET_S", "270"))
_log = open(os.path.join(OUT, "log.txt"), "a")


def log(*a):
    msg = "[%6.1fs] %s" % (time.monotonic() - T0, " ".join(str(x) for x in a))
    print(msg, flush=True)
    _log.write(msg + "\n")
    _log.flush()


def sh(cmd, timeout=20):
    try:
        p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
        return p.stdout + p.stderr
    except Exception as e:  # noqa
        return "ERR %r" % e


import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402,F401

log("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
import transformers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

log("transformers", transformers.__version__)

# ---------------------------------------------------------------- NVML sampler
try:
    import pynvml
    pynvml.nvmlInit()
    NVH = pynvml.nvmlDeviceGetHandleByIndex(0)
except Exception as e:  # noqa
    log("pynvml unavailable:", e)
    pynvml = None
    NVH = None

SAMPLES = []  # (t_monotonic, used_bytes, sm_mhz, power_w, reasons)
_stop = threading.Event()


def nvml_used():
    if NVH is None:
        return None
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(NVH).used)
    except Exception:
        return None


def nvml_proc_used():
    if NVH is None:
        return None
    try:
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(NVH):
            if p.pid == os.getpid():
                return int(p.usedGpuMemory) if p.usedGpuMemory is not None else None
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(NVH)
        return [(p.pid, p.usedGpuMemory) for p in procs]
    except Exception as e:
        return "ERR %r" % e


def sampler():
    f = open(os.path.join(OUT, "smi.csv"), "w")
    f.write("t_s,mem_used_bytes,sm_mhz,power_w,clock_event_reasons\n")
    while not _stop.is_set():
        t = time.monotonic() - T0
        used = nvml_used()
        sm = pw = rs = ""
        if NVH is not None:
            try:
                sm = pynvml.nvmlDeviceGetClockInfo(NVH, pynvml.NVML_CLOCK_SM)
            except Exception:
                pass
            try:
                pw = pynvml.nvmlDeviceGetPowerUsage(NVH) / 1000.0
            except Exception:
                pass
            try:
                fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                    pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
                rs = hex(fn(NVH))
            except Exception:
                pass
        SAMPLES.append((t, used, sm, pw, rs))
        f.write("%.2f,%s,%s,%s,%s\n" % (t, used, sm, pw, rs))
        f.flush()
        _stop.wait(0.2)


def max_used_between(t_a, t_b):
    v = [s[1] for s in SAMPLES if t_a <= s[0] <= t_b and s[1] is not None]
    return max(v) if v else None


def median_between(t_a, t_b, idx):
    v = [float(s[idx]) for s in SAMPLES if t_a <= s[0] <= t_b and s[idx] not in ("", None)]
    return statistics.median(v) if v else None


# ---------------------------------------------------------------- env
env = {
    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "python": sys.version,
    "platform": platform.platform(),
    "torch": torch.__version__,
    "torch_cuda": torch.version.cuda,
    "cudnn": torch.backends.cudnn.version(),
    "transformers": transformers.__version__,
    "device": torch.cuda.get_device_name(0),
    "props": str(torch.cuda.get_device_properties(0)),
    "sdp_flags": {
        "flash": torch.backends.cuda.flash_sdp_enabled(),
        "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
        "math": torch.backends.cuda.math_sdp_enabled(),
        "cudnn": getattr(torch.backends.cuda, "cudnn_sdp_enabled", lambda: None)(),
    },
    "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
    "nvml_used_before_torch_alloc": nvml_used(),
    "nvidia_smi": sh("nvidia-smi"),
    "smi_query": sh("nvidia-smi --query-gpu=name,driver_version,power.limit,power.default_limit,clocks.max.sm,"
                    "clocks.max.mem,persistence_mode,compute_mode,ecc.mode.current,temperature.gpu --format=csv"),
    "pip": sh("python3 -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|accelerate|triton|nvidia-cudnn|nvidia-cublas) '"),
}
json.dump(env, open(os.path.join(OUT, "env.json"), "w"), indent=1)
threading.Thread(target=sampler, daemon=True).start()

# ---------------------------------------------------------------- models
MODELS = {
    # meta-llama/Llama-3.2-1B config.json (rope_theta / llama3 rope scaling left at defaults: no cost effect)
    "llama3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                        num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    # TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json
    "tinyllama-1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                           num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False),
}

# id, model, seq, micro_batch, ac, precision, optimizer impl, profile?
CONFIGS = [
    ("l1b_s4096_b2_none_amp", "llama3.2-1b", 4096, 2, "none", "amp_bf16", "foreach", True),
    ("l1b_s4096_b2_full_amp", "llama3.2-1b", 4096, 2, "full", "amp_bf16", "foreach", False),
    ("tl_s2048_b4_none_amp", "tinyllama-1.1b", 2048, 4, "none", "amp_bf16", "foreach", False),
    ("l1b_s2048_b1_none_amp", "llama3.2-1b", 2048, 1, "none", "amp_bf16", "foreach", False),
    ("l1b_s4096_b2_none_bf16", "llama3.2-1b", 4096, 2, "none", "bf16", "foreach", False),
    ("l1b_s4096_b2_none_amp_fused", "llama3.2-1b", 4096, 2, "none", "amp_bf16", "fused", False),
]
N_WARM = 3
N_TIMED = int(os.environ.get("STEP_TIMED", "20"))
GiB = 2.0 ** 30


def build(model_name, precision, ac):
    kw = dict(MODELS[model_name])
    kw.update(max_position_embeddings=8192, use_cache=False, attention_dropout=0.0)
    cfg = LlamaConfig(**kw)
    try:
        cfg._attn_implementation = "sdpa"
    except Exception as e:  # noqa
        log("could not set _attn_implementation:", e)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model = model.to(dtype=torch.float32)
    if precision == "bf16":
        model = model.to(dtype=torch.bfloat16)
    model.train()
    if ac == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model, cfg


def run_config(c):
    cid, mname, seq, mb, ac, prec, optimpl, do_prof = c
    res = dict(id=cid, model=mname, seq_len=seq, micro_batch=mb, activation_checkpointing=ac, precision=prec,
               optimizer="adamw_" + optimpl, n_warm=N_WARM, n_timed=N_TIMED)
    t_cfg0 = time.monotonic() - T0
    torch.cuda.reset_peak_memory_stats()
    model, cfg = build(mname, prec, ac)
    torch.cuda.synchronize()
    res["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    res["params"] = sum(p.numel() for p in model.parameters())
    res["param_dtype"] = str(next(model.parameters()).dtype)
    res["gradient_checkpointing"] = bool(getattr(model, "is_gradient_checkpointing", False))
    res["alloc_after_build"] = torch.cuda.memory_allocated()
    log(cid, "built", res["params"], "params", res["param_dtype"], "attn", res["attn_implementation"],
        "gc", res["gradient_checkpointing"])

    params = [p for p in model.parameters()]
    if prec == "bf16":
        masters = [p.detach().float().clone() for p in params]
        for m in masters:
            m.requires_grad_(True)
        opt = torch.optim.AdamW(masters, lr=1e-5, weight_decay=0.1, foreach=True)
    else:
        masters = None
        if optimpl == "fused":
            opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.1, fused=True)
        else:
            opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.1)  # CUDA default: foreach
    res["alloc_after_optimizer_ctor"] = torch.cuda.memory_allocated()

    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    batches = [torch.randint(0, cfg.vocab_size, (mb, seq), device="cuda", generator=g) for _ in range(3)]

    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(3)] for _ in range(N_WARM + N_TIMED)]

    def step(i):
        x = batches[i % len(batches)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        e = ev[i]
        e[0].record()
        # the output object (with its bf16 logits) is held until after the backward, as zerosim assumes
        # (docs/workload.md 4.4: "HF's CausalLMOutput.logits, alive until backward")
        if prec == "amp_bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(input_ids=x, labels=x, use_cache=False)
        else:
            out = model(input_ids=x, labels=x, use_cache=False)
        loss = out.loss
        loss.backward()
        del out
        e[1].record()
        if masters is not None:
            for m, p in zip(masters, params):
                m.grad = p.grad.float()
                p.grad = None
            opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                try:
                    torch._foreach_copy_(params, masters)
                except Exception:
                    for p, m in zip(params, masters):
                        p.copy_(m)
        else:
            opt.step()
            opt.zero_grad(set_to_none=True)
        e[2].record()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        return t1 - t0, float(loss.detach())

    # step 1 alone (lazy optimizer state)
    torch.cuda.reset_peak_memory_stats()
    w1, l1 = step(0)
    res["first_step_s"] = w1
    res["first_step_loss"] = l1
    res["first_step_max_allocated"] = torch.cuda.max_memory_allocated()
    res["first_step_max_reserved"] = torch.cuda.max_memory_reserved()
    for i in range(1, N_WARM):
        step(i)
    res["alloc_between_steps"] = torch.cuda.memory_allocated()
    res["reserved_after_warmup"] = torch.cuda.memory_reserved()
    log(cid, "step1 %.3f s, loss %.3f, peak alloc %.2f GiB reserved %.2f GiB" % (
        w1, l1, res["first_step_max_allocated"] / GiB, res["first_step_max_reserved"] / GiB))

    torch.cuda.reset_peak_memory_stats()
    t_a = time.monotonic() - T0
    walls = []
    for i in range(N_WARM, N_WARM + N_TIMED):
        w, _ = step(i)
        walls.append(w)
    t_b = time.monotonic() - T0
    res["steady_max_allocated"] = torch.cuda.max_memory_allocated()
    res["steady_max_reserved"] = torch.cuda.max_memory_reserved()
    st = torch.cuda.memory_stats()
    res["num_alloc_retries"] = st.get("num_alloc_retries")
    res["num_device_alloc"] = st.get("num_device_alloc")
    fb = [ev[i][0].elapsed_time(ev[i][1]) / 1e3 for i in range(N_WARM, N_WARM + N_TIMED)]
    op = [ev[i][1].elapsed_time(ev[i][2]) / 1e3 for i in range(N_WARM, N_WARM + N_TIMED)]
    tot = [ev[i][0].elapsed_time(ev[i][2]) / 1e3 for i in range(N_WARM, N_WARM + N_TIMED)]
    res["step_wall_s"] = walls
    res["step_wall_median_s"] = statistics.median(walls)
    res["step_wall_min_s"] = min(walls)
    res["step_wall_max_s"] = max(walls)
    res["step_event_median_s"] = statistics.median(tot)
    res["fwd_bwd_event_median_s"] = statistics.median(fb)
    res["optimizer_event_median_s"] = statistics.median(op)
    res["tokens_per_s"] = mb * seq / res["step_wall_median_s"]
    res["nvml_used_max_timed"] = max_used_between(t_a, t_b)
    res["nvml_used_now"] = nvml_used()
    res["nvml_proc_used_now"] = nvml_proc_used()
    res["sm_mhz_median_timed"] = median_between(t_a, t_b, 2)
    res["power_w_median_timed"] = median_between(t_a, t_b, 3)
    res["reasons_timed"] = sorted(set(s[4] for s in SAMPLES if t_a <= s[0] <= t_b))
    log(cid, "median step %.4f s (events %.4f; fwd+bwd %.4f, opt %.4f), %.0f tok/s, steady peak alloc %.2f GiB, "
        "reserved %.2f GiB, nvml used %s" % (
            res["step_wall_median_s"], res["step_event_median_s"], res["fwd_bwd_event_median_s"],
            res["optimizer_event_median_s"], res["tokens_per_s"], res["steady_max_allocated"] / GiB,
            res["steady_max_reserved"] / GiB, res["nvml_used_max_timed"]))

    if do_prof and time.monotonic() - T0 < BUDGET - 60:
        try:
            from torch.profiler import profile, ProfilerActivity
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                step(N_WARM)  # events of index N_WARM reused; harmless
            ka = prof.key_averages()
            rows = []
            for e in ka:
                dt = getattr(e, "device_time_total", None)
                if dt is None:
                    dt = getattr(e, "cuda_time_total", 0)
                rows.append((dt, e.count, e.key))
            rows.sort(reverse=True)
            cls = {}
            for dt, n, k in rows:
                kl = k.lower()
                if any(s in kl for s in ("flash", "fmha", "cudnn", "attention", "sdpa", "mha")):
                    c_ = "attention"
                elif any(s in kl for s in ("adam", "multi_tensor", "foreach")):
                    c_ = "optimizer"
                elif any(s in kl for s in ("gemm", "xmma", "cutlass", "nvjet", "cublas", "sm90_", "wgmma")):
                    c_ = "gemm"
                else:
                    c_ = "other"
                cls[c_] = cls.get(c_, 0) + dt
            res["profile_us_by_class"] = cls
            with open(os.path.join(OUT, "profile.txt"), "w") as f:
                f.write("config %s: one profiled step (CUDA activity only); device time us, count, kernel\n" % cid)
                f.write("by class (substring rules in train_step.py): %s\n\n" % json.dumps(cls))
                for dt, n, k in rows[:80]:
                    f.write("%12.1f %6d  %s\n" % (dt, n, k[:200]))
            log(cid, "profile by class (us):", cls)
        except Exception as e:  # noqa
            log("profile failed:", repr(e))
            res["profile_error"] = repr(e)

    res["config_wall_s"] = time.monotonic() - T0 - t_cfg0
    del opt, masters, params, model, batches
    gc.collect()
    torch.cuda.empty_cache()
    return res


with open(os.path.join(OUT, "results.jsonl"), "a") as rf:
    for c in CONFIGS:
        left = BUDGET - (time.monotonic() - T0)
        if left < 30:
            log("SKIP", c[0], "(time guard: %.0f s left)" % left)
            rf.write(json.dumps(dict(id=c[0], skipped="time guard")) + "\n")
            rf.flush()
            continue
        try:
            r = run_config(c)
        except Exception as e:  # noqa
            log("FAIL", c[0], repr(e))
            traceback.print_exc()
            _log.write(traceback.format_exc())
            r = dict(id=c[0], error=repr(e), traceback=traceback.format_exc()[-3000:])
            gc.collect()
            torch.cuda.empty_cache()
        rf.write(json.dumps(r) + "\n")
        rf.flush()

_stop.set()
time.sleep(0.3)
log("summary:")
for line in open(os.path.join(OUT, "results.jsonl")):
    r = json.loads(line)
    if "step_wall_median_s" in r:
        log("%-30s step %.4f s  fb %.4f  opt %.4f  tok/s %8.0f  alloc %.2f/%.2f GiB  res %.2f/%.2f GiB  nvml %.2f GiB" % (
            r["id"], r["step_wall_median_s"], r["fwd_bwd_event_median_s"], r["optimizer_event_median_s"],
            r["tokens_per_s"], r["first_step_max_allocated"] / GiB, r["steady_max_allocated"] / GiB,
            r["first_step_max_reserved"] / GiB, r["steady_max_reserved"] / GiB,
            (r["nvml_used_max_timed"] or 0) / GiB))
    else:
        log(r["id"], r.get("error") or r.get("skipped"))
log("done")
