// Helpers for the schedule tests: hand-built scenarios and synthetic workloads (the tests do not link
// the workload component), and readers of the task graph.
#pragma once

#include "schedule/schedule_builder.hpp" // the task vocabulary, unqualified as the builders use it
#include "schedule/step_graph.hpp"
#include "spec/scenario_spec.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::schedule::test {

/// A DeepSpeed bf16 Adam scenario on `gpus` GPUs of one node, `g` micro-steps, stage `stage`,
/// overlap_comm resolved as DeepSpeed does (True for stage 3, False otherwise, docs/deepspeed-schedule.md §11).
inline spec::Scenario scenario(int stage, int gpus, int g)
{
  spec::Scenario s;
  s.name = "schedule-test";
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = gpus;
  s.training.grad_accum = g;
  s.training.precision = spec::Precision::BF16;
  s.deepspeed.zero.stage = stage;
  s.deepspeed.zero.overlap_comm = stage == 3;
  return s;
}

/// Gives `l` ops carrying `fwd` forward FLOPs (backward: twice that), `recompute` of them re-run by a recompute under
/// checkpointing, and sets the layer's totals as workload::make_layer does, sums over its ops (the schedule's compute
/// tasks add up the ops they run).
inline void set_ops(workload::Layer& l, double fwd, double recompute = 0)
{
  auto add = [&](const char* name, double flops, bool recomputed) {
    workload::Op op;
    op.name = name;
    op.fwd_flops = flops;
    op.bwd_flops = 2 * flops;
    op.recomputed = recomputed;
    l.ops.push_back(op);
  };
  l.ops.clear();
  if (recompute > 0)
    add("recomputed", recompute, true);
  if (fwd > recompute)
    add("kept", fwd - recompute, false);
  l.fwd_flops = l.bwd_flops = l.recompute_flops = 0;
  for (const workload::Op& op : l.ops) {
    l.fwd_flops += op.fwd_flops;
    l.bwd_flops += op.bwd_flops;
    if (op.recomputed)
      l.recompute_flops += op.fwd_flops;
  }
}

/// `layers` identical BLOCK layers whose param tensors are `tensors` = {(tensor name, module), numel}.
inline workload::Workload synthetic(int layers, const std::vector<std::pair<std::string, std::int64_t>>& tensors,
                                    std::int64_t act_kept = 1000, double recompute_flops = 0)
{
  workload::Workload w;
  for (int l = 0; l < layers; ++l) {
    workload::Layer layer;
    layer.name = "block." + std::to_string(l);
    layer.block = l;
    for (const auto& [name, numel] : tensors) {
      const std::string module = name.substr(0, name.rfind('.'));
      layer.params.push_back(workload::ParamTensor{name, numel, module});
      w.params += numel;
    }
    set_ops(layer, 1e9, recompute_flops);
    layer.activation_bytes_kept = act_kept;
    layer.activation_bytes_backward_working = act_kept / 2;
    layer.activation_bytes_forward_working = act_kept / 4;
    w.layers.push_back(layer);
  }
  return w;
}

struct Volume {
  std::int64_t bytes = 0;
  int calls = 0;
};

/// Σ bytes and count of the collectives of `kind` (micro-step `mb`; -2 = every micro-step and the step).
inline Volume collectives(const TaskGraph& g, CollectiveKind kind, int mb = -2, Phase phase = Phase::OTHER,
                          bool any_phase = true)
{
  Volume v;
  for (const Task& t : g.tasks)
    if (t.kind == TaskKind::COLLECTIVE && t.collective == kind && (mb == -2 || t.micro_step == mb) &&
        (any_phase || t.phase == phase)) {
      v.bytes += t.bytes;
      ++v.calls;
    }
  return v;
}

/// Σ bytes of the copies in `dir` within `phase`.
inline std::int64_t copies(const TaskGraph& g, CopyDirection dir, Phase phase)
{
  std::int64_t b = 0;
  for (const Task& t : g.tasks)
    if (t.kind == TaskKind::COPY && t.direction == dir && t.phase == phase)
      b += t.bytes;
  return b;
}

