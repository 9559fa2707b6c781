// The calibration loop (calibrate.hpp, docs/calibration.md "The fit"): simulate, linearise, solve, re-simulate, and
// leave one source out.
#include "calibration/calibrate.hpp"

#include "core/error.hpp"
#include "core/text.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace zerosim::calibration {
namespace {

using validation::RowOutcome;
using validation::RowStatus;
using validation::ThroughputCase;

/// The surrogate must agree with the simulator within 2 % on every row (ln(1.02)).
const double SURROGATE_TOLERANCE = std::log(1.02);
/// The spread assumed for one published figure's ln(measured): 5 %. Published runs carry chart reads, rounding and
/// unstated stacks of a few percent (docs/design.md "Accuracy"); a row's weight is its source's share over this
/// variance.
constexpr double DATA_SIGMA = 0.05;

/// The case with the fit's multipliers on its scenario: every fitted parameter named (so a profile the scenario
/// brought along does not mix in), its own parameters from `x`.
ThroughputCase with_factors(const ThroughputCase& c, const std::vector<std::string>& names, const Eigen::VectorXd& x,
                            const std::map<std::string, double>& fixed)
{
  ThroughputCase out = c;
  out.scenario.calibration.factors = fixed;
  out.scenario.calibration.path = "zerosim calibrate (fit in progress)";
  out.scenario.calibration.hash.clear();
  for (std::size_t j = 0; j < names.size(); ++j)
    out.scenario.calibration.factors[names[j]] = std::exp(x(static_cast<Eigen::Index>(j)));
  return out;
}

/// The families' prefixes, for an error message ("gemm, attention, ...").
std::string family_names()
{
  std::string families;
  for (const spec::ParamFamilyInfo& g : spec::param_families())
    families += (families.empty() ? "" : ", ") + std::string(g.prefix);
  return families;
}

void check_name(const std::string& name)
{
  const std::optional<spec::ParamFamilyInfo> f = spec::param_family_of(name);
  if (!f)
    throw core::InputError("--params: unknown parameter '" + name + "'; families: " + family_names() +
                           " (docs/calibration.md)");
  const std::string key = spec::param_key(name);
  bool ok = f->family == spec::ParamFamily::INTERFERENCE ? key.empty() : !key.empty();
  if (ok && !f->keys.empty())
    ok = std::find(f->keys.begin(), f->keys.end(), key) != f->keys.end();
  if (!ok)
    throw core::InputError("--params: '" + name + "' is no parameter of the " + std::string(f->prefix) +
                           " family (docs/calibration.md lists its names)");
}

/// A --hold entry: a family ("hbm", "interference") or one of its parameters ("busbw.nvlink").
void check_held(const std::string& name)
{
  if (name.find('.') != std::string::npos) {
    check_name(name);
    return;
  }
  if (!spec::param_family_of(name))
    throw core::InputError("--hold: unknown parameter family '" + name + "'; families: " + family_names() +
                           " (docs/calibration.md)");
}

} // namespace

std::string held_list(const std::vector<std::string>& held)
{
  std::string s;
  for (const std::string& h : held)
    s += (s.empty() ? "" : ",") + h;
  return s;
}

std::vector<double> row_weights(const std::vector<std::string>& sources)
{
  // Every source weighs the same in all (a source's rows share its weight), the weights averaging 1 / DATA_SIGMA^2 per
  // row.
  std::map<std::string, int> per_source;
  for (const std::string& s : sources)
    ++per_source[s];
  std::vector<double> w;
  for (const std::string& s : sources) {
    const double balance = static_cast<double>(sources.size()) /
                           (static_cast<double>(per_source.size()) * static_cast<double>(per_source[s]));
    w.push_back(balance / (DATA_SIGMA * DATA_SIGMA));
  }
  return w;
}

BatchPredictor pool_predictor(int jobs, double row_time_limit_s)
{
  return [jobs, row_time_limit_s](const std::vector<ThroughputCase>& cases) {
    validation::RunOptions o;
    o.jobs = jobs;
    o.row_time_limit_s = row_time_limit_s;
    return validation::run_cases(cases, validation::predict_case, o);
  };
}

