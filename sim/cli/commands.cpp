#include "cli/commands.hpp"

#include "calibration/calibrate_command.hpp"
#include "calibration/validate_fit.hpp"

#include "compare/compare.hpp"
#include "config/scenario_loader.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "engine/engine.hpp"
#include "memory/estimator.hpp"
#include "memory/memory_model.hpp"
#include "metrics/run_metrics.hpp"
#include "report/estimator_report.hpp"
#include "report/memory_report.hpp"
#include "report/run_report.hpp"
#include "spec/names.hpp"
#include "sweep/mpi_sweep.hpp"
#include "sweep/plots.hpp"
#include "sweep/recommend.hpp"
#include "sweep/sweep.hpp"
#include "validation/memory_validation.hpp"
#include "validation/run_validation.hpp"
#include "workload/transformer.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include <unistd.h>

namespace zerosim::cli {

namespace {

const char* USAGE = R"(usage:
  zerosim run SCENARIO [--set K=V]... [--json] [--out DIR] [--trace] [--replay full|symmetric]
        [--all-reduce auto|ring|tree] [--hierarchical] [--first-step] [--every-micro-step]
        one optimizer step replayed on the modelled cluster: step time, tokens/s, TFLOPs per GPU,
        MFU, peak memory at simulated times, the time breakdown; --out DIR writes summary.json,
        scenario.resolved.yaml and, with --trace, trace.json (Chrome trace events, opens in Perfetto);
        --every-micro-step simulates every micro-step of gradient accumulation instead of three and
        the measured period of the repeated ones, and for inference every decode pass instead of a
        sample of them (slower, the same answer to about 1e-3)
  zerosim memory SCENARIO [--set K=V]... [--json] [--out DIR]
        peak memory per GPU, host and NVMe from the schedule's allocation events (issue order),
        the fit verdict per tier and, when it does not fit, the ladder's answer
  zerosim memory --estimator --params N [--largest-layer N] --gpus-per-node G --nodes M
        [--offload-optimizer] [--offload-param] [--stage 2|3] [--json]
        DeepSpeed's estimate_zero{2,3}_model_states_mem_needs, to the letter (model states only)
  zerosim describe [model|node|scenario]
        the schema of each file kind, with units and defaults
  zerosim validate [--memory] [--run [--no-loso | --priors-only]] [CSV] [--out DIR] [--jobs N] [--without NAME]...
        predicted beside measured for every row of the validation data it can express (default CSV
        results/validation/published.csv; output to DIR, default the CSV's folder): --memory peak
        memory (memory.md, memory.csv), --run step time and throughput, one scenario per worker
        process, N at once, default 2 (report.md, report.csv), judged leave-one-source-out,
        in-sample and on the priors (the fit and its folds take about 40 minutes on 2 cores; --no-loso fits
        without the folds, --priors-only skips the fit); neither flag: both
  zerosim validate --ablation [CSV] [--out DIR] [--jobs N]
        the throughput validation with the default mechanisms, then with each switched from its
        default in turn: ablation.md, the change in median error on the rows each mechanism acts on
  zerosim calibrate [--runs CSV]... [--scenario FILE]... [--nccl FILE[:COLLECTIVE]]... [--gemm CSV] [--node NODE]
        [--fit-params A,B,...] [--fold-by source] [--no-loso] [--out PROFILE] [--json] [--jobs N]
        [--synthetic TRUE_PROFILE [--noise SD] [--seed N]]
        fits the named multipliers of the model's priors (docs/calibration.md) to measured runs (a
        measured-runs CSV, docs/calibration-inputs.md, or a validation CSV such as
        results/validation/published.csv) and to scenarios with a measured: block; prints the
        parameters and the in-sample and leave-one-source-out errors; --out writes the profile;
        --nccl fits each nccl-tests table's bus bandwidth and latency, and the transport's busbw
        multiplier on NODE (the node the tables ran on); --gemm fits NODE's GPU kind's GEMM fraction;
        --synthetic replaces the runs' measured values by the simulator's prediction at TRUE_PROFILE's
        multipliers times exp(SD z) (default SD 0.03, seed 1) and reports how well the fit recovers them
  zerosim sweep SCENARIO [--sweep KEY=V1,V2,...]... [-j N | --jobs N] [--set K=V]... [--calibration FILE|none]
        [--out DIR] [--resume] [--shard I/N] [--mpi]
        the scenario at every point of the grid of its sweep: block and the --sweep keys (dotted keys as --set
        takes them; values as a list, or ranges A..B, A..B:+S, A..B:xF; docs/sweep.md), N worker processes at
        once (default 1): DIR/sweep.csv and DIR/sweep.jsonl (one row per point, in point order at the end;
        default DIR <scenario stem>.sweep), progress on standard error; --resume runs the points an interrupted
        sweep did not finish; --shard I/N runs the points p with p mod N = I-1 (a job array's share);
        under mpirun, --mpi deals the points to the ranks (rank 0 writes the files; N workers per rank)
  zerosim sweep --merge SHARD_DIR... --out DIR
        joins the finished shares of one sweep into DIR, as the whole sweep would have written it
  zerosim recommend SCENARIO [--gpus A,B,...] [--out DIR] [-j N] [--set K=V]... [--calibration FILE|none]
        the fastest configuration that fits for the scenario's model, cluster and global batch: every ZeRO stage,
        optimizer / parameter offload, activation checkpointing and micro-batch x accumulation split (and each
        GPU count of --gpus) simulated, ranked, the pruned ones with their shortfall; writes DIR/ds_config.json,
        DIR/scenario.yaml (naming it), DIR/hf_trainer.py and DIR/candidates.csv (default DIR <stem>.recommend)
  zerosim compare SCENARIO LOG... [--skip N] [--out DIR] | zerosim compare --runs CSV [-j N] [--out DIR]
        the scenario's predictions beside what real runs measured, read from their logs (Megatron iteration
        lines, DeepSpeed's throughput timer, a Hugging Face trainer_state.json or train metrics, torchtitan step
        lines; the first N steps, default 2, skipped as warm-up) or from a measured-runs CSV; each figure in its
        definition, 4 significant figures, the signed error; a scatter plot into DIR for two or more
  zerosim plot DIR
        redraws a sweep's plots (SVG and PNG with gnuplot, scripts and data beside them) from DIR's files:
        throughput and peak GPU memory against a swept batch key, the step time broken down per point
  --calibration FILE|none (run, memory, calibrate, sweep): the calibration profile, above the scenario's and the
        node file's `calibration:`; none runs on the priors alone
  --without NAME / --with NAME (run, memory, validate): switch one mechanism of the model off / on,
        for ablation: stack, protocols, busbw, leaf_fetch (off by default), host, clock, interference,
        communicator, copies, allocator
  zerosim --version | --help

Exit status: 0 done (a scenario that does not fit is a result), 1 partly failed,
2 bad input, 3 internal error.
)";

/// Command-line problems are bad input too (exit 2).
[[noreturn]] void usage_error(const std::string& what)
{
  throw core::InputError("zerosim: " + what + " (see 'zerosim --help')");
}

std::int64_t parse_count(const std::string& flag, const std::string& text)
{
  // DeepSpeed-style element counts are accepted: 7e9, 6.7e9, 68976648192.
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !(v > 0) || v > 9.2e18 ||
      v != static_cast<double>(static_cast<std::int64_t>(v)))
    usage_error(flag + ": expected a positive whole number (e.g. 7e9), found \"" + text + "\"");
  return static_cast<std::int64_t>(v);
}

