#include "core/text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace zerosim::core {

int edit_distance(std::string_view a, std::string_view b)
{
  // Optimal string alignment: Levenshtein's three operations plus the swap of two adjacent characters, each cost 1
  // (Damerau 1964, restricted: no substring edited twice). Three rows: the swap looks two rows back.
  std::vector<int> before(b.size() + 1), prev(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, row);
  }
  return prev[b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates)
{
  std::string best;
  int best_d = 1 << 30;
  for (const auto& c : candidates) {
    int d = edit_distance(word, c);
    if (d < best_d) { // first of equals wins: candidates come in a fixed order, so this is deterministic
      best_d = d;
      best = c;
    }
  }
  int limit = std::max<int>(1, static_cast<int>(word.size()) / 3);
  return best_d <= limit ? best : std::string();
}

std::string trim(std::string_view s)
{
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos)
    return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r") - b + 1));
}

std::string format_duration(double seconds)
{
  struct Unit {
    const char* name;
    double seconds;
  };
  constexpr Unit UNITS[] = {{"days", 86400}, {"h", 3600}, {"min", 60}};
  char buf[64];
  for (const Unit& u : UNITS)
    if (seconds >= 2 * u.seconds) {
      std::snprintf(buf, sizeof buf, "%.4g %s", seconds / u.seconds, u.name);
      return buf;
    }
  std::snprintf(buf, sizeof buf, "%.4g s", seconds);
  return buf;
}

std::string lowercase(std::string_view s)
{
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string format_number(double v)
{
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) { // an exact integer: no exponent, no ".0"
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
    return std::string(buf, end);
  }
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v); // shortest round-trip
  return std::string(buf, end);
}

std::string format_fixed(double v, int decimals)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string format_signed_pct(double v, int decimals)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.*f %%", decimals, v);
  return buf;
}

std::string markdown_cell(std::string s)
{
  for (auto& ch : s)
    if (ch == '|' || ch == '\n' || ch == '\r')
      ch = ch == '|' ? '/' : ' ';
  return s;
}

} // namespace zerosim::core
