// The default headroom of advice (docs/recommend.md "Headroom") is max(5 %, the median |error| of the reserved-memory
// predictions that results/validation/memory.md reports. This test reads that figure from the committed report, so the
// constant and the report cannot part: re-running `zerosim validate --memory` with another figure fails it until
// memory::DEFAULT_HEADROOM (and docs/recommend.md) follow.
#include "memory/memory_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

TEST_SUITE("cli")
{
  TEST_CASE("headroom: the default is max(5 %, the reserved-memory median error of results/validation/memory.md)")
  {
    std::ifstream in(ZEROSIM_SOURCE_DIR "/results/validation/memory.md");
    REQUIRE(in);
    std::stringstream text;
    text << in.rdbuf();
    std::smatch m;
    const std::string all = text.str();
    const std::regex line(R"(Median absolute error on rows with reserved-memory figures[^:]*: ([0-9.]+) % over)");
    REQUIRE(std::regex_search(all, m, line));
    const double median = std::stod(m[1].str()) / 100;
    CHECK(zerosim::memory::DEFAULT_HEADROOM == doctest::Approx(std::max(0.05, median)).epsilon(1e-9));
  }
}
