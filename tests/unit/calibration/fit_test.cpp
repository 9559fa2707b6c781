// The calibration fit (docs/calibration.md "The fit"): the bounded least-squares solver against closed forms, and the
// loop of calibrate() against a stand-in simulator whose true multipliers are known.
#include "calibration/calibrate.hpp"
#include "calibration/fit.hpp"
#include "calibration/gemm_fit.hpp"
#include "config/scenario_loader.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

using namespace zerosim;
using namespace zerosim::calibration;

namespace {

/// An observation of the default scenario: row `i`'s step time `value`, from `source`.
Observation step_observation(const spec::Scenario& s, int i, double value, const std::string& source)
{
  Observation o;
  o.c.scenario = s;
  o.c.info.row_id = std::to_string(i);
  validation::TimeFigure f;
  f.metric = validation::TimeMetric::STEP_TIME;
  f.value = value;
  o.c.figures.push_back(f);
  o.label = "row " + std::to_string(i);
  o.source = source;
  return o;
}

FitParameter param(const std::string& name, double sigma, double lower = -1, double upper = 1)
{
  FitParameter p;
  p.name = name;
  p.sigma = sigma;
  p.lower = lower;
  p.upper = upper;
  return p;
}

/// A deterministic spread in [-1, 1] (a fixed linear congruential sequence), for elasticities and noise.
double spread(int i, int salt)
{
  std::uint64_t h = static_cast<std::uint64_t>(i) * 6364136223846793005ULL +
                    static_cast<std::uint64_t>(salt) * 1442695040888963407ULL + 1;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<double>(h % 2000001) / 1000000.0 - 1.0;
}

/// A stand-in for the simulator: every case DONE with the step time `f` gives it.
template <class F> BatchPredictor step_time_model(F f)
{
  return [f](const std::vector<validation::ThroughputCase>& cases) {
    std::vector<validation::RowOutcome> out;
    for (const validation::ThroughputCase& c : cases) {
      validation::RowOutcome o;
      o.status = validation::RowStatus::DONE;
      o.predicted.step_time_s = f(c);
      out.push_back(o);
    }
    return out;
  };
}

/// The default scenario on the priors alone.
spec::Scenario default_scenario()
{
  config::LoadOptions lo;
  lo.calibration = "none";
  return config::load_scenario(std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama2-70b-8xa100-200gbps.yaml", lo);
}

} // namespace

TEST_SUITE("calibration")
{
  TEST_CASE("fit: one parameter, one row: the minimiser of w (x - t)^2 + (x / s)^2 is w t / (w + 1/s^2)")
  {
    FitProblem p;
    p.params = {param("gemm.A100", 0.1)};
    p.x0 = Eigen::VectorXd::Zero(1);
    p.y0 = Eigen::VectorXd::Zero(1);
    p.jacobian = Eigen::MatrixXd::Ones(1, 1);
    p.target = Eigen::VectorXd::Constant(1, 0.2);
    p.weight = Eigen::VectorXd::Constant(1, 300.0);
    const FitResult r = solve(p);
    // w t / (w + 1/s^2) = 300 * 0.2 / (300 + 100) = 0.15.
    CHECK(r.x(0) == doctest::Approx(0.15).epsilon(1e-9));
    CHECK_FALSE(r.at_bound[0]);
    // The uncertainty is sqrt(1 / (w + 1/s^2)) = sqrt(1/400) = 0.05 (one row: no degrees of freedom to rescale by).
    CHECK(r.sigma(0) == doctest::Approx(0.05).epsilon(1e-9));
  }

  TEST_CASE("fit: exact data with weak priors recovers the generating parameters, and a bound holds")
  {
    // Three parameters, twelve rows with Jacobian entries from a fixed spread; targets are the surrogate at x_true.
    FitProblem p;
    p.params = {param("a", 100), param("b", 100), param("c", 100)};
    const Eigen::Index n = 12;
    p.x0 = Eigen::VectorXd::Zero(3);
    p.y0 = Eigen::VectorXd::Zero(n);
    p.jacobian.resize(n, 3);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < 3; ++j)
        p.jacobian(i, j) = spread(static_cast<int>(i), static_cast<int>(j));
    Eigen::VectorXd truth(3);
    truth << 0.3, -0.2, 0.1;
    p.target = p.jacobian * truth;
    p.weight = Eigen::VectorXd::Constant(n, 400.0);
    const FitResult r = solve(p);
    for (Eigen::Index j = 0; j < 3; ++j)
      CHECK(r.x(j) == doctest::Approx(truth(j)).epsilon(1e-4));
    // With a's upper bound at 0.2 the minimiser puts a on it and says so.
    p.params[0].upper = 0.2;
    const FitResult b = solve(p);
    CHECK(b.x(0) == doctest::Approx(0.2));
    CHECK(b.at_bound[0]);
    CHECK_FALSE(b.at_bound[1]);
  }