struct Args {
  std::vector<std::string> positional;
  std::vector<std::string> sets;
  bool json = false;
  bool estimator = false;
  bool memory = false;
  std::optional<std::string> out_dir;
  std::optional<std::string> params, largest_layer, gpus_per_node, nodes, stage;
  bool offload_optimizer = false, offload_param = false;
  bool trace = false, hierarchical = false, first_step = false, run = false, every_micro_step = false;
  std::optional<std::string> jobs;
  std::optional<std::string> replay, all_reduce;
  std::optional<std::string> calibration;  ///< --calibration FILE|none
  std::vector<std::string> runs;           ///< calibrate --runs CSV
  std::vector<std::string> scenario_files; ///< calibrate --scenario FILE
  std::optional<std::string> fit_params;   ///< calibrate --params A,B
  std::optional<std::string> fold_by;      ///< calibrate --fold-by source
  bool no_loso = false;                    ///< calibrate and validate --run: --no-loso
  bool priors_only = false;                ///< validate --run --priors-only
  std::vector<std::string> nccl;           ///< calibrate --nccl FILE[:COLLECTIVE]
  std::optional<std::string> node;         ///< calibrate --node NAME|PATH
  std::optional<std::string> gemm;         ///< calibrate --gemm CSV
  std::optional<std::string> synthetic;    ///< calibrate --synthetic TRUE_PROFILE
  std::optional<std::string> noise;        ///< calibrate --noise SD
  std::optional<std::string> seed;         ///< calibrate --seed N
  std::vector<std::string> without;        ///< --without NAME: mechanisms switched off (ablation)
  std::vector<std::string> with;           ///< --with NAME: mechanisms off by default switched on
  bool ablation = false;
  std::vector<std::string> sweeps;  ///< sweep --sweep KEY=V1,V2,...
  bool resume = false;              ///< sweep --resume
  std::optional<std::string> shard; ///< sweep --shard I/N
  bool merge = false;               ///< sweep --merge SHARD_DIR...
  bool mpi = false;                 ///< sweep --mpi (under mpirun)
  std::optional<std::string> gpus;  ///< recommend --gpus A,B,...
  std::optional<std::string> skip;  ///< compare --skip N
  std::vector<std::string> options; ///< every option given, as its name ("--set" for --set=K=V), in order
};