std::vector<std::string> applicable_params(const spec::Scenario& s)
{
  std::vector<std::string> out;
  if (s.kernels.empty())
    return out;
  const std::string kind = s.gpu_kind();
  out.push_back("gemm." + kind);
  out.push_back("hbm." + kind);
  if (spec::is_fused(s.priced_software().attention))
    out.push_back("attention." + kind);
  if (s.world() > 1) {
    if (s.cluster.gpus_per_node > 1)
      out.push_back(s.cluster.node.nvlink.present ? "busbw.nvlink" : "busbw.pcie");
    if (s.cluster.nodes > 1)
      out.push_back("busbw.net");
    if (s.mechanisms.interference && s.kernels.nccl_ctas.value > 0)
      out.push_back("interference");
  }
  if (s.mechanisms.host_dispatch && !s.kernels.host.empty())
    out.push_back(std::string("host.") + spec::to_string(s.framework));
  return out;
}

double predicted_figure(const ThroughputCase& c, const validation::PredictedFigures& p)
{
  return validation::predicted_value(c.figures.front().metric, p);
}

double row_error_pct(const RowResult& r, double predicted)
{
  return validation::signed_error_pct(r.metric, predicted, r.measured);
}

namespace {

/// What calibrate() shares between its fits: the observations, the parameters, which parameters each observation's run
/// uses (the Jacobian's sparsity), how to simulate, and the running count of simulations.
struct FitContext {
  const std::vector<Observation>& observations;
  const std::vector<std::string>& names;
  std::vector<std::vector<int>>& uses; ///< per observation: the parameters its run uses (indices into names)
  const CalibrateOptions& options;
  const BatchPredictor& predict;
  CalibrationResult& result;
  std::function<void(const std::string&)> say;

  /// The simulations of one linearisation at x over observations `rows`: each row at x unless `base` already holds
  /// it (have_base), then once per parameter it uses (and `stepped` allows), that parameter stepped down by `step`.
  /// Fills base[i] (ln prediction at x, NaN: none) and jac's row i (observation-indexed); `at_x` receives the
  /// outcomes at x (in `rows` order) when the base is simulated here.
  void linearise(const std::vector<std::size_t>& rows, const Eigen::VectorXd& x, bool have_base,
                 const std::vector<bool>& stepped, std::vector<double>& base, Eigen::MatrixXd& jac,
                 std::vector<RowOutcome>* at_x, const std::string& label)
  {
    std::vector<ThroughputCase> cases;
    std::vector<std::pair<std::size_t, int>> what; // (observation, parameter or -1 for the base)
    for (std::size_t i : rows) {
      if (!have_base) {
        cases.push_back(with_factors(observations[i].c, names, x, options.fixed));
        what.emplace_back(i, -1);
      }
      for (int j : uses[i]) {
        if (!stepped[static_cast<std::size_t>(j)])
          continue;
        Eigen::VectorXd xs = x;
        xs(j) -= options.step;
        cases.push_back(with_factors(observations[i].c, names, xs, options.fixed));
        what.emplace_back(i, j);
      }
    }
    say(label + ": " + std::to_string(cases.size()) + " simulations");
    const std::vector<RowOutcome> out = predict(cases);
    result.simulations += static_cast<int>(cases.size());
    for (std::size_t i : rows)
      jac.row(static_cast<Eigen::Index>(i)).setZero();
    for (std::size_t k = 0; k < what.size(); ++k) {
      const auto [i, j] = what[k];
      if (j >= 0)
        continue;
      base[i] = NAN;
      if (out[k].status == RowStatus::DONE) {
        const double v = predicted_figure(observations[i].c, out[k].predicted);
        if (v > 0 && std::isfinite(v))
          base[i] = std::log(v);
      }
      if (at_x)
        at_x->push_back(out[k]);
    }
    for (std::size_t k = 0; k < what.size(); ++k) {
      const auto [i, j] = what[k];
      if (j < 0 || std::isnan(base[i]) || out[k].status != RowStatus::DONE)
        continue;
      const double v = predicted_figure(observations[i].c, out[k].predicted);
      if (v > 0 && std::isfinite(v))
        jac(static_cast<Eigen::Index>(i), j) = (std::log(v) - base[i]) / -options.step;
    }
  }

