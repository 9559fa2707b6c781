// Small text helpers shared by the validation reports (memory.md, report.md).
#pragma once

#include "validation/memory_validation.hpp"

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace zerosim::validation::text {

/// `v` with `decimals` digits after the point.
inline std::string fixed(double v, int decimals)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// A signed percentage, "+12.3 %".
inline std::string signed_pct(double v)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f %%", v);
  return buf;
}

/// A Markdown table cell: no pipe, no line break.
inline std::string cell(std::string s)
{
  for (auto& ch : s)
    if (ch == '|' || ch == '\n' || ch == '\r')
      ch = ch == '|' ? '/' : ' ';
  return s;
}

/// The Markdown table of median and 90th-percentile absolute errors, one row per group.
inline void stats_table(std::ostringstream& md, const std::vector<ErrorStats>& stats)
{
  md << "| group | n | median abs error | p90 abs error |\n|---|---:|---:|---:|\n";
  for (const auto& s : stats)
    md << "| " << s.group << " | " << s.n << " | " << fixed(s.median_abs_pct, 1) << " % | " << fixed(s.p90_abs_pct, 1)
       << " % |\n";
}

} // namespace zerosim::validation::text