Args parse_args(const std::vector<std::string>& args, size_t first)
{
  Args a;
  auto value = [&](size_t& i) -> std::string {
    if (i + 1 >= args.size())
      usage_error(args[i] + ": a value is expected after it");
    return args[++i];
  };
  for (size_t i = first; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() > 1 && arg[0] == '-')
      a.options.push_back(arg.rfind("--set=", 0) == 0 ? std::string("--set") : arg);
    if (arg == "--json")
      a.json = true;
    else if (arg == "--set")
      a.sets.push_back(value(i));
    else if (arg.rfind("--set=", 0) == 0)
      a.sets.push_back(arg.substr(6));
    else if (arg == "--out")
      a.out_dir = value(i);
    else if (arg == "--estimator")
      a.estimator = true;
    else if (arg == "--memory")
      a.memory = true;
    else if (arg == "--params")
      a.params = value(i);
    else if (arg == "--largest-layer")
      a.largest_layer = value(i);
    else if (arg == "--gpus-per-node")
      a.gpus_per_node = value(i);
    else if (arg == "--nodes")
      a.nodes = value(i);
    else if (arg == "--stage")
      a.stage = value(i);
    else if (arg == "--offload-optimizer")
      a.offload_optimizer = true;
    else if (arg == "--offload-param")
      a.offload_param = true;
    else if (arg == "--run")
      a.run = true;
    else if (arg == "--jobs" || arg == "-j")
      a.jobs = value(i);
    else if (arg == "--sweep")
      a.sweeps.push_back(value(i));
    else if (arg == "--resume")
      a.resume = true;
    else if (arg == "--shard")
      a.shard = value(i);
    else if (arg == "--merge")
      a.merge = true;
    else if (arg == "--mpi")
      a.mpi = true;
    else if (arg == "--gpus")
      a.gpus = value(i);
    else if (arg == "--skip")
      a.skip = value(i);
    else if (arg == "--trace")
      a.trace = true;
    else if (arg == "--hierarchical")
      a.hierarchical = true;
    else if (arg == "--first-step")
      a.first_step = true;
    else if (arg == "--every-micro-step")
      a.every_micro_step = true;
    else if (arg == "--replay")
      a.replay = value(i);
    else if (arg == "--all-reduce")
      a.all_reduce = value(i);
    else if (arg == "--without")
      a.without.push_back(value(i));
    else if (arg == "--with")
      a.with.push_back(value(i));
    else if (arg == "--ablation")
      a.ablation = true;
    else if (arg == "--calibration")
      a.calibration = value(i);
    else if (arg == "--runs")
      a.runs.push_back(value(i));
    else if (arg == "--scenario")
      a.scenario_files.push_back(value(i));
    else if (arg == "--fit-params")
      a.fit_params = value(i);
    else if (arg == "--fold-by")
      a.fold_by = value(i);
    else if (arg == "--no-loso")
      a.no_loso = true;
    else if (arg == "--priors-only")
      a.priors_only = true;
    else if (arg == "--nccl")
      a.nccl.push_back(value(i));
    else if (arg == "--node")
      a.node = value(i);
    else if (arg == "--gemm")
      a.gemm = value(i);
    else if (arg == "--synthetic")
      a.synthetic = value(i);
    else if (arg == "--noise")
      a.noise = value(i);
    else if (arg == "--seed")
      a.seed = value(i);
    else if (arg.size() > 1 && arg[0] == '-')
      usage_error("unknown option '" + arg + "'");
    else
      a.positional.push_back(arg);
  }
  return a;
}