  /// ln of the simulator's prediction of each kept row at x (NaN where it gave none).
  Eigen::VectorXd simulate(const std::vector<std::size_t>& kept, const Eigen::VectorXd& x)
  {
    std::vector<ThroughputCase> check;
    for (std::size_t i : kept)
      check.push_back(with_factors(observations[i].c, names, x, options.fixed));
    const std::vector<RowOutcome> out = predict(check);
    result.simulations += static_cast<int>(check.size());
    Eigen::VectorXd sim(static_cast<Eigen::Index>(kept.size()));
    for (std::size_t k = 0; k < kept.size(); ++k) {
      const double v =
          out[k].status == RowStatus::DONE ? predicted_figure(observations[kept[k]].c, out[k].predicted) : NAN;
      sim(static_cast<Eigen::Index>(k)) = v > 0 && std::isfinite(v) ? std::log(v) : NAN;
    }
    return sim;
  }
};

/// One fit on the simulator: its last surrogate, the accepted minimiser, the simulator's ln predictions there and how
/// far the surrogate is from them.
struct SimulatorFit {
  FitProblem problem;     ///< the last linearisation over the kept rows (weight 0: rows this fit leaves out)
  FitResult fit;          ///< the accepted minimiser (the first linearisation point when no step lowered the cost)
  Eigen::VectorXd at_fit; ///< ln of the simulator's prediction per kept row at fit.x (NaN: none)
  double deviation = 0;   ///< max |at_fit - surrogate(fit.x)| over the rows the fit uses (weight > 0)
  int linearisations = 0;
};

/// The residuals of the rows a fit uses; 0 for the rows it leaves out (weight 0), whose simulation may have failed.
Eigen::VectorXd used_residuals(const FitProblem& p, const Eigen::VectorXd& ln_pred)
{
  Eigen::VectorXd r = ln_pred - p.target;
  for (Eigen::Index i = 0; i < r.size(); ++i)
    if (!(p.weight(i) > 0))
      r(i) = 0;
  return r;
}

/// A frozen parameter stays at its prior. Every solved step holds it there; only when no step was accepted from the
/// starting linearisation (a fold started from the in-sample fit) can it still sit where that one put it: move it back
/// and simulate there, so that the rows it moves (a fold's held-out rows) are predicted at the prior.
void restore_frozen(FitContext& ctx, const std::vector<std::size_t>& kept, const FitProblem& problem,
                    const std::vector<bool>& free, SimulatorFit& out)
{
  const std::size_t np = ctx.names.size();
  const auto nr = static_cast<Eigen::Index>(kept.size());
  bool off_prior = false;
  for (std::size_t j = 0; j < np; ++j)
    if (!free[j] && out.fit.x(static_cast<Eigen::Index>(j)) != problem.params[j].prior) {
      out.fit.x(static_cast<Eigen::Index>(j)) = problem.params[j].prior;
      off_prior = true;
    }
  if (off_prior) {
    out.at_fit = ctx.simulate(kept, out.fit.x);
    const Eigen::VectorXd surr = surrogate(out.problem, out.fit.x);
    out.deviation = 0;
    for (Eigen::Index r = 0; r < nr; ++r)
      if (out.problem.weight(r) > 0)
        out.deviation = std::max(out.deviation, std::abs(out.at_fit(r) - surr(r)));
  }
}

/// Gauss-Newton with a trust region on the simulator (docs/calibration.md "Surrogate and trust region"), from
/// `problem`, a linearisation whose y0 the simulator gave at its x0: solve on the surrogate within |x - x0| <= radius
/// (and the bounds; a frozen parameter stays at its prior), simulate every kept row at the solution, accept it when
/// the simulated cost fell, else shrink the radius and solve again. Converged when the surrogate agrees with the
/// simulator within 2 % on every row the fit uses at an accepted step that is small, inside the radius, or lowered
/// the cost by less than one standard deviation's worth; otherwise, when the surrogate was off, re-linearised at the
/// accepted point (only its free parameters, only the rows the fit uses whose surrogate missed by more than 1 % there),
/// else moved there on the same Jacobian.
SimulatorFit trust_region(FitContext& ctx, const std::vector<std::size_t>& kept, FitProblem problem,
                          const std::string& who)
{
  const std::size_t np = ctx.names.size();
  const auto nr = static_cast<Eigen::Index>(kept.size());
  std::vector<bool> free(np);
  int n_free = 0;
  for (std::size_t j = 0; j < np; ++j) {
    free[j] = !problem.params[j].frozen;
    n_free += free[j] ? 1 : 0;
  }
  std::vector<std::size_t> used; // the observations this fit's rows use
  for (Eigen::Index r = 0; r < nr; ++r)
    if (problem.weight(r) > 0)
      used.push_back(kept[static_cast<std::size_t>(r)]);

  SimulatorFit out;
  Eigen::VectorXd x_lin = problem.x0;
  Eigen::VectorXd base = problem.y0; // the simulator's ln predictions at x_lin, per kept row
  double radius = ctx.options.initial_radius;
  out.fit = solve(problem);
  out.fit.x = x_lin;
  out.at_fit = base;
  const int max_linearisations = std::max(1, ctx.options.max_linearisations);
  int lin = 0;              // the linearisations made so far, less one (the first is given)
  bool relinearise = false; // the last accepted step found the surrogate off by more than 2 %
  for (int iter = 0; iter < 3 * max_linearisations; ++iter) {
    if (iter > 0 && !relinearise) {
      // The surrogate held within 2 % out to the accepted step, which the radius stopped: keep its Jacobian and move
      // its base to the step's simulations (no simulation needed), then try a larger step.
      problem.x0 = x_lin;
      problem.y0 = base;
    } else if (iter > 0) {
      if (lin + 1 >= max_linearisations)
        break;
      ++lin;
      // Only the rows the surrogate missed by more than half the tolerance at the accepted point are re-linearised;
      // the others were linear out to it, and keep their Jacobian rows (the stop below checks every row again).
      const Eigen::VectorXd was = surrogate(problem, x_lin);
      std::vector<std::size_t> drifted;
      std::vector<Eigen::Index> drifted_rows;
      for (Eigen::Index r = 0; r < nr; ++r)
        if (problem.weight(r) > 0 && !(std::abs(base(r) - was(r)) <= SURROGATE_TOLERANCE / 2)) {
          drifted.push_back(kept[static_cast<std::size_t>(r)]);
          drifted_rows.push_back(r);
        }
      std::vector<double> b(ctx.observations.size(), NAN);
      Eigen::MatrixXd jac =
          Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(ctx.observations.size()), static_cast<Eigen::Index>(np));
      for (Eigen::Index r = 0; r < nr; ++r)
        b[kept[static_cast<std::size_t>(r)]] = base(r);
      ctx.linearise(drifted, x_lin, true, free, b, jac, nullptr,
                    who + ": linearisation " + std::to_string(lin + 1) + " (" + std::to_string(drifted.size()) +
                        " of " + std::to_string(used.size()) + " rows)");
      problem.x0 = x_lin;
      problem.y0 = base;
      for (Eigen::Index r : drifted_rows)
        problem.jacobian.row(r) = jac.row(static_cast<Eigen::Index>(kept[static_cast<std::size_t>(r)]));
    }
    const double cost_lin = data_cost(problem, used_residuals(problem, problem.y0)) + prior_cost(problem, x_lin);
    // A change of the cost that moves the parameters by less than one standard deviation: 1 on the chi-square, scaled
    // as the uncertainty is (by chi-square / degrees of freedom when the data scatter more than their weights say).
    const double one_sigma = std::max(1.0, cost_lin / std::max<double>(1, static_cast<double>(used.size()) - n_free));
    bool accepted = false;
    bool inside = false;
    bool settled = false; // the accepted step, predicted well, lowered the simulated cost by less than one_sigma
    for (int attempt = 0; attempt < 6 && !accepted && radius >= ctx.options.converged_step / 2; ++attempt) {
      FitProblem boxed = problem;
      for (std::size_t j = 0; j < np; ++j) {
        FitParameter& q = boxed.params[j];
        if (q.frozen)
          continue;
        const double c = x_lin(static_cast<Eigen::Index>(j));
        q.lower = std::max(q.lower, c - radius);
        q.upper = std::min(q.upper, c + radius);
      }
      const FitResult step = solve(boxed);
      double moved = 0;
      inside = true;
      for (std::size_t j = 0; j < np; ++j) {
        if (!free[j])
          continue;
        const auto jj = static_cast<Eigen::Index>(j);
        moved = std::max(moved, std::abs(step.x(jj) - x_lin(jj)));
        const bool on_radius =
            (step.x(jj) <= boxed.params[j].lower + 1e-9 && boxed.params[j].lower > problem.params[j].lower + 1e-9) ||
            (step.x(jj) >= boxed.params[j].upper - 1e-9 && boxed.params[j].upper < problem.params[j].upper - 1e-9);
        inside = inside && !on_radius;
      }
      const Eigen::VectorXd sim = ctx.simulate(kept, step.x);
      bool all = true;
      for (Eigen::Index r = 0; r < nr; ++r)
        all = all && (!(problem.weight(r) > 0) || std::isfinite(sim(r)));
      const double cost =
          all ? data_cost(problem, used_residuals(problem, sim)) + prior_cost(problem, step.x) : INFINITY;
      // How much of the reduction the surrogate promised the simulator delivered.
      const Eigen::VectorXd surr = surrogate(problem, step.x);
      const double promised =
          cost_lin - (data_cost(problem, used_residuals(problem, surr)) + prior_cost(problem, step.x));
      const double ratio = promised > 0 ? (cost_lin - cost) / promised : 1.0;
      double dev = all ? 0.0 : INFINITY;
      for (Eigen::Index r = 0; all && r < nr; ++r)
        if (problem.weight(r) > 0)
          dev = std::max(dev, std::abs(sim(r) - surr(r)));
      ctx.say(who + ": linearisation " + std::to_string(lin + 1) + ", step " + std::to_string(attempt + 1) +
              ": radius " + std::to_string(radius) + ", moved " + std::to_string(moved) + ", cost " +
              std::to_string(cost_lin) + " -> " + std::to_string(cost) + ", surrogate within " +
              std::to_string(100.0 * (std::exp(dev) - 1.0)) + " %");
      if (cost <= cost_lin || moved < 1e-6) {
        accepted = true;
        out.fit = step;
        out.at_fit = sim;
        out.deviation = dev;
        if (ratio < 0.25)
          radius = std::max(ctx.options.converged_step, moved / 2); // the surrogate was poor that far out
        else if (!inside && ratio > 0.75)
          radius *= 2;
        if (moved < ctx.options.converged_step)
          inside = true;
        // As scipy's least_squares ends on ftol: only where the surrogate predicted the step well (ratio > 0.25),
        // so that a step the region cut short after the surrogate failed further out does not end the fit.
        settled = cost_lin - cost < one_sigma && ratio > 0.25;
      } else {
        radius = moved / 3; // below converged_step / 2 the attempts stop: x_lin is the minimum this close
      }
    }
    out.linearisations = lin + 1;
    out.problem = problem;
    if (!accepted) {
      // No step within the smallest region lowers the simulated cost: x_lin is the minimum, its simulations the ones
      // at hand (the previous accepted step's, or the first linearisation's).
      ctx.say(who + ": linearisation " + std::to_string(lin + 1) + ": no smaller step lowers the cost; converged");
      out.deviation = 0; // fit.x is x_lin, where this surrogate was linearised
      break;
    }
    if ((inside || settled) && out.deviation <= SURROGATE_TOLERANCE)
      break;
    // The next step starts where this one was accepted; its base simulations are the accepted ones.
    x_lin = out.fit.x;
    base = out.at_fit;
    relinearise = out.deviation > SURROGATE_TOLERANCE;
  }
  restore_frozen(ctx, kept, problem, free, out);
  return out;
}

