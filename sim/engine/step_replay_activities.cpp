// The step replay's activities: each task, copy, NVMe transfer, collective phase and SEND/RECV transfer started on
// the SimGrid platform, and the SM share an NCCL kernel holds. docs/engine.md.
#include "engine/step_replay.hpp"

#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
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
    // It starts when every simulated rank of its group instance has reached it (its members' tasks were matched
    // before the replay: prepare_tasks).
    const int idx = coll_of_[r][static_cast<std::size_t>(t)];
    Collective& cl = colls_[static_cast<std::size_t>(idx)];
    if (++cl.ready == static_cast<int>(cl.members.size()))
      start_collective(idx);
    return;
  }
  case TaskKind::SEND:
  case TaskKind::RECV: {
    const int idx = coll_of_[r][static_cast<std::size_t>(t)];
    Transfer& tr = transfers_[static_cast<std::size_t>(idx)];
    (k.kind == TaskKind::SEND ? tr.send_task : tr.recv_task) = t;
    if (++tr.ready == tr.expected)
      start_transfer(idx);
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
  std::int64_t bytes = 0; // the largest over the members (partitions may differ by padding)
  for (std::size_t m = 0; m < cl.members.size(); ++m) {
    const Task& k = timeline_.ranks[static_cast<std::size_t>(cl.members[m])]
                        .graph.tasks[static_cast<std::size_t>(cl.task_of_member[m])];
    bytes = std::max(bytes, k.bytes);
  }
  cl.plan = instance_plan(cl.kind, bytes, cl.group, cl.instance);
  cl.phase = 0;
  if (sm_sms_ > 0)
    cl.ctas = collectives::nccl_ctas(fabric_, cl.group, sm_one_node_ctas_);
  if (holds_share(cl)) {
    cl.shares.assign(cl.members.size(), nullptr);
    for (std::size_t m = 0; m < cl.members.size(); ++m)
      cl.shares[m] = take_sm_share(static_cast<std::size_t>(cl.members[m]), cl.ctas, cl.name);
  }
  run_phase(idx);
}

const collectives::Plan* StepReplay::instance_plan(spec::CollectiveKind kind, std::int64_t bytes, spec::CommGroup group,
                                                   int instance)
{
  const auto key = std::make_tuple(kind, bytes, group);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    // Every instance's flows (with the symmetric replay's focus: those with an end on a simulated node), then each
    // instance's: a group's flows join GPUs of that group, so a flow's source names its instance.
    const collectives::Plan all = collectives::plan(kind, bytes, fabric_, copts_, group);
    collectives::Plan none = all; // the plan's phases and latencies without flows
    for (collectives::PlanPhase& ph : none.phases)
      ph.flows.clear();
    std::map<int, collectives::Plan> split;
    for (std::size_t i = 0; i < all.phases.size(); ++i)
      for (const collectives::Flow& f : all.phases[i].flows) {
        const int inst = instance_of(group, f.src);
        split.try_emplace(inst, none).first->second.phases[i].flows.push_back(f);
      }
    split.emplace(-1, std::move(none)); // for an instance without flows
    it = plans_.emplace(key, std::move(split)).first;
  }
  const auto at = it->second.find(instance);
  return at != it->second.end() ? &at->second : &it->second.at(-1);
}

sg4::ExecPtr StepReplay::take_sm_share(std::size_t r, int ctas, const std::string& name)
{
  const RankTimeline& rk = timeline_.ranks[r];
  const double share = std::min(MAX_SM_SHARE, ctas * sm_factor_ / sm_sms_);
  return exec(token(Cont::INTERFERENCE, static_cast<int>(r), o_.record_tracks ? name + " (SM share)" : ""),
              platform_->gpu(rk.node, rk.local), share * SM_SHARE_HORIZON_S * platform::WORK_UNITS_PER_SECOND, 1,
              share * platform::WORK_UNITS_PER_SECOND); // max-min leaves the compute beside it the rest
}

void StepReplay::release_sm_share(sg4::ExecPtr& x)
{
  x->suspend();
  x->cancel(); // its token keeps the activity alive until the replay ends (on_complete ignores its completions)
  x = nullptr;
}

void StepReplay::collective_delay(const Collective& cl, Cont then, int index, double seconds, const std::string& label)
{
  const double clock = sg4::Engine::get_clock();
  if (clock != open_delays_at_) {
    open_delays_.clear();
    open_delays_at_ = clock;
  }
  const auto key = std::make_tuple(cl.group, cl.ordinal, cl.phase, then, seconds);
  if (auto it = open_delays_.find(key); it != open_delays_.end()) {
    shared_delays_[static_cast<std::size_t>(it->second)].then.emplace_back(then, index);
    return;
  }
  shared_delays_.push_back(SharedDelay{{{then, index}}});
  const int d = static_cast<int>(shared_delays_.size()) - 1;
  open_delays_.emplace(key, d);
  exec(token(Cont::SHARED_DELAY, d, label), platform_->timer(), seconds * platform::WORK_UNITS_PER_SECOND);
}

