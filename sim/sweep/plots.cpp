#include "sweep/plots.hpp"
#include "sweep/summary.hpp"

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/gnuplot.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

namespace zerosim::sweep {

namespace fs = std::filesystem;
using core::find_gnuplot;
using core::Json;
using core::run_gnuplot;

namespace {

/// The batch keys a throughput plot is drawn against, in the order they are preferred, with the axis label.
const std::vector<std::pair<std::string, std::string>> BATCH_KEYS = {
    {"training.global_batch", "global batch (sequences per step)"},
    {"training.micro_batch", "micro-batch per GPU (sequences)"},
    {"training.grad_accum", "gradient accumulation steps"},
};

/// The time breakdown's keys (docs/outputs.md), in the order they are stacked, with their legend.
const std::vector<std::pair<std::string, std::string>> BREAKDOWN = {
    {"compute", "compute"},
    {"optimizer", "optimizer"},
    {"exposed_comm", "exposed communication"},
    {"exposed_pcie", "exposed PCIe"},
    {"exposed_nvme", "exposed NVMe"},
    {"pipeline_bubble", "pipeline bubble"},
    {"idle", "idle"},
};

std::string num(double v)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

/// The script that draws `body` as NAME.svg, then NAME.png (core::two_terminal_script).
std::string two_terminals(const std::string& name, const std::string& body)
{
  return core::two_terminal_script(name, body, "zerosim sweep (docs/sweep.md \"Plots\")");
}

/// The points grouped into series by the values of every axis but `x_axis`: series label -> (x, record) pairs.
std::map<std::string, std::vector<std::pair<double, const Record*>>>
series_of(const Plan& plan, const std::vector<Record>& records, int x_axis)
{
  std::map<std::string, std::vector<std::pair<double, const Record*>>> out;
  for (const Record& r : records) {
    if (!r.done())
      continue;
    const std::string label = values_label(plan, r.values, x_axis);
    double x = 0;
    try {
      x = std::stod(r.values[static_cast<std::size_t>(x_axis)]);
    } catch (const std::exception&) {
      continue;
    }
    out[label.empty() ? "all points" : label].emplace_back(x, &r);
  }
  return out;
}

/// The marker of the points that do not fit in GPU memory, the same in every plot: a red cross, and its legend.
const char* const UNFIT_STYLE = "with points pt 2 ps 2 lw 2 lc rgb 'red'";

/// The x axis's label of a batch key.
std::string batch_label(const std::string& key)
{
  for (const auto& [k, label] : BATCH_KEYS)
    if (k == key)
      return label;
  return key;
}

/// The scenario's file name, for titles.
std::string scenario_name(const Plan& plan)
{
  return fs::path(plan.scenario).filename().string();
}

PlotFiles throughput_plot(const fs::path& dir, const Plan& plan, const std::vector<Record>& records, int x_axis)
{
  PlotFiles f;
  f.name = "throughput";
  std::ostringstream dat;
  dat << "# zerosim sweep: throughput against " << plan.axes[static_cast<std::size_t>(x_axis)].key
      << "; one block per series (blank lines between)\n# x tokens_per_s tflops_per_gpu_model fits(1/0) point\n";
  std::vector<std::string> titles;
  for (const auto& [label, pts] : series_of(plan, records, x_axis)) {
    dat << "# " << label << "\n";
    for (const auto& [x, r] : pts)
      dat << num(x) << " " << num(core::number_at(r->result, {"tokens_per_s"}).value_or(0)) << " "
          << num(core::number_at(r->result, {"tflops_per_gpu", "model"}).value_or(0)) << " "
          << (result_fits(*r) ? 1 : 0) << " " << r->point << "\n";
    dat << "\n\n";
    titles.push_back(label);
  }
  core::write_file(dir / "throughput.dat", dat.str());
  // The lines join the points that fit only. A point that does not fit is a red cross on the x axis (drawn at 0),
  // so it never sits at the top of a curve as if it were the best.
  auto plot = [&](int column) {
    std::ostringstream p;
    p << "plot ";
    for (std::size_t i = 0; i < titles.size(); ++i)
      p << (i ? ", " : "") << "'throughput.dat' index " << i << " using 1:($4 == 1 ? $" << column
        << " : 1/0) with linespoints title " << core::gnuplot_quoted(titles[i]);
    for (std::size_t i = 0; i < titles.size(); ++i)
      p << ", 'throughput.dat' index " << i << " using 1:($4 == 0 ? 0 : 1/0) " << UNFIT_STYLE << " "
        << (i == 0 ? "title 'does not fit in GPU memory (drawn at 0)'" : "notitle");
    return p.str() + "\n";
  };
  std::ostringstream body;
  body << "set multiplot layout 2,1 title "
       << core::gnuplot_quoted("Throughput against batch size: " + scenario_name(plan)) << "\n"
       << "set grid\nset key outside right top\nset logscale x 2\nset yrange [0:*]\n"
       << "set xlabel "
       << core::gnuplot_quoted(batch_label(plan.axes[static_cast<std::size_t>(x_axis)].key) + ", log scale")
       << "\nset ylabel 'throughput (tokens/s, all GPUs)'\n"
       << "set title 'tokens per second (y from 0)'\n"
       << plot(2) << "set ylabel 'TFLOPs per GPU (model, TFLOP/s)'\nset title 'model TFLOPs per GPU (y from 0)'\n"
       << plot(3) << "unset multiplot\n";
  core::write_file(dir / "throughput.gp", two_terminals("throughput", body.str()));
  f.files = {"throughput.dat", "throughput.gp", "throughput.svg", "throughput.png"};
  return f;
}

PlotFiles memory_plot(const fs::path& dir, const Plan& plan, const std::vector<Record>& records, int x_axis)
{
  PlotFiles f;
  f.name = "memory";
  std::ostringstream dat;
  dat << "# zerosim sweep: peak GPU memory (device total, GiB) against "
      << plan.axes[static_cast<std::size_t>(x_axis)].key
      << "; one block per series\n# x gpu_device_GiB fits(1/0) capacity_GiB point\n";
  std::vector<std::string> titles;
  double capacity = 0;
  for (const auto& [label, pts] : series_of(plan, records, x_axis)) {
    dat << "# " << label << "\n";
    for (const auto& [x, r] : pts) {
      const double cap = core::number_at(r->result, {"capacity_bytes", "gpu"}).value_or(0) / core::GIB;
      capacity = std::max(capacity, cap);
      const bool fits = result_fits(*r);
      dat << num(x) << " "
          << num(core::number_at(r->result, {"peak_memory_bytes", "gpu_device"}).value_or(0) / core::GIB) << " "
          << (fits ? 1 : 0) << " " << num(cap) << " " << r->point << "\n";
    }
    dat << "\n\n";
    titles.push_back(label);
  }
  core::write_file(dir / "memory.dat", dat.str());
  std::ostringstream body;
  body << "set title " << core::gnuplot_quoted("Peak GPU memory against batch size: " + scenario_name(plan)) << "\n"
       << "set grid\nset key outside right top\nset logscale x 2\nset yrange [0:*]\n"
       << "set xlabel "
       << core::gnuplot_quoted(batch_label(plan.axes[static_cast<std::size_t>(x_axis)].key) + ", log scale")
       << "\nset ylabel 'peak GPU memory, device total (GiB; y from 0)'\n"
       << "capacity = " << num(capacity) << "\n"
       << "set label 1 sprintf('GPU capacity %.0f GiB', capacity) at graph 0.02, first capacity offset 0,0.7 "
          "tc rgb 'red'\n"
       << "plot ";
  for (std::size_t i = 0; i < titles.size(); ++i)
    body << (i ? ", " : "") << "'memory.dat' index " << i << " using 1:2 with linespoints title "
         << core::gnuplot_quoted(titles[i]);
  // Out-of-memory points, marked over their series.
  for (std::size_t i = 0; i < titles.size(); ++i)
    body << ", 'memory.dat' index " << i << " using 1:($3 == 0 ? $2 : 1/0) " << UNFIT_STYLE << " "
         << (i == 0 ? "title 'does not fit in GPU memory'" : "notitle");
  body << ", capacity with lines dashtype 2 lw 2 lc rgb 'red' title 'GPU capacity'\n";
  core::write_file(dir / "memory.gp", two_terminals("memory", body.str()));
  f.files = {"memory.dat", "memory.gp", "memory.svg", "memory.png"};
  return f;
}

PlotFiles breakdown_plot(const fs::path& dir, const Plan& plan, const std::vector<Record>& records)
{
  PlotFiles f;
  f.name = "breakdown";
  std::ostringstream dat;
  dat << "# zerosim sweep: step time broken down per point (s), time_breakdown_s of docs/outputs.md\n# label";
  for (const auto& [k, legend] : BREAKDOWN)
    dat << " " << k;
  dat << " fits(1/0) step_time_s point\n";
  bool any_unfit = false;
  for (const Record& r : records) {
    if (!r.done())
      continue;
    const bool fits = result_fits(r);
    any_unfit = any_unfit || !fits;
    dat << core::gnuplot_quoted(values_label(plan, r.values) + (fits ? "" : " (does not fit)"));
    for (const auto& [k, legend] : BREAKDOWN)
      dat << " " << num(core::number_at(r.result, {"time_breakdown_s", k.c_str()}).value_or(0));
    dat << " " << (fits ? 1 : 0) << " " << num(core::number_at(r.result, {"step_time_s"}).value_or(0)) << " " << r.point
        << "\n";
  }
  core::write_file(dir / "breakdown.dat", dat.str());
  std::string axes_text;
  for (const Axis& a : plan.axes)
    axes_text += (axes_text.empty() ? "" : ", ") + axis_name(a.key);
  const std::size_t fits_column = BREAKDOWN.size() + 2, total_column = fits_column + 1;
  std::ostringstream body;
  body << "set title " << core::gnuplot_quoted("Step time per point: " + scenario_name(plan)) << "\n"
       << "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border -1\n"
       << "set boxwidth 0.75\nset grid ytics\nset key outside right top\nset xtics rotate by -45\n"
       << "set yrange [0:*]\nset xlabel " << core::gnuplot_quoted("swept values: " + axes_text)
       << "\nset ylabel 'step time (s)'\n"
       << "plot ";
  for (std::size_t i = 0; i < BREAKDOWN.size(); ++i)
    body << (i ? ", " : "") << "'breakdown.dat' using " << i + 2 << (i == 0 ? ":xtic(1)" : "") << " title "
         << core::gnuplot_quoted(BREAKDOWN[i].second);
  // A point that does not fit: a red cross on top of its bar (its label says so too), so a short bar of a run that
  // would stop out of memory does not pass for the fastest.
  if (any_unfit)
    body << ", 'breakdown.dat' using 0:($" << fits_column << " == 0 ? $" << total_column << " : 1/0) " << UNFIT_STYLE
         << " title 'does not fit in GPU memory'";
  body << "\n";
  core::write_file(dir / "breakdown.gp", two_terminals("breakdown", body.str()));
  f.files = {"breakdown.dat", "breakdown.gp", "breakdown.svg", "breakdown.png"};
  return f;
}

} // namespace

int batch_axis(const Plan& plan)
{
  for (const auto& [key, label] : BATCH_KEYS)
    for (std::size_t k = 0; k < plan.axes.size(); ++k)
      if (plan.axes[k].key == key)
        return static_cast<int>(k);
  return -1;
}

std::vector<PlotFiles> write_plots(const std::string& dir_text, const Plan& plan, const std::vector<Record>& records,
                                   std::string& notice)
{
  const fs::path dir(dir_text);
  std::vector<PlotFiles> plots;
  const bool any = std::any_of(records.begin(), records.end(), [](const Record& r) { return r.done(); });
  if (!any) {
    notice = "no point ran: no plots";
    return plots;
  }
  const int x = batch_axis(plan);
  if (x >= 0) {
    plots.push_back(throughput_plot(dir, plan, records, x));
    plots.push_back(memory_plot(dir, plan, records, x));
  }
  plots.push_back(breakdown_plot(dir, plan, records));
  const std::string gnuplot = find_gnuplot();
  if (gnuplot.empty()) {
    notice = "gnuplot not found: the plots' data and scripts are in " + dir.string() +
             " (install gnuplot-nox, then `zerosim plot " + dir.string() + "`)";
    return plots;
  }
  std::string failed;
  for (PlotFiles& p : plots) {
    p.drawn = run_gnuplot(gnuplot, dir, p.name + ".gp", fs::absolute(dir / (p.name + ".log")));
    if (p.drawn)
      fs::remove(dir / (p.name + ".log"));
    else
      failed += (failed.empty() ? "" : ", ") + p.name + " (" + (dir / (p.name + ".log")).string() + ")";
  }
  if (!failed.empty())
    notice = "gnuplot failed on: " + failed;
  return plots;
}

int plot_command(const std::string& dir, std::ostream& out, std::ostream& err)
{
  Plan plan;
  const std::vector<Record> records = read_sweep(dir, plan);
  Summary summary(plan); // the ranked table the sweep printed, from its records
  for (const Record& r : records)
    summary.add(r);
  out << summary.table();
  std::string notice;
  const std::vector<PlotFiles> plots = write_plots(dir, plan, records, notice);
  for (const PlotFiles& p : plots)
    out << "plot: " << p.name << (p.drawn ? "" : " (not drawn)") << ": " << (fs::path(dir) / p.files.back()).string()
        << "\n";
  if (!notice.empty())
    err << "plot: " << notice << "\n";
  return 0;
}

} // namespace zerosim::sweep
