// The step replay's activities: each task, copy, NVMe transfer and collective phase started on the SimGrid
// platform, and the SM share an NCCL kernel holds. docs/engine.md.
#include "engine/step_replay.hpp"

#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace zerosim::engine::replay {

void StepReplay::start_task(int ri, TaskId t)
{
  const auto r = static_cast<std::size_t>(ri);
  RankTimeline& rk = timeline_.ranks[r];
  const Task& k = rk.graph.tasks[static_cast<std::size_t>(t)];
  rk.times[static_cast<std::size_t>(t)].start = now();
  const int node = rk.node, local = rk.local;
  switch (k.kind) {
  case TaskKind::SYNC: {
    // A host wait takes no time of its own; Python work on the host thread (Task::host_seconds) is a delay.
    if (!(k.host_seconds > 0)) {
      finish_task(ri, t);
      return;
    }
    const int j = new_job(ri, t, 1);
    exec(token(Cont::TASK_PART, j, k.name, track(proc(rk), "host rank " + std::to_string(rk.rank))), platform_->timer(),
         k.host_seconds * platform::WORK_UNITS_PER_SECOND);
    return;
  }
  case TaskKind::COMPUTE: {
    const double d = duration_[r][static_cast<std::size_t>(t)];
    if (!(d > 0)) {
      finish_task(ri, t);
      return;
    }
    const int j = new_job(ri, t, 1);
    const double sm = sm_duration_[r][static_cast<std::size_t>(t)];
    if (sm_sms_ > 0 && sm < d) {
      // Interference (docs/engine.md): the SM-bound stage on the GPU, where a collective's SM share is held,
      // then the memory-bound rest (launch gaps, host-bound waits included) beside it, where it is not.
      jobs_[static_cast<std::size_t>(j)].memory_stage_s = d - sm;
      if (sm > 0)
        exec(token(Cont::TASK_STAGE, j, k.name), platform_->gpu(node, local), sm * platform::WORK_UNITS_PER_SECOND);
      else
        memory_stage(j);
      return;
    }
    exec(token(Cont::TASK_PART, j, k.name), platform_->gpu(node, local), d * platform::WORK_UNITS_PER_SECOND);
    return;
  }
  case TaskKind::COLLECTIVE: {
    const auto idx = static_cast<std::size_t>(coll_of_[r][static_cast<std::size_t>(t)]);
    Collective& cl = colls_[idx];
    cl.task_of_rank[r] = t;
    if (cl.name.empty())
      cl.name = k.name;
    if (++cl.ready == static_cast<int>(timeline_.ranks.size()))
      start_collective(static_cast<int>(idx));
    return;
  }
  case TaskKind::COPY: {
    // The route's latency (the GPU's PCIe link) as a delay, then the data (copy_transfer).
    const int j = new_job(ri, t, k.pinned ? 1 : 2);
    const double lat = platform_->route_latency(platform_->cpu(node), platform_->gpu(node, local));
    if (lat > 0)
      exec(token(Cont::TASK_DELAY, j, k.name + " (latency)"), platform_->timer(),
           lat * platform::WORK_UNITS_PER_SECOND);
    else
      copy_transfer(j);
    return;
  }
  case TaskKind::CPU_COMPUTE: {
    const compute::CpuWork& cw = cpu_work_[r][static_cast<std::size_t>(t)];
    const bool has_exec = cw.flops > 0, has_dram = cw.dram_bytes > 0;
    if (!has_exec && !has_dram) {
      finish_task(ri, t);
      return;
    }
    const int j = new_job(ri, t, (has_exec ? 1 : 0) + (has_dram ? 1 : 0));
    const int tr = track(proc(rk), "CPU rank " + std::to_string(rk.rank));
    if (has_exec)
      exec(token(Cont::TASK_PART, j, k.name, tr), platform_->cpu(node), cw.flops / cw.threads, cw.threads);
    if (has_dram)
      flow(token(Cont::TASK_PART, j, k.name + " (DRAM)", has_exec ? -1 : tr), platform_->cpu(node),
           platform_->dram(node), cw.dram_bytes);
    return;
  }
  case TaskKind::NVME_READ:
  case TaskKind::NVME_WRITE: {
    // The request waves' latency and the PCIe route's (a delay on the timer host: it holds no bandwidth),
    // then the transfer striped over every drive of the node (Task::request_waves, nvme_transfer;
    // docs/engine.md "NVMe").
    const int j = new_job(ri, t, 1);
    const double lat = duration_[r][static_cast<std::size_t>(t)] +
                       platform_->route_latency(platform_->nvme(node), platform_->cpu(node));
    if (lat > 0)
      exec(token(Cont::TASK_DELAY, j, k.name + " (request latency)"), platform_->timer(),
           lat * platform::WORK_UNITS_PER_SECOND);
    else
      nvme_transfer(j);
    return;
  }
  }
}

