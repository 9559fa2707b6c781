// The per-source data of the validation mapping (results/validation/sources/, docs/validation.md "Per-source data"):
// an entry added to a source's table maps a row by its values, and a malformed entry is an input error naming the
// file, line, key, what was expected and what was found.
#include "row_fixtures.hpp"
#include "validation/published_rows.hpp"

#include "config/source_rules_loader.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

using namespace zerosim;
using namespace zerosim::validation;

namespace {

std::string shipped_file(const std::string& name)
{
  const std::string path = std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/sources/" + name;
  std::ifstream in(path);
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  RowMapping shipped = map_rows({row}, load_node, config::shipped_source_rules());
  REQUIRE(shipped.fits.empty());
  REQUIRE(shipped.not_covered.size() == 1);
  CHECK(shipped.not_covered[0].reason.find("no published shape") != std::string::npos);

  // The same file with one more entry (a copy; the shipped file is not changed).
  const std::string text = shipped_file("S03.yaml");
  const std::string marker = "model_sizes:\n";
  REQUIRE(text.find(marker) != std::string::npos);
  std::string added = text;
  added.insert(added.find(marker) + marker.size(), "  - size: 16B\n"
                                                   "    layers: 80\n"
                                                   "    hidden: 4096\n"
                                                   "    heads: 32\n"
                                                   "    micro_batch: 3\n"
                                                   "    citation: \"an entry added by the test\"\n");
  spec::SourceRules rules = config::shipped_source_rules();
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
  std::string message;
  try {
    (void)config::load_source_rule_text(text, "S03.yaml");
  } catch (const core::InputError& e) {
    message = e.what();
  }
  CHECK(message.find("S03.yaml:4:") != std::string::npos);
  CHECK(message.find("model_sizes[0].layers") != std::string::npos);
  CHECK(message.find("expected") != std::string::npos);
  CHECK(message.find("many") != std::string::npos);

  std::string typo;
  try {
    (void)config::load_source_rule_text("source_id: S03\nmodel_size: []\n", "S03.yaml");
  } catch (const core::InputError& e) {
    typo = e.what();
  }
  CHECK(typo.find("S03.yaml:2:") != std::string::npos);
  CHECK(typo.find("model_sizes") != std::string::npos); // did you mean
}

TEST_CASE("every shipped per-source file reads, each under its source's name")
{
  const spec::SourceRules rules =
      config::load_source_rules(std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/sources");
  for (const char* id : {"S03", "S04", "S05", "S09", "S12", "S13", "S14", "S15", "S16"}) {
    CAPTURE(id);
    REQUIRE(rules.find(id) != nullptr);
    CHECK(rules.find(id)->source_id == id);
  }
  CHECK(rules.find("S03")->model_sizes.size() == 3);
  CHECK(rules.find("S04")->heads_by_hidden.size() == 2);
}
