#include "core/text.hpp"

#include <doctest/doctest.h>

using namespace zerosim::core;

TEST_SUITE("core")
{
  TEST_CASE("text: edit distance counts single-character edits")
  {
    CHECK(edit_distance("kitten", "sitting") == 3); // the textbook example: k->s, e->i, +g
    CHECK(edit_distance("", "abc") == 3);
    CHECK(edit_distance("stage", "stage") == 0);
    // A swap of two adjacent characters is one edit (optimal string alignment), not two substitutions.
    CHECK(edit_distance("stgae", "stage") == 1);
    CHECK(edit_distance("ab", "ba") == 1);
    CHECK(edit_distance("ca", "abc") == 3); // OSA, not full Damerau: no substring is edited twice (Damerau gives 2)
  }

  TEST_CASE("text: did-you-mean proposes only close candidates")
  {
    std::vector<std::string> keys = {"layers", "hidden", "heads", "kv_heads", "vocab"};
    CHECK(did_you_mean("hiden", keys) == "hidden");
    CHECK(did_you_mean("kv_head", keys) == "kv_heads");
    CHECK(did_you_mean("temperature", keys) == "");
    // A transposed typo of a short key: 1 edit, within max(1, 5 / 3) = 1.
    CHECK(did_you_mean("stgae", std::vector<std::string>{"stage", "offload_optimizer"}) == "stage");
  }
}

TEST_CASE("text: fixed decimals and signed percentages, rounded by printf")
{
  CHECK(zerosim::core::format_fixed(28.64, 0) == "29");
  CHECK(zerosim::core::format_fixed(19.47, 1) == "19.5");
  CHECK(zerosim::core::format_signed_pct(28.64, 0) == "+29 %");
  CHECK(zerosim::core::format_signed_pct(-4.2, 1) == "-4.2 %");
  CHECK(zerosim::core::format_signed_pct(0, 1) == "+0.0 %");
}

// The unit is the largest that keeps the figure at 2 or more (1 min = 60 s, 1 h = 3600 s, 1 day = 86,400 s).
TEST_CASE("text: durations for people in s, min, h or days")
{
  CHECK(zerosim::core::format_duration(45.25) == "45.25 s");
  CHECK(zerosim::core::format_duration(119) == "119 s");          // below 2 min stays in seconds
  CHECK(zerosim::core::format_duration(3600) == "60 min");        // below 2 h
  CHECK(zerosim::core::format_duration(7200) == "2 h");           // 2 h exactly
  CHECK(zerosim::core::format_duration(6.805e7) == "787.6 days"); // 6.805e7 / 86400 = 787.62
}
