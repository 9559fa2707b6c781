#include "validation/run_validation.hpp"
#include "validation/report_common.hpp"
#include "validation/throughput_parts.hpp"

#include "compute/compute_model.hpp"
#include "config/scenario_loader.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/stats.hpp"
#include "core/text.hpp"
#include "core/worker_pool.hpp"
#include "engine/engine.hpp"
#include "metrics/run_metrics.hpp"
#include "run/run_scenario.hpp"
#include "spec/names.hpp"
#include "workload/transformer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace zerosim::validation {

namespace throughput_parts {

using core::one_line;

// The categories a runner outcome adds to the not-covered groups (the mapping's are in published_rows.cpp).
const char* const CAT_UNSUPPORTED = "not modelled by the engine yet";
const char* const CAT_REJECTED = "scenario refused by the pipeline";

/// Four significant digits, in the unit of the metric (MFU and HFU as percent).
std::string figure_text(TimeMetric m, double v)
{
  if (m == TimeMetric::MFU || m == TimeMetric::HFU)
    return core::format_fixed(v * 100, 1) + " %";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  std::string u = unit_of(m);
  return u.empty() ? std::string(buf) : std::string(buf) + " " + u;
}

std::string tolerance_text(const TimeFigure& f)
{
  if (!f.tolerance)
    return "";
  char buf[96];
  if (f.metric == TimeMetric::MFU || f.metric == TimeMetric::HFU)
    std::snprintf(buf, sizeof buf, "+/-%.3g pt", *f.tolerance * 100);
  else
    std::snprintf(buf, sizeof buf, "+/-%.3g (%.1f %%)", *f.tolerance, *f.tolerance / f.value * 100);
  return buf;
}

// ---- the worker's payload on its pipe (core::run_pool): "key value" lines ---------------------------------

std::string serialize(const PredictedFigures& p)
{
  std::ostringstream os;
  auto num = [&](const char* k, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    os << k << ' ' << buf << '\n';
  };
  num("step_time_s", p.step_time_s);
  num("samples_per_s", p.samples_per_s);
  num("tokens_per_s", p.tokens_per_s);
  num("tflops_model", p.tflops_model);
  num("tflops_hardware", p.tflops_hardware);
  num("mfu", p.mfu);
  num("hfu", p.hfu);
  num("backward_s", p.backward_s);
  num("cpu_adam_s", p.cpu_adam_s);
  os << "gpus " << p.gpus << '\n' << "fits " << (p.fits ? 1 : 0) << '\n' << "replay " << one_line(p.replay) << '\n';
  for (const auto& w : p.warnings)
    os << "warning " << one_line(w) << '\n';
  return os.str();
}

PredictedFigures deserialize(const std::string& text)
{
  std::istringstream is(text);
  PredictedFigures p;
  std::map<std::string, double*> nums = {{"step_time_s", &p.step_time_s},
                                         {"samples_per_s", &p.samples_per_s},
                                         {"tokens_per_s", &p.tokens_per_s},
                                         {"tflops_model", &p.tflops_model},
                                         {"tflops_hardware", &p.tflops_hardware},
                                         {"mfu", &p.mfu},
                                         {"hfu", &p.hfu},
                                         {"backward_s", &p.backward_s},
                                         {"cpu_adam_s", &p.cpu_adam_s}};
  std::string line;
  while (std::getline(is, line)) {
    auto sp = line.find(' ');
    std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (auto it = nums.find(key); it != nums.end())
      *it->second = std::strtod(value.c_str(), nullptr);
    else if (key == "gpus")
      p.gpus = std::atoi(value.c_str());
    else if (key == "fits")
      p.fits = value == "1";
    else if (key == "replay")
      p.replay = value;
    else if (key == "warning")
      p.warnings.push_back(value);
  }
  return p;
}

/// Numeric order of row ids ("9" before "10"); ids that are not numbers after those, as text.
bool row_id_less(const std::string& a, const std::string& b)
{
  char* ea = nullptr;
  char* eb = nullptr;
  long na = std::strtol(a.c_str(), &ea, 10), nb = std::strtol(b.c_str(), &eb, 10);
  bool a_num = !a.empty() && *ea == '\0', b_num = !b.empty() && *eb == '\0';
  if (a_num != b_num)
    return a_num;
  if (a_num && na != nb)
    return na < nb;
  return a < b;
}

/// A row's primary figure's error under the priors (the report's own predictions).
std::optional<double> priors_error(const ThroughputComparison& r)
{
  return r.figures.front().error_pct;
}

void add_group_stats(std::vector<core::ErrorStats>& out, const std::string& prefix,
                     const std::vector<const ThroughputComparison*>& rows, const ErrorOf& error_of,
                     const std::function<std::string(const ThroughputComparison&)>& key)
{
  std::map<std::string, std::vector<double>> groups;
  for (const auto* r : rows)
    if (std::optional<double> e = error_of(*r))
      groups[key(*r)].push_back(*e);
  for (auto& [k, v] : groups)
    out.push_back(core::error_stats(prefix + k, v));
}

/// The report's groups: source, framework, ZeRO stage or strategy, offload, GPU kind, scale band, pipeline schedule and
/// degree (pipeline rows), overall.
std::vector<core::ErrorStats> stats_of(const std::vector<const ThroughputComparison*>& rows, const ErrorOf& error_of)
{
  std::vector<core::ErrorStats> out;
  std::vector<double> all;
  for (const auto* r : rows)
    if (std::optional<double> e = error_of(*r))
      all.push_back(*e);
  if (all.empty())
    return out;
  add_group_stats(out, "source ", rows, error_of, [](const ThroughputComparison& r) { return r.c.info.source_id; });
  add_group_stats(out, "framework ", rows, error_of, [](const ThroughputComparison& r) { return r.c.info.framework; });
  add_group_stats(out, "", rows, error_of, [](const ThroughputComparison& r) { return strategy_group(r.c.info); });
  add_group_stats(out, "offload ", rows, error_of, [](const ThroughputComparison& r) { return r.c.info.offload; });
  add_group_stats(out, "GPU ", rows, error_of, [](const ThroughputComparison& r) { return r.c.scenario.gpu_kind(); });
  add_group_stats(out, "GPU / framework ", rows, error_of,
                  [](const ThroughputComparison& r) { return spec::accuracy_group(r.c.scenario); });
  add_group_stats(out, "scale ", rows, error_of, [](const ThroughputComparison& r) { return scale_band(r.c); });
  // Pipeline rows also by schedule and pipeline degree ("pipeline 1f1b pp 12"); the other rows are in no such group.
  std::vector<const ThroughputComparison*> pipelined;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(pipelined),
               [](const ThroughputComparison* r) { return !r->c.info.pipeline.empty(); });
  add_group_stats(out, "pipeline ", pipelined, error_of,
                  [](const ThroughputComparison& r) { return r.c.info.pipeline; });
  out.push_back(core::error_stats("overall", all));
  return out;
}

