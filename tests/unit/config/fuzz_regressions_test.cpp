// The inputs the fuzz targets (fuzz/, docs/fuzzing.md) found a fault with, kept under tests/data/fuzz/TARGET/: each
// goes through the loader its target drives, as that target feeds it, and must be an input error with the message
// pinned here (file, line and column, what was expected, what was found). `once` says what the input did before the
// fix. Every file under tests/data/fuzz/ must be listed, so a kept input cannot be skipped silently.
#include "config_test_util.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace zerosim::config::test {
namespace {

const std::string FUZZ = DATA + "/fuzz";
/// The fixed scenario of the ds_config and set targets (fuzz/ds_config_fuzzer.cpp, fuzz/set_fuzzer.cpp).
const std::string FUZZ_SCENARIO = ZEROSIM_SOURCE_DIR "/scenarios/llama2-13b-hf-ds-config.yaml";

struct Kept {
  std::string target; ///< the fuzz target that found it: model, node, scenario, ds_config, set
  std::string name;   ///< its file under tests/data/fuzz/TARGET/
  std::string once;   ///< what it did before the fix
  std::string error;  ///< the input error it is now; FILE stands for the input's path, "..." for the input's own
                      ///< bytes where the message quotes them (binary, not worth pinning here)
};

const std::vector<Kept> KEPT = {
    {"model", "lone-comma",
     "the text \",\" alone: yaml-cpp 0.7's LoadAll never returned (each document it read was an empty one at the ',', "
     "which it did not consume), taking memory until the process was killed; any loader (scenario, model, node, "
     "ds_config.json) hung on it",
     "FILE:1:1: not valid YAML: expected a value, found ',' (it cannot start one)"},
    // The two below were found reading the loaders while the targets ran, and confirmed with fuzz_scenario and
    // fuzz_set (out-of-memory: a 1 GiB string); the fuzzers had not reached them (no device path in their seeds or
    // dictionaries).
    {"scenario", "device-reference",
     "model: /dev/zero: the reference was read as a file, without end, until memory ran out",
     "FILE:1:8: model: expected the path of a file, found the device '/dev/zero'"},
    {"set", "device-reference",
     "--set deepspeed=/dev/urandom: the ds_config.json reference was read without end until memory ran out",
     "--set deepspeed=/dev/urandom: deepspeed: expected the path of a file, found the device '/dev/urandom'"},
    // fuzz_set, 2026-11-27 (minimised by libFuzzer: 268 bytes, one line): a calibration path whose last component is
    // longer than NAME_MAX (255 bytes). The same escaped from --node of calibrate, validate --out and the sweep's
    // --out; all now go through core/files.hpp.
    {"set", "long-calibration-name",
     "--set calibration=<a 256-byte name>: std::filesystem::exists threw filesystem_error (File name too long), "
     "which escaped the loader: `zerosim run` reported an internal error, exit status 3",
     "--set calibration=...: calibration profile: cannot examine '...': File name too long"},
};

std::string read_file(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot read " << path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The input through the loader of its target, as the target feeds it; the error's message, or "no error".
std::string load_as_target(const std::string& target, const std::string& path)
{
  const std::string text = read_file(path);
  if (target == "model")
    return error_of([&] { load_model_text(text, path); });
  if (target == "node")
    return error_of([&] { load_node_text(text, path); });
  if (target == "scenario")
    return error_of([&] { load_scenario_text(text, path); });
  if (target == "ds_config")
    return error_of([&] { load_deepspeed_text(text, path, read_file(FUZZ_SCENARIO), FUZZ_SCENARIO); });
  REQUIRE(target == "set");
  LoadOptions options;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    options.sets.push_back(line);
  return error_of([&] { load_scenario_text(read_file(FUZZ_SCENARIO), FUZZ_SCENARIO, options); });
}

std::string replaced_file(std::string message, const std::string& path)
{
  const std::string::size_type at = message.find("FILE");
  if (at != std::string::npos)
    message.replace(at, 4, path);
  return message;
}

TEST_CASE("fuzz regressions: every kept input is an input error naming where and what")
{
  for (const Kept& k : KEPT) {
    const std::string path = FUZZ + "/" + k.target + "/" + k.name;
    INFO(k.target << "/" << k.name << " once: " << k.once);
    const std::string expected = replaced_file(k.error, path);
    const std::string message = load_as_target(k.target, path);
    if (expected.find("...") == std::string::npos) {
      CHECK(message == expected);
      continue;
    }
    // Each "..." stands for any bytes: the pieces between them must appear in order, the first at the start and
    // the last at the end.
    std::vector<std::string> pieces;
    for (std::size_t at = 0;;) {
      const std::size_t dots = expected.find("...", at);
      pieces.push_back(expected.substr(at, dots == std::string::npos ? std::string::npos : dots - at));
      if (dots == std::string::npos)
        break;
      at = dots + 3;
    }
    CHECK(message.rfind(pieces.front(), 0) == 0);
    CHECK(message.size() >= pieces.back().size());
    CHECK(message.compare(message.size() - pieces.back().size(), std::string::npos, pieces.back()) == 0);
    std::size_t from = pieces.front().size();
    for (std::size_t i = 1; i + 1 < pieces.size(); ++i) {
      const std::size_t found = message.find(pieces[i], from);
      CHECK_MESSAGE(found != std::string::npos, "'" << pieces[i] << "' not in " << message);
      from = found == std::string::npos ? from : found + pieces[i].size();
    }
  }
}

TEST_CASE("fuzz regressions: every file under tests/data/fuzz is a kept input")
{
  std::set<std::string> listed;
  for (const Kept& k : KEPT)
    listed.insert(k.target + "/" + k.name);
  std::set<std::string> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(FUZZ))
    if (e.is_regular_file())
      found.insert(std::filesystem::relative(e.path(), FUZZ).string());
  CHECK(found == listed);
}

} // namespace
} // namespace zerosim::config::test
