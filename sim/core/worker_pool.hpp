// A pool of forked worker processes: each item of work runs in a child of its own (SimGrid allows one engine per
// process, and a crash must not take the run down), up to `jobs` at once, with a wall-clock limit per item. The child
// returns a text payload over a pipe; the parent hears of each item as it ends, in completion order. `zerosim
// validate` and `zerosim sweep` run their simulations through it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace zerosim::core {

/// How an item's worker ended.
enum class WorkStatus {
  DONE,        ///< the work returned its payload
  UNSUPPORTED, ///< core::UnsupportedError: the engine does not model something the item needs
  REJECTED,    ///< core::InputError: the item's input was refused
  FAILED,      ///< any other exception, a signal, or an exit without a result
  TIMED_OUT    ///< ran past the per-item limit and was killed
};

struct WorkOutcome {
  WorkStatus status = WorkStatus::FAILED;
  std::string payload; ///< what the work returned, for DONE
  std::string message; ///< why, for every other status (one line; a failure ends with the worker's last output)
  double wall_s = 0;   ///< from fork to the end, as the parent saw it
};

struct PoolOptions {
  int jobs = 2;              ///< workers at once (at least 1)
  double time_limit_s = 300; ///< wall-clock limit of one item's worker
  /// Called in the parent on every turn of the pool's loop (about every 50 ms while workers run): a coordinator's
  /// chance to answer messages (sweep --mpi). May call the WorkSource and WorkDone of its own.
  std::function<void()> tick;
};

/// The next item to run: sets `item` and returns true, or returns false when there is none left. Called in the
/// parent, lazily, as a worker slot frees (so a source of a million items needs no list of them).
using WorkSource = std::function<bool(std::size_t& item)>;
/// The work of one item, run in the child: returns its payload, or throws (see WorkStatus).
using WorkFunction = std::function<std::string(std::size_t item)>;
/// Called in the parent as each item ends, in completion order.
using WorkDone = std::function<void(std::size_t item, const WorkOutcome& outcome)>;

/// Runs `work` on every item `next` yields, each in a forked child, up to options.jobs at once, until `next` is
/// exhausted and every child has ended. The children's standard output and error go to a pipe whose tail is kept for
/// a failure's message. Throws std::runtime_error when a pipe or fork cannot be made.
void run_pool(const WorkSource& next, const WorkFunction& work, const WorkDone& done, const PoolOptions& options);

/// The items 0 .. n-1 in order, as a WorkSource.
WorkSource count_to(std::size_t n);

/// A line with its line breaks and tabs turned into spaces.
std::string one_line(std::string s);

} // namespace zerosim::core
