#include "report/step_plots.hpp"

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/gnuplot.hpp"
#include "core/text.hpp"
#include "metrics/memory_over_step.hpp"
#include "metrics/run_metrics.hpp"
#include "report/memory_report.hpp"
#include "report/run_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <utility>

namespace zerosim::report {

namespace fs = std::filesystem;

namespace {

constexpr const char* ORIGIN = "zerosim run --plots (docs/outputs.md \"Plots\")";
constexpr const char* MEMORY = "memory_over_step";
constexpr const char* TIMELINE = "micro_step_timeline";
constexpr const char* PIPELINE = "pipeline_schedule";

/// Seconds on the trace's nanosecond grid, written exactly: "12.345678901".
std::string seconds(double s)
{
  return core::format_fixed(static_cast<double>(std::llround(s * 1e9)) / 1e9, 9);
}

/// The shaded spans of the step that were not simulated, for a picture whose x axis is the step's time.
std::string unsimulated_objects(const metrics::StepTimeMap& map, double from, double to)
{
  std::ostringstream gp;
  int id = 1;
  for (const metrics::UnsimulatedSpan& span : map.spans) {
    const double at = span.at_s + map.shift(span.at_s, span.first);
    if (at + span.duration_s < from || at > to)
      continue;
    gp << "set object " << id << " rect from " << seconds(at) << ", graph 0 to " << seconds(at + span.duration_s)
       << ", graph 1 behind fillcolor rgb '#e8e8e8' fillstyle solid 1.0 noborder\n"
       << "set label " << id << " " << core::gnuplot_quoted(span.label) << " at "
       << seconds(at + span.duration_s / 2)
       // a wide band holds its name across, a narrow one upright from its foot
       << (span.duration_s > 0.3 * (to - from) ? ", graph 0.5 center" : ", graph 0.03 left rotate by 90")
       << " textcolor rgb '#555555'\n";
    ++id;
  }
  return gp.str();
}

StepPlot memory_plot(const fs::path& dir, const spec::Scenario& s, const run::RunResult& result)
{
  const metrics::RunMetrics& m = result.metrics;
  const std::vector<metrics::MemoryPoint> points = metrics::memory_over_step(s, result.timeline, m);
  if (points.empty())
    throw core::InternalError("plots: the memory replay has no sample");
  std::ostringstream dat;
  dat << "# zerosim run --plots: GPU memory of rank " << m.rank << " over the step (docs/outputs.md \"Plots\")\n"
      << "# one row per task the host issues, at its issue time in the step (s); bytes\n"
      << "# time_s allocated reserved";
  for (int c = 0; c < spec::MEM_CATEGORY_COUNT; ++c)
    dat << " " << memory_category_key(c);
  dat << " micro_step task\n";
  size_t peak_allocated = 0, peak_reserved = 0; // the first samples reaching the maxima
  for (size_t i = 0; i < points.size(); ++i) {
    const metrics::MemoryPoint& p = points[i];
    if (p.sample.allocated > points[peak_allocated].sample.allocated)
      peak_allocated = i;
    if (p.sample.reserved > points[peak_reserved].sample.reserved)
      peak_reserved = i;
    dat << seconds(p.time_s) << " " << p.sample.allocated << " " << p.sample.reserved;
    for (std::int64_t b : p.sample.by_category)
      dat << " " << b;
    dat << " " << p.micro_step << " " << core::gnuplot_quoted(p.task) << "\n";
  }
  const std::string name = MEMORY;
  core::write_file(dir / (name + ".dat"), dat.str());

  const metrics::MemoryPoint& pa = points[peak_allocated];
  const metrics::MemoryPoint& pr = points[peak_reserved];
  // The breakdown at the allocated peak, a line each, in the top left corner (the y range leaves room above reserved).
  std::ostringstream marks;
  marks << "set label 20 "
        << core::gnuplot_quoted("allocated peak " + core::format_gib(pa.sample.allocated) + " at " + pa.task)
        << " at graph 0.02, graph 0.96 left front\n";
  for (int c = 0; c < spec::MEM_CATEGORY_COUNT; ++c)
    marks << "set label " << 21 + c << " "
          << core::gnuplot_quoted("  " + std::string(memory_category_key(c)) + " " +
                                  core::format_gib(pa.sample.by_category[static_cast<size_t>(c)]))
          << " at graph 0.02, graph " << core::format_fixed(0.91 - 0.045 * c, 3) << " left front\n";
  const double end = m.step_time_s;
  std::ostringstream body;
  body << "set title "
       << core::gnuplot_quoted("GPU memory over the step, rank " + std::to_string(m.rank) + ": " + s.name)
       << " font ',10'"
       << "\nset grid\nset key below horizontal\nGiB = 1073741824.0\n"
       << "set xlabel 'time in the step (s; each task at its host issue time)'\nset ylabel 'GPU memory (GiB)'\n"
       << "set xrange [0:" << seconds(end) << "]\nset yrange [0:" << pr.sample.reserved << " * 1.7 / GiB]\n"
       << unsimulated_objects(metrics::step_time_map(result.timeline), 0, end) << marks.str()
       << "set label 30 'allocated peak' at " << seconds(pa.time_s) << ", " << pa.sample.allocated
       << " / GiB point pointtype 7 pointsize 1.5 offset 1,-1 front\n"
       << "set label 31 " << core::gnuplot_quoted("reserved peak " + core::format_gib(pr.sample.reserved)) << " at "
       << seconds(pr.time_s) << ", " << pr.sample.reserved
       << " / GiB point pointtype 9 pointsize 1.5 offset 1,-1 front\n"
       << "plot ";
  // Allocated stacked by category: the sum of the categories up to each, drawn from the top one down.
  static const char* colours[spec::MEM_CATEGORY_COUNT] = {"#4e79a7", "#f28e2b", "#e15759",
                                                          "#76b7b2", "#59a14f", "#bab0ac"};
  for (int c = spec::MEM_CATEGORY_COUNT - 1; c >= 0; --c) {
    std::string sum;
    for (int k = 0; k <= c; ++k)
      sum += (k ? "+$" : "$") + std::to_string(4 + k);
    body << "'" << name << ".dat' using 1:((" << sum << ") / GiB) with fillsteps fillstyle solid 1.0 noborder lc rgb '"
         << colours[c] << "' title " << core::gnuplot_quoted(std::string("allocated: ") + memory_category_key(c))
         << ", ";
  }
  body << "'" << name << ".dat' using 1:($2 / GiB) with steps lw 2 lc rgb 'black' title 'allocated (torch)', '" << name
       << ".dat' using 1:($3 / GiB) with steps lw 2 dt 2 lc rgb '#b00000' title 'reserved (caching allocator)'\n";
  core::write_file(dir / (name + ".gp"), core::two_terminal_script(name, body.str(), ORIGIN));
  return StepPlot{name, {name + ".dat", name + ".gp", name + ".svg", name + ".png"}, false};
}

/// The rank the timeline draws: the one the breakdown is of.
const engine::RankTimeline& drawn_rank(const run::RunResult& result)
{
  for (const auto& r : result.timeline.ranks)
    if (r.rank == result.metrics.timeline_rank)
      return r;
  throw core::InternalError("plots: rank " + std::to_string(result.metrics.timeline_rank) + " is not in the timeline");
}

/// Whether a resource track of the timeline belongs in rank `r`'s rows: its node's, its own GPU's PCIe directions
/// and CPU work, the NICs, NVMe.
bool resource_row(const engine::Track& track, const engine::RankTimeline& r)
{
  if (track.process != "node" + std::to_string(r.node))
    return false;
  const std::string& n = track.name;
  const std::string pcie = "PCIe gpu" + std::to_string(r.local) + " ";
  return n.rfind(pcie, 0) == 0 || n.rfind("NIC", 0) == 0 || n == "NVMe" || n == "CPU rank " + std::to_string(r.rank);
}

StepPlot timeline_plot(const fs::path& dir, const spec::Scenario& s, const run::RunResult& result)
{
  const engine::Timeline& t = result.timeline;
  const engine::RankTimeline& r = drawn_rank(result);
  const int micro = drawn_micro_step(t);
  const metrics::StepTimeMap map = metrics::step_time_map(t);
  const bool passes = t.request_passes > 0;
  const std::string unit = passes ? "decode pass" : "micro-step";

  // Rows: the streams the micro-step uses, in the trace's order, then the node's resources.
  std::vector<size_t> tasks;
  std::vector<int> row_of_stream(spec::STREAM_COUNT, -1);
  for (size_t i = 0; i < r.graph.tasks.size(); ++i)
    if (r.graph.tasks[i].micro_step == micro) {
      tasks.push_back(i);
      row_of_stream[static_cast<size_t>(r.graph.tasks[i].stream)] = 0;
    }
  if (tasks.empty())
    throw core::InternalError("plots: rank " + std::to_string(r.rank) + " has no task of " + unit + " " +
                              std::to_string(micro));
  std::vector<std::string> rows;
  for (int st = 0; st < spec::STREAM_COUNT; ++st)
    if (row_of_stream[static_cast<size_t>(st)] == 0) {
      row_of_stream[static_cast<size_t>(st)] = static_cast<int>(rows.size());
      rows.push_back(stream_name(static_cast<spec::Stream>(st)));
    }
  const auto shifted = [&](size_t i, double time) {
    return time + map.shift(r.times[i].start, r.graph.tasks[i].micro_step);
  };
  double from = shifted(tasks.front(), r.times[tasks.front()].start), to = from;
  for (size_t i : tasks) {
    from = std::min(from, shifted(i, r.times[i].start));
    to = std::max(to, shifted(i, r.times[i].end));
  }

  static const spec::TaskKind kinds[] = {
      spec::TaskKind::COMPUTE,    spec::TaskKind::COLLECTIVE,  spec::TaskKind::COPY, spec::TaskKind::NVME_READ,
      spec::TaskKind::NVME_WRITE, spec::TaskKind::CPU_COMPUTE, spec::TaskKind::SYNC};
  static const char* colours[] = {"#4e79a7", "#e15759", "#f28e2b", "#59a14f", "#76b7b2", "#b07aa1", "#9c755f"};
  const std::string name = TIMELINE;
  std::ostringstream dat;
  dat << "# zerosim run --plots: " << unit << " " << micro << " of rank " << r.rank
      << ", one row per task at its trace times (s; docs/outputs.md \"Plots\")\n"
      << "# row start_s end_s kind_index kind stream task\n";
  for (size_t i : tasks) {
    const spec::Task& task = r.graph.tasks[i];
    // A point-to-point SEND or RECV is NCCL communication: drawn in the collectives' colour (kind_index 1).
    const spec::TaskKind drawn =
        task.kind == spec::TaskKind::SEND || task.kind == spec::TaskKind::RECV ? spec::TaskKind::COLLECTIVE : task.kind;
    const auto k = static_cast<size_t>(std::find(std::begin(kinds), std::end(kinds), drawn) - std::begin(kinds));
    dat << row_of_stream[static_cast<size_t>(task.stream)] << " " << seconds(shifted(i, r.times[i].start)) << " "
        << seconds(std::max(shifted(i, r.times[i].start), shifted(i, r.times[i].end))) << " " << k << " "
        << kind_name(task.kind) << " " << core::gnuplot_quoted(stream_name(task.stream)) << " "
        << core::gnuplot_quoted(task.name) << "\n";
  }
  core::write_file(dir / (name + ".dat"), dat.str());

  // The node's resources busy during the micro-step (recorded with the timeline's tracks).
  std::ostringstream res;
  res << "# zerosim run --plots: the resources of rank " << r.rank << "'s node busy during " << unit << " " << micro
      << " (s)\n# row start_s end_s resource serves\n";
  std::vector<int> row_of_track(t.tracks.size(), -1);
  for (size_t k = 0; k < t.tracks.size(); ++k)
    if (resource_row(t.tracks[k], r)) {
      row_of_track[k] = static_cast<int>(rows.size());
      rows.push_back(t.tracks[k].name);
    }
  for (const engine::TrackInterval& iv : t.intervals) {
    const int row = row_of_track[static_cast<size_t>(iv.track)];
    const double sh = map.shift(iv.start, -1);
    if (row < 0 || iv.end + sh < from || iv.start + sh > to)
      continue;
    res << row << " " << seconds(iv.start + sh) << " " << seconds(std::max(iv.start, iv.end) + sh) << " "
        << core::gnuplot_quoted(t.tracks[static_cast<size_t>(iv.track)].name) << " " << core::gnuplot_quoted(iv.name)
        << "\n";
  }
  core::write_file(dir / (name + "_resources.dat"), res.str());

  std::ostringstream body;
  body << "set title "
       << core::gnuplot_quoted(unit + " " + std::to_string(micro) + " of rank " + std::to_string(r.rank) +
                               ", per stream and resource: " + s.name)
       << " font ',10'"
       << "\nset grid xtics\nset key outside right top\nset xlabel 'time in the step (s)'\n"
       << "set xrange [" << seconds(from) << ":" << seconds(to) << "]\n"
       << "set yrange [" << rows.size() << " - 0.5:-0.5]\nset ytics (";
  for (size_t k = 0; k < rows.size(); ++k)
    body << (k ? ", " : "") << core::gnuplot_quoted(rows[k]) << " " << k;
  body << ")\nset style fill solid 0.85 noborder\n"
       << "minimum = " << core::format_number((to - from) * 0.04) << " # tasks at least this long are named\nplot ";
  for (size_t k = 0; k < std::size(kinds); ++k)
    body << (k ? ", " : "") << "'" << name << ".dat' using ($4 == " << k
         << " ? ($2 + $3) / 2 : 1/0):1:(($3 - $2) / 2):(0.35) with boxxyerror lc rgb '" << colours[k] << "' title "
         << core::gnuplot_quoted(kind_name(kinds[k]));
  body << ", '" << name << "_resources.dat' using (($2 + $3) / 2):1:(($3 - $2) / 2):(0.35) with boxxyerror "
       << "lc rgb '#7f7f7f' title 'resource busy'"
       << ", '" << name << ".dat' using (($2 + $3) / 2):1:($3 - $2 >= minimum ? stringcolumn(7) : '') with labels "
       << "font ',7' notitle\n";
  core::write_file(dir / (name + ".gp"), core::two_terminal_script(name, body.str(), ORIGIN));
  return StepPlot{name, {name + ".dat", name + "_resources.dat", name + ".gp", name + ".svg", name + ".png"}, false};
}

/// Under a pipeline: each stage's forward and backward of each micro-batch, one box per (micro-batch, phase) from its
/// first layer's start to its last layer's end, on the first simulated rank of the stage, at the trace's times
/// (docs/outputs.md "Plots"). A checkpointed block's recomputed forward runs just before its backward, block by block:
/// it is in the backward's box.
StepPlot pipeline_plot(const fs::path& dir, const spec::Scenario& s, const run::RunResult& result)
{
  const engine::Timeline& t = result.timeline;
  const int stages = s.training.pipeline_parallel;
  const int per_stage = s.cluster.total_gpus() / stages;
  const metrics::StepTimeMap map = metrics::step_time_map(t);
  static const char* phase_names[] = {"forward", "backward (with the recomputed forward)"};
  static const char* colours[] = {"#4e79a7", "#e15759"};
  struct Box {
    double start = 0, end = 0;
  };
  std::ostringstream dat;
  dat << "# zerosim run --plots: each pipeline stage's forward (0) and backward (1, with the recomputed forward) of "
         "each micro-batch on the stage's first simulated rank, at the trace's times (s; docs/outputs.md \"Plots\")\n"
      << "# stage start_s end_s phase_index micro_batch rank\n";
  double from = 0, to = 0;
  bool any = false;
  for (int st = 0; st < stages; ++st) {
    const engine::RankTimeline* r = nullptr;
    for (const engine::RankTimeline& c : t.ranks)
      if (c.rank / per_stage == st && (!r || c.rank < r->rank))
        r = &c;
    if (!r)
      throw core::InternalError("plots: no simulated rank of pipeline stage " + std::to_string(st));
    std::map<std::pair<int, int>, Box> boxes; // (micro-batch, phase) -> span
    for (size_t i = 0; i < r->graph.tasks.size(); ++i) {
      const spec::Task& task = r->graph.tasks[i];
      const bool forward = task.phase == spec::Phase::FORWARD;
      const bool backward = task.phase == spec::Phase::BACKWARD || task.phase == spec::Phase::RECOMPUTE;
      if (task.kind != spec::TaskKind::COMPUTE || task.micro_step < 0 || !(forward || backward))
        continue;
      const double sh = map.shift(r->times[i].start, task.micro_step);
      const double a = r->times[i].start + sh, b = std::max(r->times[i].start, r->times[i].end) + sh;
      const std::pair<int, int> key{task.micro_step, forward ? 0 : 1};
      Box& box = boxes.try_emplace(key, Box{a, b}).first->second;
      box.start = std::min(box.start, a);
      box.end = std::max(box.end, b);
    }
    for (const auto& [key, box] : boxes) {
      dat << st << " " << seconds(box.start) << " " << seconds(box.end) << " " << key.second << " " << key.first << " "
          << r->rank << "\n";
      from = any ? std::min(from, box.start) : box.start;
      to = any ? std::max(to, box.end) : box.end;
      any = true;
    }
  }
  if (!any)
    throw core::InternalError("plots: the pipeline has no forward or backward task");
  const std::string name = PIPELINE;
  core::write_file(dir / (name + ".dat"), dat.str());

  std::ostringstream body;
  body << "set title "
       << core::gnuplot_quoted("pipeline schedule, " + std::to_string(stages) +
                               " stages (white: the bubble): " + s.name)
       << " font ',10'"
       << "\nset grid xtics\nset key outside bottom center horizontal\nset xlabel 'time in the step (s)'\nset ylabel "
          "'stage'\n"
       << "set xrange [" << seconds(from) << ":" << seconds(to) << "]\n"
       << "set yrange [" << stages << " - 0.5:-0.5]\nset ytics 1\n"
       << unsimulated_objects(map, from, to) << "set style fill solid 0.85 border rgb 'white'\n"
       << "minimum = " << core::format_number((to - from) * 0.012) << " # boxes at least this long are numbered\nplot ";
  for (size_t k = 0; k < std::size(phase_names); ++k)
    body << (k ? ", " : "") << "'" << name << ".dat' using ($4 == " << k
         << " ? ($2 + $3) / 2 : 1/0):1:(($3 - $2) / 2):(0.4) with boxxyerror lc rgb '" << colours[k] << "' title "
         << core::gnuplot_quoted(phase_names[k]);
  body << ", '" << name << ".dat' using (($2 + $3) / 2):1:($3 - $2 >= minimum ? sprintf('%d', $5) : '') with labels "
       << "font ',7' notitle\n";
  core::write_file(dir / (name + ".gp"), core::two_terminal_script(name, body.str(), ORIGIN));
  return StepPlot{name, {name + ".dat", name + ".gp", name + ".svg", name + ".png"}, false};
}

} // namespace

int drawn_micro_step(const engine::Timeline& t)
{
  const int units = t.request_passes > 0 ? t.request_passes : t.reuse.micro_steps;
  if (units < 3 || t.ranks.empty())
    return 0;
  for (const spec::Task& task : t.ranks.front().graph.tasks)
    if (task.micro_step == 1)
      return 1;
  return 0;
}

std::vector<StepPlot> write_step_plots(const std::string& dir_text, const spec::Scenario& s,
                                       const run::RunResult& result, std::string& notice)
{
  const fs::path dir(dir_text);
  std::vector<StepPlot> plots = {memory_plot(dir, s, result), timeline_plot(dir, s, result)};
  if (s.training.pipeline_parallel > 1)
    plots.push_back(pipeline_plot(dir, s, result));
  std::string failed;
  for (StepPlot& p : plots) {
    std::string why;
    p.drawn = core::gnuplot_draw(dir.string(), p.name, why);
    if (!p.drawn)
      failed += (failed.empty() ? "" : "; ") + why;
  }
  notice = failed;
  return plots;
}

} // namespace zerosim::report