/// The parameters to fit: those named (checked), or every one some observation's run uses but those held fixed; sorted,
/// each once.
std::vector<std::string> fit_names(const std::vector<Observation>& observations, const CalibrateOptions& options)
{
  std::vector<std::string> names = options.params;
  for (const std::string& n : names)
    check_name(n);
  for (const std::string& h : options.held)
    check_held(h);
  if (!names.empty() && !options.held.empty())
    throw core::InputError("calibrate: --hold " + held_list(options.held) +
                           " and --fit-params both given: --fit-params names the whole set, so nothing is left to hold "
                           "(give one of them)");
  if (names.empty()) {
    std::set<std::string> all;
    for (const Observation& o : observations)
      for (const std::string& n : applicable_params(o.c.scenario))
        all.insert(n);
    for (const auto& [n, v] : options.fixed)
      all.erase(n);
    for (const std::string& h : options.held)
      std::erase_if(all, [&](const std::string& n) { return n == h || n.starts_with(h + "."); });
    names.assign(all.begin(), all.end());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.empty())
    throw core::InputError("calibrate: no parameter to fit (no observation, or none of their runs uses one)");
  return names;
}

/// Which parameters each observation's run uses (the Jacobian's sparsity: the others are exactly 0), as indices into
/// `names`.
std::vector<std::vector<int>> parameter_uses(const std::vector<Observation>& observations,
                                             const std::vector<std::string>& names)
{
  std::vector<std::vector<int>> uses(observations.size());
  for (std::size_t i = 0; i < observations.size(); ++i)
    for (const std::string& n : applicable_params(observations[i].c.scenario)) {
      const auto it = std::find(names.begin(), names.end(), n);
      if (it != names.end())
        uses[i].push_back(static_cast<int>(it - names.begin()));
    }
  return uses;
}

