#include "core/stats.hpp"

#include "core/text.hpp"

#include <algorithm>
#include <cmath>

namespace zerosim::core {

ErrorStats error_stats(const std::string& group, std::vector<double> errors_pct)
{
  ErrorStats s;
  s.group = group;
  s.n = static_cast<int>(errors_pct.size());
  if (errors_pct.empty())
    return s;
  auto quantile = [](const std::vector<double>& sorted, double q) {
    double pos = q * static_cast<double>(sorted.size() - 1);
    auto lo = static_cast<std::size_t>(std::floor(pos));
    auto hi = static_cast<std::size_t>(std::ceil(pos));
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
  };
  std::vector<double> abs_errors = errors_pct;
  std::sort(errors_pct.begin(), errors_pct.end());
  s.median_signed_pct = quantile(errors_pct, 0.5);
  for (auto& v : abs_errors)
    v = std::abs(v);
  std::sort(abs_errors.begin(), abs_errors.end());
  s.median_abs_pct = quantile(abs_errors, 0.5);
  s.p90_abs_pct = quantile(abs_errors, 0.9);
  return s;
}

void error_stats_table(std::ostream& md, const std::vector<ErrorStats>& stats)
{
  if (stats.empty()) {
    md << "(none)\n";
    return;
  }
  md << "| group | n | median abs error | p90 abs error | median signed error |\n|---|---:|---:|---:|---:|\n";
  for (const auto& s : stats)
    md << "| " << s.group << " | " << s.n << " | " << format_fixed(s.median_abs_pct, 1) << " % | "
       << format_fixed(s.p90_abs_pct, 1) << " % | " << format_signed_pct(s.median_signed_pct, 1) << " |\n";
}

} // namespace zerosim::core
