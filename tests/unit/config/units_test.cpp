// Unit strings (docs/config.md "Units"; docs/scenario-format.md "Units").
#include "config/units.hpp"

#include <doctest/doctest.h>

using zerosim::config::format_quantity;
using zerosim::config::parse_number;
using zerosim::config::parse_quantity;
using zerosim::config::UnitKind;

TEST_SUITE("config")
{

  TEST_CASE("units: bytes use 10^3 steps for KB..TB and 2^10 steps for KiB..TiB")
  {
    CHECK(*parse_quantity("80 GiB", UnitKind::BYTES) == 80.0 * 1024 * 1024 * 1024);
    CHECK(*parse_quantity("1.5 TB", UnitKind::BYTES) == 1.5e12);
    CHECK(*parse_quantity("3.84TB", UnitKind::BYTES) == doctest::Approx(3.84e12)); // space optional
    CHECK(*parse_quantity("512 B", UnitKind::BYTES) == 512);
    CHECK(*parse_quantity("2 KiB", UnitKind::BYTES) == 2048);
    CHECK(*parse_quantity("2 KB", UnitKind::BYTES) == 2000);
    CHECK(*parse_quantity("1 TiB", UnitKind::BYTES) == 1099511627776.0); // 2^40
  }

  TEST_CASE("units: bandwidth in bytes and bits per second")
  {
    CHECK(*parse_quantity("300 GB/s", UnitKind::BANDWIDTH) == 300e9);
    CHECK(*parse_quantity("200 Gbps", UnitKind::BANDWIDTH) == 25e9);   // 200e9 bit/s / 8
    CHECK(*parse_quantity("1600 Gb/s", UnitKind::BANDWIDTH) == 200e9); // 1600e9 / 8
    CHECK(*parse_quantity("1 Tbps", UnitKind::BANDWIDTH) == 125e9);
    CHECK(*parse_quantity("8 b/s", UnitKind::BANDWIDTH) == 1);
    CHECK(*parse_quantity("1 GiB/s", UnitKind::BANDWIDTH) == 1073741824.0);
  }

  TEST_CASE("units: compute rates and times")
  {
    CHECK(*parse_quantity("312 TFLOPS", UnitKind::COMPUTE) == 312e12);
    CHECK(*parse_quantity("19.5 TFLOPS", UnitKind::COMPUTE) == doctest::Approx(19.5e12));
    CHECK(*parse_quantity("2 PFLOPS", UnitKind::COMPUTE) == 2e15);
    CHECK(*parse_quantity("100 GFLOPS", UnitKind::COMPUTE) == 100e9);
    CHECK(*parse_quantity("5 us", UnitKind::TIME) == doctest::Approx(5e-6));
    CHECK(*parse_quantity("12.3 s", UnitKind::TIME) == 12.3);
    CHECK(*parse_quantity("7ns", UnitKind::TIME) == doctest::Approx(7e-9));
    CHECK(*parse_quantity("2 ms", UnitKind::TIME) == doctest::Approx(2e-3));
  }

  TEST_CASE("units: bare numbers, wrong units and junk are refused")
  {
    CHECK_FALSE(parse_quantity("80", UnitKind::BYTES));
    CHECK_FALSE(parse_quantity("80 GB/s", UnitKind::BYTES));
    CHECK_FALSE(parse_quantity("80 gib", UnitKind::BYTES)); // case as written
    CHECK_FALSE(parse_quantity("GiB", UnitKind::BYTES));
    CHECK_FALSE(parse_quantity("5 sec", UnitKind::TIME));
    CHECK_FALSE(parse_quantity("312 TFLOP", UnitKind::COMPUTE));
    CHECK(*parse_quantity("-1 GiB", UnitKind::BYTES) == -1073741824.0); // range is the reader's business
  }

  // A unit refused only for its letter case gets the unit as written in the list; where two units differ only in
  // case (bytes and bits per second), both.
  TEST_CASE("units: a unit in the wrong case is suggested in the right one")
  {
    CHECK(unit_suggestion("200 gbps", UnitKind::BANDWIDTH) == " (did you mean '200 Gbps'?)");
    CHECK(unit_suggestion("200 gb/s", UnitKind::BANDWIDTH) == " (did you mean '200 GB/s' or '200 Gb/s'?)");
    CHECK(unit_suggestion("80 gib", UnitKind::BYTES) == " (did you mean '80 GiB'?)");
    CHECK(unit_suggestion("5 US", UnitKind::TIME) == " (did you mean '5 us'?)");
    CHECK(unit_suggestion("200 furlongs", UnitKind::BANDWIDTH).empty());
    CHECK(unit_suggestion("200", UnitKind::BANDWIDTH).empty()); // a bare number: the unit is missing, not mistyped
    CHECK(unit_suggestion("fast", UnitKind::BANDWIDTH).empty());
  }

  TEST_CASE("units: DeepSpeed element counts as numbers")
  {
    CHECK(*parse_number("5e8") == 5e8);
    CHECK(*parse_number("500000000") == 5e8);
    CHECK(*parse_number("1.5e3") == 1500);
    CHECK_FALSE(parse_number("5e8 elements"));
    CHECK_FALSE(parse_number("auto"));
  }

  TEST_CASE("units: format_quantity picks the largest exact unit and reads back")
  {
    CHECK(format_quantity(80.0 * 1024 * 1024 * 1024, UnitKind::BYTES) == "80 GiB");
    CHECK(format_quantity(2039e9, UnitKind::BANDWIDTH) == "2.039 TB/s"); // the largest unit that reads back exactly
    CHECK(format_quantity(312e12, UnitKind::COMPUTE) == "312 TFLOPS");
    CHECK(format_quantity(0.6e-6, UnitKind::TIME) == "600 ns");
    for (double v : {3.84e12, 25e9, 19.5e12, 5e-6, 123456789.0})
      for (UnitKind k : {UnitKind::BYTES, UnitKind::BANDWIDTH, UnitKind::COMPUTE, UnitKind::TIME})
        CHECK(*parse_quantity(format_quantity(v, k), k) == v);
  }

} // TEST_SUITE
