// Fuzz target: a scenario file's text through config::load_scenario_text (docs/fuzzing.md). The text is named
// scenarios/fuzz-input.yaml in the source tree, so the model, node and ds_config.json names of the shipped
// scenarios (the seeds, scenarios/*.yaml) resolve as they do for those files, and kernels.yaml and the shipped
// calibration profile are read from the tree.
#include "config/scenario_loader.hpp"
#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  static const std::string file = zerosim::fuzz::SOURCE_DIR + "/scenarios/fuzz-input.yaml";
  const std::string text = zerosim::fuzz::text_of(data, size);
  zerosim::fuzz::expect_input_answer([&] { zerosim::config::load_scenario_text(text, file); });
  return 0;
}
