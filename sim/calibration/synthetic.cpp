// Synthetic recovery (synthetic.hpp, docs/calibration.md "Synthetic recovery").
#include "calibration/synthetic.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace zerosim::calibration {
namespace {

/// splitmix64 (Steele, Lea, Flood 2014): one step of the state, one output.
std::uint64_t splitmix64(std::uint64_t& state)
{
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a64(std::string_view bytes)
{
  std::uint64_t h = 14695981039346656037ULL;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

/// A uniform in (0, 1) from the top 53 bits: (k + 0.5) / 2^53, never 0 or 1.
double open_uniform(std::uint64_t& state)
{
  return (static_cast<double>(splitmix64(state) >> 11) + 0.5) * 0x1.0p-53;
}

} // namespace

double synthetic_normal(std::uint64_t seed, std::string_view label)
{
  std::uint64_t state = seed;
  state = splitmix64(state) ^ fnv1a64(label);
  const double u1 = open_uniform(state);
  const double u2 = open_uniform(state);
  constexpr double two_pi = 6.283185307179586476925286766559;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
}

std::vector<Observation> synthesize(const std::vector<Observation>& observations, const SyntheticOptions& options,
                                    const BatchPredictor& predict, std::vector<std::string>& dropped)
{
  std::vector<validation::ThroughputCase> cases;
  for (const Observation& o : observations) {
    validation::ThroughputCase c = o.c;
    c.scenario.calibration.factors = options.truth; // exactly the truth: a profile the scenario brought is not mixed in
    c.scenario.calibration.path = options.truth_file;
    c.scenario.calibration.hash.clear();
    c.scenario.calibration.accuracy.clear();
    cases.push_back(c);
  }
  const std::vector<validation::RowOutcome> out = predict(cases);
  std::vector<Observation> result;
  for (std::size_t i = 0; i < observations.size(); ++i) {
    const Observation& o = observations[i];
    double v = NAN;
    if (out[i].status == validation::RowStatus::DONE)
      v = predicted_figure(o.c, out[i].predicted);
    if (!(v > 0) || !std::isfinite(v)) {
      dropped.push_back(o.label + " (" + o.source + "): not predicted at the true multipliers (" +
                        (out[i].status == validation::RowStatus::DONE
                             ? std::string("no positive figure")
                             : validation::to_string(out[i].status) + ": " + out[i].message) +
                        "); left out of the synthetic data");
      continue;
    }
    Observation s = o;
    s.c.figures.resize(1); // only the primary figure is fitted; the others would keep measured values
    s.c.figures.front().value = v * std::exp(options.noise * synthetic_normal(options.seed, o.label));
    result.push_back(s);
  }
  return result;
}

int Recovery::judged() const
{
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const RecoveryRow& r) { return r.judged; }));
}

int Recovery::recovered() const
{
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [&](const RecoveryRow& r) { return within(r); }));
}

std::string Recovery::verdict() const
{
  std::string failed, unjudged;
  for (const RecoveryRow& r : rows)
    if (!r.judged)
      unjudged += (unjudged.empty() ? "" : ", ") + r.name;
    else if (!within(r))
      failed +=
          (failed.empty() ? "" : ", ") + r.name +
          (r.fit
               ? " (" + core::format_signed_pct(100.0 * r.error(), 1) +
                     (r.deviation_sd() ? ", " + core::format_fixed(*r.deviation_sd(), 1) + " sd" : std::string()) + ")"
               : std::string(" (not fitted)"));
  std::string v = std::to_string(recovered()) + " of " + std::to_string(judged()) + " parameters recovered within " +
                  core::format_fixed(100.0 * tolerance, 0) + " % of the truth";
  v = failed.empty() ? "PASS: " + v : "FAIL: " + v + "; not recovered: " + failed;
  if (!unjudged.empty())
    v += "; not fitted (no row informs it, or its prior fixes it more than the data do) and left at the prior, where "
         "the truth has them too: " +
         unjudged;
  return v;
}

