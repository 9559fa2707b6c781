#include "engine/engine.hpp"

#include "compute/compute_model.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "platform/platform.hpp"
#include "spec/names.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace zerosim::engine {

namespace sg4 = simgrid::s4u;
using spec::Task;
using spec::TaskId;
using spec::TaskKind;

std::string network_model_description()
{
  return platform::network_model_description();
}

namespace {

/// Extra DRAM traffic of a pageable (not pinned) copy: the CUDA driver stages it through a pinned
/// buffer, a host memcpy that reads and writes every byte once more (CUDA C Best Practices Guide,
/// "Pinned Memory"). The DMA itself is the same flow as a pinned copy's.
constexpr double PAGEABLE_STAGING_DRAM_FACTOR = 2.0;

/// Interference: the largest share of a GPU's SMs one collective's kernel is let take (a guard for GPUs with
/// few SMs; NCCL never launches more CTAs than it has channels).
constexpr double MAX_SM_SHARE = 0.5;
/// Interference: the work of the execution that holds a collective's SM share, in seconds at full speed. It is
/// suspended when the collective ends, long before it could finish.
constexpr double SM_SHARE_HORIZON_S = 1e9;

/// What an activity's completion continues.
/// TASK_DELAY: a copy's or an NVMe task's latency before its data (index: jobs_); COLL_FLOW_DELAY: the route
/// latency of a group of a collective phase's flows before they start (index: flow_groups_).
/// INTERFERENCE: the SM share an NCCL kernel holds on a GPU while its collective runs (suspended at its end;
/// nothing continues from it). TASK_STAGE: a COMPUTE task's SM-bound stage, which its memory-bound stage follows
/// (index: jobs_; docs/engine.md "Interference").
enum class Cont { TASK_PART, COLL_FLOW, COLL_DELAY, TASK_DELAY, COLL_FLOW_DELAY, INTERFERENCE, TASK_STAGE };

struct Token {
  Cont what = Cont::TASK_PART;
  int index = 0;                  ///< jobs_ (TASK_PART) or colls_ (COLL_*) index
  int track_a = -1, track_b = -1; ///< trace tracks the activity occupies
  std::string label;
  sg4::ActivityPtr activity; ///< kept alive until the activity completes (simgrid-notes.md §7.1)
};

/// A task made of several activities (a flow and an execution, say): it ends when all have ended.
struct Job {
  int rank = 0; ///< index into ranks_
  TaskId task = 0;
  int parts = 0;
  double memory_stage_s = 0; ///< a COMPUTE task split by interference: the memory-bound seconds after its SM stage
};

/// One flow of a collective phase, and the flows of a phase that share one route latency.
struct Edge {
  sg4::Host* src = nullptr;
  sg4::Host* dst = nullptr;
  double bytes = 0;
  int ta = -1, tb = -1; ///< trace tracks
};
struct FlowGroup {
  int coll = 0;
  std::vector<Edge> edges;
};

/// One collective: the same ordinal collective of every simulated rank.
struct Collective {
  std::vector<TaskId> task_of_rank; ///< per simulated rank, -1 until it is reached
  int ready = 0;
  collectives::Plan plan;
  std::size_t phase = 0;
  int flows_left = 0;
  std::string name;
  int ctas = 0; ///< interference: the CTAs its kernel holds (collectives::nccl_ctas), 0 with interference off
};

class StepReplay;
StepReplay* g_active = nullptr; ///< the replay SimGrid's static completion signal dispatches to

class StepReplay {
public:
  /// `given`: the graphs of the simulated ranks (node-major), or empty to build them from the schedule.
  StepReplay(const spec::Scenario& s, const workload::Workload& w, const EngineOptions& o,
             std::vector<spec::TaskGraph> given = {})
      : s_(s), o_(o)
  {
    const spec::ClusterSpec& c = s.cluster;
    G_ = c.gpus_per_node;
    if (c.nodes > 1 && c.network.nics_per_node < 1)
      throw core::InputError(s.file +
                             ": cluster.network.nics_per_node: expected at least 1 NIC per node for a "
                             "cluster of " +
                             std::to_string(c.nodes) + " nodes, found 0");
    symmetric_ = o.replay == engine::Replay::SYMMETRIC || (o.replay == engine::Replay::AUTO && c.nodes > 1);
    if (c.nodes == 1)
      symmetric_ = false;
    if (!symmetric_ && s.world() > MAX_FULL_REPLAY_RANKS)
      throw core::InputError("--replay full: expected at most " + std::to_string(MAX_FULL_REPLAY_RANKS) +
                             " ranks for the replay of every rank (one task graph each; measured 1.4 GiB and 30 s "
                             "at 256 ranks of the default scenario), found " +
                             std::to_string(s.world()) +
                             "; the symmetric replay (the default beyond one node) "
                             "simulates one node");
    fabric_.nodes = c.nodes;
    fabric_.gpus_per_node = G_;
    fabric_.nics_per_node = c.network.nics_per_node;
    fabric_.intra_nvlink = c.node.nvlink.present;
    fabric_.tensor_parallel = s.tp();
    fabric_.intra_Bps = c.node.nvlink.present ? c.node.nvlink.bandwidth_Bps : c.node.pcie.bandwidth_Bps;
    fabric_.intra_latency_s = c.node.nvlink.present ? 2 * c.node.nvlink.latency_s : 2 * c.node.pcie.latency_s;
    fabric_.inter_Bps = c.network.nic_bandwidth_Bps;
    fabric_.inter_latency_s = c.network.latency_s + 2 * c.node.pcie.latency_s;
    copts_.all_reduce = o.collectives.all_reduce;
    copts_.hierarchical = o.collectives.hierarchical;
    copts_.protocol = o.collectives.protocol;
    copts_.focus_node = symmetric_ ? 0 : -1;
    // The scenario's ablation switches (spec::Mechanisms, `--without protocols|busbw`).
    copts_.protocols = s.mechanisms.nccl_protocols;
    copts_.achieved_busbw = s.mechanisms.achieved_busbw;
    // The calibration profile's bus-bandwidth multipliers per transport (docs/calibration.md).
    copts_.busbw_factor_nvlink = s.calibration.factor("busbw.nvlink");
    copts_.busbw_factor_pcie = s.calibration.factor("busbw.pcie");
    copts_.busbw_factor_net = s.calibration.factor("busbw.net");
    // Flows of one phase between the same two GPUs (several channels through one NVLink pair) are one
    // flow: the same bytes over the same route, fewer flows for the solver (design.md "Speed and scale").
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
    // no exception can come out of a completion callback (simgrid-notes.md §7.4).
    const int simulated_nodes = symmetric_ ? 1 : c.nodes;
    if (!given.empty() && given.size() != static_cast<std::size_t>(simulated_nodes * G_))
      throw std::logic_error("simulate_graphs: " + std::to_string(given.size()) + " graphs for " +
                             std::to_string(simulated_nodes * G_) + " simulated ranks");
    for (int n = 0; n < simulated_nodes; ++n)
      for (int g = 0; g < G_; ++g) {
        RankTimeline r;
        r.rank = n * G_ + g;
        r.node = n;
        r.local = g;
        r.graph = given.empty() ? schedule::build_step_graph(s, w, r.rank, o.step)
                                : std::move(given[static_cast<std::size_t>(r.rank)]);
        r.times.assign(r.graph.tasks.size(), TaskTime{});
        timeline_.ranks.push_back(std::move(r));
      }
    const std::size_t R = timeline_.ranks.size();
    duration_.resize(R);
    sm_duration_.resize(R);
    cpu_work_.resize(R);
    pending_.resize(R);
    done_.resize(R);
    succ_.resize(R);
    coll_of_.resize(R);
    const int ranks_per_node = G_;
    std::size_t collectives = 0;
    std::vector<std::pair<spec::CollectiveKind, spec::CommGroup>> call_of; // rank 0's k-th collective
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
      std::map<spec::CommGroup, TaskId> last_on_group;
      std::size_t n_coll = 0;
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
            throw std::logic_error("NVMe task " + k.name + " on a node without NVMe (the config layer refuses this)");
          // The drive's request latency, once per wave of requests the schedule counted (docs/engine.md "NVMe").
          duration_[ri][static_cast<std::size_t>(t)] =
              static_cast<double>(k.request_waves) *
              (k.kind == TaskKind::NVME_WRITE ? c.node.nvme.write_latency_s : c.node.nvme.read_latency_s);
        }
        if (k.kind == TaskKind::COLLECTIVE) {
          // NCCL matches calls on a communicator by issue order: the k-th call of every rank is one collective.
          if (ri == 0)
            call_of.emplace_back(k.collective, k.group);
          else if (n_coll < call_of.size() && call_of[n_coll] != std::make_pair(k.collective, k.group))
            throw std::logic_error(
                "task graphs: collective " + k.name + " of rank " + std::to_string(timeline_.ranks[ri].rank) +
                " is not the same call (kind, group) as rank 0's collective number " + std::to_string(n_coll));
          coll_of_[ri][static_cast<std::size_t>(t)] = static_cast<int>(n_coll++);
        }
        std::vector<TaskId> preds = k.deps;
        if (auto it = last_on_stream.find(k.stream); it != last_on_stream.end())
          preds.push_back(it->second);
        last_on_stream[k.stream] = t;
        if (k.kind == TaskKind::COLLECTIVE && serialize_communicators_) {
          // One NCCL communicator per group: NCCL launches every kernel of a communicator after the previous one
          // (its internal deviceStream, docs/engine.md "One communicator, one kernel at a time"), whatever stream
          // the call came from, so a collective waits for the group's previous call in issue order.
          if (auto it = last_on_group.find(k.group); it != last_on_group.end())
            preds.push_back(it->second);
          last_on_group[k.group] = t;
        }
        std::sort(preds.begin(), preds.end());
        preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
        for (TaskId p : preds) {
          if (p < 0 || p >= t)
            throw std::logic_error("task graph: task " + k.name + " depends on a task not issued before it");
          succ_[ri][static_cast<std::size_t>(p)].push_back(t);
          ++pending_[ri][static_cast<std::size_t>(t)];
        }
      }
      if (ri == 0)
        collectives = n_coll;
      else if (n_coll != collectives)
        throw std::logic_error("task graphs: rank " + std::to_string(timeline_.ranks[ri].rank) + " issues " +
                               std::to_string(n_coll) + " collectives, rank 0 issues " + std::to_string(collectives));
    }
    colls_.resize(collectives);
    for (auto& cl : colls_)
      cl.task_of_rank.assign(R, -1);
  }

  Timeline run()
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
    t0_ = sg4::Engine::get_clock(); // the clock is not reset between engines of one process (simgrid-notes.md §4)

    platform::PlatformOptions po;
    po.cpu_core_flops = compute::cpu_core_flops(s_.cluster.node.cpu);
    po.symmetric = symmetric_;
    if (!symmetric_ && s_.cluster.nodes > 1)
      po.inter_node_pairs = collectives::inter_node_pairs(fabric_, copts_);
    platform_ = std::make_unique<platform::Platform>(s_.cluster, po);
    sm_pool_.assign(timeline_.ranks.size(), {});

    static bool registered = false;
    if (!registered) {
      // Signals are static and cannot be disconnected: register once per process and dispatch to the
      // replay that is running (simgrid-notes.md §4.5).
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
    // Interference's pooled executions never finish: cancel them and let the engine reap them while it exists
    // (an unfinished activity outlives the engine and crashes SimGrid's teardown at exit).
    bool pooled = false;
    for (std::map<int, SmPool>& pools : sm_pool_)
      for (auto& [ctas, p] : pools)
        for (sg4::ExecPtr& x : p.execs) {
          x->cancel();
          pooled = true;
        }
    if (pooled)
      e.run();
    g_active = nullptr;
    graveyard_.clear();
    sm_pool_.clear();
    cancelled_.clear();
    tokens_.clear();
    platform_.reset();

    double step = 0;
    for (std::size_t ri = 0; ri < timeline_.ranks.size(); ++ri) {
      const auto& r = timeline_.ranks[ri];
      for (std::size_t t = 0; t < r.times.size(); ++t) {
        if (!finished_at(ri, t))
          throw std::logic_error("replay stalled: rank " + std::to_string(r.rank) + " task " + r.graph.tasks[t].name +
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

  void on_complete(const sg4::Activity& a)
  {
    auto* tok = a.get_data<Token>();
    if (tok != nullptr && tok->what == Cont::INTERFERENCE) {
      // A collective's SM share (suspended at the collective's end, so this fires only if SimGrid ends it some
      // other way): kept alive until the replay ends, and the graveyard is left alone.
      cancelled_.push_back(std::move(tok->activity));
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
    case Cont::INTERFERENCE: // returned above; listed for -Wswitch, which a default would silence
      break;
    }
    drain();
  }

private:
  /// The first collective that started on some ranks but not all (for the stall message).
  std::string stalled_collective() const
  {
    for (const auto& cl : colls_)
      if (cl.ready > 0 && cl.ready < static_cast<int>(timeline_.ranks.size()))
        return ": '" + cl.name + "' was reached by " + std::to_string(cl.ready) + " of " +
               std::to_string(timeline_.ranks.size()) + " ranks";
    return "";
  }

  double now() const { return sg4::Engine::get_clock() - t0_; }

  bool finished_at(std::size_t ri, std::size_t t) const { return done_[ri][t] != 0; }

  int track(const std::string& process, const std::string& name)
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

  /// The label is kept only for the trace's intervals (no string work otherwise: this is per activity).
  Token& token(Cont what, int index, const std::string& label, int ta = -1, int tb = -1)
  {
    tokens_.push_back(Token{what, index, ta, tb, o_.record_tracks ? label : std::string(), nullptr});
    return tokens_.back();
  }

  /// Attaches the token before the engine runs any of the activity (completions happen inside run()).
  void launch(Token& tok, sg4::ActivityPtr a)
  {
    a->set_data(&tok);
    tok.activity = std::move(a);
    ++timeline_.activities;
  }

  /// An execution of `amount` work units on `h` over `threads` cores; `bound` > 0 caps its rate (work units per
  /// second), max-min leaving the rest of the host to the executions beside it.
  sg4::ExecPtr exec(Token& tok, sg4::Host* h, double amount, int threads = 1, double bound = 0)
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

  void flow(Token& tok, sg4::Host* src, sg4::Host* dst, double bytes)
  {
    // Hosts are set last: set_destination starts the communication (simgrid-notes.md §7.2).
    sg4::CommPtr cm = sg4::Comm::sendto_init();
    cm->set_payload_size(static_cast<std::uint64_t>(std::ceil(std::max(1.0, bytes)))); // a message is at least one byte
    cm->set_source(src);
    cm->set_destination(dst);
    if (cm->get_state() == sg4::Activity::State::INITED)
      cm->start();
    launch(tok, cm);
    ++timeline_.flows;
  }

  void drain()
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

  void finish_task(int ri, TaskId t)
  {
    const auto r = static_cast<std::size_t>(ri);
    timeline_.ranks[r].times[static_cast<std::size_t>(t)].end = now();
    done_[r][static_cast<std::size_t>(t)] = 1;
    for (TaskId nx : succ_[r][static_cast<std::size_t>(t)])
      if (--pending_[r][static_cast<std::size_t>(nx)] == 0)
        ready_.emplace_back(ri, nx);
  }

  std::string proc(const RankTimeline& r) const { return "node" + std::to_string(r.node); }

  void start_task(int ri, TaskId t)
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
      exec(token(Cont::TASK_PART, j, k.name, track(proc(rk), "host rank " + std::to_string(rk.rank))),
           platform_->timer(), k.host_seconds * platform::WORK_UNITS_PER_SECOND);
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

  /// The data of a copy or an NVMe task, after its latency.
  void task_data(int j)
  {
    const Job& jb = jobs_[static_cast<std::size_t>(j)];
    const Task& k = timeline_.ranks[static_cast<std::size_t>(jb.rank)].graph.tasks[static_cast<std::size_t>(jb.task)];
    if (k.kind == TaskKind::COPY)
      copy_transfer(j);
    else
      nvme_transfer(j);
  }

  /// A copy's data: one flow GPU <-> host memory over the GPU's PCIe link, its switch uplink and DRAM. A
  /// pageable copy (pin_memory false) adds the driver's staging memcpy as a concurrent DRAM flow of
  /// PAGEABLE_STAGING_DRAM_FACTOR x bytes; the task ends when both end.
  void copy_transfer(int j)
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

  /// The data of an NVMe task: the swap path is a RAID-0 volume of every drive of the node (DGX systems' /raid;
  /// docs/engine.md "NVMe"), so each of the d drives moves bytes / d: one flow
  /// between the volume and host memory over the drives' media link (d x the drive's read or write bandwidth),
  /// their PCIe links together and DRAM (platform::Platform::nvme).
  void nvme_transfer(int j)
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

  int new_job(int ri, TaskId t, int parts)
  {
    jobs_.push_back(Job{ri, t, parts, 0});
    return static_cast<int>(jobs_.size()) - 1;
  }

  /// A split COMPUTE task's memory-bound stage, on the GPU's memory side (Platform::gpu_memory).
  void memory_stage(int j)
  {
    const Job& jb = jobs_[static_cast<std::size_t>(j)];
    const RankTimeline& rk = timeline_.ranks[static_cast<std::size_t>(jb.rank)];
    exec(token(Cont::TASK_PART, j, rk.graph.tasks[static_cast<std::size_t>(jb.task)].name + " (memory-bound)"),
         platform_->gpu_memory(rk.node, rk.local), jb.memory_stage_s * platform::WORK_UNITS_PER_SECOND);
  }

  void start_collective(int idx)
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
      for (std::size_t r = 0; r < timeline_.ranks.size(); ++r)
        take_sm_share(r, cl);
    }
    run_phase(idx);
  }

  /// Interference: a collective that moves data holds an SM share on every simulated GPU while it runs.
  bool holds_share(const Collective& cl) const { return sm_sms_ > 0 && cl.ctas > 0 && !cl.plan.phases.empty(); }

  /// Interference: rank `r`'s GPU gets one more running collective of `cl.ctas` CTAs. The k-th concurrent
  /// collective of that CTA count on a GPU holds the k-th execution of the GPU's pool for the count, bounded at its
  /// share (ctas x the calibration's multiplier / SMs, at most MAX_SM_SHARE): created the first time, resumed after.
  /// Suspended, not cancelled, at the collective's end: SimGrid 3.32's cancel() leaves the action's max-min
  /// variable, and so its share, in place until the action is reaped (interference_test.cpp caught a kernel
  /// losing the share after a 1-byte collective had ended); a suspended action's variable has penalty 0 and takes
  /// nothing. A pool, not one execution per collective: thousands of suspended actions slowed the solver 30x.
  void take_sm_share(std::size_t r, const Collective& cl)
  {
    SmPool& p = sm_pool_[r][cl.ctas];
    const auto k = static_cast<std::size_t>(p.active++);
    if (k < p.execs.size()) {
      p.execs[k]->resume();
      return;
    }
    const RankTimeline& rk = timeline_.ranks[r];
    const double share = std::min(MAX_SM_SHARE, cl.ctas * sm_factor_ / sm_sms_);
    p.execs.push_back(exec(token(Cont::INTERFERENCE, static_cast<int>(r), cl.name + " (SM share)"),
                           platform_->gpu(rk.node, rk.local),
                           share * SM_SHARE_HORIZON_S * platform::WORK_UNITS_PER_SECOND, 1,
                           share * platform::WORK_UNITS_PER_SECOND)); // max-min leaves the compute beside it the rest
  }

  /// Interference: rank `r`'s GPU has one running collective of `cl.ctas` CTAs fewer.
  void release_sm_share(std::size_t r, const Collective& cl)
  {
    SmPool& p = sm_pool_[r][cl.ctas];
    p.execs[static_cast<std::size_t>(--p.active)]->suspend();
  }

  void run_phase(int idx)
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

  void start_flows(const FlowGroup& g)
  {
    const std::string& name = colls_[static_cast<std::size_t>(g.coll)].name;
    for (const Edge& e : g.edges)
      flow(token(Cont::COLL_FLOW, g.coll, name, e.ta, e.tb), e.src, e.dst, e.bytes);
  }

  void phase_done(int idx)
  {
    Collective& cl = colls_[static_cast<std::size_t>(idx)];
    const double lat = cl.plan.phases[cl.phase].latency_s;
    if (lat > 0)
      exec(token(Cont::COLL_DELAY, idx, cl.name + " (latency)"), platform_->timer(),
           lat * platform::WORK_UNITS_PER_SECOND);
    else
      next_phase(idx);
  }

  void next_phase(int idx)
  {
    ++colls_[static_cast<std::size_t>(idx)].phase;
    run_phase(idx);
  }

  const spec::Scenario& s_;
  EngineOptions o_;
  int G_ = 1;
  bool symmetric_ = false;
  collectives::Fabric fabric_;
  collectives::Options copts_;
  Timeline timeline_;
  std::vector<std::vector<double>> duration_;
  std::vector<std::vector<double>> sm_duration_; ///< COMPUTE tasks: the SM-bound part (compute::TaskTime::sm_seconds)
  std::vector<std::vector<compute::CpuWork>> cpu_work_;
  std::vector<std::vector<int>> pending_;
  std::vector<std::vector<std::vector<TaskId>>> succ_;
  std::vector<std::vector<int>> coll_of_; ///< per rank and task: the collective's ordinal in issue order
  std::vector<Collective> colls_;
  std::deque<FlowGroup> flow_groups_;
  std::deque<Job> jobs_;
  std::deque<Token> tokens_;
  std::vector<sg4::ActivityPtr> graveyard_;
  std::vector<sg4::ActivityPtr> cancelled_; ///< interference executions SimGrid ended (kept until the replay ends)
  int sm_sms_ = 0;                          ///< interference: the GPU's SMs (0: interference off)
  int sm_one_node_ctas_ = 0;                ///< interference: CTAs of a collective kernel inside one node
  double sm_factor_ = 1;                    ///< interference: the calibration's multiplier on the CTAs
  bool serialize_communicators_ = true;     ///< a group's collectives run one at a time (Mechanisms::communicator)
  struct SmPool {
    std::vector<sg4::ExecPtr> execs; ///< bounded executions, one per concurrent collective seen
    int active = 0;                  ///< how many of them run now
  };
  std::vector<std::map<int, SmPool>> sm_pool_; ///< per simulated rank, per CTA count
  std::deque<std::pair<int, TaskId>> ready_;
  std::vector<std::vector<char>> done_;
  std::map<std::string, int> track_ids_;
  std::unique_ptr<platform::Platform> platform_;
  double t0_ = 0;
  bool draining_ = false;
};

/// The ranks schedule::memory_ranks names that the replay did not simulate, each with its graph built as the
/// replay built its own, and the request's passes: what the memory replay and the metrics read besides the
/// simulated ranks.
void add_memory_only_ranks(const spec::Scenario& s, const workload::Workload& w, const schedule::StepOptions& step,
                           Timeline& t)
{
  if (s.training.mode == spec::Mode::INFERENCE)
    t.request_passes = schedule::inference_passes(s);
  std::vector<bool> simulated(static_cast<std::size_t>(s.world()), false);
  for (const RankTimeline& r : t.ranks)
    if (r.rank >= 0 && r.rank < s.world())
      simulated[static_cast<std::size_t>(r.rank)] = true;
  for (int rank : schedule::memory_ranks(s))
    if (!simulated[static_cast<std::size_t>(rank)])
      t.memory_only_ranks.push_back(RankGraph{rank, schedule::build_step_graph(s, w, rank, step)});
}

} // namespace