inline std::int64_t io_bytes(const TaskGraph& g, TaskKind kind, Phase phase)
{
  std::int64_t b = 0;
  for (const Task& t : g.tasks)
    if (t.kind == kind && t.phase == phase)
      b += t.bytes;
  return b;
}

/// Σ bytes of the resident buffers on `d` (all categories when `any_cat`).
inline std::int64_t resident_bytes(const TaskGraph& g, Device d, MemCategory c = MemCategory::OTHER,
                                   bool any_cat = true)
{
  std::int64_t b = 0;
  for (BufferId id : g.resident) {
    const Buffer& buf = g.buffers[static_cast<std::size_t>(id)];
    if (buf.device == d && (any_cat || buf.category == c))
      b += buf.bytes;
  }
  return b;
}

/// Peak of the live sum of transient buffers of `category` on the GPU, replayed in issue order
/// (allocs at issue, frees at completion: a task's own allocs and frees are both live at it).
inline std::int64_t transient_peak(const TaskGraph& g, MemCategory c)
{
  std::int64_t live = 0, peak = 0;
  for (const Task& t : g.tasks) {
    for (BufferId id : t.allocs) {
      const Buffer& b = g.buffers[static_cast<std::size_t>(id)];
      if (b.device == Device::GPU && b.category == c)
        live += b.bytes;
    }
    peak = std::max(peak, live);
    for (BufferId id : t.frees) {
      const Buffer& b = g.buffers[static_cast<std::size_t>(id)];
      if (b.device == Device::GPU && b.category == c)
        live -= b.bytes;
    }
  }
  return peak;
}

inline int find_task(const TaskGraph& g, const std::string& name)
{
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (g.tasks[i].name == name)
      return static_cast<int>(i);
  return -1;
}

/// Every transient buffer is allocated exactly once and freed exactly once, by a task issued at or
/// after its allocating task; resident buffers are never allocated or freed by a task; every dep
/// names an earlier task; task names are unique.
inline void check_invariants(const TaskGraph& g, const std::string& what = "")
{
  INFO(what);
  std::vector<int> alloc_at(g.buffers.size(), -1), free_at(g.buffers.size(), -1);
  std::vector<int> allocs(g.buffers.size(), 0), frees(g.buffers.size(), 0);
  std::set<std::string> names;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    CHECK_MESSAGE(names.insert(t.name).second, "duplicate task name " << t.name);
    for (TaskId d : t.deps)
      CHECK_MESSAGE((d >= 0 && static_cast<std::size_t>(d) < i), t.name << " depends on a later task");
    for (BufferId b : t.allocs) {
      ++allocs[static_cast<std::size_t>(b)];
      alloc_at[static_cast<std::size_t>(b)] = static_cast<int>(i);
    }
    for (BufferId b : t.frees) {
      ++frees[static_cast<std::size_t>(b)];
      free_at[static_cast<std::size_t>(b)] = static_cast<int>(i);
    }
  }
  std::vector<char> is_resident(g.buffers.size(), 0);
  for (BufferId r : g.resident)
    is_resident[static_cast<std::size_t>(r)] = 1;
  int bad = 0;
  for (std::size_t b = 0; b < g.buffers.size(); ++b) {
    const bool ok = is_resident[b] ? (allocs[b] == 0 && frees[b] == 0)
                                   : (allocs[b] == 1 && frees[b] == 1 && free_at[b] >= alloc_at[b]);
    if (!ok && bad++ < 5)
      FAIL_CHECK("buffer " << g.buffers[b].name << ": allocs " << allocs[b] << ", frees " << frees[b] << ", alloc at "
                           << alloc_at[b] << ", free at " << free_at[b]);
    CHECK(g.buffers[b].bytes > 0);
  }
  CHECK(bad == 0);
}

} // namespace zerosim::schedule::test
