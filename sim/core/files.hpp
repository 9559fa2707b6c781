// File-system questions about paths a user gave, answered without std::filesystem_error: a path the system
// cannot examine (a name longer than the system allows, a component that is a file, no permission) is an input
// error naming what the path was given as and the system's reason, never an internal error (docs/fuzzing.md).
#pragma once

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

} // namespace zerosim::core