/// The first linearisation, at the priors, over every observation.
struct PriorLinearisation {
  std::vector<std::size_t> kept; ///< the observations the simulator predicts there
  std::vector<double> base;      ///< ln prediction per observation (NaN: none)
  Eigen::MatrixXd jac;           ///< observation-indexed
};

/// The linearisation at the priors: the rows the simulator predicts are kept, the others go to result.dropped with
/// why. Later linearisations step only the parameters that moved a row here (ctx.uses narrowed to them; the others'
/// columns stay 0).
PriorLinearisation linearise_at_priors(FitContext& ctx)
{
  const std::vector<Observation>& observations = ctx.observations;
  const auto np = static_cast<Eigen::Index>(ctx.names.size());
  std::vector<std::size_t> all_rows(observations.size());
  for (std::size_t i = 0; i < observations.size(); ++i)
    all_rows[i] = i;
  PriorLinearisation out;
  out.base.assign(observations.size(), NAN);
  out.jac = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(observations.size()), np);
  std::vector<RowOutcome> at_prior;
  ctx.linearise(all_rows, Eigen::VectorXd::Zero(np), false, std::vector<bool>(ctx.names.size(), true), out.base,
                out.jac, &at_prior, "linearisation 1");
  for (std::size_t i = 0; i < observations.size(); ++i) {
    if (!std::isnan(out.base[i])) {
      out.kept.push_back(i);
      continue;
    }
    if (at_prior[i].status != RowStatus::DONE)
      ctx.result.dropped.push_back(observations[i].label + " (" + observations[i].source +
                                   "): " + validation::to_string(at_prior[i].status) + ": " + at_prior[i].message);
    else
      ctx.result.dropped.push_back(observations[i].label + " (" + observations[i].source +
                                   "): no positive prediction of its figure");
  }
  if (out.kept.empty())
    throw core::InputError("calibrate: the simulator predicted none of the " + std::to_string(observations.size()) +
                           " observations (" +
                           (ctx.result.dropped.empty() ? std::string("none given") : ctx.result.dropped.front()) + ")");
  for (std::size_t i = 0; i < observations.size(); ++i) {
    std::vector<int> moving;
    for (int j : ctx.uses[i])
      if (std::abs(out.jac(static_cast<Eigen::Index>(i), j)) >= ctx.options.inform_threshold / 10)
        moving.push_back(j);
    ctx.uses[i] = moving;
  }
  return out;
}

