#include "config/measured_runs.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

using namespace zerosim::config;

namespace {

/// The fixtures folder; the measured runs given as text read as if they were in DATA/calibration.
const std::string DATA = ZEROSIM_SOURCE_DIR "/tests/data";
const std::string BASE = DATA + "/calibration";
const std::string HEADER = "scenario,figure,measured,definition,source\n";
const std::string SCEN = "../scenarios/by-name.yaml";

/// `p` as the reader resolves paths: lexically normal.
std::string normal(const std::string& p)
{
  return std::filesystem::path(p).lexically_normal().string();
}

std::vector<MeasuredRun> read(const std::string& text)
{
  return read_measured_runs_text(text, "runs.csv", BASE);
}

/// The message of the core::InputError that reading `text` throws, or "no error".
std::string error_of(const std::string& text)
{
  try {
    read(text);
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

/// The single run of one data row under the standard header.
MeasuredRun one(const std::string& row)
{
  auto runs = read(HEADER + row + "\n");
  REQUIRE(runs.size() == 1);
  return runs[0];
}

} // namespace

TEST_SUITE("config")
{
  TEST_CASE("measured runs: figure and definition names read back and carry units")
  {
    for (auto f : all_measured_figures()) {
      REQUIRE(parse_measured_figure(to_string(f)).has_value());
      CHECK(*parse_measured_figure(to_string(f)) == f);
    }
    CHECK(all_measured_figures().size() == 6);
    CHECK(to_string(MeasuredFigure::PEAK_MEMORY_BYTES) == "peak_memory_bytes");
    CHECK_FALSE(parse_measured_figure("Step_Time_S").has_value()); // case-sensitive
    CHECK_FALSE(parse_measured_figure("").has_value());
    for (auto d : {FigureDefinition::NONE, FigureDefinition::MODEL, FigureDefinition::HARDWARE,
                   FigureDefinition::ALLOCATED, FigureDefinition::RESERVED, FigureDefinition::DEVICE})
      CHECK(parse_figure_definition(to_string(d)) == d);
    CHECK(parse_figure_definition("") == FigureDefinition::NONE);
    CHECK_FALSE(parse_figure_definition("Model").has_value());

    CHECK(unit_of(MeasuredFigure::STEP_TIME_S) == "s");
    CHECK(unit_of(MeasuredFigure::TOKENS_PER_S) == "tokens/s");
    CHECK(unit_of(MeasuredFigure::SAMPLES_PER_S) == "samples/s");
    CHECK(unit_of(MeasuredFigure::TFLOPS_PER_GPU) == "TFLOP/s");
    CHECK(unit_of(MeasuredFigure::MFU) == "fraction");
    CHECK(unit_of(MeasuredFigure::PEAK_MEMORY_BYTES) == "bytes");
    for (auto f : all_measured_figures())
      CHECK(is_time(f) == (f != MeasuredFigure::PEAK_MEMORY_BYTES));

    CHECK(accepted_definitions(MeasuredFigure::TFLOPS_PER_GPU) ==
          std::vector<FigureDefinition>{FigureDefinition::MODEL, FigureDefinition::HARDWARE});
    CHECK(accepted_definitions(MeasuredFigure::PEAK_MEMORY_BYTES) ==
          std::vector<FigureDefinition>{FigureDefinition::ALLOCATED, FigureDefinition::RESERVED,
                                        FigureDefinition::DEVICE});
    CHECK(accepted_definitions(MeasuredFigure::MFU) == std::vector<FigureDefinition>{FigureDefinition::NONE});
  }

  TEST_CASE("measured runs: every figure and definition is accepted")
  {
    auto runs = read(HEADER + SCEN + ",step_time_s,12.5,,paper A\n" +     // line 2
                     SCEN + ",tokens_per_s,3100,,paper A\n" +             // line 3
                     SCEN + ",samples_per_s,1.5,,paper A\n" +             // line 4
                     SCEN + ",tflops_per_gpu,145,model,paper B\n" +       // line 5
                     SCEN + ",tflops_per_gpu,160,hardware,paper B\n" +    // line 6
                     SCEN + ",mfu,0.45,,paper B\n" +                      // line 7
                     SCEN + ",mfu,1,,paper B\n" +                         // line 8
                     SCEN + ",peak_memory_bytes,6.4e10,allocated,log\n" + // line 9
                     SCEN + ",peak_memory_bytes,7e10,reserved,log\n" +    // line 10
                     SCEN + ",peak_memory_bytes,8E+10,device,nvidia-smi\n");
    REQUIRE(runs.size() == 10);
    const std::string scenario = normal(DATA + "/scenarios/by-name.yaml");
    for (std::size_t i = 0; i < runs.size(); ++i) {
      CHECK(runs[i].scenario_path == scenario);
      CHECK(runs[i].file == "runs.csv");
      CHECK(runs[i].line == static_cast<int>(i) + 2);
    }
    CHECK(runs[0].figure == MeasuredFigure::STEP_TIME_S);
    CHECK(runs[0].measured == 12.5);
    CHECK(runs[0].definition == FigureDefinition::NONE);
    CHECK(runs[0].source == "paper A");
    CHECK(runs[1].figure == MeasuredFigure::TOKENS_PER_S);
    CHECK(runs[1].measured == 3100);
    CHECK(runs[2].figure == MeasuredFigure::SAMPLES_PER_S);
    CHECK(runs[3].figure == MeasuredFigure::TFLOPS_PER_GPU);
    CHECK(runs[3].definition == FigureDefinition::MODEL);
    CHECK(runs[4].definition == FigureDefinition::HARDWARE);
    CHECK(runs[5].figure == MeasuredFigure::MFU);
    CHECK(runs[5].measured == 0.45);
    CHECK(runs[6].measured == 1.0); // MFU 1 is the bound, still accepted
    CHECK(runs[7].figure == MeasuredFigure::PEAK_MEMORY_BYTES);
    CHECK(runs[7].definition == FigureDefinition::ALLOCATED);
    CHECK(runs[7].measured == 6.4e10);
    CHECK(runs[8].definition == FigureDefinition::RESERVED);
    CHECK(runs[9].definition == FigureDefinition::DEVICE);
    CHECK(runs[9].measured == 8e10);
    CHECK(runs[9].source == "nvidia-smi");
  }

  TEST_CASE("measured runs: plain decimal and scientific notation")
  {
    struct Case {
      const char* text;
      double value;
    };
    for (auto c :
         {Case{"12", 12}, Case{"12.25", 12.25}, Case{"0.5", 0.5}, Case{".5", 0.5}, Case{"5.", 5}, Case{"007", 7},
          Case{"1e3", 1e3}, Case{"1.5E3", 1.5e3}, Case{"2e+9", 2e9}, Case{"3e-1", 0.3}, Case{"1e-300", 1e-300}}) {
      CAPTURE(c.text);
      CHECK(one(SCEN + ",step_time_s," + c.text + ",,src").measured == c.value);
    }
  }

  TEST_CASE("measured runs: column order is free and the CSV may be quoted, CRLF, with a BOM and blank lines")
  {
    auto runs = read_measured_runs_text("\xEF\xBB\xBF"
                                        "source,definition,measured,figure,scenario\r\n"
                                        "\"Smith et al., Table 2\",,0.5,step_time_s,\"" +
                                            SCEN +
                                            "\"\r\n"
                                            "\r\n"
                                            "\"two\nline source, \"\"quoted\"\"\",model,100,tflops_per_gpu," +
                                            SCEN +
                                            "\r\n"
                                            "log,,2,step_time_s," +
                                            SCEN + "\r\n",
                                        "runs.csv", BASE);
    REQUIRE(runs.size() == 3);
    CHECK(runs[0].source == "Smith et al., Table 2");
    CHECK(runs[0].measured == 0.5);
    CHECK(runs[0].line == 2);
    CHECK(runs[1].source == "two\nline source, \"quoted\"");
    CHECK(runs[1].figure == MeasuredFigure::TFLOPS_PER_GPU);
    CHECK(runs[1].line == 4); // after the blank line 3
    CHECK(runs[2].line == 6); // the quoted line break took line 5
    CHECK(runs[2].scenario_path == normal(DATA + "/scenarios/by-name.yaml"));
  }

  TEST_CASE("measured runs: scenario paths resolve against the CSV file's folder or stay absolute")
  {
    // From a file: tests/data/calibration/runs.csv names ../scenarios/by-name.yaml.
    auto runs = read_measured_runs(BASE + "/runs.csv");
    REQUIRE(runs.size() == 3);
    CHECK(runs[0].scenario_path == normal(DATA + "/scenarios/by-name.yaml"));
    CHECK(runs[0].file == BASE + "/runs.csv");
    CHECK(runs[1].definition == FigureDefinition::MODEL);
    CHECK(runs[1].measured == 145);
    CHECK(runs[2].source == "example run B, rank 0");
    CHECK(runs[2].line == 4);

    // An absolute path is kept; a path from another base folder resolves there.
    const std::string absolute = DATA + "/scenarios/by-name.yaml";
    CHECK(one(absolute + ",step_time_s,1,,s").scenario_path == normal(absolute));
    auto from_data =
        read_measured_runs_text(HEADER + "scenarios/../scenarios/by-name.yaml,mfu,0.3,,s\n", "x.csv", DATA);
    REQUIRE(from_data.size() == 1);
    CHECK(from_data[0].scenario_path == normal(absolute));
  }

  TEST_CASE("measured runs: an empty file, a header alone, a ragged record and bad quoting are errors")
  {
    CHECK(error_of("") == "runs.csv: empty file (expected a header record with the columns scenario, figure, "
                          "measured, definition, source)");
    CHECK(error_of("\n\n") == error_of(""));
    CHECK(error_of("\xEF\xBB\xBF") == error_of(""));
    CHECK(error_of(HEADER) == "runs.csv: no measured runs (the file holds only the header record)");
    CHECK(error_of(HEADER + "\n\n") == error_of(HEADER));
    CHECK(row_error(SCEN + ",step_time_s,1,") == "runs.csv:2: the record has 4 fields, the header has 5");
    CHECK(error_of(HEADER + SCEN + ",step_time_s,1,,a\n" + SCEN + ",step_time_s,1,,a,extra\n") ==
          "runs.csv:3: the record has 6 fields, the header has 5");
    CHECK(row_error(SCEN + ",step_time_s,1,,\"never closed") == "runs.csv:2: quoted field is never closed");
    CHECK_THROWS_AS(read(HEADER + SCEN + ",step_time_s,1,,a\"b\n"), zerosim::core::InputError);
  }

  TEST_CASE("measured runs: a missing, repeated or unknown column is an error listing the accepted ones")
  {
    CHECK(error_of("scenario,figure,measured,definition\n" + SCEN + ",mfu,0.4,\n") ==
          "runs.csv:1: missing column 'source'; the header must name scenario, figure, measured, definition, source "
          "(in any order)");
    CHECK(error_of("figure,measured,source\nmfu,0.4,x\n") ==
          "runs.csv:1: missing columns 'scenario', 'definition'; the header must name scenario, figure, measured, "
          "definition, source (in any order)");
    CHECK(error_of("scenario,figure,measured,definition,source,figure\n") ==
          "runs.csv:1: column 'figure' appears twice in the header");
    CHECK(error_of("scenario,figure,measured,definition,source,notes\n" + SCEN + ",mfu,0.4,,x,hello\n") ==
          "runs.csv:1: unknown column 'notes'; the accepted columns are scenario, figure, measured, definition, "
          "source");
    CHECK(error_of("scenario,figures,measured,definition,source,gpu\n") ==
          "runs.csv:1: unknown columns 'figures' (did you mean 'figure'?), 'gpu'; the accepted columns are "
          "scenario, figure, measured, definition, source");
    CHECK(error_of("scenario, figure,measured,definition,source\n") ==
          "runs.csv:1: unknown column ' figure' (did you mean 'figure'?); the accepted columns are scenario, "
          "figure, measured, definition, source");
    CHECK(error_of("\n\n" + HEADER.substr(0, HEADER.size() - 1) + ",x\n") ==
          "runs.csv:3: unknown column 'x'; the accepted columns are scenario, figure, measured, definition, source");
  }

  TEST_CASE("measured runs: a scenario that is empty or names no file is an error with the resolved path")
  {
    CHECK(row_error(",step_time_s,1,,a") == "runs.csv:2: column 'scenario': expected a path to a scenario YAML file, "
                                            "relative to the CSV file's folder, found ''");
    const std::string resolved = normal(DATA + "/scenarios/missing.yaml");
    CHECK(row_error("../scenarios/missing.yaml,step_time_s,1,,a") ==
          "runs.csv:2: column 'scenario': expected a path to an existing scenario file, found "
          "'../scenarios/missing.yaml' (resolved to '" +
              resolved + "', relative to the CSV file's folder '" + normal(BASE) + "')");
    // A folder is not a scenario file.
    std::string folder = row_error("../scenarios,step_time_s,1,,a");
    CHECK(folder.find("runs.csv:2: column 'scenario': expected a path to an existing scenario file, found "
                      "'../scenarios' (resolved to '" +
                      normal(DATA + "/scenarios") + "'") == 0);
    // Resolution is against the given folder: from DATA, ../scenarios is tests/scenarios, which does not exist.
    std::string elsewhere;
    try {
      read_measured_runs_text(HEADER + SCEN + ",mfu,0.4,,a\n", "other.csv", DATA);
    } catch (const zerosim::core::InputError& e) {
      elsewhere = e.what();
    }
    CHECK(elsewhere.find("other.csv:2: column 'scenario': expected a path to an existing scenario file") == 0);
  }

  TEST_CASE("measured runs: an unknown figure is an error naming the accepted ones")
  {
    CHECK(row_error(SCEN + ",x,1,,a") == "runs.csv:2: column 'figure': expected one of step_time_s, tokens_per_s, "
                                         "samples_per_s, tflops_per_gpu, mfu, peak_memory_bytes, found 'x'");
    CHECK(row_error(SCEN + ",step_time,1,,a") ==
          "runs.csv:2: column 'figure': expected one of step_time_s, tokens_per_s, samples_per_s, tflops_per_gpu, "
          "mfu, peak_memory_bytes, found 'step_time' (did you mean 'step_time_s'?)");
    CHECK(row_error(SCEN + ",MFU,0.4,,a").find("found 'MFU'") != std::string::npos);
    CHECK(row_error(SCEN + ",,0.4,,a").find("runs.csv:2: column 'figure': expected one of") == 0);
  }

  TEST_CASE("measured runs: a measured value that is not a positive finite number is an error")
  {
    const std::string expected = "runs.csv:2: column 'measured': expected a positive finite number of s (plain "
                                 "decimal or scientific notation, no sign, no unit, no spaces), found '";
    for (const char* bad :
         {"12 s",   "12s", "1.5ms", "",     " 12", "12 ", "-3", "+5",    "0",   "0.0",   "0e5",   "1e999",
          "1e-999", "nan", "inf",   "0x10", "1e",  "e5",  ".",  "1.2.3", "1,5", "1_000", "twelve"}) {
      CAPTURE(bad);
      std::string field = std::string(bad) == "1,5" ? "\"1,5\"" : bad;
      CHECK(row_error(SCEN + ",step_time_s," + field + ",,a") == expected + bad + "'");
    }
    // The unit in the message is the figure's.
    CHECK(row_error(SCEN + ",peak_memory_bytes,64 GB,allocated,a") ==
          "runs.csv:2: column 'measured': expected a positive finite number of bytes (plain decimal or scientific "
          "notation, no sign, no unit, no spaces), found '64 GB'");
    CHECK(row_error(SCEN + ",tokens_per_s,-1,,a").find("positive finite number of tokens/s") != std::string::npos);
    // MFU is a fraction: 45 (per cent) is an error.
    CHECK(row_error(SCEN + ",mfu,45,,a") ==
          "runs.csv:2: column 'measured': expected an MFU as a fraction in (0, 1] (0.45 for 45 %), found '45'");
    CHECK(row_error(SCEN + ",mfu,1.01,,a").find("found '1.01'") != std::string::npos);
  }

  TEST_CASE("measured runs: a definition must match the figure")
  {
    CHECK(row_error(SCEN + ",tflops_per_gpu,100,,a") ==
          "runs.csv:2: column 'definition': expected model or hardware for figure tflops_per_gpu, found ''");
    CHECK(row_error(SCEN + ",tflops_per_gpu,100,allocated,a") ==
          "runs.csv:2: column 'definition': expected model or hardware for figure tflops_per_gpu, found 'allocated'");
    CHECK(row_error(SCEN + ",tflops_per_gpu,100,hardwre,a") ==
          "runs.csv:2: column 'definition': expected model or hardware for figure tflops_per_gpu, found 'hardwre' "
          "(did you mean 'hardware'?)");
    CHECK(row_error(SCEN + ",peak_memory_bytes,1e9,,a") ==
          "runs.csv:2: column 'definition': expected allocated, reserved or device for figure peak_memory_bytes, "
          "found ''");
    CHECK(row_error(SCEN + ",peak_memory_bytes,1e9,hardware,a") ==
          "runs.csv:2: column 'definition': expected allocated, reserved or device for figure peak_memory_bytes, "
          "found 'hardware'");
    CHECK(row_error(SCEN + ",peak_memory_bytes,1e9,Reserved,a").find("found 'Reserved' (did you mean 'reserved'?)") !=
          std::string::npos);
    for (const char* figure : {"step_time_s", "tokens_per_s", "samples_per_s", "mfu"}) {
      CAPTURE(figure);
      CHECK(row_error(SCEN + "," + figure + ",0.5,model,a") ==
            std::string("runs.csv:2: column 'definition': expected an empty field for figure ") + figure +
                " (only tflops_per_gpu and peak_memory_bytes take a definition), found 'model'");
    }
    CHECK(row_error(SCEN + ",mfu,0.5, ,a").find("expected an empty field for figure mfu") != std::string::npos);
  }

  TEST_CASE("measured runs: the source must name where the figure comes from")
  {
    CHECK(row_error(SCEN + ",mfu,0.5,,") ==
          "runs.csv:2: column 'source': expected non-empty text naming where the figure comes from, found ''");
    CHECK(row_error(SCEN + ",mfu,0.5,,\"  \"") ==
          "runs.csv:2: column 'source': expected non-empty text naming where the figure comes from, found '  '");
    CHECK(one(SCEN + ",mfu,0.5,, padded ").source == " padded "); // kept as written
  }

  TEST_CASE("measured runs: errors name the line of the row, after blank lines and quoted line breaks")
  {
    std::string text = HEADER + "\n" + SCEN + ",mfu,0.5,,\"a\nb\"\n" + SCEN + ",mfu,50,,c\n";
    CHECK(error_of(text) == "runs.csv:5: column 'measured': expected an MFU as a fraction in (0, 1] (0.45 for 45 %), "
                            "found '50'");
  }

  TEST_CASE("measured runs: a file that cannot be read is an error")
  {
    CHECK_THROWS_WITH_AS(read_measured_runs(BASE + "/no-such-file.csv"),
                         (BASE + "/no-such-file.csv: cannot open the file").c_str(), zerosim::core::InputError);
    CHECK_THROWS_WITH_AS(read_measured_runs(BASE), (BASE + ": is a folder, not a CSV file").c_str(),
                         zerosim::core::InputError);
  }

  TEST_CASE("measured runs: number and integer parsing helpers")
  {
    CHECK(parse_positive_number("2.5e-3") == 2.5e-3);
    CHECK_FALSE(parse_positive_number("0").has_value());
    CHECK_FALSE(parse_positive_number("1e400").has_value());
    CHECK(parse_positive_integer("4096") == 4096);
    CHECK(parse_positive_integer("9223372036854775807") == INT64_MAX);
    CHECK_FALSE(parse_positive_integer("9223372036854775808").has_value());
    CHECK_FALSE(parse_positive_integer("0").has_value());
    CHECK_FALSE(parse_positive_integer("-1").has_value());
    CHECK_FALSE(parse_positive_integer("1e3").has_value());
    CHECK_FALSE(parse_positive_integer("").has_value());
  }
}
