#include "metrics/run_metrics.hpp"

#include "compute/compute_model.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>

namespace zerosim::metrics {

namespace {

using spec::TaskKind;

void check_timeline(const engine::RankTimeline& r)
{
  if (r.times.size() != r.graph.tasks.size())
    throw core::InternalError("metrics: rank " + std::to_string(r.rank) + " has " + std::to_string(r.times.size()) +
                              " task times for " + std::to_string(r.graph.tasks.size()) + " tasks");
  for (size_t i = 0; i < r.times.size(); ++i) {
    const auto& tt = r.times[i];
    if (!std::isfinite(tt.start) || !std::isfinite(tt.end) || tt.end < tt.start)
      throw core::InternalError("metrics: rank " + std::to_string(r.rank) + ", task '" + r.graph.tasks[i].name +
                                "' has times [" + core::format_number(tt.start) + ", " + core::format_number(tt.end) +
                                "]");
  }
}

/// Moves `b.at(k)` by a few units in its last place until b.sum() == step exactly in floating point; restores it
/// and returns false when that cannot be reached (the sums on both sides of `step` are rounding ties).
bool close_sum(TimeBreakdown& b, BreakdownKey k, double step)
{
  double& v = b.at(k);
  const double kept = v;
  for (int i = 0; i < 64 && b.sum() != step; ++i)
    v = std::nextafter(v, b.sum() < step ? std::numeric_limits<double>::infinity() : 0.0);
  if (b.sum() == step)
    return true;
  v = kept;
  return false;
}

} // namespace

const char* to_string(BreakdownKey k)
{
  switch (k) {
  case BreakdownKey::COMPUTE:
    return "compute";
  case BreakdownKey::OPTIMIZER:
    return "optimizer";
  case BreakdownKey::EXPOSED_COMM:
    return "exposed_comm";
  case BreakdownKey::EXPOSED_PCIE:
    return "exposed_pcie";
  case BreakdownKey::EXPOSED_NVME:
    return "exposed_nvme";
  case BreakdownKey::PIPELINE_BUBBLE:
    return "pipeline_bubble";
  case BreakdownKey::IDLE:
    return "idle";
  }
  return "?";
}

double& TimeBreakdown::at(BreakdownKey k)
{
  switch (k) {
  case BreakdownKey::COMPUTE:
    return compute;
  case BreakdownKey::OPTIMIZER:
    return optimizer;
  case BreakdownKey::EXPOSED_COMM:
    return exposed_comm;
  case BreakdownKey::EXPOSED_PCIE:
    return exposed_pcie;
  case BreakdownKey::EXPOSED_NVME:
    return exposed_nvme;
  case BreakdownKey::PIPELINE_BUBBLE:
    return pipeline_bubble;
  case BreakdownKey::IDLE:
    return idle;
  }
  return idle;
}

double TimeBreakdown::at(BreakdownKey k) const
{
  return const_cast<TimeBreakdown&>(*this).at(k);
}

std::optional<BreakdownKey> breakdown_key(const spec::Task& t)
{
  switch (t.kind) {
  case TaskKind::COMPUTE:
    return t.phase == spec::Phase::OPTIMIZER ? BreakdownKey::OPTIMIZER : BreakdownKey::COMPUTE;
  case TaskKind::CPU_COMPUTE:
    return BreakdownKey::OPTIMIZER;
  case TaskKind::COLLECTIVE: // the tied embedding's all-reduce: the last stage waits there for the first's drain
    return t.group == spec::CommGroup::EMBEDDING ? BreakdownKey::PIPELINE_BUBBLE : BreakdownKey::EXPOSED_COMM;
  case TaskKind::SEND: // a pipeline neighbour's blocking transfer: the wait on the neighbour and the data
  case TaskKind::RECV:
    return BreakdownKey::PIPELINE_BUBBLE;
  case TaskKind::COPY:
    return BreakdownKey::EXPOSED_PCIE;
  case TaskKind::NVME_READ:
  case TaskKind::NVME_WRITE:
    return BreakdownKey::EXPOSED_NVME;
  case TaskKind::SYNC:
    return std::nullopt;
  }
  return std::nullopt;
}

namespace {

/// The sweep of time_breakdown over [t0, t1): per key (idle last), the time attributed to it.
std::array<double, BREAKDOWN_KEY_COUNT> sweep_breakdown(const engine::RankTimeline& r, double t0, double t1)
{
  // Interval endpoints: (time, key, +1 at the start / -1 at the end), clipped to [t0, t1].
  struct Edge {
    double time;
    int key;
    int delta;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * r.graph.tasks.size());
  for (size_t i = 0; i < r.graph.tasks.size(); ++i) {
    const auto key = breakdown_key(r.graph.tasks[i]);
    if (!key)
      continue;
    const double a = std::clamp(r.times[i].start, t0, t1);
    const double b = std::clamp(r.times[i].end, t0, t1);
    if (!(b > a))
      continue; // an instant, or outside the span: no time to attribute
    edges.push_back({a, static_cast<int>(*key), +1});
    edges.push_back({b, static_cast<int>(*key), -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) {
    return std::tie(x.time, x.key, x.delta) < std::tie(y.time, y.key, y.delta);
  });

  // Sweep: each elementary segment [prev, time) goes to the highest-priority key busy in it.
  std::array<double, BREAKDOWN_KEY_COUNT> acc{};
  std::array<int, BREAKDOWN_KEY_COUNT> busy{};
  const int idle = static_cast<int>(BreakdownKey::IDLE);
  auto attribute = [&](double from, double to) {
    if (!(to > from))
      return;
    int k = 0;
    while (k < idle && busy[static_cast<size_t>(k)] == 0)
      ++k;
    acc[static_cast<size_t>(k)] += to - from;
  };
  double prev = t0;
  for (size_t i = 0; i < edges.size();) {
    const double now = edges[i].time;
    attribute(prev, now);
    for (; i < edges.size() && edges[i].time == now; ++i)
      busy[static_cast<size_t>(edges[i].key)] += edges[i].delta;
    prev = now;
  }
  attribute(prev, t1);
  return acc;
}

/// From the swept times to the breakdown of a step of `step_time_s`: idle is the complement, checked against
/// the sweep's own, and the last units in the last place make the sum exact.
TimeBreakdown settle_breakdown(const std::array<double, BREAKDOWN_KEY_COUNT>& acc, double step_time_s, int rank)
{
  const int idle = static_cast<int>(BreakdownKey::IDLE);
  TimeBreakdown b;
  for (int k = 0; k < idle; ++k)
    b.at(static_cast<BreakdownKey>(k)) = acc[static_cast<size_t>(k)];
  // idle is what the others leave of the step; the sweep's own idle must agree within rounding.
  const double others = b.sum(); // idle is still 0
  // No idle segment at all: idle is 0, not the rounding of the complement.
  b.idle = acc[static_cast<size_t>(idle)] == 0 ? 0.0 : std::max(0.0, step_time_s - others);
  const double tolerance = 1e-9 * step_time_s;
  if (std::abs(step_time_s - others - acc[static_cast<size_t>(idle)]) > tolerance)
    throw core::InternalError("metrics: the time breakdown of rank " + std::to_string(rank) +
                              " does not add up: busy " + core::format_number(others) + " s, idle " +
                              core::format_number(acc[static_cast<size_t>(idle)]) + " s, step " +
                              core::format_number(step_time_s) + " s");
  // The last units in the last place go to the largest key that can take them (largest first; a key in the
  // step's own binade moves the sum by a whole ulp of the step and can straddle it, a smaller one cannot).
  std::array<BreakdownKey, BREAKDOWN_KEY_COUNT> by_size{};
  for (int k = 0; k < BREAKDOWN_KEY_COUNT; ++k)
    by_size[static_cast<size_t>(k)] = static_cast<BreakdownKey>(k);
  std::stable_sort(by_size.begin(), by_size.end(), [&](BreakdownKey x, BreakdownKey y) { return b.at(x) > b.at(y); });
  for (auto k : by_size)
    if (b.sum() == step_time_s || (b.at(k) > 0 && close_sum(b, k, step_time_s)))
      break;
  return b;
}

void check_step_time(double step_time_s)
{
  if (!(step_time_s > 0) || !std::isfinite(step_time_s))
    throw core::InternalError("metrics: the step time " + core::format_number(step_time_s) + " is not positive");
}

/// The passes of an inference timeline (docs/inference.md "Sampled decode passes"): those the graph holds, each
/// from its first task's start (the first pass: from 0) to the next one's start (the last: to the replay's end),
/// and the time of every pass of the request, a pass left out taking the linear interpolation, in its index, of the
/// passes in the graph on either side of it.
struct PassWindows {
  std::vector<int> passes;   ///< in the graph, ascending
  std::vector<double> start; ///< per pass in the graph
  std::vector<double> end;
  std::vector<double> time; ///< per pass of the request, 0 .. passes - 1
};

PassWindows pass_windows(const engine::Timeline& t)
{
  const int total = t.request_passes;
  if (total < 1)
    throw core::InternalError("metrics: an inference timeline without its request's passes");
  std::vector<double> first(static_cast<size_t>(total), std::numeric_limits<double>::infinity());
  for (const auto& r : t.ranks)
    for (size_t i = 0; i < r.graph.tasks.size(); ++i) {
      const int p = r.graph.tasks[i].micro_step;
      if (p < 0 || p >= total)
        throw core::InternalError("metrics: task '" + r.graph.tasks[i].name + "' names pass " + std::to_string(p) +
                                  " of a request of " + std::to_string(total) + " passes");
      first[static_cast<size_t>(p)] = std::min(first[static_cast<size_t>(p)], r.times[i].start);
    }
  PassWindows w;
  for (int p = 0; p < total; ++p)
    if (std::isfinite(first[static_cast<size_t>(p)]))
      w.passes.push_back(p);
  if (w.passes.empty() || w.passes.front() != 0 || w.passes.back() != total - 1)
    throw core::InternalError("metrics: an inference timeline must hold the prompt's pass and the last of its " +
                              std::to_string(total) + " passes");
  const size_t n = w.passes.size();
  for (size_t i = 0; i < n; ++i) {
    w.start.push_back(i == 0 ? 0.0 : first[static_cast<size_t>(w.passes[i])]);
    w.end.push_back(i + 1 < n ? first[static_cast<size_t>(w.passes[i + 1])] : t.step_time_s);
  }
  w.time.assign(static_cast<size_t>(total), 0.0);
  for (size_t i = 0; i < n; ++i) {
    const double d = w.end[i] - w.start[i];
    w.time[static_cast<size_t>(w.passes[i])] = d;
    if (i + 1 == n)
      break;
    const double next = w.end[i + 1] - w.start[i + 1];
    const int a = w.passes[i], c = w.passes[i + 1];
    for (int q = a + 1; q < c; ++q)
      w.time[static_cast<size_t>(q)] = d + (next - d) * (q - a) / (c - a);
  }
  return w;
}

/// The request's time: Σ of every pass's time, in pass order (RunMetrics::step_time_s of an inference).
double request_time(const PassWindows& w)
{
  double sum = 0;
  for (double d : w.time)
    sum += d;
  return sum;
}

/// "N" or "A-B" for the units A..B.
std::string unit_range(int first, int last)
{
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

/// The breakdown of an inference request: each pass in the graph swept over its window, each gap of n passes left
/// out adding n/2 times the two windows around it (the sum of the linear interpolation's weights on either side).
TimeBreakdown inference_breakdown(const engine::RankTimeline& r, const PassWindows& w, double request_time_s)
{
  check_timeline(r);
  check_step_time(request_time_s);
  std::array<double, BREAKDOWN_KEY_COUNT> acc{};
  std::vector<std::array<double, BREAKDOWN_KEY_COUNT>> windows;
  for (size_t i = 0; i < w.passes.size(); ++i)
    windows.push_back(sweep_breakdown(r, w.start[i], w.end[i]));
  for (size_t i = 0; i < w.passes.size(); ++i) {
    for (size_t k = 0; k < acc.size(); ++k)
      acc[k] += windows[i][k];
    if (i + 1 < w.passes.size()) {
      const double gap = w.passes[i + 1] - w.passes[i] - 1;
      for (size_t k = 0; k < acc.size(); ++k)
        acc[k] += gap / 2 * (windows[i][k] + windows[i + 1][k]);
    }
  }
  return settle_breakdown(acc, request_time_s, r.rank);
}

} // namespace

InferenceMetrics inference_metrics(const spec::Scenario& s, const engine::Timeline& t)
{
  if (t.ranks.empty())
    throw core::InternalError("metrics: the timeline has no simulated rank");
  const PassWindows w = pass_windows(t);
  InferenceMetrics im;
  im.passes = t.request_passes;
  im.simulated_passes = static_cast<int>(w.passes.size());
  im.pass_time_s = w.time;
  im.request_time_s = request_time(w);
  im.prefill_time_s = w.time.front();
  im.decode_time_s = im.request_time_s - im.prefill_time_s;
  const int g = s.inference.generate_tokens;
  if (g >= 2)
    im.time_per_output_token_s = im.decode_time_s / (g - 1);
  const double sequences = static_cast<double>(s.dp()) * s.inference.batch;
  im.tokens_per_s = sequences * g / im.request_time_s;
  im.prompt_tokens_per_s = sequences * s.inference.prompt_tokens / im.prefill_time_s;
  const auto& g0 = t.ranks.front().graph;
  const int last = w.passes.back();
  for (const auto& task : g0.tasks) {
    if (task.micro_step != last)
      continue;
    if (task.kind == TaskKind::NVME_READ)
      im.nvme_read_bytes_per_pass += task.bytes;
    else if (task.kind == TaskKind::COPY && task.direction == spec::CopyDirection::H2D)
      im.h2d_bytes_per_pass += task.bytes;
    else if (task.kind == TaskKind::COLLECTIVE && task.phase == spec::Phase::PARAM_GATHER)
      im.gather_bytes_per_pass += task.bytes;
  }
  for (const auto& buf : g0.buffers)
    if (buf.name == "kv_cache")
      im.kv_cache_bytes = buf.bytes;
  return im;
}

double StepTimeMap::shift(double t, int micro_step) const
{
  double shift = 0;
  for (const UnsimulatedSpan& span : spans)
    if (micro_step >= 0 ? span.last < micro_step : span.at_s <= t)
      shift += span.duration_s;
  return shift;
}

StepTimeMap step_time_map(const engine::Timeline& t)
{
  StepTimeMap map;
  if (t.request_passes > 0) {
    const PassWindows w = pass_windows(t);
    map.step_time_s = request_time(w);
    for (size_t i = 0; i + 1 < w.passes.size(); ++i) {
      const int first = w.passes[i] + 1, last = w.passes[i + 1] - 1;
      if (first > last)
        continue;
      UnsimulatedSpan span{w.start[i + 1], 0, first, last, ""};
      for (int q = first; q <= last; ++q)
        span.duration_s += w.time[static_cast<size_t>(q)];
      const std::string each = first == last
                                   ? "interpolated, " + core::format_fixed(span.duration_s, 3) + " s"
                                   : std::to_string(last - first + 1) + " interpolated between " +
                                         core::format_fixed(w.time[static_cast<size_t>(first)], 3) + " s and " +
                                         core::format_fixed(w.time[static_cast<size_t>(last)], 3) + " s, " +
                                         core::format_fixed(span.duration_s, 3) + " s";
      span.label = std::string(first == last ? "decode pass " : "decode passes ") + unit_range(first, last) +
                   " not simulated: " + each;
      map.spans.push_back(std::move(span));
    }
    return map;
  }
  map.step_time_s = t.step_time_s;
  const engine::AccumulationReuse& r = t.reuse;
  if (r.repeated() > 0) {
    // The simulated micro-steps are 0 .. k-2 and g-1 (docs/engine.md "Accumulation reuse"): k-1 .. g-2 repeat the
    // window [window_start_s, window_start_s + period_s), and go where micro-step g-1 starts in the simulated timeline.
    const int first = r.simulated_micro_steps - 1, last = r.micro_steps - 2;
    map.spans.push_back({r.window_start_s + r.period_s, r.repeated() * r.period_s, first, last,
                         std::string(first == last ? "micro-step " : "micro-steps ") + unit_range(first, last) +
                             " not simulated: " + std::to_string(r.repeated()) + " x " +
                             core::format_fixed(r.period_s, 3) + " s period"});
  }
  return map;
}

TimeBreakdown time_breakdown(const engine::RankTimeline& r, double step_time_s)
{
  check_timeline(r);
  check_step_time(step_time_s);
  return settle_breakdown(sweep_breakdown(r, 0, step_time_s), step_time_s, r.rank);
}

TimeBreakdown time_breakdown(const engine::RankTimeline& r, const engine::AccumulationReuse& reuse, double step_time_s)
{
  if (reuse.repeated() <= 0)
    return time_breakdown(r, step_time_s);
  check_timeline(r);
  check_step_time(step_time_s);
  std::array<double, BREAKDOWN_KEY_COUNT> acc = sweep_breakdown(r, 0, reuse.simulated_end_s);
  const auto window = sweep_breakdown(r, reuse.window_start_s, reuse.window_start_s + reuse.period_s);
  for (size_t k = 0; k < acc.size(); ++k)
    acc[k] += reuse.repeated() * window[k];
  return settle_breakdown(acc, step_time_s, r.rank);
}

std::vector<memory::ReplayEvent> timed_events(const engine::RankTimeline& r)
{
  check_timeline(r);
  using Kind = memory::ReplayEvent::Kind;
  const auto& g = r.graph;

  std::vector<memory::ReplayEvent> events;
  for (auto id : g.resident)
    events.push_back({Kind::ALLOC, id, -1});
  events.push_back({Kind::SAMPLE, -1, -1});

  // Sort key: time, class (0 = releases, 1 = a task's allocations, its sample and the releases of buffers
  // that live for no time), issue order, position inside the task.
  struct Timed {
    double time;
    int cls;
    spec::TaskId order;
    int pos;
    memory::ReplayEvent e;
  };
  std::vector<Timed> timed;
  std::vector<spec::TaskId> allocated_by(g.buffers.size(), -1); // the pairing is that of issue order
  std::vector<int> zero_length_count(g.tasks.size(), 0);
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    const auto id = static_cast<spec::TaskId>(i);
    const double start = r.times[i].start;
    const double end = r.times[i].end;
    const int n = static_cast<int>(t.allocs.size());
    for (int k = 0; k < n; ++k) {
      const auto b = t.allocs[static_cast<size_t>(k)];
      timed.push_back({start, 1, id, k, {Kind::ALLOC, b, id}});
      if (b >= 0 && static_cast<size_t>(b) < allocated_by.size())
        allocated_by[static_cast<size_t>(b)] = id;
    }
    if (n > 0)
      timed.push_back({start, 1, id, n, {Kind::SAMPLE, -1, id}});
    for (size_t k = 0; k < t.frees.size(); ++k) {
      const auto b = t.frees[k];
      const spec::TaskId by =
          b >= 0 && static_cast<size_t>(b) < allocated_by.size() ? allocated_by[static_cast<size_t>(b)] : -1;
      if (by >= 0) {
        const double born = r.times[static_cast<size_t>(by)].start;
        if (end < born)
          throw core::InternalError("metrics: rank " + std::to_string(r.rank) + ": task '" + t.name + "' ends at " +
                                    core::format_number(end) + " s and frees buffer '" +
                                    g.buffers[static_cast<size_t>(b)].name + "', which task '" +
                                    g.tasks[static_cast<size_t>(by)].name + "' allocates at " +
                                    core::format_number(born) + " s");
        if (end == born) { // lives for no time: released right after its allocating task's sample
          const int pos = static_cast<int>(g.tasks[static_cast<size_t>(by)].allocs.size()) + 1 +
                          zero_length_count[static_cast<size_t>(by)]++;
          timed.push_back({born, 1, by, pos, {Kind::FREE, b, id}});
          continue;
        }
      }
      // Not allocated in the step (resident) or allocated earlier. A release of a buffer never allocated is
      // left to the replay, which reports it.
      timed.push_back({end, 0, id, static_cast<int>(k), {Kind::FREE, b, id}});
    }
  }
  std::sort(timed.begin(), timed.end(), [](const Timed& x, const Timed& y) {
    return std::tie(x.time, x.cls, x.order, x.pos) < std::tie(y.time, y.cls, y.order, y.pos);
  });
  events.reserve(events.size() + timed.size());
  for (const auto& t : timed)
    events.push_back(t.e);
  return events;
}

memory::MemoryReport replay_memory_timed(const spec::Scenario& s, const engine::RankTimeline& r)
{
  return memory::replay_events(s, r.graph, timed_events(r));
}

namespace {

/// A pipeline stage's breakdown: its idle time is the schedule's warm-up and drain (the stage waits on the others
/// to start or to finish), which the contract counts as pipeline_bubble.
TimeBreakdown pipeline_breakdown(TimeBreakdown b)
{
  b.pipeline_bubble += b.idle;
  b.idle = 0;
  return b;
}

/// Each stage's figures from its first rank (rank stage x D x t, which the replay simulates and
/// schedule::memory_ranks names), its GPU peak the largest over the stage's replayed ranks (under ZeRO-1 the
/// data-parallel ranks own different partitions), and the bubble fraction over them.
PipelineMetrics pipeline_metrics(const spec::Scenario& s, const workload::Workload& w, const engine::Timeline& t,
                                 const std::map<int, std::int64_t>& gpu_peak_of_rank)
{
  PipelineMetrics p;
  const int per_stage = s.dp() * s.tp();
  double bubble_sum = 0;
  std::int64_t peak = -1;
  for (int st = 0; st < s.pp(); ++st) {
    StageMetrics sm;
    sm.stage = st;
    const int rank = st * per_stage;
    const auto timeline =
        std::find_if(t.ranks.begin(), t.ranks.end(), [&](const engine::RankTimeline& r) { return r.rank == rank; });
    if (timeline == t.ranks.end())
      throw core::InternalError("metrics: pipeline stage " + std::to_string(st) + "'s first rank " +
                                std::to_string(rank) + " was not simulated");
    const TimeBreakdown b = pipeline_breakdown(time_breakdown(*timeline, t.reuse, t.step_time_s));
    sm.pipeline_bubble_s = b.pipeline_bubble;
    sm.busy_s = t.step_time_s - b.pipeline_bubble;
    // Under accumulation reuse each micro-batch not simulated moves what the repeated one (the window's, micro-step
    // k-2) moves.
    const int repeated_micro_step = t.reuse.simulated_micro_steps - 2;
    for (const spec::Task& k : timeline->graph.tasks) {
      if (k.kind == spec::TaskKind::SEND || k.kind == spec::TaskKind::RECV)
        sm.p2p_bytes += k.bytes * (k.micro_step == repeated_micro_step ? 1 + t.reuse.repeated() : 1);
      // The blocks the stage runs: those its forward tasks compute.
      if (k.kind == spec::TaskKind::COMPUTE && k.phase == spec::Phase::FORWARD && k.layer >= 0) {
        const int block = w.layers[static_cast<std::size_t>(k.layer)].block;
        if (block >= 0) {
          sm.first_block = sm.first_block < 0 ? block : std::min(sm.first_block, block);
          sm.last_block = std::max(sm.last_block, block);
        }
      }
    }
    for (auto it = gpu_peak_of_rank.lower_bound(rank); it != gpu_peak_of_rank.end() && it->first < rank + per_stage;
         ++it)
      sm.peak_memory_bytes = std::max(sm.peak_memory_bytes, it->second);
    if (sm.peak_memory_bytes > peak) {
      peak = sm.peak_memory_bytes;
      p.peak_stage = st;
    }
    bubble_sum += b.pipeline_bubble / t.step_time_s;
    p.stages.push_back(sm);
  }
  p.bubble_fraction = bubble_sum / s.pp();
  return p;
}

} // namespace

RunMetrics compute_metrics(const spec::Scenario& s, const workload::Workload& w, const engine::Timeline& t)
{
  if (t.ranks.empty())
    throw core::InternalError("metrics: the timeline has no simulated rank");
  const double step = t.step_time_s;
  if (!(step > 0) || !std::isfinite(step))
    throw core::InternalError("metrics: the step time " + core::format_number(step) + " is not positive");

  RunMetrics m;
  const bool inference = s.training.mode == spec::Mode::INFERENCE;
  std::optional<PassWindows> windows;
  if (!inference) {
    m.step_time_s = step;
    m.micro_steps = s.training.grad_accum;

    // Throughput (docs/scenario-format.md "Results"): the global batch of one optimizer step.
    const auto samples = static_cast<double>(s.training.global_batch);
    m.samples_per_s = samples / step;
    m.tokens_per_s = samples * s.training.seq_len / step;

    // TFLOPs per GPU: Workload's FLOPs are per micro-batch per GPU of a tensor-parallel group; one step runs
    // grad_accum of them, and a pipeline's stages share each (1/p of the model a GPU, as Megatron counts it).
    const double per_step = static_cast<double>(s.training.grad_accum) / s.pp();
    m.tflops_model = w.model_flops * per_step / step / 1e12;
    m.tflops_hardware = w.hardware_flops * per_step / step / 1e12;
  } else {
    // One generate() request (docs/inference.md): the step is the request; throughput counts generated tokens and
    // completed sequences of every GPU; TFLOPs the forward FLOPs of every pass (nothing is recomputed).
    windows = pass_windows(t);
    m.inference = inference_metrics(s, t);
    m.step_time_s = m.inference->request_time_s;
    check_step_time(m.step_time_s);
    m.micro_steps = m.inference->passes;
    m.samples_per_s = static_cast<double>(s.dp()) * s.inference.batch / m.step_time_s;
    m.tokens_per_s = m.inference->tokens_per_s;
    m.tflops_model = (w.model_flops + w.decode_flops) / m.step_time_s / 1e12;
    m.tflops_hardware = m.tflops_model;
  }
  m.peak_flops = compute::peak_flops(s.cluster.node.gpu, s.training.precision);
  if (!(m.peak_flops > 0))
    throw core::InputError("gpu.peak: the node file gives no dense " +
                           std::string(spec::to_string(s.training.precision)) + " peak for " +
                           s.cluster.node.gpu.model + ": MFU needs it");
  m.mfu = m.tflops_model * 1e12 / m.peak_flops;
  m.hfu = m.tflops_hardware * 1e12 / m.peak_flops;

  // Memory (docs/outputs.md "Peak memory"): torch.cuda.max_memory_allocated follows the host's program order.
  // CUDACachingAllocator::free() lowers the allocated count when the host drops the tensor, even while another
  // stream still uses the block (record_stream only delays the block's reuse), and a tensor is allocated when
  // the host reaches its allocation. So the contract's `gpu` is the replay in issue order, the order of the host
  // issue times; the replay only places the peak in time. The rank with the largest peak is reported (lowest
  // rank on ties). Beside it, the device-time view: each buffer live from its allocating task's start to its
  // freeing task's end, what the GPU really holds at once when streams overlap (a diagnostic, not the contract).
  // The ranks not simulated (symmetric replay) whose allocations may differ are replayed in issue order from
  // their own graphs, which the engine built as it built its own (Timeline::memory_only_ranks). On ties the lowest of
  // schedule::memory_ranks is reported, the rank `zerosim memory` names too (run::analyze_memory replays only
  // those); a simulated rank outside them holds no more (stage12_memory_dp_ranks) and is reported only if it did.
  const auto order = [&](std::int64_t gpu, int rank) {
    const bool candidate =
        t.memory_ranks.empty() || std::binary_search(t.memory_ranks.begin(), t.memory_ranks.end(), rank);
    return std::make_tuple(-gpu, candidate ? 0 : 1, rank);
  };
  auto take = [&](memory::MemoryReport r, int rank) {
    r.rank = rank; // a copied graph's report was replayed as its original's
    if (m.memory.peak_task.empty() || order(r.gpu, rank) < order(m.memory.gpu, m.rank)) {
      m.memory = std::move(r);
      m.rank = rank;
    }
  };
  size_t worst = 0; // the simulated rank with the largest peak: its breakdown and device-time view are reported
  std::int64_t worst_gpu = -1;
  // A rank whose graph is a copy of another's (RankTimeline::graph_copy_of) replays as its original did.
  std::vector<memory::MemoryReport> replayed(t.ranks.size());
  const auto report_of = [&](int copy_of, const spec::TaskGraph& g) {
    return copy_of >= 0 ? replayed[static_cast<size_t>(copy_of)] : memory::replay_memory(s, g);
  };
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    check_timeline(t.ranks[i]);
    replayed[i] = report_of(t.ranks[i].graph_copy_of, t.ranks[i].graph);
    if (replayed[i].gpu > worst_gpu) {
      worst_gpu = replayed[i].gpu;
      worst = i;
    }
    take(replayed[i], t.ranks[i].rank);
  }
  std::map<int, std::int64_t> gpu_peak_of_rank; // every rank replayed, for the pipeline's stages
  for (size_t i = 0; i < t.ranks.size(); ++i)
    gpu_peak_of_rank[t.ranks[i].rank] = replayed[i].gpu;
  for (const engine::RankGraph& other : t.memory_only_ranks) {
    memory::MemoryReport r = report_of(other.graph_copy_of, other.graph);
    gpu_peak_of_rank[other.rank] = r.gpu;
    take(std::move(r), other.rank);
  }
  for (size_t i = 0; i < t.ranks.size(); ++i)
    if (t.ranks[i].rank == m.rank)
      worst = i; // the reported rank, when simulated, is the timeline's (its peak is the largest)
  const engine::RankTimeline& rt = t.ranks[worst];
  m.timeline_rank = rt.rank;
  m.memory_device_time = replay_memory_timed(s, rt);
  // Reserved at simulated times (docs/design.md "Memory", docs/memory.md §2.1): the caching allocator replayed where
  // the host issues the tasks, each block another stream used (record_stream) reusable only once that stream's work on
  // it is done. The simulated rank with the largest allocated peak stands for the reported one. Without a record_stream
  // buffer the replay at simulated times is the issue-order one: nothing to redo.
  if (s.training.mode == spec::Mode::TRAIN && memory::has_record_stream(rt.graph)) {
    std::vector<memory::TaskClock> clock(rt.times.size());
    for (size_t i = 0; i < rt.times.size(); ++i)
      clock[i] = {rt.times[i].issue, rt.times[i].end};
    memory::settle_gpu_terms(s, rt.graph, memory::deferred_free_events(rt.graph, clock), m.memory);
  }
  for (size_t i = 0; i < rt.graph.tasks.size(); ++i)
    if (rt.graph.tasks[i].name == m.memory.peak_task) {
      m.peak_time_s = t.reuse.real_time(rt.times[i].issue);
      if (windows) // later than the passes left out before its own
        for (int q = 0; q < rt.graph.tasks[i].micro_step; ++q)
          if (!std::binary_search(windows->passes.begin(), windows->passes.end(), q))
            m.peak_time_s += windows->time[static_cast<size_t>(q)];
      break;
    }
  m.breakdown = windows ? inference_breakdown(rt, *windows, m.step_time_s) : time_breakdown(rt, t.reuse, step);
  if (s.pp() > 1) {
    m.breakdown = pipeline_breakdown(m.breakdown);
    m.pipeline = pipeline_metrics(s, w, t, gpu_peak_of_rank);
  }

  // Time to train and cost (optional inputs).
  if (s.training.total_tokens && !inference)
    m.time_to_train_s = *s.training.total_tokens / m.tokens_per_s;
  if (s.price_per_gpu_hour) {
    const double gpus = s.cluster.total_gpus();
    m.cost_per_step = *s.price_per_gpu_hour * gpus * m.step_time_s / 3600.0;
    if (m.time_to_train_s)
      m.cost_to_train = *s.price_per_gpu_hour * gpus * *m.time_to_train_s / 3600.0;
  }

  // Warnings: the scenario's, then ours.
  m.warnings = s.warnings;
  const auto& a = m.memory;
  const auto& b = m.memory_device_time;
  if (b.gpu > a.gpu)
    m.warnings.push_back("memory: streams overlap: counted from each buffer's first use on the GPU to its last, rank " +
                         std::to_string(m.rank) + " holds up to " + core::format_gib(b.gpu) + " at once (at '" +
                         b.peak_task + "'), above the " + core::format_gib(a.gpu) +
                         " torch's allocator counts in host order; the allocator's cache covers the difference "
                         "(docs/outputs.md)");
  return m;
}

} // namespace zerosim::metrics
