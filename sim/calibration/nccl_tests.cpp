#include "calibration/nccl_tests.hpp"

#include "calibration/nccl_text.hpp"
#include "config/measured_runs.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

namespace zerosim::calibration {
namespace {

struct CollectiveName {
  NcclCollective collective;
  const char* name;
};

constexpr CollectiveName COLLECTIVE_NAMES[] = {{NcclCollective::ALL_REDUCE, "all_reduce"},
                                               {NcclCollective::ALL_GATHER, "all_gather"},
                                               {NcclCollective::REDUCE_SCATTER, "reduce_scatter"},
                                               {NcclCollective::BROADCAST, "broadcast"},
                                               {NcclCollective::REDUCE, "reduce"},
                                               {NcclCollective::ALL_TO_ALL, "alltoall"},
                                               {NcclCollective::SEND_RECV, "sendrecv"}};

/// nccl-tests binaries this reader does not model (src/gather.cu, scatter.cu, hypercube.cu, alltoallv.cu).
constexpr const char* UNSUPPORTED_BINARIES[] = {"gather", "scatter", "hypercube", "alltoallv"};

/// Slack for comparisons of printed numbers, on top of the printed digits' rounding.
constexpr double SLACK = 1e-9;

[[noreturn]] void fail(const std::string& file, int line, const std::string& what, const std::string& expected,
                       const std::string& found)
{
  throw core::InputError(file + ":" + std::to_string(line) + ": " + what + ": expected " + expected + ", found " +
                         found);
}

using namespace nccl_text;

/// A number as printed: its value, half its last place, and its text.
struct Printed {
  double value = 0;
  double half = 0;
  std::string text;
};

/// One block of measurements (out-of-place or in-place) of a row.
struct Measured {
  Printed time, algbw, busbw;
  std::optional<double> wrong;
};

struct ParsedRow {
  NcclTestsRow row;
  Measured oop;
  std::optional<Measured> ip;
};

enum class Field { SIZE, COUNT, TYPE, REDOP, ROOT, TIME, ALGBW, BUSBW, WRONG, STAT, DATE, CLOCK };

struct Column {
  Field field;
  std::string name; ///< for messages: "size", "out-of-place busbw", ...
  int block = 0;    ///< 0 out-of-place, 1 in-place
};

/// The column layout of a table, from its header line.
struct Columns {
  bool redop = false;
  bool root = false;
  int blocks = 0;
  bool cputime = false;
  std::vector<Column> fields;

