#include "cli/commands.hpp"

#include "cli/command_line.hpp"

#include "calibration/calibrate_command.hpp"
#include "calibration/validate_fit.hpp"

#include "compare/compare.hpp"
#include "config/scenario_loader.hpp"
#include "config/units.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "engine/engine.hpp"
#include "memory/estimator.hpp"
#include "metrics/run_metrics.hpp"
#include "report/estimator_report.hpp"
#include "report/memory_report.hpp"
#include "report/run_report.hpp"
#include "report/step_plots.hpp"
#include "run/memory_analysis.hpp"
#include "run/run_scenario.hpp"
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
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include <unistd.h>

namespace zerosim::cli {

namespace {

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

/// The defaults with `--with NAME` switched on and `--without NAME` switched off.
spec::Mechanisms mechanisms_of(const Args& a)
{
  spec::Mechanisms m;
  const auto set = [&](const std::vector<std::string>& names_given, const char* option, bool on) {
    for (const std::string& name : names_given) {
      bool found = false;
      std::string names;
      std::vector<std::string> all;
      for (const auto& [n, flag] : spec::MECHANISMS) {
        names += (names.empty() ? "" : ", ") + std::string(n);
        all.emplace_back(n);
        if (name == n) {
          m.*flag = on;
          found = true;
        }
      }
      if (!found) {
        const std::string guess = core::did_you_mean(name, all);
        usage_error(std::string(option) + ": expected one of " + names + ", found \"" + name + "\"" +
                    (guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
      }
    }
  };
  set(a.with, "--with", true);
  set(a.without, "--without", false);
  return m;
}

/// What `run --out DIR` and `memory --out DIR` both write: DIR (created), its summary.json (the --json object) and
/// scenario.resolved.yaml.
std::filesystem::path write_out_dir(const std::string& out_dir, const core::Json& summary, const spec::Scenario& s)
{
  core::create_directories(out_dir, "--out");
  const std::filesystem::path dir(out_dir);
  core::write_file(dir / "summary.json", core::dump_json(summary, 2) + "\n");
  core::write_file(dir / "scenario.resolved.yaml", config::resolved_yaml(s));
  return dir;
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
    out << core::dump_json(report::estimator_json(q, rows), 2) << "\n";
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
  const run::MemoryResult r = run::analyze_memory_scenario(s);
  core::Json j = report::memory_json(s, params, r.report, r.ladder);
  if (a.json)
    out << core::dump_json(j, 2) << "\n";
  else
    out << report::memory_table(s, params, r.report, r.ladder);
  if (a.out_dir)
    write_out_dir(*a.out_dir, j, s);
  return 0;
}

int run_scenario_command(const Args& a, std::ostream& out, std::ostream& err)
{
  if (a.positional.size() != 1)
    usage_error("run: expected one SCENARIO file");
  if (a.trace && !a.out_dir)
    usage_error("run: --trace writes trace.json into the --out DIR; give --out DIR too");
  if (a.plots && !a.out_dir)
    usage_error("run: --plots draws its pictures into the --out DIR; give --out DIR too");
  run::RunOptions o;
  o.engine.record_tracks = a.trace || a.plots; // the timeline picture's resource rows are the trace's tracks
  o.step.first_step = a.first_step;
  o.reuse_accumulation = !a.every_micro_step;
  if (a.every_micro_step)
    o.step.sampled_decode_passes = 0; // every decode pass of an inference request
  o.engine.collectives.hierarchical = a.hierarchical;
  if (a.replay) {
    if (*a.replay == "full")
      o.engine.replay = engine::Replay::FULL;
    else if (*a.replay == "symmetric")
      o.engine.replay = engine::Replay::SYMMETRIC;
    else
      usage_error("--replay: expected full or symmetric, found \"" + *a.replay + "\"");
  }
  if (a.all_reduce) {
    if (*a.all_reduce == "auto")
      o.engine.collectives.all_reduce = collectives::Algorithm::AUTO;
    else if (*a.all_reduce == "ring")
      o.engine.collectives.all_reduce = collectives::Algorithm::RING;
    else if (*a.all_reduce == "tree")
      o.engine.collectives.all_reduce = collectives::Algorithm::TREE;
    else
      usage_error("--all-reduce: expected auto, ring or tree, found \"" + *a.all_reduce + "\"");
  }
  config::LoadOptions opts;
  opts.sets = a.sets;
  opts.calibration = a.calibration.value_or("");
  spec::Scenario s = config::load_scenario(a.positional.front(), opts);
  s.mechanisms = mechanisms_of(a);
  const run::RunResult result = run::run_scenario(s, o);
  const core::Json j = report::run_json(s, result);
  if (a.json)
    out << core::dump_json(j, 2) << "\n";
  else
    report::write_run_summary(out, s, result);
  if (a.out_dir) {
    const std::filesystem::path dir = write_out_dir(*a.out_dir, j, s);
    if (a.trace) {
      std::ostringstream trace;
      report::write_trace(trace, s, result.timeline);
      core::write_file(dir / "trace.json", trace.str());
    }
    if (a.plots) {
      std::string notice;
      report::write_step_plots(dir.string(), s, result, notice);
      if (!notice.empty())
        err << "run: --plots: " << notice << "\n";
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
  if (a.scenarios_dir) {
    if (a.memory || a.run || a.ablation || a.no_loso || a.priors_only || a.out_dir || a.jobs || !a.without.empty() ||
        !a.with.empty())
      usage_error("validate --scenarios DIR: writes the rows' scenarios and simulates nothing; give it with the CSV "
                  "alone");
    return validation::write_row_scenarios(csv, *a.scenarios_dir, out);
  }
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
    validation::ValidateRunOptions vo;
    vo.jobs = jobs;
    vo.fit = !a.priors_only;
    vo.loso = !a.no_loso;
    vo.mechanisms = mechanisms_of(a);
    status = std::max(status, validation::validate_run_command(csv, dir, out, vo, calibration::fit_validation_rows));
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
  const auto split = [](const std::string& list) {
    std::vector<std::string> items;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty())
        items.push_back(item);
    return items;
  };
  if (a.fit_params)
    c.params = split(*a.fit_params);
  if (a.hold)
    c.held = split(*a.hold);
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
  if (a.headroom) {
    const std::optional<double> h = config::parse_number(*a.headroom);
    if (!h || *h < 0 || *h >= 1)
      usage_error("--headroom: expected a fraction of GPU memory from 0 to below 1 (0.177 = 17.7 %), found \"" +
                  *a.headroom + "\"");
    o.headroom = *h;
  }
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

} // namespace

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)
{
  std::string cmd;
  try {
    if (args.empty()) {
      err << usage();
      return 2;
    }
    if (is_command(args.front()))
      cmd = args.front(); // where a usage error's message points for help
    const CommandLine line = parse_command_line(args);
    if (line.print) {
      out << *line.print;
      return 0;
    }
    const Args& a = line.args;
    if (a.command == "memory")
      return memory_command(a, out);
    if (a.command == "describe")
      return describe_command(a, out);
    if (a.command == "validate")
      return validate_command(a, out);
    if (a.command == "run")
      return run_scenario_command(a, out, err);
    if (a.command == "calibrate")
      return calibrate_cli(a, args, out, err);
    if (a.command == "sweep")
      return sweep_command(a, out, err);
    if (a.command == "plot") {
      if (a.positional.size() != 1)
        usage_error("plot: expected one DIR (the --out folder of a sweep)");
      return sweep::plot_command(a.positional.front(), out, err);
    }
    if (a.command == "recommend")
      return recommend_command(a, out, err);
    if (a.command == "compare")
      return compare_command(a, out, err);

    throw core::InternalError("command '" + a.command + "' is parsed but has no dispatch");
  } catch (const UsageError& e) {
    err << e.what() << " (see 'zerosim " << (cmd.empty() ? "" : cmd + " ") << "--help')\n";
    return 2;
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
