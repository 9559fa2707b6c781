// What every fuzz target shares (docs/fuzzing.md): the bytes as text, the files of the source tree, and the one
// rule of the targets: a loader may answer an input only with the project's input errors (core::InputError, and
// core::UnsupportedError for a configuration described correctly but not simulated). Anything else (another
// exception, a crash, a sanitizer report, a hang) escapes to libFuzzer, which reports it.
#pragma once

#include "core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#ifndef ZEROSIM_SOURCE_DIR
#error "ZEROSIM_SOURCE_DIR must name the source tree (fuzz/CMakeLists.txt sets it)"
#endif

namespace zerosim::fuzz {

/// The source tree: shipped scenarios name models/ and topologies/ there.
inline const std::string SOURCE_DIR = ZEROSIM_SOURCE_DIR;

inline std::string text_of(const std::uint8_t* data, std::size_t size)
{
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// The text of a shipped file (read once by each target); a missing file is a broken build, not an input.
inline std::string shipped_text(const std::string& relative)
{
  std::ifstream in(SOURCE_DIR + "/" + relative, std::ios::binary);
  if (!in)
    throw std::runtime_error("fuzz: cannot read " + SOURCE_DIR + "/" + relative);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `load`, letting only the input errors through silently.
template <class F> void expect_input_answer(F&& load)
{
  try {
    load();
  } catch (const core::InputError&) {
  } catch (const core::UnsupportedError&) {
  }
}

} // namespace zerosim::fuzz