  std::string names() const
  {
    std::string out;
    for (const Column& c : fields)
      out += (out.empty() ? "" : ", ") + c.name;
    return out;
  }
};

const char* block_name(int block)
{
  return block == 0 ? "out-of-place" : "in-place";
}

/// Parses the column header "size count type [redop] [root] (time|cputime algbw busbw (#wrong|error) [i_min i_max
/// i_p99 i_cv%]){1,2} [timestamp]" (nccl-tests src/util.cu writeResultHeader; before nccl-tests 2.13 each test
/// printed its own header, without redop for all_gather and sendrecv and without root for most tests).
Columns parse_columns(const std::vector<std::string_view>& words, const std::string& file, int line)
{
  Columns cols;
  cols.fields = {{Field::SIZE, "size"}, {Field::COUNT, "count"}, {Field::TYPE, "type"}};
  std::size_t i = 3;
  if (i < words.size() && words[i] == "redop") {
    cols.redop = true;
    cols.fields.push_back({Field::REDOP, "redop"});
    ++i;
  }
  if (i < words.size() && words[i] == "root") {
    cols.root = true;
    cols.fields.push_back({Field::ROOT, "root"});
    ++i;
  }
  std::string time_label;
  while (i < words.size() && (words[i] == "time" || words[i] == "cputime")) {
    if (cols.blocks == 2)
      fail(file, line, "column header", "two blocks of columns (out-of-place, in-place)", "a third 'time' column");
    if (!time_label.empty() && words[i] != time_label)
      fail(file, line, "column header", "'" + time_label + "' in both blocks", in_quotes(words[i]));
    time_label = std::string(words[i]);
    int block = cols.blocks++;
    std::string prefix = std::string(block_name(block)) + " ";
    cols.fields.push_back({Field::TIME, prefix + time_label, block});
    ++i;
    const std::pair<const char*, Field> rest[] = {{"algbw", Field::ALGBW}, {"busbw", Field::BUSBW}};
    for (const auto& [name, field] : rest) {
      if (i >= words.size() || words[i] != name)
        fail(file, line, "column header", std::string("'") + name + "' after '" + std::string(words[i - 1]) + "'",
             i < words.size() ? in_quotes(words[i]) : "the end of the line");
      cols.fields.push_back({field, prefix + name, block});
      ++i;
    }
    if (i >= words.size() || (words[i] != "#wrong" && words[i] != "error"))
      fail(file, line, "column header", "'#wrong' (or 'error' before nccl-tests 2.13) after 'busbw'",
           i < words.size() ? in_quotes(words[i]) : "the end of the line");
    cols.fields.push_back({Field::WRONG, prefix + std::string(words[i]), block});
    ++i;
    if (i < words.size() && words[i] == "i_min") {
      for (const char* name : {"i_min", "i_max", "i_p99", "i_cv%"}) {
        if (i >= words.size() || words[i] != name)
          fail(file, line, "column header", std::string("the per-iteration column '") + name + "'",
               i < words.size() ? in_quotes(words[i]) : "the end of the line");
        cols.fields.push_back({Field::STAT, prefix + name, block});
        ++i;
      }
    }
  }
  if (cols.blocks == 0)
    fail(file, line, "column header", "'time' or 'cputime' after size, count, type[, redop][, root]",
         i < words.size() ? in_quotes(words[i]) : "the end of the line");
  cols.cputime = time_label == "cputime";
  if (i < words.size() && words[i] == "timestamp") {
    cols.fields.push_back({Field::DATE, "timestamp (date)", 1});
    cols.fields.push_back({Field::CLOCK, "timestamp (time)", 1});
    ++i;
  }
  if (i < words.size())
    fail(file, line, "column header", "no column after '" + std::string(words[i - 1]) + "'", in_quotes(words[i]));
  return cols;
}

/// A line inside the table that does not start with a digit but holds as many numbers as half a row's numeric
/// fields: a damaged data row, reported rather than skipped. Other lines there (NCCL INFO, MPI and UCX messages)
/// are skipped.
bool looks_like_row(std::string_view line, const Columns& cols)
{
  std::size_t numeric_fields = 0;
  for (const Column& c : cols.fields)
    numeric_fields +=
        c.field != Field::TYPE && c.field != Field::REDOP && c.field != Field::DATE && c.field != Field::CLOCK;
  std::size_t numbers = 0;
  for (std::string_view w : split_words(line))
    numbers += w == "N/A" || to_number(w).has_value();
  return numbers >= std::max<std::size_t>(4, numeric_fields / 2 + 1);
}

bool matches_pattern(std::string_view word, std::string_view pattern)
{
  if (word.size() != pattern.size())
    return false;
  for (std::size_t i = 0; i < word.size(); ++i)
    if (pattern[i] == 'd' ? !is_digit(word[i]) : word[i] != pattern[i])
      return false;
  return true;
}

ParsedRow parse_row(const std::vector<std::string_view>& words, const Columns& cols, const std::string& file, int line)
{
  if (words.size() != cols.fields.size())
    fail(file, line, "data row", std::to_string(cols.fields.size()) + " fields (" + cols.names() + ")",
         std::to_string(words.size()) + " fields");
  ParsedRow parsed;
  NcclTestsRow& row = parsed.row;
  row.line = line;
  Measured blocks[2];
  for (std::size_t i = 0; i < words.size(); ++i) {
    const Column& col = cols.fields[i];
    std::string_view w = words[i];
    std::string what = "column '" + col.name + "'";
    Measured& m = blocks[col.block];
    auto non_negative = [&](const std::string& expected) {
      std::optional<double> v = to_number(w);
      if (!v || *v < 0)
        fail(file, line, what, expected, in_quotes(w));
      return Printed{*v, half_ulp(w), std::string(w)};
    };
    switch (col.field) {
    case Field::SIZE:
    case Field::COUNT: {
      std::optional<std::int64_t> v = to_integer(w);
      if (!v || *v < 0)
        fail(file, line, what, col.field == Field::SIZE ? "a whole number of bytes" : "a whole number of elements",
             in_quotes(w));
      (col.field == Field::SIZE ? row.size_bytes : row.count) = *v;
      break;
    }
    case Field::TYPE:
      row.type = std::string(w);
      break;
    case Field::REDOP:
      row.redop = std::string(w);
      break;
    case Field::ROOT: {
      std::optional<std::int64_t> v = to_integer(w);
      if (!v || *v < -1 || *v > 1 << 30)
        fail(file, line, what, "a rank (-1 for none)", in_quotes(w));
      row.root = static_cast<int>(*v);
      break;
    }
    case Field::TIME:
      m.time = non_negative("a time in microseconds");
      break;
    case Field::ALGBW:
      m.algbw = non_negative("a bandwidth in GB/s");
      break;
    case Field::BUSBW:
      m.busbw = non_negative("a bandwidth in GB/s");
      break;
    case Field::WRONG:
      if (w == "N/A")
        m.wrong = std::nullopt;
      else
        m.wrong = non_negative("a number of wrong elements or N/A").value;
      break;
    case Field::STAT:
      if (!to_number(w))
        fail(file, line, what, "a number", in_quotes(w));
      break;
    case Field::DATE:
      if (!matches_pattern(w, "dddd-dd-dd"))
        fail(file, line, what, "a date YYYY-MM-DD", in_quotes(w));
      break;
    case Field::CLOCK:
      if (!matches_pattern(w, "dd:dd:dd"))
        fail(file, line, what, "a time of day HH:MM:SS", in_quotes(w));
      break;
    }
  }
  parsed.oop = blocks[0];
  row.oop_time_us = blocks[0].time.value;
  row.oop_algbw_GBps = blocks[0].algbw.value;
  row.oop_busbw_GBps = blocks[0].busbw.value;
  row.oop_wrong = blocks[0].wrong;
  if (cols.blocks == 2) {
    parsed.ip = blocks[1];
    row.ip_time_us = blocks[1].time.value;
    row.ip_algbw_GBps = blocks[1].algbw.value;
    row.ip_busbw_GBps = blocks[1].busbw.value;
    row.ip_wrong = blocks[1].wrong;
  }
  return parsed;
}

/// "row of size N B, ": the start of messages about one row.
std::string row_label(const NcclTestsRow& row)
{
  return "row of size " + std::to_string(row.size_bytes) + " B, ";
}

/// algbw = size / time (nccl-tests src/*.cu *GetBw: bytes / 1e9 / seconds), to the printed digits of both.
void check_algbw(const ParsedRow& parsed, const Measured& m, int block, const std::string& file)
{
  const NcclTestsRow& row = parsed.row;
  double size = static_cast<double>(row.size_bytes);
  double t_low = m.time.value - m.time.half, t_high = m.time.value + m.time.half;
  double low = size / (t_high * 1e3);
  double high = t_low > 0 ? size / (t_low * 1e3) : HUGE_VAL;
  double a_low = m.algbw.value - m.algbw.half, a_high = m.algbw.value + m.algbw.half;
  double slack = SLACK * std::max(1.0, m.algbw.value);
  if (a_high + slack < low || a_low - slack > high)
    fail(file, row.line, row_label(row) + std::string(block_name(block)) + " algbw",
         "size / time = " + std::to_string(row.size_bytes) + " B / " + m.time.text +
             " us = " + printed_like(size / (m.time.value * 1e3), m.algbw.text) + " GB/s (to the printed digits)",
         in_quotes(m.algbw.text));
}

const char* factor_formula(NcclCollective c)
{
  switch (c) {
  case NcclCollective::ALL_REDUCE:
    return "2(n-1)/n";
  case NcclCollective::ALL_GATHER:
  case NcclCollective::REDUCE_SCATTER:
  case NcclCollective::ALL_TO_ALL:
    return "(n-1)/n";
  default:
    return "1";
  }
}

/// A row (or column value) that contradicts a collective.
struct Problem {
  std::string what, expected, found;
};

/// Whether the redop and root values of `row` fit collective `c` (nccl-tests' *RunTest functions: all_gather,
/// alltoall and broadcast print redop "none" since nccl-tests 2.13, and no redop column before; broadcast and
/// reduce print their root, the others -1 or no root column).
std::optional<Problem> check_columns(NcclCollective c, const Columns& cols, const NcclTestsRow& row)
{
  bool op = cols.redop && row.redop != "none";
  bool none_or_absent = !cols.redop || row.redop == "none";
  bool rooted = cols.root && row.root >= 0;
  std::string name = to_string(c);
  switch (c) {
  case NcclCollective::ALL_REDUCE:
  case NcclCollective::REDUCE_SCATTER:
  case NcclCollective::REDUCE:
    if (!op)
      return Problem{"column 'redop'", "a reduction operator (sum, prod, max, min, avg, ...) for " + name,
                     cols.redop ? in_quotes(row.redop) : "no redop column"};
    break;
  case NcclCollective::ALL_GATHER:
  case NcclCollective::BROADCAST:
    if (!none_or_absent)
      return Problem{"column 'redop'", "\"none\" for " + name, in_quotes(row.redop)};
    break;
  case NcclCollective::ALL_TO_ALL:
    if (!cols.redop || row.redop != "none")
      return Problem{"column 'redop'", "\"none\" for " + name, cols.redop ? in_quotes(row.redop) : "no redop column"};
    break;
  case NcclCollective::SEND_RECV:
    if (cols.redop && row.redop == "none")
      return Problem{"column 'redop'", "a reduction operator or no redop column for " + name, in_quotes(row.redop)};
    break;
  }
  bool wants_root = c == NcclCollective::BROADCAST || c == NcclCollective::REDUCE;
  if (wants_root && !rooted)
    return Problem{"column 'root'", "a root rank (0 or more) for " + name,
                   cols.root ? in_quotes(std::to_string(row.root)) : "no root column"};
  if (!wants_root && rooted)
    return Problem{"column 'root'", "-1 (no root) for " + name, in_quotes(std::to_string(row.root))};
  return std::nullopt;
}

/// Whether the size of `row` fits collective `c` on `ranks` ranks (0: unknown): size = count x element size, times
/// the ranks when the count is per rank.
std::optional<Problem> check_size(NcclCollective c, int ranks, const NcclTestsRow& row)
{
  std::optional<int> element = nccl_type_size(row.type);
  if (!element || row.count <= 0)
    return std::nullopt;
  std::string name = to_string(c);
  std::int64_t unit = row.count * *element;
  std::string base = "count x element size = " + std::to_string(row.count) + " x " + std::to_string(*element) +
                     " bytes (" + row.type + ")";
  if (count_is_per_rank(c) && ranks > 0) {
    if (row.size_bytes != unit * ranks)
      return Problem{"column 'size'",
                     base + " x " + std::to_string(ranks) + " ranks = " + std::to_string(unit * ranks) + " bytes for " +
                         name + " (count is per rank)",
                     std::to_string(row.size_bytes)};
  } else if (count_is_per_rank(c)) {
    if (row.size_bytes % unit != 0)
      return Problem{"column 'size'",
                     "a multiple of " + base + " = " + std::to_string(unit) + " bytes for " + name +
                         " (count is per rank)",
                     std::to_string(row.size_bytes)};
  } else if (row.size_bytes != unit) {
    return Problem{"column 'size'", base + " = " + std::to_string(unit) + " bytes for " + name,
                   std::to_string(row.size_bytes)};
  }
  return std::nullopt;
}

/// Whether busbw of `parsed` is algbw x busbw_factor(c, ranks), to the printed digits; with ranks unknown (0), only
/// the bounds of the factor: 1 for broadcast, reduce and sendrecv, at most 1 for the per-rank collectives, below 2
/// for all-reduce.
std::optional<Problem> check_busbw(NcclCollective c, int ranks, const ParsedRow& parsed)
{
  std::string name = to_string(c);
  for (int block = 0; block < (parsed.ip ? 2 : 1); ++block) {
    const Measured& m = block == 0 ? parsed.oop : *parsed.ip;
    std::string what = std::string(block_name(block)) + " busbw";
    if (ranks > 0) {
      double f = busbw_factor(c, ranks);
      double expected = m.algbw.value * f;
      double tolerance = m.busbw.half + f * m.algbw.half + SLACK * std::max(1.0, expected);
      if (std::abs(m.busbw.value - expected) > tolerance)
        return Problem{what,
                       "algbw " + m.algbw.text + " x " + factor_formula(c) + " for " + name +
                           " on n = " + std::to_string(ranks) + " ranks (" + number(f) +
                           ") = " + printed_like(expected, m.busbw.text) + " (to the printed digits)",
                       in_quotes(m.busbw.text)};
      continue;
    }
    double tolerance = m.busbw.half + 2 * m.algbw.half + SLACK * std::max(1.0, m.busbw.value);
    double diff = m.busbw.value - m.algbw.value;
    bool unit_factor = std::string(factor_formula(c)) == "1";
    if (unit_factor && std::abs(diff) > tolerance)
      return Problem{what, "busbw = algbw = " + m.algbw.text + " (factor 1 for " + name + ")", in_quotes(m.busbw.text)};
    if (count_is_per_rank(c) && diff > tolerance)
      return Problem{what, "at most algbw " + m.algbw.text + " (factor (n-1)/n for " + name + ")",
                     in_quotes(m.busbw.text)};
    if (c == NcclCollective::ALL_REDUCE && m.busbw.value - 2 * m.algbw.value > tolerance)
      return Problem{what, "below 2 x algbw " + m.algbw.text + " (factor 2(n-1)/n for " + name + ")",
                     in_quotes(m.busbw.text)};
  }
  return std::nullopt;
}

/// One "Rank N [Group G] Pid P on HOST device D [bus] NAME" line of nccl-tests' device report.
struct Device {
  int rank = 0;
  int group = 0;
  std::string host;
  int line = 0;
};

Device parse_device(const std::vector<std::string_view>& words, std::string_view body, const std::string& file,
                    int line)
{
  auto bad = [&]() {
    fail(file, line, "device line", "'Rank N [Group G] Pid P on HOST device D ...' as nccl-tests prints it",
         in_quotes(body));
  };
  Device d;
  d.line = line;
  std::size_t i = 0;
  auto integer_after = [&](std::string_view key) {
    if (i + 1 >= words.size() || words[i] != key)
      bad();
    std::optional<std::int64_t> v = to_integer(words[i + 1]);
    if (!v || *v < 0 || *v > 1 << 30)
      bad();
    i += 2;
    return static_cast<int>(*v);
  };
  d.rank = integer_after("Rank");
  if (i < words.size() && words[i] == "Group")
    d.group = integer_after("Group");
  integer_after("Pid");
  if (i + 2 >= words.size() || words[i] != "on" || words[i + 2] != "device")
    bad();
  d.host = std::string(words[i + 1]);
  return d;
}

/// The collectives named by nccl-tests binary names in `line` ("all_reduce_perf", "./build/all_gather_perf_mpi",
/// "# Collective test starting: all_reduce_perf"); unsupported binaries (gather_perf, ...) as their names.
void find_binary_names(std::string_view line, std::vector<std::pair<std::optional<NcclCollective>, std::string>>& out)
{
  constexpr std::string_view SUFFIX = "_perf";
  for (std::size_t p = line.find(SUFFIX); p != std::string_view::npos; p = line.find(SUFFIX, p + 1)) {
    std::size_t end = p + SUFFIX.size();
    if (line.substr(end, 4) == "_mpi")
      end += 4;
    if (end < line.size() && is_identifier(line[end]))
      continue;
    std::size_t start = p;
    while (start > 0 && is_identifier(line[start - 1]))
      --start;
    std::string_view stem = line.substr(start, p - start);
    std::string binary(line.substr(start, end - start));
    if (std::optional<NcclCollective> c = parse_nccl_collective(stem)) {
      out.emplace_back(c, binary);
      continue;
    }
    for (const char* unsupported : UNSUPPORTED_BINARIES)
      if (stem == unsupported)
        out.emplace_back(std::nullopt, binary);
  }
}

std::string collective_list()
{
  std::string out;
  for (const CollectiveName& n : COLLECTIVE_NAMES)
    out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

} // namespace

std::string to_string(NcclCollective collective)
{
  for (const CollectiveName& n : COLLECTIVE_NAMES)
    if (n.collective == collective)
      return n.name;
  throw core::InternalError("to_string: unknown NcclCollective");
}

std::optional<NcclCollective> parse_nccl_collective(std::string_view name)
{
  for (std::string_view suffix : {"_perf_mpi", "_perf"})
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      name.remove_suffix(suffix.size());
      break;
    }
  for (const CollectiveName& n : COLLECTIVE_NAMES)
    if (name == n.name)
      return n.collective;
  return std::nullopt;
}

const std::vector<NcclCollective>& all_nccl_collectives()
{
  static const std::vector<NcclCollective> all = [] {
    std::vector<NcclCollective> v;
    for (const CollectiveName& n : COLLECTIVE_NAMES)
      v.push_back(n.collective);
    return v;
  }();
  return all;
}

double busbw_factor(NcclCollective collective, int ranks)
{
  if (ranks < 1)
    throw core::InternalError("busbw_factor: ranks must be at least 1, got " + std::to_string(ranks));
  double n = ranks;
  switch (collective) {
  case NcclCollective::ALL_REDUCE:
    return 2 * (n - 1) / n;
  case NcclCollective::ALL_GATHER:
  case NcclCollective::REDUCE_SCATTER:
  case NcclCollective::ALL_TO_ALL:
    return (n - 1) / n;
  case NcclCollective::BROADCAST:
  case NcclCollective::REDUCE:
  case NcclCollective::SEND_RECV:
    return 1;
  }
  throw core::InternalError("busbw_factor: unknown NcclCollective");
}

bool count_is_per_rank(NcclCollective collective)
{
  return collective == NcclCollective::ALL_GATHER || collective == NcclCollective::REDUCE_SCATTER ||
         collective == NcclCollective::ALL_TO_ALL;
}

std::optional<int> nccl_type_size(std::string_view type)
{
  static const std::pair<std::string_view, int> SIZES[] = {
      {"int8", 1},  {"uint8", 1},  {"char", 1}, {"f8e4m3", 1}, {"f8e5m2", 1}, {"half", 2},   {"bfloat16", 2},
      {"int32", 4}, {"uint32", 4}, {"int", 4},  {"float", 4},  {"int64", 8},  {"uint64", 8}, {"double", 8}};
  for (const auto& [name, size] : SIZES)
    if (type == name)
      return size;
  return std::nullopt;
}

std::string to_string(CollectiveSource source)
{
  switch (source) {
  case CollectiveSource::BINARY_NAME:
    return "binary name";
  case CollectiveSource::HINT:
    return "hint";
  case CollectiveSource::INFERRED:
    return "inferred";
  }
  throw core::InternalError("to_string: unknown CollectiveSource");
}

NcclTestsTable parse_nccl_tests(std::string_view text, const std::string& file)
{
  return parse_nccl_tests(text, file, std::nullopt);
}

namespace {

/// The ranks and nodes of rank 0's group from the device lines; a rank listed twice is refused (several runs in one
/// text).
void count_ranks(const std::vector<Device>& devices, const std::string& file, NcclTestsTable& table)
{
  auto zero = std::find_if(devices.begin(), devices.end(), [](const Device& d) { return d.rank == 0; });
  int group = zero != devices.end() ? zero->group : devices.front().group;
  std::set<std::string> hosts;
  std::vector<const Device*> by_rank;
  for (const Device& d : devices) {
    if (d.group != group)
      continue;
    for (const Device* other : by_rank)
      if (other->rank == d.rank)
        fail(file, d.line, "device line", "each rank once (one nccl-tests run)",
             "rank " + std::to_string(d.rank) + " again (first at line " + std::to_string(other->line) +
                 "): the output of several runs, or of processes started without MPI");
    by_rank.push_back(&d);
    hosts.insert(d.host);
  }
  table.ranks = static_cast<int>(by_rank.size());
  table.nodes = static_cast<int>(hosts.size());
}

/// The collective a table without a binary name fits: redop and root, size against count, then the bus bandwidth
/// factor; the one that fits the columns and more rows than any other when none fits every row.
NcclCollective infer_collective(const std::vector<ParsedRow>& rows, const Columns& cols, const NcclTestsTable& table,
                                const std::string& file)
{
  std::vector<NcclCollective> fits;
  std::size_t best_rows = 0;
  std::vector<NcclCollective> best;
  for (NcclCollective c : all_nccl_collectives()) {
    bool ok = true;
    for (const ParsedRow& r : rows) {
      std::optional<int> element = nccl_type_size(r.row.type);
      bool whole = element && r.row.count > 0 && r.row.size_bytes == r.row.count * *element;
      if (check_columns(c, cols, r.row) || check_size(c, table.ranks, r.row) ||
          (whole && count_is_per_rank(c) && table.ranks != 1)) {
        ok = false;
        break;
      }
    }
    if (!ok)
      continue;
    std::size_t fitting = static_cast<std::size_t>(
        std::count_if(rows.begin(), rows.end(), [&](const ParsedRow& r) { return !check_busbw(c, table.ranks, r); }));
    if (fitting == rows.size())
      fits.push_back(c);
    if (fitting > best_rows || best.empty()) {
      best_rows = fitting;
      best = {c};
    } else if (fitting == best_rows) {
      best.push_back(c);
    }
  }
  // No collective fits every row but one fits the columns and more rows than any other: take it, and let the
  // checks below name the row that contradicts it.
  if (fits.empty() && best.size() == 1)
    fits = best;
  if (fits.size() != 1) {
    std::string list;
    for (NcclCollective c : fits)
      list += (list.empty() ? "" : " and ") + to_string(c);
    fail(file, table.header_line, "collective",
         "the text to name the nccl-tests binary (a command line or '# Collective test starting: X_perf') or the "
         "caller to give the collective",
         fits.empty() ? "a table that fits none of " + collective_list() : "a table that fits " + list + " alike");
  }
  return fits.front();
}

} // namespace

NcclTestsTable parse_nccl_tests(std::string_view text, const std::string& file, std::optional<NcclCollective> hint)
{
  enum class State { BEFORE, TABLE, AFTER };
  State state = State::BEFORE;
  NcclTestsTable table;
  table.file = file;
  Columns cols;
  std::vector<ParsedRow> rows;
  std::vector<Device> devices;
  struct Named {
    std::optional<NcclCollective> collective;
    std::string binary;
    int line;
  };
  std::vector<Named> names;
  int avg_line = 0;

  int line_number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    std::string_view raw = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    ++line_number;

    std::string_view line = trim(strip_mpi_tag(trim(raw)));
    bool comment = !line.empty() && line.front() == '#';
    std::string_view body = comment ? trim(line.substr(1)) : line;
    if (state == State::TABLE && !comment && !line.empty() && (is_digit(line.front()) || looks_like_row(line, cols))) {
      ParsedRow parsed = parse_row(split_words(line), cols, file, line_number);
      if (!cols.cputime) {
        check_algbw(parsed, parsed.oop, 0, file);
        if (parsed.ip)
          check_algbw(parsed, *parsed.ip, 1, file);
      }
      rows.push_back(std::move(parsed));
      continue;
    }
    if (state == State::TABLE && comment && looks_like_row(body, cols))
      fail(file, line_number, "data row", "a data row without '#' (nccl-tests prints none inside the table)",
           "a '#' line holding the numbers of a row: " + in_quotes(line));
    std::vector<std::pair<std::optional<NcclCollective>, std::string>> found;
    find_binary_names(line, found);
    for (auto& [collective, binary] : found)
      names.push_back({collective, std::move(binary), line_number});

    std::vector<std::string_view> words = split_words(body);
    if (words.size() >= 3 && words[0] == "size" && words[1] == "count" && words[2] == "type") {
      if (state != State::BEFORE)
        fail(file, line_number, "column header", "one nccl-tests table per text",
             "a second table (the first column header is at line " + std::to_string(table.header_line) + ")");
      cols = parse_columns(words, file, line_number);
      table.header_line = line_number;
      table.cputime = cols.cputime;
      state = State::TABLE;
      continue;
    }
    constexpr std::string_view AVG = "Avg bus bandwidth";
    if (body.substr(0, AVG.size()) == AVG) {
      if (state == State::BEFORE)
        fail(file, line_number, "footer", "the column header line ('size count type ...') before it",
             "'Avg bus bandwidth' first");
      if (avg_line != 0)
        fail(file, line_number, "footer", "one 'Avg bus bandwidth' line",
             "a second one (the first is at line " + std::to_string(avg_line) + ")");
      std::string_view rest = trim(body.substr(AVG.size()));
      std::vector<std::string_view> value = split_words(rest.substr(0, 1) == ":" ? rest.substr(1) : rest);
      const std::optional<double> avg = value.empty() ? std::nullopt : to_number(value[0]);
      const double avg_value = avg.value_or(-1.0);
      if (rest.substr(0, 1) != ":" || avg_value < 0)
        fail(file, line_number, "footer", "'Avg bus bandwidth : X' with X in GB/s", in_quotes(body));
      table.avg_busbw_GBps = avg_value;
      avg_line = line_number;
      state = State::AFTER;
      continue;
    }
    if (words.size() >= 2 && words[0] == "Rank" && to_integer(words[1]))
      devices.push_back(parse_device(words, body, file, line_number));
  }