/// The defaults with `--with NAME` switched on and `--without NAME` switched off.
spec::Mechanisms mechanisms_of(const Args& a)
{
  spec::Mechanisms m;
  const auto set = [&](const std::vector<std::string>& names_given, const char* option, bool on) {
    for (const std::string& name : names_given) {
      bool found = false;
      std::string names;
      for (const auto& [n, flag] : spec::MECHANISMS) {
        names += (names.empty() ? "" : ", ") + std::string(n);
        if (name == n) {
          m.*flag = on;
          found = true;
        }
      }
      if (!found)
        usage_error(std::string(option) + ": expected one of " + names + ", found \"" + name + "\"");
    }
  };
  set(a.with, "--with", true);
  set(a.without, "--without", false);
  return m;
}

void write_file(const std::filesystem::path& path, const std::string& text)
{
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f)
    throw core::InputError("zerosim: --out: cannot write " + path.string());
}

int memory_estimator(const Args& a, std::ostream& out)
{
  if (!a.positional.empty())
    usage_error("memory --estimator takes no scenario (found '" + a.positional.front() + "')");
  if (!a.params)
    usage_error("memory --estimator: --params N is required");
  if (!a.gpus_per_node || !a.nodes)
    usage_error("memory --estimator: --gpus-per-node G and --nodes M are required");
  memory::EstimatorQuery q;
  q.total_params = parse_count("--params", *a.params);
  q.gpus_per_node = static_cast<int>(parse_count("--gpus-per-node", *a.gpus_per_node));
  q.nodes = static_cast<int>(parse_count("--nodes", *a.nodes));
  q.stage = 3;
  if (a.stage) {
    if (*a.stage != "2" && *a.stage != "3")
      usage_error("--stage: expected 2 or 3 (DeepSpeed has estimators for these two), found \"" + *a.stage + "\"");
    q.stage = *a.stage == "2" ? 2 : 3;
  }
  if (q.stage == 3 && !a.largest_layer)
    usage_error("memory --estimator --stage 3: --largest-layer N is required (DeepSpeed's largest_layer_params)");
  if (q.stage == 2 && a.largest_layer)
    usage_error("--largest-layer: not an input of DeepSpeed's ZeRO-2 estimator");
  if (q.stage == 2 && a.offload_param)
    usage_error("--offload-param: ZeRO-2 has no parameter offload");
  if (a.largest_layer)
    q.largest_layer_params = parse_count("--largest-layer", *a.largest_layer);
  q.offload_optimizer = a.offload_optimizer;
  q.offload_param = a.offload_param;
  if (q.offload_param && !q.offload_optimizer)
    usage_error("--offload-param: DeepSpeed's estimator has parameter offload only together with --offload-optimizer");
  auto rows = memory::estimate_rows(q);
  if (a.json)
    out << report::estimator_json(q, rows).dump() << "\n";
  else
    out << report::estimator_table(q, rows);
  return 0;
}