/// The whole-step comparisons of a report.
std::vector<const ThroughputComparison*> whole_step_rows(const ThroughputReport& r)
{
  std::vector<const ThroughputComparison*> out;
  for (const auto& c : r.comparisons)
    if (!is_component(c.figures.front().figure.metric))
      out.push_back(&c);
  return out;
}

int gpus_of(const ThroughputCase& c)
{
  return c.scenario.cluster.total_gpus();
}

std::string stage_text(const ThroughputCase& c)
{
  if (c.info.framework == "DeepSpeed" || c.info.strategy.empty())
    return std::to_string(c.info.stage);
  return c.info.strategy;
}

std::vector<FrameworkSummary> framework_summaries(const ThroughputReport& r)
{
  auto out = framework_rows<FrameworkSummary>();
  auto entry = [&](const std::string& label) -> FrameworkSummary& { return framework_entry(out, label); };
  std::map<std::string, std::vector<double>> errors;
  for (const auto& c : r.comparisons) {
    FrameworkSummary& s = entry(c.c.info.framework);
    ++s.rows;
    if (is_component(c.figures.front().figure.metric)) {
      ++s.component;
    } else {
      ++s.compared;
      errors[s.framework].push_back(c.figures.front().error_pct);
    }
  }
  for (const auto& f : r.failures) {
    FrameworkSummary& s = entry(f.c.info.framework);
    ++s.rows;
    ++s.failed;
  }
  for (const auto& n : r.not_covered) {
    FrameworkSummary& s = entry(n.framework);
    ++s.rows;
    ++s.not_covered;
  }
  for (auto& s : out)
    if (!errors[s.framework].empty())
      s.whole_step = core::error_stats("framework " + s.framework, errors[s.framework]);
  return out;
}

