// The calibration loop (calibrate.hpp, docs/calibration.md "The fit"): simulate, linearise, solve, re-simulate, and
// leave one source out.
#include "calibration/calibrate.hpp"

#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace zerosim::calibration {
namespace {

using validation::RowOutcome;
using validation::RowStatus;
using validation::ThroughputCase;

/// The surrogate must agree with the simulator within 2 % on every row (ln(1.02)).
const double SURROGATE_TOLERANCE = std::log(1.02);
/// The spread assumed for one published figure's ln(measured): 5 %. Published runs carry chart reads, rounding and
/// unstated stacks of a few percent (design.md "Accuracy"); a row's weight is its source's share over this variance.
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

void check_name(const std::string& name)
{
  const std::optional<spec::ParamFamilyInfo> f = spec::param_family_of(name);
  std::string families;
  for (const spec::ParamFamilyInfo& g : spec::param_families())
    families += (families.empty() ? "" : ", ") + std::string(g.prefix);
  if (!f)
    throw core::InputError("--params: unknown parameter '" + name + "'; families: " + families +
                           " (docs/calibration.md)");
  const std::string key = spec::param_key(name);
  bool ok = f->family == spec::ParamFamily::INTERFERENCE ? key.empty() : !key.empty();
  if (ok && !f->keys.empty())
    ok = std::find(f->keys.begin(), f->keys.end(), key) != f->keys.end();
  if (!ok)
    throw core::InputError("--params: '" + name + "' is no parameter of the " + std::string(f->prefix) +
                           " family (docs/calibration.md lists its names)");
}

} // namespace

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

  // The parameters: those named, or every one some observation's run uses.
  std::vector<std::string> names = options.params;
  const bool explicit_set = !names.empty();
  for (const std::string& n : names)
    check_name(n);
  if (!explicit_set) {
    std::set<std::string> all;
    for (const Observation& o : observations)
      for (const std::string& n : applicable_params(o.c.scenario))
        all.insert(n);
    for (const auto& [n, v] : options.fixed)
      all.erase(n);
    names.assign(all.begin(), all.end());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.empty())
    throw core::InputError("calibrate: no parameter to fit (no observation, or none of their runs uses one)");
  std::vector<spec::ParamFamilyInfo> fams;
  for (const std::string& n : names)
    fams.push_back(*spec::param_family_of(n));

  // Which parameters each observation's run uses (the Jacobian's sparsity: the others are exactly 0).
  std::vector<std::vector<int>> uses(observations.size());
  for (std::size_t i = 0; i < observations.size(); ++i)
    for (const std::string& n : applicable_params(observations[i].c.scenario)) {
      const auto it = std::find(names.begin(), names.end(), n);
      if (it != names.end())
        uses[i].push_back(static_cast<int>(it - names.begin()));
    }

  const auto np = static_cast<Eigen::Index>(names.size());
  std::vector<std::size_t> kept; // observations predicted at the first point
  FitProblem problem;
  problem.params.resize(names.size());
  for (std::size_t j = 0; j < names.size(); ++j) {
    FitParameter& q = problem.params[j];
    q.name = names[j];
    q.prior = 0;
    q.sigma = fams[j].prior_sigma;
    q.lower = std::log(fams[j].lower);
    q.upper = std::log(fams[j].upper);
  }
  Eigen::VectorXd x_lin = Eigen::VectorXd::Zero(np);
  std::vector<double> prior_pred(observations.size(), 0);
  FitResult fit;
  fit.x = x_lin;

  // Gauss-Newton with a trust region on the simulator: linearise at x_lin, solve on the surrogate within
  // |x - x_lin| <= radius (and the bounds), simulate at the solution; accept it when the simulated cost fell, else
  // shrink the radius and solve again. Converged when an accepted step is small or the surrogate agrees with the
  // simulator within 2 % on every row at a step inside the radius.
  double radius = options.initial_radius;
  std::vector<double> base(observations.size(), NAN); // ln prediction at x_lin
  bool have_base = false;
  for (int lin = 0; lin < std::max(1, options.max_linearisations); ++lin) {
    // The simulations of this linearisation: each observation at x_lin (unless the last accepted point's simulations
    // are at hand), then once per parameter it uses, that parameter stepped down by `step`.
    std::vector<ThroughputCase> cases;
    std::vector<std::pair<std::size_t, int>> what; // (observation, parameter or -1 for the base)
    std::vector<std::size_t> todo;
    if (lin == 0)
      for (std::size_t i = 0; i < observations.size(); ++i)
        todo.push_back(i);
    else
      todo = kept;
    for (std::size_t i : todo) {
      if (!have_base) {
        cases.push_back(with_factors(observations[i].c, names, x_lin, options.fixed));
        what.emplace_back(i, -1);
      }
      for (int j : uses[i]) {
        Eigen::VectorXd x = x_lin;
        x(j) -= options.step;
        cases.push_back(with_factors(observations[i].c, names, x, options.fixed));
        what.emplace_back(i, j);
      }
    }
    say("linearisation " + std::to_string(lin + 1) + ": " + std::to_string(cases.size()) + " simulations");
    const std::vector<RowOutcome> out = predict(cases);
    result.simulations += static_cast<int>(cases.size());
    Eigen::MatrixXd jac = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(observations.size()), np);
    for (std::size_t k = 0; k < what.size(); ++k) {
      const auto [i, j] = what[k];
      if (j >= 0)
        continue;
      base[i] = NAN;
      if (out[k].status == RowStatus::DONE) {
        const double v = predicted_figure(observations[i].c, out[k].predicted);
        if (v > 0 && std::isfinite(v))
          base[i] = std::log(v);
      } else if (lin == 0) {
        result.dropped.push_back(observations[i].label + " (" + observations[i].source +
                                 "): " + validation::to_string(out[k].status) + ": " + out[k].message);
      }
    }
    for (std::size_t k = 0; k < what.size(); ++k) {
      const auto [i, j] = what[k];
      if (j < 0 || std::isnan(base[i]) || out[k].status != RowStatus::DONE)
        continue;
      const double v = predicted_figure(observations[i].c, out[k].predicted);
      if (v > 0 && std::isfinite(v))
        jac(static_cast<Eigen::Index>(i), j) = (std::log(v) - base[i]) / -options.step;
    }
    if (lin == 0) {
      for (std::size_t i = 0; i < observations.size(); ++i)
        if (!std::isnan(base[i])) {
          kept.push_back(i);
          prior_pred[i] = std::exp(base[i]);
        } else if (std::none_of(result.dropped.begin(), result.dropped.end(),
                                [&](const std::string& d) { return d.rfind(observations[i].label + " (", 0) == 0; })) {
          result.dropped.push_back(observations[i].label + " (" + observations[i].source +
                                   "): no positive prediction of its figure");
        }
      if (kept.empty())
        throw core::InputError("calibrate: the simulator predicted none of the " + std::to_string(observations.size()) +
                               " observations (" +
                               (result.dropped.empty() ? std::string("none given") : result.dropped.front()) + ")");
    }
    // The problem over the kept observations.
    const auto nr = static_cast<Eigen::Index>(kept.size());
    problem.x0 = x_lin;
    problem.y0.resize(nr);
    problem.target.resize(nr);
    problem.weight.resize(nr);
    problem.jacobian.resize(nr, np);
    problem.huber_threshold = options.huber_threshold;
    std::vector<std::string> kept_sources;
    for (std::size_t i : kept)
      kept_sources.push_back(observations[i].source);
    const std::vector<double> weights = row_weights(kept_sources);
    for (Eigen::Index r = 0; r < nr; ++r) {
      const std::size_t i = kept[static_cast<std::size_t>(r)];
      if (std::isnan(base[i]))
        throw core::InputError("calibrate: " + observations[i].label + " could be predicted at the priors but not at " +
                               "the multipliers of linearisation " + std::to_string(lin + 1));
      problem.y0(r) = base[i];
      problem.target(r) = std::log(observations[i].c.figures.front().value);
      problem.weight(r) = weights[static_cast<std::size_t>(r)];
      problem.jacobian.row(r) = jac.row(static_cast<Eigen::Index>(i));
    }
    if (lin == 0) {
      // Later linearisations step only the parameters that moved a row here (the others' columns stay 0).
      for (std::size_t i = 0; i < observations.size(); ++i) {
        std::vector<int> moving;
        for (int j : uses[i])
          if (std::abs(jac(static_cast<Eigen::Index>(i), j)) >= options.inform_threshold / 10)
            moving.push_back(j);
        uses[i] = moving;
      }
      // Guards (docs/calibration.md "Guards against a disguised fit").
      const std::vector<int> informs = informing_rows(problem, options.inform_threshold);
      for (std::size_t j = 0; j < names.size(); ++j) {
        if (informs[j] > 0)
          continue;
        if (explicit_set)
          throw core::InputError("calibrate: parameter " + names[j] +
                                 " is informed by no row (no observation's prediction moves with it)");
        result.uninformed.push_back(names[j] + ": no row's prediction moves with it; left at its prior");
        problem.params[j].frozen = true;
      }
      int free = 0;
      for (const FitParameter& q : problem.params)
        free += q.frozen ? 0 : 1;
      if (nr < free)
        throw core::InputError("calibrate: " + std::to_string(nr) + " usable rows for " + std::to_string(free) +
                               " parameters (" + names.front() + ", ...): give at least as many rows as parameters");
    }
    const double cost_lin =
        data_cost(problem, problem.y0 - problem.target) + prior_cost(problem, x_lin); // the simulator's, at x_lin

    // Trust-region steps from x_lin.
    bool accepted = false;
    bool inside = false;
    std::vector<RowOutcome> at_fit;
    double dev = 0;
    for (int attempt = 0; attempt < 6 && !accepted && radius >= options.converged_step / 2; ++attempt) {
      FitProblem boxed = problem;
      for (std::size_t j = 0; j < names.size(); ++j) {
        FitParameter& q = boxed.params[j];
        const double c = x_lin(static_cast<Eigen::Index>(j));
        q.lower = std::max(q.lower, c - radius);
        q.upper = std::min(q.upper, c + radius);
      }
      const FitResult step = solve(boxed);
      double moved = 0;
      inside = true;
      for (std::size_t j = 0; j < names.size(); ++j) {
        const auto jj = static_cast<Eigen::Index>(j);
        moved = std::max(moved, std::abs(step.x(jj) - x_lin(jj)));
        const bool on_radius =
            (step.x(jj) <= boxed.params[j].lower + 1e-9 && boxed.params[j].lower > problem.params[j].lower + 1e-9) ||
            (step.x(jj) >= boxed.params[j].upper - 1e-9 && boxed.params[j].upper < problem.params[j].upper - 1e-9);
        inside = inside && !on_radius;
      }
      std::vector<ThroughputCase> check;
      for (std::size_t i : kept)
        check.push_back(with_factors(observations[i].c, names, step.x, options.fixed));
      at_fit = predict(check);
      result.simulations += static_cast<int>(check.size());
      Eigen::VectorXd sim(nr);
      bool all = true;
      for (Eigen::Index r = 0; r < nr; ++r) {
        const std::size_t k = static_cast<std::size_t>(r);
        const double v =
            at_fit[k].status == RowStatus::DONE ? predicted_figure(observations[kept[k]].c, at_fit[k].predicted) : NAN;
        all = all && v > 0 && std::isfinite(v);
        sim(r) = all ? std::log(v) : NAN;
      }
      const double cost = all ? data_cost(problem, sim - problem.target) + prior_cost(problem, step.x) : INFINITY;
      // How much of the reduction the surrogate promised the simulator delivered.
      const double promised =
          cost_lin - (data_cost(problem, surrogate(problem, step.x) - problem.target) + prior_cost(problem, step.x));
      const double ratio = promised > 0 ? (cost_lin - cost) / promised : 1.0;
      dev = all ? (sim - surrogate(problem, step.x)).cwiseAbs().maxCoeff() : INFINITY;
      say("linearisation " + std::to_string(lin + 1) + ", step " + std::to_string(attempt + 1) + ": radius " +
          std::to_string(radius) + ", moved " + std::to_string(moved) + ", cost " + std::to_string(cost_lin) + " -> " +
          std::to_string(cost) + ", surrogate within " + std::to_string(100.0 * (std::exp(dev) - 1.0)) + " %");
      if (cost <= cost_lin || moved < 1e-6) {
        accepted = true;
        fit = step;
        if (ratio < 0.25)
          radius = std::max(options.converged_step, moved / 2); // the surrogate was poor that far out
        else if (!inside && ratio > 0.75)
          radius *= 2;
        if (moved < options.converged_step)
          inside = true;
      } else {
        radius = moved / 3; // below converged_step / 2 the attempts stop: x_lin is the minimum this close
      }
    }
    if (!accepted) {
      // No step within the smallest region lowers the simulated cost: x_lin is the minimum. Its simulations are the
      // base of this linearisation (the previous accepted step's, or the priors' at the first).
      result.linearisations = lin + 1;
      if (lin == 0) {
        fit.x = x_lin;
        for (std::size_t k = 0; k < kept.size(); ++k) {
          RowResult row;
          const std::size_t i = kept[k];
          row.label = observations[i].label;
          row.source = observations[i].source;
          row.metric = observations[i].c.figures.front().metric;
          row.measured = observations[i].c.figures.front().value;
          row.prior = row.fitted = row.surrogate = prior_pred[i];
          row.group = spec::accuracy_group(observations[i].c.scenario);
          result.rows.push_back(row);
        }
        result.max_surrogate_deviation = 0;
      }
      say("linearisation " + std::to_string(lin + 1) + ": no smaller step lowers the cost; converged");
      break;
    }
    result.linearisations = lin + 1;
    result.rows.clear();
    const Eigen::VectorXd surr = surrogate(problem, fit.x);
    for (std::size_t k = 0; k < kept.size(); ++k) {
      const std::size_t i = kept[k];
      RowResult row;
      row.label = observations[i].label;
      row.source = observations[i].source;
      row.metric = observations[i].c.figures.front().metric;
      row.measured = observations[i].c.figures.front().value;
      row.prior = prior_pred[i];
      row.surrogate = std::exp(surr(static_cast<Eigen::Index>(k)));
      row.group = spec::accuracy_group(observations[i].c.scenario);
      row.fitted = predicted_figure(observations[i].c, at_fit[k].predicted);
      result.rows.push_back(row);
    }
    result.max_surrogate_deviation = dev;
    if (inside && dev <= SURROGATE_TOLERANCE)
      break;
    // The next linearisation starts where this one was accepted, its base simulations are the accepted ones.
    x_lin = fit.x;
    for (std::size_t k = 0; k < kept.size(); ++k)
      base[kept[k]] = std::log(result.rows[k].fitted);
    have_base = true;
  }

  // The parameters' results.
  const std::vector<int> informs = informing_rows(problem, options.inform_threshold);
  for (std::size_t j = 0; j < names.size(); ++j) {
    if (problem.params[j].frozen)
      continue;
    ParameterResult p;
    p.name = names[j];
    p.family = fams[j];
    p.value = std::exp(fit.x(static_cast<Eigen::Index>(j)));
    p.sigma_ln = fit.sigma(static_cast<Eigen::Index>(j));
    // At a bound of the family (the trust region's box of the last step is not a bound).
    const double xj = fit.x(static_cast<Eigen::Index>(j));
    const double tol = 1e-6;
    p.at_bound = xj <= problem.params[j].lower + tol || xj >= problem.params[j].upper - tol;
    p.rows = informs[j];
    std::set<std::string> srcs;
    for (std::size_t k = 0; k < kept.size(); ++k)
      if (std::abs(problem.jacobian(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(j))) >=
          options.inform_threshold)
        srcs.insert(observations[kept[k]].source);
    p.sources.assign(srcs.begin(), srcs.end());
    result.params.push_back(p);
  }

  if (!options.loso)
    return result;

  // Leave one source out: each source's rows predicted with multipliers fitted without them (on the last surrogate;
  // a parameter no remaining row informs stays at its prior in that fold), then re-simulated.
  std::set<std::string> sources;
  for (std::size_t i : kept)
    sources.insert(observations[i].source);
  std::vector<ThroughputCase> held;
  std::vector<std::size_t> held_k;
  std::vector<Eigen::VectorXd> held_x;
  std::map<std::string, Eigen::VectorXd> fold_x;
  for (const std::string& s : sources) {
    FitProblem fold = problem;
    for (std::size_t k = 0; k < kept.size(); ++k)
      if (observations[kept[k]].source == s)
        fold.weight(static_cast<Eigen::Index>(k)) = 0;
    const std::vector<int> left = informing_rows(fold, options.inform_threshold);
    for (std::size_t j = 0; j < names.size(); ++j)
      if (left[j] == 0)
        fold.params[j].frozen = true;
    const FitResult f = solve(fold);
    fold_x[s] = f.x;
    std::vector<std::pair<std::string, double>> values;
    for (std::size_t j = 0; j < names.size(); ++j)
      if (!problem.params[j].frozen)
        values.emplace_back(names[j], std::exp(f.x(static_cast<Eigen::Index>(j))));
    result.folds[s] = values;
    for (std::size_t k = 0; k < kept.size(); ++k)
      if (observations[kept[k]].source == s) {
        held.push_back(with_factors(observations[kept[k]].c, names, f.x, options.fixed));
        held_k.push_back(k);
        held_x.push_back(f.x);
      }
  }
  say("leave-one-source-out: " + std::to_string(sources.size()) + " folds, " + std::to_string(held.size()) +
      " simulations");
  const std::vector<RowOutcome> loso = predict(held);
  result.simulations += static_cast<int>(held.size());
  double dev = 0;
  for (std::size_t h = 0; h < held.size(); ++h) {
    RowResult& row = result.rows[held_k[h]];
    const double s = surrogate(problem, held_x[h])(static_cast<Eigen::Index>(held_k[h]));
    row.loso_surrogate = std::exp(s);
    if (loso[h].status != RowStatus::DONE)
      continue;
    row.loso = predicted_figure(observations[kept[held_k[h]]].c, loso[h].predicted);
    dev = std::max(dev, std::abs(std::log(*row.loso) - s));
  }
  result.max_loso_surrogate_deviation = dev;
  for (ParameterResult& p : result.params) {
    const auto j = static_cast<Eigen::Index>(std::find(names.begin(), names.end(), p.name) - names.begin());
    for (const auto& [s, x] : fold_x) {
      const double v = std::exp(x(j));
      p.loso_min = p.loso_min ? std::min(*p.loso_min, v) : v;
      p.loso_max = p.loso_max ? std::max(*p.loso_max, v) : v;
    }
  }
  return result;
}

} // namespace zerosim::calibration
