// `zerosim calibrate` (calibrate_command.hpp): inputs, fit, profile, report.
#include "calibration/calibrate_command.hpp"

#include "calibration/gemm_fit.hpp"
#include "calibration/gemm_timings.hpp"
#include "calibration/nccl_fit.hpp"
#include "calibration/synthetic.hpp"
#include "config/measured_runs.hpp"
#include "config/scenario_loader.hpp"
#include "core/csv.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/stats.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace zerosim::calibration {
namespace {

using validation::TimeMetric;

/// The validation metric a measured figure is compared as.
std::optional<TimeMetric> metric_of(config::MeasuredFigure f, config::FigureDefinition d)
{
  switch (f) {
  case config::MeasuredFigure::STEP_TIME_S:
    return TimeMetric::STEP_TIME;
  case config::MeasuredFigure::TOKENS_PER_S:
    return TimeMetric::TOKENS_PER_S_TOTAL;
  case config::MeasuredFigure::SAMPLES_PER_S:
    return TimeMetric::SAMPLES_PER_S;
  case config::MeasuredFigure::TFLOPS_PER_GPU:
    return d == config::FigureDefinition::HARDWARE ? TimeMetric::TFLOPS_HARDWARE : TimeMetric::TFLOPS_MODEL;
  case config::MeasuredFigure::MFU:
    return TimeMetric::MFU;
  case config::MeasuredFigure::PEAK_MEMORY_BYTES:
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
  return core::format_fixed(v, 1) + " %";
}

/// Error statistics of the rows' figures from `pick` (nullopt: the row has none).
template <class Pick> core::ErrorStats stats_of(const std::vector<RowResult>& rows, Pick pick)
{
  std::vector<double> e;
  for (const RowResult& r : rows)
    if (std::optional<double> v = pick(r))
      e.push_back(row_error_pct(r, *v));
  return core::error_stats("", e);
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
    medians.push_back(core::error_stats("", e).median_abs_pct);
  return core::error_stats("", medians).median_abs_pct;
}

std::string stats_line(const std::string& what, const core::ErrorStats& s, double source_median)
{
  return "| " + what + " | " + std::to_string(s.n) + " | " + pct(s.median_abs_pct) + " | " + pct(s.p90_abs_pct) +
         " | " + core::format_signed_pct(s.median_signed_pct, 1) + " | " + pct(source_median) + " |\n";
}

} // namespace

bool is_validation_csv(const std::string& csv)
{
  const std::string text = config::read_input_file(csv);
  const std::vector<std::vector<std::string>> recs = core::parse_csv(text.substr(0, text.find('\n') + 1), csv);
  if (recs.empty())
    return false;
  const auto& h = recs.front();
  return std::find(h.begin(), h.end(), "row_id") != h.end() && std::find(h.begin(), h.end(), "source_id") != h.end();
}

std::vector<Observation> observations_from_validation(const std::string& csv, std::vector<std::string>& skipped)
{
  const validation::ThroughputMapping m = validation::map_throughput_rows(
      validation::read_published_rows(csv), validation::node_loader_near(csv), validation::mapping_rules_near(csv));
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
  for (const config::MeasuredRun& run : config::read_measured_runs(csv)) {
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
    md << " and " << pct(100.0 * (std::exp(r.max_loso_surrogate_deviation) - 1.0))
       << " in the leave-one-source-out folds (each fold a fit of its own, on the rows it fitted; extrapolated to the "
          "held-out rows, which are always simulated, the in-sample surrogate is off by up to "
       << pct(100.0 * (std::exp(r.max_heldout_extrapolation) - 1.0)) << ")";
  md << ".\n\n## Parameters\n\n"
     << "| parameter | multiplier | ± (1 sd, ln) | bounds | rows | sources | leave-one-source-out range | note |\n"
     << "|---|---:|---:|---|---:|---:|---|---|\n";
  for (const ParameterResult& p : r.params) {
    std::string note;
    if (p.at_bound)
      note += "AT ITS BOUND; ";
    if (p.sources.size() == 1)
      note += "one source informs it (" + p.sources.front() + "): at its prior in that source's fold; ";
    md << "| " << p.name << " | " << core::format_fixed(p.value, 3) << " | " << core::format_fixed(p.sigma_ln, 3)
       << " | [" << p.family.lower << ", " << p.family.upper << "] | " << p.rows << " | " << p.sources.size() << " | ";
    if (p.loso_min && p.loso_max)
      md << core::format_fixed(*p.loso_min, 3) << " - " << core::format_fixed(*p.loso_max, 3);
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

namespace {

/// One nccl-tests table fitted: the transport's figures and the multiplier they give.
struct NcclResult {
  std::string file;
  NcclTestsTable table;
  NcclFit fit;
  std::string param;
  double multiplier = 1;
  int nodes = 1;
};

/// The node of `--node`: a path, or a name under topologies/ (as scenarios name nodes).
spec::NodeSpec load_node_arg(const std::string& node)
{
  if (node.empty())
    throw core::InputError("zerosim calibrate: --nccl and --gemm need --node NAME|PATH, the node they ran on (its "
                           "GPU, NVLink, PCIe and NIC figures turn a measurement into the model's multiplier)");
  if (core::path_exists(node, "zerosim calibrate: --node"))
    return config::load_node(node);
  const std::string shipped = std::string(ZEROSIM_DATA_DIR) + "/topologies/" + node + ".yaml";
  if (core::path_exists("topologies/" + node + ".yaml", "zerosim calibrate: --node"))
    return config::load_node("topologies/" + node + ".yaml");
  if (core::path_exists(shipped, "zerosim calibrate: --node"))
    return config::load_node(shipped);
  throw core::InputError("zerosim calibrate: --node " + node + ": no such file, and no topologies/" + node + ".yaml");
}

std::vector<NcclResult> fit_nccl(const CalibrateArgs& a)
{
  std::vector<NcclResult> out;
  if (a.nccl.empty())
    return out;
  const spec::NodeSpec node = load_node_arg(a.node);
  for (const std::string& arg : a.nccl) {
    NcclResult r;
    std::optional<NcclCollective> hint;
    r.file = arg;
    const std::size_t colon = arg.rfind(':');
    if (colon != std::string::npos && !core::path_exists(arg, "zerosim calibrate: --nccl")) {
      hint = parse_nccl_collective(arg.substr(colon + 1));
      if (!hint)
        throw core::InputError("zerosim calibrate: --nccl " + arg +
                               ": expected FILE or FILE:COLLECTIVE (all_reduce, "
                               "all_gather, reduce_scatter, ...), found collective '" +
                               arg.substr(colon + 1) + "'");
      r.file = arg.substr(0, colon);
    }
    r.table = read_nccl_tests(r.file, hint);
    // The planned fit (nccl_fit.hpp): the planner's algorithm and protocol at each size, one multiplier and a latency
    // beyond the planner's; collectives the planner does not plan get the latency-bandwidth fit.
    r.fit = fit_nccl_table(r.table, node);
    r.nodes = nccl_table_nodes(r.table, node);
    r.param = nccl_transport_param(r.table, node);
    r.multiplier = r.fit.model == "planner" ? r.fit.multiplier : nccl_busbw_multiplier(r.table, r.fit, node);
    const spec::ParamFamilyInfo f = *spec::param_family_of(r.param);
    if (r.multiplier < f.lower || r.multiplier > f.upper)
      throw core::InputError(r.file + ": its bus bandwidth " + core::format_fixed(r.fit.busbw_GBps, 1) + " GB/s is " +
                             core::format_fixed(r.multiplier, 3) + "x the model's prior for " + r.param + " on node " +
                             node.name + ", outside the family's bounds [" + core::format_fixed(f.lower, 2) + ", " +
                             core::format_fixed(f.upper, 2) + "]: is --node the node the table ran on?");
    out.push_back(r);
  }
  return out;
}

core::Json nccl_json(const std::vector<NcclResult>& nccl)
{
  core::Json arr = core::Json::array();
  for (const NcclResult& n : nccl)
    arr.push_back(core::Json::object({{"file", n.file},
                                      {"collective", to_string(n.table.collective)},
                                      {"ranks", n.table.ranks},
                                      {"nodes", n.nodes},
                                      {"busbw_GBps", n.fit.busbw_GBps},
                                      {"latency_us", n.fit.latency_us},
                                      {"rows_fitted", n.fit.rows},
                                      {"model", n.fit.model},
                                      {"max_busbw_deviation_pct", n.fit.max_deviation_pct},
                                      {"prior_max_busbw_deviation_pct", n.fit.prior_max_deviation_pct},
                                      {"parameter", n.param},
                                      {"multiplier", n.multiplier}}));
  return arr;
}

std::string nccl_markdown(const std::vector<NcclResult>& nccl)
{
  std::ostringstream md;
  md << "## nccl-tests\n\n"
     << "Each table fitted through the planner (model `planner`: collectives::plan's algorithm and protocol at each "
        "size,\nthe multiplier and a latency beyond the planner's) or, for a collective the planner does not plan, as "
        "latency +\nbandwidth (`latency-bandwidth`). Deviation: max |model busbw / measured - 1| at 1 MiB and above, "
        "fitted and\nat the prior.\n\n"
     << "| table | collective | ranks x nodes | model | busbw (GB/s) | latency (us) | max busbw deviation, >= 1 MiB | "
        "at the prior | parameter | multiplier |\n|---|---|---|---|---:|---:|---:|---:|---|---:|\n";
  for (const NcclResult& n : nccl)
    md << "| " << n.file << " | " << to_string(n.table.collective) << " | " << n.table.ranks << " x " << n.nodes
       << " | " << n.fit.model << " | " << core::format_fixed(n.fit.busbw_GBps, 1) << " | "
       << core::format_fixed(n.fit.latency_us, 1) << " | " << pct(n.fit.max_deviation_pct) << " (" << n.fit.checked
       << " sizes) | " << (n.fit.model == "planner" ? pct(n.fit.prior_max_deviation_pct) : std::string("none")) << " | "
       << n.param << " | " << core::format_fixed(n.multiplier, 3) << " |\n";
  return md.str();
}

/// `--gemm`: the GEMM fraction of the node's GPU kind from its timings (today's stack's prior).
std::optional<GemmFit> fit_gemm(const CalibrateArgs& a)
{
  if (a.gemm.empty())
    return std::nullopt;
  spec::Scenario s;
  s.cluster.node = load_node_arg(a.node);
  s.cluster.gpus_per_node = 1;
  s.kernels = config::shipped_kernel_table();
  return fit_gemm_timings(read_gemm_timings(a.gemm), s);
}

std::string gemm_markdown(const GemmFit& g, const std::string& file)
{
  return "## GEMM sweep\n\n| timings | fitted | fp32 left out | parameter | multiplier | median abs error, prior -> "
         "fitted |\n|---|---:|---:|---|---:|---|\n| " +
         file + " | " + std::to_string(g.rows) + " | " + std::to_string(g.skipped_fp32) + " | " + g.param + " | " +
         core::format_fixed(g.multiplier, 3) + (g.at_bound ? " (AT ITS BOUND)" : "") + " | " +
         pct(g.prior_median_abs_pct) + " -> " + pct(g.fitted_median_abs_pct) + " |\n";
}

core::Json gemm_json(const GemmFit& g)
{
  return core::Json::object({{"parameter", g.param},
                             {"multiplier", g.multiplier},
                             {"rows", g.rows},
                             {"skipped_fp32", g.skipped_fp32},
                             {"prior_median_abs_error_pct", g.prior_median_abs_pct},
                             {"fitted_median_abs_error_pct", g.fitted_median_abs_pct},
                             {"at_bound", g.at_bound}});
}

/// A profile entry for `name` at `value` with its family's bounds.
config::CalibrationProfile::Parameter profile_parameter(const std::string& name, double value, const std::string& note)
{
  config::CalibrationProfile::Parameter q;
  q.name = name;
  q.value = value;
  const spec::ParamFamilyInfo f = *spec::param_family_of(name);
  q.lower = f.lower;
  q.upper = f.upper;
  q.note = note;
  return q;
}

/// The profile parameters the nccl-tests tables and the GEMM sweep set (sources: which tables).
void add_nccl_params(config::CalibrationProfile& p, const std::vector<NcclResult>& nccl,
                     const std::map<std::string, double>& fixed_params)
{
  for (const auto& [name, value] : fixed_params) {
    config::CalibrationProfile::Parameter q = profile_parameter(name, value, "");
    for (const NcclResult& n : nccl)
      if (n.param == name) {
        q.sources.push_back(n.file);
        q.rows += n.fit.rows;
      }
    q.note = q.sources.empty() ? "from a GEMM sweep" : "from nccl-tests";
    p.parameters.push_back(q);
  }
}

/// `calibrate --nccl` / `--gemm` without runs: the parts' parameters; every other parameter keeps the value of
/// --calibration's profile (or its prior).
int parts_only(const CalibrateArgs& a, const std::vector<NcclResult>& nccl, const std::optional<GemmFit>& gemm,
               const std::map<std::string, double>& fixed_params, std::ostream& out)
{
  if (!a.out.empty()) {
    config::CalibrationProfile p;
    p.command = a.command;
    p.fitted_on = std::to_string(nccl.size()) + " nccl-tests table(s)" +
                  (gemm ? ", " + std::to_string(gemm->rows) + " timed GEMMs" : std::string());
    if (!a.calibration.empty() && a.calibration != "none") {
      const spec::Calibration base = config::load_calibration(a.calibration);
      for (const auto& [name, value] : base.factors)
        if (!fixed_params.count(name))
          p.parameters.push_back(profile_parameter(name, value, "kept from " + a.calibration));
    }
    add_nccl_params(p, nccl, fixed_params);
    std::sort(p.parameters.begin(), p.parameters.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
    core::write_file(a.out, config::calibration_profile_yaml(p));
  }
  if (a.json) {
    core::Json j = core::Json::object({{"nccl", nccl_json(nccl)}});
    if (gemm)
      j["gemm"] = gemm_json(*gemm);
    out << core::dump_json(j, 2) << "\n";
  } else {
    out << "# Calibration from measurements of the parts\n\n";
    if (!nccl.empty())
      out << nccl_markdown(nccl) << "\n";
    if (gemm)
      out << gemm_markdown(*gemm, a.gemm) << "\n";
    if (!a.out.empty())
      out << "profile: " << a.out << "\n";
  }
  return 0;
}

/// --synthetic's options checked and its true profile read.
std::optional<SyntheticOptions> synthetic_options(const CalibrateArgs& a)
{
  if (a.synthetic.empty())
    return std::nullopt;
  if (a.runs.empty() && a.scenarios.empty())
    throw core::InputError("zerosim calibrate: --synthetic " + a.synthetic +
                           ": expected runs whose measured values it replaces (--runs CSV or --scenario FILE), found "
                           "only " +
                           std::string(a.nccl.empty() ? "--gemm" : "--nccl") +
                           " (nccl-tests tables and GEMM sweeps are not simulated)");
  if (!(a.noise >= 0 && a.noise < 1))
    throw core::InputError("zerosim calibrate: --noise: expected a standard deviation in ln in [0, 1) (0.03 for 3 %), "
                           "found " +
                           core::format_fixed(a.noise, 6));
  if (!core::is_regular_file(a.synthetic, "zerosim calibrate: --synthetic"))
    throw core::InputError("zerosim calibrate: --synthetic: expected a calibration profile file with the true "
                           "multipliers (docs/calibration.md \"The profile\"), found no file at '" +
                           a.synthetic + "'");
  SyntheticOptions o;
  o.truth_file = a.synthetic;
  try {
    o.truth = config::load_calibration(a.synthetic).factors;
  } catch (const core::InputError& e) {
    throw core::InputError(std::string("zerosim calibrate: --synthetic: ") + e.what());
  }
  if (o.truth.empty())
    throw core::InputError("zerosim calibrate: --synthetic " + a.synthetic +
                           ": expected a profile that sets some parameter away from its prior, found none");
  o.noise = a.noise;
  o.seed = a.seed;
  return o;
}

} // namespace

namespace {

/// The profile `calibrate --out` writes: the fitted multipliers with their uncertainty, rows, sources and folds' range,
/// the nccl-tests and GEMM parameters, the in-sample and held-out errors, and the accuracy band per group.
config::CalibrationProfile profile_of(const CalibrateArgs& a, const CalibrationResult& r,
                                      const std::optional<SyntheticOptions>& synthetic,
                                      const std::vector<NcclResult>& nccl,
                                      const std::map<std::string, double>& fixed_params)
{
  config::CalibrationProfile p;
  p.command = a.command;
  std::set<std::string> sources;
  for (const RowResult& x : r.rows)
    sources.insert(x.source);
  p.fitted_on =
      std::to_string(r.rows.size()) + (synthetic ? " synthetic" : "") + " whole-step figures from " +
      std::to_string(sources.size()) + " sources" +
      (synthetic ? " (made at " + synthetic->truth_file + ", noise " + core::format_fixed(synthetic->noise, 3) +
                       ", seed " + std::to_string(synthetic->seed) + ")"
                 : std::string());
  for (const ParameterResult& q : r.params) {
    config::CalibrationProfile::Parameter pp = profile_parameter(q.name, q.value, "");
    pp.uncertainty = q.sigma_ln;
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
  add_nccl_params(p, nccl, fixed_params);
  std::sort(p.parameters.begin(), p.parameters.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  auto loso = [](const RowResult& x) { return x.loso; };
  auto fitted = [](const RowResult& x) -> std::optional<double> { return x.fitted; };
  const core::ErrorStats in = stats_of(r.rows, fitted);
  p.fit.emplace_back("in_sample", "median |error| " + pct(in.median_abs_pct) + ", p90 " + pct(in.p90_abs_pct) +
                                      ", median signed " + core::format_signed_pct(in.median_signed_pct, 1));
  if (!r.folds.empty()) {
    const core::ErrorStats lo = stats_of(r.rows, loso);
    p.fit.emplace_back("leave_one_source_out", "median |error| " + pct(lo.median_abs_pct) + ", p90 " +
                                                   pct(lo.p90_abs_pct) + ", median signed " +
                                                   core::format_signed_pct(lo.median_signed_pct, 1));
  }
  // The accuracy band per group, from the held-out predictions (zerosim run prints it beside its figures).
  std::map<std::string, std::vector<RowResult>> by_group;
  for (const RowResult& x : r.rows)
    by_group[x.group].push_back(x);
  if (!r.folds.empty())
    for (const auto& [group, rows] : by_group) {
      const core::ErrorStats g = stats_of(rows, loso);
      if (g.n == 0)
        continue;
      spec::AccuracyBand b;
      b.kind = spec::AccuracyKind::LEAVE_ONE_SOURCE_OUT;
      b.median_abs_error_pct = g.median_abs_pct;
      b.p90_abs_error_pct = g.p90_abs_pct;
      b.rows = g.n;
      p.accuracy[group] = b;
    }
  p.fit.emplace_back("surrogate_max_deviation",
                     pct(100.0 * (std::exp(std::max(r.max_surrogate_deviation, r.max_loso_surrogate_deviation)) - 1)));
  return p;
}

} // namespace

int calibrate_command(const CalibrateArgs& a, std::ostream& out, std::ostream& progress)
{
  if (a.runs.empty() && a.scenarios.empty() && a.nccl.empty() && a.gemm.empty())
    throw core::InputError("zerosim calibrate: give measured runs (--runs CSV), scenarios with a measured: block "
                           "(--scenario FILE), nccl-tests tables (--nccl FILE) or GEMM timings (--gemm CSV) (see "
                           "'zerosim calibrate --help')");
  const std::optional<SyntheticOptions> synthetic = synthetic_options(a);
  const std::vector<NcclResult> nccl = fit_nccl(a);
  std::map<std::string, std::vector<double>> by_param;
  for (const NcclResult& n : nccl)
    by_param[n.param].push_back(std::log(n.multiplier));
  std::map<std::string, double> fixed_params; // several tables of one transport: their geometric mean
  for (const auto& [p, v] : by_param) {
    double s = 0;
    for (double x : v)
      s += x;
    fixed_params[p] = std::exp(s / static_cast<double>(v.size()));
  }
  const std::optional<GemmFit> gemm = fit_gemm(a);
  if (gemm)
    fixed_params[gemm->param] = gemm->multiplier;
  if (a.runs.empty() && a.scenarios.empty())
    return parts_only(a, nccl, gemm, fixed_params, out);
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
  const BatchPredictor predict = pool_predictor(a.jobs, 300);
  if (synthetic) {
    progress << "calibrate: synthetic measurements at " << synthetic->truth_file << ", noise "
             << core::format_fixed(synthetic->noise, 3) << ", seed " << synthetic->seed << ": " << obs.size()
             << " simulations\n";
    obs = synthesize(obs, *synthetic, predict, skipped);
  }
  CalibrateOptions opts;
  opts.params = a.params;
  opts.held = a.held;
  opts.fixed = fixed_params;
  opts.loso = a.loso;
  opts.progress = &progress;
  const CalibrationResult r = calibrate(obs, opts, predict);
  std::optional<Recovery> rec;
  if (synthetic) {
    std::set<std::string> used;
    for (const Observation& o : obs)
      for (const std::string& n : applicable_params(o.c.scenario))
        used.insert(n);
    rec = recovery(r, *synthetic, opts, used);
  }

  if (!a.out.empty())
    core::write_file(a.out, config::calibration_profile_yaml(profile_of(a, r, synthetic, nccl, fixed_params)));

  if (a.json) {
    core::Json params = core::Json::array();
    for (const ParameterResult& q : r.params)
      params.push_back(core::Json::object({{"name", q.name},
                                           {"value", q.value},
                                           {"sigma_ln", q.sigma_ln},
                                           {"at_bound", q.at_bound},
                                           {"rows", q.rows},
                                           {"sources", static_cast<int>(q.sources.size())}}));
    core::Json rows = core::Json::array();
    for (const RowResult& x : r.rows) {
      core::Json j = core::Json::object({{"label", x.label},
                                         {"source", x.source},
                                         {"metric", validation::to_string(x.metric)},
                                         {"measured", x.measured},
                                         {"prior", x.prior},
                                         {"fitted", x.fitted},
                                         {"surrogate", x.surrogate}});
      if (x.loso)
        j["loso"] = *x.loso;
      rows.push_back(j);
    }
    core::Json j =
        core::Json::object({{"parameters", params},
                            {"rows", rows},
                            {"linearisations", r.linearisations},
                            {"simulations", r.simulations},
                            {"surrogate_max_deviation", std::exp(r.max_surrogate_deviation) - 1},
                            {"loso_surrogate_max_deviation", std::exp(r.max_loso_surrogate_deviation) - 1},
                            {"heldout_extrapolation_max_deviation", std::exp(r.max_heldout_extrapolation) - 1},
                            {"nccl", nccl_json(nccl)},
                            {"gemm", gemm ? gemm_json(*gemm) : core::Json()}});
    if (rec)
      j["synthetic"] = recovery_json(*rec, *synthetic, static_cast<int>(r.rows.size()));
    out << core::dump_json(j, 2) << "\n";
  } else {
    if (rec)
      out << "Synthetic measurements (--synthetic " << synthetic->truth_file
          << "): the fit's recovery of the true multipliers is under \"Synthetic recovery\" below.\n\n";
    out << render_calibration_markdown(r);
    if (rec)
      out << "\n" << recovery_markdown(*rec, *synthetic, static_cast<int>(r.rows.size()));
    if (!nccl.empty())
      out << "\n" << nccl_markdown(nccl);
    if (gemm)
      out << "\n" << gemm_markdown(*gemm, a.gemm);
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
