// The general readers of published.csv cells: numbers, "8 (inferred)", stages, offload devices, figures and
// their units. No per-source knowledge lives here (results/validation/sources/ holds it), nor any general rule's data
// (results/validation/rules.yaml).
#include "validation/row_mapping.hpp"

#include "core/text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace zerosim::validation {

namespace detail {

std::string lower(std::string s)
{
  return core::lowercase(s);
}

bool contains(const std::string& haystack, const std::string& needle)
{
  return lower(haystack).find(lower(needle)) != std::string::npos;
}

bool contains_any(const std::string& haystack, const std::vector<std::string>& needles)
{
  return std::any_of(needles.begin(), needles.end(), [&](const std::string& n) { return contains(haystack, n); });
}

bool contains_all(const std::string& haystack, const std::vector<std::string>& needles)
{
  return std::all_of(needles.begin(), needles.end(), [&](const std::string& n) { return contains(haystack, n); });
}

std::string trim(const std::string& s)
{
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return "";
  auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

const std::string& field(const PublishedRow& row, const std::string& key)
{
  static const std::string empty;
  auto it = row.find(key);
  return it == row.end() ? empty : it->second;
}

/// The whole field as a number ("13.1", "1e9"), or nullopt when anything else is written there.
std::optional<double> plain_number(const std::string& text)
{
  std::string t = trim(text);
  if (t.empty())
    return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size())
    return std::nullopt;
  return v;
}

std::optional<int> plain_int(const std::string& text)
{
  auto v = plain_number(text);
  if (!v || *v != std::floor(*v))
    return std::nullopt;
  return static_cast<int>(*v);
}

/// The first "<number>B" model size in a max_model_fit text ("ZeRO-Offload 13B" -> "13B").
std::optional<std::string> claimed_size(const std::string& claim)
{
  static const std::regex re(R"((\d+(?:\.\d+)?)B\b)");
  std::smatch m;
  if (std::regex_search(claim, m, re))
    return m.str(0);
  return std::nullopt;
}

spec::OffloadDevice parse_offload(const std::string& text)
{
  std::string t = lower(text);
  if (t.rfind("cpu", 0) == 0)
    return spec::OffloadDevice::CPU;
  if (t.rfind("nvme", 0) == 0)
    return spec::OffloadDevice::NVME;
  return spec::OffloadDevice::NONE;
}

void add_note(std::string& notes, const std::string& note)
{
  if (!notes.empty())
    notes += "; ";
  notes += note;
}

/// The ZeRO stage of a zero_stage cell: "2", or a stage with a remark in parentheses ("2 (single GPU)").
std::optional<int> stage_of(const std::string& text)
{
  std::string t = trim(text);
  if (auto s = plain_int(t))
    return s;
  static const std::regex re(R"(^([0-3])\s*\(.*\)$)");
  std::smatch m;
  if (std::regex_match(t, m, re))
    return std::stoi(m.str(1));
  return std::nullopt;
}

std::string number_text(double v)
{
  std::ostringstream os;
  os << v;
  return os.str();
}

/// A model dimension: a whole number, or one followed by a remark in parentheses ("96 (assumed)": the FSDP
/// paper's minGPT 175B, whose GPT-3 shape the data file assumes); nullopt otherwise.
std::optional<int> dimension_of(const std::string& text)
{
  if (auto v = plain_int(text))
    return v;
  static const std::regex re(R"(^\s*(\d+)\s*\(.*\)\s*$)");
  std::smatch m;
  if (std::regex_match(text, m, re))
    return std::stoi(m.str(1));
  return std::nullopt;
}

bool matches(const spec::RowMatch& when, const PublishedRow& row, std::optional<int> stage)
{
  const std::pair<const std::string*, const char*> texts[] = {
      {&when.locator_contains, "locator"},
      {&when.framework_contains, "framework"},
      {&when.model_contains, "model"},
      {&when.precision_contains, "precision"},
      {&when.checkpointing_contains, "activation_checkpointing"}};
  for (const auto& [text, column] : texts)
    if (!text->empty() && !contains(field(row, column), *text))
      return false;
  if (when.stage && when.stage != stage)
    return false;
  if (when.pipeline && *when.pipeline != (pipeline_parallel_of(row) > 1))
    return false;
  if (when.offload_any.empty())
    return true;
  for (const std::string& o : when.offload_any) {
    const std::size_t blank = o.find(' ');
    const std::string column = o.substr(0, blank) == "optimizer" ? "offload_optimizer" : "offload_param";
    if (parse_offload(field(row, column)) == parse_offload(o.substr(blank + 1)))
      return true;
  }
  return false;
}

const spec::SourceRule* rule_of(const PublishedRow& row, const spec::MappingRules& rules)
{
  return rules.find(field(row, "source_id"));
}

} // namespace detail

