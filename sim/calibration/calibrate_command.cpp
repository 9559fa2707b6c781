// `zerosim calibrate` (calibrate_command.hpp): inputs, fit, profile, report.
#include "calibration/calibrate_command.hpp"

#include "calibration/measured_runs.hpp"
#include "config/scenario_loader.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "validation/csv.hpp"
#include "validation/report_text.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace zerosim::calibration {
namespace {

using validation::TimeMetric;
using validation::text::fixed;
using validation::text::signed_pct;

/// The validation metric a measured figure is compared as.
std::optional<TimeMetric> metric_of(MeasuredFigure f, FigureDefinition d)
{
  switch (f) {
  case MeasuredFigure::STEP_TIME_S:
    return TimeMetric::STEP_TIME;
  case MeasuredFigure::TOKENS_PER_S:
    return TimeMetric::TOKENS_PER_S_TOTAL;
  case MeasuredFigure::SAMPLES_PER_S:
    return TimeMetric::SAMPLES_PER_S;
  case MeasuredFigure::TFLOPS_PER_GPU:
    return d == FigureDefinition::HARDWARE ? TimeMetric::TFLOPS_HARDWARE : TimeMetric::TFLOPS_MODEL;
  case MeasuredFigure::MFU:
    return TimeMetric::MFU;
  case MeasuredFigure::PEAK_MEMORY_BYTES:
    return std::nullopt;
  }
  return std::nullopt;
}

Observation observation(const spec::Scenario& s, TimeMetric m, double value, const std::string& label,
                        const std::string& source)
{
  Observation o;
  o.c.scenario = s;
  o.c.info.row_id = label;
  o.c.info.source_id = source;
  o.c.info.model = s.model.name;
  validation::TimeFigure f;
  f.metric = m;
  f.value = value;
  f.column = validation::to_string(m);
  o.c.figures.push_back(f);
  o.label = label;
  o.source = source;
  return o;
}

std::string pct(double v)
{
  return fixed(v, 1) + " %";
}

/// Error statistics of the rows' figures from `pick` (nullopt: the row has none).
template <class Pick> validation::ErrorStats stats_of(const std::vector<RowResult>& rows, Pick pick)
{
  std::vector<double> e;
  for (const RowResult& r : rows)
    if (std::optional<double> v = pick(r))
      e.push_back(row_error_pct(r, *v));
  return validation::error_stats("", e);
}

/// The median over sources of each source's median |error|.
template <class Pick> double median_of_source_medians(const std::vector<RowResult>& rows, Pick pick)
{
  std::map<std::string, std::vector<double>> by;
  for (const RowResult& r : rows)
    if (std::optional<double> v = pick(r))
      by[r.source].push_back(row_error_pct(r, *v));
  std::vector<double> medians;
  for (auto& [s, e] : by)
    medians.push_back(validation::error_stats("", e).median_abs_pct);
  return validation::error_stats("", medians).median_abs_pct;
}

std::string stats_line(const std::string& what, const validation::ErrorStats& s, double source_median)
{
  return "| " + what + " | " + std::to_string(s.n) + " | " + pct(s.median_abs_pct) + " | " + pct(s.p90_abs_pct) +
         " | " + signed_pct(s.median_signed_pct) + " | " + pct(source_median) + " |\n";
}

} // namespace

bool is_validation_csv(const std::string& csv)
{
  const std::string text = read_input_file(csv);
  const std::vector<std::vector<std::string>> recs = validation::parse_csv(text.substr(0, text.find('\n') + 1), csv);
  if (recs.empty())
    return false;
  const auto& h = recs.front();
  return std::find(h.begin(), h.end(), "row_id") != h.end() && std::find(h.begin(), h.end(), "source_id") != h.end();
}

std::vector<Observation> observations_from_validation(const std::string& csv, std::vector<std::string>& skipped)
{
  const validation::ThroughputMapping m =
      validation::map_throughput_rows(validation::read_published_rows(csv), validation::node_loader_near(csv));
  std::vector<Observation> out;
  for (const validation::ThroughputCase& c : m.cases) {
    if (validation::is_component(c.figures.front().metric)) {
      skipped.push_back("row " + c.info.row_id + " (" + c.info.source_id + "): a component timing (" +
                        validation::to_string(c.figures.front().metric) + "), not a whole step");
      continue;
    }
    Observation o;
    o.c = c;
    o.label = "row " + c.info.row_id;
    o.source = c.info.source_id;
    out.push_back(o);
  }
  skipped.push_back(std::to_string(m.not_covered.size()) + " rows of " + csv +
                    " the simulator does not express (results/validation/report.md lists why)");
  return out;
}

