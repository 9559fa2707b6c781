// The step replay: its construction (platform, graphs, durations, collectives) and the event loop. docs/engine.md.
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

StepReplay* g_active = nullptr;

StepReplay::StepReplay(const spec::Scenario& s, const workload::Workload& w, const EngineOptions& o,
                       std::vector<int> nodes, std::vector<spec::TaskGraph> graphs, const std::vector<int>& copy_of)
    : s_(s), o_(o), nodes_(std::move(nodes)), symmetric_(static_cast<int>(nodes_.size()) < s.cluster.nodes)
{
  const spec::ClusterSpec& c = s.cluster;
  G_ = c.gpus_per_node;
  if (c.nodes > 1 && c.network.nics_per_node < 1)
    throw core::InputError(s.file +
                           ": cluster.network.nics_per_node: expected at least 1 NIC per node for a "
                           "cluster of " +
                           std::to_string(c.nodes) + " nodes, found 0");
  world_ = s.world();
  fabric_ = collectives::fabric_of(c, s.tp(), s.pp());
  ranks_per_stage_ = s.pp() > 1 ? fabric_.ranks_per_stage() : 0;
  copts_.all_reduce = o.collectives.all_reduce;
  copts_.hierarchical = o.collectives.hierarchical;
  copts_.protocol = o.collectives.protocol;
  // The symmetric replay plans only the flows with an end on a simulated node: node 0's, or each stage's first node's.
  if (symmetric_ && nodes_.size() == 1)
    copts_.focus_node = nodes_.front();
  else if (symmetric_)
    copts_.focus_nodes = nodes_;
  // The scenario's ablation switches (spec::Mechanisms, `--without protocols|busbw`).
  copts_.protocols = s.mechanisms.nccl_protocols;
  copts_.achieved_busbw = s.mechanisms.achieved_busbw;
  // The calibration profile's bus-bandwidth multipliers per transport (docs/calibration.md).
  copts_.busbw_factor_nvlink = s.calibration.factor("busbw.nvlink");
  copts_.busbw_factor_pcie = s.calibration.factor("busbw.pcie");
  copts_.busbw_factor_net = s.calibration.factor("busbw.net");
  // Flows of one phase between the same two GPUs (several channels through one NVLink pair) are one
  // flow: the same bytes over the same route, fewer flows for the solver (docs/design.md "Speed and scale").
  copts_.merge_channels = true;
  serialize_communicators_ = s.mechanisms.communicator;
  // Interference (docs/engine.md "Interference"): an NCCL kernel holds one SM per CTA (one CTA per channel) for
  // as long as its collective runs, so the compute it overlaps gets the other SMs: an execution bounded at that
  // share of the GPU host runs beside every collective on each of its GPUs. The CTA count is the GPU kind's inside
  // a node and NCCL's inter-node ring's across nodes (collectives::nccl_ctas), so a share per group kind.
  if (s.mechanisms.interference && s.kernels.nccl_ctas.value > 0 && !s.kernels.empty()) {
    const spec::GpuKindData& kind = s.kernels.kind_of(c.node.gpu.model);
    if (kind.sms > 0) {
      sm_sms_ = kind.sms;
      sm_one_node_ctas_ = static_cast<int>(std::lround(s.kernels.one_node_ctas(kind)));
      sm_factor_ = s.calibration.factor("interference");
    }
  }

  // The simulated ranks and their graphs; every duration is computed here, before SimGrid runs, so that
  // no exception can come out of a completion callback (docs/simgrid-notes.md §7.4).
  const std::size_t ranks = nodes_.size() * static_cast<std::size_t>(G_);
  if (graphs.size() != ranks)
    throw core::InternalError("simulate_graphs: " + std::to_string(graphs.size()) + " graphs for " +
                              std::to_string(ranks) + " simulated ranks");
  for (const int n : nodes_)
    for (int g = 0; g < G_; ++g) {
      const std::size_t i = timeline_.ranks.size();
      RankTimeline r;
      r.rank = n * G_ + g;
      r.node = n;
      r.local = g;
      r.graph = std::move(graphs[i]);
      if (i < copy_of.size())
        r.graph_copy_of = copy_of[i];
      r.times.assign(r.graph.tasks.size(), TaskTime{});
      timeline_.ranks.push_back(std::move(r));
    }
  prepare_tasks(s, w);
}

