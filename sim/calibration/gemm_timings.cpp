#include "calibration/gemm_timings.hpp"

#include "config/measured_runs.hpp"

namespace zerosim::calibration {

const std::vector<std::string>& gemm_timing_columns()
{
  static const std::vector<std::string> columns = {"m", "n", "k", "dtype", "seconds"};
  return columns;
}

const std::vector<std::string>& gemm_dtypes()
{
  static const std::vector<std::string> dtypes = {"bf16", "fp16", "fp32", "tf32"};
  return dtypes;
}

std::vector<GemmTiming> read_gemm_timings_text(std::string_view text, const std::string& file)
{
  config::InputTable t = config::read_input_table(text, file, gemm_timing_columns(), "GEMM timings");
  std::vector<GemmTiming> timings;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    GemmTiming g;
    g.line = t.lines[r];
    for (auto [column, out] : {std::pair{"m", &g.m}, std::pair{"n", &g.n}, std::pair{"k", &g.k}}) {
      auto v = config::parse_positive_integer(t.field(r, column));
      if (!v)
        t.fail(r, column, "a positive integer (digits only, at most 9223372036854775807)");
      *out = *v;
    }

    const std::string& dtype = t.field(r, "dtype");
    bool known = false;
    for (const auto& d : gemm_dtypes())
      known = known || d == dtype;
    if (!known)
      t.fail(r, "dtype", "one of bf16, fp16, fp32, tf32", config::suggestion_note(dtype, gemm_dtypes()));
    g.dtype = dtype;

    auto s = config::parse_positive_number(t.field(r, "seconds"));
    if (!s)
      t.fail(r, "seconds",
             "a positive finite number of seconds (plain decimal or scientific notation, no sign, "
             "no unit, no spaces)");
    g.seconds = *s;
    timings.push_back(std::move(g));
  }
  return timings;
}

std::vector<GemmTiming> read_gemm_timings(const std::string& path)
{
  return read_gemm_timings_text(config::read_input_file(path), path);
}

double achieved_flops(const GemmTiming& timing)
{
  return 2.0 * static_cast<double>(timing.m) * static_cast<double>(timing.n) * static_cast<double>(timing.k) /
         timing.seconds;
}

} // namespace zerosim::calibration