  TEST_CASE("fit: a frozen parameter stays at its prior and rows count as informing by the threshold")
  {
    FitProblem p;
    p.params = {param("a", 0.5), param("b", 0.5)};
    p.params[1].frozen = true;
    p.x0 = Eigen::VectorXd::Zero(2);
    p.y0 = Eigen::VectorXd::Zero(3);
    p.jacobian = Eigen::MatrixXd::Zero(3, 2);
    p.jacobian.col(0) << 1.0, 0.5, 0.0;
    p.jacobian.col(1) << 0.0005, 0.0, 0.002;
    p.target = Eigen::VectorXd::Constant(3, 0.1);
    p.weight = Eigen::VectorXd::Constant(3, 1.0);
    const FitResult r = solve(p);
    CHECK(r.x(1) == 0.0);
    CHECK(r.sigma(1) == 0.0);
    const std::vector<int> informs = informing_rows(p, 1e-3);
    CHECK(informs[0] == 2); // rows 0 and 1
    CHECK(informs[1] == 1); // only row 2 reaches 1e-3
  }

  TEST_CASE("fit: the prior's share of a parameter's variance, alone and shared with a correlated parameter")
  {
    // One parameter, n rows of slope 1 and weight w, prior sd s: posterior variance 1 / (n w + 1/s^2), so the prior's
    // share is 1 / (1 + n w s^2). n = 4, w = 25, s = 0.1: 1 / (1 + 1) = 0.5.
    FitProblem p;
    p.params = {param("a", 0.1)};
    p.x0 = Eigen::VectorXd::Zero(1);
    p.y0 = Eigen::VectorXd::Zero(4);
    p.jacobian = Eigen::MatrixXd::Constant(4, 1, 1.0);
    p.target = Eigen::VectorXd::Zero(4);
    p.weight = Eigen::VectorXd::Constant(4, 25.0);
    CHECK(prior_share(p)[0] == doctest::Approx(0.5));
    // Two parameters that every row moves alike (slopes 1, 1): the data fix only their sum. With n w = 100 and s = 1,
    // H = [[101, 100], [100, 101]], whose inverse's diagonal is 101 / (101^2 - 100^2) = 101 / 201: each share is
    // 0.5025, above one half however many such rows there are, though each column alone carries 100 times its prior.
    p.params = {param("a", 1.0), param("b", 1.0)};
    p.x0 = Eigen::VectorXd::Zero(2);
    p.jacobian = Eigen::MatrixXd::Constant(4, 2, 1.0);
    const std::vector<double> shared = prior_share(p);
    CHECK(shared[0] == doctest::Approx(101.0 / 201.0));
    CHECK(shared[1] == doctest::Approx(101.0 / 201.0));
    // A frozen parameter has no posterior of its own: share 1; the other then has the one-parameter share 1 / 101.
    p.params[1].frozen = true;
    const std::vector<double> alone = prior_share(p);
    CHECK(alone[0] == doctest::Approx(1.0 / 101.0));
    CHECK(alone[1] == 1.0);
  }