void StepReplay::task_data(int j)
{
  const Job& jb = jobs_[static_cast<std::size_t>(j)];
  const Task& k = timeline_.ranks[static_cast<std::size_t>(jb.rank)].graph.tasks[static_cast<std::size_t>(jb.task)];
  if (k.kind == TaskKind::COPY)
    copy_transfer(j);
  else
    nvme_transfer(j);
}

void StepReplay::copy_transfer(int j)
{
  const Job& jb = jobs_[static_cast<std::size_t>(j)];
  const RankTimeline& rk = timeline_.ranks[static_cast<std::size_t>(jb.rank)];
  const Task& k = rk.graph.tasks[static_cast<std::size_t>(jb.task)];
  const bool h2d = k.direction == spec::CopyDirection::H2D;
  const int tr = track(proc(rk), "PCIe gpu" + std::to_string(rk.local) + (h2d ? " H2D" : " D2H"));
  auto* g = platform_->gpu(rk.node, rk.local);
  auto* c = platform_->cpu(rk.node);
  flow(token(Cont::TASK_PART, j, k.name, tr), h2d ? c : g, h2d ? g : c, static_cast<double>(k.bytes));
  if (!k.pinned)
    flow(token(Cont::TASK_PART, j, k.name + " (staging memcpy)"), c, platform_->dram(rk.node),
         PAGEABLE_STAGING_DRAM_FACTOR * static_cast<double>(k.bytes));
}

void StepReplay::nvme_transfer(int j)
{
  const Job& jb = jobs_[static_cast<std::size_t>(j)];
  const RankTimeline& rk = timeline_.ranks[static_cast<std::size_t>(jb.rank)];
  const Task& k = rk.graph.tasks[static_cast<std::size_t>(jb.task)];
  const bool write = k.kind == TaskKind::NVME_WRITE;
  auto* nv = platform_->nvme(rk.node);
  auto* c = platform_->cpu(rk.node);
  flow(token(Cont::TASK_PART, j, k.name, track(proc(rk), "NVMe")), write ? c : nv, write ? nv : c,
       static_cast<double>(k.bytes));
}

int StepReplay::new_job(int ri, TaskId t, int parts)
{
  jobs_.push_back(Job{ri, t, parts, 0});
  return static_cast<int>(jobs_.size()) - 1;
}

void StepReplay::memory_stage(int j)
{
  const Job& jb = jobs_[static_cast<std::size_t>(j)];
  const RankTimeline& rk = timeline_.ranks[static_cast<std::size_t>(jb.rank)];
  exec(token(Cont::TASK_PART, j, rk.graph.tasks[static_cast<std::size_t>(jb.task)].name + " (memory-bound)"),
       platform_->gpu_memory(rk.node, rk.local), jb.memory_stage_s * platform::WORK_UNITS_PER_SECOND);
}

void StepReplay::start_collective(int idx)
{
  Collective& cl = colls_[static_cast<std::size_t>(idx)];
  std::int64_t bytes = 0;
  spec::CollectiveKind kind = spec::CollectiveKind::ALL_REDUCE;
  spec::CommGroup group = spec::CommGroup::WORLD;
  for (std::size_t r = 0; r < timeline_.ranks.size(); ++r) {
    const Task& k = timeline_.ranks[r].graph.tasks[static_cast<std::size_t>(cl.task_of_rank[r])];
    bytes = std::max(bytes, k.bytes);
    kind = k.collective;
    group = k.group;
  }
  cl.plan = collectives::plan(kind, bytes, fabric_, copts_, group);
  cl.phase = 0;
  if (sm_sms_ > 0)
    cl.ctas = collectives::nccl_ctas(fabric_, group, sm_one_node_ctas_);
  if (holds_share(cl)) {
    cl.shares.assign(timeline_.ranks.size(), nullptr);
    for (std::size_t r = 0; r < timeline_.ranks.size(); ++r)
      take_sm_share(r, cl);
  }
  run_phase(idx);
}