int memory_command(const Args& a, std::ostream& out)
{
  if (a.estimator)
    return memory_estimator(a, out);
  if (a.positional.size() != 1)
    usage_error("memory: expected one SCENARIO file");
  config::LoadOptions opts;
  opts.sets = a.sets;
  opts.calibration = a.calibration.value_or("");
  spec::Scenario s = config::load_scenario(a.positional.front(), opts);
  s.mechanisms = mechanisms_of(a);
  const std::int64_t params = workload::count_params(s.model);
  memory::MemoryReport r = memory::analyze_memory(s);
  std::vector<memory::LadderStep> ladder;
  if (!r.fits)
    ladder = memory::climb_ladder(s);
  core::Json j = report::memory_json(s, params, r, ladder);
  if (a.json)
    out << j.dump() << "\n";
  else
    out << report::memory_table(s, params, r, ladder);
  if (a.out_dir) {
    std::filesystem::path dir(*a.out_dir);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw core::InputError("zerosim: --out: cannot create " + dir.string() + ": " + ec.message());
    write_file(dir / "summary.json", j.dump() + "\n");
    write_file(dir / "scenario.resolved.yaml", config::resolved_yaml(s));
  }
  return 0;
}

int run_scenario_command(const Args& a, std::ostream& out)
{
  if (a.positional.size() != 1)
    usage_error("run: expected one SCENARIO file");
  if (a.trace && !a.out_dir)
    usage_error("run: --trace writes trace.json into the --out DIR; give --out DIR too");
  engine::EngineOptions o;
  o.record_tracks = a.trace;
  o.step.first_step = a.first_step;
  o.reuse_accumulation = !a.every_micro_step;
  if (a.every_micro_step)
    o.step.sampled_decode_passes = 0; // every decode pass of an inference request
  o.collectives.hierarchical = a.hierarchical;
  if (a.replay) {
    if (*a.replay == "full")
      o.replay = engine::Replay::FULL;
    else if (*a.replay == "symmetric")
      o.replay = engine::Replay::SYMMETRIC;
    else
      usage_error("--replay: expected full or symmetric, found \"" + *a.replay + "\"");
  }
  if (a.all_reduce) {
    if (*a.all_reduce == "auto")
      o.collectives.all_reduce = collectives::Algorithm::AUTO;
    else if (*a.all_reduce == "ring")
      o.collectives.all_reduce = collectives::Algorithm::RING;
    else if (*a.all_reduce == "tree")
      o.collectives.all_reduce = collectives::Algorithm::TREE;
    else
      usage_error("--all-reduce: expected auto, ring or tree, found \"" + *a.all_reduce + "\"");
  }
  config::LoadOptions opts;
  opts.sets = a.sets;
  opts.calibration = a.calibration.value_or("");
  spec::Scenario s = config::load_scenario(a.positional.front(), opts);
  s.mechanisms = mechanisms_of(a);
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const engine::Timeline t = engine::simulate(s, w, o);
  const metrics::RunMetrics m = metrics::compute_metrics(s, w, t);
  const core::Json j = report::run_json(s, w, m, t);
  if (a.json)
    out << j.dump() << "\n";
  else
    report::write_run_summary(out, s, w, m, t);
  if (a.out_dir) {
    std::filesystem::path dir(*a.out_dir);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw core::InputError("zerosim: --out: cannot create " + dir.string() + ": " + ec.message());
    write_file(dir / "summary.json", j.dump() + "\n");
    write_file(dir / "scenario.resolved.yaml", config::resolved_yaml(s));
    if (a.trace) {
      std::ostringstream trace;
      report::write_trace(trace, s, t);
      write_file(dir / "trace.json", trace.str());
    }
  }
  return 0;
}

