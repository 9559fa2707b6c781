// The throughput validation (`zerosim validate --run`): rows to scenarios and figures, the forked runner,
// the statistics and the report. Only the last case runs the engine (in a worker process, as the command does).
#include "validation/run_validation.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

using namespace zerosim;
using namespace zerosim::validation;

namespace {

/// Stand-ins for the node files, so that the mapping is tested alone: topologies/dgx-2.yaml (16 x V100 32 GiB,
/// 1.5 TiB host, 8 x 100 Gb/s: NVIDIA DGX-2 datasheet) and topologies/azure-ndm-a100-v4.yaml (8 x A100 80 GiB,
/// 1900 GiB host of which 340 GB reserved, 8 x 200 Gb/s: Microsoft Learn NDm A100 v4-series).
NodeLoader fake_nodes()
{
  return [](const std::string& name) {
    spec::NodeSpec n;
    n.name = name;
    if (name == "azure-ndm-a100-v4") {
      n.gpu.model = "A100-SXM4-80GB";
      n.gpu.memory_bytes = 80LL << 30;
      n.gpus = 8;
      n.cpu.memory_bytes = 1900LL << 30;
      n.cpu.reserved_bytes = 340'000'000'000LL;
      n.nics.count = 8;
      n.nics.bandwidth_Bps = 25e9;
    } else {
      n.gpu.model = "V100-SXM3-32GB";
      n.gpu.memory_bytes = 32LL << 30;
      n.gpus = 16;
      n.cpu.memory_bytes = 1536LL << 30;
      n.nics.count = 8;
      n.nics.bandwidth_Bps = 12.5e9;
    }
    return n;
  };
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

/// published.csv row 51 (ZeRO-Offload Figure 8: the 1B model, 20 layers x 2048, on one V100).
PublishedRow row_51()
{
  PublishedRow r = row_56();
  r["row_id"] = "51";
  r["model"] = "GPT-2-like 1B";
  r["params_B"] = "1";
  r["layers"] = "20";
  r["hidden"] = "2048";
  r["micro_batch"] = "32";
  r["grad_accum"] = "16.0";
  r["tflops_per_gpu"] = "36.0";
  return r;
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
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing " << path);
  std::ostringstream ss;
  ss << in.rdbuf();
  CsvTable t = CsvTable::parse(ss.str(), path);
  std::vector<PublishedRow> rows;
  for (std::size_t i = 0; i < t.size(); ++i)
    rows.push_back(t.record(i));
  return rows;
}

/// A case with one figure, for the report and runner tests.
ThroughputCase hand_case(const std::string& id, const std::string& source, int stage, TimeMetric metric,
                         double measured)
{
  ThroughputCase c;
  c.info.row_id = id;
  c.info.source_id = source;
  c.info.model = "model " + id;
  c.info.stage = stage;
  c.info.offload = "none";
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

  TEST_CASE("run mapping: row 211's step time is the primary figure; samples/s and TFLOPs follow")
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

  TEST_CASE("run mapping: rows outside the modelled set are not covered, each in its group")
  {
    PublishedRow fsdp = row_211();
    fsdp["zero_stage"] = "3-equivalent";
    fsdp["fsdp_sharding"] = "FULL_SHARD";
    CHECK(category_of(fsdp) == "PyTorch FSDP / DDP (issue 4)");
    PublishedRow tp = row_211();
    tp["tp"] = "8";
    CHECK(category_of(tp) == "tensor / pipeline parallelism (README trap 6)");
    PublishedRow mp = row_211(); // ZeRO paper rows 18-26: "<=16 (MP within node; ...)"
    mp["tp"] = "<=16 (MP within node; exact per-model MP in appendix, not read)";
    CHECK(category_of(mp) == "tensor / pipeline parallelism (README trap 6)");
    PublishedRow nvme = row_135(); // ZeRO-Infinity rows 96-99
    nvme["offload_optimizer"] = "nvme";
    nvme["offload_param"] = "cpu";
    CHECK(category_of(nvme) == "NVMe or parameter offload (a later issue)");
    PublishedRow param = row_135(); // ZeRO-3 Offload blog rows 120-131
    param["offload_param"] = "cpu (ZeRO-3 Offload)";
    CHECK(category_of(param) == "NVMe or parameter offload (a later issue)");
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
    // Every row of the Azure blog (S07: ZeRO-3 with CPU optimizer offload, no TP/PP, completeness B, one
    // TFLOPs figure each) is simulated; no FSDP, TP/PP or NVMe row is.
    for (const auto& r : rows)
      if (r.at("source_id") == "S07" && r.at("completeness") != "C")
        CHECK_MESSAGE(std::any_of(m.cases.begin(), m.cases.end(),
                                  [&](const ThroughputCase& c) { return c.info.row_id == r.at("row_id"); }),
                      "row " << r.at("row_id"));
    for (const auto& c : m.cases) {
      CHECK(c.scenario.framework == spec::Framework::DEEPSPEED);
      CHECK(c.scenario.deepspeed.zero.offload_param.device == spec::OffloadDevice::NONE);
      CHECK(c.scenario.deepspeed.zero.offload_optimizer.device != spec::OffloadDevice::NVME);
      CHECK(c.completeness != "C");
      CHECK_FALSE(c.figures.empty());
    }
  }

  TEST_CASE("run report: signed error, statistics per group, and every row listed")
  {
    ThroughputMapping m;
    m.cases.push_back(hand_case("1", "S01", 3, TimeMetric::STEP_TIME, 10.0));
    m.cases.push_back(hand_case("2", "S02", 3, TimeMetric::TFLOPS_MODEL, 50.0));
    m.cases.push_back(hand_case("3", "S02", 2, TimeMetric::SAMPLES_PER_S, 4.0));
    m.cases.push_back(hand_case("4", "S02", 2, TimeMetric::CPU_ADAM_TIME, 0.5));
    m.cases.push_back(hand_case("5", "S03", 1, TimeMetric::STEP_TIME, 1.0));
    m.not_covered.push_back({"9", "S09", "m9", "tensor / pipeline parallelism (README trap 6)", "tp 8"});
    std::vector<RowOutcome> out(5);
    out[0].status = RowStatus::DONE;
    out[0].predicted.step_time_s = 11.0; // +10 %
    out[1].status = RowStatus::DONE;
    out[1].predicted.tflops_model = 45.0; // -10 %
    out[2].status = RowStatus::UNSUPPORTED;
    out[2].message = "stage 2 with something not modelled";
    out[3].status = RowStatus::DONE;
    out[3].predicted.cpu_adam_s = 0.6; // +20 %, a component timing
    out[4].status = RowStatus::TIMED_OUT;
    out[4].message = "timed out";
    ThroughputReport r = assemble_report(7, m, out);
    REQUIRE(r.comparisons.size() == 3);
    CHECK(r.comparisons[0].figures[0].error_pct == doctest::Approx(10.0));
    CHECK(r.comparisons[1].figures[0].error_pct == doctest::Approx(-10.0));
    CHECK(r.comparisons[2].figures[0].error_pct == doctest::Approx(20.0));
    REQUIRE(r.failures.size() == 1);
    CHECK(r.failures[0].c.info.row_id == "5");
    REQUIRE(r.not_covered.size() == 2);    // row 9 from the mapping, row 3 refused by the engine
    CHECK(r.not_covered[0].row_id == "3"); // in row order
    CHECK(r.not_covered[0].category == "not modelled by the engine yet");
    // Whole-step statistics over rows 1 and 2 (|10|, |-10|): median 10, p90 10; the CPU-Adam row apart.
    auto overall =
        std::find_if(r.stats.begin(), r.stats.end(), [](const ErrorStats& s) { return s.group == "overall"; });
    REQUIRE(overall != r.stats.end());
    CHECK(overall->n == 2);
    CHECK(overall->median_abs_pct == doctest::Approx(10.0));
    CHECK(overall->p90_abs_pct == doctest::Approx(10.0));
    auto s01 =
        std::find_if(r.stats.begin(), r.stats.end(), [](const ErrorStats& s) { return s.group == "source S01"; });
    REQUIRE(s01 != r.stats.end());
    CHECK(s01->n == 1);
    REQUIRE(r.component_stats.size() == 4); // source, stage, offload, overall
    CHECK(r.component_stats.back().median_abs_pct == doctest::Approx(20.0));

    std::string md = render_throughput_markdown(r);
    CHECK(md.find("| 1 | S01 | model 1 | 8 | 3 | none | step time") != std::string::npos);
    CHECK(md.find("+10.0 %") != std::string::npos);
    CHECK(md.find("-10.0 %") != std::string::npos);
    CHECK(md.find("### tensor / pipeline parallelism (README trap 6) (1)") != std::string::npos);
    CHECK(md.find("### not modelled by the engine yet (1)") != std::string::npos);
    CHECK(md.find("## Failed in the simulator") != std::string::npos);
    CHECK(md.find("timed out") != std::string::npos);
    // CSV: a header, one record per compared figure (3), failed row (1) and row not covered (2).
    std::string csv = render_throughput_csv(r);
    CsvTable t = CsvTable::parse(csv, "report.csv");
    CHECK(t.size() == 6);
    std::string head = render_headline(r);
    CHECK(head.find("7 rows in the file; 3 compared (2 whole-step figures, 1 component timings), 1 failed or timed "
                    "out, 2 not covered") != std::string::npos);
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

  TEST_CASE("run workers: results in case order; errors, crashes and time limits reported per row")
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
    // samples/s = global batch / step time; tokens/s = samples/s x sequence (scenario-format.md "Results").
    CHECK(p.samples_per_s == doctest::Approx(static_cast<double>(t.global_batch) / p.step_time_s).epsilon(1e-9));
    CHECK(p.tokens_per_s == doctest::Approx(p.samples_per_s * t.seq_len).epsilon(1e-9));
    // No activation checkpointing: model and hardware TFLOPs are the same.
    CHECK(p.tflops_hardware == doctest::Approx(p.tflops_model).epsilon(1e-9));
    CHECK(p.backward_s > 0);
    CHECK(p.backward_s < p.step_time_s);
    CHECK(p.cpu_adam_s == 0); // no CPU offload
  }
}