/// The problem over the kept observations, linearised at the priors: each parameter's prior, spread and bounds from
/// its family, each row's weight from its source's share.
FitProblem problem_at_priors(const FitContext& ctx, const std::vector<spec::ParamFamilyInfo>& fams,
                             const PriorLinearisation& lin)
{
  const auto nr = static_cast<Eigen::Index>(lin.kept.size());
  const auto np = static_cast<Eigen::Index>(ctx.names.size());
  FitProblem problem;
  problem.params.resize(ctx.names.size());
  for (std::size_t j = 0; j < ctx.names.size(); ++j) {
    FitParameter& q = problem.params[j];
    q.name = ctx.names[j];
    q.prior = 0;
    q.sigma = fams[j].prior_sigma;
    q.lower = std::log(fams[j].lower);
    q.upper = std::log(fams[j].upper);
  }
  problem.x0 = Eigen::VectorXd::Zero(np);
  problem.y0.resize(nr);
  problem.target.resize(nr);
  problem.jacobian.resize(nr, np);
  problem.huber_threshold = ctx.options.huber_threshold;
  std::vector<std::string> kept_sources;
  for (std::size_t i : lin.kept)
    kept_sources.push_back(ctx.observations[i].source);
  const std::vector<double> weights = row_weights(kept_sources);
  problem.weight = Eigen::Map<const Eigen::VectorXd>(weights.data(), nr);
  for (Eigen::Index r = 0; r < nr; ++r) {
    const std::size_t i = lin.kept[static_cast<std::size_t>(r)];
    problem.y0(r) = lin.base[i];
    problem.target(r) = std::log(ctx.observations[i].c.figures.front().value);
    problem.jacobian.row(r) = lin.jac.row(static_cast<Eigen::Index>(i));
  }
  return problem;
}

