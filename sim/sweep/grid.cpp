#include "sweep/grid.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

namespace zerosim::sweep {

namespace {

using core::trim;

constexpr std::uint64_t MAX_POINTS = std::uint64_t{1} << 62;
constexpr std::size_t MAX_VALUES = 1'000'000;

bool parse_number(const std::string& text, double& v)
{
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+')
    ++first;
  auto [end, ec] = std::from_chars(first, last, v);
  return ec == std::errc() && end == last && std::isfinite(v);
}

bool is_integer(double v)
{
  return v == std::floor(v) && std::abs(v) < 9e15;
}

/// A value of a range as `--set` will read it: an integer without a point, else the shortest form that reads back.
std::string number_text(double v, bool integers)
{
  char buf[64];
  if (integers) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

} // namespace

Grid::Grid(std::vector<Axis> axes) : axes_(std::move(axes))
{
  std::set<std::string> seen;
  for (const Axis& a : axes_) {
    if (a.values.empty())
      throw core::InputError("sweep: " + a.key + ": no values to sweep");
    if (!seen.insert(a.key).second)
      throw core::InputError("sweep: " + a.key + ": swept twice");
    const auto n = static_cast<std::uint64_t>(a.values.size());
    if (size_ > MAX_POINTS / n)
      throw core::InputError("sweep: the grid has more than 2^62 points (the product of its axes' sizes)");
    size_ *= n;
  }
}

std::vector<std::string> Grid::point(std::uint64_t point) const
{
  if (point >= size_)
    throw core::InternalError("sweep: point " + std::to_string(point) + " of a grid of " + std::to_string(size_));
  std::vector<std::string> out(axes_.size());
  for (std::size_t k = axes_.size(); k-- > 0;) {
    const auto n = static_cast<std::uint64_t>(axes_[k].values.size());
    out[k] = axes_[k].values[static_cast<std::size_t>(point % n)];
    point /= n;
  }
  return out;
}

std::vector<std::string> Grid::sets(std::uint64_t p) const
{
  const std::vector<std::string> v = point(p);
  std::vector<std::string> out;
  for (std::size_t k = 0; k < axes_.size(); ++k)
    out.push_back(axes_[k].key + "=" + v[k]);
  return out;
}

std::uint64_t Grid::points_in(const Shard& shard) const
{
  if (shard.whole())
    return size_;
  // Points I-1, I-1+N, ... below size_.
  return size_ > shard.index - 1 ? (size_ - shard.index) / shard.count + 1 : 0;
}

namespace {

/// The decimal places (0 to 15) that make `x` a whole number, or -1 when none does (or x is beyond 2^53 at them).
int decimal_places(double x)
{
  double scale = 1;
  for (int d = 0; d <= 15; ++d, scale *= 10) {
    const double s = x * scale;
    if (std::abs(s) >= 9007199254740992.0)
      return -1;
    if (std::abs(s - std::round(s)) <= 1e-9 * std::max(1.0, std::abs(s)))
      return d;
  }
  return -1;
}

} // namespace

std::vector<std::string> expand(const std::string& where, const std::string& entry)
{
  const std::string text = trim(entry);
  const auto dots = text.find("..");
  if (dots == std::string::npos)
    return {text};
  const std::string lo_text = trim(text.substr(0, dots));
  std::string rest = text.substr(dots + 2);
  std::string step_text;
  if (const auto colon = rest.find(':'); colon != std::string::npos) {
    step_text = trim(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  const std::string hi_text = trim(rest);
  const std::string form = " (ranges: A..B, A..B:+S or A..B:xF; docs/sweep.md)";
  double lo = 0, hi = 0;
  // A value with ".." that is no range of numbers (a path such as ../models/x.yaml) is a plain value.
  if (!parse_number(lo_text, lo) || !parse_number(hi_text, hi))
    return {text};
  if (hi < lo)
    throw core::InputError(where + ": empty range \"" + text + "\": its end " + hi_text + " is below its start " +
                           lo_text);
  bool geometric = false;
  double step = 1;
  if (!step_text.empty()) {
    geometric = step_text[0] == 'x' || step_text[0] == '*';
    const bool additive = step_text[0] == '+';
    if ((!geometric && !additive) || !parse_number(step_text.substr(1), step))
      throw core::InputError(where + ": expected a step +S or a factor xF after ':', found \"" + step_text + "\"" +
                             form);
    if (additive && !(step > 0))
      throw core::InputError(where + ": the step of \"" + text + "\" must be above 0");
    if (geometric && !(step > 1))
      throw core::InputError(where + ": the factor of \"" + text + "\" must be above 1");
    if (geometric && !(lo > 0))
      throw core::InputError(where + ": a geometric range must start above 0, found \"" + text + "\"");
  }
  const bool integers = is_integer(lo) && is_integer(step);
  std::vector<std::string> out;
  // Values by count, not by repeated addition; and an additive range of decimals in whole tenths, hundredths, ...
  // (d places): value i is (lo·10^d + i·step·10^d) / 10^d, whole numbers divided once, the double nearest the
  // decimal. So 0..1:+0.1 gives 0.3, where lo + 3·step is 0.30000000000000004.
  const double tolerance = 1e-9 * std::max(1.0, std::abs(hi));
  const int lo_places = decimal_places(lo);
  const int step_places = decimal_places(step);
  const bool decimal = !geometric && lo_places >= 0 && step_places >= 0;
  const double scale = decimal ? std::pow(10.0, std::max(lo_places, step_places)) : 1.0;
  for (std::size_t i = 0;; ++i) {
    const double n = static_cast<double>(i);
    const double v = geometric ? lo * std::pow(step, n)
                     : decimal ? (std::round(lo * scale) + n * std::round(step * scale)) / scale
                               : lo + step * n;
    if (v > hi + tolerance)
      break;
    if (out.size() == MAX_VALUES)
      throw core::InputError(where + ": the range \"" + text + "\" has more than 1,000,000 values");
    out.push_back(number_text(integers ? std::round(v) : v, integers));
  }
  return out;
}

std::vector<Axis> axes_of(const std::vector<std::pair<std::string, std::vector<std::string>>>& block,
                          const std::vector<std::string>& arguments)
{
  std::vector<Axis> axes;
  for (const auto& [key, entries] : block) {
    Axis a;
    a.key = key;
    for (const std::string& e : entries)
      for (std::string& v : expand("sweep." + key, e))
        a.values.push_back(std::move(v));
    axes.push_back(std::move(a));
  }
  for (const std::string& arg : arguments) {
    const auto eq = arg.find('=');
    const std::string key = trim(arg.substr(0, eq));
    if (eq == std::string::npos || key.empty())
      throw core::InputError("--sweep: expected KEY=V1,V2,... (a dotted scenario key), found \"" + arg + "\"");
    Axis a;
    a.key = key;
    std::string list = arg.substr(eq + 1);
    std::size_t start = 0;
    while (start <= list.size()) {
      const auto comma = list.find(',', start);
      const std::string entry =
          trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (!entry.empty())
        for (std::string& v : expand("--sweep " + key, entry))
          a.values.push_back(std::move(v));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    if (a.values.empty())
      throw core::InputError("--sweep " + key + ": no values (expected KEY=V1,V2,... or a range such as 1..64:x2)");
    bool replaced = false;
    for (Axis& b : axes)
      if (b.key == key) {
        b = a;
        replaced = true;
      }
    if (!replaced)
      axes.push_back(std::move(a));
  }
  return axes;
}

Shard parse_shard(const std::string& text)
{
  const auto slash = text.find('/');
  Shard s;
  auto num = [](const std::string& t, std::uint64_t& v) {
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && ec == std::errc() && end == t.data() + t.size();
  };
  if (slash == std::string::npos || !num(text.substr(0, slash), s.index) || !num(text.substr(slash + 1), s.count) ||
      s.count < 1 || s.index < 1 || s.index > s.count)
    throw core::InputError("--shard: expected I/N with 1 <= I <= N (as a job array's index and size), found \"" + text +
                           "\"");
  return s;
}

} // namespace zerosim::sweep