std::size_t component_count(const ThroughputReport& r)
{
  return static_cast<std::size_t>(std::count_if(r.comparisons.begin(), r.comparisons.end(), [](const auto& c) {
    return is_component(c.figures.front().figure.metric);
  }));
}

/// Not-covered rows per category, in the order of first appearance, with counts.
std::vector<std::pair<std::string, std::vector<const ThroughputNotCovered*>>> by_category(const ThroughputReport& r)
{
  std::vector<std::pair<std::string, std::vector<const ThroughputNotCovered*>>> groups;
  for (const auto& n : r.not_covered) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == n.category; });
    if (it == groups.end()) {
      groups.push_back({n.category, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(&n);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  return groups;
}

} // namespace throughput_parts

using namespace throughput_parts;

std::string scale_band(const ThroughputCase& c)
{
  const int nodes = c.scenario.cluster.nodes;
  if (nodes <= 1)
    return "1 node";
  return nodes <= 64 ? "2-64 nodes" : "more than 64 nodes";
}

std::vector<core::ErrorStats> whole_step_stats(const ThroughputReport& r, const ErrorOf& error_of)
{
  return stats_of(whole_step_rows(r), error_of);
}

std::optional<double> median_of_source_medians(const ThroughputReport& r, const ErrorOf& error_of)
{
  std::vector<double> medians;
  for (const core::ErrorStats& s : whole_step_stats(r, error_of))
    if (s.group.rfind("source ", 0) == 0)
      medians.push_back(s.median_abs_pct);
  if (medians.empty())
    return std::nullopt;
  return core::error_stats("", medians).median_abs_pct;
}

std::string to_string(RowStatus s)
{
  switch (s) {
  case RowStatus::DONE:
    return "done";
  case RowStatus::UNSUPPORTED:
    return "not modelled";
  case RowStatus::REJECTED:
    return "refused";
  case RowStatus::FAILED:
    return "failed";
  case RowStatus::TIMED_OUT:
    return "timed out";
  }
  return "?";
}

double predicted_value(TimeMetric m, const PredictedFigures& p)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
  case TimeMetric::DERIVED_STEP_TIME:
    return p.step_time_s;
  case TimeMetric::SAMPLES_PER_S:
    return p.samples_per_s;
  case TimeMetric::TOKENS_PER_S_TOTAL:
    return p.tokens_per_s;
  case TimeMetric::TOKENS_PER_S_PER_GPU:
    return p.gpus > 0 ? p.tokens_per_s / p.gpus : 0;
  case TimeMetric::TFLOPS_MODEL:
    return p.tflops_model;
  case TimeMetric::TFLOPS_HARDWARE:
    return p.tflops_hardware;
  case TimeMetric::MFU:
    return p.mfu;
  case TimeMetric::HFU:
    return p.hfu;
  case TimeMetric::BACKWARD_TIME:
    return p.backward_s;
  case TimeMetric::CPU_ADAM_TIME:
    return p.cpu_adam_s;
  }
  return 0;
}

double signed_error_pct(TimeMetric m, double predicted, double measured)
{
  const double relative = (predicted - measured) / measured * 100.0;
  return is_time(m) ? -relative : relative;
}

PredictedFigures predict_case(const ThroughputCase& c)
{
  const spec::Scenario& s = c.scenario;
  const run::RunResult result = run::run_scenario(s);
  const metrics::RunMetrics& m = result.metrics;
  const engine::Timeline& t = result.timeline;
  PredictedFigures p;
  p.step_time_s = m.step_time_s;
  p.samples_per_s = m.samples_per_s;
  p.tokens_per_s = m.tokens_per_s;
  p.tflops_model = m.tflops_model;
  p.tflops_hardware = m.tflops_hardware;
  p.mfu = m.mfu;
  p.hfu = m.hfu;
  p.gpus = s.cluster.total_gpus();
  p.fits = m.memory.fits;
  p.replay = t.replay;
  p.warnings = m.warnings;
  // Component timings of global rank 0 (DeepSpeed's timers, which these figures come from, run on every rank
  // and are printed by rank 0).
  auto r0 = std::find_if(t.ranks.begin(), t.ranks.end(), [](const engine::RankTimeline& r) { return r.rank == 0; });
  if (r0 != t.ranks.end()) {
    double bw_start = std::numeric_limits<double>::infinity(), bw_end = 0;
    for (std::size_t i = 0; i < r0->graph.tasks.size(); ++i) {
      const spec::Task& k = r0->graph.tasks[i];
      const engine::TaskTime& tt = r0->times[i];
      if (k.kind == spec::TaskKind::CPU_COMPUTE && k.phase == spec::Phase::OPTIMIZER && k.flops > 0)
        p.cpu_adam_s += tt.end - tt.start;
      if (k.phase == spec::Phase::BACKWARD || k.phase == spec::Phase::RECOMPUTE) {
        bw_start = std::min(bw_start, tt.start);
        bw_end = std::max(bw_end, tt.end);
      }
      if (k.phase == spec::Phase::GRAD_REDUCE)
        bw_end = std::max(bw_end, tt.end);
    }
    p.backward_s = std::isfinite(bw_start) ? bw_end - bw_start : 0;
  }
  return p;
}

