// File-system questions about paths a user gave, and the writing of a command's output files, answered without
// std::filesystem_error: a path the system cannot examine (a name longer than the system allows, a component that is a
// file, no permission) is an input error naming what the path was given as and the system's reason, never an internal
// error (docs/fuzzing.md).
#pragma once

#include <filesystem>
#include <string>

namespace zerosim::core {

/// Whether `path` names an existing entry (file, directory, device, ...). `what` names the path in the message
/// of the core::InputError thrown when the system cannot tell ("--node", "FILE:3:14: calibration", ...).
bool path_exists(const std::string& path, const std::string& what);

/// Whether `path` names an existing regular file (or a link to one); otherwise as path_exists.
bool is_regular_file(const std::string& path, const std::string& what);

/// Creates the directory `dir` and its parents where missing; an existing directory is fine. A core::InputError
/// naming `what` and the system's reason when it cannot.
void create_directories(const std::string& dir, const std::string& what);

/// The folder a command that writes files uses when it is run without `--out` (docs/sweep.md "Files"):
/// `base` (`<stem>.<command>` in the current folder) when nothing holds that name, else the first of `base-2`,
/// `base-3`, ... that nothing holds. The folder is created here, one name at a time with a single mkdir, so nothing
/// that exists is ever written over, even by two runs at once. A core::InputError naming `what` and the system's
/// reason when it cannot be created.
std::string new_output_dir(const std::string& base, const std::string& what);

/// The folder a command writes its files into: `out` (its --out DIR), created with its parents where missing; or,
/// when `out` is empty, a new folder `<stem>.<command>` in the current folder (new_output_dir). Core::InputErrors name
/// "<command>: --out" or "<command>".
std::string output_dir(const std::string& out, const std::string& stem, const std::string& command);

/// The one way a command writes a file of its output: `text` to `path` through a temporary file beside it and a
/// rename, so that a reader never sees half of it (a sweep's files are read while it runs). A core::InputError
/// naming the file and the system's reason when it cannot be written.
void write_file(const std::filesystem::path& path, const std::string& text);

} // namespace zerosim::core