  if (table.header_line == 0)
    fail(file, 1, "nccl-tests output",
         "a column header line 'size count type ... time algbw busbw ...' as nccl-tests prints it",
         "none in " + std::to_string(line_number) + " lines");
  if (rows.empty())
    fail(file, table.header_line, "nccl-tests table", "at least one data row after the column header", "none");

  // Ranks: the device lines of rank 0's group (NCCL_TESTS_SPLIT runs several groups; the table is rank 0's).
  if (!devices.empty())
    count_ranks(devices, file, table);

  // Which collective.
  std::optional<NcclCollective> named;
  int named_line = 0;
  std::string named_binary;
  for (const Named& n : names) {
    if (!n.collective)
      fail(file, n.line, "nccl-tests binary", "one of " + collective_list() + " (with _perf)", in_quotes(n.binary));
    if (named && *named != *n.collective)
      fail(file, n.line, "nccl-tests binary",
           "one binary per text (" + named_binary + " at line " + std::to_string(named_line) + ")",
           in_quotes(n.binary));
    if (!named) {
      named = n.collective;
      named_line = n.line;
      named_binary = n.binary;
    }
  }
  if (named && hint && *named != *hint)
    fail(file, named_line, "nccl-tests binary", to_string(*hint) + "_perf (the collective the caller gave)",
         in_quotes(named_binary));
  if (named) {
    table.collective = *named;
    table.collective_source = CollectiveSource::BINARY_NAME;
  } else if (hint) {
    table.collective = *hint;
    table.collective_source = CollectiveSource::HINT;
  } else {
    table.collective = infer_collective(rows, cols, table, file);
    table.collective_source = CollectiveSource::INFERRED;
  }

  for (const ParsedRow& r : rows) {
    if (std::optional<Problem> p = check_columns(table.collective, cols, r.row))
      fail(file, r.row.line, row_label(r.row) + p->what, p->expected, p->found);
    if (std::optional<Problem> p = check_size(table.collective, table.ranks, r.row))
      fail(file, r.row.line, row_label(r.row) + p->what, p->expected, p->found);
    if (std::optional<Problem> p = check_busbw(table.collective, table.ranks, r))
      fail(file, r.row.line, row_label(r.row) + p->what, p->expected, p->found);
    table.rows.push_back(r.row);
  }
  return table;
}

NcclTestsTable read_nccl_tests(const std::string& path, std::optional<NcclCollective> hint)
{
  return parse_nccl_tests(config::read_input_file(path, "an nccl-tests output file"), path, hint);
}

} // namespace zerosim::calibration