std::vector<Observation> observations_from_runs(const std::string& csv, const std::string& calibration,
                                                std::vector<std::string>& skipped)
{
  std::vector<Observation> out;
  for (const MeasuredRun& run : read_measured_runs(csv)) {
    const std::string label = run.file + ":" + std::to_string(run.line);
    const std::optional<TimeMetric> m = metric_of(run.figure, run.definition);
    if (!m) {
      skipped.push_back(label + ": peak memory (no calibrated parameter acts on memory; `zerosim compare` reads it)");
      continue;
    }
    config::LoadOptions lo;
    lo.calibration = calibration;
    const spec::Scenario s = config::load_scenario(run.scenario_path, lo);
    out.push_back(observation(s, *m, run.measured, label, run.source));
  }
  return out;
}

std::vector<Observation> observations_from_scenario(const std::string& path, const std::string& calibration)
{
  config::LoadOptions lo;
  lo.calibration = calibration;
  const spec::Scenario s = config::load_scenario(path, lo);
  const std::string source = s.measured.source.empty() ? path : s.measured.source;
  std::vector<Observation> out;
  if (s.measured.step_time_s)
    out.push_back(
        observation(s, TimeMetric::STEP_TIME, *s.measured.step_time_s, path + ": measured.step_time", source));
  if (s.measured.tflops_per_gpu)
    out.push_back(observation(
        s, s.measured.tflops_definition == "hardware" ? TimeMetric::TFLOPS_HARDWARE : TimeMetric::TFLOPS_MODEL,
        *s.measured.tflops_per_gpu, path + ": measured.tflops_per_gpu", source));
  if (out.empty())
    throw core::InputError(path + ": measured: expected step_time or tflops_per_gpu for calibrate, found neither");
  return out;
}

std::string render_calibration_markdown(const CalibrationResult& r)
{
  std::ostringstream md;
  md << "# Calibration\n\n"
     << "Multipliers on the model's priors fitted by `zerosim calibrate` (docs/calibration.md): bounded least squares "
        "on\nln(predicted / measured), every source weighing the same, priors as penalties. "
     << r.linearisations << " linearisation(s), " << r.simulations << " simulations; the surrogate agrees with the "
     << "simulator within " << pct(100.0 * (std::exp(r.max_surrogate_deviation) - 1.0)) << " in-sample";
  if (!r.folds.empty())
    md << " and " << pct(100.0 * (std::exp(r.max_loso_surrogate_deviation) - 1.0)) << " on the held-out rows";
  md << ".\n\n## Parameters\n\n"
     << "| parameter | multiplier | ± (1 sd, ln) | bounds | rows | sources | leave-one-source-out range | note |\n"
     << "|---|---:|---:|---|---:|---:|---|---|\n";
  for (const ParameterResult& p : r.params) {
    std::string note;
    if (p.at_bound)
      note += "AT ITS BOUND; ";
    if (p.sources.size() == 1)
      note += "one source informs it (" + p.sources.front() + "): at its prior in that source's fold; ";
    md << "| " << p.name << " | " << fixed(p.value, 3) << " | " << fixed(p.sigma_ln, 3) << " | [" << p.family.lower
       << ", " << p.family.upper << "] | " << p.rows << " | " << p.sources.size() << " | ";
    if (p.loso_min && p.loso_max)
      md << fixed(*p.loso_min, 3) << " - " << fixed(*p.loso_max, 3);
    md << " | " << note << " |\n";
  }
  for (const std::string& u : r.uninformed)
    md << "\nNot fitted: " << u << ".";
  md << "\n\n## Errors (whole-step figures; signed: + = predicted faster)\n\n"
     << "| predictions | n | median abs error | p90 abs error | median signed error | median of per-source medians |\n"
     << "|---|---:|---:|---:|---:|---:|\n";
  auto loso = [](const RowResult& x) { return x.loso; };
  auto fitted = [](const RowResult& x) -> std::optional<double> { return x.fitted; };
  auto prior = [](const RowResult& x) -> std::optional<double> { return x.prior; };
  if (!r.folds.empty())
    md << stats_line("leave-one-source-out", stats_of(r.rows, loso), median_of_source_medians(r.rows, loso));
  md << stats_line("in-sample", stats_of(r.rows, fitted), median_of_source_medians(r.rows, fitted))
     << stats_line("priors only", stats_of(r.rows, prior), median_of_source_medians(r.rows, prior));
  md << "\n## Per source\n\n| source | n | priors: median abs | in-sample | leave-one-source-out |\n"
     << "|---|---:|---:|---:|---:|\n";
  std::set<std::string> sources;
  for (const RowResult& x : r.rows)
    sources.insert(x.source);
  for (const std::string& s : sources) {
    std::vector<RowResult> in;
    for (const RowResult& x : r.rows)
      if (x.source == s)
        in.push_back(x);
    md << "| " << s << " | " << in.size() << " | " << pct(stats_of(in, prior).median_abs_pct) << " | "
       << pct(stats_of(in, fitted).median_abs_pct) << " | "
       << (r.folds.empty() ? std::string() : pct(stats_of(in, loso).median_abs_pct)) << " |\n";
  }
  if (!r.dropped.empty()) {
    md << "\n## Observations the simulator could not predict\n\n";
    for (const std::string& d : r.dropped)
      md << "- " << d << "\n";
  }
  return md.str();
}

