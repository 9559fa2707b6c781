// The JSON vocabulary of zerosim: nlohmann's JSON with ordered objects (keys keep their insertion order, which the
// contract of docs/scenario-format.md fixes), one rule for numbers, and the one way to write it. The rest of the code
// says core::Json and core::dump_json, never nlohmann.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zerosim::core {

/// nlohmann's conversions, but for a double: an exact integer below 2^53 goes in as that integer (written
/// 68976648192, not nlohmann's 68976648192.0), NaN and the infinities as null (they are not JSON), any other double
/// as itself. It holds wherever a double becomes a core::Json: assigned, in an initializer list, and when parsed.
template <typename T, typename SFINAE = void> struct JsonSerializer : nlohmann::adl_serializer<T, SFINAE> {
};

template <> struct JsonSerializer<double> : nlohmann::adl_serializer<double> {
  template <typename BasicJson> static void to_json(BasicJson& j, double v)
  {
    if (!std::isfinite(v))
      j = nullptr;
    else if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) // 2^53: every integer below is exact
      j = static_cast<std::int64_t>(v);
    else
      nlohmann::adl_serializer<double>::to_json(j, v);
  }
};

/// A JSON value; objects keep their keys in insertion order (nlohmann::ordered_json with JsonSerializer).
using Json = nlohmann::basic_json<nlohmann::ordered_map, std::vector, std::string, bool, std::int64_t, std::uint64_t,
                                  double, std::allocator, JsonSerializer>;

/// `j` as text: indent < 0 on one line (nlohmann's compact form, `{"a":1,"b":[2,3]}`), otherwise pretty-printed
/// with `indent` spaces a level (`"key": value`, one member a line, `[]` and `{}` when empty). Bytes of a string that
/// are not UTF-8 are written as U+FFFD (nlohmann's "replace"): a name read from a user's file never makes the writer
/// throw. Doubles in nlohmann's round-trip form (Grisu2: the shortest digits but in roughly one double in a thousand,
/// which gets a digit more or another last digit; fixed notation from 1e-4 to below 1e15, else an exponent).
inline std::string dump_json(const Json& j, int indent)
{
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

/// The number at `path` in an object (`{"tflops_per_gpu", "model"}` of `zerosim run --json`'s), or nothing when it is
/// absent or not a number.
inline std::optional<double> number_at(const Json& j, std::initializer_list<const char*> path)
{
  const Json* v = &j;
  for (const char* k : path) {
    if (!v->is_object() || !v->contains(k))
      return std::nullopt;
    v = &(*v)[k];
  }
  return v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}

} // namespace zerosim::core
