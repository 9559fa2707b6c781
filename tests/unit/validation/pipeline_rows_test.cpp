// Pipeline rows of published.csv as scenarios (docs/validation.md, "Pipeline rows"): S12's BigScience runs mapped
// through DeepSpeed's pipeline engine with their source's partition and ZeRO stage, and the pipeline rows left out
// with their reasons. Every expected value is read off the CSV row (results/validation/published.csv) or the source's
// data (results/validation/sources/S12.yaml, S01.yaml), as each check says.
#include "validation/run_validation.hpp"

#include "config/scenario_loader.hpp"
#include "core/stats.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

using namespace zerosim;
using namespace zerosim::validation;

namespace {

const std::string CSV = std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv";

const std::vector<PublishedRow>& shipped()
{
  static const std::vector<PublishedRow> rows = read_published_rows(CSV);
  return rows;
}

const PublishedRow& row(const std::string& id)
{
  const auto& rows = shipped();
  auto it = std::find_if(rows.begin(), rows.end(), [&](const PublishedRow& r) { return r.at("row_id") == id; });
  REQUIRE_MESSAGE(it != rows.end(), "row " << id);
  return *it;
}

ThroughputMapping mapped(const std::string& id)
{
  ThroughputMapping m;
  map_throughput_row(row(id), shipped(), node_loader_near(CSV), m);
  return m;
}

const ThroughputCase& case_of(const ThroughputMapping& m)
{
  REQUIRE(m.not_covered.empty());
  REQUIRE(m.cases.size() == 1);
  return m.cases[0];
}

const ThroughputNotCovered& left_out(const ThroughputMapping& m)
{
  REQUIRE(m.cases.empty());
  REQUIRE(m.not_covered.size() == 1);
  return m.not_covered[0];
}

bool has(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_SUITE("validation")
{
  TEST_CASE("pipeline rows: BLOOM as trained (S12 row 255) is scenarios/bloom-176b-3d-384xa100.yaml")
  {
    const ThroughputMapping m = mapped("255");
    const spec::Scenario& s = case_of(m).scenario;
    // Row 255: 384 A100 80 GB, tp 4, pp 12, dp 8, micro-batch 2, global batch 2048, bf16, "ZeRO-1 via BF16_Optimizer".
    CHECK(s.world() == 384);
    CHECK(s.tp() == 4);
    CHECK(s.pp() == 12);
    CHECK(s.dp() == 8); // 384 / (4 x 12), the row's dp
    CHECK(s.training.micro_batch == 2);
    // DeepSpeed's PipelineEngine runs global / (micro x dp) = 2048 / (2 x 8) = 128 micro-batches a step; the row's
    // grad_accum cell (16) disagrees with its own global batch and is not used.
    CHECK(s.training.grad_accum == 128);
    CHECK(s.training.global_batch == 2048);
    CHECK(s.training.pipeline.schedule == spec::PipelineSchedule::ONE_F_ONE_B);
    CHECK(s.training.pipeline.partition == "type:transformer|embedding"); // S12.yaml: the slurm script's line 103
    CHECK(s.deepspeed.zero.stage == 0);                                   // S12.yaml: ZERO_STAGE=0, BF16_Optimizer
    CHECK(s.training.precision == spec::Precision::BF16);
    CHECK(s.model.vocab == 250880); // the row's 250680 padded (S12.yaml cell_readings)
    CHECK(s.model.position == spec::PositionKind::ALIBI);
    // The shipped scenario of the same run: the same parallel layout, batch, split, optimizer and model.
    const spec::Scenario bloom =
        config::load_scenario(std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/bloom-176b-3d-384xa100.yaml");
    CHECK(s.cluster.node.name == bloom.cluster.node.name);
    CHECK(s.cluster.nodes == bloom.cluster.nodes);
    CHECK(s.tp() == bloom.tp());
    CHECK(s.pp() == bloom.pp());
    CHECK(s.training.grad_accum == bloom.training.grad_accum);
    CHECK(s.training.pipeline.partition == bloom.training.pipeline.partition);
    CHECK(s.training.pipeline.schedule == bloom.training.pipeline.schedule);
    CHECK(s.deepspeed.zero.stage == bloom.deepspeed.zero.stage);
    CHECK(s.deepspeed_version == bloom.deepspeed_version);
    CHECK(s.training.activation_checkpointing == bloom.training.activation_checkpointing);
    CHECK(s.training.flash_attention == bloom.training.flash_attention);
    for (auto [a, b] : {std::pair{s.model.layers, bloom.model.layers}, std::pair{s.model.hidden, bloom.model.hidden},
                        std::pair{s.model.heads, bloom.model.heads}, std::pair{s.model.vocab, bloom.model.vocab},
                        std::pair{s.model.ffn_hidden, bloom.model.ffn_hidden}})
      CHECK(a == b);
    CHECK(s.model.tied_embeddings == bloom.model.tied_embeddings);
    CHECK(s.model.position == bloom.model.position);
  }

  TEST_CASE("pipeline rows: the prequel topology rows take their layers from the source and the default partition")
  {
    // Row 270: 320 GPUs, tp 8, pp 10, dp 4, micro-batch 1, global batch 2048, hidden 14400, 'BLOOM-prequel 200B', layers
    // "varied to fit PP (not listed)": S12.yaml's model_sizes give 200B at hidden 14400 as 80 layers.
    const ThroughputMapping m270 = mapped("270");
    const ThroughputCase& c270 = case_of(m270);
    const spec::Scenario& s = c270.scenario;
    CHECK(s.model.layers == 80);
    CHECK(s.model.hidden == 14400);
    CHECK(s.model.heads == 64);
    CHECK(s.tp() == 8);
    CHECK(s.pp() == 10);
    CHECK(s.dp() == 4);
    CHECK(s.training.grad_accum == 512); // 2048 / (1 x 4)
    CHECK(s.training.pipeline.partition == "type:transformer"); // not stated: Megatron-DeepSpeed's default
    CHECK(s.deepspeed.zero.stage == 0);                         // "bf16 (likely)": BF16_Optimizer at stage 0
    CHECK(has(c270.info.assumptions, "Megatron-DeepSpeed's"));
    CHECK(c270.info.pipeline == "1f1b pp 10");
    CHECK(c270.figures.front().value == doctest::Approx(221.21)); // the row's step_time_s, the primary figure
    // Row 264: tp 8, pp 4, dp 12, global batch 2040 -> 2040 / (1 x 12) = 170 micro-batches; 200B -> 80 layers.
    const ThroughputMapping m264 = mapped("264");
    const spec::Scenario& s264 = case_of(m264).scenario;
    CHECK(s264.pp() == 4);
    CHECK(s264.dp() == 12);
    CHECK(s264.training.grad_accum == 170);
    CHECK(s264.model.layers == 80);
    // Row 272: 'BLOOM-prequel 183B', pp 12: 72 layers (S12.yaml), 6 a stage.
    CHECK(case_of(mapped("272")).scenario.model.layers == 72);
    // Row 290 states its shape (72 x 14336, 64 heads), pp 12, tp 8, micro-batch 4: 2048 / (4 x 4) = 128.
    const ThroughputMapping m290 = mapped("290");
    const spec::Scenario& s290 = case_of(m290).scenario;
    CHECK(s290.model.layers == 72);
    CHECK(s290.model.hidden == 14336);
    CHECK(s290.pp() == 12);
    CHECK(s290.training.grad_accum == 128);
  }

  TEST_CASE("pipeline rows: fp16 rows keep DeepSpeed's ZeRO-1, which the pipeline engine model does not run")
  {
    // Row 259: fp16, zero_stage "1", pp 10, 80 GPUs: the BF16_Optimizer entry of S12.yaml selects bf16 rows only.
    const ThroughputMapping m = mapped("259");
    const spec::Scenario& s = case_of(m).scenario;
    CHECK(s.training.precision == spec::Precision::FP16);
    CHECK(s.deepspeed.zero.stage == 1);
    CHECK(s.pp() == 10);
    CHECK(s.dp() == 1);                  // 80 / (8 x 10)
    CHECK(s.training.grad_accum == 2048); // the row's grad_accum, = 2048 / (1 x 1)
  }

  TEST_CASE("pipeline rows: the rows left out and why")
  {
    // S01 rows 7-11 (PTD-P, "TP=8 x PP split is inferred"): the paper's interleaved schedule (S01.yaml).
    for (const char* id : {"7", "8", "9", "10", "11"}) {
      const ThroughputMapping m = mapped(id);
      const ThroughputNotCovered& n = left_out(m);
      CHECK(n.category == "pipeline schedule not modelled");
      CHECK(has(n.reason, "interleaved"));
      CHECK(has(n.reason, "pp " + row(id).at("pp"))); // "pp 12 (inferred)", "pp 35 (inferred)"
    }
    // S07 row 189: tp "8 (unverified recollection)", pp "35 (unverified recollection)".
    const ThroughputMapping m189 = mapped("189");
    const ThroughputNotCovered& s07 = left_out(m189);
    CHECK(s07.category == "tensor / pipeline parallelism (README trap 6)");
    CHECK(has(s07.reason, "unverified recollection"));
    CHECK(has(s07.reason, "pp 35 (unverified recollection)"));
    // S15 rows 586-591 (torchtitan, FSDP2 x TP 8 x PP 8 with torch's pipeline schedules, "bf16 mixed (+float8
    // linears)", other_parallel "...; AsyncTP"; 588-591 with CP): every reason that applies.
    for (const char* id : {"586", "587", "588", "589", "590", "591"}) {
      const ThroughputMapping m = mapped(id);
      const ThroughputNotCovered& n = left_out(m);
      CHECK(n.category == "tensor / pipeline parallelism (README trap 6)");
      CHECK(has(n.reason, "pipeline parallelism with torchtitan"));
      CHECK(has(n.reason, "FP8"));
      CHECK(has(n.reason, "AsyncTP"));
    }
    // The memory validation lists them with the same reasons.
    RowMapping mem = map_rows({row("586"), row("589")}, node_loader_near(CSV));
    REQUIRE(mem.not_covered.size() == 2);
    for (const auto& n : mem.not_covered) {
      CHECK(has(n.reason, "FP8"));
      CHECK(has(n.reason, "AsyncTP"));
    }
    // Rows 299-300 ('Trying with ZeRO_STAGE=0/1'): README trap 5, as before.
    CHECK(left_out(mapped("300")).category == "BLOOM ZeRO-0/1 table: time and TFLOPs columns swapped (README trap 5)");
  }

  TEST_CASE("pipeline rows: every S12 pipeline row but the swapped table is compared")
  {
    ThroughputMapping m = map_throughput_rows(shipped(), node_loader_near(CSV));
    std::map<std::string, const ThroughputCase*> cases;
    for (const auto& c : m.cases)
      cases[c.info.row_id] = &c;
    int s12 = 0;
    for (const auto& r : shipped()) {
      const int pp = static_cast<int>(leading_number(r.at("pp")).value_or(1));
      if (r.at("source_id") != "S12" || pp <= 1)
        continue;
      ++s12;
      const bool swapped = r.at("locator").find("STAGE=0/1") != std::string::npos; // 'Trying with ZeRO_STAGE=0/1'
      CHECK_MESSAGE((cases.count(r.at("row_id")) == 1) == !swapped, "row " << r.at("row_id"));
      if (!cases.count(r.at("row_id")))
        continue;
      const spec::Scenario& s = cases.at(r.at("row_id"))->scenario;
      CHECK(s.pp() == pp);
      CHECK(s.tp() == static_cast<int>(*leading_number(r.at("tp"))));
      CHECK(s.training.global_batch == static_cast<std::int64_t>(*leading_number(r.at("global_batch"))));
    }
    CHECK(s12 == 48); // issue 32: "48 Megatron-DeepSpeed BLOOM and BLOOM-prequel rows"
  }

  TEST_CASE("pipeline rows: the report groups pipeline rows by schedule and degree")
  {
    ThroughputMapping m;
    for (const char* id : {"270", "272", "290"})
      m.cases.push_back(case_of(mapped(id)));
    std::vector<RowOutcome> out(3);
    const double predicted[] = {200.0, 150.0, 110.0}; // step times, s
    for (int i = 0; i < 3; ++i) {
      out[i].status = RowStatus::DONE;
      out[i].predicted.step_time_s = predicted[i];
    }
    ThroughputReport r = assemble_report(3, m, out);
    auto group = [&](const std::string& name) -> const core::ErrorStats* {
      auto it = std::find_if(r.stats.begin(), r.stats.end(), [&](const core::ErrorStats& s) { return s.group == name; });
      return it == r.stats.end() ? nullptr : &*it;
    };
    // Row 270 (pp 10): (221.21 - 200) / 221.21 = +9.59 %; rows 272 and 290 (pp 12): (172.40 - 150) / 172.40 = +13.0 %,
    // (123.69 - 110) / 123.69 = +11.07 %: median 12.03 %.
    const core::ErrorStats* pp10 = group("pipeline 1f1b pp 10");
    const core::ErrorStats* pp12 = group("pipeline 1f1b pp 12");
    REQUIRE(pp10);
    REQUIRE(pp12);
    CHECK(pp10->n == 1);
    CHECK(pp10->median_abs_pct == doctest::Approx(100.0 * (221.21 - 200) / 221.21));
    CHECK(pp12->n == 2);
    CHECK(pp12->median_abs_pct ==
          doctest::Approx(50.0 * ((172.40 - 150) / 172.40 + (123.69 - 110) / 123.69)).epsilon(1e-9));
  }
}
