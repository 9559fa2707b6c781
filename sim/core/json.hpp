// A small ordered JSON value and a deterministic writer: keys keep insertion order and
// numbers are printed in their shortest round-trip form, so equal inputs give equal bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace zerosim::core {

class Json {
public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;                      ///< null
  Json(std::nullptr_t) {}
  Json(bool b) : value_(b) {}
  Json(int v) : value_(static_cast<std::int64_t>(v)) {}
  Json(std::int64_t v) : value_(v) {}
  Json(double v) : value_(v) {}
  Json(const char* s) : value_(std::string(s)) {}
  Json(std::string s) : value_(std::move(s)) {}
  Json(Array a) : value_(std::move(a)) {}
  Json(Object o) : value_(std::move(o)) {}

  static Json object() { return Json(Object{}); }
  static Json array() { return Json(Array{}); }

  /// Object: set (or replace) `key`, keeping first-insertion order. Returns *this.
  Json& set(const std::string& key, Json v);
  /// Array: append.
  Json& push(Json v);

  bool is_null() const { return std::holds_alternative<std::monostate>(value_); }
  const Json* find(const std::string& key) const;   ///< object member or nullptr

  /// Serialise. indent < 0: one line; otherwise pretty-printed with that many spaces.
  std::string dump(int indent = 2) const;

private:
  void write(std::string& out, int indent, int depth) const;
  std::variant<std::monostate, bool, std::int64_t, double, std::string, Array, Object> value_;
};

/// Shortest decimal form of `v` that reads back to the same double ("1e+21" style avoided for
/// integers below 2^53). NaN and infinities are not JSON: they are written as null.
std::string format_number(double v);

} // namespace zerosim::core
