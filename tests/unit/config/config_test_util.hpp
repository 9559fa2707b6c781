// Helpers shared by the config tests.
#pragma once

#include "config/scenario_loader.hpp"
#include "core/error.hpp"

#include <string>

namespace zerosim::config::test {

/// The fixtures folder (tests/data); scenarios given as text are named as if they were in DATA/scenarios,
/// so names resolve to DATA/models and DATA/topologies.
inline const std::string DATA = ZEROSIM_SOURCE_DIR "/tests/data";
inline const std::string SCEN = DATA + "/scenarios/inline.yaml";

/// The message of the core::InputError that `f` throws, or "no error".
template <class F> std::string error_of(F&& f)
{
  try {
    f();
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "no error";
}

/// A valid scenario over the fixtures; tests append or replace lines.
inline const std::string BASE = R"(name: base
model: test-gpt
cluster:
  node: test-node
training:
  seq_len: 1024
  micro_batch: 1
  grad_accum: 16
)";

} // namespace zerosim::config::test
