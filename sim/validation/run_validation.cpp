#include "validation/run_validation.hpp"
#include "validation/report_text.hpp"

#include "compute/compute_model.hpp"
#include "core/error.hpp"
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
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace zerosim::validation {

namespace {

using text::cell;
using text::fixed;
using text::signed_pct;
using text::stats_table;
using text::strategy_group;

using core::one_line;

// The categories a runner outcome adds to the not-covered groups (the mapping's are in published_rows.cpp).
const char* const CAT_UNSUPPORTED = "not modelled by the engine yet";
const char* const CAT_REJECTED = "scenario refused by the pipeline";

/// Four significant digits, in the unit of the metric (MFU and HFU as percent).
std::string figure_text(TimeMetric m, double v)
{
  if (m == TimeMetric::MFU || m == TimeMetric::HFU)
    return fixed(v * 100, 1) + " %";
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

using ErrorOf = std::function<std::optional<double>(const ThroughputComparison&)>;

/// A row's primary figure's error under the priors (the report's own predictions).
std::optional<double> priors_error(const ThroughputComparison& r)
{
  return r.figures.front().error_pct;
}

void add_group_stats(std::vector<ErrorStats>& out, const std::string& prefix,
                     const std::vector<const ThroughputComparison*>& rows, const ErrorOf& error_of,
                     const std::function<std::string(const ThroughputComparison&)>& key)
{
  std::map<std::string, std::vector<double>> groups;
  for (const auto* r : rows)
    if (std::optional<double> e = error_of(*r))
      groups[key(*r)].push_back(*e);
  for (auto& [k, v] : groups)
    out.push_back(error_stats(prefix + k, v));
}

/// The report's groups: source, framework, ZeRO stage or strategy, offload, GPU kind, scale band, overall.
std::vector<ErrorStats> stats_of(const std::vector<const ThroughputComparison*>& rows, const ErrorOf& error_of)
{
  std::vector<ErrorStats> out;
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
  add_group_stats(out, "scale ", rows, error_of, [](const ThroughputComparison& r) { return scale_band(r.c); });
  out.push_back(error_stats("overall", all));
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
  auto out = text::framework_rows<FrameworkSummary>();
  auto entry = [&](const std::string& label) -> FrameworkSummary& { return text::framework_entry(out, label); };
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
      s.whole_step = error_stats("framework " + s.framework, errors[s.framework]);
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

} // namespace

std::string scale_band(const ThroughputCase& c)
{
  const int nodes = c.scenario.cluster.nodes;
  if (nodes <= 1)
    return "1 node";
  return nodes <= 64 ? "2-64 nodes" : "more than 64 nodes";
}

std::vector<ErrorStats> whole_step_stats(const ThroughputReport& r, const ErrorOf& error_of)
{
  return stats_of(whole_step_rows(r), error_of);
}

std::optional<double> median_of_source_medians(const ThroughputReport& r, const ErrorOf& error_of)
{
  std::vector<double> medians;
  for (const ErrorStats& s : whole_step_stats(r, error_of))
    if (s.group.rfind("source ", 0) == 0)
      medians.push_back(s.median_abs_pct);
  if (medians.empty())
    return std::nullopt;
  return error_stats("", medians).median_abs_pct;
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

/// The line under a table: the median of the per-source medians (the source-balanced figure: no source weighs by its row count).
std::string source_medians_line(std::optional<double> m)
{
  return m ? "Median of the per-source medians of |error|: " + fixed(*m, 1) + " %.\n" : std::string();
}

std::optional<double> lookup(const std::map<std::string, double>& m, const std::string& id)
{
  auto it = m.find(id);
  return it == m.end() ? std::nullopt : std::optional<double>(it->second);
}

std::string optional_pct(std::optional<double> v)
{
  return v ? signed_pct(*v) : std::string("none");
}

} // namespace

std::string render_headline(const ThroughputReport& r)
{
  std::ostringstream os;
  const std::size_t comp = component_count(r);
  os << "throughput validation: " << r.rows_total << " rows in the file; " << r.comparisons.size() << " compared ("
     << r.comparisons.size() - comp << " whole-step figures, " << comp << " component timings), " << r.failures.size()
     << " failed or timed out, " << r.not_covered.size() << " not covered\n";
  auto table = [&](const std::vector<ErrorStats>& stats, const char* title) {
    if (stats.empty())
      return;
    os << title << "\n";
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-28s %5s %12s %12s\n", "group", "n", "median |err|", "p90 |err|");
    os << buf;
    for (const auto& s : stats) {
      std::snprintf(buf, sizeof buf, "  %-28s %5d %10.1f %% %10.1f %%\n", s.group.c_str(), s.n, s.median_abs_pct,
                    s.p90_abs_pct);
      os << buf;
    }
  };
  os << "per framework (rows in the file: compared on a whole-step figure, on a component timing, failed, not "
        "covered):\n";
  for (const auto& f : r.frameworks) {
    char buf[200];
    if (f.whole_step)
      std::snprintf(buf, sizeof buf,
                    "  %-10s %4d rows: %4d compared, %2d component timings, %3d failed, %4d not covered; median "
                    "|err| %.1f %%, p90 %.1f %%\n",
                    f.framework.c_str(), f.rows, f.compared, f.component, f.failed, f.not_covered,
                    f.whole_step->median_abs_pct, f.whole_step->p90_abs_pct);
    else
      std::snprintf(buf, sizeof buf,
                    "  %-10s %4d rows: %4d compared, %2d component timings, %3d failed, %4d not covered; no "
                    "whole-step figure compared\n",
                    f.framework.c_str(), f.rows, f.compared, f.component, f.failed, f.not_covered);
    os << buf;
  }
  table(r.stats, "whole-step figures (primary figure of each row):");
  table(r.component_stats, "component timings (backward pass, CPU-Adam step):");
  if (r.calibrated && r.calibrated->not_run.empty()) {
    const CalibratedErrors& k = *r.calibrated;
    const auto line = [&](const char* what, const std::map<std::string, double>& errors) {
      const auto of = [&](const ThroughputComparison& c) { return lookup(errors, c.c.info.row_id); };
      const std::vector<ErrorStats> st = whole_step_stats(r, of);
      if (st.empty())
        return;
      const ErrorStats& all = st.back();
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "%s (%zu fitted parameters): median |err| %.1f %%, p90 %.1f %%, median signed %+.1f %%, median "
                    "of per-source medians %.1f %%\n",
                    what, k.params.size(), all.median_abs_pct, all.p90_abs_pct, all.median_signed_pct,
                    median_of_source_medians(r, of).value_or(0.0));
      os << buf;
    };
    line("whole-step, leave-one-source-out", k.loso_pct);
    line("whole-step, in-sample", k.in_sample_pct);
  }
  for (const auto& f : r.failures)
    os << "FAILED row " << f.c.info.row_id << " (" << to_string(f.status) << "): " << f.message << "\n";
  return os.str();
}

namespace {

/// ## Leave-one-source-out and ## In-sample: the fit's errors, its parameters and how far they move across folds.
void calibrated_sections(std::ostringstream& md, const ThroughputReport& r)
{
  const CalibratedErrors* k = r.calibrated ? &*r.calibrated : nullptr;
  md << "\n## Leave-one-source-out\n\n";
  if (k == nullptr || !k->not_run.empty() || !k->loso_not_run.empty()) {
    md << "Not run: "
       << (k == nullptr ? "this report was made on the priors alone"
                        : (!k->not_run.empty() ? k->not_run : k->loso_not_run))
       << ".\n";
  } else {
    const auto loso = [k](const ThroughputComparison& c) { return lookup(k->loso_pct, c.c.info.row_id); };
    md << "Each source's rows predicted by the simulator with the parameters `zerosim calibrate` fits on every other\n"
       << "source (a parameter only the left-out source informs stays at its prior in that fold). Rows the fit could\n"
       << "not use are not in these tables.\n\n";
    stats_table(md, whole_step_stats(r, loso));
    md << "\n" << source_medians_line(median_of_source_medians(r, loso));
  }
  md << "\n## In-sample\n\n";
  if (k == nullptr || !k->not_run.empty()) {
    md << "Not run: " << (k == nullptr ? "this report was made on the priors alone" : k->not_run) << ".\n";
    return;
  }
  const auto in = [k](const ThroughputComparison& c) { return lookup(k->in_sample_pct, c.c.info.row_id); };
  md << "Every row predicted by the simulator with the parameters fitted on every source (" << k->params.size()
     << " fitted parameters; " << k->linearisations << " linearisations, " << k->simulations
     << " simulations; the fit's surrogate agrees with the simulator within "
     << fixed(k->max_surrogate_deviation_pct, 1) << " % in-sample";
  if (k->loso_not_run.empty())
    md << " and " << fixed(k->max_loso_surrogate_deviation_pct, 1)
       << " % in the leave-one-source-out folds, each a fit of its own on the rows it fitted; extrapolated to the "
          "held-out rows, which are always simulated, the in-sample surrogate is off by up to "
       << fixed(k->max_heldout_extrapolation_pct, 1) << " %";
  md << "). Reproduce the fit alone with `" << k->command << "`.\n\n";
  stats_table(md, whole_step_stats(r, in));
  md << "\n" << source_medians_line(median_of_source_medians(r, in));
  md << "\nThe fitted multipliers (on the priors; docs/calibration.md gives each one's prior, bounds and source) and\n"
     << "their range across the leave-one-source-out folds:\n\n"
     << "| parameter | fitted | folds: min | max | sources | note |\n|---|---:|---:|---:|---:|---|\n";
  for (const FittedParameter& p : k->params)
    md << "| " << p.name << " | " << fixed(p.value, 3) << " | " << (p.fold_min ? fixed(*p.fold_min, 3) : "none")
       << " | " << (p.fold_max ? fixed(*p.fold_max, 3) : "none") << " | " << p.sources << " | " << cell(p.note)
       << " |\n";
  for (const std::string& u : k->unfitted)
    md << "\nNot fitted: " << u << "\n";
}

/// ## Rows above 30 %: one line of cause per whole-step row whose |error| exceeds 30 % in any of the three
/// predictions (causes.csv beside the validation CSV; a row it does not list says so).
void large_error_causes(std::ostringstream& md, const ThroughputReport& r)
{
  constexpr double LARGE = 30.0;
  std::ostringstream lines;
  int n = 0, explained = 0;
  for (const ThroughputComparison* c : whole_step_rows(r)) {
    const std::string& id = c->c.info.row_id;
    std::optional<double> in, loso;
    if (r.calibrated) {
      in = lookup(r.calibrated->in_sample_pct, id);
      loso = lookup(r.calibrated->loso_pct, id);
    }
    const double prior = c->figures.front().error_pct;
    const double worst = std::max({std::abs(prior), in ? std::abs(*in) : 0.0, loso ? std::abs(*loso) : 0.0});
    if (worst <= LARGE)
      continue;
    ++n;
    lines << "- row " << id << " (" << c->c.info.source_id << "; priors " << signed_pct(prior);
    if (in)
      lines << ", in-sample " << signed_pct(*in);
    if (loso)
      lines << ", leave-one-source-out " << signed_pct(*loso);
    lines << "): ";
    auto it = r.causes.find(id);
    if (it == r.causes.end()) {
      lines << "no cause recorded in causes.csv.\n";
      continue;
    }
    ++explained;
    lines << it->second.kind << ": " << cell(it->second.cause);
    if (!it->second.evidence.empty())
      lines << " Evidence: " << cell(it->second.evidence);
    lines << "\n";
  }
  md << "\n## Rows above 30 %\n\n"
     << "Every whole-step row whose |error| is above 30 % on the priors, in-sample or leave-one-source-out, with one\n"
     << "line of cause from results/validation/causes.csv (docs/research/validation-causes.md): `mechanism`, one the\n"
     << "model does not have; `data`, a doubt about the figure or its inputs, quoted from its source; `unknown`. " << n
     << " rows, " << explained << " with a cause.\n\n"
     << lines.str();
}

} // namespace

std::string render_throughput_markdown(const ThroughputReport& r)
{
  std::ostringstream md;
  const std::size_t comp = component_count(r);
  md << "# Time and throughput against measurement\n\n"
     << "Generated by `zerosim validate --run` from `results/validation/published.csv` (a copy of\n"
     << "`shared/validation/published.csv`); method, figure priority and assumptions: `docs/validation.md`\n"
     << "(\"Throughput\"). Do not edit by hand. Signed error, one direction for every metric: + = predicted faster\n"
     << "than measured (optimistic), - = predicted slower; (predicted - measured) / measured for a rate (samples/s,\n"
     << "tokens/s, TFLOPs, MFU), (measured - predicted) / measured for a time (step, backward, CPU-Adam step), so\n"
     << "|error| = |predicted - measured| / measured either way. A row is never dropped because its error is "
        "large.\n\n";

  md << "## Headline\n\n"
     << "- Rows in the file: " << r.rows_total << ".\n"
     << "- Compared: " << r.comparisons.size() << " (" << r.comparisons.size() - comp << " on a whole-step figure, "
     << comp << " on a component timing).\n"
     << "- Failed or timed out in the simulator: " << r.failures.size() << (r.failures.empty() ? "" : " (listed below)")
     << ".\n"
     << "- Not covered: " << r.not_covered.size() << " (grouped by reason below).\n\n";
  md << "Per framework (the rows of the file by the framework they ran on; median and p90 of |error| over the\n"
     << "whole-step figures compared):\n\n"
     << "| framework | rows | compared (whole step) | component timings | failed | not covered | median abs error | "
        "p90 abs error | median signed error |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& f : r.frameworks) {
    md << "| " << f.framework << " | " << f.rows << " | " << f.compared << " | " << f.component << " | " << f.failed
       << " | " << f.not_covered << " | ";
    if (f.whole_step)
      md << fixed(f.whole_step->median_abs_pct, 1) << " % | " << fixed(f.whole_step->p90_abs_pct, 1) << " % | "
         << signed_pct(f.whole_step->median_signed_pct) << " |\n";
    else
      md << "none compared | | |\n";
  }
  md << "\nThe whole-step figures (step time, samples/s, tokens/s, TFLOPs, MFU; the primary figure of each row) are\n"
     << "judged three ways below, in this order: leave-one-source-out (each source predicted with the calibration\n"
     << "parameters fitted without it: the figure to trust for a run the project has not seen), in-sample (fitted on\n"
     << "every source) and on the priors alone (no calibration: `--calibration none`). Each table groups the rows by\n"
     << "source, framework, ZeRO stage or FSDP strategy, offload mode, GPU kind and scale band (nodes).\n";
  calibrated_sections(md, r);
  md << "\n## Priors only\n\n"
     << "Every row predicted on the model's priors (`--calibration none`): kernel and link figures from sources\n"
     << "outside the validation data (calibration/kernels.yaml, docs/collectives.md), nothing fitted.\n\n";
  stats_table(md, r.stats);
  md << "\n" << source_medians_line(median_of_source_medians(r, priors_error));
  md << "\nComponent timings (backward pass, CPU-Adam step), kept apart:\n\n";
  stats_table(md, r.component_stats);

  const bool fitted = r.calibrated && r.calibrated->not_run.empty();
  md << "\n## Compared rows\n\n"
     << "The primary figure of each row (priority: `docs/validation.md`). Tolerance: the chart-read tolerance the\n"
     << "file states, or half a printed range. Predicted and error: on the priors"
     << (fitted ? "; then the error in-sample and leave-one-source-out" : "") << ".\n\n"
     << "| row | source | model | GPUs | stage / strategy | offload | metric | measured | predicted | error | "
     << (fitted ? "in-sample | leave-one-source-out | " : "") << "tolerance |\n"
     << "|---|---|---|---:|---:|---|---|---:|---:|---:|" << (fitted ? "---:|---:|" : "") << "---|\n";
  for (const auto& c : r.comparisons) {
    const FigureComparison& f = c.figures.front();
    md << "| " << c.c.info.row_id << " | " << c.c.info.source_id << " | " << cell(c.c.info.model) << " | "
       << gpus_of(c.c) << " | " << stage_text(c.c) << " | " << c.c.info.offload << " | " << to_string(f.figure.metric)
       << " | " << figure_text(f.figure.metric, f.figure.value) << " | " << figure_text(f.figure.metric, f.predicted)
       << " | " << signed_pct(f.error_pct) << " | ";
    if (fitted)
      md << optional_pct(lookup(r.calibrated->in_sample_pct, c.c.info.row_id)) << " | "
         << optional_pct(lookup(r.calibrated->loso_pct, c.c.info.row_id)) << " | ";
    md << tolerance_text(f.figure) << " |\n";
  }
  large_error_causes(md, r);

  std::vector<TimeMetric> used;
  for (const auto& c : r.comparisons)
    for (const auto& f : c.figures)
      if (std::find(used.begin(), used.end(), f.figure.metric) == used.end())
        used.push_back(f.figure.metric);
  std::sort(used.begin(), used.end());
  md << "\nMetrics, and the predicted quantity each is compared with (scenario-format.md \"Results\"):\n\n"
     << "| metric | definition |\n|---|---|\n";
  for (TimeMetric m : used)
    md << "| " << to_string(m) << " | " << definition_of(m) << " |\n";

  bool any_other = std::any_of(r.comparisons.begin(), r.comparisons.end(),
                               [](const auto& c) { return c.figures.size() > 1 || !c.c.not_compared.empty(); });
  if (any_other) {
    md << "\n## Other figures of the compared rows (not in the statistics)\n\n"
       << "| row | metric | measured | predicted | error | note |\n|---|---|---:|---:|---:|---|\n";
    for (const auto& c : r.comparisons) {
      for (std::size_t i = 1; i < c.figures.size(); ++i) {
        const FigureComparison& f = c.figures[i];
        md << "| " << c.c.info.row_id << " | " << to_string(f.figure.metric) << " | "
           << figure_text(f.figure.metric, f.figure.value) << " | " << figure_text(f.figure.metric, f.predicted)
           << " | " << signed_pct(f.error_pct) << " | " << cell(f.figure.note) << " |\n";
      }
      if (!c.c.not_compared.empty())
        md << "| " << c.c.info.row_id << " | not compared | | | | " << cell(c.c.not_compared) << " |\n";
    }
  }

  if (!r.failures.empty()) {
    md << "\n## Failed in the simulator\n\n"
       << "Rows the simulator was asked about and gave no answer for (a crash, an error, or the per-row time limit):\n"
       << "bugs or limits of the simulator, not verdicts.\n\n"
       << "| row | source | model | config | status | message |\n|---|---|---|---|---|---|\n";
    for (const auto& f : r.failures)
      md << "| " << f.c.info.row_id << " | " << f.c.info.source_id << " | " << cell(f.c.info.model) << " | "
         << cell(f.c.info.config) << " | " << to_string(f.status) << " | " << cell(f.message) << " |\n";
  }

  auto groups = by_category(r);
  md << "\n## Not covered\n\n" << r.not_covered.size() << " rows, by reason:\n\n| reason | rows |\n|---|---:|\n";
  for (const auto& [cat, rows] : groups)
    md << "| " << cell(cat) << " | " << rows.size() << " |\n";
  for (const auto& [cat, rows] : groups) {
    md << "\n### " << cell(cat) << " (" << rows.size() << ")\n\n| row | source | model | why |\n|---|---|---|---|\n";
    for (const auto* n : rows)
      md << "| " << n->row_id << " | " << n->source_id << " | " << cell(n->model) << " | " << cell(n->reason) << " |\n";
  }

  md << "\n## Configuration and inputs assumed per compared row\n\n";
  for (const auto& c : r.comparisons) {
    md << "- row " << c.c.info.row_id << " (" << c.c.info.source_id << ", " << cell(c.c.info.locator)
       << "; evidence: " << cell(c.c.evidence) << "): " << cell(c.c.info.config) << ". " << cell(c.c.info.assumptions);
    if (!c.figures.front().figure.note.empty())
      md << "; figure: " << cell(c.figures.front().figure.note);
    if (!c.predicted.fits)
      md << "; predicted NOT to fit in memory (simulated anyway)";
    for (const auto& w : c.predicted.warnings)
      md << "; engine warning: " << cell(w);
    md << "; replay " << c.predicted.replay << ".\n";
  }
  return md.str();
}

std::string render_throughput_csv(const ThroughputReport& r)
{
  std::string out = csv_record({"row_id", "source_id", "kind", "primary", "model", "gpus", "zero_stage", "offload",
                                "metric", "definition", "measured", "predicted", "signed_error_pct", "tolerance",
                                "category_or_status", "notes"});
  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  for (const auto& c : r.comparisons) {
    for (std::size_t i = 0; i < c.figures.size(); ++i) {
      const FigureComparison& f = c.figures[i];
      std::string notes = c.c.info.config + "; " + c.c.info.assumptions;
      if (!f.figure.note.empty())
        notes += "; figure: " + f.figure.note;
      out += csv_record({c.c.info.row_id, c.c.info.source_id, "compared", i == 0 ? "yes" : "no", c.c.info.model,
                         std::to_string(gpus_of(c.c)), stage_text(c.c), c.c.info.offload, to_string(f.figure.metric),
                         definition_of(f.figure.metric), num(f.figure.value), num(f.predicted), fixed(f.error_pct, 2),
                         f.figure.tolerance ? num(*f.figure.tolerance) : "",
                         is_component(f.figure.metric) ? "component timing" : "whole step", notes});
    }
  }
  for (const auto& f : r.failures)
    out += csv_record({f.c.info.row_id, f.c.info.source_id, "failed", "", f.c.info.model, std::to_string(gpus_of(f.c)),
                       stage_text(f.c), f.c.info.offload, to_string(f.c.figures.front().metric), "",
                       num(f.c.figures.front().value), "", "", "", to_string(f.status), f.message});
  for (const auto& n : r.not_covered)
    out += csv_record(
        {n.row_id, n.source_id, "not covered", "", n.model, "", "", "", "", "", "", "", "", "", n.category, n.reason});
  return out;
}

namespace {

/// The rows of published.csv (stacks.csv merged) mapped to cases once, with the node files near it: every run of a
/// command (the ablation's nine) starts from the same mapping.
struct ThroughputInput {
  int rows_total = 0;
  ThroughputMapping mapping;
};

ThroughputInput map_throughput_input(const std::vector<PublishedRow>& rows, const NodeLoader& load_node,
                                     const spec::SourceRules& sources)
{
  return {static_cast<int>(rows.size()), map_throughput_rows(rows, load_node, sources)};
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
        << " not covered; " << std::max(1, jobs) << " workers, " << fixed(row_time_limit_s, 0)
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
          << to_string(o.status) << ", " << fixed(o.wall_s, 1) << " s\n";
      out.flush();
    };
  std::vector<RowOutcome> outcomes = run_cases(mapping.cases, predict_case, options);
  return assemble_report(input.rows_total, mapping, outcomes);
}

void write_file(const std::string& path, const std::string& body)
{
  std::ofstream f(path, std::ios::binary);
  if (!f)
    throw core::InputError(path + ": cannot write the file");
  f << body;
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
};

/// One line of ablation.md: the medians with the mechanism on (`a`) and off (`b`) over the same rows; "none" when
/// the mechanism acts on no compared row.
std::string ablation_line(const std::string& mechanism, const std::string& rows, const ErrorStats& a,
                          const ErrorStats& b)
{
  std::string line = "| " + mechanism + " | " + rows + " | " + std::to_string(a.n) + " | ";
  if (a.n == 0)
    return line + "none | none | | | |\n";
  return line + fixed(a.median_abs_pct, 1) + " % | " + fixed(b.median_abs_pct, 1) + " % | " +
         signed_pct(a.median_abs_pct - b.median_abs_pct) + " | " + signed_pct(a.median_signed_pct) + " | " +
         signed_pct(b.median_signed_pct) + " |\n";
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
ErrorStats stats_on(const ThroughputReport& r, const std::set<std::string>& row_ids)
{
  std::vector<double> errors;
  for (const ThroughputComparison& c : r.comparisons)
    if (!is_component(c.figures.front().figure.metric) && row_ids.count(c.c.info.row_id))
      errors.push_back(c.figures.front().error_pct);
  return error_stats("", errors);
}

} // namespace

ThroughputReport run_throughput_report(const std::string& csv, std::ostream& out, int jobs, double row_time_limit_s,
                                       const spec::Mechanisms& mechanisms)
{
  const std::vector<PublishedRow> rows = read_published_rows(csv);
  const ThroughputInput input = map_throughput_input(rows, node_loader_near(csv), source_rules_near(csv));
  ThroughputReport r = run_throughput(input, out, jobs, row_time_limit_s, mechanisms, true);
  r.causes = read_row_causes(csv, rows);
  return r;
}

void write_throughput_report(const ThroughputReport& r, const std::string& out_dir, std::ostream& out)
{
  std::filesystem::create_directories(out_dir);
  write_file(out_dir + "/report.md", render_throughput_markdown(r));
  write_file(out_dir + "/report.csv", render_throughput_csv(r));
  out << render_headline(r) << "report: " << out_dir << "/report.md\n";
}

int validate_ablation_command(const std::string& csv, const std::string& out_dir, std::ostream& out, int jobs,
                              double row_time_limit_s)
{
  out << "ablation: the validation with the default mechanisms, then with each switched in turn\n";
  out.flush();
  // The file, its stacks and the node files are read once; every run below starts from the same rows.
  const std::vector<PublishedRow> rows = read_published_rows(csv);
  const NodeLoader load_node = node_loader_near(csv);
  const spec::SourceRules sources = source_rules_near(csv);
  const ThroughputInput input = map_throughput_input(rows, load_node, sources);
  const ThroughputReport defaults = run_throughput(input, out, jobs, row_time_limit_s, {}, false);
  std::ostringstream md;
  md << "# Ablation: each mechanism switched\n\n"
     << "Generated by `zerosim validate --ablation` from `results/validation/published.csv`; method:\n"
     << "`docs/validation.md` (\"Ablation\"). Do not edit by hand. Each line reruns the throughput validation with "
        "one\n"
     << "mechanism switched from its default (`--without NAME` for one on by default, `--with NAME` for one off by\n"
     << "default) and compares, on the rows that mechanism acts on and that both runs compared, the median |error|\n"
     << "and the median signed error of the primary whole-step figure with it on and off (the allocator, a memory\n"
     << "mechanism: the measured reserved figures of the memory validation). Signed error: + = predicted faster\n"
     << "than measured (throughput), + = predicted above measured (memory). A mechanism whose rows get worse with\n"
     << "it on is wrong, not tunable.\n\n"
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
    const ErrorStats a = stats_on(with_it, ids);
    const ErrorStats b = stats_on(off, ids);
    md << ablation_line(name + (default_on ? "" : " (off by default)"), t.rows, a, b);
    if (a.n == 0)
      out << "  " << name << ": acts on no compared row\n";
    else
      out << "  " << name << ": median |error| on its " << a.n << " rows " << fixed(a.median_abs_pct, 1)
          << " % with it, " << fixed(b.median_abs_pct, 1) << " % without\n";
    out.flush();
  }
  {
    // The allocator is a memory mechanism: its rows are the measured reserved figures of the memory validation, with
    // the caching allocator replayed (on) or the old fraction of allocated (off, ALLOCATOR_FRAGMENTATION_FRACTION).
    // Only those cases are predicted, each with the allocator on and off; a case either run cannot express is left
    // out of both.
    RowMapping mapping;
    for (const PublishedRow& row : rows) {
      try {
        map_row(row, load_node, mapping, sources);
      } catch (const core::InputError&) {
        // not mapped: the memory validation lists it as not covered; it has no reserved figure to compare here
      }
    }
    std::vector<double> on_errors, off_errors;
    for (const MemoryCase& c : mapping.memory) {
      if (c.metric != MemMetric::RESERVED || !c.scenario)
        continue;
      std::optional<double> errors[2];
      for (bool allocator : {true, false}) {
        MemoryCase k = c;
        k.scenario->mechanisms.allocator = allocator;
        try {
          errors[allocator ? 0 : 1] = compare_memory_case(k).error_pct;
        } catch (const core::UnsupportedError&) {
        } catch (const core::InputError&) {
        } catch (const std::exception& e) {
          out << "  allocator: row " << c.info.row_id << " failed: " << e.what() << "\n";
          status = 1;
        }
      }
      if (errors[0] && errors[1]) {
        on_errors.push_back(*errors[0]);
        off_errors.push_back(*errors[1]);
      }
    }
    const ErrorStats a = error_stats("reserved", on_errors);
    const ErrorStats b = error_stats("reserved", off_errors);
    md << ablation_line(mechanism_name(&spec::Mechanisms::allocator),
                        "rows with a measured reserved figure (memory validation)", a, b);
    out << "  allocator: median |error| on its " << a.n << " reserved figures " << fixed(a.median_abs_pct, 1)
        << " % with it, " << fixed(b.median_abs_pct, 1) << " % without\n";
  }
  const ErrorStats all = stats_on(defaults, compared_by_default);
  std::string off_by_default;
  for (const auto& [name, flag] : spec::MECHANISMS)
    if (!(spec::Mechanisms{}.*flag))
      off_by_default += (off_by_default.empty() ? " but " : ", ") + std::string(name);
  md << "\nThe defaults (every mechanism on" << off_by_default << "), all " << all.n
     << " whole-step rows: median abs error " << fixed(all.median_abs_pct, 1) << " %, median signed error "
     << signed_pct(all.median_signed_pct) << ".\n";
  std::filesystem::create_directories(out_dir);
  write_file(out_dir + "/ablation.md", md.str());
  out << "ablation: " << out_dir << "/ablation.md\n";
  return status;
}

} // namespace zerosim::validation
