#include "config/measured_runs.hpp"

#include "core/csv.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace zerosim::config {

namespace {

/// "a, b, c" (the accepted values of a message).
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ")
{
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      out += separator;
    out += items[i];
  }
  return out;
}

/// The 1-based line where each non-empty record of `text` begins, by the same rules as core::parse_csv
/// (a quoted field may span lines; empty lines are no record). Called after parse_csv accepted `text`.
std::vector<int> record_lines(std::string_view text)
{
  std::vector<int> lines;
  bool in_quotes = false;
  bool record_open = false;
  int line = 1;
  auto open = [&]() {
    if (!record_open)
      lines.push_back(line);
    record_open = true;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"')
          ++i;
        else
          in_quotes = false;
      } else if (c == '\n') {
        ++line;
      }
      continue;
    }
    if (c == '\n') {
      record_open = false;
      ++line;
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      // CRLF: the LF ends the record
    } else {
      if (c == '"')
        in_quotes = true;
      open();
    }
  }
  return lines;
}

std::string quoted_list(const std::vector<std::string>& names)
{
  std::vector<std::string> q;
  for (const auto& n : names)
    q.push_back("'" + n + "'");
  return join(q);
}

std::vector<std::string> figure_names()
{
  std::vector<std::string> names;
  for (auto f : all_measured_figures())
    names.push_back(to_string(f));
  return names;
}

/// "model or hardware", "allocated, reserved or device".
std::string alternatives(const std::vector<FigureDefinition>& defs)
{
  std::string out;
  for (std::size_t i = 0; i < defs.size(); ++i) {
    if (i > 0)
      out += i + 1 == defs.size() ? " or " : ", ";
    out += to_string(defs[i]);
  }
  return out;
}

} // namespace

std::string to_string(MeasuredFigure figure)
{
  switch (figure) {
  case MeasuredFigure::STEP_TIME_S:
    return "step_time_s";
  case MeasuredFigure::TOKENS_PER_S:
    return "tokens_per_s";
  case MeasuredFigure::SAMPLES_PER_S:
    return "samples_per_s";
  case MeasuredFigure::TFLOPS_PER_GPU:
    return "tflops_per_gpu";
  case MeasuredFigure::MFU:
    return "mfu";
  case MeasuredFigure::PEAK_MEMORY_BYTES:
    return "peak_memory_bytes";
  }
  throw core::InternalError("to_string: unknown MeasuredFigure");
}

std::string to_string(FigureDefinition definition)
{
  switch (definition) {
  case FigureDefinition::NONE:
    return "";
  case FigureDefinition::MODEL:
    return "model";
  case FigureDefinition::HARDWARE:
    return "hardware";
  case FigureDefinition::ALLOCATED:
    return "allocated";
  case FigureDefinition::RESERVED:
    return "reserved";
  case FigureDefinition::DEVICE:
    return "device";
  }
  throw core::InternalError("to_string: unknown FigureDefinition");
}

const std::vector<MeasuredFigure>& all_measured_figures()
{
  static const std::vector<MeasuredFigure> all = {MeasuredFigure::STEP_TIME_S,   MeasuredFigure::TOKENS_PER_S,
                                                  MeasuredFigure::SAMPLES_PER_S, MeasuredFigure::TFLOPS_PER_GPU,
                                                  MeasuredFigure::MFU,           MeasuredFigure::PEAK_MEMORY_BYTES};
  return all;
}

std::optional<MeasuredFigure> parse_measured_figure(std::string_view text)
{
  for (auto f : all_measured_figures())
    if (text == to_string(f))
      return f;
  return std::nullopt;
}

std::optional<FigureDefinition> parse_figure_definition(std::string_view text)
{
  for (auto d : {FigureDefinition::NONE, FigureDefinition::MODEL, FigureDefinition::HARDWARE,
                 FigureDefinition::ALLOCATED, FigureDefinition::RESERVED, FigureDefinition::DEVICE})
    if (text == to_string(d))
      return d;
  return std::nullopt;
}

