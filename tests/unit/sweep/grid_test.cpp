// The grid of a sweep (sweep/grid.hpp, docs/sweep.md): range expansion, point order, shards, and the merge of the
// scenario's sweep: block with --sweep arguments.
#include "core/error.hpp"
#include "sweep/grid.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace zerosim;
using namespace zerosim::sweep;

namespace {
using Strings = std::vector<std::string>;

/// "k0", "k1", ... (appended, not "k" + std::to_string(k): GCC 12 warns falsely on that, -Wrestrict).
std::string key(int k)
{
  std::string s = "k";
  s += std::to_string(k);
  return s;
}
} // namespace

TEST_SUITE("sweep")
{
  TEST_CASE("grid: ranges expand to their values, a value with '..' that is no range is itself")
  {
    CHECK(expand("k", "4") == Strings{"4"});
    CHECK(expand("k", "3..5") == Strings{"3", "4", "5"});
    // Powers of two from 1 to 64: 2^0 .. 2^6, seven values.
    CHECK(expand("k", "1..64:x2") == Strings{"1", "2", "4", "8", "16", "32", "64"});
    // By count, not by repeated addition: 0.1 x 3 is printed 0.3 (the shortest form that reads back).
    CHECK(expand("k", "0..0.5:+0.1") == Strings{"0", "0.1", "0.2", "0.3", "0.4", "0.5"});
    CHECK(expand("k", "10..40:+10") == Strings{"10", "20", "30", "40"});
    CHECK(expand("k", "1..100:x10") == Strings{"1", "10", "100"});
    CHECK(expand("k", "../models/llama2-7b.yaml") == Strings{"../models/llama2-7b.yaml"});
    CHECK_THROWS_WITH_AS(expand("--sweep k", "4..1"), "--sweep k: empty range \"4..1\": its end 1 is below its start 4",
                         core::InputError);
    CHECK_THROWS_WITH_AS(expand("k", "1..8:x1"), doctest::Contains("must be above 1"), core::InputError);
    CHECK_THROWS_WITH_AS(expand("k", "0..8:x2"), doctest::Contains("must start above 0"), core::InputError);
    CHECK_THROWS_WITH_AS(expand("k", "1..8:-1"), doctest::Contains("expected a step +S or a factor xF"),
                         core::InputError);
    CHECK_THROWS_WITH_AS(expand("k", "1..2000000"), doctest::Contains("more than 1,000,000 values"), core::InputError);
  }

  TEST_CASE("grid: points in nested-loop order (the last axis fastest), and the shares of --shard I/N")
  {
    const Grid g({Axis{"a", {"1", "2"}}, Axis{"b", {"x", "y", "z"}}});
    CHECK(g.size() == 6);
    CHECK(g.point(0) == Strings{"1", "x"});
    CHECK(g.point(2) == Strings{"1", "z"});
    CHECK(g.point(4) == Strings{"2", "y"});
    CHECK(g.sets(5) == Strings{"a=2", "b=z"});
    // Share I of N takes p with p mod N = I - 1: 2/4 takes 1 and 5; 4/4 takes 3; 1/1 all six.
    const Shard two_of_four = parse_shard("2/4");
    CHECK(two_of_four.takes(1));
    CHECK(two_of_four.takes(5));
    CHECK_FALSE(two_of_four.takes(2));
    CHECK(g.points_in(two_of_four) == 2);
    CHECK(g.points_in(parse_shard("4/4")) == 1);
    CHECK(g.points_in(Shard{}) == 6);
    // Seven shares of six points: the seventh is empty.
    CHECK(g.points_in(parse_shard("7/7")) == 0);
    for (const char* bad : {"0/4", "5/4", "a/b", "3", "1/0", "-1/2"})
      CHECK_THROWS_AS(parse_shard(bad), core::InputError);
  }

  TEST_CASE("grid: a million points are planned from their index, no axis may be empty or repeat, 2^62 at most")
  {
    std::vector<Axis> axes;
    for (int k = 0; k < 6; ++k)
      axes.push_back(Axis{key(k), expand("k", "1..10")});
    const Grid g(axes);
    CHECK(g.size() == 1'000'000);
    // Point 123456: digits 1 2 3 4 5 6 of the six axes, each value one more than its digit.
    CHECK(g.point(123456) == Strings{"2", "3", "4", "5", "6", "7"});
    CHECK_THROWS_AS(Grid({Axis{"a", {}}}), core::InputError);
    CHECK_THROWS_AS(Grid({Axis{"a", {"1"}}, Axis{"a", {"2"}}}), core::InputError);
    std::vector<Axis> huge;
    for (int k = 0; k < 63; ++k)
      huge.push_back(Axis{key(k), {"0", "1"}});
    CHECK_THROWS_WITH_AS(Grid{huge}, doctest::Contains("more than 2^62 points"), core::InputError);
  }

  TEST_CASE("grid: --sweep replaces the sweep: block's entry for its key in place, a new key comes last")
  {
    const std::vector<std::pair<std::string, Strings>> block = {{"training.micro_batch", {"1", "2"}},
                                                                {"deepspeed.zero_optimization.stage", {"2..3"}}};
    const std::vector<Axis> a = axes_of(block, {"training.micro_batch=4..16:x2", "cluster.nodes=1,2"});
    REQUIRE(a.size() == 3);
    CHECK(a[0].key == "training.micro_batch");
    CHECK(a[0].values == Strings{"4", "8", "16"});
    CHECK(a[1].values == Strings{"2", "3"}); // the block's range expanded
    CHECK(a[2].key == "cluster.nodes");
    CHECK(a[2].values == Strings{"1", "2"});
    CHECK_THROWS_WITH_AS(axes_of({}, {"training.micro_batch"}), doctest::Contains("expected KEY=V1,V2,..."),
                         core::InputError);
    CHECK_THROWS_WITH_AS(axes_of({}, {"training.micro_batch="}), doctest::Contains("no values"), core::InputError);
  }
}
