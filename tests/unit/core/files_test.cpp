// core/files.hpp: file-system questions about a user's path answer or raise the input error, never
// std::filesystem_error (the fuzz finding tests/data/fuzz/set/long-calibration-name).
#include "core/error.hpp"
#include "core/files.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace zerosim;

namespace {

/// The message of the core::InputError `f` throws, or "no error".
template <typename F> std::string input_error_of(F&& f)
{
  try {
    f();
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("files: existing, missing and unexaminable paths")
{
  CHECK(core::path_exists(ZEROSIM_SOURCE_DIR "/CMakeLists.txt", "--x"));
  CHECK(core::is_regular_file(ZEROSIM_SOURCE_DIR "/CMakeLists.txt", "--x"));
  CHECK(core::path_exists(ZEROSIM_SOURCE_DIR "/sim", "--x"));
  CHECK_FALSE(core::is_regular_file(ZEROSIM_SOURCE_DIR "/sim", "--x"));
  CHECK_FALSE(core::path_exists(ZEROSIM_SOURCE_DIR "/no-such-file", "--x"));
  // Linux's NAME_MAX is 255 bytes: a 256-byte component cannot be examined (ENAMETOOLONG).
  const std::string long_name(256, 'a');
  CHECK(input_error_of([&] { core::path_exists(long_name, "--node"); }) ==
        "--node: cannot examine '" + long_name + "': File name too long");
  CHECK(input_error_of([&] { core::is_regular_file(long_name, "--synthetic"); }) ==
        "--synthetic: cannot examine '" + long_name + "': File name too long");
}

TEST_CASE("files: create_directories makes parents, accepts an existing one, and refuses what it cannot make")
{
  const std::filesystem::path base = std::filesystem::temp_directory_path() / "zerosim-files-test";
  std::filesystem::remove_all(base);
  const std::string deep = (base / "a" / "b").string();
  core::create_directories(deep, "--out");
  CHECK(std::filesystem::is_directory(deep));
  core::create_directories(deep, "--out"); // already there: fine
  // /dev/null is a device, so nothing can be made below it (ENOTDIR).
  CHECK(input_error_of([] { core::create_directories("/dev/null/x", "--out"); }) ==
        "--out: cannot create the directory '/dev/null/x': Not a directory");
  std::filesystem::remove_all(base);
}

TEST_CASE("files: new_output_dir takes the base name, then base-2, base-3, ..., never a name that exists")
{
  const std::filesystem::path parent = std::filesystem::temp_directory_path() / "zerosim-files-new-output";
  std::filesystem::remove_all(parent);
  std::filesystem::create_directories(parent);
  const std::string base = (parent / "llama.sweep").string();
  // Nothing there: the base name itself, created.
  CHECK(core::new_output_dir(base, "sweep") == base);
  CHECK(std::filesystem::is_directory(base));
  // The base is taken: -2. A file (not a folder) named -3 is skipped too: -4.
  CHECK(core::new_output_dir(base, "sweep") == base + "-2");
  {
    std::ofstream(base + "-3") << "a file the user keeps";
  }
  CHECK(core::new_output_dir(base, "sweep") == base + "-4");
  CHECK(std::filesystem::is_regular_file(base + "-3"));
  // A base below a file cannot be made: the system's reason, named.
  CHECK(input_error_of([&] { core::new_output_dir(base + "-3/x.sweep", "sweep"); }) ==
        "sweep: cannot create the directory '" + base + "-3/x.sweep': Not a directory");
  std::filesystem::remove_all(parent);
}
