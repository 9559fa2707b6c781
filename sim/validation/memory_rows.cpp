// The memory and fit mappings: a published memory figure or fit statement as a MemoryCase or FitCase, or the
// reason it is not covered (docs/validation.md).
#include "validation/row_mapping.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace zerosim::validation {

using namespace detail;

namespace {

void map_estimator_row(const PublishedRow& row, RowMapping& into, const spec::MappingRules& rules)
{
  RowInfo info = info_of(row);
  auto params_b = leading_number(field(row, "params_B"));
  auto figure = plain_number(field(row, "peak_mem_GB"));
  auto stage = plain_int(field(row, "zero_stage"));
  static const std::regex largest_re(R"(largest layer\s+(\d+(?:\.\d+)?)M)");
  std::smatch lm;
  const std::string& model = field(row, "model");
  bool has_largest = std::regex_search(model, lm, largest_re);
  std::string why;
  if (!params_b)
    why = "parameter count not given";
  else if (!figure)
    why = "figure '" + field(row, "peak_mem_GB") + "' is not a single number";
  else if (!stage || (*stage != 2 && *stage != 3))
    why = "DeepSpeed has estimators for stages 2 and 3 only (stage '" + field(row, "zero_stage") + "')";
  else if (*stage == 3 && !has_largest)
    why = "stage-3 estimator needs the largest layer's parameter count, not given";
  if (!why.empty()) {
    into.not_covered.push_back({info.row_id, info.source_id, model, "memory", why, info.framework});
    return;
  }
  MemoryCase c;
  c.info = info;
  c.metric = MemMetric::ESTIMATOR;
  c.metric_text = field(row, "mem_metric");
  c.unit = "GiB";
  c.measured_bytes = *figure * figure_unit_bytes(row);
  memory::EstimatorQuery q;
  q.total_params = static_cast<std::int64_t>(std::llround(*params_b * 1e9));
  q.largest_layer_params = has_largest ? static_cast<std::int64_t>(std::llround(std::stod(lm.str(1)) * 1e6)) : 0;
  auto gpn = leading_number(field(row, "gpus_per_node"));
  auto nodes = leading_number(field(row, "nodes"));
  auto total = leading_number(field(row, "total_gpus"));
  q.gpus_per_node = gpn ? static_cast<int>(*gpn) : total ? static_cast<int>(*total) : 1;
  q.nodes = nodes ? static_cast<int>(*nodes) : 1;
  q.stage = *stage;
  q.offload_optimizer = parse_offload(field(row, "offload_optimizer")) == spec::OffloadDevice::CPU;
  q.offload_param = parse_offload(field(row, "offload_param")) == spec::OffloadDevice::CPU;
  c.estimator = q;
  c.estimator_zero_init = !contains(c.metric_text, "zero_init=0");
  // The older formula is DeepSpeed's ZeRO-2 one without offload; its source's data says which rows print it.
  const spec::SourceRule* src = rule_of(row, rules);
  c.estimator_older_formula = q.stage == 2 && !q.offload_optimizer && src && src->estimator_older_formula &&
                              matches(src->estimator_older_formula->when, row, q.stage);
  c.info.stage = *stage;
  c.info.offload = !q.offload_optimizer ? "none" : q.offload_param ? "opt cpu + param cpu" : "opt cpu + param none";
  std::ostringstream cfg;
  cfg << "estimator ZeRO-" << q.stage << ", " << q.nodes << " x " << q.gpus_per_node << " GPUs, params "
      << q.total_params;
  if (q.stage == 3)
    cfg << ", largest layer " << q.largest_layer_params << ", zero_init " << (c.estimator_zero_init ? 1 : 0);
  c.info.config = cfg.str();
  add_note(c.info.assumptions, "parameter count from params_B (rounded as published)");
  if (c.estimator_older_formula)
    add_note(c.info.assumptions, src->estimator_older_formula->note);
  into.memory.push_back(std::move(c));
}

std::optional<MemMetric> metric_of(const std::string& metric_text)
{
  if (contains(metric_text, "nvidia-smi"))
    return MemMetric::DEVICE_USED;
  if (contains(metric_text, "allocated"))
    return MemMetric::ALLOCATED;
  if (contains(metric_text, "reserved") || contains(metric_text, "cached"))
    return MemMetric::RESERVED;
  return std::nullopt;
}

void map_memory_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into,
                    const spec::MappingRules& rules)
{
  RowInfo info = info_of(row);
  auto figure = plain_number(field(row, "peak_mem_GB"));
  auto metric = metric_of(field(row, "mem_metric"));
  std::string shape_notes;
  auto shape = shape_of(row, shape_notes);
  std::string why;
  if (!figure)
    why = "figure '" + field(row, "peak_mem_GB") + "' is not one number for one configuration";
  else if (!metric)
    why = "memory metric '" + field(row, "mem_metric") +
          "' is none the model predicts (torch allocated, reserved, nvidia-smi used)";
  else if (!dimension_of(field(row, "layers")) || !dimension_of(field(row, "hidden")) ||
           !leading_number(field(row, "heads")))
    why = "model dimensions not given ('" + info.model + "')";
  else if (!shape)
    why = "micro-batch not given";
  else if (node_name_of(row, rules.general).empty())
    why = "no node file for GPU '" + field(row, "gpu") + "'";
  if (!why.empty()) {
    into.not_covered.push_back({info.row_id, info.source_id, info.model, "memory", why, info.framework});
    return;
  }
  info.assumptions = shape_notes;
  MemoryCase c;
  c.scenario = row_scenario(row, load_node, *shape, info, rules);
  c.metric = *metric;
  c.metric_text = field(row, "mem_metric");
  double unit = figure_unit_bytes(row);
  c.unit = unit == core::GIB ? "GiB" : "GB";
  c.measured_bytes = *figure * unit;
  if (c.unit == "GB")
    add_note(info.assumptions, "figures in GB read as 10^9 bytes (README trap 7)");
  if (auto tol = chart_tolerance(field(row, "evidence_type")))
    add_note(info.assumptions, "read off a chart, +/-" + number_text(*tol) + " " + c.unit);
  // torch's active_bytes (allocated blocks plus blocks whose release waits on another stream, record_stream) has no
  // predicted counterpart.
  static const std::regex active_re(R"(\bactive\s+(\d+(?:\.\d+)?))");
  std::smatch am;
  if (std::regex_search(c.metric_text, am, active_re))
    add_note(info.assumptions, "'active " + am.str(1) + "' not compared: torch's active bytes are not predicted");
  c.info = info;
  // A second figure in the same metric text: "torch max allocated (rank 0); max reserved 18.84 GB" (DeepSpeed log),
  // "peak allocated 47 / active 63 / reserved 78 GB" (FSDP paper, Figure 6).
  static const std::regex reserved_re(R"(reserved\s+(\d+(?:\.\d+)?))");
  std::smatch rm;
  bool second = c.metric == MemMetric::ALLOCATED && std::regex_search(c.metric_text, rm, reserved_re);
  MemoryCase reserved = c;
  into.memory.push_back(std::move(c));
  if (second) {
    reserved.metric = MemMetric::RESERVED;
    reserved.measured_bytes = std::stod(rm.str(1)) * unit;
    into.memory.push_back(std::move(reserved));
  }
}

