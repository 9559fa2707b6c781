#include "calibration/gemm_timings.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace zerosim::calibration;

namespace {

const std::string BASE = ZEROSIM_SOURCE_DIR "/tests/data/calibration";
const std::string HEADER = "m,n,k,dtype,seconds\n";

/// The message of the core::InputError that reading `text` as gemm.csv throws, or "no error".
std::string error_of(const std::string& text)
{
  try {
    read_gemm_timings_text(text, "gemm.csv");
  } catch (const zerosim::core::InputError& e) {
    return e.what();
  }
  return "no error";
}

/// The error for one data row (on line 2) under the standard header.
std::string row_error(const std::string& row)
{
  return error_of(HEADER + row + "\n");
}

} // namespace

TEST_SUITE("calibration")
{
  TEST_CASE("gemm timings: every dtype, integer sizes and both number notations are accepted")
  {
    auto t = read_gemm_timings_text(HEADER + "4096,4096,4096,bf16,0.000512\n"
                                             "1,2,3,fp16,1e-6\n"
                                             "8192,1024,4096,fp32,3.2E-3\n"
                                             "00016,9223372036854775807,1,tf32,.5\n",
                                    "gemm.csv");
    REQUIRE(t.size() == 4);
    CHECK(t[0].m == 4096);
    CHECK(t[0].n == 4096);
    CHECK(t[0].k == 4096);
    CHECK(t[0].dtype == "bf16");
    CHECK(t[0].seconds == 0.000512);
    CHECK(t[0].line == 2);
    CHECK(t[1].dtype == "fp16");
    CHECK(t[1].m == 1);
    CHECK(t[1].n == 2);
    CHECK(t[1].k == 3);
    CHECK(t[1].seconds == 1e-6);
    CHECK(t[2].dtype == "fp32");
    CHECK(t[2].seconds == 3.2e-3);
    CHECK(t[3].dtype == "tf32");
    CHECK(t[3].m == 16);
    CHECK(t[3].n == INT64_MAX);
    CHECK(t[3].seconds == 0.5);
    CHECK(t[3].line == 5);
    CHECK(gemm_dtypes() == std::vector<std::string>{"bf16", "fp16", "fp32", "tf32"});
    CHECK(gemm_timing_columns() == std::vector<std::string>{"m", "n", "k", "dtype", "seconds"});
  }

  TEST_CASE("gemm timings: column order is free, quoted fields, CRLF and blank lines")
  {
    auto t = read_gemm_timings_text("\xEF\xBB\xBF"
                                    "dtype,seconds,k,n,m\r\n"
                                    "\r\n"
                                    "\"bf16\",\"2e-3\",\"64\",32,16\r\n",
                                    "gemm.csv");
    REQUIRE(t.size() == 1);
    CHECK(t[0].m == 16);
    CHECK(t[0].n == 32);
    CHECK(t[0].k == 64);
    CHECK(t[0].seconds == 2e-3);
    CHECK(t[0].line == 3);
  }

  TEST_CASE("gemm timings: a file reads and achieved FLOP/s is 2 m n k over seconds")
  {
    auto t = read_gemm_timings(BASE + "/gemm.csv");
    REQUIRE(t.size() == 2);
    CHECK(t[0].m == 4096);
    CHECK(t[1].dtype == "fp32");
    CHECK(t[1].line == 3);
    CHECK(achieved_flops(t[0]) == doctest::Approx(2.0 * 4096.0 * 4096.0 * 4096.0 / 0.000512));
    CHECK(achieved_flops(t[0]) == doctest::Approx(268.435456e12));
    GemmTiming big{1 << 20, 1 << 20, 1 << 20, "bf16", 1.0, 0}; // 2^61 FLOPs: no integer overflow
    CHECK(achieved_flops(big) == doctest::Approx(2.0 * 1099511627776.0 * 1048576.0));
  }

  TEST_CASE("gemm timings: an empty file, a header alone and bad columns are errors")
  {
    CHECK(error_of("") == "gemm.csv: empty file (expected a header record with the columns m, n, k, dtype, seconds)");
    CHECK(error_of(HEADER) == "gemm.csv: no GEMM timings (the file holds only the header record)");
    CHECK(error_of("m,n,k,seconds\n1,1,1,1\n") ==
          "gemm.csv:1: missing column 'dtype'; the header must name m, n, k, dtype, seconds (in any order)");
    CHECK(error_of("m,n,k,k,dtype,seconds\n") == "gemm.csv:1: column 'k' appears twice in the header");
    CHECK(error_of("m,n,k,dtype,seconds,gpu,time\n") ==
          "gemm.csv:1: unknown columns 'gpu', 'time'; the accepted columns are m, n, k, dtype, seconds");
    CHECK(error_of("m,n,k,dtype,second\n") ==
          "gemm.csv:1: unknown column 'second' (did you mean 'seconds'?); the accepted columns are m, n, k, dtype, "
          "seconds");
    CHECK(row_error("1,1,1,bf16") == "gemm.csv:2: the record has 4 fields, the header has 5");
    CHECK(row_error("1,1,1,bf16,\"1") == "gemm.csv:2: quoted field is never closed");
  }

  TEST_CASE("gemm timings: sizes must be positive integers")
  {
    for (const char* column : {"m", "n", "k"}) {
      for (const char* bad : {"0", "-1", "+4", "1.5", "4e3", "4096 ", "", "x", "9223372036854775808", "0x10"}) {
        CAPTURE(column);
        CAPTURE(bad);
        std::string m = column == std::string("m") ? bad : "8";
        std::string n = column == std::string("n") ? bad : "8";
        std::string k = column == std::string("k") ? bad : "8";
        CHECK(row_error(m + "," + n + "," + k + ",bf16,1") ==
              std::string("gemm.csv:2: column '") + column +
                  "': expected a positive integer (digits only, at most 9223372036854775807), found '" + bad + "'");
      }
    }
  }

  TEST_CASE("gemm timings: the dtype must be one of bf16, fp16, fp32, tf32")
  {
    CHECK(row_error("8,8,8,int8,1") ==
          "gemm.csv:2: column 'dtype': expected one of bf16, fp16, fp32, tf32, found 'int8'");
    CHECK(row_error("8,8,8,BF16,1") ==
          "gemm.csv:2: column 'dtype': expected one of bf16, fp16, fp32, tf32, found 'BF16' (did you mean 'bf16'?)");
    CHECK(row_error("8,8,8,,1") == "gemm.csv:2: column 'dtype': expected one of bf16, fp16, fp32, tf32, found ''");
  }

  TEST_CASE("gemm timings: seconds must be a positive finite number without a unit")
  {
    for (const char* bad : {"0", "-1e-3", "1 ms", "1e-3s", "", "inf", "nan", "1e999", "1e-999", " 1"}) {
      CAPTURE(bad);
      CHECK(row_error(std::string("8,8,8,fp16,") + bad) ==
            std::string("gemm.csv:2: column 'seconds': expected a positive finite number of seconds (plain decimal or "
                        "scientific notation, no sign, no unit, no spaces), found '") +
                bad + "'");
    }
    CHECK(error_of(HEADER + "8,8,8,fp16,1\n\n8,8,8,fp16,0\n") ==
          "gemm.csv:4: column 'seconds': expected a positive finite number of seconds (plain decimal or scientific "
          "notation, no sign, no unit, no spaces), found '0'");
  }

  TEST_CASE("gemm timings: a file that cannot be read is an error")
  {
    CHECK_THROWS_WITH_AS(read_gemm_timings(BASE + "/no-such-file.csv"),
                         (BASE + "/no-such-file.csv: cannot open the file").c_str(), zerosim::core::InputError);
  }
}