std::vector<RowOutcome> run_cases(const std::vector<ThroughputCase>& cases, const Predictor& predictor,
                                  const RunOptions& options)
{
  std::vector<RowOutcome> outcomes(cases.size());
  core::PoolOptions pool;
  pool.jobs = options.jobs;
  pool.time_limit_s = options.row_time_limit_s;
  core::run_pool(
      core::count_to(cases.size()), [&](std::size_t i) { return serialize(predictor(cases[i])); },
      [&](std::size_t i, const core::WorkOutcome& w) {
        RowOutcome& o = outcomes[i];
        o.wall_s = w.wall_s;
        o.message = w.message;
        switch (w.status) {
        case core::WorkStatus::DONE:
          o.status = RowStatus::DONE;
          o.predicted = deserialize(w.payload);
          break;
        case core::WorkStatus::UNSUPPORTED:
          o.status = RowStatus::UNSUPPORTED;
          break;
        case core::WorkStatus::REJECTED:
          o.status = RowStatus::REJECTED;
          break;
        case core::WorkStatus::FAILED:
          o.status = RowStatus::FAILED;
          break;
        case core::WorkStatus::TIMED_OUT:
          o.status = RowStatus::TIMED_OUT;
          break;
        }
        if (options.on_done)
          options.on_done(i, o);
      },
      pool);
  return outcomes;
}

ThroughputReport assemble_report(int rows_total, const ThroughputMapping& mapping,
                                 const std::vector<RowOutcome>& outcomes)
{
  if (outcomes.size() != mapping.cases.size())
    throw core::InternalError("assemble_report: " + std::to_string(outcomes.size()) + " outcomes for " +
                              std::to_string(mapping.cases.size()) + " cases");
  ThroughputReport r;
  r.rows_total = rows_total;
  r.not_covered = mapping.not_covered;
  for (std::size_t i = 0; i < mapping.cases.size(); ++i) {
    const ThroughputCase& c = mapping.cases[i];
    const RowOutcome& o = outcomes[i];
    switch (o.status) {
    case RowStatus::DONE: {
      ThroughputComparison cmp;
      cmp.c = c;
      cmp.predicted = o.predicted;
      cmp.wall_s = o.wall_s;
      for (const auto& f : c.figures) {
        FigureComparison fc;
        fc.figure = f;
        fc.predicted = predicted_value(f.metric, o.predicted);
        fc.error_pct = signed_error_pct(f.metric, fc.predicted, f.value);
        cmp.figures.push_back(fc);
      }
      r.comparisons.push_back(std::move(cmp));
      break;
    }
    case RowStatus::UNSUPPORTED:
      r.not_covered.push_back(
          {c.info.row_id, c.info.source_id, c.info.model, CAT_UNSUPPORTED, o.message, c.info.framework});
      break;
    case RowStatus::REJECTED:
      r.not_covered.push_back(
          {c.info.row_id, c.info.source_id, c.info.model, CAT_REJECTED, o.message, c.info.framework});
      break;
    case RowStatus::FAILED:
    case RowStatus::TIMED_OUT:
      r.failures.push_back({c, o.status, o.message});
      break;
    }
  }
  std::stable_sort(r.not_covered.begin(), r.not_covered.end(),
                   [](const auto& a, const auto& b) { return row_id_less(a.row_id, b.row_id); });
  std::vector<const ThroughputComparison*> whole, component;
  for (const auto& c : r.comparisons)
    (is_component(c.figures.front().figure.metric) ? component : whole).push_back(&c);
  r.stats = stats_of(whole, priors_error);
  r.component_stats = stats_of(component, priors_error);
  r.frameworks = framework_summaries(r);
  return r;
}