std::vector<FigureDefinition> accepted_definitions(MeasuredFigure figure)
{
  switch (figure) {
  case MeasuredFigure::TFLOPS_PER_GPU:
    return {FigureDefinition::MODEL, FigureDefinition::HARDWARE};
  case MeasuredFigure::PEAK_MEMORY_BYTES:
    return {FigureDefinition::ALLOCATED, FigureDefinition::RESERVED, FigureDefinition::DEVICE};
  default:
    return {FigureDefinition::NONE};
  }
}

bool is_time(MeasuredFigure figure)
{
  return figure != MeasuredFigure::PEAK_MEMORY_BYTES;
}

std::string unit_of(MeasuredFigure figure)
{
  switch (figure) {
  case MeasuredFigure::STEP_TIME_S:
    return "s";
  case MeasuredFigure::TOKENS_PER_S:
    return "tokens/s";
  case MeasuredFigure::SAMPLES_PER_S:
    return "samples/s";
  case MeasuredFigure::TFLOPS_PER_GPU:
    return "TFLOP/s";
  case MeasuredFigure::MFU:
    return "fraction";
  case MeasuredFigure::PEAK_MEMORY_BYTES:
    return "bytes";
  }
  throw core::InternalError("unit_of: unknown MeasuredFigure");
}

const std::vector<std::string>& measured_run_columns()
{
  static const std::vector<std::string> columns = {"scenario", "figure", "measured", "definition", "source"};
  return columns;
}

// ---- the shared table reading

const std::string& InputTable::field(std::size_t row, std::string_view column) const
{
  auto it = index.find(column);
  if (it == index.end())
    throw core::InternalError("InputTable::field: no column '" + std::string(column) + "'");
  return rows.at(row).at(it->second);
}

void InputTable::fail(std::size_t row, std::string_view column, const std::string& expected,
                      const std::string& note) const
{
  throw core::InputError(file + ":" + std::to_string(lines.at(row)) + ": column '" + std::string(column) +
                         "': expected " + expected + ", found '" + field(row, column) + "'" + note);
}

InputTable read_input_table(std::string_view text, const std::string& file, const std::vector<std::string>& columns,
                            const std::string& what)
{
  if (text.substr(0, 3) == "\xEF\xBB\xBF") // a UTF-8 byte order mark (spreadsheets write one)
    text.remove_prefix(3);
  auto records = core::parse_csv(text, file);
  auto lines = record_lines(text);
  if (lines.size() != records.size())
    throw core::InternalError(file + ": record lines disagree with the CSV reader");
  std::string accepted = join(columns);
  if (records.empty())
    throw core::InputError(file + ": empty file (expected a header record with the columns " + accepted + ")");

  InputTable t;
  t.file = file;
  t.header = std::move(records.front());
  std::string at_header = file + ":" + std::to_string(lines.front()) + ": ";
  for (std::size_t c = 0; c < t.header.size(); ++c) {
    if (!t.index.emplace(t.header[c], c).second)
      throw core::InputError(at_header + "column '" + t.header[c] + "' appears twice in the header");
  }
  std::vector<std::string> unknown; // each quoted, with its did-you-mean
  for (const auto& name : t.header) {
    bool known = false;
    for (const auto& c : columns)
      known = known || c == name;
    if (!known)
      unknown.push_back("'" + name + "'" + suggestion_note(name, columns));
  }
  if (!unknown.empty())
    throw core::InputError(at_header + (unknown.size() == 1 ? "unknown column " : "unknown columns ") + join(unknown) +
                           "; the accepted columns are " + accepted);
  std::vector<std::string> missing;
  for (const auto& c : columns)
    if (!t.index.count(c))
      missing.push_back(c);
  if (!missing.empty())
    throw core::InputError(at_header + (missing.size() == 1 ? "missing column " : "missing columns ") +
                           quoted_list(missing) + "; the header must name " + accepted + " (in any order)");

  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != t.header.size())
      throw core::InputError(file + ":" + std::to_string(lines[r]) + ": the record has " +
                             std::to_string(records[r].size()) + " fields, the header has " +
                             std::to_string(t.header.size()));
    t.rows.push_back(std::move(records[r]));
    t.lines.push_back(lines[r]);
  }
  if (t.rows.empty())
    throw core::InputError(file + ": no " + what + " (the file holds only the header record)");
  return t;
}