/// Per simulated rank, before SimGrid runs: every task's duration (a compute task's computed once per phase, layer
/// and work), CPU work and NVMe request latency; each collective's communicator (its group instance) and ordinal on
/// it, and each SEND's or RECV's transfer (NCCL matches calls on a communicator by issue order; docs/engine.md "How
/// collectives are matched"); each task's predecessors (its dependencies, its stream's previous task and, with one
/// kernel at a time per communicator, the communicator's previous collective or transfer).
void StepReplay::prepare_tasks(const spec::Scenario& s, const workload::Workload& w)
{
  const spec::ClusterSpec& c = s.cluster;
  const std::size_t R = timeline_.ranks.size();
  duration_.resize(R);
  sm_duration_.resize(R);
  cpu_work_.resize(R);
  pending_.resize(R);
  done_.resize(R);
  succ_.resize(R);
  coll_of_.resize(R);
  const int ranks_per_node = G_;
  // Every rank (and every micro-step) runs the same layers: a compute task's time depends only on its
  // phase, layer and own work, so it is computed once; what depends on the scenario alone (the GPU kind's
  // figures, the stack's generations) once per replay, at the first COMPUTE task.
  std::map<std::tuple<spec::Phase, int, int, int, double, double>, compute::TaskTime> compute_time;
  std::optional<compute::ScenarioPricing> pricing;
  for (std::size_t ri = 0; ri < R; ++ri) {
    const auto& tasks = timeline_.ranks[ri].graph.tasks;
    duration_[ri].assign(tasks.size(), 0.0);
    sm_duration_[ri].assign(tasks.size(), 0.0);
    cpu_work_[ri].resize(tasks.size());
    pending_[ri].assign(tasks.size(), 0);
    done_[ri].assign(tasks.size(), 0);
    succ_[ri].resize(tasks.size());
    coll_of_[ri].assign(tasks.size(), -1);
    std::map<spec::Stream, TaskId> last_on_stream;
    std::map<Communicator, TaskId> last_on_comm;
    std::map<Communicator, int> calls;        // this rank's collectives so far, per communicator
    std::map<std::pair<int, int>, int> pairs; // this rank's transfers so far, per (sender, receiver)
    for (TaskId t = 0; t < static_cast<TaskId>(tasks.size()); ++t) {
      const Task& k = tasks[static_cast<std::size_t>(t)];
      if (k.kind == TaskKind::COMPUTE) {
        const auto key = std::make_tuple(k.phase, k.layer, k.op_begin, k.op_end, k.flops, k.mem_bytes);
        auto it = compute_time.find(key);
        if (it == compute_time.end()) {
          if (!pricing)
            pricing.emplace(s);
          it = compute_time.emplace(key, compute::compute_task_times(k, w, s, *pricing)).first;
        }
        duration_[ri][static_cast<std::size_t>(t)] = it->second.seconds;
        sm_duration_[ri][static_cast<std::size_t>(t)] = it->second.sm_seconds;
      }
      if (k.kind == TaskKind::CPU_COMPUTE)
        cpu_work_[ri][static_cast<std::size_t>(t)] = compute::cpu_task_work(k, c.node.cpu, ranks_per_node);
      if (k.kind == TaskKind::NVME_READ || k.kind == TaskKind::NVME_WRITE) {
        if (c.node.nvme.devices < 1)
          throw core::InternalError("NVMe task " + k.name + " on a node without NVMe (the config layer refuses this)");
        // The drive's request latency, once per wave of requests the schedule counted (docs/engine.md "NVMe").
        duration_[ri][static_cast<std::size_t>(t)] =
            static_cast<double>(k.request_waves) *
            (k.kind == TaskKind::NVME_WRITE ? c.node.nvme.write_latency_s : c.node.nvme.read_latency_s);
      }
      std::optional<Communicator> comm;
      if (k.kind == TaskKind::COLLECTIVE) {
        // NCCL matches calls on a communicator by issue order: the k-th call of every member of one group instance
        // is one collective.
        const int idx = match_collective(ri, t, calls);
        coll_of_[ri][static_cast<std::size_t>(t)] = idx;
        const Collective& cl = colls_[static_cast<std::size_t>(idx)];
        comm = Communicator{static_cast<int>(cl.group), cl.instance, -1};
      }
      if (k.kind == TaskKind::SEND || k.kind == TaskKind::RECV) {
        const int idx = match_transfer(ri, t, pairs);
        coll_of_[ri][static_cast<std::size_t>(t)] = idx;
        const Transfer& tr = transfers_[static_cast<std::size_t>(idx)];
        comm = Communicator{P2P_COMMUNICATOR, std::min(tr.sender, tr.receiver), std::max(tr.sender, tr.receiver)};
      }
      std::vector<TaskId> preds = k.deps;
      if (auto it = last_on_stream.find(k.stream); it != last_on_stream.end())
        preds.push_back(it->second);
      last_on_stream[k.stream] = t;
      if (comm && serialize_communicators_) {
        // One NCCL communicator per group instance (and per point-to-point pair): NCCL launches every kernel of a
        // communicator after the previous one (its internal deviceStream, docs/engine.md "One communicator, one
        // kernel at a time"), whatever stream the call came from, so a call waits for the communicator's previous
        // call in issue order. A rank is in one instance of each group kind, so this is per group kind on a rank.
        if (auto it = last_on_comm.find(*comm); it != last_on_comm.end())
          preds.push_back(it->second);
        last_on_comm[*comm] = t;
      }
      std::sort(preds.begin(), preds.end());
      preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
      for (TaskId p : preds) {
        if (p < 0 || p >= t)
          throw core::InternalError("task graph: task " + k.name + " depends on a task not issued before it");
        succ_[ri][static_cast<std::size_t>(p)].push_back(t);
        ++pending_[ri][static_cast<std::size_t>(t)];
      }
    }
  }
  check_matched();
}