int describe_command(const Args& a, std::ostream& out)
{
  if (a.positional.size() > 1)
    usage_error("describe: expected at most one of model, node, scenario");
  const std::string what = a.positional.empty() ? "" : a.positional.front();
  if (!what.empty() && what != "model" && what != "node" && what != "scenario")
    usage_error("describe: expected model, node or scenario, found \"" + what + "\"");
  out << config::describe(what);
  return 0;
}

int validate_command(const Args& a, std::ostream& out)
{
  if (a.positional.size() > 1)
    usage_error("validate: expected at most one CSV file");
  if (a.calibration)
    usage_error("validate: --calibration is not taken (the report runs on the priors); 'zerosim calibrate --runs "
                "CSV' reports a fit's in-sample and leave-one-source-out errors on the same rows");
  const int jobs = a.jobs ? static_cast<int>(parse_count("--jobs", *a.jobs)) : 2;
  const std::string csv = a.positional.empty() ? "results/validation/published.csv" : a.positional.front();
  const std::filesystem::path given =
      a.out_dir ? std::filesystem::path(*a.out_dir) : std::filesystem::path(csv).parent_path();
  const std::string dir = (given.empty() ? std::filesystem::path(".") : given).string();
  if (a.ablation) {
    if (a.memory || a.run || a.no_loso || a.priors_only || !a.without.empty() || !a.with.empty())
      usage_error("validate --ablation: switches every mechanism off in turn by itself; give it without --memory, "
                  "--run and --without");
    return validation::validate_ablation_command(csv, dir, out, jobs);
  }
  const bool both = !a.memory && !a.run;
  if ((a.no_loso || a.priors_only) && !(a.run || both))
    usage_error("validate: --no-loso and --priors-only shape the --run report; give them with --run");
  if (a.no_loso && a.priors_only)
    usage_error("validate: --priors-only skips the fit that --no-loso shortens; give one of them");
  int status = 0;
  if (a.memory || both)
    status = std::max(status, validation::validate_memory_command(csv, dir, out, mechanisms_of(a)));
  if (a.run || both) {
    calibration::ValidateFitOptions vo;
    vo.jobs = jobs;
    vo.fit = !a.priors_only;
    vo.loso = !a.no_loso;
    vo.mechanisms = mechanisms_of(a);
    status = std::max(status, calibration::validate_run_with_fit(csv, dir, out, vo));
  }
  return status;
}

int calibrate_cli(const Args& a, const std::vector<std::string>& args, std::ostream& out, std::ostream& err)
{
  if (!a.positional.empty())
    usage_error("calibrate: takes no positional argument (found '" + a.positional.front() +
                "'); give --runs CSV or --scenario FILE");
  if (a.fold_by && *a.fold_by != "source")
    usage_error("--fold-by: expected source (the only grouping of the leave-one-out folds), found \"" + *a.fold_by +
                "\"");
  calibration::CalibrateArgs c;
  c.runs = a.runs;
  c.scenarios = a.scenario_files;
  c.nccl = a.nccl;
  c.node = a.node.value_or("");
  c.gemm = a.gemm.value_or("");
  if (a.fit_params) {
    std::stringstream ss(*a.fit_params);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty())
        c.params.push_back(item);
  }
  c.out = a.out_dir.value_or("");
  c.calibration = a.calibration.value_or("");
  c.json = a.json;
  c.loso = !a.no_loso;
  c.jobs = a.jobs ? static_cast<int>(parse_count("--jobs", *a.jobs)) : 2;
  if ((a.noise || a.seed) && !a.synthetic)
    usage_error(std::string(a.noise ? "--noise" : "--seed") +
                ": expected together with --synthetic TRUE_PROFILE (it sets the synthetic measurements' noise), "
                "found without it");
  c.synthetic = a.synthetic.value_or("");
  if (a.synthetic && a.synthetic->empty())
    usage_error("--synthetic: expected a calibration profile file with the true multipliers, found an empty name");
  if (a.noise) {
    double v = 0;
    const std::string& t = *a.noise;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size() || !(v >= 0 && v < 1))
      usage_error("--noise: expected a standard deviation in ln in [0, 1) (0.03 for 3 %), found \"" + t + "\"");
    c.noise = v;
  }
  if (a.seed) {
    const std::string& t = *a.seed;
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size() ||
        v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      usage_error("--seed: expected a whole number from 0 to 2^63 - 1, found \"" + t + "\"");
    c.seed = v;
  }
  c.command = "zerosim";
  for (const std::string& s : args)
    c.command += " " + s;
  return calibration::calibrate_command(c, out, err);
}

