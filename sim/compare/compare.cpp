#include "compare/compare.hpp"

#include "compare/training_logs.hpp"
#include "config/measured_runs.hpp"
#include "core/bytes.hpp"
#include "core/csv.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/gnuplot.hpp"
#include "core/json.hpp"
#include "core/worker_pool.hpp"
#include "report/run_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

namespace zerosim::compare {

namespace fs = std::filesystem;
using core::Json;
using core::number_at;

namespace {

} // namespace

std::string four_significant_figures(double v)
{
  if (!std::isfinite(v))
    return std::to_string(v);
  // Rounded to 4 significant figures first ("%.3e"), so that 9.9996 becomes 10.00, not 9.9996 or 10.000.
  char sci[64];
  std::snprintf(sci, sizeof sci, "%.3e", v);
  const double rounded = std::strtod(sci, nullptr);
  const char* e = std::strchr(sci, 'e');
  const int exponent = rounded == 0 ? 0 : std::atoi(e + 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::max(0, 3 - exponent), rounded);
  return buf;
}

namespace {

/// A value with its unit, 4 significant figures (memory in GiB).
std::string shown(const std::string& figure, double v)
{
  if (figure.rfind("peak GPU memory", 0) == 0)
    return four_significant_figures(v / core::GIB) + " GiB";
  if (figure == "MFU")
    return four_significant_figures(100.0 * v) + " %";
  if (figure == "step time (s)")
    return four_significant_figures(v) + " s";
  return four_significant_figures(v);
}

/// The signed error in percent: + = predicted faster (rates: (p - m) / m; a time: (m - p) / m) or larger (memory).
double signed_error(const std::string& figure, double predicted, double measured)
{
  const double rel = (predicted - measured) / measured * 100.0;
  return figure == "step time (s)" ? -rel : rel;
}

/// The prediction of a log figure from `zerosim run --json`'s object.
std::optional<double> predicted_of(LogFigure f, const Json& r)
{
  switch (f) {
  case LogFigure::STEP_TIME_S:
    return number_at(r, {"step_time_s"});
  case LogFigure::SAMPLES_PER_S:
    return number_at(r, {"samples_per_s"});
  case LogFigure::TOKENS_PER_S_PER_GPU: {
    const auto t = number_at(r, {"tokens_per_s"});
    const auto g = number_at(r, {"gpus"});
    return t && g && *g > 0 ? std::optional<double>(*t / *g) : std::nullopt;
  }
  case LogFigure::TFLOPS_MODEL:
    return number_at(r, {"tflops_per_gpu", "model"});
  case LogFigure::TFLOPS_HARDWARE:
    return number_at(r, {"tflops_per_gpu", "hardware"});
  case LogFigure::MFU:
    return number_at(r, {"mfu"});
  case LogFigure::PEAK_ALLOCATED_BYTES:
    return number_at(r, {"peak_memory_bytes", "gpu"});
  case LogFigure::PEAK_RESERVED_BYTES:
    return number_at(r, {"peak_memory_bytes", "gpu_reserved"});
  }
  return std::nullopt;
}

/// The figure name and prediction of a measured-runs CSV row.
std::pair<std::string, std::optional<double>> predicted_of(const config::MeasuredRun& m, const Json& r)
{
  using config::FigureDefinition;
  using config::MeasuredFigure;
  switch (m.figure) {
  case MeasuredFigure::STEP_TIME_S:
    return {"step time (s)", number_at(r, {"step_time_s"})};
  case MeasuredFigure::TOKENS_PER_S:
    return {"tokens/s", number_at(r, {"tokens_per_s"})};
  case MeasuredFigure::SAMPLES_PER_S:
    return {"samples/s", number_at(r, {"samples_per_s"})};
  case MeasuredFigure::TFLOPS_PER_GPU:
    return m.definition == FigureDefinition::HARDWARE
               ? std::make_pair(std::string("TFLOPs per GPU (hardware)"), number_at(r, {"tflops_per_gpu", "hardware"}))
               : std::make_pair(std::string("TFLOPs per GPU (model)"), number_at(r, {"tflops_per_gpu", "model"}));
  case MeasuredFigure::MFU:
    return {"MFU", number_at(r, {"mfu"})};
  case MeasuredFigure::PEAK_MEMORY_BYTES:
    if (m.definition == FigureDefinition::RESERVED)
      return {"peak GPU memory, reserved", number_at(r, {"peak_memory_bytes", "gpu_reserved"})};
    if (m.definition == FigureDefinition::DEVICE)
      return {"peak GPU memory, device", number_at(r, {"peak_memory_bytes", "gpu_device"})};
    return {"peak GPU memory, allocated", number_at(r, {"peak_memory_bytes", "gpu"})};
  }
  return {"?", std::nullopt};
}

/// `zerosim run --json` of each scenario, simulated in forked workers (one SimGrid engine per process).
std::map<std::string, Json> simulate_all(const std::vector<std::string>& scenarios, const CompareOptions& o,
                                         std::ostream& err, int& failed)
{
  std::map<std::string, Json> out;
  core::PoolOptions pool;
  pool.jobs = o.jobs;
  pool.time_limit_s = 600;
  core::run_pool(
      core::count_to(scenarios.size()),
      [&](std::size_t i) { return report::run_json_line(scenarios[i], o.sets, o.calibration); },
      [&](std::size_t i, const core::WorkOutcome& w) {
        if (w.status == core::WorkStatus::DONE) {
          out[scenarios[i]] = Json::parse(w.payload);
        } else {
          ++failed;
          err << "compare: " << scenarios[i] << ": not simulated: " << w.message << "\n";
        }
      },
      pool);
  return out;
}

/// The run a row belongs to: its scenario's file name (the table's column; the bars' label with --runs, whose CSV
/// holds runs of several scenarios), or its log's file name (the bars' label with logs, several runs of one scenario).
std::string run_label(const Comparison& c, bool by_scenario)
{
  return fs::path(by_scenario ? c.scenario : c.what).filename().string();
}

/// compare.csv: every row of the table, numbers in full precision, memory in bytes.
void write_csv(const fs::path& dir, const std::vector<Comparison>& rows)
{
  std::string text = core::csv_record(
      {"figure", "measured", "predicted", "error_pct", "fits", "shortfall_bytes", "scenario", "from", "note"});
  for (const Comparison& c : rows)
    text += core::csv_record({c.figure, core::dump_json(Json(c.measured), -1), core::dump_json(Json(c.predicted), -1),
                              core::dump_json(Json(c.error_pct), -1), c.fits ? "true" : "false",
                              core::dump_json(Json(c.shortfall_bytes), -1), fs::path(c.scenario).filename().string(),
                              c.what, c.note});
  core::write_file(dir / "compare.csv", text);
}

/// The signed error of every row as a bar (errors.dat, errors.gp, errors.svg, errors.png): one block, colour and
/// legend entry per figure, the bars in the table's order within it, labelled with their run. Figures three decades
/// apart share one axis in percent, so a 10 % miss is as tall on any of them.
void error_bars(const std::vector<Comparison>& rows, bool by_scenario, const fs::path& dir, std::ostream& out,
                std::ostream& err)
{
  std::vector<std::string> figures; // in order of first appearance
  for (const Comparison& c : rows)
    if (std::find(figures.begin(), figures.end(), c.figure) == figures.end())
      figures.push_back(c.figure);
  std::ostringstream dat;
  dat << "# zerosim compare: the signed error of each row (docs/compare.md), one block per figure\n"
      << "# x error_pct fits(1/0) run\n";
  double low = 0, high = 0;
  int x = 0;
  for (const std::string& figure : figures) {
    dat << "# " << figure << "\n";
    for (const Comparison& c : rows) {
      if (c.figure != figure)
        continue;
      dat << x++ << " " << core::dump_json(Json(c.error_pct), -1) << " " << (c.fits ? 1 : 0) << " \""
          << run_label(c, by_scenario) << "\"\n";
      low = std::min(low, c.error_pct);
      high = std::max(high, c.error_pct);
    }
    dat << "\n\n";
  }
  core::write_file(dir / "errors.dat", dat.str());
  // The y range holds zero and every bar with a margin; an error of 0 everywhere still gets an axis.
  const double span = std::max(high - low, 1.0);
  std::ostringstream body;
  body << "set title 'Signed error per figure: + = predicted faster (rates, times) or larger (memory)'\n"
       << "set grid ytics\nset key outside right top\nset style fill solid 0.85 border -1\nset boxwidth 0.8\n"
       << "set xtics rotate by -45\nset xrange [-0.6:" << x - 0.4 << "]\n"
       << "set yrange [" << core::dump_json(Json(low - 0.1 * span), -1) << ":"
       << core::dump_json(Json(high + 0.1 * span), -1) << "]\n"
       << "set xlabel 'run (" << (by_scenario ? "scenario" : "log") << ")'\n"
       << "set ylabel 'signed error (%), each figure against its own measurement'\n"
       << "set xzeroaxis lt -1 lw 1\nplot ";
  for (std::size_t i = 0; i < figures.size(); ++i)
    body << (i ? ", " : "") << "'errors.dat' index " << i << " using 1:2:xtic(4) with boxes title '" << figures[i]
         << "'";
  // A prediction that does not fit is marked over its bar.
  const bool any_unfit = std::any_of(rows.begin(), rows.end(), [](const Comparison& c) { return !c.fits; });
  if (any_unfit)
    for (std::size_t i = 0; i < figures.size(); ++i)
      body << ", 'errors.dat' index " << i << " using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' "
           << (i == 0 ? "title 'prediction does not fit in GPU memory'" : "notitle");
  body << "\n";
  core::write_file(dir / "errors.gp",
                   core::two_terminal_script("errors", body.str(), "zerosim compare (docs/compare.md)"));
  std::string notice;
  if (core::gnuplot_draw(dir.string(), "errors", notice))
    out << "compare: error bars " << (dir / "errors.svg").string() << ", " << (dir / "errors.png").string() << "\n";
  else
    err << "compare: " << notice << "\n";
}

/// The table: one line per row, measured and predicted to 4 significant figures, the signed error in percent with one
/// decimal, whether the prediction fits, the row's scenario and where the measurement comes from.
void print_table(const std::vector<Comparison>& rows, std::ostream& out)
{
  std::size_t scenario_width = 8; // "scenario"
  for (const Comparison& c : rows)
    scenario_width = std::max(scenario_width, run_label(c, true).size());
  char head[256];
  std::snprintf(head, sizeof head, "%-28s %14s %14s %9s  %-4s  %-*s  %s\n", "figure", "measured", "predicted", "error",
                "fits", static_cast<int>(scenario_width), "scenario", "from");
  out << head;
  for (const Comparison& c : rows) {
    char line[512];
    std::snprintf(line, sizeof line, "%-28s %14s %14s %+7.1f %%  %-4s  %-*s  ", c.figure.c_str(),
                  shown(c.figure, c.measured).c_str(), shown(c.figure, c.predicted).c_str(), c.error_pct,
                  c.fits ? "yes" : "NO", static_cast<int>(scenario_width), run_label(c, true).c_str());
    out << line << c.what << (c.note.empty() ? "" : " (" + c.note + ")") << "\n";
  }
}

/// Whether a prediction fits (`fits` of zerosim run --json) and by how much it falls short.
std::pair<bool, double> fit_of(const Json& r)
{
  const bool fits = !r.contains("fits") || !r["fits"].is_boolean() || r["fits"].get<bool>();
  return {fits, number_at(r, {"shortfall_bytes"}).value_or(0)};
}

/// Says, before the table, which predictions do not fit: their figures are those of a run that would stop.
void print_unfit(const std::map<std::string, Json>& predicted, std::ostream& out)
{
  for (const auto& [scenario, r] : predicted)
    if (const auto [fits, shortfall] = fit_of(r); !fits)
      out << "compare: " << fs::path(scenario).filename().string() << " does not fit as predicted (short by "
          << four_significant_figures(shortfall / core::GIB)
          << " GiB): a real run of it would stop out of memory, so its rows (fits NO) compare a run that could "
             "not have happened\n";
}

} // namespace

int compare(const CompareOptions& o, std::ostream& out, std::ostream& err)
{
  std::vector<Comparison> rows;
  std::map<std::string, Json> predicted;
  int failed = 0;
  const bool by_scenario = !o.runs.empty();
  if (by_scenario) {
    if (!o.scenario.empty() || !o.logs.empty())
      throw core::InputError("compare: give SCENARIO LOG... or --runs CSV, not both");
    std::vector<config::MeasuredRun> runs;
    for (const std::string& csv : o.runs)
      for (config::MeasuredRun& r : config::read_measured_runs(csv))
        runs.push_back(std::move(r));
    std::vector<std::string> scenarios;
    for (const auto& r : runs)
      if (std::find(scenarios.begin(), scenarios.end(), r.scenario_path) == scenarios.end())
        scenarios.push_back(r.scenario_path);
    predicted = simulate_all(scenarios, o, err, failed);
    for (const auto& r : runs) {
      const auto it = predicted.find(r.scenario_path);
      if (it == predicted.end())
        continue;
      const auto [figure, p] = predicted_of(r, it->second);
      if (!p)
        continue;
      const auto [fits, shortfall] = fit_of(it->second);
      rows.push_back(Comparison{r.file + ":" + std::to_string(r.line), r.scenario_path, figure, r.measured, *p,
                                signed_error(figure, *p, r.measured), r.source, fits, shortfall});
    }
  } else {
    if (o.scenario.empty() || o.logs.empty())
      throw core::InputError("compare: expected SCENARIO LOG... (the logs of real runs of the scenario) or --runs CSV");
    std::vector<TrainingLog> logs;
    for (const std::string& f : o.logs)
      logs.push_back(read_training_log(f));
    predicted = simulate_all({o.scenario}, o, err, failed);
    if (predicted.empty())
      return 1;
    const Json& r = predicted.begin()->second;
    const auto [fits, shortfall] = fit_of(r);
    const auto global = number_at(r, {"samples_per_s"}).value_or(0) * number_at(r, {"step_time_s"}).value_or(0);
    for (const TrainingLog& log : logs) {
      if (log.global_batch && global > 0 && std::abs(static_cast<double>(*log.global_batch) - global) > 0.5)
        err << "compare: warning: " << log.file << ": global batch size " << *log.global_batch << " in the log, "
            << static_cast<long>(global + 0.5) << " in the scenario: the figures do not compare\n";
      for (LogFigure f : {LogFigure::STEP_TIME_S, LogFigure::SAMPLES_PER_S, LogFigure::TOKENS_PER_S_PER_GPU,
                          LogFigure::TFLOPS_MODEL, LogFigure::TFLOPS_HARDWARE, LogFigure::MFU,
                          LogFigure::PEAK_ALLOCATED_BYTES, LogFigure::PEAK_RESERVED_BYTES}) {
        int used = 0;
        const auto m = steady_value(log, f, o.skip, &used);
        const auto p = predicted_of(f, r);
        if (!m || !p || !(*m > 0))
          continue;
        const std::string figure = to_string(f);
        const bool totals = log.steps.size() == 1 && log.steps.front().step == 0;
        const bool peak = f == LogFigure::PEAK_ALLOCATED_BYTES || f == LogFigure::PEAK_RESERVED_BYTES;
        rows.push_back(Comparison{log.file, o.scenario, figure, *m, *p, signed_error(figure, *p, *m),
                                  totals ? "run average"
                                  : peak ? "largest of " + std::to_string(used) + " reports"
                                         : "median of " + std::to_string(used) + " steps after " +
                                               std::to_string(o.skip) + " skipped",
                                  fits, shortfall});
      }
      for (const std::string& n : log.notes)
        err << "compare: " << log.file << " (" << to_string(log.format) << "): " << n << "\n";
    }
  }
  if (rows.empty()) {
    err << "compare: no figure left to compare (each log's first " << o.skip
        << " steps are skipped as warm-up: --skip N takes fewer)\n";
    return failed > 0 ? 1 : 0;
  }
  // Without --out, a new folder of its own (core::output_dir), named after the scenario or the first CSV.
  const fs::path dir =
      core::output_dir(o.out_dir, fs::path(by_scenario ? o.runs.front() : o.scenario).stem().string(), "compare");
  print_unfit(predicted, out);
  out << "compare: + = predicted faster (rates, times) or larger (memory) than measured; measured and predicted to 4 "
         "significant figures\n\n";
  print_table(rows, out);
  out << "\n";
  write_csv(dir, rows);
  out << "compare: table " << (dir / "compare.csv").string() << "\n";
  error_bars(rows, by_scenario, dir, out, err);
  return failed > 0 ? 1 : 0;
}

} // namespace zerosim::compare