/// A fit statement that the configuration as written ran out of memory ("OOM at BS 1").
bool claims_oom(const std::string& claim)
{
  return lower(trim(claim)).rfind("oom", 0) == 0;
}

void map_fit_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into,
                 const spec::MappingRules& rules)
{
  RowInfo info = info_of(row);
  const std::string& claim = field(row, "max_model_fit");
  auto size = claimed_size(claim);
  bool max_batch = contains(claim, "max bs");
  std::string kind = size ? "max-model" : "fit";
  // exclusions() lets through only rows with one DeepSpeed stage or a stated FSDP strategy.
  const spec::SourceRule* src = rule_of(row, rules);
  const int stage = *equivalent_stage(row, rules);
  std::string why;
  if (node_name_of(row, rules.general).empty())
    why = "no node file for GPU '" + field(row, "gpu") + "'";
  Shape shape;
  std::string shape_note;
  auto layers = dimension_of(field(row, "layers"));
  auto hidden = dimension_of(field(row, "hidden"));
  auto heads = leading_number(field(row, "heads"));
  if (layers && hidden && heads) {
    shape = {*layers, *hidden, static_cast<int>(*heads), 0};
  } else if (size) {
    // The shape the source's table gives that size (its model_sizes data).
    if (src) {
      for (const spec::SourceModelSize& p : src->model_sizes) {
        if (*size == p.size) {
          shape = {p.layers, p.hidden, p.heads, p.micro_batch, p.tensor_parallel};
          shape_note = p.citation;
        }
      }
    }
    // At stage 0-2 every GPU holds its tensor-parallel shard of all 16-bit parameters: a size whose shard alone
    // exceeds one GPU cannot have run with the model-parallel degree known for it.
    const double params = std::stod(*size) * 1e9;
    const int tp = shape.tensor_parallel > 0 ? shape.tensor_parallel : tensor_parallel_of(row);
    auto gpu_gib = leading_number(field(row, "gpu_mem_GB"));
    if (why.empty() && stage < 3 && gpu_gib && 2.0 * params / tp > *gpu_gib * core::GIB) {
      std::ostringstream os;
      os << "the " << *size << " model's fp16 parameters alone (" << std::round(2.0 * params / tp / core::GIB)
         << " GiB per GPU at tensor parallelism " << tp << ") exceed one " << *gpu_gib << " GB GPU at ZeRO stage "
         << stage << " (parameters replicated), and the row gives no model-parallel degree";
      why = os.str();
    }
    if (why.empty() && shape.layers == 0)
      why = "no published shape (layers, hidden) for the " + *size + " model of '" + claim + "'";
  } else if (why.empty()) {
    why = "model dimensions not given ('" + info.model + "')";
  }
  if (!why.empty()) {
    into.not_covered.push_back({info.row_id, info.source_id, info.model, kind, why, info.framework});
    return;
  }
  if (!shape_note.empty())
    add_note(info.assumptions, "shape: " + shape_note);
  if (auto mb = leading_number(field(row, "micro_batch")))
    shape.micro_batch = static_cast<int>(*mb);
  if (shape.micro_batch == 0) {
    shape.micro_batch = 1;
    add_note(info.assumptions, "micro-batch 1 assumed (not stated)");
  }
  FitCase f;
  f.ran = row_scenario(row, load_node, shape, info, rules);
  f.info = info;
  f.claim = claim;
  f.expect_fit = !claims_oom(claim);
  if (!f.expect_fit) {
    // "OOM at BS 1" (Accelerate FSDP blog, Table 2: DDP on GPT-2 XL): the configuration as written must be predicted
    // not to fit; there is no larger one to test.
  } else if (size) {
    spec::Scenario twice = f.ran;
    twice.model.layers *= 2;
    twice.name += " at twice the layers";
    f.doubled = twice;
    f.claimed_params = std::stod(*size) * 1e9;
    // The papers' own size ladders grow the layer count at a fixed hidden size around these sizes: ZeRO-Offload
    // Table 3 runs 10B, 11B, 12B, 13B and 15B as 50, 55, 60, 65 and 78 layers of 4096 (published.csv rows 56-59,
    // 69); ZeRO-Infinity Table 4 runs 10B, 13B and 20B as 50, 64 and 98 layers of 4096 (row 101 notes).
    f.family = "layers at hidden " + std::to_string(f.ran.model.hidden) +
               " (the papers' size ladders grow the layer count at a fixed hidden size: ZeRO-Offload Table 3, "
               "ZeRO-Infinity Table 4); heads, micro-batch, sequence, GPUs and offload as ran";
  } else if (max_batch) {
    spec::Scenario twice = f.ran;
    twice.training.micro_batch *= 2;
    twice.training.global_batch *= 2;
    twice.name += " at twice the micro-batch";
    f.doubled = twice;
  }
  into.fits.push_back(std::move(f));
}

} // namespace