int sweep_command(const Args& a, std::ostream& out, std::ostream& err)
{
  const int jobs = a.jobs ? static_cast<int>(parse_count("--jobs", *a.jobs)) : 1;
  if (a.merge) {
    if (!a.sweeps.empty() || a.resume || a.shard || !a.sets.empty() || a.calibration || a.mpi)
      usage_error("sweep --merge: joins finished shares; give only SHARD_DIR... and --out DIR");
    return sweep::merge_sweeps(a.positional, a.out_dir.value_or(""), out);
  }
  if (a.positional.size() != 1)
    usage_error("sweep: expected one SCENARIO file");
  const sweep::Shard shard = a.shard ? sweep::parse_shard(*a.shard) : sweep::Shard{};
  const sweep::Plan plan = sweep::make_plan(a.positional.front(), a.sets, a.calibration.value_or(""), a.sweeps, shard);
  sweep::SweepOptions o;
  o.sweeps = a.sweeps;
  o.out_dir = a.out_dir.value_or("");
  o.resume = a.resume;
  o.jobs = jobs;
  o.terminal = ::isatty(STDERR_FILENO) != 0 && &err == &std::cerr;
  if (a.mpi)
    return sweep::run_sweep_mpi(plan, o, out, err);
  return sweep::run_sweep(plan, o, out, err);
}

int recommend_command(const Args& a, std::ostream& out, std::ostream& err)
{
  if (a.positional.size() != 1)
    usage_error("recommend: expected one SCENARIO file");
  sweep::RecommendOptions o;
  o.scenario = a.positional.front();
  o.sets = a.sets;
  o.calibration = a.calibration.value_or("");
  o.out_dir = a.out_dir.value_or("");
  o.jobs = a.jobs ? static_cast<int>(parse_count("--jobs", *a.jobs)) : 1;
  if (a.gpus) {
    std::stringstream list(*a.gpus);
    std::string item;
    while (std::getline(list, item, ','))
      o.gpus.push_back(static_cast<int>(parse_count("--gpus", item)));
    if (o.gpus.empty())
      usage_error("--gpus: expected GPU counts A,B,..., found \"" + *a.gpus + "\"");
  }
  return sweep::recommend(o, out, err);
}

int compare_command(const Args& a, std::ostream& out, std::ostream& err)
{
  compare::CompareOptions o;
  if (!a.runs.empty()) {
    if (!a.positional.empty())
      usage_error("compare: give SCENARIO LOG... or --runs CSV, not both");
    o.runs = a.runs;
  } else {
    if (a.positional.size() < 2)
      usage_error("compare: expected SCENARIO LOG... (one or more logs of real runs of the scenario) or --runs CSV");
    o.scenario = a.positional.front();
    o.logs.assign(a.positional.begin() + 1, a.positional.end());
  }
  o.sets = a.sets;
  o.calibration = a.calibration.value_or("");
  o.out_dir = a.out_dir.value_or("");
  o.jobs = a.jobs ? static_cast<int>(parse_count("--jobs", *a.jobs)) : 1;
  if (a.skip) {
    if (*a.skip == "0")
      o.skip = 0;
    else
      o.skip = static_cast<int>(parse_count("--skip", *a.skip));
  }
  return compare::compare(o, out, err);
}

