#include "core/json.hpp"

#include "core/error.hpp"

#include <charconv>
#include <cmath>

namespace zerosim::core {

Json& Json::set(const std::string& key, Json v)
{
  if (is_null())
    value_ = Object{};
  auto* obj = std::get_if<Object>(&value_);
  if (obj == nullptr)
    throw InternalError("Json::set on a value that is not an object");
  for (auto& [k, existing] : *obj)
    if (k == key) {
      existing = std::move(v);
      return *this;
    }
  obj->emplace_back(key, std::move(v));
  return *this;
}

Json& Json::push(Json v)
{
  if (is_null())
    value_ = Array{};
  auto* arr = std::get_if<Array>(&value_);
  if (arr == nullptr)
    throw InternalError("Json::push on a value that is not an array");
  arr->push_back(std::move(v));
  return *this;
}

const Json* Json::find(const std::string& key) const
{
  const auto* obj = std::get_if<Object>(&value_);
  if (obj == nullptr)
    return nullptr;
  for (const auto& [k, v] : *obj)
    if (k == key)
      return &v;
  return nullptr;
}

std::string format_number(double v)
{
  if (!std::isfinite(v))
    return "null";
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) { // exact integer: no exponent, no ".0"
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
    return std::string(buf, end);
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v); // shortest round-trip
  return std::string(buf, end);
}

static void write_string(std::string& out, const std::string& s)
{
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void Json::write(std::string& out, int indent, int depth) const
{
  auto newline = [&](int d) {
    if (indent < 0)
      return;
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  if (std::holds_alternative<std::monostate>(value_)) {
    out += "null";
  } else if (const auto* b = std::get_if<bool>(&value_)) {
    out += *b ? "true" : "false";
  } else if (const auto* i = std::get_if<std::int64_t>(&value_)) {
    out += std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&value_)) {
    out += format_number(*d);
  } else if (const auto* s = std::get_if<std::string>(&value_)) {
    write_string(out, *s);
  } else if (const auto* a = std::get_if<Array>(&value_)) {
    if (a->empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t n = 0; n < a->size(); ++n) {
      if (n > 0)
        out += indent < 0 ? ", " : ",";
      newline(depth + 1);
      (*a)[n].write(out, indent, depth + 1);
    }
    newline(depth);
    out += ']';
  } else if (const auto* o = std::get_if<Object>(&value_)) {
    if (o->empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (size_t n = 0; n < o->size(); ++n) {
      if (n > 0)
        out += indent < 0 ? ", " : ",";
      newline(depth + 1);
      write_string(out, (*o)[n].first);
      out += ": ";
      (*o)[n].second.write(out, indent, depth + 1);
    }
    newline(depth);
    out += '}';
  }
}

std::string Json::dump(int indent) const
{
  std::string out;
  write(out, indent, 0);
  return out;
}

} // namespace zerosim::core
