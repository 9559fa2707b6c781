#include "cli/command_line.hpp"

#include "core/text.hpp"
#include "memory/memory_model.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <functional>
#include <map>

namespace zerosim::cli {

namespace {

/// Each command's entry of `zerosim --help`, in the order printed; a command may have several (two ways to run it).
struct CommandDoc {
  const char* name;
  const char* text;
};

// clang-format off
const CommandDoc COMMAND_DOCS[] = {
    {"run", R"(  zerosim run SCENARIO [--set K=V]... [--json] [--out DIR] [--trace] [--plots]
        [--replay full|symmetric] [--all-reduce auto|ring|tree] [--hierarchical] [--first-step]
        [--every-micro-step]
        one optimizer step replayed on the modelled cluster: step time, tokens/s, TFLOPs per GPU,
        MFU, peak memory at simulated times, the time breakdown; --out DIR writes summary.json,
        scenario.resolved.yaml and, with --trace, trace.json (Chrome trace events, opens in Perfetto),
        with --plots the memory over the step and one micro-step's timeline (gnuplot, SVG and PNG);
        --every-micro-step simulates every micro-step of gradient accumulation instead of three (a
        1F1B pipeline of p stages: p + 4) and the measured period of the repeated ones, and for
        inference every decode pass instead of a
        sample of them (slower, the same answer to about 1e-3)
)"},
    {"memory", R"(  zerosim memory SCENARIO [--set K=V]... [--json] [--out DIR]
        peak memory per GPU, host and NVMe from the schedule's allocation events (issue order),
        the fit verdict per tier and, when it does not fit, the ladder's answer
)"},
    {"memory", R"(  zerosim memory --estimator --params N [--largest-layer N] --gpus-per-node G --nodes M
        [--offload-optimizer] [--offload-param] [--stage 2|3] [--json]
        DeepSpeed's estimate_zero{2,3}_model_states_mem_needs, to the letter (model states only)
)"},
    {"describe", R"(  zerosim describe [model|node|scenario]
        the schema of each file kind, with units and defaults
)"},
    {"validate", R"(  zerosim validate [--memory] [--run [--no-loso | --priors-only]] [CSV] [--out DIR] [--jobs N] [--without NAME]...
        predicted beside measured for every row of the validation data it can express (default CSV
        results/validation/published.csv; output to DIR, default the CSV's folder): --memory peak
        memory (memory.md, memory.csv), --run step time and throughput, one scenario per worker
        process, N at once, default 2 (report.md, report.csv), judged leave-one-source-out,
        in-sample and on the priors (the fit and its folds take about an hour on 2 cores; --no-loso fits
        without the folds, --priors-only skips the fit); neither flag: both
)"},
    {"validate", R"(  zerosim validate --scenarios DIR [CSV]
        each compared row's scenario as the report maps it, resolved, in DIR/row-<id>.yaml, nothing simulated:
        'zerosim run DIR/row-51.yaml' replays that row with its time breakdown
)"},
    {"validate", R"(  zerosim validate --ablation [CSV] [--out DIR] [--jobs N]
        the throughput validation with the default mechanisms, then with each switched from its
        default in turn: ablation.md, the change in median error on the rows each mechanism acts on
)"},
    {"calibrate", R"(  zerosim calibrate [--runs CSV]... [--scenario FILE]... [--nccl FILE[:COLLECTIVE]]... [--gemm CSV] [--node NODE]
        [--fit-params A,B,... | --hold A,B,...] [--fold-by source] [--no-loso] [--out PROFILE] [--json] [--jobs N]
        [--synthetic TRUE_PROFILE [--noise SD] [--seed N]]
        fits the named multipliers of the model's priors (docs/calibration.md) to measured runs (a
        measured-runs CSV, docs/calibration-inputs.md, or a validation CSV such as
        results/validation/published.csv) and to scenarios with a measured: block; prints the
        parameters and the in-sample and leave-one-source-out errors; --out writes the profile;
        --nccl fits each nccl-tests table's bus bandwidth and latency, and the transport's busbw
        multiplier on NODE (the node the tables ran on); --gemm fits NODE's GPU kind's GEMM fraction;
        --synthetic replaces the runs' measured values by the simulator's prediction at TRUE_PROFILE's
        multipliers times exp(SD z) (default SD 0.03, seed 1) and reports how well the fit recovers them
)"},
    {"sweep", R"(  zerosim sweep SCENARIO [--sweep KEY=V1,V2,...]... [-j N | --jobs N] [--set K=V]... [--calibration FILE|none]
        [--out DIR] [--resume] [--shard I/N] [--mpi]
        the scenario at every point of the grid of its sweep: block and the --sweep keys (dotted keys as --set
        takes them; values as a list, or ranges A..B, A..B:+S, A..B:xF; docs/sweep.md), N worker processes at
        once (default 1): DIR/sweep.csv and DIR/sweep.jsonl (one row per point, in point order at the end), the
        plots and a ranked summary table; without --out, a new folder <scenario stem>.sweep (or .sweep-2, ...);
        progress on standard error; --resume (with --out DIR) runs the points an interrupted sweep did not
        finish; --shard I/N runs the points p with p mod N = I-1 (a job array's share);
        under mpirun, --mpi deals the points to the ranks (rank 0 writes the files; N workers per rank)
)"},
    {"sweep", R"(  zerosim sweep --merge SHARD_DIR... --out DIR
        joins the finished shares of one sweep into DIR, as the whole sweep would have written it
)"},
    {"recommend", R"(  zerosim recommend SCENARIO [--gpus A,B,...] [--headroom FRACTION] [--out DIR] [-j N] [--set K=V]...
        [--calibration FILE|none]
        the fastest configuration that fits for the scenario's model, cluster and global batch: every ZeRO stage,
        optimizer / parameter offload, activation checkpointing and micro-batch x accumulation split (and each
        GPU count of --gpus) simulated, ranked, the pruned ones with their shortfall; writes DIR/ds_config.json,
        DIR/scenario.yaml (naming it), DIR/hf_trainer.py and DIR/candidates.csv (without --out, a new folder
        <scenario stem>.recommend, or .recommend-2, ...); on a DeepSpeed pipeline scenario the tensor-parallel and
        pipeline degrees x ZeRO stage 0/1 x checkpointing x micro-batch, each pruned by the memory analysis before
        any is simulated, and DIR/megatron_deepspeed_args.sh in place of hf_trainer.py
)"},
    {"compare", R"(  zerosim compare SCENARIO LOG... [--skip N] [--out DIR] | zerosim compare --runs CSV [-j N] [--out DIR]
        the scenario's predictions beside what real runs measured, read from their logs (Megatron iteration
        lines, DeepSpeed's throughput timer, a Hugging Face trainer_state.json or train metrics, torchtitan step
        lines; the first N steps, default 2, skipped as warm-up) or from a measured-runs CSV; each figure in its
        definition, 4 significant figures, the signed error, whether the prediction fits; DIR/compare.csv and
        the signed errors as bars (DIR/errors.png); without --out, a new folder <stem>.compare (or -2, ...)
)"},
    {"plot", R"(  zerosim plot DIR
        redraws a sweep's plots (SVG and PNG with gnuplot, scripts and data beside them) from DIR's files:
        throughput and peak GPU memory against a swept batch key, the step time broken down per point
)"},
};
// clang-format on

const char* USAGE_TAIL =
    R"(  --calibration FILE|none (run, memory, calibrate, sweep, recommend, compare): the calibration profile, above the
        scenario's and the node file's `calibration:`; none runs on the priors alone
  --without NAME / --with NAME (run, memory, validate): switch one mechanism of the model off / on,
        for ablation: stack, protocols, busbw, leaf_fetch (off by default), host, clock, interference,
        communicator, copies, allocator
  zerosim CMD --help | zerosim help CMD
        CMD's options, each with what it does
  zerosim --version | --help

Exit status: 0 done (a scenario that does not fit is a result), 1 partly failed,
2 bad input, 3 internal error.
)";

/// The entries of `zerosim --help` for one command: the description of its own help.
std::string command_doc(const std::string& name)
{
  std::string text;
  for (const CommandDoc& d : COMMAND_DOCS)
    if (name == d.name)
      text += d.text;
  return text;
}

// Options several commands share, with one wording each.

/// The command's one positional argument (SCENARIO, CSV, DIR): a second is refused.
void add_one_positional(CLI::App& c, Args& a, const char* name, const char* what)
{
  c.add_option(name, a.positional, what)->type_name("")->expected(0, 1);
}

void add_sets(CLI::App& c, Args& a)
{
  c.add_option("--set", a.sets, "override one key of the scenario by its dotted path (repeatable), as in the file")
      ->type_name("KEY=VALUE");
}

void add_json(CLI::App& c, Args& a)
{
  c.add_flag("--json", a.json, "print the result as one JSON object instead of the table");
}

void add_out(CLI::App& c, Args& a, const std::string& what)
{
  c.add_option("--out", a.out_dir, what)->type_name("DIR");
}

void add_calibration(CLI::App& c, Args& a)
{
  c.add_option("--calibration", a.calibration,
               "the calibration profile, above the scenario's and the node file's calibration:; none: the priors alone")
      ->type_name("FILE|none");
}

void add_jobs(CLI::App& c, Args& a, const std::string& what)
{
  c.add_option("-j,--jobs", a.jobs, what)->type_name("N");
}

void add_mechanisms(CLI::App& c, Args& a)
{
  c.add_option("--without", a.without, "switch one mechanism of the model off, for ablation (repeatable)")
      ->type_name("NAME");
  c.add_option("--with", a.with, "switch on one mechanism that is off by default (repeatable)")->type_name("NAME");
}

void add_run(CLI::App& c, Args& a)
{
  add_one_positional(c, a, "SCENARIO", "the scenario YAML file");
  add_sets(c, a);
  add_json(c, a);
  add_out(c, a, "write summary.json, scenario.resolved.yaml and, with --trace, trace.json into DIR");
  c.add_flag("--trace", a.trace, "write DIR/trace.json, Chrome trace events of every task (opens in Perfetto)");
  c.add_flag("--plots", a.plots,
             "draw DIR/memory_over_step, DIR/micro_step_timeline (and under a pipeline DIR/pipeline_schedule) with "
             "gnuplot (SVG, PNG, their .gp and .dat)");
  c.add_option("--replay", a.replay, "replay every rank (full) or one per symmetric class (default)")
      ->type_name("full|symmetric");
  c.add_option("--all-reduce", a.all_reduce, "NCCL's all-reduce algorithm: auto (its tuner, default), ring or tree")
      ->type_name("auto|ring|tree");
  c.add_flag("--hierarchical", a.hierarchical, "run collectives as intra-node, inter-node, intra-node phases");
  c.add_flag("--first-step", a.first_step, "the first optimizer step (cold caches, no overlap from the step before)");
  c.add_flag("--every-micro-step", a.every_micro_step,
             "simulate every micro-step and every decode pass instead of a sample (slower, same answer to ~1e-3)");
  add_calibration(c, a);
  add_mechanisms(c, a);
}

void add_memory(CLI::App& c, Args& a)
{
  add_one_positional(c, a, "SCENARIO", "the scenario YAML file");
  add_sets(c, a);
  add_json(c, a);
  add_out(c, a, "write summary.json and scenario.resolved.yaml into DIR");
  add_calibration(c, a);
  add_mechanisms(c, a);
  c.add_flag("--estimator", a.estimator, "DeepSpeed's estimate_zero{2,3}_model_states_mem_needs instead of a scenario");
  c.add_option("--params", a.params, "--estimator: the model's parameter count (7e9 is accepted)")->type_name("N");
  c.add_option("--largest-layer", a.largest_layer, "--estimator --stage 3: the largest layer's parameter count")
      ->type_name("N");
  c.add_option("--gpus-per-node", a.gpus_per_node, "--estimator: GPUs per node")->type_name("G");
  c.add_option("--nodes", a.nodes, "--estimator: nodes")->type_name("M");
  c.add_flag("--offload-optimizer", a.offload_optimizer, "--estimator: optimizer states on the CPU");
  c.add_flag("--offload-param", a.offload_param, "--estimator: parameters on the CPU too (stage 3)");
  c.add_option("--stage", a.stage, "--estimator: the ZeRO stage, 2 or 3 (default 3)")->type_name("2|3");
}

void add_describe(CLI::App& c, Args& a)
{
  add_one_positional(
      c, a, "KIND",
      "model, node or scenario (default: scenario, whose table nests the model, node and framework keys)");
}

void add_validate(CLI::App& c, Args& a)
{
  add_one_positional(c, a, "CSV", "the validation data (default results/validation/published.csv)");
  c.add_flag("--memory", a.memory, "peak memory, predicted beside measured: memory.md, memory.csv");
  c.add_flag("--run", a.run, "step time and throughput, with the fit and its folds: report.md, report.csv");
  c.add_flag("--no-loso", a.no_loso, "--run: fit once, without the leave-one-source-out folds");
  c.add_flag("--priors-only", a.priors_only, "--run: no fit, the priors alone");
  add_out(c, a, "where the reports go (default: the CSV's folder)");
  add_jobs(c, a, "scenarios simulated at once, one worker process each (default 2)");
  add_mechanisms(c, a);
  c.add_flag("--ablation", a.ablation, "each mechanism switched off in turn: ablation.md");
  c.add_option("--scenarios", a.scenarios_dir,
               "write each compared row's scenario to DIR/row-<id>.yaml, without simulating (zerosim run replays one)")
      ->type_name("DIR");
  add_calibration(c, a);
}

void add_calibrate(CLI::App& c, Args& a)
{
  c.add_option("--runs", a.runs, "measured runs: a measured-runs CSV or a validation CSV (repeatable)")
      ->type_name("CSV");
  c.add_option("--scenario", a.scenario_files, "a scenario with a measured: block (repeatable)")->type_name("FILE");
  c.add_option("--nccl", a.nccl, "an nccl-tests table, and which collective it timed (repeatable)")
      ->type_name("FILE[:COLLECTIVE]");
  c.add_option("--gemm", a.gemm, "measured GEMM rates: fits the GPU kind's GEMM fraction")->type_name("CSV");
  c.add_option("--node", a.node, "the node --nccl and --gemm ran on")->type_name("NAME|PATH");
  c.add_option("--fit-params", a.fit_params, "the multipliers to fit (default: all the runs inform)")
      ->type_name("A,B,...");
  c.add_option("--hold", a.hold,
               "families or parameters held at their priors, left out of the default set (e.g. hbm,busbw.nvlink)")
      ->type_name("A,B,...");
  c.add_option("--fold-by", a.fold_by, "the leave-one-out grouping (source, the only one)")->type_name("source");
  c.add_flag("--no-loso", a.no_loso, "skip the leave-one-source-out folds");
  add_out(c, a, "write the fitted calibration profile to this file");
  c.get_option("--out")->type_name("PROFILE");
  add_json(c, a);
  add_jobs(c, a, "runs simulated at once, one worker process each (default 2)");
  c.add_option("--synthetic", a.synthetic, "replace the measured values by predictions at this profile, then fit")
      ->type_name("TRUE_PROFILE");
  c.add_option("--noise", a.noise, "--synthetic: the noise's standard deviation in ln (default 0.03)")->type_name("SD");
  c.add_option("--seed", a.seed, "--synthetic: the noise's seed (default 1)")->type_name("N");
  add_calibration(c, a);
}

void add_sweep(CLI::App& c, Args& a)
{
  c.add_option("SCENARIO", a.positional, "the scenario (with --merge: the shares' folders)")->type_name("");
  c.add_option("--sweep", a.sweeps, "one key of the grid: a list or a range (docs/sweep.md; repeatable)")
      ->type_name("KEY=V1,V2,...");
  add_jobs(c, a, "points simulated at once, one worker process each (default 1)");
  add_sets(c, a);
  add_calibration(c, a);
  add_out(c, a, "where sweep.csv, sweep.jsonl and the plots go (default: a new folder <scenario stem>.sweep[-N])");
  c.add_flag("--resume", a.resume, "run only the points an interrupted sweep into DIR did not finish");
  c.add_option("--shard", a.shard, "run the points p with p mod N = I-1 (a job array's share)")->type_name("I/N");
  c.add_flag("--mpi", a.mpi, "under mpirun: deal the points to the ranks; rank 0 writes the files");
  c.add_flag("--merge", a.merge, "join the finished shares given as positional folders into --out DIR");
}

void add_plot(CLI::App& c, Args& a)
{
  add_one_positional(c, a, "DIR", "the --out folder of a finished sweep");
}

void add_recommend(CLI::App& c, Args& a)
{
  add_one_positional(c, a, "SCENARIO", "the scenario whose model, cluster and global batch are kept");
  c.add_option("--gpus", a.gpus, "also try these cluster sizes (whole nodes)")->type_name("A,B,...");
  c.add_option("--headroom", a.headroom,
               "share of GPU memory a candidate must leave free to be ranked (default " +
                   core::format_number(memory::DEFAULT_HEADROOM) + ": docs/recommend.md)")
      ->type_name("FRACTION");
  add_out(c, a, "where the winner's files and candidates.csv go (default: a new folder <scenario stem>.recommend[-N])");
  add_jobs(c, a, "candidates simulated at once, one worker process each (default 1)");
  add_sets(c, a);
  add_calibration(c, a);
}

void add_compare(CLI::App& c, Args& a)
{
  c.add_option("FILES", a.positional, "the scenario, then one or more logs of its real runs")->type_name("");
  c.add_option("--runs", a.runs, "a measured-runs CSV instead of SCENARIO LOG... (repeatable)")->type_name("CSV");
  c.add_option("--skip", a.skip, "warm-up steps skipped at the start of each log (default 2)")->type_name("N");
  add_out(c, a, "where compare.csv and the error bars go (default: a new folder <stem>.compare[-N])");
  add_jobs(c, a, "runs simulated at once with --runs, one worker process each (default 1)");
  add_sets(c, a);
  add_calibration(c, a);
}

struct CommandSpec {
  const char* name;
  void (*add)(CLI::App&, Args&);
};

const CommandSpec COMMANDS[] = {
    {"run", add_run},           {"memory", add_memory},       {"describe", add_describe},
    {"validate", add_validate}, {"calibrate", add_calibrate}, {"sweep", add_sweep},
    {"plot", add_plot},         {"recommend", add_recommend}, {"compare", add_compare},
};

/// The option's names as a user types them: "--jobs (-j)", "--set".
std::string option_names(const CLI::Option& o)
{
  std::string names;
  for (const std::string& l : o.get_lnames())
    names += (names.empty() ? "" : ", ") + ("--" + l);
  std::string shorts;
  for (const std::string& s : o.get_snames())
    shorts += (shorts.empty() ? "" : ", ") + ("-" + s);
  return names.empty() ? shorts : shorts.empty() ? names : names + " (" + shorts + ")";
}

/// Whether `app` has an option named `name` ("--gpus", "-j").
bool has_option(const CLI::App& app, const std::string& name)
{
  for (const CLI::Option* o : app.get_options())
    if (!o->get_positional() && o->check_name(name))
      return true;
  return false;
}

/// An argument CLI11 left over: an unknown option, or one of another command (it would do nothing here).
[[noreturn]] void refuse_extra(const CLI::App& root, const CLI::App& cmd, const std::string& arg)
{
  const std::string name = arg.substr(0, arg.find('='));
  bool elsewhere = false;
  for (const CLI::App* other : root.get_subcommands({}))
    elsewhere = elsewhere || (other != &cmd && has_option(*other, name));
  if (!elsewhere)
    usage_error("unknown option '" + name + "'");
  std::string list;
  for (const CLI::Option* o : cmd.get_options())
    if (!o->get_positional() && o != cmd.get_help_ptr())
      list += (list.empty() ? "" : ", ") + option_names(*o);
  usage_error(cmd.get_name() + ": " + name + " is not an option of " + cmd.get_name() + " (" +
              (list.empty() ? std::string("it takes none") : "its options: " + list) + ")");
}

/// CLI11's parse errors in the words of the rest of zerosim's messages.
[[noreturn]] void refuse(const CLI::ParseError& e, const std::string& command)
{
  const std::string what = e.what();
  if (e.get_name() == "ArgumentMismatch") {
    const std::string option = what.substr(0, what.find(':'));
    if (what.find("missing") != std::string::npos)
      usage_error(option + ": a value is expected after it");
    if (what.find("At Most") != std::string::npos && option.rfind('-', 0) != 0)
      usage_error(command + ": expected one " + option + ", found more than one");
    if (what.find("At Most") != std::string::npos)
      usage_error(option + ": given more than once; give it once");
  }
  usage_error(command + ": " + what);
}

} // namespace

