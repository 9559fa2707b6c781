// Small text helpers shared by the validation reports (memory.md, report.md).
#pragma once

#include <cstdio>
#include <string>

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

} // namespace zerosim::validation::text
