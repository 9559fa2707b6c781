// The measured runs CSV that `zerosim calibrate` fits against and `zerosim compare` reads: one measured figure per
// row (a scenario, which figure, its value, its definition, its source). Format: docs/calibration-inputs.md. An input
// file of two commands, so its reader is config's, below both. Also the strict CSV table reading that the
// calibration's other CSV readers share (calibration/gemm_timings.hpp, calibration/nccl_tests.hpp use it).
// No YAML, no SimGrid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerosim::config {

/// The figure a measured run reports; the names are the CSV spellings and the keys of `zerosim run --json`.
enum class MeasuredFigure { STEP_TIME_S, TOKENS_PER_S, SAMPLES_PER_S, TFLOPS_PER_GPU, MFU, PEAK_MEMORY_BYTES };

/// Which of several definitions of one figure was measured: MODEL or HARDWARE FLOPs for TFLOPS_PER_GPU;
/// ALLOCATED (torch max allocated), RESERVED (torch max reserved) or DEVICE (nvidia-smi used) for
/// PEAK_MEMORY_BYTES; NONE for every other figure.
enum class FigureDefinition { NONE, MODEL, HARDWARE, ALLOCATED, RESERVED, DEVICE };

/// "step_time_s", "tokens_per_s", "samples_per_s", "tflops_per_gpu", "mfu", "peak_memory_bytes".
std::string to_string(MeasuredFigure figure);
/// "" for NONE, else "model", "hardware", "allocated", "reserved", "device".
std::string to_string(FigureDefinition definition);

/// The figure spelled `text` exactly (case-sensitive), or nullopt.
std::optional<MeasuredFigure> parse_measured_figure(std::string_view text);
/// The definition spelled `text` exactly: "" gives NONE; nullopt for anything else unknown.
std::optional<FigureDefinition> parse_figure_definition(std::string_view text);

/// Every figure, in declaration order (the order error messages list them in).
const std::vector<MeasuredFigure>& all_measured_figures();
/// The definitions a row of `figure` may carry: {MODEL, HARDWARE}, {ALLOCATED, RESERVED, DEVICE}, or {NONE}.
std::vector<FigureDefinition> accepted_definitions(MeasuredFigure figure);

/// True for the figures that follow from the step time (step time, tokens/s, samples/s, TFLOPs per GPU, MFU);
/// false for the memory figure.
bool is_time(MeasuredFigure figure);

/// The unit of a figure's `measured` value: "s", "tokens/s", "samples/s", "TFLOP/s" (10^12 FLOP/s per GPU),
/// "fraction" (MFU, 0.45 for 45 %), "bytes".
std::string unit_of(MeasuredFigure figure);

/// One row of a measured runs CSV.
struct MeasuredRun {
  std::string scenario_path; ///< the scenario YAML, absolute and lexically normal (checked to exist when read)
  MeasuredFigure figure = MeasuredFigure::STEP_TIME_S;
  double measured = 0; ///< positive and finite, in unit_of(figure)
  FigureDefinition definition = FigureDefinition::NONE;
  std::string source; ///< where the figure comes from, as written (rows are grouped by it)
  std::string file;   ///< the CSV file, as named to the reader
  int line = 0;       ///< 1-based line of the CSV file where the row begins
};

/// The columns of a measured runs CSV, in the order messages list them.
const std::vector<std::string>& measured_run_columns();

/// Reads the measured runs CSV at `csv_path`; scenario paths resolve against the folder of `csv_path`.
/// Throws core::InputError for a file that cannot be read and for every malformed input, the message naming
/// file, line and column: "runs.csv:3: column 'figure': expected one of step_time_s, ..., found 'x'".
std::vector<MeasuredRun> read_measured_runs(const std::string& csv_path);

/// Reads measured runs from `text`; `file` names it in messages and in MeasuredRun::file, scenario paths
/// resolve against `base_dir` (the current directory when empty).
std::vector<MeasuredRun> read_measured_runs_text(std::string_view text, const std::string& file,
                                                 const std::string& base_dir);

/// A CSV input of the calibration readers after its header is checked: RFC 4180 records (core/csv.hpp),
/// the header naming exactly the expected columns in any order, each row as many fields as the header.
struct InputTable {
  std::string file;                                      ///< names the file in messages
  std::vector<std::string> header;                       ///< as written
  std::vector<std::vector<std::string>> rows;            ///< the records after the header
  std::vector<int> lines;                                ///< 1-based line where each row begins
  std::map<std::string, std::size_t, std::less<>> index; ///< column name -> field position

  /// Field `column` of row `row` (the column is one of the expected ones).
  const std::string& field(std::size_t row, std::string_view column) const;
  /// Throws core::InputError "file:line: column 'c': expected <expected>, found '<field>'<note>".
  [[noreturn]] void fail(std::size_t row, std::string_view column, const std::string& expected,
                         const std::string& note = "") const;
};

/// Parses `text` as a CSV input whose header names exactly `columns` (order free). A UTF-8 byte order mark at
/// the start is skipped. Throws core::InputError, naming `file` and the line, for malformed quoting, an empty
/// file, a header with a missing, repeated or unknown column (listing the accepted ones), a row whose field count
/// differs from the header's, and a file with no row after the header (`what` names the rows: "measured runs").
InputTable read_input_table(std::string_view text, const std::string& file, const std::vector<std::string>& columns,
                            const std::string& what);

/// " (did you mean 'x'?)" when `word`, lower-cased, is a likely typo of one of `candidates` (core::did_you_mean),
/// else "".
std::string suggestion_note(std::string_view word, const std::vector<std::string>& candidates);

/// The whole file at `path`; throws core::InputError when it cannot be read.
std::string read_input_file(const std::string& path, const std::string& kind = "a CSV file");

/// `text` as a positive finite double when it is a plain decimal or scientific-notation number (digits with an
/// optional fraction, an optional exponent: "12", "0.5", ".5", "1.5e-3", "2E+9"; no sign, no spaces, no unit);
/// nullopt otherwise, and for zero, an underflow to zero or an overflow.
std::optional<double> parse_positive_number(std::string_view text);

/// `text` as a positive integer when it is digits only ("4096") and fits in 64 bits; nullopt otherwise.
std::optional<std::int64_t> parse_positive_integer(std::string_view text);

} // namespace zerosim::config
