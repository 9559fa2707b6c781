// The data of the validation mapping: the general rules (results/validation/rules.yaml, docs/validation.md "General
// rules") and each source's (results/validation/sources/, "Per-source data"). An entry added to a table (a model size
// of a source, a GPU, a model layout) maps a row by its values, and a malformed entry is an input error naming the
// file, line, key, what was expected and what was found.
#include "row_fixtures.hpp"
#include "validation/published_rows.hpp"

#include "config/mapping_rules_loader.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

using namespace zerosim;
using namespace zerosim::validation;

namespace {

/// A shipped file of results/validation/ ("rules.yaml", "sources/S03.yaml").
std::string shipped_file(const std::string& name)
{
  const std::string path = std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/" + name;
  std::ifstream in(path);
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The message of the input error that loading `text` as a source's file gives ("" when it loads).
std::string source_error(const std::string& text, const std::string& file)
{
  try {
    (void)config::load_source_rule_text(text, file);
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "";
}

/// published.csv row 82 (ZeRO-Offload Figure 7: "ZeRO-Offload 13B" on one V100, no shape in the row), the claim
/// changed to a size S03's model_sizes table does not list.
PublishedRow row_82_with(const std::string& claim)
{
  for (PublishedRow r : read_published_rows(std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv"))
    if (r["row_id"] == "82") {
      r["max_model_fit"] = claim;
      return r;
    }
  FAIL("row 82 not in published.csv");
  return {};
}

} // namespace

TEST_CASE("a model size added to a source's table maps the row that names it")
{
  const PublishedRow row = row_82_with("ZeRO-Offload 16B");
  auto load_node = [](const std::string& name) { return test::fake_node(name); };

  // The shipped S03 table has no 16B: the row is not covered, for want of a shape.
  RowMapping shipped = map_rows({row}, load_node, config::shipped_mapping_rules());
  REQUIRE(shipped.fits.empty());
  REQUIRE(shipped.not_covered.size() == 1);
  CHECK(shipped.not_covered[0].reason.find("no published shape") != std::string::npos);

  // The same file with one more entry (a copy; the shipped file is not changed).
  const std::string text = shipped_file("sources/S03.yaml");
  const std::string marker = "model_sizes:\n";
  REQUIRE(text.find(marker) != std::string::npos);
  std::string added = text;
  added.insert(added.find(marker) + marker.size(), "  - size: 16B\n"
                                                   "    layers: 80\n"
                                                   "    hidden: 4096\n"
                                                   "    heads: 32\n"
                                                   "    micro_batch: 3\n"
                                                   "    citation: \"an entry added by the test\"\n");
  spec::MappingRules rules = config::shipped_mapping_rules();
  rules.by_source["S03"] = config::load_source_rule_text(added, "S03-with-16B.yaml");

  RowMapping m = map_rows({row}, load_node, rules);
  REQUIRE(m.not_covered.empty());
  REQUIRE(m.fits.size() == 1);
  const FitCase& f = m.fits[0];
  CHECK(f.ran.model.layers == 80);
  CHECK(f.ran.model.hidden == 4096);
  CHECK(f.ran.model.heads == 32);
  CHECK(f.claimed_params == doctest::Approx(16e9));
  CHECK(f.info.assumptions.find("shape: an entry added by the test") != std::string::npos);
  // The row gives no micro-batch: the table's.
  CHECK(f.ran.training.micro_batch == 3);
  REQUIRE(f.doubled);
  CHECK(f.doubled->model.layers == 160);
}

TEST_CASE("a malformed per-source entry names the file, line, key, expected and found")
{
  const std::string text = "source_id: S03\n"
                           "model_sizes:\n"
                           "  - size: 16B\n"
                           "    layers: many\n"
                           "    hidden: 4096\n"
                           "    heads: 32\n"
                           "    citation: x\n";
  const std::string message = source_error(text, "S03.yaml");
  CHECK(message.find("S03.yaml:4:") != std::string::npos);
  CHECK(message.find("model_sizes[0].layers") != std::string::npos);
  CHECK(message.find("expected") != std::string::npos);
  CHECK(message.find("many") != std::string::npos);

  const std::string typo = source_error("source_id: S03\nmodel_size: []\n", "S03.yaml");
  CHECK(typo.find("S03.yaml:2:") != std::string::npos);
  CHECK(typo.find("model_sizes") != std::string::npos); // did you mean
}

TEST_CASE("every shipped per-source file reads, each under its source's name")
{
  const std::map<std::string, spec::SourceRule> rules =
      config::load_source_rules(std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/sources");
  for (const char* id : {"S03", "S04", "S05", "S09", "S11", "S12", "S13", "S14", "S15", "S16", "S18"}) {
    CAPTURE(id);
    REQUIRE(rules.count(id) == 1);
    CHECK(rules.at(id).source_id == id);
  }
  CHECK(rules.at("S03").model_sizes.size() == 3);
  CHECK(rules.at("S04").heads_by_hidden.size() == 2);
  CHECK(rules.at("S09").cell_readings.size() == 1);
  CHECK(rules.at("S18").figures_not_compared.size() == 1);
  CHECK(rules.at("S11").estimator_older_formula);
}

namespace {

/// The shipped rules with the general rules read from `text` (a copy of rules.yaml, changed).
spec::MappingRules with_general(const std::string& text)
{
  spec::MappingRules rules = config::shipped_mapping_rules();
  rules.general = config::load_general_rules_text(text, "rules-changed.yaml");
  return rules;
}

/// `text` with `entry` inserted after the line `key:`.
std::string inserted(std::string text, const std::string& key, const std::string& entry)
{
  const std::string marker = key + ":\n";
  REQUIRE(text.find(marker) != std::string::npos);
  text.insert(text.find(marker) + marker.size(), entry);
  return text;
}

} // namespace

TEST_CASE("a GPU added to the general rules' table maps the rows that name it")
{
  // Row 318 (minGPT 175B on 128 A100 80 GB) on a GPU the shipped table has no node file for.
  PublishedRow row = test::row_318();
  row["gpu"] = "L40S";
  row["gpu_mem_GB"] = "48";
  auto load_node = [](const std::string& name) { return test::fake_node(name); };

  RowMapping shipped = map_rows({row}, load_node, config::shipped_mapping_rules());
  REQUIRE(shipped.memory.empty());
  REQUIRE(shipped.not_covered.size() == 1);
  CHECK(shipped.not_covered[0].reason == "no node file for GPU 'L40S'");
  ThroughputMapping shipped_run = map_throughput_rows({row}, load_node, config::shipped_mapping_rules());
  REQUIRE(shipped_run.not_covered.size() == 1);
  CHECK(shipped_run.not_covered[0].category == "no node file for the GPU");

  const spec::MappingRules rules =
      with_general(inserted(shipped_file("rules.yaml"), "gpu_nodes", "  - {gpu_contains: [l40s], node: test-l40s}\n"));
  RowMapping m = map_rows({row}, load_node, rules);
  REQUIRE(m.not_covered.empty());
  REQUIRE(!m.memory.empty());
  CHECK(m.memory[0].scenario->cluster.node.name == "test-l40s");
  CHECK(m.memory[0].info.assumptions.find("node topologies/test-l40s.yaml") != std::string::npos);
  ThroughputMapping run = map_throughput_rows({row}, load_node, rules);
  REQUIRE(run.cases.size() == 1);
  CHECK(run.cases[0].scenario.cluster.node.name == "test-l40s");
  CHECK(node_name_for("L40S", "48", "", rules.general) == "test-l40s");
  // An entry's memory bound: a row below it takes the next entry.
  const spec::GeneralRules bounded =
      config::load_general_rules_text(inserted(shipped_file("rules.yaml"), "gpu_nodes",
                                               "  - {gpu_contains: [l40s], memory_above_GB: 40, node: big}\n"
                                               "  - {gpu_contains: [l40s], node: small}\n"),
                                      "rules-changed.yaml");
  CHECK(node_name_for("L40S", "48", "", bounded) == "big");
  CHECK(node_name_for("L40S", "24", "", bounded) == "small");
  CHECK(node_name_for("L40S", "not stated", "", bounded) == "small");
}

TEST_CASE("a model layout added to the general rules maps the rows of its family")
{
  const PublishedRow row = test::row_318(); // minGPT 175B: no ffn_hidden in the row
  auto load_node = [](const std::string& name) { return test::fake_node(name); };
  RowMapping shipped = map_rows({row}, load_node, config::shipped_mapping_rules());
  REQUIRE(!shipped.memory.empty());
  CHECK(shipped.memory[0].scenario->model.ffn == spec::FfnKind::GELU);
  CHECK(shipped.memory[0].scenario->model.ffn_hidden == 4 * 12288);

  // A layout ahead of the shipped ones, for the same family.
  const spec::MappingRules rules = with_general(inserted(shipped_file("rules.yaml"), "model_layouts",
                                                         "  - name: added by the test\n"
                                                         "    model_contains_any: [mingpt]\n"
                                                         "    ffn: swiglu\n"
                                                         "    norm: rmsnorm\n"
                                                         "    position: rope\n"
                                                         "    bias: false\n"
                                                         "    tied_embeddings: false\n"
                                                         "    max_position: none\n"
                                                         "    ffn_hidden: {times: 3, multiple_of: 1024, note: x3}\n"
                                                         "    note: a layout added by the test\n"));
  RowMapping m = map_rows({row}, load_node, rules);
  REQUIRE(!m.memory.empty());
  const spec::ModelSpec& model = m.memory[0].scenario->model;
  CHECK(model.ffn == spec::FfnKind::SWIGLU);
  CHECK(model.norm == spec::NormKind::RMSNORM);
  CHECK(model.position == spec::PositionKind::ROPE);
  CHECK(model.max_position == 0);
  CHECK(model.ffn_hidden == 36864); // 3 x 12288, a multiple of 1024
  CHECK(m.memory[0].info.assumptions.find("ffn 36864 (x3)") != std::string::npos);
  CHECK(m.memory[0].info.assumptions.find("a layout added by the test") != std::string::npos);
}

namespace {

/// The message of the input error that loading `text` as rules.yaml gives ("" when it loads).
std::string general_error(const std::string& text)
{
  try {
    (void)config::load_general_rules_text(text, "rules.yaml");
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("a malformed general rule names the file, line, key, expected and found")
{
  const std::string shipped = shipped_file("rules.yaml");
  CHECK(general_error(shipped).empty());

  // A typo in an entry's key: unknown key, with the key meant.
  const std::string typo =
      general_error(inserted(shipped, "gpu_nodes", "  - {gpu_contains: [l40s], memory_below: 60, node: x}\n"));
  CHECK(typo.find("rules.yaml:") != std::string::npos);
  CHECK(typo.find("gpu_nodes[0].memory_below: unknown key") != std::string::npos);
  CHECK(typo.find("memory_below_GB") != std::string::npos);

  // A value of the wrong kind.
  const std::string kind =
      general_error(inserted(shipped, "gpu_nodes", "  - {gpu_contains: [l40s], memory_below_GB: sixty, node: x}\n"));
  CHECK(kind.find("gpu_nodes[0].memory_below_GB: expected") != std::string::npos);
  CHECK(kind.find("sixty") != std::string::npos);
  const std::string list = general_error(inserted(shipped, "gpu_nodes", "  - {gpu_contains: l40s, node: x}\n"));
  CHECK(list.find("gpu_nodes[0].gpu_contains: expected a list of texts") != std::string::npos);

  // The line: the entry is on the line after "gpu_nodes:".
  const std::size_t line =
      static_cast<std::size_t>(std::count(
          shipped.begin(), shipped.begin() + static_cast<std::ptrdiff_t>(shipped.find("gpu_nodes:")), '\n')) +
      2;
  CHECK(typo.find("rules.yaml:" + std::to_string(line) + ":") != std::string::npos);

  // A missing key, an unknown top-level key, a strategy misspelt.
  CHECK(general_error(inserted(shipped, "gpu_nodes", "  - {gpu_contains: [l40s]}\n"))
            .find("node: required key is missing") != std::string::npos);
  CHECK(general_error(shipped + "gpu_node: []\n").find("gpu_node: unknown key (did you mean 'gpu_nodes'?)") !=
        std::string::npos);
  CHECK(general_error(inserted(shipped, "fsdp_strategies", "  - {strategy: FULL, texts: [x]}\n"))
            .find("fsdp_strategies[0].strategy: expected one of FULL_SHARD") != std::string::npos);

  // A first-match table needs its default entry (no condition) last.
  const std::string no_default = general_error(inserted(shipped, "frameworks",
                                                        "  - name: first\n"
                                                        "    vocab: 1\n"
                                                        "    vocab_note: x\n"));
  CHECK(no_default.find("frameworks: expected the entry without a condition (the default) last") != std::string::npos);
}

TEST_CASE("a per-source pipeline entry names a schedule the source's runs used and DeepSpeed's partition method")
{
  const std::string no_schedule = "source_id: S12\n"
                                  "pipeline:\n"
                                  "  - partition: type:transformer\n"
                                  "    note: x\n";
  const std::string m1 = source_error(no_schedule, "S12.yaml");
  CHECK(m1.find("S12.yaml:3:") != std::string::npos);
  CHECK(m1.find("pipeline[0].schedule") != std::string::npos);
  const std::string autos = "source_id: S12\n"
                            "pipeline:\n"
                            "  - schedule: auto\n"
                            "    note: x\n";
  const std::string m2 = source_error(autos, "S12.yaml");
  CHECK(m2.find("S12.yaml:3:") != std::string::npos);
  CHECK(m2.find("pipeline[0].schedule: expected the schedule the source's runs used: 1f1b, gpipe, interleaved_1f1b or "
                "zero_bubble, found \"auto\"") != std::string::npos);
  const std::string method = "source_id: S12\n"
                             "pipeline:\n"
                             "  - schedule: 1f1b\n"
                             "    partition: layers\n"
                             "    note: x\n";
  const std::string m3 = source_error(method, "S12.yaml");
  CHECK(m3.find("S12.yaml:4:") != std::string::npos);
  CHECK(m3.find("pipeline[0].partition: expected parameters, uniform or type:REGEX") != std::string::npos);
  const std::string stage = "source_id: S12\n"
                            "deepspeed:\n"
                            "  - zero_optimization: {stage: 2}\n"
                            "    zero_note: x\n";
  const std::string m4 = source_error(stage, "S12.yaml");
  CHECK(m4.find("S12.yaml:3:") != std::string::npos);
  CHECK(m4.find("deepspeed[0].zero_optimization.stage: expected an integer 0-1, found \"2\"") != std::string::npos);
}

TEST_CASE("a per-source cell reading or figure left out names a column of published.csv")
{
  const std::string reading = "source_id: S09\n"
                              "cell_readings:\n"
                              "  - column: total_gpu\n"
                              "    value: 2\n"
                              "    note: x\n";
  const std::string message = source_error(reading, "S09.yaml");
  CHECK(message.find("S09.yaml:3:") != std::string::npos);
  CHECK(message.find("cell_readings[0].column: expected one of total_gpus, global_batch, vocab, found \"total_gpu\"") !=
        std::string::npos);

  const std::string figure = "source_id: S18\n"
                             "figures_not_compared:\n"
                             "  - column: step_time\n"
                             "    reason: x\n";
  CHECK(source_error(figure, "S18.yaml").find("figures_not_compared[0].column: expected one of step_time_s,") !=
        std::string::npos);
}
