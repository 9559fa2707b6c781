// The command line's grammar: the nine commands, their options and help, parsed with CLI11. What a
// command does with its options is in commands.cpp; this file only turns argv into `Args`.
#pragma once

#include "core/error.hpp"

#include <optional>
#include <string>
#include <vector>

namespace zerosim::cli {

/// A command-line mistake: bad input (exit 2). run_command adds where to look for help.
struct UsageError : core::InputError {
  using core::InputError::InputError;
};

/// Throws UsageError("zerosim: WHAT").
[[noreturn]] void usage_error(const std::string& what);

/// Every option of every command, as given. A value option that was not given is empty.
struct Args {
  std::string command;                 ///< run, memory, describe, validate, calibrate, sweep, plot, recommend, compare
  std::vector<std::string> positional; ///< SCENARIO, CSV, DIR, LOG... as the command takes them
  std::vector<std::string> sets;       ///< --set K=V
  bool json = false;
  std::optional<std::string> out_dir;     ///< --out DIR (or PROFILE for calibrate)
  std::optional<std::string> calibration; ///< --calibration FILE|none
  std::optional<std::string> jobs;        ///< -j, --jobs N
  std::vector<std::string> without;       ///< --without NAME: mechanisms switched off (ablation)
  std::vector<std::string> with;          ///< --with NAME: mechanisms off by default switched on
  // run
  bool trace = false, plots = false, hierarchical = false, first_step = false, every_micro_step = false;
  std::optional<std::string> replay, all_reduce;
  // memory --estimator
  bool estimator = false;
  std::optional<std::string> params, largest_layer, gpus_per_node, nodes, stage;
  bool offload_optimizer = false, offload_param = false;
  // validate
  bool memory = false, run = false, ablation = false, priors_only = false;
  bool no_loso = false; ///< validate --run and calibrate
  // calibrate
  std::vector<std::string> runs;            ///< --runs CSV (calibrate, compare)
  std::vector<std::string> scenario_files;  ///< --scenario FILE
  std::optional<std::string> fit_params;    ///< --fit-params A,B
  std::optional<std::string> hold;          ///< --hold A,B
  std::optional<std::string> fold_by;       ///< --fold-by source
  std::vector<std::string> nccl;            ///< --nccl FILE[:COLLECTIVE]
  std::optional<std::string> node;          ///< --node NAME|PATH
  std::optional<std::string> gemm;          ///< --gemm CSV
  std::optional<std::string> synthetic;     ///< --synthetic TRUE_PROFILE
  std::optional<std::string> scenarios_dir; ///< validate --scenarios DIR
  std::optional<std::string> noise;         ///< --noise SD
  std::optional<std::string> seed;          ///< --seed N
  // sweep
  std::vector<std::string> sweeps; ///< --sweep KEY=V1,V2,...
  bool resume = false, merge = false, mpi = false;
  std::optional<std::string> shard; ///< --shard I/N
  // recommend, compare
  std::optional<std::string> gpus;     ///< --gpus A,B,...
  std::optional<std::string> headroom; ///< recommend --headroom FRACTION
  std::optional<std::string> skip;     ///< --skip N
};

/// What the command line asks for: a command with its arguments, or a text to print (help, version).
struct CommandLine {
  Args args;
  std::optional<std::string> print; ///< --help, CMD --help, --version: print this and exit 0
};

/// Parses `zerosim ARGS...` (args excludes the program name). Throws UsageError for an unknown command or
/// option, an option of another command, a missing value or an option given twice.
CommandLine parse_command_line(const std::vector<std::string>& args);

/// Whether `name` is one of the nine commands.
bool is_command(const std::string& name);

/// The overview of every command (`zerosim --help`).
const std::string& usage();

} // namespace zerosim::cli