namespace {

/// The rows of published.csv (stacks.csv merged) mapped to cases once, with the node files near it: every run of a
/// command (the ablation's nine) starts from the same mapping.
struct ThroughputInput {
  int rows_total = 0;
  ThroughputMapping mapping;
};

ThroughputInput map_throughput_input(const std::vector<PublishedRow>& rows, const NodeLoader& load_node,
                                     const spec::MappingRules& rules)
{
  return {static_cast<int>(rows.size()), map_throughput_rows(rows, load_node, rules)};
}

/// Runs every case of `input` with `mechanisms` (progress lines to `out` when `progress`).
ThroughputReport run_throughput(const ThroughputInput& input, std::ostream& out, int jobs, double row_time_limit_s,
                                const spec::Mechanisms& mechanisms, bool progress)
{
  ThroughputMapping mapping = input.mapping;
  for (ThroughputCase& c : mapping.cases)
    c.scenario.mechanisms = mechanisms;
  if (progress) {
    out << "throughput validation: " << mapping.cases.size() << " rows to simulate, " << mapping.not_covered.size()
        << " not covered; " << std::max(1, jobs) << " workers, " << core::format_fixed(row_time_limit_s, 0)
        << " s per row at most\n";
    out.flush();
  }
  RunOptions options;
  options.jobs = jobs;
  options.row_time_limit_s = row_time_limit_s;
  std::size_t finished = 0;
  if (progress)
    options.on_done = [&](std::size_t i, const RowOutcome& o) {
      out << "  [" << ++finished << "/" << mapping.cases.size() << "] row " << mapping.cases[i].info.row_id << ": "
          << to_string(o.status) << ", " << core::format_fixed(o.wall_s, 1) << " s\n";
      out.flush();
    };
  std::vector<RowOutcome> outcomes = run_cases(mapping.cases, predict_case, options);
  return assemble_report(input.rows_total, mapping, outcomes);
}

/// The rows a mechanism acts on (docs/validation.md "Ablation").
struct AblationTarget {
  bool spec::Mechanisms::*mechanism;
  const char* rows;
  bool (*applies)(const ThroughputComparison&);
};

/// The name `--without` / `--with` gives `flag` (spec::MECHANISMS).
std::string mechanism_name(bool spec::Mechanisms::*flag)
{
  for (const auto& [name, f] : spec::MECHANISMS)
    if (f == flag)
      return name;
  throw core::InternalError("ablation: a mechanism spec::MECHANISMS does not name");
}

bool multi_gpu(const ThroughputComparison& c)
{
  return c.c.scenario.world() > 1;
}

/// A row with a GEMM the alignment rule slows (compute::alignment_share below 1: a 16-bit GEMM, or an unfused
/// attention product, with n or k not a multiple of 8, on a GPU kind with a `misaligned_gemm` figure).
bool misaligned_gemm(const ThroughputComparison& c)
{
  const spec::Scenario& s = c.c.scenario;
  const compute::GpuEfficiency e = compute::gpu_efficiency(s);
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  for (const workload::Layer& layer : w.layers)
    for (const workload::Op& op : layer.ops) {
      const bool product = op.kind == workload::OpKind::GEMM ||
                           (op.kind == workload::OpKind::ATTENTION && !workload::is_fused_attention(op));
      if (product && compute::alignment_share(op, s.training.precision, e) < 1.0)
        return true;
    }
  return false;
}

const AblationTarget ABLATION_TARGETS[] = {
    {&spec::Mechanisms::stack, "every row with a stack in stacks.csv",
     [](const ThroughputComparison& c) { return c.c.scenario.software.stated; }},
    {&spec::Mechanisms::nccl_protocols, "rows on more than one GPU", multi_gpu},
    {&spec::Mechanisms::achieved_busbw, "rows on more than one GPU", multi_gpu},
    {&spec::Mechanisms::per_module_fetch, "DeepSpeed ZeRO-3 rows",
     [](const ThroughputComparison& c) {
       return c.c.scenario.framework == spec::Framework::DEEPSPEED && c.c.scenario.deepspeed.zero.stage == 3;
     }},
    {&spec::Mechanisms::host_dispatch, "every row", [](const ThroughputComparison&) { return true; }},
    {&spec::Mechanisms::sustained_clock, "rows on a GPU under a power cap (sustained clock below 1)",
     [](const ThroughputComparison& c) {
       return compute::sustained_clock(c.c.scenario.cluster.node.gpu, c.c.scenario.kernels) < 1.0;
     }},
    {&spec::Mechanisms::interference, "rows on more than one GPU", multi_gpu},
    {&spec::Mechanisms::communicator, "rows on more than one GPU", multi_gpu},
    {&spec::Mechanisms::copies, "FSDP rows and rows in torch AMP",
     [](const ThroughputComparison& c) {
       const spec::Precision p = c.c.scenario.training.precision;
       return c.c.scenario.framework == spec::Framework::FSDP || p == spec::Precision::AMP_BF16 ||
              p == spec::Precision::AMP_FP16;
     }},
    {&spec::Mechanisms::model_code, "every row (each runs its model code's element-wise kernels)",
     [](const ThroughputComparison&) { return true; }},
    {&spec::Mechanisms::alignment, "rows with a 16-bit GEMM whose n or k is not a multiple of 8", misaligned_gemm},
};

/// One line of ablation.md: the medians with the mechanism on (`a`) and off (`b`) over the same rows; "none" when
/// the mechanism acts on no compared row.
std::string ablation_line(const std::string& mechanism, const std::string& rows, const core::ErrorStats& a,
                          const core::ErrorStats& b)
{
  std::string line = "| " + mechanism + " | " + rows + " | " + std::to_string(a.n) + " | ";
  if (a.n == 0)
    return line + "none | none | | | |\n";
  return line + core::format_fixed(a.median_abs_pct, 1) + " % | " + core::format_fixed(b.median_abs_pct, 1) + " % | " +
         core::format_signed_pct(a.median_abs_pct - b.median_abs_pct, 1) + " | " +
         core::format_signed_pct(a.median_signed_pct, 1) + " | " + core::format_signed_pct(b.median_signed_pct, 1) +
         " |\n";
}

/// The row ids whose primary figure is a whole-step one, compared in `r`.
std::set<std::string> whole_step_ids(const ThroughputReport& r)
{
  std::set<std::string> ids;
  for (const ThroughputComparison* c : whole_step_rows(r))
    ids.insert(c->c.info.row_id);
  return ids;
}

/// Median |error| and median signed error of the primary whole-step figure over the rows `row_ids` names.
core::ErrorStats stats_on(const ThroughputReport& r, const std::set<std::string>& row_ids)
{
  std::vector<double> errors;
  for (const ThroughputComparison& c : r.comparisons)
    if (!is_component(c.figures.front().figure.metric) && row_ids.count(c.c.info.row_id))
      errors.push_back(c.figures.front().error_pct);
  return core::error_stats("", errors);
}

} // namespace