/// Guards (docs/calibration.md "Guards against a disguised fit"): a parameter no row informs, or one the data fix less
/// than its prior does, is frozen at its prior (an error when the parameters were named and none informs it); there
/// must be as many usable rows as free parameters.
void freeze_unidentified(FitContext& ctx, FitProblem& problem, bool explicit_set)
{
  const std::vector<std::string>& names = ctx.names;
  const CalibrateOptions& options = ctx.options;
  const std::vector<int> informs = informing_rows(problem, options.inform_threshold);
  for (std::size_t j = 0; j < names.size(); ++j) {
    if (informs[j] > 0)
      continue;
    if (explicit_set)
      throw core::InputError("calibrate: parameter " + names[j] +
                             " is informed by no row (no observation's prediction moves with it)");
    ctx.result.uninformed.push_back(names[j] + ": no row's prediction moves with it; left at its prior");
    problem.params[j].frozen = true;
  }
  // A parameter the data fix less than its prior does (the prior's share of its variance above one half, at the
  // priors' linearisation) is not fitted either: the fit would return mostly its prior, and a report of it as fitted
  // would claim what the data cannot say (docs/calibration.md "Guards against a disguised fit").
  const std::vector<double> share = prior_share(problem);
  for (std::size_t j = 0; j < names.size(); ++j) {
    if (problem.params[j].frozen || !(share[j] > options.identified_share))
      continue;
    const std::string why = names[j] + ": the data fix it less than its prior does (the prior's share of its " +
                            "variance " + core::format_fixed(share[j], 2) + " > " +
                            core::format_fixed(options.identified_share, 2) + "); left at its prior";
    if (explicit_set)
      ctx.say("warning: " + why);
    ctx.result.uninformed.push_back(why);
    problem.params[j].frozen = true;
  }
  int free = 0;
  for (const FitParameter& q : problem.params)
    free += q.frozen ? 0 : 1;
  const auto nr = problem.y0.size();
  if (nr < free)
    throw core::InputError("calibrate: " + std::to_string(nr) + " usable rows for " + std::to_string(free) +
                           " parameters (" + names.front() + ", ...): give at least as many rows as parameters");
}

/// The in-sample fit's rows (prior, surrogate and simulator at the fit) and its fitted parameters, into ctx.result.
void record_fit(FitContext& ctx, const std::vector<spec::ParamFamilyInfo>& fams, const PriorLinearisation& lin,
                const FitProblem& problem, const SimulatorFit& main)
{
  const std::vector<Observation>& observations = ctx.observations;
  const std::vector<std::size_t>& kept = lin.kept;
  const Eigen::VectorXd surr = surrogate(main.problem, main.fit.x);
  for (std::size_t k = 0; k < kept.size(); ++k) {
    const std::size_t i = kept[k];
    const auto r = static_cast<Eigen::Index>(k);
    RowResult row;
    row.label = observations[i].label;
    row.source = observations[i].source;
    row.metric = observations[i].c.figures.front().metric;
    row.measured = observations[i].c.figures.front().value;
    row.prior = std::exp(lin.base[i]);
    row.surrogate = std::exp(surr(r));
    row.fitted = std::exp(main.at_fit(r));
    row.group = spec::accuracy_group(observations[i].c.scenario);
    ctx.result.rows.push_back(row);
  }
  const std::vector<int> informs_at_fit = informing_rows(main.problem, ctx.options.inform_threshold);
  for (std::size_t j = 0; j < ctx.names.size(); ++j) {
    if (main.problem.params[j].frozen)
      continue;
    ParameterResult p;
    p.name = ctx.names[j];
    p.family = fams[j];
    const auto jj = static_cast<Eigen::Index>(j);
    p.value = std::exp(main.fit.x(jj));
    p.sigma_ln = main.fit.sigma(jj);
    // At a bound of the family (the trust region's box of the last step is not a bound).
    const double tol = 1e-6;
    p.at_bound = main.fit.x(jj) <= problem.params[j].lower + tol || main.fit.x(jj) >= problem.params[j].upper - tol;
    p.rows = informs_at_fit[j];
    std::set<std::string> srcs;
    for (std::size_t k = 0; k < kept.size(); ++k)
      if (std::abs(main.problem.jacobian(static_cast<Eigen::Index>(k), jj)) >= ctx.options.inform_threshold)
        srcs.insert(observations[kept[k]].source);
    p.sources.assign(srcs.begin(), srcs.end());
    ctx.result.params.push_back(p);
  }
}