void StepReplay::run_phase(int idx)
{
  Collective& cl = colls_[static_cast<std::size_t>(idx)];
  if (cl.phase >= cl.plan->phases.size()) {
    if (holds_share(cl)) {
      for (sg4::ExecPtr& x : cl.shares)
        release_sm_share(x);
    }
    for (std::size_t m = 0; m < cl.members.size(); ++m)
      finish_task(cl.members[m], cl.task_of_member[m]);
    return;
  }
  const collectives::PlanPhase& ph = cl.plan->phases[cl.phase];
  std::vector<Edge> edges;
  const int nics = fabric_.nics_per_node;
  for (const collectives::Flow& f : ph.flows) {
    const bool src_here = !symmetric_ || simulated(f.src.node), dst_here = !symmetric_ || simulated(f.dst.node);
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
    // bytes at the flow's achieved efficiency; an end off the symmetric replay's nodes is its stand-in
    edges.push_back(Edge{platform_->flow_end(f.src, f.dst), platform_->flow_end(f.dst, f.src), f.wire_bytes(), ta, tb});
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
      collective_delay(cl, Cont::COLL_FLOW_DELAY, static_cast<int>(flow_groups_.size()) - 1, lat,
                       cl.name + " (latency)");
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
  const double lat = cl.plan->phases[cl.phase].latency_s;
  if (lat > 0)
    collective_delay(cl, Cont::COLL_DELAY, idx, lat, cl.name + " (latency)");
  else
    next_phase(idx);
}

void StepReplay::next_phase(int idx)
{
  ++colls_[static_cast<std::size_t>(idx)].phase;
  run_phase(idx);
}

void StepReplay::start_transfer(int idx)
{
  Transfer& tr = transfers_[static_cast<std::size_t>(idx)];
  const spec::Gpu a = gpu_of(tr.sender), b = gpu_of(tr.receiver);
  const bool crosses = a.node != b.node;
  const int nics = fabric_.nics_per_node;
  // A side the symmetric replay does not simulate stands behind the other side's NIC, as a collective's remote ranks
  // do: the flow leaves through the sending GPU's NIC or comes in through the receiving GPU's (Platform::flow_end).
  tr.src = platform_->flow_end(a, b);
  tr.dst = platform_->flow_end(b, a);
  if (crosses && o_.record_tracks) {
    if (tr.send_rank >= 0)
      tr.ta = track("node" + std::to_string(a.node), "NIC" + std::to_string(spec::nic_of(a.local, G_, nics)) + " tx");
    if (tr.recv_rank >= 0)
      tr.tb = track("node" + std::to_string(b.node), "NIC" + std::to_string(spec::nic_of(b.local, G_, nics)) + " rx");
  }
  // Interference: the send kernel and the receive kernel each hold their CTAs' SMs on their GPU while the transfer
  // runs (docs/engine.md "SEND and RECV").
  if (sm_sms_ > 0) {
    tr.ctas = collectives::nccl_p2p_ctas(!crosses, fabric_.intra_nvlink, sm_one_node_ctas_);
    for (const int r : {tr.send_rank, tr.recv_rank})
      if (r >= 0 && tr.ctas > 0)
        tr.shares.push_back(take_sm_share(static_cast<std::size_t>(r), tr.ctas, tr.name));
  }
  // The route's latency as a delay (Platform::route_latency); a route to a remote host holds only the simulated node's
  // half of the way, so a transfer with a side behind the NICs pays the whole GPU-to-GPU route's: pcie.latency +
  // network.latency + pcie.latency (the planner's inter-node hop).
  const double lat =
      tr.send_rank >= 0 && tr.recv_rank >= 0 ? platform_->route_latency(tr.src, tr.dst) : fabric_.inter_latency_s;
  if (lat > 0)
    exec(token(Cont::P2P_DELAY, idx, tr.name + " (latency)"), platform_->timer(),
         lat * platform::WORK_UNITS_PER_SECOND);
  else
    transfer_flow(idx);
}

void StepReplay::transfer_flow(int idx)
{
  const Transfer& tr = transfers_[static_cast<std::size_t>(idx)];
  flow(token(Cont::P2P_FLOW, idx, tr.name, tr.ta, tr.tb), tr.src, tr.dst, static_cast<double>(tr.bytes));
}

void StepReplay::transfer_done(int idx)
{
  Transfer& tr = transfers_[static_cast<std::size_t>(idx)];
  for (sg4::ExecPtr& x : tr.shares)
    release_sm_share(x);
  if (tr.send_rank >= 0)
    finish_task(tr.send_rank, tr.send_task);
  if (tr.recv_rank >= 0)
    finish_task(tr.recv_rank, tr.recv_task);
}

} // namespace zerosim::engine::replay