int StepReplay::simulated_index(int rank) const
{
  if (rank < 0 || rank >= world_)
    return -1;
  const auto it = std::lower_bound(nodes_.begin(), nodes_.end(), rank / G_);
  if (it == nodes_.end() || *it != rank / G_)
    return -1;
  return static_cast<int>(it - nodes_.begin()) * G_ + rank % G_;
}

bool StepReplay::in_group(spec::CommGroup g, int rank) const
{
  if (g != spec::CommGroup::EMBEDDING)
    return true;
  if (ranks_per_stage_ < 1) // one stage: the first is the last
    return true;
  const int stage = rank / ranks_per_stage_;
  return stage == 0 || stage == s_.pp() - 1;
}

int StepReplay::match_collective(std::size_t ri, TaskId t, std::map<Communicator, int>& calls)
{
  const RankTimeline& rk = timeline_.ranks[ri];
  const Task& k = rk.graph.tasks[static_cast<std::size_t>(t)];
  const int instance = instance_of(k.group, spec::Gpu{rk.node, rk.local});
  if (!in_group(k.group, rk.rank))
    throw core::InternalError("task graph: collective " + k.name + " of rank " + std::to_string(rk.rank) + " on " +
                              spec::to_string(k.group) +
                              ", a group of the first and the last pipeline stages' ranks only");
  const auto key = std::make_pair(k.group, instance);
  const int ordinal = calls[Communicator{static_cast<int>(k.group), instance, -1}]++;
  std::vector<int>& by_ordinal = coll_by_comm_[key];
  if (ordinal < static_cast<int>(by_ordinal.size())) {
    Collective& cl = colls_[static_cast<std::size_t>(by_ordinal[static_cast<std::size_t>(ordinal)])];
    if (cl.kind != k.collective)
      throw core::InternalError("task graphs: collective " + k.name + " of rank " + std::to_string(rk.rank) +
                                " is not the same call (kind) as " + cl.name + ", call " + std::to_string(ordinal) +
                                " of a lower rank on communicator " + spec::to_string(k.group) + " " +
                                std::to_string(instance));
    const auto m = std::lower_bound(cl.members.begin(), cl.members.end(), static_cast<int>(ri)) - cl.members.begin();
    cl.task_of_member[static_cast<std::size_t>(m)] = t;
    ++cl.issued;
    return by_ordinal[static_cast<std::size_t>(ordinal)];
  }
  // The first member to issue call k on this communicator creates the collective.
  auto members = members_.find(key);
  if (members == members_.end()) {
    std::vector<int> in;
    for (std::size_t r = 0; r < timeline_.ranks.size(); ++r) {
      const RankTimeline& o = timeline_.ranks[r];
      if (instance_of(k.group, spec::Gpu{o.node, o.local}) == instance && in_group(k.group, o.rank))
        in.push_back(static_cast<int>(r));
    }
    members = members_.emplace(key, std::move(in)).first;
  }
  Collective cl;
  cl.group = k.group;
  cl.instance = instance;
  cl.ordinal = ordinal;
  cl.kind = k.collective;
  cl.members = members->second;
  cl.task_of_member.assign(cl.members.size(), -1);
  const auto m = std::lower_bound(cl.members.begin(), cl.members.end(), static_cast<int>(ri)) - cl.members.begin();
  cl.task_of_member[static_cast<std::size_t>(m)] = t;
  cl.issued = 1;
  cl.name = k.name;
  colls_.push_back(std::move(cl));
  by_ordinal.push_back(static_cast<int>(colls_.size()) - 1);
  return by_ordinal.back();
}

