#include "sweep/sweep.hpp"
#include "sweep/plots.hpp"
#include "sweep/summary.hpp"

#include "config/document.hpp"
#include "config/scenario_loader.hpp"
#include "core/csv.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/worker_pool.hpp"
#include "report/run_report.hpp"
#include "spec/calibration_spec.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace zerosim::sweep {

namespace fs = std::filesystem;
using core::Json;

namespace {

const char* const PLAN_FILE = "sweep-plan.json";
const char* const JSONL_FILE = "sweep.jsonl";
const char* const CSV_FILE = "sweep.csv";
const char* const FORMAT = "zerosim-sweep 1";

std::string read_file(const fs::path& p, const std::string& what)
{
  std::ifstream in(p, std::ios::binary);
  if (!in)
    throw core::InputError(what + ": cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string status_text(core::WorkStatus s)
{
  switch (s) {
  case core::WorkStatus::DONE:
    return "done";
  case core::WorkStatus::UNSUPPORTED:
    return "not modelled";
  case core::WorkStatus::REJECTED:
    return "refused";
  case core::WorkStatus::FAILED:
    return "failed";
  case core::WorkStatus::TIMED_OUT:
    return "timed out";
  }
  return "failed";
}

std::string number(double v)
{
  return core::dump_json(Json(v), -1);
}

/// The header cells of the result part of the CSV: the union of the done records' flattened keys, in order of
/// first appearance.
std::vector<std::string> result_columns(const std::vector<Record>& records)
{
  std::vector<std::string> cols;
  std::set<std::string> seen;
  for (const Record& r : records)
    if (r.done())
      for (const auto& [k, v] : flatten(r.result))
        if (seen.insert(k).second)
          cols.push_back(k);
  return cols;
}

std::string csv_header(const Plan& plan, const std::vector<std::string>& cols)
{
  std::vector<std::string> fields = {"point"};
  for (const Axis& a : plan.axes)
    fields.push_back(a.key);
  fields.push_back("status");
  fields.push_back("message");
  fields.insert(fields.end(), cols.begin(), cols.end());
  fields.push_back("wall_s");
  return core::csv_record(fields);
}

std::string csv_row(const Record& r, const std::vector<std::string>& cols)
{
  std::vector<std::string> fields = {std::to_string(r.point)};
  fields.insert(fields.end(), r.values.begin(), r.values.end());
  fields.push_back(r.status);
  fields.push_back(r.message);
  std::map<std::string, std::string> cells;
  if (r.done())
    for (auto& [k, v] : flatten(r.result))
      cells.emplace(k, v);
  for (const std::string& c : cols) {
    const auto it = cells.find(c);
    fields.push_back(it == cells.end() ? std::string() : it->second);
  }
  fields.push_back(number(r.wall_s));
  return core::csv_record(fields);
}

/// A record from one line of a sweep.jsonl, or nothing when the line is not one.
std::optional<Record> parse_record(const std::string& line, const Grid& grid, const std::string& where)
{
  Json j;
  try {
    j = Json::parse(line);
  } catch (const Json::exception&) {
    return std::nullopt;
  }
  if (!j.is_object() || !j.contains("point") || !j["point"].is_number_unsigned() || !j.contains("status") ||
      !j["status"].is_string() || !j.contains("values") || !j.contains("wall_s"))
    return std::nullopt;
  Record r;
  r.point = j["point"].get<std::uint64_t>();
  if (r.point >= grid.size())
    throw core::InputError(where + ": point " + std::to_string(r.point) + " is outside the grid of " +
                           std::to_string(grid.size()) + " points");
  r.values = grid.point(r.point);
  r.status = j["status"].get<std::string>();
  r.message = j.value("message", "");
  r.result = j.value("result", Json());
  r.wall_s = j["wall_s"].is_number() ? j["wall_s"].get<double>() : 0.0;
  return r;
}

/// Where one record's line lies in a sweep.jsonl (the files are rewritten from these, a line at a time, so a sweep
/// of a million points never holds its results in memory).
struct LineRef {
  std::uint64_t point = 0;
  std::uint64_t offset = 0; ///< of the line's first byte
  std::uint64_t length = 0; ///< without its newline
  bool done = false;
};

/// The record lines of a sweep.jsonl, in file order, each checked. A last line without its newline, or one that is
/// not a record, is torn (the run was stopped while writing it): left out, and `torn` set. Any other bad line is an
/// error naming file and line.
std::vector<LineRef> scan_records(const fs::path& file, const Plan& plan, bool& torn)
{
  torn = false;
  std::vector<LineRef> out;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return out;
  const Grid grid = plan.grid();
  std::string line;
  std::uint64_t offset = 0;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    const bool complete = !in.eof(); // getline stopped at a newline
    const std::string where = file.string() + ":" + std::to_string(line_no);
    const std::optional<Record> r = complete ? parse_record(line, grid, where) : std::nullopt;
    if (!r) {
      if (in.peek() == std::char_traits<char>::eof()) {
        torn = true;
        break;
      }
      throw core::InputError(where + ": not a sweep record");
    }
    out.push_back(LineRef{r->point, offset, line.size(), r->done()});
    offset += line.size() + 1;
  }
  return out;
}

/// The record at `ref` of the open sweep.jsonl `in`.
Record record_at(std::ifstream& in, const LineRef& ref, const Grid& grid, const fs::path& file)
{
  std::string line(static_cast<std::size_t>(ref.length), '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(ref.offset));
  in.read(line.data(), static_cast<std::streamsize>(ref.length));
  std::optional<Record> r = parse_record(line, grid, file.string());
  if (!in || !r)
    throw core::InternalError("sweep: " + file.string() + " changed while it was read");
  return *r;
}

/// What differs between two plans' JSON, by top-level key ("" when none); `but_shard` ignores the shard.
std::string plan_difference(const Plan& a, const Plan& b, bool but_shard)
{
  const Json ja = a.to_json(), jb = b.to_json();
  for (auto it = ja.begin(); it != ja.end(); ++it) {
    if (but_shard && it.key() == "shard")
      continue;
    if (!jb.contains(it.key()) || jb[it.key()] != it.value())
      return it.key();
  }
  return "";
}

Plan read_plan(const fs::path& dir, const std::string& what)
{
  const fs::path p = dir / PLAN_FILE;
  if (!core::path_exists(p.string(), what))
    throw core::InputError(what + ": " + dir.string() + " has no " + PLAN_FILE + ": not the output of a sweep");
  Json j;
  try {
    j = Json::parse(read_file(p, what));
  } catch (const Json::exception& e) {
    throw core::InputError(p.string() + ": not JSON: " + e.what());
  }
  return Plan::from_json(j, p.string());
}

void check_fresh(const fs::path& dir, const std::string& what)
{
  for (const char* f : {PLAN_FILE, JSONL_FILE})
    if (core::path_exists((dir / f).string(), what))
      throw core::InputError(what + ": " + dir.string() + " already holds a sweep (" + f +
                             "); --resume finishes it, or give another --out DIR");
}

/// Rewrites DIR's jsonl and csv in point order from the jsonl's record lines (the first of a point kept), a line at a
/// time: one pass for the csv's columns (the union of the result keys), one to write. Returns the index of the new
/// jsonl and sets `columns`.
std::vector<LineRef> rewrite_in_order(const fs::path& dir, const Plan& plan, std::vector<LineRef> refs,
                                      std::vector<std::string>& columns)
{
  std::stable_sort(refs.begin(), refs.end(), [](const LineRef& a, const LineRef& b) { return a.point < b.point; });
  refs.erase(
      std::unique(refs.begin(), refs.end(), [](const LineRef& a, const LineRef& b) { return a.point == b.point; }),
      refs.end());
  const Grid grid = plan.grid();
  const fs::path jsonl = dir / JSONL_FILE;
  std::ifstream in(jsonl, std::ios::binary);
  columns.clear();
  std::set<std::string> seen;
  for (const LineRef& ref : refs)
    if (ref.done)
      for (const auto& [k, v] : flatten(record_at(in, ref, grid, jsonl).result))
        if (seen.insert(k).second)
          columns.push_back(k);
  const fs::path jsonl_tmp = dir / (std::string(JSONL_FILE) + ".tmp"), csv_tmp = dir / (std::string(CSV_FILE) + ".tmp");
  std::ofstream jout(jsonl_tmp, std::ios::binary | std::ios::trunc), cout(csv_tmp, std::ios::binary | std::ios::trunc);
  if (!jout || !cout)
    throw core::InputError("sweep: cannot write into " + dir.string());
  if (!refs.empty())
    cout << csv_header(plan, columns);
  std::vector<LineRef> written;
  std::uint64_t offset = 0;
  for (const LineRef& ref : refs) {
    const Record r = record_at(in, ref, grid, jsonl);
    const std::string line = jsonl_line(plan, r);
    jout << line;
    cout << csv_row(r, columns);
    written.push_back(LineRef{ref.point, offset, line.size() - 1, ref.done});
    offset += line.size();
  }
  jout.close();
  cout.close();
  if (!jout || !cout)
    throw core::InputError("sweep: cannot write into " + dir.string());
  in.close();
  std::error_code ec;
  fs::rename(jsonl_tmp, jsonl, ec);
  if (!ec)
    fs::rename(csv_tmp, dir / CSV_FILE, ec);
  if (ec)
    throw core::InputError("sweep: cannot write into " + dir.string() + ": " + ec.message());
  return written;
}

/// Plots are drawn for sweeps of up to this many points (a breakdown bar per point; beyond, sweep.csv is the tool).
constexpr std::size_t PLOT_LIMIT = 5000;

/// The ranked summary of the sweep in `dir` on `out` (summary.hpp), its records read a line at a time.
void print_summary(const fs::path& dir, const Plan& plan, const std::vector<LineRef>& refs, std::ostream& out)
{
  Summary summary(plan);
  const Grid grid = plan.grid();
  const fs::path jsonl = dir / JSONL_FILE;
  std::ifstream in(jsonl, std::ios::binary);
  for (const LineRef& ref : refs)
    summary.add(record_at(in, ref, grid, jsonl));
  out << summary.table();
}

/// The plots of the sweep in `dir` (plots.hpp), named on `out`; a notice (no gnuplot, too many points) on `err`.
void draw(const fs::path& dir, const Plan& plan, std::size_t points, std::ostream& out, std::ostream& err)
{
  if (points > PLOT_LIMIT) {
    err << "sweep: " << points << " points: no plots above " << PLOT_LIMIT << " (sweep.csv has every figure)\n";
    return;
  }
  Plan read = plan;
  const std::vector<Record> records = read_sweep(dir.string(), read);
  std::string notice;
  for (const PlotFiles& p : write_plots(dir.string(), plan, records, notice))
    if (p.drawn)
      out << "sweep: plot " << p.name << ": " << (dir / (p.name + ".svg")).string() << ", "
          << (dir / (p.name + ".png")).string() << "\n";
  if (!notice.empty())
    err << "sweep: " << notice << "\n";
}

std::string duration_text(double s)
{
  char buf[32];
  if (s < 10)
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 120)
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  else
    std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}

} // namespace

std::vector<Record> read_sweep(const std::string& dir, Plan& plan)
{
  plan = read_plan(dir, "sweep");
  bool torn = false;
  const fs::path file = fs::path(dir) / JSONL_FILE;
  std::vector<LineRef> refs = scan_records(file, plan, torn);
  std::stable_sort(refs.begin(), refs.end(), [](const LineRef& a, const LineRef& b) { return a.point < b.point; });
  std::ifstream in(file, std::ios::binary);
  const Grid grid = plan.grid();
  std::vector<Record> records;
  for (const LineRef& ref : refs)
    records.push_back(record_at(in, ref, grid, file));
  return records;
}

Json Plan::to_json() const
{
  Json axes_json = Json::array();
  for (const Axis& a : axes)
    axes_json.push_back(Json{{"key", a.key}, {"values", a.values}});
  Json j;
  j["format"] = FORMAT;
  j["scenario"] = scenario;
  j["scenario_hash"] = scenario_hash;
  j["sets"] = sets;
  j["calibration"] = calibration;
  j["axes"] = axes_json;
  j["points"] = grid().size();
  j["shard"] = std::to_string(shard.index) + "/" + std::to_string(shard.count);
  return j;
}

Plan Plan::from_json(const Json& j, const std::string& file)
{
  try {
    if (!j.is_object() || j.value("format", "") != FORMAT)
      throw core::InputError(file + ": not a sweep plan (format \"" + std::string(FORMAT) + "\" expected)");
    Plan p;
    p.scenario = j.at("scenario").get<std::string>();
    p.scenario_hash = j.at("scenario_hash").get<std::string>();
    p.sets = j.at("sets").get<std::vector<std::string>>();
    p.calibration = j.at("calibration").get<std::string>();
    for (const Json& a : j.at("axes"))
      p.axes.push_back(Axis{a.at("key").get<std::string>(), a.at("values").get<std::vector<std::string>>()});
    p.shard = parse_shard(j.at("shard").get<std::string>());
    return p;
  } catch (const Json::exception& e) {
    throw core::InputError(file + ": not a sweep plan: " + e.what());
  }
}

std::vector<std::pair<std::string, std::string>> flatten(const Json& result)
{
  std::vector<std::pair<std::string, std::string>> out;
  std::function<void(const std::string&, const Json&)> walk = [&](const std::string& prefix, const Json& v) {
    if (v.is_object() && !v.empty()) {
      for (auto it = v.begin(); it != v.end(); ++it)
        walk(prefix.empty() ? it.key() : prefix + "." + it.key(), it.value());
      return;
    }
    if (v.is_string())
      out.emplace_back(prefix, v.get<std::string>());
    else if (v.is_null())
      out.emplace_back(prefix, "");
    else
      out.emplace_back(prefix, core::dump_json(v, -1));
  };
  walk("", result);
  return out;
}

std::string csv_of(const Plan& plan, const std::vector<Record>& records)
{
  const std::vector<std::string> cols = result_columns(records);
  std::string text = csv_header(plan, cols);
  for (const Record& r : records)
    text += csv_row(r, cols);
  return text;
}

std::string jsonl_line(const Plan& plan, const Record& r)
{
  Json values = Json::object();
  for (std::size_t k = 0; k < plan.axes.size() && k < r.values.size(); ++k)
    values[plan.axes[k].key] = r.values[k];
  Json j;
  j["point"] = r.point;
  j["values"] = values;
  j["status"] = r.status;
  j["message"] = r.message;
  j["result"] = r.result;
  j["wall_s"] = r.wall_s;
  return core::dump_json(j, -1) + "\n";
}

std::string simulate_point(const Plan& plan, const std::vector<std::string>& point_sets)
{
  std::vector<std::string> sets = plan.sets;
  sets.insert(sets.end(), point_sets.begin(), point_sets.end());
  return report::run_json_line(plan.scenario, sets, plan.calibration);
}

Plan make_plan(const std::string& scenario, const std::vector<std::string>& sets, const std::string& calibration,
               const std::vector<std::string>& sweeps, const Shard& shard)
{
  Plan p;
  p.scenario = scenario;
  p.scenario_hash = spec::fnv1a64_hex(read_file(scenario, "sweep"));
  p.sets = sets;
  p.calibration = calibration;
  p.shard = shard;
  config::LoadOptions opts;
  opts.sets = sets;
  opts.calibration = calibration;
  const spec::Scenario s = config::load_scenario(scenario, opts); // bad input exits 2 here, before any point
  p.axes = axes_of(s.sweep, sweeps);
  for (const Axis& a : p.axes)
    if (const std::string problem = config::check_scenario_path(a.key); !problem.empty())
      throw core::InputError("--sweep " + a.key + ": " + problem);
  if (p.axes.empty())
    throw core::InputError("sweep: nothing to sweep in " + scenario +
                           ": give --sweep KEY=V1,V2,... or a sweep: block in the scenario");
  p.grid(); // checks the axes
  return p;
}

namespace {

/// The sweep's folder made ready: with --resume, the plan checked against the one there and the finished points'
/// records read (a torn last line dropped and said); otherwise a fresh folder with an empty JSON-lines file.
std::vector<LineRef> prepare_dir(const Plan& plan, const fs::path& dir, bool resume, std::ostream& err)
{
  std::vector<LineRef> refs;
  if (resume) {
    const Plan before = read_plan(dir, "sweep --resume");
    if (const std::string d = plan_difference(before, plan, false); !d.empty())
      throw core::InputError("sweep --resume: " + dir.string() + " holds a different sweep: its " + d +
                             " differs from this one's (" + PLAN_FILE + ")");
    bool torn = false;
    refs = scan_records(dir / JSONL_FILE, plan, torn);
    for (const LineRef& r : refs)
      if (!plan.shard.takes(r.point))
        throw core::InputError("sweep --resume: " + (dir / JSONL_FILE).string() + " holds point " +
                               std::to_string(r.point) + ", which is not this share's");
    if (torn)
      err << "sweep: dropped a torn last line of " << (dir / JSONL_FILE).string() << " (the run was stopped there)\n";
  } else {
    check_fresh(dir, "sweep");
    core::write_file(dir / JSONL_FILE, "");
  }
  return refs;
}

/// The record of a point from its worker's outcome (a payload that is not JSON makes it a failed point).
Record record_of(const Grid& grid, std::uint64_t item, const core::WorkOutcome& o)
{
  Record r;
  r.point = item;
  r.values = grid.point(item);
  r.status = status_text(o.status);
  r.message = o.message;
  r.wall_s = o.wall_s;
  if (o.status == core::WorkStatus::DONE) {
    try {
      r.result = Json::parse(o.payload);
    } catch (const Json::exception& e) {
      r.status = "failed";
      r.message = std::string("the worker's result is not JSON: ") + e.what();
    }
  }
  return r;
}

/// Where a sweep stands after a point.
struct Progress {
  std::uint64_t finished = 0;
  std::uint64_t to_run = 0;
  int failed = 0;
  double elapsed_s = 0;
};

/// The progress after a point, on standard error: a bar with an ETA on a terminal, a plain line otherwise.
void progress(std::ostream& err, bool terminal, const Record& r, const Progress& p)
{
  const double eta = p.elapsed_s / static_cast<double>(p.finished) * static_cast<double>(p.to_run - p.finished);
  const std::string counts =
      std::to_string(p.finished) + "/" + std::to_string(p.to_run) + " points, " + std::to_string(p.failed) + " failed";
  if (terminal) {
    constexpr int WIDTH = 30;
    const int filled = static_cast<int>(WIDTH * static_cast<double>(p.finished) / static_cast<double>(p.to_run));
    err << "\rsweep [" << std::string(static_cast<std::size_t>(filled), '#')
        << std::string(static_cast<std::size_t>(WIDTH - filled), '.') << "] " << counts << ", ETA "
        << duration_text(eta) << "   " << (p.finished == p.to_run ? "\n" : "");
  } else {
    err << "sweep: point " << r.point << " " << r.status << " (" << duration_text(r.wall_s) << "); " << counts
        << ", ETA " << duration_text(eta) << "\n";
  }
  err.flush();
}

} // namespace

int run_sweep(const Plan& plan, const SweepOptions& options, std::ostream& out, std::ostream& err)
{
  const Grid grid = plan.grid();
  if (options.out_dir.empty() && options.resume)
    throw core::InputError("sweep --resume: give --out DIR, the folder of the sweep to finish (without --out, each "
                           "sweep writes into a new folder)");
  // Without --out, a new folder of its own (core::output_dir): nothing that exists is written over.
  const fs::path dir =
      options.resume ? fs::path(options.out_dir)
                     : fs::path(core::output_dir(options.out_dir, fs::path(plan.scenario).stem().string(), "sweep"));
  std::vector<LineRef> refs = prepare_dir(plan, dir, options.resume, err); // the records kept from before
  core::write_file(dir / PLAN_FILE, core::dump_json(plan.to_json(), 2) + "\n");
  // The files in point order, the torn line gone; the csv's columns so far.
  std::vector<std::string> columns;
  refs = rewrite_in_order(dir, plan, refs, columns);

  std::set<std::uint64_t> done_points;
  int failed = 0;
  for (const LineRef& r : refs) {
    done_points.insert(r.point);
    failed += r.done ? 0 : 1;
  }
  const std::uint64_t share = grid.points_in(plan.shard);
  const std::uint64_t to_run = share - static_cast<std::uint64_t>(done_points.size());
  if (options.resume)
    err << "sweep: resuming " << dir.string() << ": " << done_points.size() << " of " << share
        << " points already finished, skipped; " << to_run << " to run\n";
  else
    err << "sweep: " << share << " points"
        << (plan.shard.whole()
                ? std::string()
                : " (share " + plan.to_json()["shard"].get<std::string>() + " of " + std::to_string(grid.size()) + ")")
        << " into " << dir.string() << ", " << options.jobs << " at once\n";

  // As each point ends, its record is appended to the jsonl and, once some finished point gives the columns, to the
  // csv (the rows before that wait); the end rewrites both in point order with every column.
  bool header = !columns.empty();
  std::vector<Record> waiting; // rows for the csv before it has a header
  std::ofstream jsonl(dir / JSONL_FILE, std::ios::binary | std::ios::app);
  std::ofstream csv(dir / CSV_FILE, std::ios::binary | std::ios::app);
  if (!jsonl || !csv)
    throw core::InputError("sweep: cannot write into " + dir.string());
  if (!header && !refs.empty()) {
    // Only points that did not run so far: the csv has a header without result columns; start it again later.
    csv.close();
    core::write_file(dir / CSV_FILE, "");
    csv.open(dir / CSV_FILE, std::ios::binary | std::ios::app);
    Plan p = plan;
    for (Record& r : read_sweep(dir.string(), p))
      waiting.push_back(std::move(r));
  }
  std::uint64_t finished = 0;
  std::size_t ran = 0;
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t cursor = plan.shard.index - 1;
  core::WorkSource next = [&](std::size_t& item) {
    while (cursor < grid.size() && done_points.count(cursor))
      cursor += plan.shard.count;
    if (cursor >= grid.size())
      return false;
    item = static_cast<std::size_t>(cursor);
    cursor += plan.shard.count;
    return true;
  };
  core::WorkFunction work = [&](std::size_t item) { return options.simulate(plan, grid.sets(item)); };
  core::WorkDone on_done = [&](std::size_t item, const core::WorkOutcome& o) {
    const Record r = record_of(grid, item, o);
    failed += r.done() ? 0 : 1;
    ++ran;
    jsonl << jsonl_line(plan, r);
    jsonl.flush();
    if (header) {
      csv << csv_row(r, columns);
    } else {
      waiting.push_back(r);
      if (r.done()) {
        columns.clear();
        for (const auto& [k, v] : flatten(r.result))
          columns.push_back(k);
        csv << csv_header(plan, columns);
        for (const Record& w : waiting)
          csv << csv_row(w, columns);
        waiting.clear();
        header = true;
      }
    }
    csv.flush();
    ++finished;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress(err, options.terminal, r, Progress{finished, to_run, failed, elapsed});
  };
  if (options.execute) {
    options.execute(next, work, on_done);
  } else {
    core::PoolOptions pool;
    pool.jobs = options.jobs;
    pool.time_limit_s = options.point_time_limit_s;
    core::run_pool(next, work, on_done, pool);
  }
  jsonl.close();
  csv.close();

  bool torn = false;
  refs = rewrite_in_order(dir, plan, scan_records(dir / JSONL_FILE, plan, torn), columns);
  failed = 0;
  for (const LineRef& r : refs)
    failed += r.done ? 0 : 1;
  print_summary(dir, plan, refs, out);
  draw(dir, plan, refs.size(), out, err);
  out << "sweep: " << refs.size() << " points (" << ran << " run now";
  if (options.resume)
    out << ", " << refs.size() - ran << " from before";
  out << "), " << failed << " failed or refused; " << (dir / CSV_FILE).string() << ", " << (dir / JSONL_FILE).string()
      << "\n";
  return failed > 0 ? 1 : 0;
}

int merge_sweeps(const std::vector<std::string>& shard_dirs, const std::string& out_dir, std::ostream& out)
{
  if (shard_dirs.empty())
    throw core::InputError("sweep --merge: expected the folders of the shares (SHARD_DIR...)");
  if (out_dir.empty())
    throw core::InputError("sweep --merge: expected --out DIR for the joined sweep");
  std::vector<Plan> plans;
  for (const std::string& d : shard_dirs)
    plans.push_back(read_plan(d, "sweep --merge"));
  const Plan& first = plans.front();
  std::map<std::uint64_t, std::string> by_index;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (const std::string d = plan_difference(plans[i], first, true); !d.empty())
      throw core::InputError("sweep --merge: " + shard_dirs[i] + " is a share of another sweep: its " + d +
                             " differs from " + shard_dirs.front() + "'s");
    if (plans[i].shard.count != first.shard.count)
      throw core::InputError("sweep --merge: " + shard_dirs[i] + " is share " +
                             plans[i].to_json()["shard"].get<std::string>() + ", " + shard_dirs.front() + " share " +
                             first.to_json()["shard"].get<std::string>() + ": the shares of one sweep have the same N");
    const auto [it, inserted] = by_index.emplace(plans[i].shard.index, shard_dirs[i]);
    if (!inserted)
      throw core::InputError("sweep --merge: share " + std::to_string(plans[i].shard.index) + " is given twice (" +
                             it->second + " and " + shard_dirs[i] + ")");
  }
  std::string missing;
  for (std::uint64_t i = 1; i <= first.shard.count; ++i)
    if (!by_index.count(i))
      missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  if (!missing.empty())
    throw core::InputError("sweep --merge: share(s) " + missing + " of " + std::to_string(first.shard.count) +
                           " missing");
  Plan whole = first;
  whole.shard = Shard{};
  const Grid grid = whole.grid();
  // Each share checked whole before anything is written.
  for (std::size_t i = 0; i < plans.size(); ++i) {
    bool torn = false;
    std::set<std::uint64_t> points;
    for (const LineRef& r : scan_records(fs::path(shard_dirs[i]) / JSONL_FILE, plans[i], torn)) {
      if (!plans[i].shard.takes(r.point))
        throw core::InputError("sweep --merge: " + shard_dirs[i] + " holds point " + std::to_string(r.point) +
                               ", which is not its share's");
      points.insert(r.point);
    }
    if (torn || points.size() != grid.points_in(plans[i].shard))
      throw core::InputError("sweep --merge: " + shard_dirs[i] + " is unfinished (" + std::to_string(points.size()) +
                             " of its " + std::to_string(grid.points_in(plans[i].shard)) +
                             " points): finish it with --resume first");
  }
  const fs::path dir(out_dir);
  core::create_directories(out_dir, "sweep: --out");
  check_fresh(dir, "sweep --merge");
  {
    // The shares' lines one after another, then rewritten in point order.
    std::ofstream joined(dir / JSONL_FILE, std::ios::binary | std::ios::trunc);
    for (const std::string& d : shard_dirs) {
      std::ifstream in(fs::path(d) / JSONL_FILE, std::ios::binary);
      joined << in.rdbuf();
    }
    if (!joined)
      throw core::InputError("sweep --merge: cannot write " + (dir / JSONL_FILE).string());
  }
  core::write_file(dir / PLAN_FILE, core::dump_json(whole.to_json(), 2) + "\n");
  bool torn = false;
  std::vector<std::string> columns;
  const std::vector<LineRef> refs = rewrite_in_order(dir, whole, scan_records(dir / JSONL_FILE, whole, torn), columns);
  int failed = 0;
  for (const LineRef& r : refs)
    failed += r.done ? 0 : 1;
  print_summary(dir, whole, refs, out);
  draw(dir, whole, refs.size(), out, out);
  out << "sweep --merge: " << plans.size() << " shares, " << refs.size() << " points, " << failed
      << " failed or refused; " << (dir / CSV_FILE).string() << ", " << (dir / JSONL_FILE).string() << "\n";
  return failed > 0 ? 1 : 0;
}

} // namespace zerosim::sweep