using namespace detail;

std::string to_string(MemMetric m)
{
  switch (m) {
  case MemMetric::ALLOCATED:
    return "allocated";
  case MemMetric::RESERVED:
    return "reserved";
  case MemMetric::DEVICE_USED:
    return "nvidia-smi used (bound)";
  case MemMetric::ESTIMATOR:
    return "estimator";
  }
  return "?";
}

std::optional<double> leading_number(const std::string& text)
{
  std::string t = trim(text);
  if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.'))
    return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str())
    return std::nullopt;
  return v;
}

double figure_unit_bytes(const PublishedRow& row)
{
  const std::string& metric = field(row, "mem_metric");
  if (field(row, "provenance") == "estimator")
    return core::GIB; // DeepSpeed's estimators print bytes / 2**30 (docs/deepspeed-schedule.md §10.2)
  if (contains(metric, "mib") || contains(metric, "gib") || contains(field(row, "peak_mem_GB"), "gib"))
    return core::GIB;
  if (contains(field(row, "evidence_type"), "log"))
    return core::GIB; // DeepSpeed see_memory_usage and Megatron print bytes / 2**30 (README trap 7)
  return 1e9;
}

std::string to_string(TimeMetric m)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
    return "step time";
  case TimeMetric::SAMPLES_PER_S:
    return "samples/s";
  case TimeMetric::TOKENS_PER_S_TOTAL:
    return "tokens/s (all GPUs)";
  case TimeMetric::TOKENS_PER_S_PER_GPU:
    return "tokens/s per GPU";
  case TimeMetric::TFLOPS_MODEL:
    return "TFLOPs/GPU (model)";
  case TimeMetric::TFLOPS_HARDWARE:
    return "TFLOPs/GPU (hardware)";
  case TimeMetric::MFU:
    return "MFU";
  case TimeMetric::HFU:
    return "HFU";
  case TimeMetric::DERIVED_STEP_TIME:
    return "step time (derived)";
  case TimeMetric::BACKWARD_TIME:
    return "backward time";
  case TimeMetric::CPU_ADAM_TIME:
    return "CPU-Adam step";
  }
  return "?";
}

std::string unit_of(TimeMetric m)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
  case TimeMetric::DERIVED_STEP_TIME:
  case TimeMetric::BACKWARD_TIME:
  case TimeMetric::CPU_ADAM_TIME:
    return "s";
  case TimeMetric::SAMPLES_PER_S:
    return "samples/s";
  case TimeMetric::TOKENS_PER_S_TOTAL:
  case TimeMetric::TOKENS_PER_S_PER_GPU:
    return "tokens/s";
  case TimeMetric::TFLOPS_MODEL:
  case TimeMetric::TFLOPS_HARDWARE:
    return "TFLOPs";
  case TimeMetric::MFU:
  case TimeMetric::HFU:
    return "";
  }
  return "";
}