std::map<std::string, spec::AccuracyBand> priors_accuracy_bands(const ThroughputReport& r)
{
  std::map<std::string, std::vector<double>> errors;
  for (const ThroughputComparison* c : whole_step_rows(r)) {
    errors[spec::accuracy_group(c->c.scenario)].push_back(c->figures.front().error_pct);
    errors[spec::ACCURACY_OVERALL].push_back(c->figures.front().error_pct);
  }
  std::map<std::string, spec::AccuracyBand> out;
  for (const auto& [group, e] : errors) {
    const core::ErrorStats st = core::error_stats(group, e);
    spec::AccuracyBand b;
    b.kind = spec::AccuracyKind::PRIORS;
    b.median_abs_error_pct = st.median_abs_pct;
    b.p90_abs_error_pct = st.p90_abs_pct;
    b.median_signed_error_pct = st.median_signed_pct;
    b.rows = st.n;
    out[group] = b;
  }
  return out;
}

ThroughputReport run_throughput_report(const std::string& csv, std::ostream& out, int jobs, double row_time_limit_s,
                                       const spec::Mechanisms& mechanisms)
{
  const std::vector<PublishedRow> rows = read_published_rows(csv);
  const ThroughputInput input = map_throughput_input(rows, node_loader_near(csv), mapping_rules_near(csv));
  ThroughputReport r = run_throughput(input, out, jobs, row_time_limit_s, mechanisms, true);
  r.causes = read_row_causes(csv, rows);
  return r;
}

