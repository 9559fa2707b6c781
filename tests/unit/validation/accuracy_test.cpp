// The acceptance check of "memory against measurement" (docs/validation.md): it runs the whole pipeline
// on results/validation/published.csv and asserts the figures the issue accepts.
#include "config/scenario_loader.hpp"
#include "run/memory_analysis.hpp"
#include "validation/memory_validation.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

using namespace zerosim;
using namespace zerosim::validation;

namespace {

ValidationReport run_on_shipped_data()
{
  std::string path = std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv";
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(path),
                  "missing " << path << " (the published measurements, results/validation/README.md)");
  NodeLoader loader = [](const std::string& name) {
    return config::load_node(std::string(ZEROSIM_SOURCE_DIR) + "/topologies/" + name + ".yaml");
  };
  return run_memory_validation(read_published_rows(path), loader);
}

} // namespace

TEST_SUITE("validation")
{
  TEST_CASE("accuracy: median abs error on allocated-memory rows is at most 15 %")
  {
    ValidationReport r = run_on_shipped_data();
    CHECK(r.failures.empty());
    REQUIRE(r.allocated_median_abs_pct.has_value());
    CHECK(*r.allocated_median_abs_pct <= ACCEPTED_MEDIAN_ABS_ERROR_PCT);
  }

  TEST_CASE("accuracy: no prediction exceeds an nvidia-smi upper bound, but for the documented miss")
  {
    // nvidia-smi "used" is a caching-allocator ceiling: the predicted device total must not exceed it
    // (results/validation/README.md, trap 7). Row 213 (ZeRO-Offload tutorial, GPT-2 10B, batch 10, sequence
    // length not stated) is predicted above its bound; docs/validation.md records the suspects (the sequence
    // length assumed, the LM head's cross-entropy activations). When it is fixed, this list must shrink.
    const std::vector<std::string> known_misses = {"213"};
    ValidationReport r = run_on_shipped_data();
    CHECK(r.bound_rows >= 3); // rows 213, 214, 215
    for (const auto& c : r.comparisons) {
      if (c.c.metric != MemMetric::DEVICE_USED)
        continue;
      INFO("published.csv row " << c.c.info.row_id << ": predicted " << c.predicted_bytes << " B, bound "
                                << c.c.measured_bytes << " B");
      const bool known = std::find(known_misses.begin(), known_misses.end(), c.c.info.row_id) != known_misses.end();
      CHECK(c.ok != known);
    }
  }

  TEST_CASE("accuracy: every fit statement is reproduced, but for the documented misses")
  {
    // A max-model or max-batch configuration that ran must be predicted to fit and the same at twice the layers
    // (or micro-batch) not to fit; an out-of-memory statement (Accelerate FSDP blog Table 2: DDP on GPT-2 XL,
    // rows 624-625) must be predicted not to fit as written.
    // Known misses: the same blog's largest batches of GPT-2 Large and XL (Tables 1-2, rows 617-623 and 626-628) at
    // the block_size of 12 tokens its commands print. At 12 tokens a sample's activations are a few tens of MB, so
    // twice the published largest batch is predicted to fit (docs/validation.md, "FSDP and DDP rows"); the source's
    // maxima cannot be memory limits at that sequence length. When that is resolved, this list must shrink.
    // Row 83 (ZeRO-Offload Fig. 7: 30B on 4 V100 "with MP"): at Table 3's setting for its 20B-60B models (MP 2,
    // micro-batch 8) a 30B model's fp16 shard alone is 30 GB per 32 GB GPU, so the 30B configuration the file can
    // build does not fit; the run's own MP degree and batch are not published (docs/tensor-parallel.md §5).
    const std::vector<std::string> known_misses = {"617", "618", "619", "620", "621", "622",
                                                   "623", "626", "627", "628", "83"};
    ValidationReport r = run_on_shipped_data();
    REQUIRE_FALSE(r.fits.empty());
    for (const auto& f : r.fits) {
      INFO("published.csv row " << f.c.info.row_id << ": " << f.c.claim);
      const bool known = std::find(known_misses.begin(), known_misses.end(), f.c.info.row_id) != known_misses.end();
      CHECK(f.ok != known);
      if (known)
        continue;
      CHECK(f.ran_fits == f.c.expect_fit);
      if (f.doubled_fits)
        CHECK_FALSE(*f.doubled_fits);
    }
  }

  TEST_CASE("accuracy: the FSDP paper's minGPT 175B allocated peaks are within 15 %")
  {
    // published.csv rows 318-324, 327 (Zhao et al. 2023, Fig. 8(b)): torch peak allocated, read off a chart (+/-2 GB).
    ValidationReport r = run_on_shipped_data();
    int n = 0;
    for (const auto& c : r.comparisons) {
      if (c.c.info.source_id != "S13" || c.c.metric != MemMetric::ALLOCATED)
        continue;
      ++n;
      INFO("published.csv row " << c.c.info.row_id << ": predicted " << c.predicted_bytes << " B, measured "
                                << c.c.measured_bytes << " B");
      CHECK(std::abs(c.error_pct) <= ACCEPTED_MEDIAN_ABS_ERROR_PCT);
    }
    CHECK(n == 8);
  }

  TEST_CASE("accuracy: the largest model predicted to fit each max-model row with offload is within 20 %")
  {
    // For every published max-model size with offload, the largest model predicted to fit is within
    // +/-20 % of the published size and twice the published size does not fit. Row 82 (ZeRO-Offload Figure 7:
    // 13B on one V100 32 GB with CPU-Adam) is the one such row the file can express (rows 83-84 used model
    // parallelism, row 608 gives no shape).
    // Rows 83-84 are searched at ZeRO-Offload Table 3's MP setting (docs/tensor-parallel.md §5). Known miss: row
    // 83 (30B on 4 GPUs at MP 2 and micro-batch 8): 29 x 8192 = 23.78B fits, -20.7 %, just outside.
    const std::vector<std::string> known_misses = {"83"};
    ValidationReport r = run_on_shipped_data();
    CHECK(r.largest_offload_rows == 3);
    CHECK(r.largest_offload_ok == r.largest_offload_rows - static_cast<int>(known_misses.size()));
    bool row_82 = false, row_84 = false;
    for (const auto& f : r.fits) {
      if (!f.largest)
        continue;
      const LargestFit& l = *f.largest;
      INFO("published.csv row " << f.c.info.row_id << ": " << l.largest_layers << " layers, " << l.largest_params
                                << " parameters against " << l.published_params);
      row_82 = row_82 || f.c.info.row_id == "82";
      row_84 = row_84 || f.c.info.row_id == "84";
      // The search's answer is the boundary: it fits, one layer more does not (run::analyze_memory).
      spec::Scenario at = f.c.ran;
      at.model.layers = l.largest_layers;
      CHECK(run::analyze_memory(at).fits);
      at.model.layers = l.largest_layers + 1;
      CHECK_FALSE(run::analyze_memory(at).fits);
      spec::ModelSpec largest = f.c.ran.model;
      largest.layers = l.largest_layers;
      CHECK(l.largest_params == workload::count_params(largest));
      // Twice: the fewest layers with at least twice the published parameters.
      CHECK(static_cast<double>(l.twice_params) >= 2 * l.published_params);
      spec::ModelSpec fewer = f.c.ran.model;
      fewer.layers = l.twice_layers - 1;
      CHECK(static_cast<double>(workload::count_params(fewer)) < 2 * l.published_params);
      if (f.c.info.offload != "none") {
        const bool known = std::find(known_misses.begin(), known_misses.end(), f.c.info.row_id) != known_misses.end();
        CHECK((std::abs(l.error_pct) <= ACCEPTED_LARGEST_MODEL_ERROR_PCT) != known);
        CHECK_FALSE(l.twice_fits);
      }
    }
    CHECK(row_82);
    CHECK(row_84);
  }
}