/// Each command's options; one given to a command that does not take it is bad input (it would do nothing).
void check_options(const std::string& cmd, const Args& a)
{
  static const std::map<std::string, std::vector<std::string>> allowed = {
      {"run",
       {"--set", "--json", "--out", "--trace", "--replay", "--all-reduce", "--hierarchical", "--first-step",
        "--every-micro-step", "--calibration", "--without", "--with"}},
      {"memory",
       {"--set", "--json", "--out", "--calibration", "--without", "--with", "--estimator", "--params",
        "--largest-layer", "--gpus-per-node", "--nodes", "--offload-optimizer", "--offload-param", "--stage"}},
      {"describe", {}},
      {"validate",
       {"--memory", "--run", "--no-loso", "--priors-only", "--out", "--jobs", "-j", "--without", "--with", "--ablation",
        "--calibration"}},
      {"calibrate",
       {"--runs", "--scenario", "--nccl", "--gemm", "--node", "--fit-params", "--fold-by", "--no-loso", "--out",
        "--json", "--jobs", "-j", "--synthetic", "--noise", "--seed", "--calibration"}},
      {"sweep",
       {"--sweep", "--jobs", "-j", "--set", "--calibration", "--out", "--resume", "--shard", "--mpi", "--merge"}},
      {"plot", {}},
      {"recommend", {"--gpus", "--out", "--jobs", "-j", "--set", "--calibration"}},
      {"compare", {"--runs", "--skip", "--out", "--jobs", "-j", "--set", "--calibration"}},
  };
  const auto it = allowed.find(cmd);
  if (it == allowed.end())
    return; // an unknown command is reported by run_command
  for (const std::string& o : a.options)
    if (std::find(it->second.begin(), it->second.end(), o) == it->second.end()) {
      std::string list;
      for (const std::string& k : it->second)
        list += (list.empty() ? "" : ", ") + k;
      usage_error(cmd + ": " + o + " is not an option of " + cmd + " (" +
                  (list.empty() ? std::string("it takes none") : "its options: " + list) + ")");
    }
}

} // namespace

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)
{
  try {
    if (args.empty()) {
      err << USAGE;
      return 2;
    }
    const std::string& cmd = args.front();
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      out << USAGE;
      return 0;
    }
    if (cmd == "--version") {
      out << "zerosim " << ZEROSIM_VERSION << "\n";
      return 0;
    }
    Args a = parse_args(args, 1);
    check_options(cmd, a);
    if (cmd == "memory")
      return memory_command(a, out);
    if (cmd == "describe")
      return describe_command(a, out);
    if (cmd == "validate")
      return validate_command(a, out);
    if (cmd == "run")
      return run_scenario_command(a, out);
    if (cmd == "calibrate")
      return calibrate_cli(a, args, out, err);
    if (cmd == "sweep")
      return sweep_command(a, out, err);
    if (cmd == "plot") {
      if (a.positional.size() != 1)
        usage_error("plot: expected one DIR (the --out folder of a sweep)");
      return sweep::plot_command(a.positional.front(), out, err);
    }
    if (cmd == "recommend")
      return recommend_command(a, out, err);
    if (cmd == "compare")
      return compare_command(a, out, err);

    usage_error("unknown command '" + cmd + "'");
  } catch (const core::InputError& e) {
    err << e.what() << "\n";
    return 2;
  } catch (const core::UnsupportedError& e) {
    err << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "zerosim: internal error: " << e.what() << "\n";
    return 3;
  }
}

} // namespace zerosim::cli
