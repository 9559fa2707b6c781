// Byte units for people: the binary GiB every report and table divides by, and the text of a byte count.
#pragma once

#include <cstdint>
#include <string>

namespace zerosim::core {

/// Bytes in a MiB (2^20) and in a GiB (2^30): the units of the GiB columns and tables of every command, and of the
/// memory figures the training logs print.
inline constexpr double MIB = 1048576.0;
inline constexpr double GIB = 1073741824.0;

/// "68.98 GB (64.24 GiB)" style for people: decimal GB with two decimals and binary GiB.
std::string format_bytes(std::int64_t bytes);

/// "64.24 GiB" (binary units, two decimals; B, KiB, MiB, GiB, TiB).
std::string format_gib(std::int64_t bytes);

/// `bytes` in GiB with `decimals` digits after the point and the unit: "64.24 GiB" (always GiB).
std::string format_in_gib(double bytes, int decimals);

} // namespace zerosim::core