int StepReplay::match_transfer(std::size_t ri, TaskId t, std::map<std::pair<int, int>, int>& pairs)
{
  const RankTimeline& rk = timeline_.ranks[ri];
  const Task& k = rk.graph.tasks[static_cast<std::size_t>(t)];
  const bool send = k.kind == TaskKind::SEND;
  if (k.peer < 0 || k.peer >= world_ || k.peer == rk.rank)
    throw core::InternalError("task graph: " + std::string(send ? "SEND " : "RECV ") + k.name + " of rank " +
                              std::to_string(rk.rank) + " names peer " + std::to_string(k.peer) +
                              ", expected another rank of the job's " + std::to_string(world_));
  const int sender = send ? rk.rank : k.peer, receiver = send ? k.peer : rk.rank;
  const int ordinal = pairs[{sender, receiver}]++;
  const auto key = std::make_tuple(sender, receiver, ordinal);
  auto it = transfer_of_.find(key);
  if (it == transfer_of_.end()) {
    Transfer tr;
    tr.sender = sender;
    tr.receiver = receiver;
    tr.send_rank = simulated_index(sender);
    tr.recv_rank = simulated_index(receiver);
    tr.expected = (tr.send_rank >= 0 ? 1 : 0) + (tr.recv_rank >= 0 ? 1 : 0);
    tr.bytes = k.bytes;
    tr.name = k.name;
    transfers_.push_back(std::move(tr));
    it = transfer_of_.emplace(key, static_cast<int>(transfers_.size()) - 1).first;
    const spec::Gpu a = gpu_of(sender), b = gpu_of(receiver);
    if (a.node != b.node && simulated(a.node) && simulated(b.node)) // a real route through the fabric
      p2p_pairs_.emplace_back(a, b);
  }
  Transfer& tr = transfers_[static_cast<std::size_t>(it->second)];
  if (tr.bytes != k.bytes)
    throw core::InternalError("task graphs: " + k.name + " of rank " + std::to_string(rk.rank) + " moves " +
                              std::to_string(k.bytes) + " bytes, its other side " + tr.name + " " +
                              std::to_string(tr.bytes) + " (transfer " + std::to_string(ordinal) + " from rank " +
                              std::to_string(sender) + " to rank " + std::to_string(receiver) + ")");
  (send ? tr.send_issued : tr.recv_issued) = true;
  return it->second;
}

