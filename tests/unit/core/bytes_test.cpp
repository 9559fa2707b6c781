#include "core/bytes.hpp"

#include <doctest/doctest.h>

using namespace zerosim::core;

TEST_SUITE("core")
{
  TEST_CASE("bytes: a byte count for people, in binary units")
  {
    CHECK(format_gib(512) == "512 B");
    CHECK(format_gib(3 * 1024LL * 1024 * 1024) == "3.00 GiB");
    CHECK(format_bytes(80LL * 1000 * 1000 * 1000) == "80.00 GB (74.51 GiB)"); // 80e9 / 2^30 = 74.505...
    CHECK(format_in_gib(1.5 * GIB, 2) == "1.50 GiB");
  }
}
