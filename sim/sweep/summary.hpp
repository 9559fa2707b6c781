// The ranked summary a sweep prints when it ends (docs/sweep.md "Summary"): the points that fit, best first by
// tokens/s, then those that do not fit, marked, then those that did not run. It holds only the rows it will print,
// so a sweep of millions of points is summarised as it is read, a record at a time.
#pragma once

#include "sweep/sweep.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zerosim::sweep {

/// The name of a swept key in legends, labels and the summary's header: "mb" (training.micro_batch), "ga"
/// (training.grad_accum), "global batch" (training.global_batch), "stage" (deepspeed.zero_optimization.stage),
/// otherwise the key without its container segments ("offload_optimizer.device", "nodes").
std::string axis_name(const std::string& key);

/// A point's swept values as a label: "mb 2, stage 3" (axis_name and value per axis, `skip` left out; -1: none).
std::string values_label(const Plan& plan, const std::vector<std::string>& values, int skip = -1);

/// Whether a finished point's result fits in memory (`fits` of zerosim run --json).
bool result_fits(const Record& r);

class Summary {
public:
  /// At most `most_fit` fitting rows and `most_other` of each other kind are printed; the rest are counted.
  explicit Summary(const Plan& plan, std::size_t most_fit = 20, std::size_t most_other = 10);
  void add(const Record& r);
  /// The table, a header line first, each row ending in a newline; "" when there are no points.
  std::string table() const;

private:
  struct Row {
    std::uint64_t point = 0;
    std::vector<std::string> values;
    double tokens_per_s = 0, step_time_s = 0, tflops = 0, memory_gib = 0, capacity_gib = 0, shortfall_gib = 0;
    std::string status; ///< "done", or why it did not run
    bool tight = false; ///< fits with less than the headroom free (the run JSON's tight.gpu; docs/recommend.md)
  };
  /// Sorts `rows` best first and keeps the first `most`.
  static void order(std::vector<Row>& rows, bool by_throughput, std::size_t most);
  void keep(std::vector<Row>& rows, Row row, std::size_t most, bool by_throughput);
  Plan plan_;
  std::size_t most_fit_, most_other_;
  std::vector<Row> fit_, unfit_, not_run_;
  std::uint64_t fit_count_ = 0, unfit_count_ = 0, not_run_count_ = 0;
};

} // namespace zerosim::sweep
