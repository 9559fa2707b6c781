// Quantities with units, as written in scenario, model and node files (docs/config.md "Units").
// "80 GiB", "1.5 TB", "200 Gbps", "312 TFLOPS", "5 us": a number, an optional space, a unit.
// A bare number is refused where a unit is needed. No YAML here: plain strings in, SI values out.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zerosim::config {

enum class UnitKind {
  BYTES,     ///< B, KB, MB, GB, TB (10^3 steps), KiB, MiB, GiB, TiB (2^10 steps) -> bytes
  BANDWIDTH, ///< the byte units per second (B/s ... TiB/s), bit rates b/s ... Tb/s, Gbps, Tbps -> bytes per second
  COMPUTE,   ///< FLOPS, GFLOPS, TFLOPS, PFLOPS -> floating-point operations per second
  TIME,      ///< ns, us, ms, s -> seconds
};

/// The value of `text` in the base unit of `kind` (bytes, B/s, FLOP/s, s), or nullopt when the text is not
/// a number followed by one of the units of `kind` (a bare number included). Negative numbers parse;
/// callers decide what range makes sense.
std::optional<double> parse_quantity(std::string_view text, UnitKind kind);

/// "a size with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)" and so on: the WHAT of an error message.
std::string unit_expectation(UnitKind kind);

/// For a quantity parse_quantity refused: " (did you mean '200 Gbps'?)" when its unit matches one of `kind`'s units
/// but for letter case ("200 gbps"), naming both where two differ only in case ("gb/s": GB/s bytes, Gb/s bits);
/// "" otherwise.
std::string unit_suggestion(std::string_view text, UnitKind kind);

/// The shortest exact spelling of `value` (base unit of `kind`) that parse_quantity reads back to the same
/// double: "80 GiB", "2039 GB/s", "312 TFLOPS", "5 us"; falls back to the base unit with 17 digits.
std::string format_quantity(double value, UnitKind kind);

/// A plain number as DeepSpeed writes element counts: 500000000, 5e8, "5e8", 5.0e8. nullopt if not a number.
std::optional<double> parse_number(std::string_view text);

} // namespace zerosim::config