Timeline simulate(const spec::Scenario& s, const workload::Workload& w, const EngineOptions& o)
{
  const int g = s.training.grad_accum;
  const int k = REUSE_SIMULATED_MICRO_STEPS;
  EngineOptions opts = o;
  opts.step.simulated_micro_steps = o.reuse_accumulation && g > k ? k : 0;
  StepReplay r(s, w, opts);
  Timeline t = r.run();
  add_memory_only_ranks(s, w, opts.step, t);
  if (opts.step.simulated_micro_steps == 0) {
    t.reuse = AccumulationReuse{g, g, 0, 0, t.step_time_s};
    return t;
  }
  // Accumulation reuse (design.md "Speed and scale"): the middle micro-steps run the same program from the
  // same state, so the replay simulated micro-steps 0 .. k-2 and g-1, and each of the g - k others adds the
  // period between the first starts of micro-steps k-2 and g-1 (consecutive in the simulated timeline).
  // docs/engine.md.
  const int before = k - 2;
  double start1 = std::numeric_limits<double>::infinity(), start2 = start1;
  for (const RankTimeline& rt : t.ranks)
    for (std::size_t i = 0; i < rt.times.size(); ++i) {
      const int mb = rt.graph.tasks[i].micro_step;
      if (mb == before)
        start1 = std::min(start1, rt.times[i].start);
      else if (mb == g - 1)
        start2 = std::min(start2, rt.times[i].start);
    }
  const double period = start2 - start1;
  if (!std::isfinite(period) || !(period > 0))
    throw core::InternalError("engine: accumulation reuse found no period between micro-steps " +
                              std::to_string(before) + " and " + std::to_string(g - 1) + " (" +
                              core::format_number(period) + " s)");
  t.reuse = AccumulationReuse{g, k, period, start1, t.step_time_s};
  t.step_time_s += (g - k) * period;
  return t;
}

Timeline simulate_graphs(const spec::Scenario& s, const workload::Workload& w, std::vector<spec::TaskGraph> graphs,
                         const EngineOptions& o)
{
  StepReplay r(s, w, o, std::move(graphs));
  Timeline t = r.run();
  if (s.training.mode == spec::Mode::INFERENCE)
    t.request_passes = schedule::inference_passes(s);
  const int g = t.ranks.empty() ? 1 : t.ranks.front().graph.micro_steps;
  t.reuse = AccumulationReuse{g, g, 0, 0, t.step_time_s};
  return t;
}

} // namespace zerosim::engine
