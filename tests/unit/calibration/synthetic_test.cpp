// Synthetic recovery on the real simulator (docs/calibration.md "Synthetic recovery"): measurements made by
// the simulator at known multipliers with 3 % noise, a fit from the priors, the multipliers recovered within 5 %.
// CI-sized: a few small DGX A100 scenarios (each simulated in well under a second) and three parameters.
#include "calibration/calibrate.hpp"
#include "calibration/calibrate_command.hpp"
#include "calibration/synthetic.hpp"
#include "config/scenario_loader.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>

using namespace zerosim;
using namespace zerosim::calibration;

namespace {

const std::string TRUTH = std::string(ZEROSIM_SOURCE_DIR) + "/calibration/synthetic-truth.yaml";

/// A shipped scenario with `sets`, on the priors alone, as an observation of its step time (the value is replaced by
/// synthesize()).
Observation observation(const std::string& scenario, const std::vector<std::string>& sets, const std::string& source)
{
  config::LoadOptions lo;
  lo.calibration = "none";
  lo.sets = sets;
  Observation o;
  o.c.scenario = config::load_scenario(std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/" + scenario, lo);
  o.label = scenario;
  for (const std::string& s : sets)
    o.label += " " + s;
  o.c.info.row_id = o.label;
  o.c.info.source_id = source;
  validation::TimeFigure f;
  f.metric = validation::TimeMetric::STEP_TIME;
  f.value = 1; // replaced
  o.c.figures.push_back(f);
  o.source = source;
  return o;
}

} // namespace

TEST_SUITE("calibration")
{
  TEST_CASE("synthetic: the noise generator is deterministic, depends on seed and label, and is standard normal")
  {
    CHECK(synthetic_normal(1, "row 12") == synthetic_normal(1, "row 12"));
    CHECK(synthetic_normal(1, "row 12") != synthetic_normal(1, "row 13"));
    CHECK(synthetic_normal(1, "row 12") != synthetic_normal(2, "row 12"));
    // Its moments over 20,000 labels: mean 0 and sd 1 within 3 standard errors (0.021 and 0.015), and the share
    // beyond 1.96 sd 5 % within 0.5 %.
    const int n = 20000;
    double sum = 0, sum2 = 0;
    int tail = 0;
    for (int i = 0; i < n; ++i) {
      const double z = synthetic_normal(7, "row " + std::to_string(i));
      sum += z;
      sum2 += z * z;
      tail += std::abs(z) > 1.96 ? 1 : 0;
    }
    const double mean = sum / n;
    CHECK(std::abs(mean) < 0.021);
    CHECK(std::abs(std::sqrt(sum2 / n - mean * mean) - 1.0) < 0.015);
    CHECK(std::abs(tail / static_cast<double>(n) - 0.05) < 0.005);
  }

  TEST_CASE("synthetic: the recovery table names every parameter, those not fitted included, and the verdict")
  {
    SyntheticOptions so;
    so.truth_file = "truth.yaml";
    so.truth = {{"gemm.A100", 0.78}, {"busbw.nvlink", 1.2}, {"hbm.A100", 0.78}, {"busbw.net", 0.78}};
    CalibrationResult r;
    ParameterResult g;
    g.name = "gemm.A100";
    g.family = *spec::param_family_of(g.name);
    g.value = 0.79;
    g.sigma_ln = 0.02;
    g.rows = 5;
    g.sources = {"a", "b"};
    ParameterResult h = g;
    h.name = "hbm.A100";
    h.value = 0.9; // 15 % off: pulled to its prior
    h.sigma_ln = 0.08;
    ParameterResult i = g;
    i.name = "interference";
    i.family = *spec::param_family_of(i.name);
    i.value = 1.02; // the truth leaves it at its prior, 1
    r.params = {g, h, i};
    r.uninformed = {"busbw.net: no row's prediction moves with it; left at its prior",
                    "host.ddp: no row's prediction moves with it; left at its prior"};
    CalibrateOptions held;
    held.fixed = {{"busbw.nvlink", 1.1}};
    const Recovery rec = recovery(r, so, held, {"gemm.A100", "hbm.A100", "busbw.nvlink", "interference", "host.ddp"});
    CHECK_FALSE(rec.costs_compare); // busbw.nvlink is held at 1.1, its truth is 1.2
    REQUIRE(rec.rows.size() == 6);
    CHECK(rec.rows[0].name == "busbw.net");
    CHECK_FALSE(rec.rows[0].fit);
    CHECK(rec.rows[0].judged); // the truth sets it: not informed is a failure to recover it
    CHECK(rec.rows[1].name == "busbw.nvlink");
    CHECK_FALSE(rec.rows[1].fit); // held by --nccl
    CHECK(rec.within(rec.rows[2]));
    CHECK(rec.rows[3].name == "hbm.A100");
    CHECK_FALSE(rec.within(rec.rows[3]));
    CHECK(*rec.rows[3].prior_pull == doctest::Approx(0.64));
    CHECK(rec.rows[4].name == "host.ddp");
    CHECK_FALSE(rec.rows[4].judged); // informed by no row, and the truth leaves it at its prior
    CHECK(rec.rows[5].truth == 1.0);
    CHECK(rec.within(rec.rows[5]));
    CHECK(rec.judged() == 5);
    CHECK(rec.recovered() == 2);
    CHECK(rec.verdict() == "FAIL: 2 of 5 parameters recovered within 5 % of the truth; not recovered: busbw.net (not "
                           "fitted), busbw.nvlink (not fitted), hbm.A100 (+15.4 %, 1.8 sd); not fitted (no row "
                           "informs it, or its prior fixes it more than the data do) and left at the prior, where the "
                           "truth has them too: host.ddp");
    // ln(0.9 / 0.78) / 0.08 = 1.79 of the fit's standard deviations, exp(0.08) - 1 = 8.3 %.
    CHECK(*rec.rows[3].deviation_sd() == doctest::Approx(std::log(0.9 / 0.78) / 0.08));
    // No rows: the costs are the priors' alone, over the fitted parameters.
    const double prior_fit =
        std::pow(std::log(0.79) / 0.1, 2) + std::pow(std::log(0.9) / 0.1, 2) + std::pow(std::log(1.02) / 0.5, 2);
    const double prior_truth = 2 * std::pow(std::log(0.78) / 0.1, 2);
    CHECK(rec.cost_fit == doctest::Approx(prior_fit));
    CHECK(rec.cost_truth == doctest::Approx(prior_truth));
    const std::string md = recovery_markdown(rec, so, 7);
    CHECK(md.find("| hbm.A100 | 0.780 | 0.900 | +15.4 % | no | 8.3 % | 1.8 sd | 0.64 | 5 | 2 |") != std::string::npos);
    CHECK(md.find("| busbw.net | 0.780 | not fitted | - | no |") != std::string::npos);
    CHECK(md.find("| host.ddp | 1.000 | not fitted | - | - |") != std::string::npos);
  }

  TEST_CASE("synthetic: calibrate's bad synthetic inputs are input errors naming the option")
  {
    std::ostringstream out, progress;
    CalibrateArgs a;
    a.runs = {"no-such.csv"};
    a.synthetic = "no/such/truth.yaml";
    CHECK_THROWS_WITH_AS(
        calibrate_command(a, out, progress),
        doctest::Contains("--synthetic: expected a calibration profile file with the true multipliers"),
        core::InputError);
    a.synthetic = TRUTH;
    a.noise = 1.0;
    CHECK_THROWS_WITH_AS(calibrate_command(a, out, progress),
                         doctest::Contains("--noise: expected a standard deviation in ln in [0, 1)"), core::InputError);
    a.noise = -0.01;
    CHECK_THROWS_AS(calibrate_command(a, out, progress), core::InputError);
    a.noise = 0.03;
    a.runs.clear();
    a.nccl = {"x.txt"};
    CHECK_THROWS_WITH_AS(
        calibrate_command(a, out, progress),
        doctest::Contains(doctest::String((TRUTH + ": expected runs whose measured values it replaces").c_str())),
        core::InputError);
  }

  TEST_CASE("synthetic: gemm.A100, hbm.A100 and busbw.nvlink made with 3 % noise are recovered within 5 %")
  {
    // The truth is calibration/synthetic-truth.yaml's (the expected values are read from it, not written here):
    // gemm.A100 0.78, hbm.A100 0.78, busbw.nvlink 1.2. Every other parameter these runs use (attention.A100 1.3,
    // interference 1.3; host.ddp and host.deepspeed, which the truth leaves at 1) is held at its true value
    // (CalibrateOptions::fixed), so only the three are fitted, from the priors, as calibrate fits (weights, priors,
    // Huber, trust region and stopping rule unchanged).
    //
    // Why these three and these runs: each must move some rows that the others do not. Long sequences make the GEMMs
    // dominate (gemm.A100: 8 % of a llama2-7b step per 10 % at 4k tokens); short ones and small micro-batches make
    // the memory-bound kernels and ZeRO-2's / DDP's gradient communication show (hbm.A100: 6 % of a GPT-2 XL step
    // per 10 % at 256 tokens; busbw.nvlink: 7.6 % of a llama2-7b step per 10 % at 64 tokens). At the truth (1.2)
    // communication is faster and more of it hides behind compute than at the prior: at 256 tokens busbw.nvlink
    // moves the step by 2.5 % per 10 % instead of 7 %, so the runs down to 32 tokens and on 2 and 4 GPUs are what
    // inform it. attention.A100 is NOT fitted here: with gemm.A100 beside it, its only separate signal is how the
    // step grows with the sequence; on these runs the fit put it at 1.04 (truth 1.3) with gemm.A100 compensating,
    // the priors' pull along the near-collinear direction (docs/calibration.md "Synthetic recovery").
    // Measured with seeds 1 to 8: busbw.nvlink 1.145-1.223, gemm.A100 0.776-0.783, hbm.A100 0.778-0.802; seed 1 is
    // the one checked. About 6 s on 2 cores (48 runs, each well under a second).
    const spec::Calibration truth = config::load_calibration(TRUTH);
    const std::vector<std::string> fitted = {"busbw.nvlink", "gemm.A100", "hbm.A100"};
    SyntheticOptions so;
    so.truth_file = TRUTH;
    so.truth = truth.factors;
    so.noise = 0.03;
    so.seed = 1;
    // Three sources (weights balance over them; no folds here).
    const std::string gpt2 = "gpt2-xl-ddp-dgx-a100-80gb.yaml", llama = "llama2-7b-dgx-a100-80gb-zero2.yaml";
    std::vector<Observation> obs;
    for (const char* seq : {"16384", "12288", "8192", "6144", "4096", "2048", "1024", "512", "256", "128", "64"})
      for (const char* mb : {"1", "2"})
        obs.push_back(observation(llama,
                                  {"training.grad_accum=1", std::string("training.micro_batch=") + mb,
                                   std::string("training.seq_len=") + seq},
                                  "llama"));
    for (const char* gpus : {"2", "4"})
      for (const char* seq : {"128", "64", "32"})
        obs.push_back(
            observation(llama,
                        {"training.grad_accum=1", "training.micro_batch=1", std::string("training.seq_len=") + seq,
                         std::string("cluster.gpus_per_node=") + gpus},
                        "llama-gpus"));
    for (const char* seq : {"1024", "512", "256", "128", "64"})
      for (const char* mb : {"1", "2", "4", "8"})
        obs.push_back(observation(gpt2,
                                  {"training.grad_accum=1", std::string("training.micro_batch=") + mb,
                                   std::string("training.seq_len=") + seq},
                                  "gpt2"));
    const BatchPredictor predict = pool_predictor(2, 60);
    std::vector<std::string> dropped;
    const std::vector<Observation> synth = synthesize(obs, so, predict, dropped);
    for (const std::string& d : dropped)
      FAIL_CHECK("dropped: " << d);
    REQUIRE(synth.size() == obs.size());
    CalibrateOptions opt;
    opt.params = fitted;
    for (const auto& [name, value] : truth.factors)
      if (std::find(fitted.begin(), fitted.end(), name) == fitted.end())
        opt.fixed[name] = value;
    opt.loso = false;
    const CalibrationResult r = calibrate(synth, opt, predict);
    std::set<std::string> used;
    for (const Observation& o : synth)
      for (const std::string& n : applicable_params(o.c.scenario))
        used.insert(n);
    const Recovery rec = recovery(r, so, opt, used);
    CHECK(rec.costs_compare);
    // The fit reached its minimum: its cost at the fitted multipliers is not above the cost at the truth.
    MESSAGE("cost at the fit " << rec.cost_fit << ", at the truth " << rec.cost_truth);
    CHECK(rec.cost_fit <= rec.cost_truth);
    for (const RecoveryRow& row : rec.rows) {
      if (std::find(fitted.begin(), fitted.end(), row.name) == fitted.end())
        continue;
      MESSAGE(row.name << ": true " << row.truth << ", fitted " << row.fitted << ", prior pull "
                       << row.prior_pull.value_or(-1));
      CHECK(row.fit);
      CHECK(row.truth == truth.factor(row.name));
      CHECK(std::abs(row.error()) <= 0.05);
    }
  }
}