  TEST_CASE("calibrate: multipliers 20-30 % from the priors are recovered within 5 % from data with 3 % noise")
  {
    // A stand-in simulator (no SimGrid): the step time of observation i is base_i x prod_j m_j^(-e_ij), with the
    // elasticities e_ij in [0, 1] from a fixed spread over the parameters the scenario uses (applicable_params); the
    // "measured" figures are that model at the true multipliers times (1 + 3 % noise). calibrate() starts at the
    // priors and must land within 5 % of the truth.
    const spec::Scenario s = default_scenario();
    const std::vector<std::string> names = applicable_params(s);
    REQUIRE(names.size() >= 5);
    std::map<std::string, double> truth;
    for (std::size_t j = 0; j < names.size(); ++j)
      truth[names[j]] = (j % 2 == 0) ? 0.78 : 1.27; // 22 % below or 27 % above the prior of 1
    const int rows = 80, sources = 8;
    auto elasticity = [&](int i, std::size_t j) { return 0.5 + 0.5 * spread(i, 100 + static_cast<int>(j)); };
    auto model = [&](int i, const std::map<std::string, double>& factor) {
      double t = 10.0 * (1.5 + spread(i, 7));
      for (std::size_t j = 0; j < names.size(); ++j) {
        const auto it = factor.find(names[j]);
        t *= std::pow(it == factor.end() ? 1.0 : it->second, -elasticity(i, j));
      }
      return t;
    };
    std::vector<Observation> obs;
    for (int i = 0; i < rows; ++i)
      obs.push_back(
          step_observation(s, i, model(i, truth) * (1.0 + 0.03 * spread(i, 999)), "S" + std::to_string(i % sources)));
    const BatchPredictor stand_in = step_time_model([&](const validation::ThroughputCase& c) {
      return model(std::stoi(c.info.row_id), c.scenario.calibration.factors);
    });
    CalibrateOptions opt;
    const CalibrationResult r = calibrate(obs, opt, stand_in);
    REQUIRE(r.params.size() == names.size());
    for (const ParameterResult& p : r.params) {
      INFO(p.name << ": fitted " << p.value << ", true " << truth[p.name]);
      CHECK(std::abs(p.value / truth[p.name] - 1.0) <= 0.05);
      CHECK_FALSE(p.at_bound);
    }
    // The stand-in is a power law: linear in ln(multiplier), so the surrogate is exact.
    CHECK(r.max_surrogate_deviation < 1e-9);
    // Every row was predicted with its source left out; the folds move the multipliers only a little.
    for (const RowResult& row : r.rows)
      CHECK(row.loso.has_value());
    CHECK(r.folds.size() == static_cast<std::size_t>(sources));
  }

  TEST_CASE("calibrate: each leave-one-source-out fold is the fit without that source, its own surrogate within 2 %")
  {
    // A stand-in whose step time is not a power law in the multiplier, t_i = c_i + d_i / m (a part that scales with
    // gemm.A100 and one that does not), so a linearisation in ln(m) holds only near its point. Source S0's rows were
    // "measured" at m = 1.2, S1's at m = 0.75: the fold without S0 must move m far from the in-sample fit.
    // A fold is defined as the fit on the other sources' rows (docs/calibration.md "Leave-one-source-out"), so its
    // multiplier must be the one calibrate() finds on those rows alone (within the trust region's 1 % convergence
    // step), and its surrogate must agree with the simulator within 2 % on the rows it fitted.
    const spec::Scenario s = default_scenario();
    auto part = [](int i) { return 2.0 + 6.0 * spread(i, 11); };
    auto fixed_part = [](int i) { return 1.0 + 4.0 * spread(i, 12); };
    auto model = [&](int i, double m) { return fixed_part(i) + part(i) / m; };
    std::vector<Observation> obs;
    for (int i = 0; i < 30; ++i)
      obs.push_back(step_observation(s, i, model(i, i % 2 == 0 ? 1.2 : 0.75), "S" + std::to_string(i % 2)));
    const BatchPredictor stand_in = step_time_model([&](const validation::ThroughputCase& c) {
      return model(std::stoi(c.info.row_id), c.scenario.calibration.factor("gemm.A100"));
    });
    CalibrateOptions opt;
    opt.params = {"gemm.A100"};
    const CalibrationResult r = calibrate(obs, opt, stand_in);
    REQUIRE(r.folds.count("S0") == 1);
    std::vector<Observation> without_s0;
    for (const Observation& o : obs)
      if (o.source != "S0")
        without_s0.push_back(o);
    CalibrateOptions alone = opt;
    alone.loso = false;
    const CalibrationResult direct = calibrate(without_s0, alone, stand_in);
    const double fold = r.folds.at("S0").front().second;
    INFO("in-sample " << r.params.front().value << ", fold without S0 " << fold << ", direct fit "
                      << direct.params.front().value);
    CHECK(fold == doctest::Approx(direct.params.front().value).epsilon(0.01).scale(0));
    CHECK(fold < 0.8);                           // the rows left all say 0.75
    CHECK(r.params.front().value > fold * 1.05); // S0 pulled the in-sample fit up
    CHECK(r.max_loso_surrogate_deviation <= std::log(1.02));
    CHECK(r.max_surrogate_deviation <= std::log(1.02));
    // The in-sample surrogate, extrapolated that far, is not what predicts the held-out rows: they are simulated.
    for (const RowResult& row : r.rows) {
      REQUIRE(row.loso.has_value());
      if (row.source == "S0")
        CHECK(*row.loso == doctest::Approx(model(std::stoi(row.label.substr(4)), fold)).epsilon(1e-9));
    }
  }

