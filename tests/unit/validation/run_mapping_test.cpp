// The throughput validation (`zerosim validate --run`): rows to scenarios and figures, the forked runner,
// the statistics, the report and the ablation. The last cases run the engine (in worker processes, as the command
// does).
#include "row_fixtures.hpp"
#include "validation/run_validation.hpp"

#include "core/error.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

using namespace zerosim;
using namespace zerosim::validation;

using zerosim::validation::test::row_318;

namespace {

NodeLoader fake_nodes()
{
  return [](const std::string& name) { return zerosim::validation::test::fake_node(name); };
}

/// published.csv row 135 (DeepSpeed "ZeRO on Azure" blog, Figure 5): the columns the mapping reads, as written.
PublishedRow row_135()
{
  return {
      {"row_id", "135"},
      {"source_id", "S07"},
      {"locator", "Figure 5 (docs/assets/images/175b-trend.png)"},
      {"evidence_type", "chart-read (+/-5)"},
      {"provenance", "measured"},
      {"framework", "DeepSpeed ZeRO-3 (+CPU offload) via Megatron-DeepSpeed; DS 0.6.2, PyTorch 1.10.2, NCCL 2.12.10"},
      {"model", "GPT 175B"},
      {"params_B", "175"},
      {"layers", "96"},
      {"hidden", "12288"},
      {"heads", "96"},
      {"seq_len", "512"},
      {"gpu", "A100 SXM (Azure NDm A100 v4)"},
      {"gpu_mem_GB", "80"},
      {"gpus_per_node", "8"},
      {"nodes", "16"},
      {"total_gpus", "128"},
      {"cpu_mem_per_node_GB", "1700"},
      {"zero_stage", "3"},
      {"offload_optimizer", "cpu (blog: activation and optimizer states allocated in main memory)"},
      {"offload_param", "not stated"},
      {"tp", "not stated (ZeRO-3 DP; likely 1)"},
      {"pp", "not stated (likely 1)"},
      {"micro_batch", "1"},
      {"precision", "not stated (fp16/bf16 mixed)"},
      {"activation_checkpointing", "yes (activations allocated in main memory => ckpt offload)"},
      {"tflops_per_gpu", "55"},
      {"tflops_includes_recompute", "yes (Megatron 96*B*s*l*h^2 formula)"},
      {"completeness", "B"}};
}

/// published.csv row 211 (DeepSpeed ZeRO++ tutorial, ZeRO-3 baseline log at iteration 40).
PublishedRow row_211()
{
  return {{"row_id", "211"},
          {"source_id", "S09"},
          {"locator", "docs/_tutorials/zeropp.md + docs/assets/images/zeropp/ZeRO-baseline.png (iteration 40)"},
          {"evidence_type", "log screenshot (image read)"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed (Megatron-DeepSpeed GPT-2)"},
          {"model", "GPT-2 18B"},
          {"layers", "40"},
          {"hidden", "6144"},
          {"heads", "32"},
          {"seq_len", "512"},
          {"gpu", "V100-SXM3"},
          {"gpu_mem_GB", "32"},
          {"total_gpus", "64"},
          {"zero_stage", "3"},
          {"tp", "1"},
          {"pp", "1"},
          {"global_batch", "64"},
          {"micro_batch", "1"},
          {"grad_accum", "1"},
          {"precision", "fp16 mixed"},
          {"activation_checkpointing", "yes (--checkpoint-activations)"},
          {"tflops_per_gpu", "7.65"},
          {"step_time_s", "9.956"},
          {"samples_per_s", "6.428"},
          {"peak_mem_GB", "8.28"},
          {"mem_metric", "torch max allocated (rank 0); max reserved 18.84 GB"},
          {"completeness", "A"}};
}

/// published.csv row 56 (ZeRO-Offload Figure 8: 10B on one V100, global batch 512, micro-batch 10).
PublishedRow row_56()
{
  return {{"row_id", "56"},
          {"source_id", "S03"},
          {"locator", "Figure 8 + Table 3 (configs) + Table 2 (hardware)"},
          {"evidence_type", "chart-read (+/-1)"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed ZeRO-Offload (ZeRO-2 + CPU optimizer offload, CPU-Adam)"},
          {"model", "GPT-2-like 10B"},
          {"params_B", "10"},
          {"layers", "50"},
          {"hidden", "4096"},
          {"seq_len", "not stated (GPT-2-like)"},
          {"gpu", "V100 SXM3 (DGX-2)"},
          {"gpu_mem_GB", "32"},
          {"total_gpus", "1"},
          {"cpu_mem_per_node_GB", "1536"},
          {"zero_stage", "2 (single GPU)"},
          {"offload_optimizer", "cpu"},
          {"offload_param", "none"},
          {"tp", "1"},
          {"global_batch", "512"},
          {"micro_batch", "10"},
          {"grad_accum", "51.2"},
          {"precision", "fp16 mixed (Adam)"},
          {"activation_checkpointing", "yes (paper: 'We use activation checkpointing')"},
          {"tflops_per_gpu", "41.1"},
          {"completeness", "B"}};
}

/// published.csv row 85 (ZeRO-Offload Table 4: DeepSpeed CPU-Adam on the optimizer step of the 1B model).
PublishedRow row_85()
{
  return {{"row_id", "85"},
          {"source_id", "S03"},
          {"locator", "Table 4 (Adam latency)"},
          {"evidence_type", "table (paper image)"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed ZeRO-Offload (ZeRO-2 + CPU optimizer offload, CPU-Adam)"},
          {"model", "1B params (optimizer step only)"},
          {"params_B", "1"},
          {"seq_len", "not stated (GPT-2-like)"},
          {"gpu", "V100 32GB (PT-GPU) / 2x Xeon Platinum 8168 (CPU)"},
          {"gpu_mem_GB", "32"},
          {"total_gpus", "1"},
          {"zero_stage", ""},
          {"precision", "fp16 mixed (Adam)"},
          {"activation_checkpointing", "yes (paper: 'We use activation checkpointing')"},
          {"step_time_s", "0.22"},
          {"completeness", "A"}};
}

/// `base` with some columns rewritten (a row of the same source that differs in a few cells).
PublishedRow with(PublishedRow base, const std::vector<std::pair<std::string, std::string>>& cells)
{
  for (const auto& [k, v] : cells)
    base.insert_or_assign(k, v);
  return base;
}

/// published.csv row 51 (ZeRO-Offload Figure 8: the 1B model, 20 layers x 2048, on one V100).
PublishedRow row_51()
{
  return with(row_56(), {{"row_id", "51"},
                         {"model", "GPT-2-like 1B"},
                         {"params_B", "1"},
                         {"layers", "20"},
                         {"hidden", "2048"},
                         {"micro_batch", "32"},
                         {"grad_accum", "16.0"},
                         {"tflops_per_gpu", "36.0"}});
}

/// published.csv row 350 (llm-foundry benchmarks, 'H100 80GB BF16 (Large Scale)': MPT-70b on 512 H100).
PublishedRow row_350()
{
  return {{"row_id", "350"},
          {"source_id", "S14"},
          {"locator", "section 'H100 80GB BF16 (Large Scale, >= 128 GPUs)'"},
          {"evidence_type", "table"},
          {"provenance", "measured"},
          {"framework", "Composer + PyTorch FSDP (MPT models, FlashAttention)"},
          {"model", "MPT-70b"},
          {"params_B", "64.862"},
          {"layers", "80"},
          {"hidden", "8192"},
          {"ffn_hidden", "32768"},
          {"heads", "64"},
          {"seq_len", "2048"},
          {"vocab", "50368"},
          {"gpu", "H100 SXM"},
          {"gpu_mem_GB", "80"},
          {"gpus_per_node", "8"},
          {"nodes", "64"},
          {"total_gpus", "512"},
          {"inter_node_network", "not stated (MosaicML platform)"},
          {"zero_stage", "3-equivalent"},
          {"fsdp_sharding", "FULL_SHARD"},
          {"offload_optimizer", "none"},
          {"offload_param", "none"},
          {"tp", "1"},
          {"pp", "1"},
          {"global_batch", "4096"},
          {"micro_batch", "8"},
          {"grad_accum", "1"},
          {"precision", "amp_bf16 (MP mode DEFAULT)"},
          {"activation_checkpointing", "yes"},
          {"tflops_per_gpu", "408.0"},
          {"tflops_includes_recompute", "no for 'Model TFLOP'/MFU; HFU counts recompute"},
          {"mfu", "0.4125"},
          {"hfu", "0.55"},
          {"samples_per_s", "251"},
          {"tokens_per_s_total", "515636"},
          {"tokens_per_s_per_gpu", "1007"},
          {"derived_step_time_s", "16.268"},
          {"completeness", "B"}};
}

/// published.csv row 427 (llm-foundry, 'A100 80GB with 1600 Gbps node-node interconnect': MPT-70b, MP mode PURE).
PublishedRow row_427()
{
  return with(row_350(), {{"row_id", "427"},
                          {"locator", "section 'A100 80GB with 1600 Gbps node-node interconnect (RoCE)'"},
                          {"gpu", "A100 SXM"},
                          {"nodes", "8"},
                          {"total_gpus", "64"},
                          {"inter_node_network", "1600 Gbps RoCE per node"},
                          {"global_batch", "2048"},
                          {"grad_accum", "4"},
                          {"precision", "bf16 (MP mode PURE)"},
                          {"tflops_per_gpu", "166.0"},
                          {"mfu", "0.5333"},
                          {"hfu", "0.711"},
                          {"samples_per_s", "12"},
                          {"tokens_per_s_total", "26274"},
                          {"tokens_per_s_per_gpu", "410"},
                          {"derived_step_time_s", "159.637"},
                          {"completeness", "A"}});
}

/// published.csv row 568 (torchtitan docs/performance.md, 64 A100: Llama 3 70B, FSDP2, full checkpointing).
PublishedRow row_568()
{
  return {{"row_id", "568"},
          {"source_id", "S15"},
          {"locator", "docs/performance.md (64 A100)"},
          {"evidence_type", "table"},
          {"provenance", "measured"},
          {"framework", "torchtitan (PyTorch FSDP2, per-parameter sharding)"},
          {"model", "Llama 3 70B"},
          {"params_B", "70.6"},
          {"layers", "80"},
          {"hidden", "8192"},
          {"ffn_hidden", "28672"},
          {"heads", "64 (8 KV)"},
          {"seq_len", "8192"},
          {"vocab", "128256"},
          {"gpu", "A100"},
          {"gpu_mem_GB", "80"},
          {"gpus_per_node", "8"},
          {"nodes", "8"},
          {"total_gpus", "64"},
          {"zero_stage", "3-equivalent"},
          {"fsdp_sharding", "FSDP2 fully_shard (reshard_after_forward=True)"},
          {"global_batch", "64"},
          {"micro_batch", "1"},
          {"grad_accum", "1"},
          {"precision", "bf16 mixed"},
          {"activation_checkpointing", "full"},
          {"mfu", "0.517"},
          {"tokens_per_s_per_gpu", "331"},
          {"derived_step_time_s", "24.75"},
          {"completeness", "B"}};
}

/// published.csv row 595 (PyTorch/IBM "Maximizing training throughput" Table 1: fms-fsdp, Llama 2 7B, 96 H100).
PublishedRow row_595()
{
  return {{"row_id", "595"},
          {"source_id", "S16"},
          {"locator", "Table 1 (MFU/HFU)"},
          {"evidence_type", "table"},
          {"provenance", "measured"},
          {"framework", "PyTorch FSDP (fms-fsdp), SDPA FlashAttention-2"},
          {"model", "Llama 2 7B arch"},
          {"params_B", "7.0"},
          {"layers", "32"},
          {"hidden", "4096"},
          {"ffn_hidden", "11008"},
          {"heads", "32"},
          {"seq_len", "4096"},
          {"vocab", "32000"},
          {"gpu", "H100"},
          {"gpu_mem_GB", "80"},
          {"gpus_per_node", "8"},
          {"nodes", "12"},
          {"total_gpus", "96"},
          {"inter_node_network", "800 Gbps inter-node"},
          {"zero_stage", "3-equivalent (likely; HSDP possible)"},
          {"fsdp_sharding", "FSDP (strategy per fms-fsdp config; not in table)"},
          {"global_batch", "192"},
          {"micro_batch", "2"},
          {"precision", "bf16 mixed; AdamW fp32 states"},
          {"activation_checkpointing", "no"},
          {"mfu", "0.37"},
          {"hfu", "0.37"},
          {"tokens_per_s_per_gpu", "7500"},
          {"derived_step_time_s", "1.09"},
          {"completeness", "B"}};
}

/// published.csv row 634 (HF blog "Fine-tuning Llama 2 70B using PyTorch FSDP": 16 A100 on AWS EFA).
PublishedRow row_634()
{
  return {{"row_id", "634"},
          {"source_id", "S18"},
          {"locator", "'Bringing it all together'"},
          {"evidence_type", "table (text)"},
          {"provenance", "measured"},
          {"framework", "Accelerate/TRL + PyTorch FSDP"},
          {"model", "Llama-2-70b-chat-hf"},
          {"layers", "80"},
          {"hidden", "8192"},
          {"ffn_hidden", "28672"},
          {"heads", "64 (8 KV)"},
          {"seq_len", "2048"},
          {"vocab", "32000"},
          {"gpu", "A100"},
          {"gpu_mem_GB", "80"},
          {"gpus_per_node", "8"},
          {"nodes", "2"},
          {"total_gpus", "16"},
          {"inter_node_network", "AWS Elastic Fabric Adapter (EFA)"},
          {"cpu_mem_per_node_GB", "1024"},
          {"zero_stage", "3-equivalent"},
          {"fsdp_sharding", "FULL_SHARD, transformer auto-wrap"},
          {"global_batch", "16"},
          {"micro_batch", "1"},
          {"grad_accum", "1"},
          {"precision", "bf16 mixed"},
          {"activation_checkpointing", "yes (+ flash-attn v2)"},
          {"step_time_s", "~13.5 h for 500 steps (incl. eval every 100 & 2 ckpt saves)"},
          {"derived_step_time_s", "97.2"},
          {"completeness", "B"},
          {"notes", "Derived ~97 s/step is an upper bound (includes eval/checkpoint time). Packing on."}};
}

/// published.csv row 618 (HF blog "Accelerate Large Model Training using PyTorch FSDP" Table 1: the DDP run of
/// GPT-2 Large, fp16, on 2 TITAN RTX).
PublishedRow row_618()
{
  return {{"row_id", "618"},
          {"source_id", "S18"},
          {"locator", "Table 1 (GPT-2 Large)"},
          {"evidence_type", "table (text)"},
          {"provenance", "measured"},
          {"framework", "Accelerate + PyTorch FSDP"},
          {"model", "gpt2-large"},
          {"layers", "36"},
          {"hidden", "1280"},
          {"heads", "20"},
          {"seq_len", "12"},
          {"gpu", "Titan RTX"},
          {"gpu_mem_GB", "24"},
          {"gpus_per_node", "2"},
          {"total_gpus", "2"},
          {"zero_stage", "0"},
          {"fsdp_sharding", "none (DDP)"},
          {"offload_param", "none"},
          {"micro_batch", "7"},
          {"precision", "fp16"},
          {"step_time_s", "~8 min for 1 epoch wikitext-2"},
          {"completeness", "B"}};
}

/// published.csv row 96 (ZeRO-Infinity, Figure 5(c) + Table 1: 50B on one DGX-2, optimizer on NVMe, parameters on
/// the CPU, micro-batch 26).
PublishedRow row_96()
{
  return {{"row_id", "96"},
          {"source_id", "S04"},
          {"locator", "Figure 5(c) (explicit labels) + Table 1"},
          {"evidence_type", "chart labels (explicit)"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed ZeRO-3 / ZeRO-Infinity (+ Megatron MP where mp>1)"},
          {"model", "GPT-like 50B (0.05T)"},
          {"layers", "62"},
          {"hidden", "8192"},
          {"seq_len", "1024"},
          {"gpu", "V100 SXM3 (DGX-2)"},
          {"gpu_mem_GB", "32"},
          {"gpus_per_node", "16"},
          {"nodes", "1"},
          {"total_gpus", "16"},
          {"inter_node_network", "800 Gbps internode (paper Sec 8.1)"},
          {"cpu_mem_per_node_GB", "1536"},
          {"zero_stage", "3"},
          {"offload_optimizer", "nvme"},
          {"offload_param", "cpu"},
          {"tp", "1"},
          {"dp", "16"},
          {"global_batch", "416"},
          {"micro_batch", "26"},
          {"precision", "fp16 mixed (Adam)"},
          {"activation_checkpointing", "yes (ckpt offload to CPU where needed)"},
          {"tflops_per_gpu", "44"},
          {"completeness", "A"}};
}

/// published.csv row 98 (same figure: 0.5T = 124 x 18432, optimizer and parameters on NVMe, micro-batch 8).
PublishedRow row_98()
{
  return with(row_96(), {{"row_id", "98"},
                         {"model", "GPT-like 0.5T"},
                         {"layers", "124"},
                         {"hidden", "18432"},
                         {"offload_param", "nvme"},
                         {"global_batch", "128"},
                         {"micro_batch", "8"},
                         {"tflops_per_gpu", "33"}});
}

/// published.csv row 117 (DeepSpeed issue #1776: the paper's 50B configuration rerun on one DGX-2, ~35 TFLOPs).
PublishedRow row_117()
{
  return {{"row_id", "117"},
          {"source_id", "S05"},
          {"locator", "Issue #1776"},
          {"evidence_type", "issue text"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed ZeRO-Infinity (Megatron-LM-v1.1.5-ZeRO3 example)"},
          {"model", "GPT-like 50B (paper config)"},
          {"params_B", "50"},
          {"layers", "62"},
          {"hidden", "8192"},
          {"seq_len", "1024 (example default, not restated)"},
          {"gpu", "V100 32GB (DGX-2)"},
          {"gpu_mem_GB", "32"},
          {"gpus_per_node", "16"},
          {"nodes", "1"},
          {"total_gpus", "16"},
          {"zero_stage", "3"},
          {"offload_optimizer", "nvme"},
          {"offload_param", "cpu"},
          {"precision", "fp16 mixed"},
          {"activation_checkpointing", "yes (example)"},
          {"tflops_per_gpu", "~35"},
          {"completeness", "B"}};
}

/// published.csv row 124 (ZeRO-3 Offload blog, Figure 3: 13B on one V100, 47.1 TFLOPs; no shape, no batch).
PublishedRow row_124()
{
  return {{"row_id", "124"},
          {"source_id", "S06"},
          {"locator", "2021-03-08-zero3-offload.md Figure 3 (zero3-offload-1-v100.png)"},
          {"evidence_type", "chart-read (+/-1)"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed"},
          {"model", "13B"},
          {"params_B", "13"},
          {"gpu", "V100"},
          {"gpu_mem_GB", "32"},
          {"total_gpus", "1"},
          {"cpu_mem_per_node_GB", "1536"},
          {"zero_stage", "3"},
          {"offload_optimizer", "cpu"},
          {"offload_param", "cpu"},
          {"precision", "fp16 mixed"},
          {"tflops_per_gpu", "47.1"},
          {"completeness", "C"}};
}

const TimeFigure* figure_of(const ThroughputCase& c, TimeMetric m)
{
  auto it = std::find_if(c.figures.begin(), c.figures.end(), [&](const TimeFigure& f) { return f.metric == m; });
  return it == c.figures.end() ? nullptr : &*it;
}

ThroughputMapping map_one(const PublishedRow& r, const std::vector<PublishedRow>& all = {})
{
  ThroughputMapping m;
  map_throughput_row(r, all.empty() ? std::vector<PublishedRow>{r} : all, fake_nodes(), m);
  return m;
}

std::string category_of(const PublishedRow& r)
{
  ThroughputMapping m = map_one(r);
  REQUIRE(m.cases.empty());
  REQUIRE(m.not_covered.size() == 1);
  return m.not_covered[0].category;
}

std::vector<PublishedRow> shipped_rows()
{
  std::string path = std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv";
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(path), "missing " << path);
  return read_published_rows(path);
}

/// A case with one figure, for the report and runner tests; `framework` and `strategy` as RowInfo writes them.
ThroughputCase hand_case(const std::string& id, const std::string& source, int stage, TimeMetric metric,
                         double measured, const std::string& framework = "DeepSpeed", const std::string& strategy = "")
{
  ThroughputCase c;
  c.info.row_id = id;
  c.info.source_id = source;
  c.info.model = "model " + id;
  c.info.stage = stage;
  c.info.offload = "none";
  c.info.framework = framework;
  c.info.strategy = strategy;
  c.scenario.cluster.nodes = 1;
  c.scenario.cluster.gpus_per_node = 8;
  TimeFigure f;
  f.metric = metric;
  f.column = "x";
  f.value = measured;
  c.figures.push_back(f);
  return c;
}

} // namespace

TEST_SUITE("validation")
{
  TEST_CASE("run mapping: figure cells are read as one value, a range, or refused with why")
  {
    CHECK(*parse_figure("9.956").value == doctest::Approx(9.956));
    ParsedFigure approx = parse_figure("~63");
    CHECK(*approx.value == doctest::Approx(63));
    CHECK(approx.note.find("approximate") != std::string::npos);
    // "25.7-26.8" (published.csv row 213): midpoint 26.25, half the range 0.55 as the tolerance.
    ParsedFigure range = parse_figure("25.7-26.8");
    CHECK(*range.value == doctest::Approx(26.25));
    CHECK(*range.half_range == doctest::Approx(0.55));
    ParsedFigure bw = parse_figure("backward only: 5.9");
    CHECK(*bw.value == doctest::Approx(5.9));
    CHECK(bw.part == "backward");
    CHECK_FALSE(parse_figure("0 (failed)").value);
    CHECK(parse_figure("0 (failed)").why_not.find("failed") != std::string::npos);
    CHECK_FALSE(parse_figure("60B: 12.0; 170B: OOM").value);
    CHECK_FALSE(parse_figure("up to 147").value);
    CHECK_FALSE(parse_figure("134.02 or 120.29 (columns ambiguous)").value);
    CHECK_FALSE(parse_figure("~15 min for 1 epoch wikitext-2").value);
    CHECK(parse_figure("").why_not.empty());
    CHECK(*chart_tolerance("chart-read (+/-5)") == doctest::Approx(5));
    CHECK(*chart_tolerance("chart-read (+/-0.2 s)") == doctest::Approx(0.2));
    CHECK_FALSE(chart_tolerance("table").has_value());
  }

  TEST_CASE("run mapping: Azure 175B row 135 is ZeRO-3 with CPU offload on 16 nodes, hardware TFLOPs +/-5")
  {
    ThroughputMapping m = map_one(row_135());
    REQUIRE(m.cases.size() == 1);
    const ThroughputCase& c = m.cases[0];
    const spec::Scenario& s = c.scenario;
    CHECK(s.cluster.total_gpus() == 128);
    CHECK(s.cluster.gpus_per_node == 8); // NDm A100 v4: 8 GPUs per VM
    CHECK(s.cluster.nodes == 16);
    CHECK(s.deepspeed.zero.stage == 3);
    CHECK(s.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::CPU);
    CHECK(s.deepspeed.zero.offload_param.device == spec::OffloadDevice::NONE); // "not stated"
    CHECK(s.training.seq_len == 512);
    CHECK(s.training.grad_accum == 1); // neither grad_accum nor global batch given
    CHECK(s.training.activation_checkpointing == spec::Checkpointing::FULL);
    // "1700" GB of host memory is what the node file leaves usable (1900 GiB - 340 GB): no override.
    CHECK(s.cluster.node.cpu.memory_bytes == 1900LL << 30);
    REQUIRE(c.figures.size() == 1);
    CHECK(c.figures[0].metric == TimeMetric::TFLOPS_HARDWARE); // "yes (Megatron 96*B*s*l*h^2 formula)"
    CHECK(c.figures[0].value == doctest::Approx(55));
    CHECK(*c.figures[0].tolerance == doctest::Approx(5)); // chart-read (+/-5)
    CHECK(c.info.stage == 3);
    CHECK(c.info.offload == "opt cpu + param none");
  }

  TEST_CASE("run mapping: row 211's step time is the primary figure, samples/s and TFLOPs follow")
  {
    ThroughputMapping m = map_one(row_211());
    REQUIRE(m.cases.size() == 1);
    const auto& f = m.cases[0].figures;
    REQUIRE(f.size() == 3);
    CHECK(f[0].metric == TimeMetric::STEP_TIME);
    CHECK(f[0].value == doctest::Approx(9.956));
    CHECK(f[1].metric == TimeMetric::SAMPLES_PER_S);
    // The definition column is empty; the run checkpoints activations and is Megatron-DeepSpeed, whose log
    // counts the recomputed forward (README trap 1).
    CHECK(f[2].metric == TimeMetric::TFLOPS_HARDWARE);
    CHECK(f[2].note.find("not stated") != std::string::npos);
    CHECK(m.cases[0].scenario.training.grad_accum == 1);
  }

  TEST_CASE("run mapping: gradient accumulation from the row, from the global batch, or 1")
  {
    // Row 56: grad_accum written 51.2 (512 / 10): 51 used, and said.
    ThroughputMapping a = map_one(row_56());
    REQUIRE(a.cases.size() == 1);
    CHECK(a.cases[0].scenario.training.grad_accum == 51);
    CHECK(a.cases[0].info.assumptions.find("51.2") != std::string::npos);
    CHECK(a.cases[0].info.stage == 2); // "2 (single GPU)"
    // Heads are not stated: hidden / 128 = 32 (ZeRO-Offload's 10B, as published.csv row 213 gives it).
    CHECK(a.cases[0].scenario.model.heads == 32);
    // Global batch 512 over micro-batch 10 x 16 GPUs = 3.2: 3 micro-steps (published.csv row 67).
    PublishedRow r67 = row_56();
    r67["grad_accum"] = "";
    r67["total_gpus"] = "16";
    ThroughputMapping b = map_one(r67);
    REQUIRE(b.cases.size() == 1);
    CHECK(b.cases[0].scenario.training.grad_accum == 3);
    CHECK(b.cases[0].scenario.training.global_batch == 10 * 3 * 16);
    // Neither given: 1.
    PublishedRow none = r67;
    none["global_batch"] = "";
    ThroughputMapping c = map_one(none);
    REQUIRE(c.cases.size() == 1);
    CHECK(c.cases[0].scenario.training.grad_accum == 1);
  }

  TEST_CASE("run mapping: a ZeRO-Offload Table 4 row borrows the 1B shape and compares the CPU-Adam time")
  {
    ThroughputMapping m = map_one(row_85(), {row_51(), row_85()});
    REQUIRE(m.cases.size() == 1);
    const ThroughputCase& c = m.cases[0];
    CHECK(c.scenario.model.layers == 20); // the 1B model of ZeRO-Offload Figure 8 (row 51): 20 x 2048
    CHECK(c.scenario.model.hidden == 2048);
    CHECK(c.scenario.deepspeed.zero.stage == 2);
    CHECK(c.scenario.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::CPU);
    CHECK(c.scenario.cluster.total_gpus() == 1);
    REQUIRE(c.figures.size() == 1);
    CHECK(c.figures[0].metric == TimeMetric::CPU_ADAM_TIME);
    CHECK(c.figures[0].value == doctest::Approx(0.22));
    CHECK(is_component(c.figures[0].metric));
    // Without a row giving the 1B shape the row cannot be built.
    ThroughputMapping alone = map_one(row_85());
    CHECK(alone.cases.empty());
    REQUIRE(alone.not_covered.size() == 1);
    CHECK(alone.not_covered[0].category == "inputs missing");
  }

  TEST_CASE("run mapping: ZeRO-Infinity row 96 is ZeRO-3 with NVMe optimizer and CPU parameters, as the authors ran it")
  {
    ThroughputMapping m = map_one(row_96());
    REQUIRE(m.cases.size() == 1);
    const spec::Scenario& s = m.cases[0].scenario;
    CHECK(s.deepspeed.zero.stage == 3);
    CHECK(s.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::NVME);
    CHECK(s.deepspeed.zero.offload_param.device == spec::OffloadDevice::CPU);
    CHECK(s.model.heads == 32); // ZeRO-Infinity Table 4: 8192-wide models have 32 heads (row 101 notes)
    CHECK(s.cluster.total_gpus() == 16);
    CHECK(s.training.micro_batch == 26);
    CHECK(s.training.grad_accum == 1); // 416 = 26 x 16
    // The authors' SC21 artifact (ds_zero3_sc21.json): reduce bucket 1e8, reuse distance 1e8, sub-groups of 4e8,
    // parameter swap buffers of 1e9 elements; aio queue depth 16 and 2 threads.
    CHECK(s.deepspeed.zero.reduce_bucket_size == 100'000'000);
    CHECK(s.deepspeed.zero.stage3_max_reuse_distance == 100'000'000);
    CHECK(s.deepspeed.zero.sub_group_size == 400'000'000);
    CHECK(s.deepspeed.zero.offload_param.buffer_size == 1'000'000'000);
    CHECK(s.deepspeed.aio.queue_depth == 16);
    CHECK(s.deepspeed.aio.intra_op_parallelism == 2);
    // run_sc21.sh passes --checkpoint-in-cpu --partition-activations for this 62 x 8192 run.
    CHECK(s.deepspeed.activation_checkpointing.cpu_checkpointing);
    CHECK(s.deepspeed.activation_checkpointing.partition_activations);
    CHECK(s.training.activation_checkpointing == spec::Checkpointing::FULL);
    CHECK(m.cases[0].info.offload == "opt nvme + param cpu");
    REQUIRE_FALSE(m.cases[0].figures.empty());
    CHECK(m.cases[0].figures[0].metric == TimeMetric::TFLOPS_HARDWARE); // ckpt + DeepSpeed: recompute counted
    CHECK(m.cases[0].figures[0].value == doctest::Approx(44));
  }

  TEST_CASE("run mapping: ZeRO-Infinity checkpoints go to the CPU where their size exceeds the GPU")
  {
    // Row 98: 124 layers x micro-batch 8 x 1024 x 18432 x 2 B = 37.4e9 B of checkpoints > 32 GiB (34.4e9 B): needed.
    ThroughputMapping m = map_one(row_98());
    REQUIRE(m.cases.size() == 1);
    CHECK(m.cases[0].scenario.deepspeed.activation_checkpointing.cpu_checkpointing);
    CHECK(m.cases[0].scenario.deepspeed.zero.offload_param.device == spec::OffloadDevice::NVME);
    CHECK(m.cases[0].scenario.model.heads == 144); // 18432 is not in Table 4: hidden / 128
    // At micro-batch 1 the same checkpoints are 4.7e9 B: kept on the GPU.
    ThroughputMapping small = map_one(with(row_98(), {{"micro_batch", "1"}, {"global_batch", "16"}}));
    REQUIRE(small.cases.size() == 1);
    CHECK_FALSE(small.cases[0].scenario.deepspeed.activation_checkpointing.cpu_checkpointing);
  }

  TEST_CASE("run mapping: issue #1776's 'paper config' row 117 takes the paper's batch and the example's checkpointing")
  {
    ThroughputMapping m = map_one(row_117(), {row_96(), row_98(), row_117()});
    REQUIRE(m.cases.size() == 1);
    const spec::Scenario& s = m.cases[0].scenario;
    CHECK(s.training.micro_batch == 26); // row 96, the paper's 50B run with the same offload devices and GPUs
    CHECK(s.training.global_batch == 416);
    CHECK(s.model.heads == 32);
    CHECK(s.training.seq_len == 1024);
    // Megatron-LM-v1.1.5-ZeRO3/examples/ds_pretrain_gpt2-zero3.sh: PA=true, PA_CPU=true.
    CHECK(s.deepspeed.activation_checkpointing.cpu_checkpointing);
    CHECK(s.deepspeed.activation_checkpointing.partition_activations);
    // Its ds_config is in an attachment not in the data: DeepSpeed 0.19 defaults.
    CHECK(s.deepspeed.zero.reduce_bucket_size == 500'000'000);
    CHECK(m.cases[0].figures[0].value == doctest::Approx(35));
    // Without the paper's row the batch is missing.
    ThroughputMapping alone = map_one(row_117());
    CHECK(alone.cases.empty());
  }

  TEST_CASE("run mapping: rows outside the modelled set are not covered, each in its group")
  {
    // torchtitan row 566: "selective layer" checkpointing (every 2nd block), neither full nor Megatron-selective.
    PublishedRow layer_ac = with(row_568(), {{"row_id", "566"}, {"activation_checkpointing", "selective layer"}});
    CHECK(category_of(layer_ac) == "activation checkpointing variant not modelled");
    PublishedRow fairscale = row_211(); // S18 rows 612-613
    fairscale["framework"] = "FairScale sharded_ddp";
    fairscale["zero_stage"] = "1-2 (FairScale OSS/SDP)";
    CHECK(category_of(fairscale) == "FairScale sharded DDP");
    PublishedRow fp8 = row_350(); // S14 rows 420-426
    fp8["precision"] = "amp_fp8 (MP mode DEFAULT)";
    CHECK(category_of(fp8) == "FP8 / context parallelism / ZeRO++ (README trap 4)");
    PublishedRow tp = row_568(); // torchtitan's 3D rows 586-591: a pipeline under FSDP2
    tp["tp"] = "8";
    tp["pp"] = "8";
    CHECK(category_of(tp) == "tensor / pipeline parallelism (README trap 6)");
    CHECK(map_one(tp).not_covered[0].reason.find("only DeepSpeed's PipelineEngine") != std::string::npos);
    PublishedRow recalled = row_211(); // S07 row 189: a split recalled, unverified
    recalled["tp"] = "8 (unverified recollection)";
    recalled["pp"] = "35 (unverified recollection)";
    CHECK(category_of(recalled) == "tensor / pipeline parallelism (README trap 6)");
    PublishedRow dtensor = row_568(); // torchtitan's 2D (FSDP + DTensor TP) rows 584-585
    dtensor["tp"] = "8";
    CHECK(category_of(dtensor) == "tensor / pipeline parallelism (README trap 6)");
    CHECK(map_one(dtensor).not_covered[0].reason.find("only Megatron-DeepSpeed's is modelled") != std::string::npos);
    PublishedRow mp = row_211(); // ZeRO paper rows 18-26: "<=16 (MP within node; ...)"
    mp["tp"] = "<=16 (MP within node; exact per-model MP in appendix, not read)";
    CHECK(category_of(mp) == "tensor / pipeline parallelism (README trap 6)");
    // ZeRO-3 Offload blog rows 120-131: parameter offload is modelled; the blog gives no shape and no batch.
    CHECK(category_of(row_124()) == "completeness C: inputs missing");
    CHECK(map_one(row_124()).not_covered[0].reason.find("micro-batch") != std::string::npos);
    PublishedRow c = row_135();
    c["completeness"] = "C";
    c["layers"] = "";
    CHECK(category_of(c) == "completeness C: inputs missing");
    PublishedRow failed = row_211(); // autotuning rows 220, 224: "0 (failed)"
    failed["step_time_s"] = "";
    failed["tflops_per_gpu"] = "";
    failed["samples_per_s"] = "0 (failed)";
    CHECK(category_of(failed) == "figure not comparable");
    PublishedRow memory_only = row_211();
    for (const char* k : {"step_time_s", "tflops_per_gpu", "samples_per_s"})
      memory_only[k] = "";
    CHECK(category_of(memory_only) == "no time or throughput figure");
    PublishedRow t5 = row_211();
    t5["model"] = "t5-large";
    CHECK(category_of(t5) == "encoder-decoder or encoder-only model (README trap 8)");
    PublishedRow bloom = row_211(); // BLOOM 'Trying with ZeRO_STAGE=0/1' (README trap 5)
    bloom["source_id"] = "S12";
    bloom["locator"] = "chronicles-prequel.md 'Trying with ZeRO_STAGE=0/1' (ZS=0 row, as printed)";
    CHECK(category_of(bloom) == "BLOOM ZeRO-0/1 table: time and TFLOPs columns swapped (README trap 5)");
    PublishedRow two = row_211();
    two["zero_stage"] = "1 or 2";
    CHECK(category_of(two) == "not one ZeRO stage");
  }

  TEST_CASE("run mapping: every row of the shipped file is a case or not covered, exactly once")
  {
    std::vector<PublishedRow> rows = shipped_rows();
    ThroughputMapping m = map_throughput_rows(
        rows, node_loader_near(std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv"));
    std::multiset<std::string> seen;
    for (const auto& c : m.cases)
      seen.insert(c.info.row_id);
    for (const auto& n : m.not_covered)
      seen.insert(n.row_id);
    CHECK(seen.size() == rows.size());
    for (const auto& r : rows)
      CHECK_MESSAGE(seen.count(r.at("row_id")) == 1, "row " << r.at("row_id"));
    // stacks.csv merged: the four fields the mapping reads, on the rows it lists (results/validation/stacks.csv);
    // its locator, quote and reason are for the reader and are not merged.
    int listed = 0;
    for (const auto& r : rows) {
      for (const char* k : {"stack.locator", "stack.quote", "stack.reason"})
        CHECK_MESSAGE(r.count(k) == 0, "row " << r.at("row_id") << ": " << k);
      if (!r.count("stack.attention"))
        continue;
      ++listed;
      for (const char* k : {"stack.torch", "stack.compile", "stack.status"})
        CHECK_MESSAGE(r.count(k) == 1, "row " << r.at("row_id") << ": " << k);
      CHECK((r.at("stack.status") == "quoted" || r.at("stack.status") == "inferred"));
    }
    CHECK(listed > 0);
    auto is_case = [&](const PublishedRow& r) {
      return std::any_of(m.cases.begin(), m.cases.end(),
                         [&](const ThroughputCase& c) { return c.info.row_id == r.at("row_id"); });
    };
    // Every row of the Azure blog (S07: ZeRO-3 with CPU optimizer offload, no TP/PP, completeness B, one
    // TFLOPs figure each) is simulated; so is every llm-foundry row (S14: FSDP, shapes, batch and GPUs given)
    // except the FP8 ones (README trap 4); so is every ZeRO-Infinity run with NVMe or parameter offload that gives
    // its shape, without model parallelism (rows 96-99 of the paper, 117-119 of the issues). No TP/PP row is.
    for (const auto& r : rows) {
      if (r.at("source_id") == "S07" && r.at("completeness") != "C")
        CHECK_MESSAGE(is_case(r), "row " << r.at("row_id"));
      if (r.at("source_id") == "S14")
        CHECK_MESSAGE(is_case(r) == (r.at("precision").find("fp8") == std::string::npos), "row " << r.at("row_id"));
    }
    for (const char* id : {"96", "97", "98", "99", "117", "118", "119"})
      CHECK_MESSAGE(
          is_case(*std::find_if(rows.begin(), rows.end(), [&](const PublishedRow& r) { return r.at("row_id") == id; })),
          "row " << id);
    // No row is left out for a reason that only defers it.
    for (const auto& n : m.not_covered)
      CHECK_MESSAGE(n.reason.find("later issue") == std::string::npos, "row " << n.row_id << ": " << n.reason);
    std::map<std::string, const PublishedRow*> by_id;
    for (const auto& r : rows)
      by_id[r.at("row_id")] = &r;
    for (const auto& c : m.cases) {
      const PublishedRow& r = *by_id.at(c.info.row_id);
      CHECK(c.info.framework == framework_label(r));
      if (c.scenario.framework == spec::Framework::DEEPSPEED) {
        CHECK(c.info.framework == "DeepSpeed");
      } else {
        CHECK(c.info.framework == (c.scenario.framework == spec::Framework::FSDP ? "FSDP" : "DDP"));
      }
      // Megatron tensor parallelism and DeepSpeed's pipeline engine are modelled under DeepSpeed only
      // (docs/tensor-parallel.md, docs/pipeline-parallel.md), each at the row's degree.
      const int tp = static_cast<int>(leading_number(r.at("tp")).value_or(1));
      const int pp = static_cast<int>(leading_number(r.at("pp")).value_or(1));
      if (tp > 1 || pp > 1)
        CHECK(c.scenario.framework == spec::Framework::DEEPSPEED);
      CHECK(c.scenario.tp() == std::max(1, tp));
      CHECK(c.scenario.pp() == std::max(1, pp));
      CHECK(r.at("precision").find("fp8") == std::string::npos);
      CHECK(c.completeness != "C");
      CHECK_FALSE(c.figures.empty());
    }
  }

  TEST_CASE("run mapping: llm-foundry row 350 (MPT-70b on 512 H100, amp_bf16 DEFAULT) is Composer's FSDP")
  {
    ThroughputMapping m = map_one(row_350());
    REQUIRE(m.cases.size() == 1);
    const ThroughputCase& c = m.cases[0];
    const spec::Scenario& s = c.scenario;
    CHECK(s.framework == spec::Framework::FSDP);
    CHECK(s.fsdp.sharding_strategy == spec::FsdpSharding::FULL_SHARD); // fsdp_sharding "FULL_SHARD"
    CHECK_FALSE(s.fsdp.reshard_after_forward.has_value());             // FSDP1 (Composer 2023)
    // "amp_bf16 (MP mode DEFAULT)": autocast bf16; Composer 2023's DEFAULT gathers the fp32 parameters and
    // reduces gradients in bf16.
    CHECK(s.training.precision == spec::Precision::AMP_BF16);
    REQUIRE(s.fsdp.param_dtype.has_value());
    CHECK(*s.fsdp.param_dtype == spec::Dtype::FP32);
    REQUIRE(s.fsdp.reduce_dtype.has_value());
    CHECK(*s.fsdp.reduce_dtype == spec::Dtype::BF16);
    CHECK(s.fsdp.backward_prefetch == spec::BackwardPrefetch::BACKWARD_POST); // Composer's fsdp_config default
    CHECK_FALSE(s.fsdp.cpu_offload);                                          // offload_param "none"
    CHECK(s.fsdp.wrap == "block");
    CHECK(s.training.activation_checkpointing == spec::Checkpointing::FULL); // "yes"
    CHECK(s.training.flash_attention);                                       // "... FlashAttention" (framework)
    CHECK(s.training.optimizer == spec::Optimizer::ADAMW);
    CHECK(s.cluster.node.name == "dgx-h100"); // H100 SXM, 80 GB
    CHECK(s.cluster.nodes == 64);             // 512 GPUs / 8
    CHECK(s.cluster.gpus_per_node == 8);
    CHECK(s.cluster.network.nics_per_node == 8); // "not stated": the node file's 8 x 400 Gb/s
    CHECK(s.cluster.network.nic_bandwidth_Bps == doctest::Approx(50e9));
    CHECK(s.training.seq_len == 2048);
    CHECK(s.training.micro_batch == 8);
    CHECK(s.training.grad_accum == 1);
    CHECK(s.training.global_batch == 4096); // 8 x 1 x 512, the row's global batch
    CHECK(s.model.ffn_hidden == 32768);
    CHECK(s.model.vocab == 50368);
    CHECK(s.model.position == spec::PositionKind::LEARNED);
    CHECK(s.model.max_position == 2048);
    CHECK(s.model.bias);
    CHECK(s.model.tied_embeddings);
    // MPTConfig's attn_pdrop, resid_pdrop and emb_pdrop default to 0: biases, but no dropout.
    REQUIRE(s.model.dropout.has_value());
    CHECK(*s.model.dropout == 0.0);
    // llm-foundry's README table prints NumParams 64862437376 for MPT-70b at sequence 2048.
    CHECK(workload::count_params(s.model) == 64'862'437'376LL);
    // The samples/s cell "251" is a rounded integer: tokens/s (515636) is the primary figure, samples/s next.
    REQUIRE(c.figures.size() >= 3);
    CHECK(c.figures[0].metric == TimeMetric::TOKENS_PER_S_TOTAL);
    CHECK(c.figures[0].value == doctest::Approx(515636));
    CHECK(c.figures[1].metric == TimeMetric::SAMPLES_PER_S);
    CHECK(c.figures[1].value == doctest::Approx(251));
    const TimeFigure* tflops = figure_of(c, TimeMetric::TFLOPS_MODEL); // "no for 'Model TFLOP'/MFU"
    REQUIRE(tflops != nullptr);
    CHECK(tflops->value == doctest::Approx(408.0));
    CHECK(c.info.framework == "FSDP");
    CHECK(c.info.strategy == "FSDP FULL_SHARD");
    CHECK(c.info.stage == 3);
  }

  TEST_CASE("run mapping: llm-foundry SHARD_GRAD_OP and PURE rows")
  {
    // Row 362: MPT-3b, "2-equivalent", SHARD_GRAD_OP, no checkpointing.
    PublishedRow r362 = with(row_350(), {{"row_id", "362"},
                                         {"model", "MPT-3b"},
                                         {"layers", "32"},
                                         {"hidden", "2560"},
                                         {"ffn_hidden", "10240"},
                                         {"heads", "20"},
                                         {"zero_stage", "2-equivalent"},
                                         {"fsdp_sharding", "SHARD_GRAD_OP"},
                                         {"activation_checkpointing", "no"},
                                         {"samples_per_s", "5416"},
                                         {"tokens_per_s_total", "11092218"}});
    ThroughputMapping a = map_one(r362);
    REQUIRE(a.cases.size() == 1);
    CHECK(a.cases[0].scenario.fsdp.sharding_strategy == spec::FsdpSharding::SHARD_GRAD_OP);
    CHECK(a.cases[0].scenario.training.activation_checkpointing == spec::Checkpointing::NONE);
    CHECK(a.cases[0].info.strategy == "FSDP SHARD_GRAD_OP");
    CHECK(a.cases[0].info.stage == 2);
    // "5416" is a whole number too: tokens/s stays the primary figure.
    CHECK(a.cases[0].figures[0].metric == TimeMetric::TOKENS_PER_S_TOTAL);
    // Row 427: "bf16 (MP mode PURE)" = MixedPrecision(param = reduce = bf16), zerosim's bf16; on A100 80 GB with
    // "1600 Gbps RoCE per node" = the DGX A100's 8 x 200 Gb/s, so the node file's NICs stay.
    ThroughputMapping b = map_one(row_427());
    REQUIRE(b.cases.size() == 1);
    const spec::Scenario& s = b.cases[0].scenario;
    CHECK(s.training.precision == spec::Precision::BF16);
    CHECK(s.fsdp.param_dtype.value_or(spec::Dtype::FP32) == spec::Dtype::BF16);
    CHECK(s.fsdp.reduce_dtype.value_or(spec::Dtype::FP32) == spec::Dtype::BF16);
    CHECK(s.cluster.node.name == "dgx-a100-80gb");
    CHECK(s.cluster.network.nics_per_node == 8);
    CHECK(s.cluster.network.nic_bandwidth_Bps == doctest::Approx(25e9));
    CHECK(s.training.grad_accum == 4);
    CHECK(s.training.global_batch == 2048); // 8 x 4 x 64
  }

  TEST_CASE("run mapping: torchtitan row 568 is FSDP2 with bf16 parameters and fp32 reduction")
  {
    ThroughputMapping m = map_one(row_568());
    REQUIRE(m.cases.size() == 1);
    const ThroughputCase& c = m.cases[0];
    const spec::Scenario& s = c.scenario;
    CHECK(s.framework == spec::Framework::FSDP);
    CHECK(s.fsdp.sharding_strategy == spec::FsdpSharding::FULL_SHARD);
    REQUIRE(s.fsdp.reshard_after_forward.has_value()); // "FSDP2 fully_shard (reshard_after_forward=True)"
    CHECK(*s.fsdp.reshard_after_forward);
    CHECK(s.training.precision == spec::Precision::BF16); // "bf16 mixed"
    CHECK(s.fsdp.param_dtype.value_or(spec::Dtype::FP32) == spec::Dtype::BF16);
    REQUIRE(s.fsdp.reduce_dtype.has_value()); // torchtitan's mixed_precision_reduce default "float32"
    CHECK(*s.fsdp.reduce_dtype == spec::Dtype::FP32);
    CHECK(s.fsdp.backward_prefetch == spec::BackwardPrefetch::BACKWARD_PRE); // not Composer: PyTorch's default
    CHECK(s.training.activation_checkpointing == spec::Checkpointing::FULL); // "full"
    CHECK(s.training.flash_attention);                                       // torchtitan's SDPA
    CHECK(s.model.kv_heads == 8);                                            // "64 (8 KV)"
    CHECK(s.model.ffn == spec::FfnKind::SWIGLU);
    CHECK(s.model.vocab == 128256);
    CHECK(s.model.ffn_hidden == 28672);
    CHECK(s.cluster.node.name == "dgx-a100-80gb");
    CHECK(s.cluster.nodes == 8);
    REQUIRE_FALSE(c.figures.empty());
    CHECK(c.figures[0].metric == TimeMetric::TOKENS_PER_S_PER_GPU); // WPS per GPU, 331
    CHECK(c.figures[0].value == doctest::Approx(331));
    const TimeFigure* mfu = figure_of(c, TimeMetric::MFU);
    REQUIRE(mfu != nullptr);
    CHECK(mfu->value == doctest::Approx(0.517));
  }

  TEST_CASE("run mapping: fms-fsdp rows take the launch script's strategy and the row's 800 Gb/s network")
  {
    ThroughputMapping m = map_one(row_595());
    REQUIRE(m.cases.size() == 1);
    const spec::Scenario& s = m.cases[0].scenario;
    // scripts/7b.sh --sharding_strategy=hsdp: shard within a node, replicate across the 12 nodes.
    CHECK(s.fsdp.sharding_strategy == spec::FsdpSharding::HYBRID_SHARD);
    CHECK(m.cases[0].info.strategy == "FSDP HYBRID_SHARD");
    CHECK(m.cases[0].info.assumptions.find("scripts/7b.sh") != std::string::npos);
    // fms-fsdp's bfSixteen policy: param and reduce dtype bf16.
    CHECK(s.training.precision == spec::Precision::BF16);
    CHECK(s.fsdp.reduce_dtype.value_or(spec::Dtype::FP32) == spec::Dtype::BF16);
    // "800 Gbps inter-node" over the DGX H100's 8 NICs: 100 Gb/s = 12.5e9 B/s each (the file has 8 x 400 Gb/s).
    CHECK(s.cluster.node.name == "dgx-h100");
    CHECK(s.cluster.network.nics_per_node == 8);
    CHECK(s.cluster.network.nic_bandwidth_Bps == doctest::Approx(800e9 / 8 / 8));
    CHECK(s.training.grad_accum == 1); // 192 / (2 x 96)
    CHECK(s.training.flash_attention); // "SDPA FlashAttention-2"
    // scripts/34b.sh --sharding_strategy=fsdp.
    ThroughputMapping big = map_one(with(row_595(), {{"row_id", "599"},
                                                     {"model", "Llama 2 34B arch"},
                                                     {"layers", "48"},
                                                     {"hidden", "8192"},
                                                     {"ffn_hidden", "22016"},
                                                     {"heads", "64 (8 KV)"},
                                                     {"activation_checkpointing", "yes"}}));
    REQUIRE(big.cases.size() == 1);
    CHECK(big.cases[0].scenario.fsdp.sharding_strategy == spec::FsdpSharding::FULL_SHARD);
    CHECK(big.cases[0].scenario.training.activation_checkpointing == spec::Checkpointing::FULL);
    // fms-fsdp's selective checkpointing (a fraction of the blocks) is not modelled.
    PublishedRow sel = with(row_595(), {{"row_id", "597"}, {"activation_checkpointing", "selective (every n blocks)"}});
    CHECK(category_of(sel) == "activation checkpointing variant not modelled");
  }

  TEST_CASE("run mapping: the stack of a row (stacks.csv or else today's) and the note that says which")
  {
    auto assumptions = [](const PublishedRow& r) {
      ThroughputMapping m = map_one(r);
      REQUIRE(m.cases.size() == 1);
      return m.cases[0];
    };
    // Not in stacks.csv: today's stack, unstated; row 350's framework names FlashAttention ("MPT models,
    // FlashAttention"), row 318's (the FSDP paper's minGPT) names none.
    const ThroughputCase flash = assumptions(row_350());
    CHECK_FALSE(flash.scenario.software.stated);
    CHECK(flash.scenario.software.attention == spec::AttentionKernel::FLASH2);
    CHECK(flash.info.assumptions.find(
              "stack: not in stacks.csv, today's; attention flash2 (the row names FlashAttention, or torchtitan's "
              "SDPA)") != std::string::npos);
    CHECK(flash.info.config.find(", FlashAttention") != std::string::npos);
    const ThroughputCase eager = assumptions(row_318());
    CHECK(eager.scenario.software.attention == spec::AttentionKernel::EAGER);
    CHECK(eager.info.assumptions.find("stack: not in stacks.csv, today's; attention eager (the row names no "
                                      "FlashAttention)") != std::string::npos);
    CHECK(eager.info.config.find("FlashAttention") == std::string::npos);
    // Listed in stacks.csv (the fields read_published_rows merges): the kernel, torch and compile from there, and
    // the note says whether the source quotes them or they are inferred, whatever the row's own text says.
    const ThroughputCase listed = assumptions(with(row_350(), {{"stack.attention", "eager"},
                                                               {"stack.torch", "1.13"},
                                                               {"stack.compile", "true"},
                                                               {"stack.status", "inferred"},
                                                               {"stack.model_code", "llm_foundry"},
                                                               {"stack.model_code_status", "quoted"}}));
    CHECK(listed.scenario.software.stated);
    CHECK(listed.scenario.software.attention == spec::AttentionKernel::EAGER);
    CHECK(listed.scenario.software.torch == "1.13");
    CHECK(listed.scenario.software.compile);
    CHECK_FALSE(listed.scenario.training.flash_attention); // the shorthand follows the kernel
    CHECK(listed.scenario.software.model_code == spec::ModelCode::LLM_FOUNDRY);
    CHECK(listed.info.assumptions.find("stack: attention eager, torch 1.13, torch.compile (stacks.csv, inferred); "
                                       "model code llm_foundry (quoted)") != std::string::npos);
    CHECK(listed.info.assumptions.find("FlashAttention on") == std::string::npos); // no note of the old rules
    CHECK(listed.info.config.find("FlashAttention") == std::string::npos);
    // `--without stack` is one switch: the priced stack becomes today's default (flash2, SoftwareSpec's) and the
    // workload's attention follows it, whatever stacks.csv said; stacks.csv is read either way.
    spec::Scenario off = listed.scenario;
    CHECK_FALSE(workload::workload_options(off).flash_attention); // the run's eager
    off.mechanisms.stack = false;
    CHECK(off.priced_software().attention == spec::AttentionKernel::FLASH2);
    CHECK(workload::workload_options(off).flash_attention);
  }

  TEST_CASE("run mapping: the FSDP paper's minGPT row 318 and the Llama 2 70B blog row 634")
  {
    ThroughputMapping m = map_one(row_318());
    REQUIRE(m.cases.size() == 1);
    const ThroughputCase& c = m.cases[0];
    const spec::Scenario& s = c.scenario;
    CHECK(s.model.layers == 96); // "96 (assumed)"
    CHECK(s.model.hidden == 12288);
    CHECK(s.model.heads == 96);
    CHECK(s.model.vocab == 50000);
    CHECK_FALSE(s.model.tied_embeddings); // minGPT's separate head
    REQUIRE(s.model.dropout.has_value());
    CHECK(*s.model.dropout == doctest::Approx(0.1)); // minGPT's embd_pdrop = resid_pdrop = attn_pdrop = 0.1
    CHECK_FALSE(s.training.flash_attention);
    CHECK(s.fsdp.sharding_strategy == spec::FsdpSharding::FULL_SHARD);
    CHECK(s.training.precision == spec::Precision::BF16);
    CHECK(s.training.activation_checkpointing == spec::Checkpointing::FULL);
    // "2 Tb/s RoCE" per node over the DGX A100's 8 NICs: 250 Gb/s = 31.25e9 B/s each.
    CHECK(s.cluster.network.nics_per_node == 8);
    CHECK(s.cluster.network.nic_bandwidth_Bps == doctest::Approx(2e12 / 8 / 8));
    REQUIRE(c.figures.size() == 1);
    // tflops_includes_recompute "not stated" (which begins with "no": not read as "no"), checkpointing on: the
    // paper's authors' minGPT benchmark counts the recomputed forward (ptd_benchmark calc_flop, Megatron's
    // 96 B s l h^2 formula; docs/research/validation-stacks.md), so hardware TFLOPs.
    CHECK(c.figures[0].metric == TimeMetric::TFLOPS_HARDWARE);
    CHECK(c.figures[0].value == doctest::Approx(173.5));
    CHECK(*c.figures[0].tolerance == doctest::Approx(2)); // chart-read (+/-2)
    // The same row from another PyTorch source, definition not stated: model TFLOPs assumed (no rule names it).
    PublishedRow other = row_318();
    other["source_id"] = "S99";
    const ThroughputMapping mo = map_one(other);
    REQUIRE(mo.cases.size() == 1);
    CHECK(mo.cases[0].figures[0].metric == TimeMetric::TFLOPS_MODEL);
    // Stated "no": model TFLOPs even for S13's minGPT.
    PublishedRow stated = row_318();
    stated["tflops_includes_recompute"] = "no";
    CHECK(map_one(stated).cases.at(0).figures.at(0).metric == TimeMetric::TFLOPS_MODEL);

    // Row 634: the derived ~97 s/step includes evaluation and checkpoints (an upper bound, says the file).
    PublishedRow r634 = row_634();
    CHECK(category_of(r634) == "figure not comparable");
    ThroughputMapping n = map_one(r634);
    CHECK(n.not_covered[0].reason.find("upper bound") != std::string::npos);
    CHECK(n.not_covered[0].framework == "FSDP");
    // With a step time of its own the row is built on the AWS p4de node its EFA network names.
    ThroughputMapping with_time = map_one(with(r634, {{"step_time_s", "10"}}));
    REQUIRE(with_time.cases.size() == 1);
    CHECK(with_time.cases[0].scenario.cluster.node.name == "aws-p4de-24xlarge");
    CHECK(with_time.cases[0].scenario.cluster.network.nics_per_node == 4); // EFA: no bandwidth in the text
    CHECK(with_time.cases[0].scenario.training.flash_attention);           // "yes (+ flash-attn v2)"
    CHECK(node_name_for("A100", "80", "AWS Elastic Fabric Adapter (EFA)") == "aws-p4de-24xlarge");
    CHECK(node_name_for("A100", "40", "AWS Elastic Fabric Adapter (EFA)") == "aws-p4d-24xlarge");
    CHECK(node_name_for("A100", "80") == "dgx-a100-80gb");
  }

  TEST_CASE("run mapping: DDP rows and the framework of each row")
  {
    // Row 618: Accelerate's DDP run (fsdp_sharding "none (DDP)"), fp16 = torch.autocast. Its only time is per
    // epoch; with a step time of its own it maps to a DDP scenario on the two TITAN RTX.
    CHECK(category_of(row_618()) == "figure not comparable");
    ThroughputMapping m = map_one(with(row_618(), {{"step_time_s", "0.5"}}));
    REQUIRE(m.cases.size() == 1);
    const ThroughputCase& c = m.cases[0];
    CHECK(c.scenario.framework == spec::Framework::DDP);
    CHECK(c.scenario.training.precision == spec::Precision::AMP_FP16);
    CHECK(c.scenario.cluster.node.name == "workstation-2x-titan-rtx");
    CHECK(c.scenario.cluster.total_gpus() == 2);
    CHECK(c.scenario.training.seq_len == 12);
    CHECK(c.info.framework == "DDP");
    CHECK(c.info.strategy == "DDP");
    // framework_label reads the framework, model and sharding columns.
    CHECK(framework_label(row_618()) == "DDP");
    CHECK(framework_label(with(row_618(), {{"framework", "PyTorch DDP+AMP"}, {"fsdp_sharding", ""}})) == "DDP");
    CHECK(framework_label(with(row_211(), {{"model", "1.2B (PyTorch DDP baseline)"}})) == "DDP");
    CHECK(framework_label(row_350()) == "FSDP");
    CHECK(framework_label(row_568()) == "FSDP");
    CHECK(framework_label(with(row_211(), {{"framework", "FairScale sharded_ddp"}})) == "FairScale");
    CHECK(framework_label(row_211()) == "DeepSpeed");
  }

  TEST_CASE("run report: signed error, statistics per group, and every row listed")
  {
    ThroughputMapping m;
    m.cases.push_back(hand_case("1", "S01", 3, TimeMetric::STEP_TIME, 10.0));
    m.cases.push_back(hand_case("2", "S02", 3, TimeMetric::TFLOPS_MODEL, 50.0));
    m.cases.push_back(hand_case("3", "S02", 2, TimeMetric::SAMPLES_PER_S, 4.0));
    m.cases.push_back(hand_case("4", "S02", 2, TimeMetric::CPU_ADAM_TIME, 0.5));
    m.cases.push_back(hand_case("5", "S03", 1, TimeMetric::STEP_TIME, 1.0));
    m.not_covered.push_back({"9", "S09", "m9", "tensor / pipeline parallelism (README trap 6)", "tp 8", "DeepSpeed"});
    std::vector<RowOutcome> out(5);
    out[0].status = RowStatus::DONE;
    out[0].predicted.step_time_s = 11.0; // 11 s against 10 s: 10 % slower
    out[1].status = RowStatus::DONE;
    out[1].predicted.tflops_model = 45.0; // 45 against 50 TFLOPs: 10 % slower
    out[2].status = RowStatus::UNSUPPORTED;
    out[2].message = "stage 2 with something not modelled";
    out[3].status = RowStatus::DONE;
    out[3].predicted.cpu_adam_s = 0.6; // 0.6 s against 0.5 s: 20 % slower, a component timing
    out[4].status = RowStatus::TIMED_OUT;
    out[4].message = "timed out";
    ThroughputReport r = assemble_report(7, m, out);
    REQUIRE(r.comparisons.size() == 3);
    // One direction for every metric (signed_error_pct): + = predicted faster. A time predicted longer and a rate
    // predicted lower are both slower, both negative.
    CHECK(r.comparisons[0].figures[0].error_pct == doctest::Approx(-10.0)); // (10 - 11) / 10
    CHECK(r.comparisons[1].figures[0].error_pct == doctest::Approx(-10.0)); // (45 - 50) / 50
    CHECK(r.comparisons[2].figures[0].error_pct == doctest::Approx(-20.0)); // (0.5 - 0.6) / 0.5
    REQUIRE(r.failures.size() == 1);
    CHECK(r.failures[0].c.info.row_id == "5");
    REQUIRE(r.not_covered.size() == 2);    // row 9 from the mapping, row 3 refused by the engine
    CHECK(r.not_covered[0].row_id == "3"); // in row order
    CHECK(r.not_covered[0].category == "not modelled by the engine yet");
    // Whole-step statistics over rows 1 and 2 (|10|, |-10|): median 10, p90 10; the CPU-Adam row apart.
    auto overall =
        std::find_if(r.stats.begin(), r.stats.end(), [](const core::ErrorStats& s) { return s.group == "overall"; });
    REQUIRE(overall != r.stats.end());
    CHECK(overall->n == 2);
    CHECK(overall->median_abs_pct == doctest::Approx(10.0));
    CHECK(overall->p90_abs_pct == doctest::Approx(10.0));
    CHECK(overall->median_signed_pct == doctest::Approx(-10.0)); // both rows 10 % slower: one direction, no cancelling
    auto s01 =
        std::find_if(r.stats.begin(), r.stats.end(), [](const core::ErrorStats& s) { return s.group == "source S01"; });
    REQUIRE(s01 != r.stats.end());
    CHECK(s01->n == 1);
    // source, framework, stage, offload, GPU kind, GPU kind x framework (the accuracy group), scale band, overall
    REQUIRE(r.component_stats.size() == 8);
    CHECK(r.component_stats.back().median_abs_pct == doctest::Approx(20.0));

    std::string md = render_throughput_markdown(r);
    CHECK(md.find("| 1 | S01 | model 1 | 8 | 3 | none | step time") != std::string::npos);
    CHECK(md.find("| step time | 10 s | 11 s | -10.0 % |") != std::string::npos); // row 1, slower
    CHECK(md.find("+10.0 %") == std::string::npos);                               // no figure is predicted faster
    CHECK(md.find("+ = predicted faster") != std::string::npos);                  // the header states the direction
    CHECK(md.find("### tensor / pipeline parallelism (README trap 6) (1)") != std::string::npos);
    CHECK(md.find("### not modelled by the engine yet (1)") != std::string::npos);
    CHECK(md.find("## Failed in the simulator") != std::string::npos);
    CHECK(md.find("timed out") != std::string::npos);
    // CSV: a header, one record per compared figure (3), failed row (1) and row not covered (2).
    std::string csv = render_throughput_csv(r);
    core::CsvTable t = core::CsvTable::parse(csv, "report.csv");
    CHECK(t.size() == 6);
    std::string head = render_headline(r);
    CHECK(head.find("7 rows in the file; 3 compared (2 whole-step figures, 1 component timings), 1 failed or timed "
                    "out, 2 not covered") != std::string::npos);
  }

  TEST_CASE("run report: medians per framework, and per FSDP strategy beside the ZeRO stages")
  {
    ThroughputMapping m;
    m.cases.push_back(hand_case("1", "S07", 3, TimeMetric::STEP_TIME, 10.0));
    m.cases.push_back(hand_case("2", "S14", 3, TimeMetric::SAMPLES_PER_S, 100.0, "FSDP", "FSDP FULL_SHARD"));
    m.cases.push_back(hand_case("3", "S14", 2, TimeMetric::TOKENS_PER_S_TOTAL, 1000.0, "FSDP", "FSDP SHARD_GRAD_OP"));
    m.cases.push_back(hand_case("4", "S18", 0, TimeMetric::STEP_TIME, 2.0, "DDP", "DDP"));
    m.not_covered.push_back({"5", "S18", "m5", "figure not comparable", "per epoch", "DDP"});
    m.not_covered.push_back({"6", "S18", "m6", "FairScale sharded DDP", "FairScale", "FairScale"});
    std::vector<RowOutcome> out(4);
    out[0].status = RowStatus::DONE;
    out[0].predicted.step_time_s = 11.0; // 11 s against 10 s: 10 % slower, signed -10 %
    out[1].status = RowStatus::DONE;
    out[1].predicted.samples_per_s = 80.0; // 80 against 100: 20 % slower, signed -20 %
    out[2].status = RowStatus::DONE;
    out[2].predicted.tokens_per_s = 1300.0; // 1300 against 1000: 30 % faster, signed +30 %
    out[3].status = RowStatus::FAILED;
    out[3].message = "a bug";
    ThroughputReport r = assemble_report(6, m, out);
    REQUIRE(r.frameworks.size() == 4); // DeepSpeed, FSDP, DDP always, then FairScale
    const FrameworkSummary& ds = r.frameworks[0];
    const FrameworkSummary& fsdp = r.frameworks[1];
    const FrameworkSummary& ddp = r.frameworks[2];
    CHECK(ds.framework == "DeepSpeed");
    CHECK(ds.rows == 1);
    REQUIRE(ds.whole_step.has_value());
    CHECK(ds.whole_step->median_abs_pct == doctest::Approx(10.0));
    CHECK(ds.whole_step->median_signed_pct == doctest::Approx(-10.0)); // the step time predicted 10 % slower
    CHECK(fsdp.framework == "FSDP");
    CHECK(fsdp.rows == 2);
    CHECK(fsdp.compared == 2);
    REQUIRE(fsdp.whole_step.has_value());
    // |errors| 20 and 30: median 25; p90 by linear interpolation 20 + 0.9 x (30 - 20) = 29.
    CHECK(fsdp.whole_step->median_abs_pct == doctest::Approx(25.0));
    CHECK(fsdp.whole_step->p90_abs_pct == doctest::Approx(29.0));
    CHECK(ddp.framework == "DDP");
    CHECK(ddp.rows == 2);
    CHECK(ddp.compared == 0);
    CHECK(ddp.failed == 1);
    CHECK(ddp.not_covered == 1);
    CHECK_FALSE(ddp.whole_step.has_value());
    CHECK(r.frameworks[3].framework == "FairScale");
    CHECK(r.frameworks[3].not_covered == 1);
    auto group = [&](const std::string& g) {
      auto it = std::find_if(r.stats.begin(), r.stats.end(), [&](const core::ErrorStats& s) { return s.group == g; });
      REQUIRE_MESSAGE(it != r.stats.end(), g);
      return *it;
    };
    CHECK(group("framework FSDP").n == 2);
    CHECK(group("framework FSDP").median_abs_pct == doctest::Approx(25.0));
    CHECK(group("framework DeepSpeed").median_abs_pct == doctest::Approx(10.0));
    CHECK(group("FSDP FULL_SHARD").median_abs_pct == doctest::Approx(20.0));
    CHECK(group("FSDP SHARD_GRAD_OP").median_abs_pct == doctest::Approx(30.0));
    CHECK(group("stage 3").n == 1); // the DeepSpeed row only: FSDP rows are grouped by strategy
    std::string md = render_throughput_markdown(r);
    // Median signed: of -20 (samples/s, slower) and +30 (tokens/s, faster), +5.
    CHECK(md.find("| FSDP | 2 | 2 | 0 | 0 | 0 | 25.0 % | 29.0 % | +5.0 % |") != std::string::npos);
    CHECK(md.find("| DDP | 2 | 0 | 0 | 1 | 1 | none compared | |") != std::string::npos);
    CHECK(md.find("| 2 | S14 | model 2 | 8 | FSDP FULL_SHARD | none | samples/s") != std::string::npos);
    std::string head = render_headline(r);
    CHECK(head.find("FSDP          2 rows:    2 compared,  0 component timings,   0 failed,    0 not covered; "
                    "median |err| 25.0 %") != std::string::npos);
    CHECK(head.find("DDP           2 rows:    0 compared,  0 component timings,   1 failed,    1 not covered; no "
                    "whole-step figure") != std::string::npos);
  }

  TEST_CASE("run report: leave-one-source-out, in-sample and priors-only sections in that order, per-row errors of "
            "each, and a cause line for every row above 30 %")
  {
    ThroughputMapping m;
    m.cases.push_back(hand_case("1", "S01", 3, TimeMetric::STEP_TIME, 10.0));
    m.cases.push_back(hand_case("2", "S02", 3, TimeMetric::STEP_TIME, 10.0));
    m.cases.push_back(hand_case("3", "S02", 3, TimeMetric::STEP_TIME, 10.0));
    m.cases[2].scenario.cluster.nodes = 100; // the "more than 64 nodes" band
    std::vector<RowOutcome> out(3);
    for (auto& o : out)
      o.status = RowStatus::DONE;
    out[0].predicted.step_time_s = 11.0; // priors -10 %
    out[1].predicted.step_time_s = 14.0; // priors -40 %
    out[2].predicted.step_time_s = 9.0;  // priors +10 %
    ThroughputReport r = assemble_report(3, m, out);
    CalibratedErrors k;
    k.in_sample_pct = {{"1", -2.0}, {"2", -5.0}, {"3", 4.0}};
    k.loso_pct = {{"1", -20.0}, {"2", -35.0}, {"3", 6.0}};
    FittedParameter p;
    p.name = "gemm.A100";
    p.value = 0.9;
    p.fold_min = 0.85;
    p.fold_max = 0.95;
    p.sources = 2;
    k.params.push_back(p);
    k.command = "zerosim calibrate --runs x.csv --jobs 2";
    r.calibrated = k;
    r.causes["2"] = {"data", "the network is not stated", "\"not stated\" (notes)"};

    // The medians by hand. Leave-one-source-out |errors| 20, 35, 6: median 20; per source S01 20, S02 median of 35
    // and 6 = 20.5; the median of the two source medians 20.25. In-sample 2, 5, 4: median 4.
    const auto loso = [&](const ThroughputComparison& c) -> std::optional<double> {
      return k.loso_pct.at(c.c.info.row_id);
    };
    REQUIRE(median_of_source_medians(r, loso).has_value());
    CHECK(*median_of_source_medians(r, loso) == doctest::Approx(20.25));
    std::vector<core::ErrorStats> st = whole_step_stats(r, loso);
    CHECK(st.back().group == "overall");
    CHECK(st.back().median_abs_pct == doctest::Approx(20.0));
    auto band = std::find_if(st.begin(), st.end(),
                             [](const core::ErrorStats& e) { return e.group == "scale more than 64 nodes"; });
    REQUIRE(band != st.end());
    CHECK(band->n == 1);
    CHECK(scale_band(m.cases[0]) == "1 node");

    const std::string md = render_throughput_markdown(r);
    const std::size_t a = md.find("\n## Leave-one-source-out\n"), b = md.find("\n## In-sample\n"),
                      c = md.find("\n## Priors only\n");
    REQUIRE(a != std::string::npos);
    REQUIRE(b != std::string::npos);
    REQUIRE(c != std::string::npos);
    CHECK(a < b);
    CHECK(b < c);
    CHECK(md.find("| overall | 3 | 20.0 % |") > a); // the leave-one-source-out table comes first
    CHECK(md.find("Median of the per-source medians of |error|: 20.2 %.") != std::string::npos); // 20.25, printed %.1f
    CHECK(md.find("| gemm.A100 | 0.900 | 0.850 | 0.950 | 2 |  |") != std::string::npos);
    CHECK(md.find("| step time | 10 s | 14 s | -40.0 % | -5.0 % | -35.0 % |") != std::string::npos); // row 2
    // Rows above 30 % anywhere: row 2 only (priors -40 %, leave-one-source-out -35 %), with its cause.
    CHECK(md.find("1 rows, 1 with a cause.") != std::string::npos);
    CHECK(md.find("- row 2 (S02; priors -40.0 %, in-sample -5.0 %, leave-one-source-out -35.0 %): data: the network "
                  "is not stated Evidence: \"not stated\" (notes)") != std::string::npos);

    // The terminal headline gives the two calibrated overall lines; p90 of |20|, |35|, |6| by linear interpolation:
    // 20 + 0.8 x (35 - 20) = 32; median signed of -20, -35, +6: -20.
    CHECK(render_headline(r).find("whole-step, leave-one-source-out (1 fitted parameters): median |err| 20.0 %, p90 "
                                  "32.0 %, median signed -20.0 %, median of per-source medians 20.2 %") !=
          std::string::npos);

    // A fit that did not run says why in both calibrated sections; the priors section stays.
    r.calibrated = CalibratedErrors{};
    r.calibrated->not_run = "the fit's guards refused these rows: too few";
    const std::string md2 = render_throughput_markdown(r);
    CHECK(md2.find("## Leave-one-source-out\n\nNot run: the fit's guards refused these rows: too few.") !=
          std::string::npos);
    CHECK(md2.find("## In-sample\n\nNot run: the fit's guards refused these rows: too few.") != std::string::npos);
    CHECK(md2.find("- row 2 (S02; priors -40.0 %): data:") != std::string::npos);
  }

  TEST_CASE("run report: causes.csv is read beside the validation file, and its errors name the file and line")
  {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("zerosim-causes-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string csv = (dir / "published.csv").string();
    std::vector<PublishedRow> rows = {{{"row_id", "3"}, {"source_id", "S01"}},
                                      {{"row_id", "4"}, {"source_id", "S01"}},
                                      {{"row_id", "7"}, {"source_id", "S02"}}};
    CHECK(read_row_causes(csv, rows).empty()); // no causes.csv: no causes
    auto write = [&](const std::string& body) {
      std::ofstream f(dir / "causes.csv", std::ios::binary);
      f << "rows,source_id,kind,cause,evidence\n" << body;
    };
    write("3-4,S01,mechanism,\"not modelled, a cause\",docs/deepspeed-schedule.md\n7,S02,data,network not "
          "stated,\"q\"\n");
    std::map<std::string, RowCause> c = read_row_causes(csv, rows);
    REQUIRE(c.size() == 3);
    CHECK(c["4"].kind == "mechanism");
    CHECK(c["4"].cause == "not modelled, a cause");
    CHECK(c["7"].evidence == "q");
    const std::string at = (dir / "causes.csv").string();
    write("3,S01,guess,x,y\n");
    CHECK_THROWS_WITH_AS(read_row_causes(csv, rows),
                         (at + ":2: kind: expected mechanism, data or unknown, found \"guess\"").c_str(),
                         core::InputError);
    write("7,S01,data,x,y\n");
    CHECK_THROWS_WITH_AS(read_row_causes(csv, rows), (at + ":2: source_id: row 7 is S02's, found \"S01\"").c_str(),
                         core::InputError);
    write("3,S01,data,x,y\n3-4,S01,data,x,y\n");
    CHECK_THROWS_WITH_AS(read_row_causes(csv, rows), (at + ":3: row 3 is already listed on line 2").c_str(),
                         core::InputError);
    write("9,S01,data,x,y\n");
    CHECK_THROWS_WITH_AS(read_row_causes(csv, rows), (at + ":2: row 9 is not in " + csv).c_str(), core::InputError);
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("run report: predicted values follow the figure's definition")
  {
    PredictedFigures p;
    p.step_time_s = 2;
    p.samples_per_s = 32;
    p.tokens_per_s = 32 * 1024;
    p.tflops_model = 100;
    p.tflops_hardware = 133;
    p.gpus = 16;
    CHECK(predicted_value(TimeMetric::STEP_TIME, p) == 2);
    CHECK(predicted_value(TimeMetric::DERIVED_STEP_TIME, p) == 2);
    CHECK(predicted_value(TimeMetric::TOKENS_PER_S_PER_GPU, p) == doctest::Approx(32.0 * 1024 / 16));
    CHECK(predicted_value(TimeMetric::TFLOPS_MODEL, p) == 100);
    CHECK(predicted_value(TimeMetric::TFLOPS_HARDWARE, p) == 133);
  }

  TEST_CASE("run report: the signed error is + for a prediction faster than measured whatever the metric")
  {
    // Times: lower is faster, so the relative error is negated; rates: higher is faster. |error| is
    // |predicted - measured| / measured either way (the hand values: 9 against 10, 11 against 10).
    for (TimeMetric m :
         {TimeMetric::STEP_TIME, TimeMetric::DERIVED_STEP_TIME, TimeMetric::BACKWARD_TIME, TimeMetric::CPU_ADAM_TIME}) {
      CHECK(is_time(m));
      CHECK(signed_error_pct(m, 9, 10) == doctest::Approx(10.0));   // 9 s against 10 s: faster
      CHECK(signed_error_pct(m, 11, 10) == doctest::Approx(-10.0)); // 11 s against 10 s: slower
    }
    for (TimeMetric m : {TimeMetric::SAMPLES_PER_S, TimeMetric::TOKENS_PER_S_TOTAL, TimeMetric::TOKENS_PER_S_PER_GPU,
                         TimeMetric::TFLOPS_MODEL, TimeMetric::TFLOPS_HARDWARE, TimeMetric::MFU, TimeMetric::HFU}) {
      CHECK_FALSE(is_time(m));
      CHECK(signed_error_pct(m, 11, 10) == doctest::Approx(10.0)); // 11 against 10 per second: faster
      CHECK(signed_error_pct(m, 9, 10) == doctest::Approx(-10.0)); // 9 against 10 per second: slower
    }
  }

  TEST_CASE("run workers: results in case order, errors, crashes and time limits reported per row")
  {
    std::vector<ThroughputCase> cases;
    for (const char* id : {"ok1", "unsupported", "abort", "slow", "throws", "ok2"})
      cases.push_back(hand_case(id, "S00", 0, TimeMetric::STEP_TIME, 1.0));
    Predictor fake = [](const ThroughputCase& c) {
      const std::string& id = c.info.row_id;
      if (id == "unsupported")
        throw core::UnsupportedError("something not modelled");
      if (id == "abort")
        std::abort();
      if (id == "slow")
        std::this_thread::sleep_for(std::chrono::seconds(5));
      if (id == "throws")
        throw std::runtime_error("a bug");
      PredictedFigures p;
      p.step_time_s = id == "ok1" ? 1.5 : 2.5;
      p.warnings = {"a warning\nover two lines"};
      return p;
    };
    RunOptions o;
    o.jobs = 2;
    o.row_time_limit_s = 0.5;
    std::vector<std::size_t> order;
    o.on_done = [&](std::size_t i, const RowOutcome&) { order.push_back(i); };
    std::vector<RowOutcome> r = run_cases(cases, fake, o);
    REQUIRE(r.size() == 6);
    CHECK(order.size() == 6);
    CHECK(r[0].status == RowStatus::DONE);
    CHECK(r[0].predicted.step_time_s == 1.5);
    REQUIRE(r[0].predicted.warnings.size() == 1);
    CHECK(r[0].predicted.warnings[0] == "a warning over two lines");
    CHECK(r[1].status == RowStatus::UNSUPPORTED);
    CHECK(r[1].message.find("something not modelled") != std::string::npos);
    CHECK(r[2].status == RowStatus::FAILED);
    CHECK(r[2].message.find("SIGABRT") != std::string::npos);
    CHECK(r[3].status == RowStatus::TIMED_OUT);
    CHECK(r[3].wall_s < 4.0); // killed at the limit, not after the 5 s sleep
    CHECK(r[4].status == RowStatus::FAILED);
    CHECK(r[4].message.find("a bug") != std::string::npos);
    CHECK(r[5].status == RowStatus::DONE);
    CHECK(r[5].predicted.step_time_s == 2.5);
  }

  TEST_CASE(
      "ablation: each mechanism on the rows it acts on and both runs compared; the defaults named; no rows said so")
  {
    // Four rows of the shipped file, in a folder without stacks.csv (so no row has a stated stack): 211 (DeepSpeed
    // ZeRO-3 on 64 V100, with an allocated and a reserved memory figure), 213 (ZeRO-2 with optimizer offload, one
    // V100), 217 (ZeRO-0 on 16 GPUs), 350 (Composer FSDP on 512 H100).
    const std::string src = std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv";
    std::ifstream in(src, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "missing " << src);
    std::ostringstream text;
    text << in.rdbuf();
    const core::CsvTable table = core::CsvTable::parse(text.str(), src);
    std::string csv = core::csv_record(table.header());
    for (std::size_t i = 0; i < table.size(); ++i)
      for (const char* id : {"211", "213", "217", "350"})
        if (table.get(i, "row_id") == id)
          csv += core::csv_record(table.row(i));
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("zerosim-ablation-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
      std::ofstream f(dir / "published.csv", std::ios::binary);
      f << csv;
    }
    std::ostringstream out;
    CHECK(validate_ablation_command((dir / "published.csv").string(), dir.string(), out, 2, 120) == 0);
    std::ifstream md_in(dir / "ablation.md", std::ios::binary);
    std::ostringstream md_text;
    md_text << md_in.rdbuf();
    const std::string md = md_text.str();
    std::filesystem::remove_all(dir);
    INFO(md);
    // The column says nothing of --without (leaf_fetch is switched on, not off).
    CHECK(md.find("| mechanism | rows it acts on | n |") != std::string::npos);
    CHECK(md.find("(`--without`)") == std::string::npos);
    // Rows each acts on (all four compared with every switch): no stack stated here; multi-GPU 211, 217, 350;
    // ZeRO-3 211; every row for host; FSDP 350 (the DeepSpeed rows are fp16, not torch AMP).
    CHECK(md.find("| stack | every row with a stack in stacks.csv | 0 | none | none | | | |") != std::string::npos);
    CHECK(md.find("| protocols | rows on more than one GPU | 3 |") != std::string::npos);
    CHECK(md.find("| leaf_fetch (off by default) | DeepSpeed ZeRO-3 rows | 1 |") != std::string::npos);
    CHECK(md.find("| host | every row | 4 |") != std::string::npos);
    CHECK(md.find("| copies | FSDP rows and rows in torch AMP | 1 |") != std::string::npos);
    // No node file of these rows sets gpu.power (only topologies/grand-teton-h100-96gb.yaml does): the clock acts
    // on none of them, and the line says so rather than "every row".
    CHECK(md.find("| clock | rows on a GPU under a power cap (sustained clock below 1) | 0 | none | none |") !=
          std::string::npos);
    // The allocator: row 211's reserved figure alone (the other figures are allocated or nvidia-smi bounds).
    CHECK(md.find("| allocator | rows with a measured reserved figure (memory validation) | 1 |") != std::string::npos);
    CHECK(md.find("The defaults (every mechanism on but leaf_fetch), all 4 whole-step rows") != std::string::npos);
    CHECK(md.find("Every mechanism on") == std::string::npos);
  }

  TEST_CASE("run workers: the engine pipeline on autotuning row 217 gives rates that agree with its step time")
  {
    std::vector<PublishedRow> rows = shipped_rows();
    ThroughputMapping m = map_throughput_rows(
        rows, node_loader_near(std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv"));
    auto it =
        std::find_if(m.cases.begin(), m.cases.end(), [](const ThroughputCase& c) { return c.info.row_id == "217"; });
    REQUIRE(it != m.cases.end());
    RunOptions o;
    o.jobs = 1;
    o.row_time_limit_s = 120;
    std::vector<RowOutcome> r = run_cases({*it}, predict_case, o);
    REQUIRE(r.size() == 1);
    REQUIRE_MESSAGE(r[0].status == RowStatus::DONE, r[0].message);
    const PredictedFigures& p = r[0].predicted;
    const spec::TrainingSpec& t = it->scenario.training;
    CHECK(p.gpus == 16);
    CHECK(p.step_time_s > 0);
    // samples/s = global batch / step time; tokens/s = samples/s x sequence (docs/scenario-format.md "Results").
    CHECK(p.samples_per_s == doctest::Approx(static_cast<double>(t.global_batch) / p.step_time_s).epsilon(1e-9));
    CHECK(p.tokens_per_s == doctest::Approx(p.samples_per_s * t.seq_len).epsilon(1e-9));
    // No activation checkpointing: model and hardware TFLOPs are the same.
    CHECK(p.tflops_hardware == doctest::Approx(p.tflops_model).epsilon(1e-9));
    CHECK(p.backward_s > 0);
    CHECK(p.backward_s < p.step_time_s);
    CHECK(p.cpu_adam_s == 0); // no CPU offload
  }
}