Recovery recovery(const CalibrationResult& r, const SyntheticOptions& options, const CalibrateOptions& fit,
                  const std::set<std::string>& used, double tolerance)
{
  const std::map<std::string, double>& fixed_params = fit.fixed;
  Recovery rec;
  rec.tolerance = tolerance;
  // The costs: the data's over the rows, the priors' over the fitted parameters.
  const double t = fit.huber_threshold;
  auto rho = [t](double x) { return t > 0 && std::abs(x) > t ? 2 * t * std::abs(x) - t * t : x * x; };
  std::vector<std::string> sources;
  for (const RowResult& x : r.rows)
    sources.push_back(x.source);
  const std::vector<double> w = row_weights(sources);
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const RowResult& x = r.rows[i];
    rec.cost_fit += w[i] * rho(std::log(x.fitted) - std::log(x.measured));
    rec.cost_truth += w[i] * rho(-options.noise * synthetic_normal(options.seed, x.label));
  }
  for (const ParameterResult& p : r.params) {
    const double truth = options.truth.count(p.name) ? options.truth.at(p.name) : 1.0;
    rec.cost_fit += std::pow(std::log(p.value) / p.family.prior_sigma, 2);
    rec.cost_truth += std::pow(std::log(truth) / p.family.prior_sigma, 2);
  }
  std::map<std::string, RecoveryRow> by;
  for (const auto& [name, value] : options.truth) {
    RecoveryRow& row = by[name];
    row.name = name;
    row.truth = value;
    if (used.count(name)) {
      row.note = "the runs use it but the fit left it out (--fit-params): the data carry its true value, the fit "
                 "its prior";
    } else {
      row.note = "no observation's run uses it: left at its prior";
    }
  }
  for (const ParameterResult& p : r.params) {
    RecoveryRow& row = by[p.name];
    row.name = p.name;
    row.truth = options.truth.count(p.name) ? options.truth.at(p.name) : 1.0;
    row.fitted = p.value;
    row.fit = true;
    row.at_bound = p.at_bound;
    row.rows = p.rows;
    row.sources = static_cast<int>(p.sources.size());
    row.sigma_ln = p.sigma_ln;
    if (p.family.prior_sigma > 0)
      row.prior_pull = (p.sigma_ln / p.family.prior_sigma) * (p.sigma_ln / p.family.prior_sigma);
    row.note.clear();
    if (p.at_bound)
      row.note = "AT ITS BOUND";
    if (p.sources.size() == 1)
      row.note += std::string(row.note.empty() ? "" : "; ") + "one source informs it";
    if (!options.truth.count(p.name))
      row.note += std::string(row.note.empty() ? "" : "; ") + "the true profile leaves it at its prior";
  }
  for (const std::string& u : r.uninformed) {
    const std::string name = u.substr(0, u.find(':'));
    RecoveryRow& row = by[name];
    row.name = name;
    row.truth = options.truth.count(name) ? options.truth.at(name) : 1.0;
    row.fitted = 1.0;
    row.fit = false;
    row.judged = options.truth.count(name) > 0;
    row.note = "not fitted: " + u.substr(u.find(':') + 2);
  }
  for (const auto& [name, value] : fixed_params) {
    RecoveryRow& row = by[name];
    row.name = name;
    row.truth = options.truth.count(name) ? options.truth.at(name) : 1.0;
    row.fitted = value;
    row.fit = false;
    row.note = "held at the value of --nccl / --gemm, not fitted";
  }
  for (auto& [name, row] : by) {
    // A parameter the runs use, neither fitted nor informing no row, held away from its truth: the fit cannot reach
    // the truth's residuals, and the costs do not compare.
    // The prefix is a copy: clang 14 refuses a lambda that captures a structured binding (C++20 allows it).
    const std::string prefix = name + ":";
    const bool uninformed = std::any_of(r.uninformed.begin(), r.uninformed.end(),
                                        [&](const std::string& u) { return u.rfind(prefix, 0) == 0; });
    if (used.count(name) && !row.fit && !uninformed && row.fitted != row.truth)
      rec.costs_compare = false;
    rec.rows.push_back(row);
  }
  return rec;
}

