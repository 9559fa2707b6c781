// Fuzz target: a model file's text through config::load_model_text (docs/fuzzing.md). Seeds: models/*.yaml.
#include "config/scenario_loader.hpp"
#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const std::string text = zerosim::fuzz::text_of(data, size);
  zerosim::fuzz::expect_input_answer(
      [&] { zerosim::config::load_model_text(text, zerosim::fuzz::SOURCE_DIR + "/models/fuzz-input.yaml"); });
  return 0;
}