  TEST_CASE("calibrate: in the fold of the only source that informs a parameter, its rows are predicted at its prior")
  {
    // S0's step times move with gemm.A100 and hbm.A100, S1's with gemm.A100 only (t = 10 / g, or 10 / (g h^0.5)).
    // Both were "measured" at g = 1; S0 at h = 1.2, so the in-sample fit moves h well off its prior. In S0's fold
    // no row informs h: it stays at its prior (docs/calibration.md §3), and S0's held-out rows must be predicted
    // there, at the fold's g, whether or not the fold found a step that lowers its cost.
    const spec::Scenario s = default_scenario();
    auto model = [](int i, double g, double h) { return i % 2 == 0 ? 10.0 / (g * std::sqrt(h)) : 10.0 / g; };
    std::vector<Observation> obs;
    for (int i = 0; i < 12; ++i)
      obs.push_back(step_observation(s, i, model(i, 1.0, 1.2), "S" + std::to_string(i % 2)));
    const BatchPredictor stand_in = step_time_model([&](const validation::ThroughputCase& c) {
      return model(std::stoi(c.info.row_id), c.scenario.calibration.factor("gemm.A100"),
                   c.scenario.calibration.factor("hbm.A100"));
    });
    CalibrateOptions opt;
    opt.params = {"gemm.A100", "hbm.A100"};
    const CalibrationResult r = calibrate(obs, opt, stand_in);
    const auto value = [&](const std::string& fold, const std::string& name) {
      for (const auto& [n, v] : r.folds.at(fold))
        if (n == name)
          return v;
      FAIL("no " << name << " in fold " << fold);
      return 0.0;
    };
    const auto in_sample_h =
        std::find_if(r.params.begin(), r.params.end(), [](const ParameterResult& p) { return p.name == "hbm.A100"; });
    REQUIRE(in_sample_h != r.params.end());
    CHECK(in_sample_h->value > 1.1); // S0 moved it
    CHECK(value("S0", "hbm.A100") == 1.0);
    const double g = value("S0", "gemm.A100");
    for (const RowResult& row : r.rows)
      if (row.source == "S0") {
        REQUIRE(row.loso.has_value());
        CHECK(*row.loso == doctest::Approx(model(std::stoi(row.label.substr(4)), g, 1.0)).epsilon(1e-9));
      }
  }

  TEST_CASE("calibrate: a parameter the data fix less than its prior does is left at its prior and listed")
  {
    // t = 10 / (g h^0.01) on 12 rows of two sources, "measured" at g = 0.8, h = 0.8. The weights average 1 / 0.05^2 =
    // 400 per row, so the rows carry 12 x 400 x 0.01^2 = 0.48 of information on ln h against its prior's 1 / 0.1^2 =
    // 100: the prior's share is about 0.995 and h stays at its prior; g (share about 0.002) is fitted to 0.8.
    const spec::Scenario s = default_scenario();
    auto model = [](double g, double h) { return 10.0 / (g * std::pow(h, 0.01)); };
    std::vector<Observation> obs;
    for (int i = 0; i < 12; ++i)
      obs.push_back(step_observation(s, i, model(0.8, 0.8), "S" + std::to_string(i % 2)));
    const BatchPredictor stand_in = step_time_model([&](const validation::ThroughputCase& c) {
      return model(c.scenario.calibration.factor("gemm.A100"), c.scenario.calibration.factor("hbm.A100"));
    });
    CalibrateOptions opt;
    opt.params = {"gemm.A100", "hbm.A100"};
    opt.loso = false;
    const CalibrationResult r = calibrate(obs, opt, stand_in);
    REQUIRE(r.params.size() == 1);
    CHECK(r.params.front().name == "gemm.A100");
    // g absorbs h's 0.8^0.01 = 0.9978 and the prior's slight pull: within 0.5 % of 0.8.
    CHECK(r.params.front().value == doctest::Approx(0.8).epsilon(0.005).scale(0));
    REQUIRE(r.uninformed.size() == 1);
    CHECK(r.uninformed.front().rfind("hbm.A100: the data fix it less than its prior does", 0) == 0);
    // With the guard off (share threshold 1) both are fitted.
    opt.identified_share = 1.0;
    CHECK(calibrate(obs, opt, stand_in).params.size() == 2);
  }

