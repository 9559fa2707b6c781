#include "compare/compare.hpp"

#include "calibration/measured_runs.hpp"
#include "compare/training_logs.hpp"
#include "core/error.hpp"
#include "core/gnuplot.hpp"
#include "core/json.hpp"
#include "core/worker_pool.hpp"
#include "sweep/sweep.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace zerosim::compare {

namespace fs = std::filesystem;
using core::Json;
using sweep::number_at;

namespace {

std::string sig4(double v)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

/// A value with its unit, 4 significant figures (memory in GiB).
std::string shown(const std::string& figure, double v)
{
  if (figure.rfind("peak GPU memory", 0) == 0)
    return sig4(v / (1024.0 * 1024.0 * 1024.0)) + " GiB";
  if (figure == "MFU")
    return sig4(100.0 * v) + " %";
  if (figure == "step time (s)")
    return sig4(v) + " s";
  return sig4(v);
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
std::pair<std::string, std::optional<double>> predicted_of(const calibration::MeasuredRun& m, const Json& r)
{
  using calibration::FigureDefinition;
  using calibration::MeasuredFigure;
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
      [&](std::size_t i) {
        sweep::Plan plan;
        plan.scenario = scenarios[i];
        plan.sets = o.sets;
        plan.calibration = o.calibration;
        return sweep::simulate_point(plan, {});
      },
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

void scatter(const std::vector<Comparison>& rows, const std::string& out_dir, std::ostream& out, std::ostream& err)
{
  const fs::path dir = out_dir.empty() ? fs::path("compare.out") : fs::path(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw core::InputError("compare: --out: cannot create " + dir.string() + ": " + ec.message());
  // One block per figure, x measured, y predicted (both in the figure's unit; memory in GiB).
  std::map<std::string, std::vector<const Comparison*>> by_figure;
  for (const Comparison& c : rows)
    by_figure[c.figure].push_back(&c);
  std::ostringstream dat;
  dat << "# zerosim compare: measured, predicted per figure (memory in GiB); one block per figure\n";
  std::vector<std::string> titles;
  for (const auto& [figure, list] : by_figure) {
    dat << "# " << figure << "\n";
    const double scale = figure.rfind("peak GPU memory", 0) == 0 ? 1.0 / (1024.0 * 1024.0 * 1024.0) : 1.0;
    for (const Comparison* c : list)
      dat << c->measured * scale << " " << c->predicted * scale << "\n";
    dat << "\n\n";
    titles.push_back(figure);
  }
  {
    std::ofstream f(dir / "compare.dat", std::ios::binary | std::ios::trunc);
    f << dat.str();
  }
  std::ostringstream body;
  body << "set title 'Predicted against measured (zerosim compare)'\nset grid\nset key outside right top\n"
       << "set logscale xy\nset xlabel 'measured (each figure in its unit: s, samples/s, TFLOP/s, GiB, ...)'\n"
       << "set ylabel 'predicted (same unit)'\nplot ";
  for (std::size_t i = 0; i < titles.size(); ++i)
    body << (i ? ", " : "") << "'compare.dat' index " << i << " using 1:2 with points pt 7 ps 1.2 title '" << titles[i]
         << "'";
  body << ", x with lines dashtype 2 lc rgb 'gray' title 'predicted = measured'\n";
  {
    std::ofstream f(dir / "compare.gp", std::ios::binary | std::ios::trunc);
    f << core::two_terminal_script("compare", body.str(), "zerosim compare (docs/compare.md)");
  }
  std::string notice;
  if (core::gnuplot_draw(dir.string(), "compare", notice))
    out << "compare: scatter plot " << (dir / "compare.svg").string() << ", " << (dir / "compare.png").string() << "\n";
  else
    err << "compare: " << notice << "\n";
}

} // namespace

int compare(const CompareOptions& o, std::ostream& out, std::ostream& err)
{
  std::vector<Comparison> rows;
  int failed = 0;
  if (!o.runs.empty()) {
    if (!o.scenario.empty() || !o.logs.empty())
      throw core::InputError("compare: give SCENARIO LOG... or --runs CSV, not both");
    std::vector<calibration::MeasuredRun> runs;
    for (const std::string& csv : o.runs)
      for (calibration::MeasuredRun& r : calibration::read_measured_runs(csv))
        runs.push_back(std::move(r));
    std::vector<std::string> scenarios;
    for (const auto& r : runs)
      if (std::find(scenarios.begin(), scenarios.end(), r.scenario_path) == scenarios.end())
        scenarios.push_back(r.scenario_path);
    const std::map<std::string, Json> predicted = simulate_all(scenarios, o, err, failed);
    for (const auto& r : runs) {
      const auto it = predicted.find(r.scenario_path);
      if (it == predicted.end())
        continue;
      const auto [figure, p] = predicted_of(r, it->second);
      if (!p)
        continue;
      rows.push_back(Comparison{r.file + ":" + std::to_string(r.line), r.scenario_path, figure, r.measured, *p,
                                signed_error(figure, *p, r.measured), r.source});
    }
  } else {
    if (o.scenario.empty() || o.logs.empty())
      throw core::InputError("compare: expected SCENARIO LOG... (the logs of real runs of the scenario) or --runs CSV");
    std::vector<TrainingLog> logs;
    for (const std::string& f : o.logs)
      logs.push_back(read_training_log(f));
    const std::map<std::string, Json> predicted = simulate_all({o.scenario}, o, err, failed);
    if (predicted.empty())
      return 1;
    const Json& r = predicted.begin()->second;
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
                                               std::to_string(o.skip) + " skipped"});
      }
      for (const std::string& n : log.notes)
        err << "compare: " << log.file << " (" << to_string(log.format) << "): " << n << "\n";
    }
  }
  out << "compare: + = predicted faster (rates, times) or larger (memory) than measured\n\n";
  char head[256];
  std::snprintf(head, sizeof head, "%-28s %14s %14s %10s  %s\n", "figure", "measured", "predicted", "error", "from");
  out << head;
  for (const Comparison& c : rows) {
    char line[512];
    std::snprintf(line, sizeof line, "%-28s %14s %14s %+9.1f %%  ", c.figure.c_str(),
                  shown(c.figure, c.measured).c_str(), shown(c.figure, c.predicted).c_str(), c.error_pct);
    out << line << c.what << (c.note.empty() ? "" : " (" + c.note + ")") << "\n";
  }
  if (rows.empty())
    err << "compare: no figure left to compare (each log's first " << o.skip
        << " steps are skipped as warm-up: --skip N takes fewer)\n";
  if (rows.size() >= 2)
    scatter(rows, o.out_dir, out, err);
  return failed > 0 ? 1 : 0;
}

} // namespace zerosim::compare
