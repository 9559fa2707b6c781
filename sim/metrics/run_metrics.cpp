#include "metrics/run_metrics.hpp"

#include "compute/compute_model.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

namespace zerosim::metrics {

namespace {

using schedule::TaskKind;

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
  case BreakdownKey::IDLE:
    return idle;
  }
  return idle;
}

double TimeBreakdown::at(BreakdownKey k) const
{
  return const_cast<TimeBreakdown&>(*this).at(k);
}

std::optional<BreakdownKey> breakdown_key(const schedule::Task& t)
{
  switch (t.kind) {
  case TaskKind::COMPUTE:
    return t.phase == schedule::Phase::OPTIMIZER ? BreakdownKey::OPTIMIZER : BreakdownKey::COMPUTE;
  case TaskKind::CPU_COMPUTE:
    return BreakdownKey::OPTIMIZER;
  case TaskKind::COLLECTIVE:
    return BreakdownKey::EXPOSED_COMM;
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

} // namespace

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
    schedule::TaskId order;
    int pos;
    memory::ReplayEvent e;
  };
  std::vector<Timed> timed;
  std::vector<schedule::TaskId> allocated_by(g.buffers.size(), -1); // the pairing is that of issue order
  std::vector<int> zero_length_count(g.tasks.size(), 0);
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    const auto id = static_cast<schedule::TaskId>(i);
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
      const schedule::TaskId by =
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

RunMetrics compute_metrics(const spec::Scenario& s, const workload::Workload& w, const engine::Timeline& t)
{
  if (t.ranks.empty())
    throw core::InternalError("metrics: the timeline has no simulated rank");
  const double step = t.step_time_s;
  if (!(step > 0) || !std::isfinite(step))
    throw core::InternalError("metrics: the step time " + core::format_number(step) + " is not positive");

  RunMetrics m;
  m.step_time_s = step;
  m.micro_steps = s.training.grad_accum;

  // Throughput (scenario-format.md "Results"): the global batch of one optimizer step.
  const auto samples = static_cast<double>(s.training.global_batch);
  m.samples_per_s = samples / step;
  m.tokens_per_s = samples * s.training.seq_len / step;

  // TFLOPs per GPU: Workload's FLOPs are per micro-batch per GPU; one step runs grad_accum of them.
  const double per_step = static_cast<double>(s.training.grad_accum);
  m.tflops_model = w.model_flops * per_step / step / 1e12;
  m.tflops_hardware = w.hardware_flops * per_step / step / 1e12;
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
  // their own graphs, built as the replay built its own (schedule::memory_ranks).
  auto take = [&](memory::MemoryReport r, int rank) {
    if (r.gpu > m.memory.gpu || (r.gpu == m.memory.gpu && rank < m.rank) || m.memory.peak_task.empty()) {
      m.memory = std::move(r);
      m.rank = rank;
    }
  };
  size_t worst = 0; // the simulated rank with the largest peak: its breakdown and device-time view are reported
  std::int64_t worst_gpu = -1;
  std::vector<bool> simulated(static_cast<size_t>(s.dp()), false);
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    check_timeline(t.ranks[i]);
    memory::MemoryReport r = memory::replay_memory(s, t.ranks[i].graph);
    if (r.gpu > worst_gpu) {
      worst_gpu = r.gpu;
      worst = i;
    }
    if (t.ranks[i].rank >= 0 && t.ranks[i].rank < s.dp())
      simulated[static_cast<size_t>(t.ranks[i].rank)] = true;
    take(std::move(r), t.ranks[i].rank);
  }
  if (t.step) // graphs the schedule built (not hand-made ones): the other ranks' are built the same way
    for (int rank : schedule::memory_ranks(s))
      if (!simulated[static_cast<size_t>(rank)])
        take(memory::replay_memory(s, schedule::build_step_graph(s, w, rank, *t.step)), rank);
  const engine::RankTimeline& rt = t.ranks[worst];
  m.timeline_rank = rt.rank;
  m.memory_device_time = replay_memory_timed(s, rt);
  for (size_t i = 0; i < rt.graph.tasks.size(); ++i)
    if (rt.graph.tasks[i].name == m.memory.peak_task) {
      m.peak_time_s = t.reuse.real_time(rt.times[i].issue);
      break;
    }
  m.breakdown = time_breakdown(rt, t.reuse, step);

  // The ladder when it does not fit; its rungs are judged in issue order, as `zerosim memory` judges them
  // (no new simulation).
  if (!m.memory.fits)
    m.ladder = memory::climb_ladder_rungs(s);

  // Time to train and cost (optional inputs).
  if (s.training.total_tokens)
    m.time_to_train_s = *s.training.total_tokens / m.tokens_per_s;
  if (s.price_per_gpu_hour) {
    const double gpus = s.cluster.total_gpus();
    m.cost_per_step = *s.price_per_gpu_hour * gpus * step / 3600.0;
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