void StepReplay::check_matched() const
{
  for (const Collective& cl : colls_)
    if (cl.issued != static_cast<int>(cl.members.size()))
      throw core::InternalError("task graphs: collective '" + cl.name + "', call " + std::to_string(cl.ordinal) +
                                " on communicator " + spec::to_string(cl.group) + " " + std::to_string(cl.instance) +
                                ", is issued by " + std::to_string(cl.issued) + " of the " +
                                std::to_string(cl.members.size()) +
                                " simulated ranks of its group (the others issue fewer calls on it)");
  for (const Transfer& tr : transfers_) {
    const bool no_send = tr.send_rank >= 0 && !tr.send_issued, no_recv = tr.recv_rank >= 0 && !tr.recv_issued;
    if (no_send || no_recv)
      throw core::InternalError(
          "task graphs: '" + tr.name + "', a transfer from rank " + std::to_string(tr.sender) + " to rank " +
          std::to_string(tr.receiver) + ", has no matching " +
          (no_send ? "SEND on rank " + std::to_string(tr.sender) : "RECV on rank " + std::to_string(tr.receiver)));
  }
}

Timeline StepReplay::run()
{
  // network/optim:Full: SimGrid 3.32's lazy updates (the default) recompute only the constraints reached from a
  // changed flow's first link, and miss the other links of a flow whose first link was already marked in the
  // same instant: two H2D copies starting together through DRAM (their first link) to GPUs on different
  // switches each got DRAM's rate (lmm System::update_modified_cnst_set_from_variable). Full costs the same
  // here (the ZeRO-Infinity DGX-2 replay: 50 s both ways). docs/engine.md "Network model".
  std::vector<std::string> args{"zerosim", "--log=root.thres:critical", "--cfg=network/model:CM02",
                                "--cfg=network/optim:Full"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  sg4::Engine e(&argc, argv.data());
  platform::configure_network_model();
  t0_ = sg4::Engine::get_clock(); // the clock is not reset between engines of one process (docs/simgrid-notes.md §4)

  platform::PlatformOptions po;
  po.cpu_core_flops = compute::cpu_core_flops(s_.cluster.node.cpu);
  po.symmetric = symmetric_ && nodes_.size() == 1 && nodes_.front() == 0;
  if (symmetric_ && !po.symmetric)
    po.nodes = nodes_;
  // Routes through the fabric between simulated nodes: every pair a plan may use (the full replay), or those between
  // two of the node-set replay's nodes; node 0 alone needs none.
  if (s_.cluster.nodes > 1 && nodes_.size() > 1) {
    po.inter_node_pairs = collectives::inter_node_pairs(fabric_, copts_);
    if (symmetric_)
      std::erase_if(po.inter_node_pairs,
                    [&](const auto& ab) { return !simulated(ab.first.node) || !simulated(ab.second.node); });
    if (!p2p_pairs_.empty()) { // the SEND/RECV transfers' GPU pairs besides the collectives'
      po.inter_node_pairs.insert(po.inter_node_pairs.end(), p2p_pairs_.begin(), p2p_pairs_.end());
      std::sort(po.inter_node_pairs.begin(), po.inter_node_pairs.end());
      po.inter_node_pairs.erase(std::unique(po.inter_node_pairs.begin(), po.inter_node_pairs.end()),
                                po.inter_node_pairs.end());
    }
  }
  platform_ = std::make_unique<platform::Platform>(s_.cluster, po);

  static bool registered = false;
  if (!registered) {
    // Signals are static and cannot be disconnected: register once per process and dispatch to the
    // replay that is running (docs/simgrid-notes.md §4.5).
    sg4::Activity::on_completion_cb([](const sg4::Activity& a) {
      if (g_active != nullptr)
        g_active->on_complete(a);
    });
    registered = true;
  }
  g_active = this;
  for (std::size_t ri = 0; ri < pending_.size(); ++ri)
    for (TaskId t = 0; t < static_cast<TaskId>(pending_[ri].size()); ++t)
      if (pending_[ri][static_cast<std::size_t>(t)] == 0)
        ready_.emplace_back(static_cast<int>(ri), t);
  drain();
  e.run();
  g_active = nullptr;
  graveyard_.clear();
  tokens_.clear();
  platform_.reset();

  double step = 0;
  for (std::size_t ri = 0; ri < timeline_.ranks.size(); ++ri) {
    const auto& r = timeline_.ranks[ri];
    for (std::size_t t = 0; t < r.times.size(); ++t) {
      if (!finished_at(ri, t))
        throw core::InternalError("replay stalled: rank " + std::to_string(r.rank) + " task " + r.graph.tasks[t].name +
                                  " never ran (a dependency cycle, or a collective some rank never reached" +
                                  stalled_collective() + ")");
      step = std::max(step, r.times[t].end);
    }
  }
  timeline_.step_time_s = step;
  for (auto& r : timeline_.ranks) {
    double issued = 0;
    for (std::size_t t = 0; t < r.times.size(); ++t) {
      const TaskId b = r.graph.tasks[t].host_barrier;
      if (b >= 0)
        issued = std::max(issued, r.times[static_cast<std::size_t>(b)].end);
      r.times[t].issue = issued;
    }
  }
  timeline_.replay = symmetric_ ? "symmetric" : "full";
  timeline_.network_model = network_model_description();
  return std::move(timeline_);
}

void StepReplay::on_complete(const sg4::Activity& a)
{
  auto* tok = a.get_data<Token>();
  if (tok != nullptr && tok->what == Cont::INTERFERENCE) {
    // A collective's SM share, cancelled at the collective's end: SimGrid reports it twice (at cancel(), inside
    // release_sm_share, and when it reaps the action). Its token keeps it alive until the replay ends, and the
    // graveyard is left alone (this may run inside another activity's completion).
    return;
  }
  graveyard_.clear(); // activities completed earlier; never the one whose callback this is
  if (tok == nullptr)
    return;
  const double start = a.get_start_time() - t0_, end = a.get_finish_time() - t0_;
  if (o_.record_tracks) {
    for (int tr : {tok->track_a, tok->track_b})
      if (tr >= 0)
        timeline_.intervals.push_back(TrackInterval{tr, start, end, tok->label});
  }
  graveyard_.push_back(std::move(tok->activity));
  switch (tok->what) {
  case Cont::TASK_PART: {
    Job& j = jobs_[static_cast<std::size_t>(tok->index)];
    if (--j.parts == 0)
      finish_task(j.rank, j.task);
    break;
  }
  case Cont::COLL_FLOW: {
    Collective& cl = colls_[static_cast<std::size_t>(tok->index)];
    if (--cl.flows_left == 0)
      phase_done(tok->index);
    break;
  }
  case Cont::COLL_DELAY:
    next_phase(tok->index);
    break;
  case Cont::TASK_DELAY:
    task_data(tok->index);
    break;
  case Cont::TASK_STAGE:
    memory_stage(tok->index);
    break;
  case Cont::COLL_FLOW_DELAY:
    start_flows(flow_groups_[static_cast<std::size_t>(tok->index)]);
    break;
  case Cont::SHARED_DELAY: {
    // A copy: what it continues may start delays of its own.
    const std::vector<std::pair<Cont, int>> then_all = shared_delays_[static_cast<std::size_t>(tok->index)].then;
    for (const auto& [then, index] : then_all) {
      if (then == Cont::COLL_FLOW_DELAY)
        start_flows(flow_groups_[static_cast<std::size_t>(index)]);
      else
        next_phase(index);
    }
    break;
  }
  case Cont::P2P_DELAY:
    transfer_flow(tok->index);
    break;
  case Cont::P2P_FLOW:
    transfer_done(tok->index);
    break;
  case Cont::INTERFERENCE: // returned above; listed for -Wswitch, which a default would silence
    break;
  }
  drain();
}

std::string StepReplay::stalled_collective() const
{
  for (const auto& cl : colls_)
    if (cl.ready > 0 && cl.ready < static_cast<int>(cl.members.size()))
      return ": '" + cl.name + "' was reached by " + std::to_string(cl.ready) + " of the " +
             std::to_string(cl.members.size()) + " simulated ranks of " + spec::to_string(cl.group) + " group " +
             std::to_string(cl.instance);
  for (const auto& tr : transfers_)
    if (tr.ready > 0 && tr.ready < tr.expected)
      return ": '" + tr.name + "' (rank " + std::to_string(tr.sender) + " to rank " + std::to_string(tr.receiver) +
             ") was reached by one side only";
  return "";
}

int StepReplay::track(const std::string& process, const std::string& name)
{
  if (!o_.record_tracks)
    return -1;
  const auto key = process + "\n" + name;
  if (auto it = track_ids_.find(key); it != track_ids_.end())
    return it->second;
  const int id = static_cast<int>(timeline_.tracks.size());
  timeline_.tracks.push_back(Track{process, name});
  track_ids_.emplace(key, id);
  return id;
}

Token& StepReplay::token(Cont what, int index, const std::string& label, int ta, int tb)
{
  tokens_.push_back(Token{what, index, ta, tb, o_.record_tracks ? label : std::string(), nullptr});
  return tokens_.back();
}

void StepReplay::launch(Token& tok, sg4::ActivityPtr a)
{
  a->set_data(&tok);
  tok.activity = std::move(a);
  ++timeline_.activities;
}

sg4::ExecPtr StepReplay::exec(Token& tok, sg4::Host* h, double amount, int threads, double bound)
{
  sg4::ExecPtr x = sg4::Exec::init();
  x->set_flops_amount(amount);
  if (threads > 1)
    x->set_thread_count(threads);
  if (bound > 0)
    x->set_bound(bound);
  x->set_host(h);
  if (x->get_state() == sg4::Activity::State::INITED)
    x->start();
  launch(tok, x);
  return x;
}

void StepReplay::flow(Token& tok, sg4::Host* src, sg4::Host* dst, double bytes)
{
  // Hosts are set last: set_destination starts the communication (docs/simgrid-notes.md §7.2).
  sg4::CommPtr cm = sg4::Comm::sendto_init();
  cm->set_payload_size(static_cast<std::uint64_t>(std::ceil(std::max(1.0, bytes)))); // a message is at least one byte
  cm->set_source(src);
  cm->set_destination(dst);
  if (cm->get_state() == sg4::Activity::State::INITED)
    cm->start();
  launch(tok, cm);
  ++timeline_.flows;
}

void StepReplay::drain()
{
  if (draining_)
    return;
  draining_ = true;
  while (!ready_.empty()) {
    auto [ri, t] = ready_.front();
    ready_.pop_front();
    start_task(ri, t);
  }
  draining_ = false;
}

void StepReplay::finish_task(int ri, TaskId t)
{
  const auto r = static_cast<std::size_t>(ri);
  timeline_.ranks[r].times[static_cast<std::size_t>(t)].end = now();
  done_[r][static_cast<std::size_t>(t)] = 1;
  for (TaskId nx : succ_[r][static_cast<std::size_t>(t)])
    if (--pending_[r][static_cast<std::size_t>(nx)] == 0)
      ready_.emplace_back(ri, nx);
}

} // namespace zerosim::engine::replay
