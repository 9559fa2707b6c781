#include "config/units.hpp"

#include "core/text.hpp"

#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace zerosim::config {
namespace {

struct Unit {
  const char* name;
  double factor; // in the base unit of its kind
};

/// The power of ten of a decimal factor (1e9 -> 9), or nullopt for binary and bit factors.
std::optional<int> decimal_exponent(double factor)
{
  for (int e = -9; e <= 15; ++e)
    if (factor == std::pow(10.0, e) && factor != 1.0)
      return e;
  return std::nullopt;
}

constexpr double KI = 1024.0;

// Order matters only for format_quantity (largest first); parsing matches the whole suffix exactly.
const std::array<Unit, 9> BYTE_UNITS = {{{"TiB", KI* KI* KI* KI},
                                         {"TB", 1e12},
                                         {"GiB", KI* KI* KI},
                                         {"GB", 1e9},
                                         {"MiB", KI* KI},
                                         {"MB", 1e6},
                                         {"KiB", KI},
                                         {"KB", 1e3},
                                         {"B", 1.0}}};

// Bit rates: 1 b/s = 1/8 B/s. Gbps/Tbps are the networking spellings of Gb/s and Tb/s.
const std::array<Unit, 16> BANDWIDTH_UNITS = {{{"TiB/s", KI* KI* KI* KI},
                                               {"TB/s", 1e12},
                                               {"GiB/s", KI* KI* KI},
                                               {"GB/s", 1e9},
                                               {"MiB/s", KI* KI},
                                               {"MB/s", 1e6},
                                               {"KiB/s", KI},
                                               {"KB/s", 1e3},
                                               {"B/s", 1.0},
                                               {"Tb/s", 1e12 / 8},
                                               {"Tbps", 1e12 / 8},
                                               {"Gb/s", 1e9 / 8},
                                               {"Gbps", 1e9 / 8},
                                               {"Mb/s", 1e6 / 8},
                                               {"Kb/s", 1e3 / 8},
                                               {"b/s", 1.0 / 8}}};

const std::array<Unit, 4> COMPUTE_UNITS = {{{"PFLOPS", 1e15}, {"TFLOPS", 1e12}, {"GFLOPS", 1e9}, {"FLOPS", 1.0}}};

const std::array<Unit, 4> TIME_UNITS = {{{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}}};

template <class F> auto with_units(UnitKind kind, F&& f)
{
  switch (kind) {
  case UnitKind::BYTES:
    return f(BYTE_UNITS.data(), BYTE_UNITS.size());
  case UnitKind::BANDWIDTH:
    return f(BANDWIDTH_UNITS.data(), BANDWIDTH_UNITS.size());
  case UnitKind::COMPUTE:
    return f(COMPUTE_UNITS.data(), COMPUTE_UNITS.size());
  case UnitKind::TIME:
    break;
  }
  return f(TIME_UNITS.data(), TIME_UNITS.size());
}

std::string_view trim(std::string_view s)
{
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

/// Reads a leading decimal number (sign, digits, point, exponent); returns the characters used (0: none).
size_t read_number(std::string_view s, double& out)
{
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-'))
    ++i;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    ++i;
    ++digits;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      ++digits;
    }
  }
  if (digits == 0)
    return 0;
  // An exponent only if digits follow it, so "5e" is not a number and "5 EB" is no exponent.
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-'))
      ++j;
    size_t exp_digits = 0;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
      ++j;
      ++exp_digits;
    }
    if (exp_digits > 0)
      i = j;
  }
  std::string copy(s.substr(0, i));
  errno = 0;
  out = std::strtod(copy.c_str(), nullptr);
  if (errno == ERANGE || !std::isfinite(out))
    return 0;
  return i;
}

} // namespace

std::optional<double> parse_number(std::string_view text)
{
  text = trim(text);
  double v = 0;
  size_t used = read_number(text, v);
  if (used == 0 || used != text.size())
    return std::nullopt;
  return v;
}

std::optional<double> parse_quantity(std::string_view text, UnitKind kind)
{
  text = trim(text);
  double v = 0;
  size_t used = read_number(text, v);
  if (used == 0)
    return std::nullopt;
  std::string_view suffix = trim(text.substr(used));
  if (suffix.empty())
    return std::nullopt; // a bare number: the unit is required
  const std::string number(text.substr(0, used));
  return with_units(kind, [&](const Unit* units, size_t n) -> std::optional<double> {
    for (size_t i = 0; i < n; ++i)
      if (suffix == units[i].name) {
        // Decimal units: let strtod round "600e-9" once, so "600 ns" is the same double as 600e-9 and 6e-7.
        std::optional<int> e = decimal_exponent(units[i].factor);
        if (e && number.find_first_of("eE") == std::string::npos)
          return std::strtod((number + "e" + std::to_string(*e)).c_str(), nullptr);
        return v * units[i].factor; // binary and bit factors are powers of two: exact
      }
    return std::nullopt;
  });
}

std::string unit_suggestion(std::string_view text, UnitKind kind)
{
  text = trim(text);
  double v = 0;
  const size_t used = read_number(text, v);
  const std::string_view suffix = trim(text.substr(used));
  if (used == 0 || suffix.empty())
    return "";
  const auto lower = [](std::string_view w) { return core::lowercase(w); };
  std::vector<std::string> matches;
  with_units(kind, [&](const Unit* units, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (lower(units[i].name) == lower(suffix))
        matches.push_back(std::string(text.substr(0, used)) + " " + std::string(units[i].name));
    return 0;
  });
  if (matches.empty())
    return "";
  std::string out = " (did you mean '" + matches.front() + "'";
  for (size_t i = 1; i < matches.size(); ++i)
    out += " or '" + matches[i] + "'";
  return out + "?)";
}

std::string unit_expectation(UnitKind kind)
{
  switch (kind) {
  case UnitKind::BYTES:
    return "a size with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)";
  case UnitKind::BANDWIDTH:
    return "a bandwidth with a unit (B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, TiB/s, b/s, Kb/s, Mb/s, "
           "Gb/s, Tb/s, Gbps, Tbps)";
  case UnitKind::COMPUTE:
    return "a compute rate with a unit (FLOPS, GFLOPS, TFLOPS, PFLOPS)";
  case UnitKind::TIME:
    break;
  }
  return "a time with a unit (ns, us, ms, s)";
}

std::string format_quantity(double value, UnitKind kind)
{
  // Try units from the largest down; keep the first whose number has at most 6 significant digits and
  // reads back to exactly `value`. Bit-rate units are skipped: byte units always read back exactly.
  std::string best = with_units(kind, [&](const Unit* units, size_t n) -> std::string {
    for (size_t i = 0; i < n; ++i) {
      std::string_view name = units[i].name;
      if (kind == UnitKind::BANDWIDTH && name.find('b') != std::string_view::npos)
        continue;
      if (value != 0 && std::fabs(value) < units[i].factor)
        continue;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g %s", value / units[i].factor, units[i].name);
      std::optional<double> back = parse_quantity(buf, kind);
      if (back && *back == value)
        return buf;
    }
    return std::string();
  });
  if (!best.empty())
    return best;
  const char* base = kind == UnitKind::BYTES       ? "B"
                     : kind == UnitKind::BANDWIDTH ? "B/s"
                     : kind == UnitKind::COMPUTE   ? "FLOPS"
                                                   : "s";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g %s", value, base);
  return buf;
}

} // namespace zerosim::config