void usage_error(const std::string& what)
{
  throw UsageError("zerosim: " + what);
}

bool is_command(const std::string& name)
{
  return std::any_of(std::begin(COMMANDS), std::end(COMMANDS), [&](const CommandSpec& c) { return name == c.name; });
}

const std::string& usage()
{
  static const std::string text = [] {
    std::string t = "usage:\n";
    for (const CommandDoc& d : COMMAND_DOCS)
      t += d.text;
    return t + USAGE_TAIL;
  }();
  return text;
}

CommandLine parse_command_line(const std::vector<std::string>& args)
{
  CommandLine line;
  Args& a = line.args;
  if (args.empty() || args.front() == "--help" || args.front() == "-h" ||
      (args.front() == "help" && args.size() == 1)) {
    line.print = usage();
    return line;
  }
  if (args.front() == "--version") {
    line.print = std::string("zerosim ") + ZEROSIM_VERSION + "\n";
    return line;
  }
  std::vector<std::string> rest = args;
  if (args.front() == "help") // zerosim help CMD is zerosim CMD --help
    rest = {args[1], "--help"};
  a.command = rest.front();

  CLI::App root("zerosim: a discrete-event simulator of large-model training", "zerosim");
  root.set_help_flag(); // `zerosim --help` prints usage(), above
  root.require_subcommand(1);
  for (const CommandSpec& spec : COMMANDS) {
    CLI::App* c = root.add_subcommand(spec.name, command_doc(spec.name));
    c->set_help_flag("-h,--help", "this command's options");
    c->allow_extras(); // refused below, with zerosim's own words
    spec.add(*c, a);
  }
  CLI::App* cmd = nullptr;
  for (CLI::App* c : root.get_subcommands({}))
    if (c->get_name() == a.command)
      cmd = c;
  if (cmd == nullptr)
    usage_error("unknown command '" + a.command + "'");

  std::vector<std::string> reversed(rest.rbegin(), rest.rend()); // CLI11 takes the arguments last first
  try {
    root.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    line.print = cmd->help("zerosim");
    return line;
  } catch (const CLI::ParseError& e) {
    for (const std::string& extra : cmd->remaining()) // an unknown option first: it may have made the error
      if (extra.size() > 1 && extra[0] == '-')
        refuse_extra(root, *cmd, extra);
    refuse(e, a.command);
  }
  // A flag given twice is refused as an option with a value is (CLI11 counts a repeated flag and accepts it).
  for (const CLI::Option* o : cmd->get_options())
    if (o->get_expected_max() == 0 && o->count() > 1)
      usage_error(option_names(*o) + ": given more than once; give it once");
  for (const std::string& extra : cmd->remaining()) {
    if (extra.size() > 1 && extra[0] == '-')
      refuse_extra(root, *cmd, extra);
    a.positional.push_back(extra); // a command without positional arguments says so itself
  }
  return line;
}

} // namespace zerosim::cli