std::string recovery_markdown(const Recovery& rec, const SyntheticOptions& options, int rows)
{
  std::ostringstream md;
  md << "## Synthetic recovery\n\n"
     << "The measured values above are synthetic: each of the " << rows
     << " observations' primary figure is the simulator's prediction with the multipliers of " << options.truth_file
     << " (every other parameter at its prior) times exp(" << core::format_fixed(options.noise, 3)
     << " z), z standard normal from splitmix64 + Box-Muller seeded by " << options.seed
     << " and the row's label. The fit started at the priors. 1 sd: the fit's own standard deviation of the "
        "multiplier (docs/calibration.md \"Uncertainty\"), as a percentage; off by: ln(fitted / true) in those "
        "standard deviations (within 2 either way: the miss is what these rows can tell). Prior pull: (sd of the fit "
        "/ sd of the prior)^2 in ln, the prior's share of what fixes the parameter (near 1: the data say little and "
        "the fit stays near 1).\n\n"
     << "| parameter | true | fitted | fitted/true - 1 | within " << core::format_fixed(100.0 * rec.tolerance, 0)
     << " % | 1 sd | off by | prior pull | rows | sources | note |\n"
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n";
  for (const RecoveryRow& r : rec.rows) {
    md << "| " << r.name << " | " << core::format_fixed(r.truth, 3) << " | "
       << (r.fit ? core::format_fixed(r.fitted, 3) : "not fitted") << " | "
       << (r.fit ? core::format_signed_pct(100.0 * r.error(), 1) : std::string("-")) << " | "
       << (!r.judged       ? "-"
           : rec.within(r) ? "yes"
                           : "no")
       << " | "
       << (r.fit && r.sigma_ln ? core::format_fixed(100.0 * (std::exp(*r.sigma_ln) - 1.0), 1) + " %" : std::string("-"))
       << " | " << (r.deviation_sd() ? core::format_fixed(*r.deviation_sd(), 1) + " sd" : std::string("-")) << " | "
       << (r.prior_pull ? core::format_fixed(*r.prior_pull, 2) : std::string("-")) << " | " << r.rows << " | "
       << r.sources << " | " << r.note << " |\n";
  }
  md << "\nThe fit's cost (data and priors, docs/calibration.md \"The fit\") on the simulator's predictions: "
     << core::format_fixed(rec.cost_fit, 1) << " at the fitted multipliers, " << core::format_fixed(rec.cost_truth, 1)
     << " at the true ones ("
     << (!rec.costs_compare ? "not comparable: a parameter the runs use is held away from its true value"
         : rec.cost_fit <= rec.cost_truth
             ? "the fit reached a point that its own measure prefers to the truth: what it misses is the estimator's "
               "bias, the priors' pull, not where the optimiser stopped"
             : "above the truth's: the optimiser stopped short of the minimum")
     << ").\n\nVerdict: " << rec.verdict() << ".\n";
  return md.str();
}

core::Json recovery_json(const Recovery& rec, const SyntheticOptions& options, int rows)
{
  core::Json params = core::Json::array();
  for (const RecoveryRow& r : rec.rows)
    params.push_back(
        core::Json::object({{"name", r.name},
                            {"true", r.truth},
                            {"fitted", r.fit ? core::Json(r.fitted) : core::Json()},
                            {"relative_error", r.fit ? core::Json(r.error()) : core::Json()},
                            {"within_tolerance", r.judged ? core::Json(rec.within(r)) : core::Json()},
                            {"sigma_ln", r.fit && r.sigma_ln ? core::Json(*r.sigma_ln) : core::Json()},
                            {"deviation_sd", r.deviation_sd() ? core::Json(*r.deviation_sd()) : core::Json()},
                            {"prior_pull", r.prior_pull ? core::Json(*r.prior_pull) : core::Json()},
                            {"at_bound", r.at_bound},
                            {"rows", r.rows},
                            {"sources", r.sources},
                            {"note", r.note}}));
  return core::Json::object({{"truth", options.truth_file},
                             {"noise", options.noise},
                             {"seed", static_cast<std::int64_t>(options.seed)},
                             {"rows", rows},
                             {"tolerance", rec.tolerance},
                             {"parameters", params},
                             {"judged", rec.judged()},
                             {"recovered", rec.recovered()},
                             {"cost_at_fit", rec.cost_fit},
                             {"cost_at_truth", rec.cost_truth},
                             {"costs_compare", rec.costs_compare},
                             {"verdict", rec.verdict()}});
}

} // namespace zerosim::calibration
