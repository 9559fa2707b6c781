// Small text helpers shared by the validation reports (memory.md, report.md).
#pragma once

#include "core/text.hpp"
#include "validation/memory_validation.hpp"

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace zerosim::validation::text {

/// `v` with `decimals` digits after the point.
inline std::string fixed(double v, int decimals)
{
  return core::format_fixed(v, decimals);
}

/// A signed percentage, "+12.3 %".
inline std::string signed_pct(double v)
{
  return core::format_signed_pct(v, 1);
}

/// A Markdown table cell: no pipe, no line break.
inline std::string cell(std::string s)
{
  for (auto& ch : s)
    if (ch == '|' || ch == '\n' || ch == '\r')
      ch = ch == '|' ? '/' : ' ';
  return s;
}

/// The Markdown table of median and 90th-percentile absolute errors, one row per group; "(none)" when empty.
inline void stats_table(std::ostringstream& md, const std::vector<ErrorStats>& stats)
{
  if (stats.empty()) {
    md << "(none)\n";
    return;
  }
  md << "| group | n | median abs error | p90 abs error | median signed error |\n|---|---:|---:|---:|---:|\n";
  for (const auto& s : stats)
    md << "| " << s.group << " | " << s.n << " | " << fixed(s.median_abs_pct, 1) << " % | " << fixed(s.p90_abs_pct, 1)
       << " % | " << signed_pct(s.median_signed_pct) << " |\n";
}

/// The sharding group of a row's statistics: "stage N" for DeepSpeed, the FSDP strategy ("FSDP FULL_SHARD") or
/// "DDP" for the PyTorch frameworks.
inline std::string strategy_group(const RowInfo& info)
{
  if (info.framework == "DeepSpeed" || info.strategy.empty())
    return "stage " + std::to_string(info.stage);
  return info.strategy;
}

/// The per-framework summaries of a report, the known frameworks first in the order the reports list them
/// (DeepSpeed, FSDP, DDP), each with its `framework` label set.
template <class Summary> std::vector<Summary> framework_rows()
{
  std::vector<Summary> out;
  for (const char* f : {"DeepSpeed", "FSDP", "DDP"}) {
    Summary s;
    s.framework = f;
    out.push_back(s);
  }
  return out;
}

/// The summary of `label` in `out` (an empty label is DeepSpeed's); a label not there yet is appended, so any
/// other framework follows the known ones in first-seen order.
template <class Summary> Summary& framework_entry(std::vector<Summary>& out, const std::string& label)
{
  const std::string f = label.empty() ? std::string("DeepSpeed") : label;
  for (Summary& s : out)
    if (s.framework == f)
      return s;
  Summary s;
  s.framework = f;
  out.push_back(s);
  return out.back();
}

} // namespace zerosim::validation::text