  TEST_CASE("calibrate: a named parameter that no row informs, and too few rows, are input errors")
  {
    const spec::Scenario s = default_scenario();
    std::vector<Observation> obs;
    for (int i = 0; i < 3; ++i)
      obs.push_back(step_observation(s, i, 10.0 + i, "S" + std::to_string(i)));
    // The stand-in's step time moves with gemm.A100 only.
    const BatchPredictor stand_in = step_time_model(
        [](const validation::ThroughputCase& c) { return 10.0 / c.scenario.calibration.factor("gemm.A100"); });
    CalibrateOptions opt;
    opt.params = {"gemm.A100", "busbw.net"};
    try {
      calibrate(obs, opt, stand_in);
      FAIL("expected an input error");
    } catch (const core::InputError& e) {
      CHECK(std::string(e.what()) ==
            "calibrate: parameter busbw.net is informed by no row (no observation's prediction moves with it)");
    }
    opt.params = {"gemm.A100", "busbw.nvlink", "busbw.net", "interference"};
    bool threw = false;
    try {
      calibrate(std::vector<Observation>(obs.begin(), obs.begin() + 1), opt, stand_in);
    } catch (const core::InputError& e) {
      threw = true;
      // busbw.nvlink is the first uninformed one; it is named.
      CHECK(std::string(e.what()).find("busbw.") != std::string::npos);
    }
    CHECK(threw);
    opt.params = {"gemm.Z9"};
    CHECK_THROWS_AS(calibrate(obs, opt, stand_in), core::InputError);
    opt.params = {"latency.net"};
    CHECK_THROWS_WITH_AS(calibrate(obs, opt, stand_in), doctest::Contains("unknown parameter 'latency.net'"),
                         core::InputError);
  }
}