void write_throughput_report(const ThroughputReport& r, const std::string& out_dir, std::ostream& out)
{
  core::create_directories(out_dir, "--out");
  core::write_file(out_dir + "/report.md", render_throughput_markdown(r));
  core::write_file(out_dir + "/report.csv", render_throughput_csv(r));
  core::write_file(out_dir + "/priors-accuracy.yaml",
                   config::priors_accuracy_yaml(priors_accuracy_bands(r), "zerosim validate --run"));
  out << render_headline(r) << "report: " << out_dir << "/report.md\n";
}

int validate_run_command(const std::string& csv, const std::string& out_dir, std::ostream& out,
                         const ValidateRunOptions& o, const RowsFit& fit)
{
  ThroughputReport r = run_throughput_report(csv, out, o.jobs, 300, o.mechanisms);
  if (o.fit) {
    r.calibrated = fit(csv, o, out);
  } else {
    r.calibrated = CalibratedErrors{};
    r.calibrated->not_run = "validate was asked for the priors only (--priors-only)";
  }
  write_throughput_report(r, out_dir, out);
  return r.failures.empty() ? 0 : 1;
}

int write_row_scenarios(const std::string& csv, const std::string& out_dir, std::ostream& out)
{
  const std::vector<PublishedRow> rows = read_published_rows(csv);
  const ThroughputInput input = map_throughput_input(rows, node_loader_near(csv), mapping_rules_near(csv));
  core::create_directories(out_dir, "--scenarios");
  for (const ThroughputCase& c : input.mapping.cases) {
    std::ostringstream text;
    text << "# Validation row " << c.info.row_id << " (" << c.info.source_id << ": " << c.info.source << ", "
         << c.info.locator << "), as `zerosim validate --run` maps it; generated, do not edit.\n"
         << "# Measured: " << c.figures.front().column << " = " << c.figures.front().written << "\n";
    if (!c.info.assumptions.empty())
      text << "# Assumed: " << c.info.assumptions << "\n";
    text << config::resolved_yaml(c.scenario);
    core::write_file(out_dir + "/row-" + c.info.row_id + ".yaml", text.str());
  }
  out << "wrote " << input.mapping.cases.size() << " row scenarios (of " << input.rows_total << " rows; the rest are "
      << "not covered, as report.md says) to " << out_dir << "\n";
  return 0;
}

