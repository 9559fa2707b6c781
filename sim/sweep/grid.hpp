// The grid of a sweep (docs/sweep.md): named axes, each a dotted scenario key (as `--set` takes it) with its values,
// crossed in order, the last axis fastest. Planned lazily: a point is computed from its index, so a grid of a million
// points costs the memory of its axes, not of its points. No YAML and no simulation here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::sweep {

struct Axis {
  std::string key;                 ///< dotted scenario key ("training.micro_batch")
  std::vector<std::string> values; ///< the values as `--set` takes them, ranges expanded
};

/// Which points of the grid one run takes: those p (counted from 0) with p mod count = index - 1 (`--shard I/N`).
struct Shard {
  std::uint64_t index = 1; ///< I, from 1
  std::uint64_t count = 1; ///< N
  bool whole() const { return count == 1; }
  bool takes(std::uint64_t point) const { return point % count == index - 1; }
};

class Grid {
public:
  Grid() = default;
  /// Throws core::InputError when an axis has no value, a key repeats, or the product of the axes' sizes passes 2^62.
  explicit Grid(std::vector<Axis> axes);

  const std::vector<Axis>& axes() const { return axes_; }
  std::uint64_t size() const { return size_; }
  /// The value of every axis at `point` (< size()), in axis order.
  std::vector<std::string> point(std::uint64_t point) const;
  /// "KEY=VALUE" per axis at `point`, as `--set` takes them.
  std::vector<std::string> sets(std::uint64_t point) const;
  /// How many of the grid's points `shard` takes.
  std::uint64_t points_in(const Shard& shard) const;

private:
  std::vector<Axis> axes_;
  std::uint64_t size_ = 1;
};

/// The values one entry of a sweep stands for: a plain value is itself; a range is expanded (docs/sweep.md):
///   A..B       every integer from A to B
///   A..B:+S    A, A+S, ... up to B (S > 0; integers or decimals)
///   A..B:xF    A, A*F, ... up to B (A > 0, F > 1; powers of two: 1..64:x2)
/// An entry with ".." whose bounds are not numbers (a path such as ../models/x.yaml) is a plain value. `where`
/// prefixes an error (an empty range, a bad step or factor, more than 1,000,000 values).
std::vector<std::string> expand(const std::string& where, const std::string& entry);

/// The axes of `--sweep KEY=V1,V2,...` arguments over the scenario's `sweep:` block: the block's keys in its order,
/// each entry expanded; a `--sweep` key replaces the block's entry for that key in place, a new key comes after.
/// Throws core::InputError for an argument without `=` or without values.
std::vector<Axis> axes_of(const std::vector<std::pair<std::string, std::vector<std::string>>>& block,
                          const std::vector<std::string>& arguments);

/// Reads `--shard I/N` (1 <= I <= N). Throws core::InputError otherwise.
Shard parse_shard(const std::string& text);

} // namespace zerosim::sweep
