// Helpers shared by the engine's hand-made-graph tests (physics, offload, tensor-parallel, interference, groups): tasks
// and graphs, a scenario from inline YAML, and a task's simulated duration.
#pragma once

#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::physics_test {

/// A scenario from `cluster_yaml` (a `cluster:` body) and `body` (training and framework blocks), Llama-2-7B, on the
/// priors alone: the physics tests state their expected values from the priors' formulas, not from the shipped
/// calibration profile (docs/calibration.md §8).
inline spec::Scenario load(const std::string& cluster_yaml, const std::string& body, std::vector<std::string> sets = {})
{
  const std::string text = "name: physics\nmodel: llama2-7b\ncluster:\n" + cluster_yaml + body;
  config::LoadOptions lo;
  lo.sets = std::move(sets);
  lo.calibration = "none";
  return config::load_scenario_text(text, std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/physics-test.yaml", lo);
}

/// One step of stage 0, grad_accum 1: the training block of the hand-made-graph tests.
inline const std::string TRAIN = "training: {seq_len: 1024, micro_batch: 1, grad_accum: 1, precision: bf16}\n"
                                 "deepspeed: {zero_optimization: {stage: 0}}\n";

inline spec::Task copy_task(const std::string& name, std::int64_t bytes, spec::CopyDirection dir, bool pinned = true)
{
  spec::Task t;
  t.kind = spec::TaskKind::COPY;
  t.stream = spec::Stream::HOST;
  t.name = name;
  t.bytes = bytes;
  t.direction = dir;
  t.pinned = pinned;
  return t;
}

/// A collective task: `kind` of `bytes` over one instance of `group` (`group_size` ranks), on `stream`.
inline spec::Task collective_task(const std::string& name, spec::CollectiveKind kind, std::int64_t bytes,
                                  spec::CommGroup group, int group_size, spec::Stream stream = spec::Stream::COMPUTE,
                                  std::vector<spec::TaskId> deps = {})
{
  spec::Task t;
  t.kind = spec::TaskKind::COLLECTIVE;
  t.stream = stream;
  t.name = name;
  t.collective = kind;
  t.bytes = bytes;
  t.group = group;
  t.group_size = group_size;
  t.deps = std::move(deps);
  return t;
}

/// A compute-bound kernel of `flops` (no bytes) on the compute stream.
inline spec::Task kernel_task(const std::string& name, double flops, std::vector<spec::TaskId> deps = {})
{
  spec::Task t;
  t.kind = spec::TaskKind::COMPUTE;
  t.phase = spec::Phase::OPTIMIZER;
  t.stream = spec::Stream::COMPUTE;
  t.name = name;
  t.flops = flops;
  t.deps = std::move(deps);
  return t;
}

/// A point-to-point SEND or RECV of `bytes` with global rank `peer` (the k-th SEND of a to b and the k-th RECV of b
/// from a are one transfer), in micro-step `micro_step`, on `stream`.
inline spec::Task p2p_task(spec::TaskKind kind, const std::string& name, int peer, std::int64_t bytes,
                           int micro_step = 0, spec::Stream stream = spec::Stream::COMPUTE)
{
  spec::Task t;
  t.kind = kind;
  t.stream = stream;
  t.name = name;
  t.peer = peer;
  t.bytes = bytes;
  t.micro_step = micro_step;
  return t;
}

/// A host delay of exactly `seconds` (Python work with no device work).
inline spec::Task host_wait_task(const std::string& name, double seconds)
{
  spec::Task t;
  t.kind = spec::TaskKind::SYNC;
  t.stream = spec::Stream::HOST;
  t.name = name;
  t.host_seconds = seconds;
  return t;
}

/// DeepSpeedCPUAdam over `elements`: 28 B of DRAM traffic per element (docs/deepspeed-schedule.md §9.1), 14 FLOPs.
inline spec::Task cpu_adam_task(std::int64_t elements)
{
  spec::Task t;
  t.kind = spec::TaskKind::CPU_COMPUTE;
  t.phase = spec::Phase::OPTIMIZER;
  t.stream = spec::Stream::HOST;
  t.name = "cpu_adam";
  t.elements = elements;
  t.mem_bytes = 28.0 * static_cast<double>(elements);
  t.flops = 14.0 * static_cast<double>(elements);
  return t;
}

inline spec::TaskGraph graph_of(std::vector<spec::Task> tasks)
{
  spec::TaskGraph g;
  for (auto& t : tasks)
    g.add_task(std::move(t));
  return g;
}

/// Simulated duration of task `task` of simulated rank `rank`.
inline double task_time(const engine::Timeline& tl, std::size_t rank, std::size_t task)
{
  const auto& t = tl.ranks.at(rank).times.at(task);
  return t.end - t.start;
}

/// The workload of hand-made graphs (their tasks carry their own work).
inline const workload::Workload EMPTY{};

} // namespace zerosim::physics_test