int validate_ablation_command(const std::string& csv, const std::string& out_dir, std::ostream& out, int jobs,
                              double row_time_limit_s)
{
  out << "ablation: the validation with the default mechanisms, then with each switched in turn\n";
  out.flush();
  // The file, its stacks and the node files are read once; every run below starts from the same rows.
  const std::vector<PublishedRow> rows = read_published_rows(csv);
  const NodeLoader load_node = node_loader_near(csv);
  const spec::MappingRules rules = mapping_rules_near(csv);
  const ThroughputInput input = map_throughput_input(rows, load_node, rules);
  const ThroughputReport defaults = run_throughput(input, out, jobs, row_time_limit_s, {}, false);
  std::ostringstream md;
  md << report_header("Ablation: each mechanism switched", "zerosim validate --ablation") << "; method:\n"
     << "`docs/validation.md` (\"Ablation\"). Do not edit by hand. Each line reruns the throughput validation with "
        "one\n"
     << "mechanism switched from its default (`--without NAME` for one on by default, `--with NAME` for one off by\n"
     << "default) and compares, on the rows that mechanism acts on and that both runs compared, the median |error|\n"
     << "and the median signed error of the primary whole-step figure with it on and off (the allocator and\n"
     << "alloc_order, memory mechanisms: the measured reserved figures of the memory validation). Signed error:\n"
     << "+ = predicted faster than measured (throughput), + = predicted above measured (memory). A mechanism whose\n"
     << "rows get worse with it on is wrong, not tunable.\n\n"
     << "| mechanism | rows it acts on | n | median abs error on | off | change | median signed on | "
        "off |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
  int status = defaults.failures.empty() ? 0 : 1;
  const std::set<std::string> compared_by_default = whole_step_ids(defaults);
  for (const AblationTarget& t : ABLATION_TARGETS) {
    const std::string name = mechanism_name(t.mechanism);
    // The other run flips the mechanism: off when it is on by default, on when it is off by default (leaf_fetch).
    spec::Mechanisms m;
    const bool default_on = m.*t.mechanism;
    m.*t.mechanism = !default_on;
    const ThroughputReport flipped = run_throughput(input, out, jobs, row_time_limit_s, m, false);
    const ThroughputReport& with_it = default_on ? defaults : flipped;
    const ThroughputReport& off = default_on ? flipped : defaults;
    status = std::max(status, flipped.failures.empty() ? 0 : 1);
    // Its rows: those it acts on that both runs compared, so both medians are over the same rows.
    const std::set<std::string> compared_flipped = whole_step_ids(flipped);
    std::set<std::string> ids;
    for (const ThroughputComparison& c : defaults.comparisons)
      if (t.applies(c) && compared_by_default.count(c.c.info.row_id) && compared_flipped.count(c.c.info.row_id))
        ids.insert(c.c.info.row_id);
    const core::ErrorStats a = stats_on(with_it, ids);
    const core::ErrorStats b = stats_on(off, ids);
    md << ablation_line(name + (default_on ? "" : " (off by default)"), t.rows, a, b);
    if (a.n == 0)
      out << "  " << name << ": acts on no compared row\n";
    else
      out << "  " << name << ": median |error| on its " << a.n << " rows " << core::format_fixed(a.median_abs_pct, 1)
          << " % with it, " << core::format_fixed(b.median_abs_pct, 1) << " % without\n";
    out.flush();
  }
  {
    // The memory mechanisms (the allocator; the order the allocator sees a forward in): their rows are the measured
    // reserved figures of the memory validation, each predicted with the mechanism on and off (the allocator off: the
    // old fraction of allocated, ALLOCATOR_FRAGMENTATION_FRACTION). A case either run cannot express is left out of
    // both.
    RowMapping mapping;
    for (const PublishedRow& row : rows) {
      try {
        map_row(row, load_node, mapping, rules);
      } catch (const core::InputError&) {
        // not mapped: the memory validation lists it as not covered; it has no reserved figure to compare here
      }
    }
    for (bool spec::Mechanisms::*flag : {&spec::Mechanisms::allocator, &spec::Mechanisms::allocation_order}) {
      const std::string name = mechanism_name(flag);
      std::vector<double> on_errors, off_errors;
      for (const MemoryCase& c : mapping.memory) {
        if (c.metric != MemMetric::RESERVED || !c.scenario)
          continue;
        std::optional<double> errors[2];
        for (bool on : {true, false}) {
          MemoryCase k = c;
          k.scenario->mechanisms.*flag = on;
          try {
            errors[on ? 0 : 1] = compare_memory_case(k).error_pct;
          } catch (const core::UnsupportedError&) {
          } catch (const core::InputError&) {
          } catch (const std::exception& e) {
            out << "  " << name << ": row " << c.info.row_id << " failed: " << e.what() << "\n";
            status = 1;
          }
        }
        if (errors[0] && errors[1]) {
          on_errors.push_back(*errors[0]);
          off_errors.push_back(*errors[1]);
        }
      }
      const core::ErrorStats a = core::error_stats("reserved", on_errors);
      const core::ErrorStats b = core::error_stats("reserved", off_errors);
      const bool default_on = spec::Mechanisms{}.*flag;
      md << ablation_line(name + (default_on ? "" : " (off by default)"),
                          "rows with a measured reserved figure (memory validation)", a, b);
      out << "  " << name << ": median |error| on its " << a.n << " reserved figures "
          << core::format_fixed(a.median_abs_pct, 1) << " % with it, " << core::format_fixed(b.median_abs_pct, 1)
          << " % without\n";
    }
  }
  const core::ErrorStats all = stats_on(defaults, compared_by_default);
  std::string off_by_default;
  for (const auto& [name, flag] : spec::MECHANISMS)
    if (!(spec::Mechanisms{}.*flag))
      off_by_default += (off_by_default.empty() ? " but " : ", ") + std::string(name);
  md << "\nThe defaults (every mechanism on" << off_by_default << "), all " << all.n
     << " whole-step rows: median abs error " << core::format_fixed(all.median_abs_pct, 1) << " %, median signed error "
     << core::format_signed_pct(all.median_signed_pct, 1) << ".\n";
  core::create_directories(out_dir, "--out");
  core::write_file(out_dir + "/ablation.md", md.str());
  out << "ablation: " << out_dir << "/ablation.md\n";
  return status;
}

} // namespace zerosim::validation
