#!/usr/bin/env python3
"""Puts this folder's measurements (raw/results.jsonl) beside zerosim's predictions (zerosim/*.run.json,
zerosim/*.memory.json) and writes measured_runs.csv (the format of docs/calibration-inputs.md §2, read by
`zerosim compare --runs` and `zerosim calibrate`) and comparison.md. Run from this folder: python3 tabulate.py"""
import csv
import json

GiB = 2.0 ** 30
SOURCE = ("H100 SXM5 single-GPU training steps, 2026-11-27, PyTorch 2.11 + transformers 5.17 "
          "(h100-2026-11-27/training-step/raw/results.jsonl)")
COMPARED = ["l1b_s4096_b2_none_amp", "l1b_s4096_b2_full_amp", "tl_s2048_b4_none_amp", "l1b_s2048_b1_none_amp",
            "l1b_s4096_b2_none_bf16"]

meas = {}
for line in open("raw/results.jsonl"):
    r = json.loads(line)
    meas[r["id"]] = r


def err_time(m, p):   # + = predicted faster (docs/compare.md)
    return (m - p) / m


def err_rate(m, p):   # + = predicted faster
    return (p - m) / m


def err_mem(m, p):    # + = predicted larger
    return (p - m) / m


rows_csv = []
md = []
md.append("| config | figure | measured | predicted | signed error |")
md.append("|---|---|---:|---:|---:|")
for cid in COMPARED:
    m = meas[cid]
    run = json.load(open("zerosim/%s.run.json" % cid))
    mem = json.load(open("zerosim/%s.memory.json" % cid))
    assert run["peak_memory_bytes"] == mem["peak_memory_bytes"], cid
    step_p = run["step_time_s"]
    flops_model = run["tflops_per_gpu"]["model"] * 1e12 * step_p   # zerosim's own count, per step
    flops_hw = run["tflops_per_gpu"]["hardware"] * 1e12 * step_p
    step_m = m["step_wall_median_s"]
    tok_m = m["tokens_per_s"]
    tf_m = flops_model / step_m / 1e12
    tfh_m = flops_hw / step_m / 1e12
    pk = run["peak_memory_bytes"]
    figs = [
        ("step_time_s", "", step_m, step_p, err_time, "%.4f s"),
        ("tokens_per_s", "", tok_m, run["tokens_per_s"], err_rate, "%.0f"),
        ("tflops_per_gpu", "model", tf_m, run["tflops_per_gpu"]["model"], err_rate, "%.1f"),
        ("peak_memory_bytes", "allocated", m["steady_max_allocated"], pk["gpu"], err_mem, "GiB"),
        ("peak_memory_bytes", "reserved", m["steady_max_reserved"], pk["gpu_reserved"], err_mem, "GiB"),
        ("peak_memory_bytes", "device", m["nvml_proc_used_now"], pk["gpu_device"], err_mem, "GiB"),
    ]
    if cid.endswith("full_amp"):
        figs.insert(3, ("tflops_per_gpu", "hardware", tfh_m, run["tflops_per_gpu"]["hardware"], err_rate, "%.1f"))
    for fig, dfn, mv, pv, ef, f in figs:
        rows_csv.append([cid + ".yaml", fig, repr(float(mv)) if fig != "peak_memory_bytes" else str(int(mv)), dfn,
                         SOURCE])
        if f == "GiB":
            ms, ps = "%.2f GiB" % (mv / GiB), "%.2f GiB" % (pv / GiB)
        else:
            ms, ps = f % mv, f % pv
        md.append("| %s | %s%s | %s | %s | %+.1f %% |" % (cid, fig, " (%s)" % dfn if dfn else "", ms, ps,
                                                          100 * ef(mv, pv)))
    # time split: zerosim's compute / optimizer vs the events (fwd+bwd / optimizer.step+zero_grad)
    tb = run["time_breakdown_s"]
    md.append("| %s | split: fwd+bwd / optimizer | %.1f / %.1f ms | %.1f / %.1f ms | %+.1f %% / %+.1f %% |" % (
        cid, 1e3 * m["fwd_bwd_event_median_s"], 1e3 * m["optimizer_event_median_s"], 1e3 * tb["compute"],
        1e3 * tb["optimizer"], 100 * err_time(m["fwd_bwd_event_median_s"], tb["compute"]),
        100 * err_time(m["optimizer_event_median_s"], tb["optimizer"])))

with open("measured_runs.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["scenario", "figure", "measured", "definition", "source"])
    w.writerows(rows_csv)
open("comparison.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