std::string suggestion_note(std::string_view word, const std::vector<std::string>& candidates)
{
  std::string lower(word);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  std::string best = core::did_you_mean(lower, candidates);
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

std::string read_input_file(const std::string& path, const std::string& kind)
{
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw core::InputError(path + ": is a folder, not " + kind);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw core::InputError(path + ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw core::InputError(path + ": cannot read the file");
  return text.str();
}

std::optional<double> parse_positive_number(std::string_view text)
{
  // Grammar: digits [ "." digits* ] | "." digits, then optionally [eE] [+-] digits.
  std::size_t i = 0;
  auto digits = [&]() {
    std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
      ++i;
    return i - start;
  };
  std::size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0)
    return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-'))
      ++i;
    if (digits() == 0)
      return std::nullopt;
  }
  if (i != text.size())
    return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::general);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || !(v > 0))
    return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_positive_integer(std::string_view text)
{
  if (text.empty())
    return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9')
      return std::nullopt;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0)
    return std::nullopt;
  return v;
}

// ---- measured runs

std::vector<MeasuredRun> read_measured_runs_text(std::string_view text, const std::string& file,
                                                 const std::string& base_dir)
{
  namespace fs = std::filesystem;
  InputTable t = read_input_table(text, file, measured_run_columns(), "measured runs");
  fs::path base = fs::absolute(base_dir.empty() ? fs::path(".") : fs::path(base_dir));
  std::vector<std::string> figures = figure_names();

  std::vector<MeasuredRun> runs;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    MeasuredRun run;
    run.file = file;
    run.line = t.lines[r];

    const std::string& scenario = t.field(r, "scenario");
    if (scenario.empty())
      t.fail(r, "scenario", "a path to a scenario YAML file, relative to the CSV file's folder");
    fs::path resolved = (base / fs::path(scenario)).lexically_normal();
    run.scenario_path = resolved.string();
    std::error_code ec;
    if (!fs::is_regular_file(resolved, ec))
      t.fail(r, "scenario", "a path to an existing scenario file",
             " (resolved to '" + run.scenario_path + "', relative to the CSV file's folder '" +
                 base.lexically_normal().string() + "')");

    const std::string& figure = t.field(r, "figure");
    auto f = parse_measured_figure(figure);
    if (!f)
      t.fail(r, "figure", "one of " + join(figures), suggestion_note(figure, figures));
    run.figure = *f;

    auto v = parse_positive_number(t.field(r, "measured"));
    if (!v)
      t.fail(r, "measured",
             "a positive finite number of " + unit_of(run.figure) +
                 " (plain decimal or scientific notation, no sign, no unit, no spaces)");
    if (run.figure == MeasuredFigure::MFU && *v > 1)
      t.fail(r, "measured", "an MFU as a fraction in (0, 1] (0.45 for 45 %)");
    run.measured = *v;

    const std::string& definition = t.field(r, "definition");
    auto accepted = accepted_definitions(run.figure);
    auto d = parse_figure_definition(definition);
    bool ok = false;
    for (auto a : accepted)
      ok = ok || (d && *d == a);
    if (!ok) {
      if (accepted.front() == FigureDefinition::NONE)
        t.fail(r, "definition",
               "an empty field for figure " + to_string(run.figure) +
                   " (only tflops_per_gpu and peak_memory_bytes take a definition)");
      std::vector<std::string> names;
      for (auto a : accepted)
        names.push_back(to_string(a));
      t.fail(r, "definition", alternatives(accepted) + " for figure " + to_string(run.figure),
             definition.empty() ? std::string() : suggestion_note(definition, names));
    }
    run.definition = *d;

    const std::string& source = t.field(r, "source");
    if (source.find_first_not_of(" \t\r\n") == std::string::npos)
      t.fail(r, "source", "non-empty text naming where the figure comes from");
    run.source = source;

    runs.push_back(std::move(run));
  }
  return runs;
}

std::vector<MeasuredRun> read_measured_runs(const std::string& csv_path)
{
  std::string text = read_input_file(csv_path);
  std::string folder = std::filesystem::path(csv_path).parent_path().string();
  return read_measured_runs_text(text, csv_path, folder);
}

} // namespace zerosim::config