void StepReplay::take_sm_share(std::size_t r, Collective& cl)
{
  const RankTimeline& rk = timeline_.ranks[r];
  const double share = std::min(MAX_SM_SHARE, cl.ctas * sm_factor_ / sm_sms_);
  cl.shares[r] = exec(token(Cont::INTERFERENCE, static_cast<int>(r), o_.record_tracks ? cl.name + " (SM share)" : ""),
                      platform_->gpu(rk.node, rk.local), share * SM_SHARE_HORIZON_S * platform::WORK_UNITS_PER_SECOND,
                      1, share * platform::WORK_UNITS_PER_SECOND); // max-min leaves the compute beside it the rest
}

void StepReplay::release_sm_share(std::size_t r, Collective& cl)
{
  sg4::ExecPtr& x = cl.shares[r];
  x->suspend();
  x->cancel(); // its token keeps the activity alive until the replay ends (on_complete ignores its completions)
  x = nullptr;
}

void StepReplay::run_phase(int idx)
{
  Collective& cl = colls_[static_cast<std::size_t>(idx)];
  if (cl.phase >= cl.plan.phases.size()) {
    if (holds_share(cl)) {
      for (std::size_t r = 0; r < timeline_.ranks.size(); ++r)
        release_sm_share(r, cl);
    }
    for (std::size_t r = 0; r < timeline_.ranks.size(); ++r)
      finish_task(static_cast<int>(r), cl.task_of_rank[r]);
    return;
  }
  const collectives::PlanPhase& ph = cl.plan.phases[cl.phase];
  std::vector<Edge> edges;
  const int nics = fabric_.nics_per_node;
  for (const collectives::Flow& f : ph.flows) {
    const bool src_here = !symmetric_ || f.src.node == 0, dst_here = !symmetric_ || f.dst.node == 0;
    if (!src_here && !dst_here)
      continue;
    int ta = -1, tb = -1;
    const bool crosses = f.src.node != f.dst.node;
    if (crosses && o_.record_tracks) {
      if (src_here)
        ta = track("node" + std::to_string(f.src.node),
                   "NIC" + std::to_string(spec::nic_of(f.src.local, G_, nics)) + " tx");
      if (dst_here)
        tb = track("node" + std::to_string(f.dst.node),
                   "NIC" + std::to_string(spec::nic_of(f.dst.local, G_, nics)) + " rx");
    }
    sg4::Host* src =
        src_here ? platform_->gpu(f.src.node, f.src.local) : platform_->remote(spec::nic_of(f.dst.local, G_, nics));
    sg4::Host* dst =
        dst_here ? platform_->gpu(f.dst.node, f.dst.local) : platform_->remote(spec::nic_of(f.src.local, G_, nics));
    edges.push_back(Edge{src, dst, f.wire_bytes(), ta, tb}); // bytes at the flow's achieved efficiency
  }
  cl.flows_left = static_cast<int>(edges.size());
  if (edges.empty()) {
    phase_done(idx);
    return;
  }
  // Each flow first pays its route's latency (platform::Platform::route_latency): the flows of one latency
  // start together after one delay on the timer host (few groups per phase: NVLink, PCIe, inter-node).
  std::map<double, FlowGroup> by_latency;
  for (const Edge& e : edges) {
    FlowGroup& g = by_latency[platform_->route_latency(e.src, e.dst)];
    g.coll = idx;
    g.edges.push_back(e);
  }
  for (auto& [lat, g] : by_latency) {
    if (lat > 0) {
      flow_groups_.push_back(std::move(g));
      exec(token(Cont::COLL_FLOW_DELAY, static_cast<int>(flow_groups_.size()) - 1, cl.name + " (latency)"),
           platform_->timer(), lat * platform::WORK_UNITS_PER_SECOND);
    } else {
      start_flows(g);
    }
  }
}

void StepReplay::start_flows(const FlowGroup& g)
{
  const std::string& name = colls_[static_cast<std::size_t>(g.coll)].name;
  for (const Edge& e : g.edges)
    flow(token(Cont::COLL_FLOW, g.coll, name, e.ta, e.tb), e.src, e.dst, e.bytes);
}

void StepReplay::phase_done(int idx)
{
  Collective& cl = colls_[static_cast<std::size_t>(idx)];
  const double lat = cl.plan.phases[cl.phase].latency_s;
  if (lat > 0)
    exec(token(Cont::COLL_DELAY, idx, cl.name + " (latency)"), platform_->timer(),
         lat * platform::WORK_UNITS_PER_SECOND);
  else
    next_phase(idx);
}

void StepReplay::next_phase(int idx)
{
  ++colls_[static_cast<std::size_t>(idx)].phase;
  run_phase(idx);
}

} // namespace zerosim::engine::replay