void map_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into, const spec::MappingRules& rules)
{
  bool has_mem = !trim(field(row, "peak_mem_GB")).empty();
  bool has_fit = !trim(field(row, "max_model_fit")).empty();
  if (!has_mem && !has_fit) {
    ++into.other_rows;
    return;
  }
  if (has_mem && field(row, "provenance") == "estimator") {
    map_estimator_row(row, into, rules);
    return;
  }
  auto why = exclusions(row, rules);
  // The throughput validation compares pipeline rows (docs/validation.md, "Pipeline rows"); their memory figures are
  // per-stage peaks of runs whose metric (nvidia-smi, the first or last stage) the memory mapping does not read.
  if (why.empty() && pipeline_parallel_of(row) > 1)
    why.push_back({CAT_TP_PP, "pipeline parallelism (pp " + trim(field(row, "pp")) +
                                  "): the memory validation does not map pipeline runs' per-stage figures ('" +
                                  field(row, "mem_metric") + "'); the throughput validation compares the row's time"});
  if (!why.empty()) {
    std::string reason = joined(why);
    std::string kind = has_mem ? "memory" : claimed_size(field(row, "max_model_fit")) ? "max-model" : "fit";
    into.not_covered.push_back(
        {field(row, "row_id"), field(row, "source_id"), field(row, "model"), kind, reason, framework_label(row)});
    return;
  }
  if (has_mem)
    map_memory_row(row, load_node, into, rules);
  if (has_fit)
    map_fit_row(row, load_node, into, rules);
}

RowMapping map_rows(const std::vector<PublishedRow>& rows, const NodeLoader& load_node, const spec::MappingRules& rules)
{
  RowMapping m;
  for (const auto& r : rows)
    map_row(r, load_node, m, rules);
  return m;
}

// ---------------------------------------------------------------------------------------------------
// Time and throughput rows

} // namespace zerosim::validation