/// Leave one source out: for each source, the same fit on the simulator without its rows (their weight 0; a parameter
/// no remaining row informs stays at its prior), from the in-sample fit's last linearisation; the held-out rows are
/// simulated at every step, so their predictions at the fold's multipliers come with it. Fills the folds, each row's
/// held-out prediction and each parameter's range over the folds.
void leave_one_source_out(FitContext& ctx, const std::vector<std::size_t>& kept, const FitProblem& problem,
                          const SimulatorFit& main)
{
  const std::vector<Observation>& observations = ctx.observations;
  const std::vector<std::string>& names = ctx.names;
  CalibrationResult& result = ctx.result;
  std::set<std::string> sources;
  for (std::size_t i : kept)
    sources.insert(observations[i].source);
  ctx.say("leave-one-source-out: " + std::to_string(sources.size()) + " folds");
  std::map<std::string, Eigen::VectorXd> fold_x;
  for (const std::string& s : sources) {
    FitProblem fold = main.problem;
    for (std::size_t k = 0; k < kept.size(); ++k)
      if (observations[kept[k]].source == s)
        fold.weight(static_cast<Eigen::Index>(k)) = 0;
    const std::vector<int> left = informing_rows(fold, ctx.options.inform_threshold);
    for (std::size_t j = 0; j < names.size(); ++j)
      if (left[j] == 0)
        fold.params[j].frozen = true;
    const SimulatorFit f = trust_region(ctx, kept, fold, "fold " + s);
    fold_x[s] = f.fit.x;
    result.max_loso_surrogate_deviation = std::max(result.max_loso_surrogate_deviation, f.deviation);
    std::vector<std::pair<std::string, double>> values;
    for (std::size_t j = 0; j < names.size(); ++j)
      if (!problem.params[j].frozen)
        values.emplace_back(names[j], std::exp(f.fit.x(static_cast<Eigen::Index>(j))));
    result.folds[s] = values;
    // The held-out rows: simulated at the fold's multipliers; beside them, the in-sample surrogate's extrapolation
    // there (how far the fold moved from where the in-sample fit was linearised).
    const Eigen::VectorXd extrapolated = surrogate(main.problem, f.fit.x);
    for (std::size_t k = 0; k < kept.size(); ++k) {
      if (observations[kept[k]].source != s)
        continue;
      const auto r = static_cast<Eigen::Index>(k);
      RowResult& row = result.rows[k];
      if (!std::isfinite(f.at_fit(r)))
        continue;
      row.loso = std::exp(f.at_fit(r));
      result.max_heldout_extrapolation =
          std::max(result.max_heldout_extrapolation, std::abs(f.at_fit(r) - extrapolated(r)));
    }
  }
  for (ParameterResult& p : result.params) {
    const auto j = static_cast<Eigen::Index>(std::find(names.begin(), names.end(), p.name) - names.begin());
    for (const auto& [s, x] : fold_x) {
      const double v = std::exp(x(j));
      p.loso_min = p.loso_min ? std::min(*p.loso_min, v) : v;
      p.loso_max = p.loso_max ? std::max(*p.loso_max, v) : v;
    }
  }
}

} // namespace

CalibrationResult calibrate(const std::vector<Observation>& observations, const CalibrateOptions& options,
                            const BatchPredictor& predict)
{
  auto say = [&](const std::string& line) {
    if (options.progress) {
      *options.progress << "calibrate: " << line << "\n";
      options.progress->flush();
    }
  };
  CalibrationResult result;
  const std::vector<std::string> names = fit_names(observations, options);
  std::vector<spec::ParamFamilyInfo> fams;
  for (const std::string& n : names)
    fams.push_back(*spec::param_family_of(n));
  std::vector<std::vector<int>> uses = parameter_uses(observations, names);
  FitContext ctx{observations, names, uses, options, predict, result, say};

  const PriorLinearisation lin = linearise_at_priors(ctx);
  FitProblem problem = problem_at_priors(ctx, fams, lin);
  freeze_unidentified(ctx, problem, !options.params.empty());

  const SimulatorFit main = trust_region(ctx, lin.kept, problem, "fit");
  result.linearisations = main.linearisations;
  result.max_surrogate_deviation = main.deviation;
  record_fit(ctx, fams, lin, problem, main);
  if (options.loso)
    leave_one_source_out(ctx, lin.kept, problem, main);
  return result;
}

} // namespace zerosim::calibration