int calibrate_command(const CalibrateArgs& a, std::ostream& out, std::ostream& progress)
{
  if (a.runs.empty() && a.scenarios.empty())
    throw core::InputError("zerosim calibrate: give measured runs (--runs CSV) or scenarios with a measured: block "
                           "(--scenario FILE) (see 'zerosim --help')");
  std::vector<Observation> obs;
  std::vector<std::string> skipped;
  for (const std::string& csv : a.runs) {
    std::vector<Observation> o = is_validation_csv(csv) ? observations_from_validation(csv, skipped)
                                                        : observations_from_runs(csv, a.calibration, skipped);
    obs.insert(obs.end(), o.begin(), o.end());
  }
  for (const std::string& f : a.scenarios) {
    std::vector<Observation> o = observations_from_scenario(f, a.calibration);
    obs.insert(obs.end(), o.begin(), o.end());
  }
  progress << "calibrate: " << obs.size() << " observations\n";
  CalibrateOptions opts;
  opts.params = a.params;
  opts.loso = a.loso;
  opts.progress = &progress;
  const CalibrationResult r = calibrate(obs, opts, pool_predictor(a.jobs, 300));

  if (!a.out.empty()) {
    config::CalibrationProfile p;
    p.command = a.command;
    std::set<std::string> sources;
    for (const RowResult& x : r.rows)
      sources.insert(x.source);
    p.fitted_on =
        std::to_string(r.rows.size()) + " whole-step figures from " + std::to_string(sources.size()) + " sources";
    for (const ParameterResult& q : r.params) {
      config::CalibrationProfile::Parameter pp;
      pp.name = q.name;
      pp.value = q.value;
      pp.uncertainty = q.sigma_ln;
      pp.lower = q.family.lower;
      pp.upper = q.family.upper;
      pp.rows = q.rows;
      pp.sources = q.sources;
      pp.loso_min = q.loso_min;
      pp.loso_max = q.loso_max;
      if (q.at_bound)
        pp.note = "at its bound";
      if (q.sources.size() == 1)
        pp.note += std::string(pp.note.empty() ? "" : "; ") + "one source informs it";
      p.parameters.push_back(pp);
    }
    auto loso = [](const RowResult& x) { return x.loso; };
    auto fitted = [](const RowResult& x) -> std::optional<double> { return x.fitted; };
    const validation::ErrorStats in = stats_of(r.rows, fitted);
    p.fit.emplace_back("in_sample", "median |error| " + pct(in.median_abs_pct) + ", p90 " + pct(in.p90_abs_pct) +
                                        ", median signed " + signed_pct(in.median_signed_pct));
    if (!r.folds.empty()) {
      const validation::ErrorStats lo = stats_of(r.rows, loso);
      p.fit.emplace_back("leave_one_source_out", "median |error| " + pct(lo.median_abs_pct) + ", p90 " +
                                                     pct(lo.p90_abs_pct) + ", median signed " +
                                                     signed_pct(lo.median_signed_pct));
    }
    p.fit.emplace_back(
        "surrogate_max_deviation",
        pct(100.0 * (std::exp(std::max(r.max_surrogate_deviation, r.max_loso_surrogate_deviation)) - 1)));
    std::ofstream f(a.out, std::ios::binary);
    if (!f)
      throw core::InputError("zerosim calibrate: --out: cannot write " + a.out);
    f << config::calibration_profile_yaml(p);
  }

  if (a.json) {
    core::Json params = core::Json::array();
    for (const ParameterResult& q : r.params) {
      core::Json j = core::Json::object()
                         .set("name", q.name)
                         .set("value", q.value)
                         .set("sigma_ln", q.sigma_ln)
                         .set("at_bound", q.at_bound)
                         .set("rows", q.rows)
                         .set("sources", static_cast<int>(q.sources.size()));
      params.push(j);
    }
    core::Json rows = core::Json::array();
    for (const RowResult& x : r.rows) {
      core::Json j = core::Json::object()
                         .set("label", x.label)
                         .set("source", x.source)
                         .set("metric", validation::to_string(x.metric))
                         .set("measured", x.measured)
                         .set("prior", x.prior)
                         .set("fitted", x.fitted)
                         .set("surrogate", x.surrogate);
      if (x.loso)
        j.set("loso", *x.loso);
      rows.push(j);
    }
    out << core::Json::object()
               .set("parameters", params)
               .set("rows", rows)
               .set("linearisations", r.linearisations)
               .set("simulations", r.simulations)
               .set("surrogate_max_deviation", std::exp(r.max_surrogate_deviation) - 1)
               .set("loso_surrogate_max_deviation", std::exp(r.max_loso_surrogate_deviation) - 1)
               .dump()
        << "\n";
  } else {
    out << render_calibration_markdown(r);
    if (!skipped.empty()) {
      out << "\nLeft out of the fit:\n";
      for (const std::string& s : skipped)
        out << "- " << s << "\n";
    }
    if (!a.out.empty())
      out << "\nprofile: " << a.out << "\n";
  }
  return 0;
}

} // namespace zerosim::calibration
