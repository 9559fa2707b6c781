// Fuzz target: a DeepSpeed ds_config.json's text through config::load_deepspeed_text (docs/fuzzing.md), in the
// shipped scenario that names one (scenarios/llama2-13b-hf-ds-config.yaml: ZeRO-3 offload, "auto" batch keys),
// so the reader resolves "auto" and checks the batch and precision keys against a real training block.
// Seeds: scenarios/ds_configs/*.json.
#include "config/scenario_loader.hpp"
#include "fuzz_target.hpp"

namespace {
const std::string SCENARIO = "scenarios/llama2-13b-hf-ds-config.yaml";
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  static const std::string scenario_text = zerosim::fuzz::shipped_text(SCENARIO);
  static const std::string scenario_file = zerosim::fuzz::SOURCE_DIR + "/" + SCENARIO;
  static const std::string ds_file = zerosim::fuzz::SOURCE_DIR + "/scenarios/ds_configs/fuzz-input.json";
  const std::string text = zerosim::fuzz::text_of(data, size);
  zerosim::fuzz::expect_input_answer(
      [&] { zerosim::config::load_deepspeed_text(text, ds_file, scenario_text, scenario_file); });
  return 0;
}
