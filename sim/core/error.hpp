// Error types. Library code throws; only cli/ turns an exception into a message and an exit status.
#pragma once

#include <stdexcept>
#include <string>

namespace zerosim::core {

/// Bad user input (a scenario, model or node file, a command-line argument). Exit status 2.
/// The message is complete and ready for people: "file:line:col: key.path: expected X, found Y".
class InputError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A configuration the input describes correctly but this version cannot simulate (for example fsdp.wrap other than
/// block or model, or FSDP's HYBRID_SHARD on one GPU per node: sim/schedule/fsdp.cpp). Exit status 2, with the
/// reason.
class UnsupportedError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A broken invariant inside zerosim. Exit status 3.
class InternalError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

} // namespace zerosim::core