std::string definition_of(TimeMetric m)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
    return "seconds per optimizer step";
  case TimeMetric::SAMPLES_PER_S:
    return "global batch / step time";
  case TimeMetric::TOKENS_PER_S_TOTAL:
    return "global batch x sequence / step time";
  case TimeMetric::TOKENS_PER_S_PER_GPU:
    return "tokens/s over the GPU count";
  case TimeMetric::TFLOPS_MODEL:
    return "model FLOPs (no recompute) per step / step time / GPU";
  case TimeMetric::TFLOPS_HARDWARE:
    return "FLOPs with the recomputed forward per step / step time / GPU";
  case TimeMetric::MFU:
    return "model TFLOPs over dense peak";
  case TimeMetric::HFU:
    return "hardware TFLOPs over dense peak";
  case TimeMetric::DERIVED_STEP_TIME:
    return "seconds per step, derived by the file from throughput (not measured)";
  case TimeMetric::BACKWARD_TIME:
    return "first backward or recompute task start to last backward, recompute or gradient-reduce task end, rank 0";
  case TimeMetric::CPU_ADAM_TIME:
    return "sum of rank 0's CPU-Adam update tasks";
  }
  return "";
}

bool is_component(TimeMetric m)
{
  return m == TimeMetric::BACKWARD_TIME || m == TimeMetric::CPU_ADAM_TIME;
}

bool is_time(TimeMetric m)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
  case TimeMetric::DERIVED_STEP_TIME:
  case TimeMetric::BACKWARD_TIME:
  case TimeMetric::CPU_ADAM_TIME:
    return true;
  case TimeMetric::SAMPLES_PER_S:
  case TimeMetric::TOKENS_PER_S_TOTAL:
  case TimeMetric::TOKENS_PER_S_PER_GPU:
  case TimeMetric::TFLOPS_MODEL:
  case TimeMetric::TFLOPS_HARDWARE:
  case TimeMetric::MFU:
  case TimeMetric::HFU:
    return false;
  }
  return false;
}

ParsedFigure parse_figure(const std::string& text)
{
  ParsedFigure p;
  std::string t = trim(text);
  if (t.empty())
    return p;
  static const std::string NUM = R"(([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?))";
  static const std::regex single("^(~?)\\s*" + NUM + R"(\s*(?:\((.*)\))?$)");
  static const std::regex range("^" + NUM + R"(\s*-\s*)" + NUM + "$");
  static const std::regex backward(R"(^backward only:\s*)" + NUM + "$", std::regex::icase);
  std::smatch m;
  if (std::regex_match(t, m, backward)) {
    p.value = std::stod(m.str(1));
    p.part = "backward";
    p.note = "backward pass only";
    return p;
  }
  if (std::regex_match(t, m, range)) {
    double lo = std::stod(m.str(1)), hi = std::stod(m.str(2));
    p.value = (lo + hi) / 2;
    p.half_range = std::abs(hi - lo) / 2;
    p.note = "midpoint of the printed range " + t;
    return p;
  }
  if (std::regex_match(t, m, single)) {
    std::string remark = m.str(3);
    if (contains(remark, "failed")) {
      p.why_not = "the run failed at the source (no throughput to compare)";
      return p;
    }
    if (contains(remark, "ambiguous") || contains(remark, "as printed")) {
      p.why_not = "the source's columns are ambiguous (" + remark + ")";
      return p;
    }
    if (std::stod(m.str(2)) == 0) {
      p.why_not = "a zero figure";
      return p;
    }
    p.value = std::stod(m.str(2));
    if (!m.str(1).empty())
      p.note = "approximate ('~' in the source)";
    if (!remark.empty())
      add_note(p.note, "the source adds: " + remark);
    return p;
  }
  if (contains(t, "epoch"))
    p.why_not = "a time per epoch, and the row does not give the samples per epoch";
  else if (contains(t, " for ") && contains(t, "samples"))
    p.why_not = "a total time for a number of samples, not a step time";
  else if (contains(t, "up to"))
    p.why_not = "an upper bound over configurations ('up to'), not one measurement";
  else if (contains(t, " or "))
    p.why_not = "two candidate values (ambiguous)";
  else if (t.find(';') != std::string::npos || t.find(':') != std::string::npos)
    p.why_not = "several values for different configurations in one cell";
  else
    p.why_not = "not one number";
  return p;
}

std::optional<double> chart_tolerance(const std::string& evidence_type)
{
  static const std::regex re(R"(\+/-\s*([0-9]+(?:\.[0-9]+)?))");
  std::smatch m;
  if (std::regex_search(evidence_type, m, re))
    return std::stod(m.str(1));
  return std::nullopt;
}

} // namespace zerosim::validation
