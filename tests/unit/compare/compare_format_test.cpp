// compare's numbers: every measured and predicted figure of its table to 4 significant figures in one format,
// trailing zeros kept (issue 29 Build 7: "prints numbers in one format").
#include "compare/compare.hpp"

#include <doctest/doctest.h>

using zerosim::compare::four_significant_figures;

TEST_CASE("compare: numbers to 4 significant figures, fixed notation, trailing zeros kept")
{
  // The README's and the fixtures' figures: 6,300 tokens/s, 45.8 GiB, 0.08864 s, 364.9 TFLOPs, 12.5 s, 145 TFLOPs.
  CHECK(four_significant_figures(6300) == "6300");
  CHECK(four_significant_figures(45.8) == "45.80");
  CHECK(four_significant_figures(0.08864) == "0.08864");
  CHECK(four_significant_figures(364.94) == "364.9");
  CHECK(four_significant_figures(12.5) == "12.50");
  CHECK(four_significant_figures(145) == "145.0");
  // Above 9,999 the digits past the fourth are rounded to zeros (123,456 -> 123,500), never an exponent.
  CHECK(four_significant_figures(123456) == "123500");
  // Rounding that carries into the next decade keeps 4 figures: 9.9996 is 10.00, not 10.000.
  CHECK(four_significant_figures(9.9996) == "10.00");
  CHECK(four_significant_figures(-0.5) == "-0.5000");
  CHECK(four_significant_figures(0) == "0.000");
}
