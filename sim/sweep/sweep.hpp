// `zerosim sweep` (docs/sweep.md): a scenario run at every point of a grid of dotted keys, each point in a worker
// process of its own (core::run_pool), its result appended to DIR/sweep.jsonl and DIR/sweep.csv as it ends; at the
// end both files are rewritten in point order, so two runs (or shards merged) give the same bytes apart from the
// wall_s column. An interrupted sweep keeps every finished point; --resume runs the rest.
#pragma once

#include "core/json.hpp"
#include "core/worker_pool.hpp"
#include "sweep/grid.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace zerosim::sweep {

/// What a sweep is: its scenario, overrides, axes and share. Written to DIR/sweep-plan.json; --resume and --merge
/// compare it.
struct Plan {
  std::string scenario;      ///< the scenario path as given
  std::string scenario_hash; ///< FNV-1a 64 of the scenario file's bytes
  std::vector<std::string> sets;
  std::string calibration; ///< --calibration ("" when not given)
  std::vector<Axis> axes;
  Shard shard;
  Grid grid() const { return Grid(axes); }
  core::Json to_json() const;
  /// Reads a plan written by to_json; throws core::InputError naming `file` when it is not one.
  static Plan from_json(const core::Json& j, const std::string& file);
};

/// One finished point.
struct Record {
  std::uint64_t point = 0;
  std::vector<std::string> values; ///< per axis
  std::string status;              ///< "done", "not modelled", "refused", "failed", "timed out"
  std::string message;             ///< why, when not done
  core::Json result;               ///< `zerosim run --json`'s object, for done (null otherwise)
  double wall_s = 0;
  bool done() const { return status == "done"; }
};

/// The simulation of one point, run in the worker: the scenario's `zerosim run --json` object as one line of text.
using PointSimulator = std::function<std::string(const Plan& plan, const std::vector<std::string>& point_sets)>;

/// The real pipeline, as `zerosim run` runs it (config::load_scenario with the plan's and the point's --set, the
/// engine's defaults, report::run_json).
std::string simulate_point(const Plan& plan, const std::vector<std::string>& point_sets);

/// How a sweep's points run: draw items from `next`, run `work` on each (in a worker process), and call `done` in
/// this process as each ends. Empty: the local worker pool (core::run_pool, SweepOptions::jobs at once); sweep --mpi
/// gives its coordinator (mpi_sweep.hpp).
using Executor =
    std::function<void(const core::WorkSource& next, const core::WorkFunction& work, const core::WorkDone& done)>;

struct SweepOptions {
  std::vector<std::string> sweeps; ///< --sweep KEY=V1,V2,...
  std::string out_dir;             ///< --out DIR ("" : a new folder <scenario stem>.sweep[-N], core::output_dir)
  bool resume = false;
  int jobs = 1;
  double point_time_limit_s = 600;
  PointSimulator simulate = simulate_point;
  /// Progress on standard error: a bar with an ETA on a terminal, plain lines otherwise.
  bool terminal = false;
  Executor execute; ///< empty: the local pool
};

/// Runs the sweep of `plan` (axes from the scenario's `sweep:` block and options.sweeps: build it with make_plan).
/// Writes DIR/sweep-plan.json, DIR/sweep.jsonl and DIR/sweep.csv; progress goes to `err`, a summary to `out`.
/// Returns 0, or 1 when some point failed. Throws core::InputError (exit 2) for a DIR that holds another sweep,
/// --resume of a different sweep, or an unwritable DIR.
int run_sweep(const Plan& plan, const SweepOptions& options, std::ostream& out, std::ostream& err);

/// The plan of a sweep of `scenario` with `sets`, `calibration`, the scenario's `sweep:` block and `sweeps`, and
/// `shard` (`--shard I/N`, or the whole grid). Checks every key against the scenario schema and loads the scenario
/// once (exit 2 for bad input); a grid without axes is an error.
Plan make_plan(const std::string& scenario, const std::vector<std::string>& sets, const std::string& calibration,
               const std::vector<std::string>& sweeps, const Shard& shard);

/// `zerosim sweep --merge SHARD_DIR... --out DIR`: joins the shares of one sweep (each a finished `--shard I/N` run)
/// into DIR as the whole run would have written it. Throws core::InputError (exit 2) for a missing, duplicated or
/// foreign share, or a share with points missing. Returns 0, or 1 when some point failed.
int merge_sweeps(const std::vector<std::string>& shard_dirs, const std::string& out_dir, std::ostream& out);

/// The plan and the records of the sweep in `dir` (a torn last line dropped), in point order. Throws core::InputError
/// for a DIR that holds no sweep.
std::vector<Record> read_sweep(const std::string& dir, Plan& plan);

/// The flattened result keys of a `zerosim run --json` object: nested objects joined with dots, arrays and scalars as
/// cells (a string as itself, null empty, anything else its JSON text).
std::vector<std::pair<std::string, std::string>> flatten(const core::Json& result);

/// The CSV of `records` (in point order): point, the axes, status, message, the union of the result keys in order
/// of first appearance, wall_s.
std::string csv_of(const Plan& plan, const std::vector<Record>& records);

/// One JSON line (with its newline) of a record.
std::string jsonl_line(const Plan& plan, const Record& r);

} // namespace zerosim::sweep