TEST_SUITE("calibration")
{
  TEST_CASE("calibrate: held families stay at their priors and out of the default set, and --hold is checked")
  {
    // t = 10 / (g h) on 12 rows of two sources, "measured" at g = 0.8 (t = 12.5). Without a hold, hbm.A100 is in the
    // default set (fitted, or listed as left at its prior by the guards). Holding the hbm family, it is in neither
    // list, h stays at its prior and g alone takes the data: ln g = ln 0.8 x 4800 / (4800 + 100) (the rows' weight
    // 12 x 1 / 0.05^2 against the prior's 1 / 0.10^2, residuals inside Huber's threshold at the fit), g = 0.804.
    const spec::Scenario s = default_scenario();
    auto model = [](double g, double h) { return 10.0 / (g * h); };
    std::vector<Observation> obs;
    for (int i = 0; i < 12; ++i)
      obs.push_back(step_observation(s, i, model(0.8, 1.0), "S" + std::to_string(i % 2)));
    const BatchPredictor stand_in = step_time_model([&](const validation::ThroughputCase& c) {
      return model(c.scenario.calibration.factor("gemm.A100"), c.scenario.calibration.factor("hbm.A100"));
    });
    const auto fitted = [](const CalibrationResult& r, const std::string& name) {
      return std::find_if(r.params.begin(), r.params.end(), [&](const ParameterResult& p) { return p.name == name; });
    };
    CalibrateOptions opt;
    opt.loso = false;
    const auto listed = [&](const CalibrationResult& r, const std::string& name) {
      return fitted(r, name) != r.params.end() ||
             std::any_of(r.uninformed.begin(), r.uninformed.end(),
                         [&](const std::string& u) { return u.rfind(name + ":", 0) == 0; });
    };
    CHECK(listed(calibrate(obs, opt, stand_in), "hbm.A100"));
    opt.held = SHIPPED_HELD;
    const CalibrationResult r = calibrate(obs, opt, stand_in);
    CHECK_FALSE(listed(r, "hbm.A100"));
    for (const ParameterResult& p : r.params) {
      INFO(p.name);
      CHECK(p.name.rfind("hbm.", 0) != 0);
      CHECK(p.name != "busbw.nvlink");
      CHECK(p.name != "busbw.pcie");
    }
    const auto g = fitted(r, "gemm.A100");
    REQUIRE(g != r.params.end());
    CHECK(g->value == doctest::Approx(std::exp(std::log(0.8) * 4800.0 / 4900.0)).epsilon(0.005).scale(0));
    CHECK(held_list(SHIPPED_HELD) == "hbm,busbw.nvlink,busbw.pcie");
    // A family the registry does not know, a key the family does not take, and --hold beside --fit-params.
    opt.held = {"hmb"};
    CHECK_THROWS_WITH_AS(calibrate(obs, opt, stand_in), doctest::Contains("--hold: unknown parameter family 'hmb'"),
                         core::InputError);
    opt.held = {"busbw.infiniband"};
    CHECK_THROWS_WITH_AS(calibrate(obs, opt, stand_in), doctest::Contains("is no parameter of the busbw family"),
                         core::InputError);
    opt.held = {"interference"}; // a family that is one parameter: held by its name, fitted without it
    const CalibrationResult no_interference = calibrate(obs, opt, stand_in);
    CHECK_FALSE(listed(no_interference, "interference"));
    opt.held = {"hbm"};
    opt.params = {"gemm.A100"};
    CHECK_THROWS_WITH_AS(calibrate(obs, opt, stand_in), doctest::Contains("--hold hbm and --fit-params both given"),
                         core::InputError);
  }

  TEST_CASE("gemm fit: timings made by the compute model at a GEMM multiplier of 0.85 with 3 % noise give it back")
  {
    // The model's own times for a sweep of shapes on a DGX A100 (topologies/dgx-a100-80gb.yaml), at gemm.A100 = 0.85,
    // each times (1 + 3 % noise): the fit must land within 5 % of 0.85 (the prior of 1 is 15 % away).
    spec::Scenario s;
    s.cluster.node = config::load_node(std::string(ZEROSIM_SOURCE_DIR) + "/topologies/dgx-a100-80gb.yaml");
    s.cluster.gpus_per_node = 1;
    s.kernels = config::shipped_kernel_table();
    std::vector<GemmTiming> timings;
    int i = 0;
    for (std::int64_t m : {1024, 2048, 4096, 8192})
      for (std::int64_t k : {1024, 4096, 12288}) {
        GemmTiming g;
        g.m = m;
        g.n = 4096;
        g.k = k;
        g.dtype = i % 2 ? "bf16" : "fp16";
        g.seconds = model_gemm_seconds(g, s, 0.85) * (1.0 + 0.03 * spread(i, 77));
        timings.push_back(g);
        ++i;
      }
    GemmTiming f32 = timings.front();
    f32.dtype = "fp32";
    timings.push_back(f32);
    const GemmFit f = fit_gemm_timings(timings, s);
    CHECK(f.param == "gemm.A100");
    CHECK(f.rows == 12);
    CHECK(f.skipped_fp32 == 1);
    CHECK(std::abs(f.multiplier / 0.85 - 1.0) <= 0.05);
    CHECK(f.fitted_median_abs_pct < f.prior_median_abs_pct);
    CHECK_FALSE(f.at_bound);
    // The model time falls as the multiplier rises (a compute-bound 8192 x 4096 x 12288 GEMM: by about its ratio).
    GemmTiming big = timings[11];
    CHECK(model_gemm_seconds(big, s, 0.8) > model_gemm_seconds(big, s, 1.0) * 1.2);
    // Only fp32 timings: nothing to fit.
    CHECK_THROWS_AS(fit_gemm_timings({f32}, s), core::InputError);
  }
}
