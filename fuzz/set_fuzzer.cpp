// Fuzz target: `--set K=V` (config::LoadOptions::sets) on a fixed shipped scenario (docs/fuzzing.md). The bytes are
// split at newlines into up to 16 assignments, applied in order. The scenario names its model and node by name and
// its DeepSpeed block by a ds_config.json path, so a set below model., cluster.node. or deepspeed. loads that file
// first. Seeds: fuzz/seeds/set/ (one assignment a line).
#include "config/scenario_loader.hpp"
#include "fuzz_target.hpp"

#include <vector>

namespace {
const std::string SCENARIO = "scenarios/llama2-13b-hf-ds-config.yaml";
constexpr std::size_t MAX_SETS = 16;
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  static const std::string scenario_text = zerosim::fuzz::shipped_text(SCENARIO);
  static const std::string scenario_file = zerosim::fuzz::SOURCE_DIR + "/" + SCENARIO;
  const std::string text = zerosim::fuzz::text_of(data, size);
  zerosim::config::LoadOptions options;
  std::size_t start = 0;
  while (options.sets.size() < MAX_SETS) {
    const std::size_t nl = text.find('\n', start);
    options.sets.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos)
      break;
    start = nl + 1;
  }
  zerosim::fuzz::expect_input_answer(
      [&] { zerosim::config::load_scenario_text(scenario_text, scenario_file, options); });
  return 0;
}
