// Inference (training.mode: inference): the forward passes of one Hugging Face generate() request as one task
// graph. DeepSpeed ZeRO stage 3 without an optimizer is ZeRO-Inference: every pass fetches every non-persistent
// parameter again, from its GPU partition, the CPU (offload_param cpu) or NVMe (offload_param nvme); stages 0-2
// keep a replica on every GPU. docs/inference.md; docs/deepspeed-schedule.md §5.1-§5.4 (partitioning, trace, fetch,
// prefetch, release), §6.2 (CPU parameters), §8 (NVMe parameters).
#include "schedule/inference.hpp"
#include "schedule/offload.hpp"
#include "schedule/stage3_fetch.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <string>

namespace zerosim::schedule {

int inference_passes(const spec::Scenario& s)
{
  return std::max(1, s.inference.generate_tokens);
}

std::vector<int> inference_graph_passes(const spec::Scenario& s, int sampled)
{
  if (sampled < 0 || sampled == 1)
    throw core::InternalError("schedule: sampled_decode_passes must be 0 (every pass) or at least 2, found " +
                              std::to_string(sampled));
  const int decode = inference_passes(s) - 1;
  std::vector<int> passes{0};
  if (sampled == 0 || decode <= sampled) {
    for (int t = 1; t <= decode; ++t)
      passes.push_back(t);
    return passes;
  }
  // Evenly spaced from the first decode pass to the last; the spacing (decode - 1)/(sampled - 1) exceeds 1, so the
  // rounded passes are distinct and ascending.
  for (int i = 0; i < sampled; ++i)
    passes.push_back(1 + static_cast<int>(std::llround(static_cast<double>(i) * (decode - 1) / (sampled - 1))));
  return passes;
}

namespace detail {

namespace {

/// Where a parameter's partition lives between its uses (§5.1, §6.2, §8; partition_parameters.py _partition_param).
enum class Home { GPU, CPU, NVME };

/// An NVMe partition's status (PartitionedParamStatus): on NVMe only, read in flight into a swap buffer, or in it.
enum class Swap { OUT, INFLIGHT, IN };

const char* device_name(spec::OffloadDevice d)
{
  switch (d) {
  case spec::OffloadDevice::NONE:
    return "none";
  case spec::OffloadDevice::CPU:
    return "cpu";
  case spec::OffloadDevice::NVME:
    return "nvme";
  }
  return "?";
}

/// One module occurrence of the forward trace (§5.2): the model layer it belongs to and its parameters.
struct TraceModule {
  int layer = -1;
  std::vector<int> params; ///< indices into Builder::params
};

/// The per-pass state of the parameter coordinator (§5.2-§5.4) and of the NVMe swapper (§8).
struct Coordinator : FetchCoordinator {
  std::vector<BufferId> gathered; ///< per param: its full buffer while gathered (-1: none, a view of the partition)
  std::vector<Swap> swap;         ///< per NVMe param: its partition's status
  TaskId ag_last = -1;            ///< the last task issued on the all-gather stream
  TaskId ag_waited = -1;          ///< ag_last at the latest current_stream().wait_stream(allgather_stream)
  TaskId last_read = -1;          ///< the last NVMe read issued (the aio handle completes them in order)
  int calls = 0;                  ///< all-gather calls so far (names)
  int reads = 0;                  ///< NVMe prefetch reads so far (names)
};

/// One rank's generate() request: where each parameter lives, the forward trace, and the coordinator's state, with
/// the module hooks as functions (stage 3; stages 0-2 keep a replica and fetch nothing).
struct Inference {
  explicit Inference(Builder& builder);

  /// Where each partition lives between its uses (§5.1, §6.2, §8).
  void placement();
  void residents();
  /// The forward trace (§5.2): modules in forward order; a tied LM head uses the embedding's weight.
  void build_trace();
  /// Whether param `p`, used by the module at `pos`, stays gathered for a later use (reuse distance, §5.4).
  bool kept_by_reuse(int pos, int p) const;
  /// One forward pass (pass 0: the prompt; later: one decode step) and its next-token step.
  void run_pass(int pass);
  /// The end of the request: the KV cache is released.
  void finish() { b.free_on(last, kv_cache); }

  // The hooks of the pass being built.
  /// _ensure_availability_of_partitioned_params: the NVMe partitions of `ps_list` read in, or waited for.
  void ensure_available(const std::vector<int>& ps_list, const std::string& nm);
  void gather_call(const std::vector<int>& ps_list, const std::string& why);
  void mark_gathered(std::size_t pu, TaskId by, BufferId buf);
  void fetch(int pos);
  void prefetch_nvme();
  void release(int pos, TaskId by);
  /// The forward of model layer `l`, between its modules' fetches and releases.
  void layer_forward(int l);
  /// generate()'s next token from the logits; returns its task.
  TaskId next_token();

  Builder& b;
  const spec::Scenario& s;
  const workload::Workload& w;
  const spec::ZeroSpec& z;
  int nl = 0;
  bool stage3 = false;
  int nn = 1;
  bool offload = false;
  bool nvme = false;
  int ba = 2; ///< activation dtype (workload_options)
  std::int64_t batch = 1;
  std::size_t np = 0;
  Stage3Partition sp;
  std::vector<Home> home;
  std::vector<TraceModule> trace;
  std::vector<std::vector<int>> layer_positions; ///< per model layer, its trace positions
  TraceEntries entries;
  std::vector<std::vector<int>> uses; ///< per param, the positions using it
  Stream ag_stream = Stream::COMPUTE;
  CollectiveKind fetch_kind = CollectiveKind::ALL_GATHER;
  Coordinator c;
  BufferId kv_cache = -1;
  TaskId last = -1;

  // The pass being built.
  int pass = 0;
  std::string ps;
  bool complete = false; ///< the trace is COMPLETE: prefetch and reuse (§5.2)
};

} // namespace

void check_inference(const spec::Scenario& s, const workload::Workload& w, int rank, const StepOptions& opt)
{
  const std::string where = scenario_label(s);
  if (s.framework != spec::Framework::DEEPSPEED)
    throw core::UnsupportedError(
        where + ": training.mode inference with " + (s.framework == spec::Framework::DDP ? "ddp" : "fsdp") +
        ": only DeepSpeed inference is modelled (ZeRO-Inference: stage 3 with or without offload_param; a replica: "
        "stage 0, 1 or 2); give a deepspeed block instead (docs/inference.md)");
  check_rank(s, rank, where);
  if (s.training.grad_accum != 1)
    throw core::InputError(where + ": training.grad_accum: inference accumulates no gradients, expected 1, found " +
                           std::to_string(s.training.grad_accum));
  check_deepspeed_precision_and_stage(s, where, "");
  const spec::ZeroSpec& z = s.deepspeed.zero;
  if (z.stage < 3 && z.offload_param.device != spec::OffloadDevice::NONE)
    throw core::UnsupportedError(
        where + ": deepspeed.zero_optimization.offload_param.device " + device_name(z.offload_param.device) +
        " with stage " + std::to_string(z.stage) +
        ": parameter offload is ZeRO stage 3's (ZeRO-Inference, docs/deepspeed-schedule.md §6.2, §8); use stage 3");
  if (s.inference.batch < 1)
    throw core::InputError(where + ": inference.batch: expected >= 1, found " + std::to_string(s.inference.batch));
  if (s.inference.prompt_tokens < 1)
    throw core::InputError(where + ": inference.prompt_tokens: expected >= 1, found " +
                           std::to_string(s.inference.prompt_tokens));
  if (s.inference.generate_tokens < 0)
    throw core::InputError(where + ": inference.generate_tokens: expected >= 0, found " +
                           std::to_string(s.inference.generate_tokens));
  if (w.layers.empty())
    throw core::InternalError("schedule: the workload has no layers");
  if (w.decode_passes != inference_passes(s) - 1)
    throw core::InternalError("schedule: the workload has " + std::to_string(w.decode_passes) +
                              " decode passes, the scenario's request " + std::to_string(inference_passes(s) - 1) +
                              " (build it with workload::workload_options of the same scenario)");
  (void)inference_graph_passes(s, opt.sampled_decode_passes); // checks sampled_decode_passes
}

namespace {

Inference::Inference(Builder& builder)
    : b(builder), s(b.s), w(b.w), z(s.deepspeed.zero),
      nl(w.model_layers > 0 ? w.model_layers : static_cast<int>(w.layers.size())), stage3(z.stage == 3), nn(b.n),
      offload(stage3 && z.offload_param.device != spec::OffloadDevice::NONE),
      nvme(stage3 && z.offload_param.device == spec::OffloadDevice::NVME),
      ba(s.training.precision == spec::Precision::FP32 ? 4 : 2), batch(s.inference.batch), np(b.params.size()),
      ag_stream(z.overlap_comm ? Stream::ALLGATHER : Stream::COMPUTE),
      fetch_kind(z.stage3_use_all_reduce_for_fetch_params ? CollectiveKind::ALL_REDUCE : CollectiveKind::ALL_GATHER)
{
  b.graph.micro_steps = inference_passes(s);
  placement();
  residents();
  build_trace();
  c.available.assign(np, 0);
  c.inflight.assign(np, 0);
  c.gathered.assign(np, -1);
  c.gathered_by.assign(np, -1);
  c.most_recent.assign(np, -1);
  c.swap.assign(np, Swap::OUT);
  // Persistent params were gathered at their first use and are never released (§5.1).
  for (std::size_t p = 0; p < np; ++p)
    if (sp.persistent[p] || !stage3)
      c.available[p] = 1;
}

void Inference::placement()
{
  // Stage 3: every param padded to a multiple of N, ⌈n/N⌉ per rank; persistent params (numel <= param threshold
  // while the running total stays <= the model threshold) stay gathered on the GPU. Without an optimizer there is no
  // flat CPU buffer and no max_in_cpu: with offload_param nvme a partition goes to NVMe iff it is swappable
  // (⌈n/N⌉·b_lp >= max(1 MiB, aio.block_size)), else to the CPU; CPU partitions are pinned iff
  // offload_param.pin_memory (partition_parameters.py _partition_param).
  sp = stage3_partition(b);
  if (!stage3)
    sp.persistent.assign(np, 0); // a replica: nothing is partitioned
  home.assign(np, Home::GPU);
  const std::int64_t min_aio = std::max<std::int64_t>(MIN_AIO_BYTES, s.deepspeed.aio.block_size);
  for (std::size_t p = 0; p < np; ++p) {
    if (!stage3 || sp.persistent[p] || !offload)
      continue;
    if (nvme && sp.part[p] * b.b_lp >= min_aio) {
      check_swap_buffer_fits(b, p, sp.part[p]); // get_buffer's assert (§8)
      home[p] = Home::NVME;
    } else {
      home[p] = Home::CPU;
    }
  }
}

void Inference::residents()
{
  if (!stage3) {
    // Stages 0-2 without an optimizer: the model, replicated on every GPU (no partitioned optimizer or gradients).
    b.resident("lp_params", Device::GPU, MemCategory::PARAMS, b.psi * b.b_lp);
    return;
  }
  std::int64_t lp_gpu = 0, lp_cpu = 0, lp_nvme = 0, persist_full = 0;
  for (std::size_t p = 0; p < np; ++p) {
    if (home[p] == Home::GPU)
      lp_gpu += sp.part[p];
    else if (home[p] == Home::CPU)
      lp_cpu += sp.part[p];
    else
      lp_nvme += sp.part[p];
    if (sp.persistent[p])
      persist_full += sp.part[p] * nn;
  }
  b.resident("lp_partition", Device::GPU, MemCategory::PARAMS, lp_gpu * b.b_lp);
  b.resident("lp_partition_cpu", Device::HOST, MemCategory::PARAMS, lp_cpu * b.b_lp, z.offload_param.pin_memory);
  b.resident("lp_partition_nvme", Device::NVME, MemCategory::PARAMS, lp_nvme * b.b_lp);
  // Gathered persistent params. With one rank the gather is a view of the partition (_no_gather_coalesced): none.
  if (nn > 1)
    b.resident("persistent_params", Device::GPU, MemCategory::PARAMS, persist_full * b.b_lp);
  // The pinned swap pool: buffer_count x io_aligned(buffer_size) lp elements (§8).
  if (nvme)
    b.resident("param_swap_pool", Device::HOST, MemCategory::BUFFERS, param_swap_pool_bytes(b), true);
}

void Inference::build_trace()
{
  layer_positions.assign(static_cast<std::size_t>(nl), {});
  if (stage3) {
    int tied = -1;
    if (s.model.tied_embeddings)
      for (int l = 0; l < nl && tied < 0; ++l)
        if (w.layers[static_cast<std::size_t>(l)].kind == workload::LayerKind::EMBEDDING &&
            !b.layer_params[static_cast<std::size_t>(l)].empty())
          tied = b.layer_params[static_cast<std::size_t>(l)].front(); // embed.tokens.weight, the first tensor
    for (int l = 0; l < nl; ++l) {
      const auto lu = static_cast<std::size_t>(l);
      for (int m : b.layer_modules[lu]) {
        layer_positions[lu].push_back(static_cast<int>(trace.size()));
        trace.push_back(TraceModule{l, b.modules[static_cast<std::size_t>(m)].params});
      }
      // HF's tied lm_head is a Linear whose weight is the embedding's Parameter: its hook fetches it again.
      if (w.layers[lu].kind == workload::LayerKind::LM_HEAD && b.layer_params[lu].empty() && tied >= 0) {
        layer_positions[lu].push_back(static_cast<int>(trace.size()));
        trace.push_back(TraceModule{l, {tied}});
      }
    }
  }
  uses.assign(np, {});
  for (const TraceModule& m : trace)
    entries.add(b, m.params);
  for (std::size_t e = 0; e < entries.param.size(); ++e)
    uses[static_cast<std::size_t>(entries.param[e])].push_back(entries.pos[e]);
}

bool Inference::kept_by_reuse(int pos, int p) const
{
  // After the module at `pos`, the walk from pos + 1 visits module q iff the modules strictly between sum to less
  // than stage3_max_reuse_distance; a param used by a visited module is kept. Within one forward trace this only
  // keeps a param used twice (a tied embedding in a small model).
  for (int q : uses[static_cast<std::size_t>(p)])
    if (q > pos)
      return entries.numel_before[static_cast<std::size_t>(q)] -
                 entries.numel_before[static_cast<std::size_t>(pos) + 1] <
             z.stage3_max_reuse_distance;
  return false;
}

void Inference::ensure_available(const std::vector<int>& ps_list, const std::string& nm)
{
  // _ensure_availability_of_partitioned_params: a synchronous swap-in of the partitions only on NVMe, else a
  // wait for the reads in flight; both wait for every read issued so far (synchronize_reads).
  std::int64_t out_bytes = 0;
  bool in_flight = false;
  for (int p : ps_list) {
    const auto pu = static_cast<std::size_t>(p);
    if (home[pu] != Home::NVME)
      continue;
    if (c.swap[pu] == Swap::OUT)
      out_bytes += sp.part[pu] * b.b_lp;
    else if (c.swap[pu] == Swap::INFLIGHT)
      in_flight = true;
  }
  if (out_bytes > 0) {
    c.last_read = b.nvme(nm + ".nvme_read_params", Phase::PARAM_GATHER, false, out_bytes, pass);
    b.host_wait(c.last_read);
    for (int p : ps_list)
      if (home[static_cast<std::size_t>(p)] == Home::NVME)
        c.swap[static_cast<std::size_t>(p)] = Swap::IN;
  } else if (in_flight) {
    b.host_wait(c.last_read);
  }
  if (out_bytes > 0 || in_flight)
    for (Swap& st : c.swap)
      if (st == Swap::INFLIGHT)
        st = Swap::IN;
}

void Inference::mark_gathered(std::size_t pu, TaskId by, BufferId buf)
{
  c.gathered[pu] = buf;
  c.gathered_by[pu] = by;
  c.available[pu] = 1;
  c.inflight[pu] = 1;
  c.n_available += b.params[pu].numel;
}

void Inference::gather_call(const std::vector<int>& ps_list, const std::string& why)
{
  // One all_gather_coalesced call (§5.3): the NVMe partitions made available (§8), the H2D of the offloaded
  // partitions on the all-gather stream (§6.2), then the all-gather; with one rank _no_gather_coalesced: no
  // collective, the H2D copy (or, for a GPU partition, a view) is the parameter.
  const std::vector<std::int64_t>& part = sp.part;
  const Phase gather = Phase::PARAM_GATHER;
  const std::string nm = ps + ".allgather." + std::to_string(c.calls++) + "." + why;
  ensure_available(ps_list, nm);
  // p.ds_tensor.to(cuda): from the pinned swap pool (NVMe), the CPU partition (pinned iff pin_memory).
  std::int64_t pinned_bytes = 0, pageable_bytes = 0, part_sum = 0;
  for (int p : ps_list) {
    const auto pu = static_cast<std::size_t>(p);
    part_sum += part[pu];
    if (home[pu] == Home::NVME || (home[pu] == Home::CPU && z.offload_param.pin_memory))
      pinned_bytes += part[pu] * b.b_lp;
    else if (home[pu] == Home::CPU)
      pageable_bytes += part[pu] * b.b_lp;
  }
  TaskId pinned_copy = -1, pageable_copy = -1;
  if (pinned_bytes > 0)
    c.ag_last = pinned_copy =
        b.copy(nm + ".h2d_partitions", gather, ag_stream, CopyDirection::H2D, pinned_bytes, true, pass);
  if (pageable_bytes > 0)
    c.ag_last = pageable_copy =
        b.copy(nm + ".h2d_partitions_pageable", gather, ag_stream, CopyDirection::H2D, pageable_bytes, false, pass);
  const TaskId first_copy = pinned_copy >= 0 ? pinned_copy : pageable_copy;
  const TaskId last_copy = pageable_copy >= 0 ? pageable_copy : pinned_copy;
  if (nn == 1) {
    for (int p : ps_list) {
      const auto pu = static_cast<std::size_t>(p);
      if (home[pu] == Home::GPU) {
        mark_gathered(pu, -1, -1);
        continue;
      }
      const bool pinned = home[pu] == Home::NVME || z.offload_param.pin_memory;
      const TaskId by = pinned ? pinned_copy : pageable_copy;
      const BufferId buf =
          b.transient(ps + ".gathered." + b.params[pu].name, Device::GPU, MemCategory::PARAMS, part[pu] * b.b_lp);
      b.alloc_on(by, buf);
      mark_gathered(pu, by, buf);
    }
    return;
  }
  BufferId staging = -1;
  if (first_copy >= 0) {
    staging = b.transient(nm + ".h2d_staging", Device::GPU, MemCategory::BUFFERS, (pinned_bytes + pageable_bytes));
    b.alloc_on(first_copy, staging);
  }
  const bool sequential = z.stage3_allgather_sequential || ps_list.size() == 1;
  TaskId t = -1;
  if (!sequential) {
    c.ag_last = t = b.collective(nm, gather, ag_stream, fetch_kind, nn * part_sum * b.b_lp, pass, {last_copy});
    b.scratch(t, nm + ".flat", MemCategory::BUFFERS, nn * part_sum * b.b_lp);
  }
  for (std::size_t i = 0; i < ps_list.size(); ++i) {
    const auto pu = static_cast<std::size_t>(ps_list[i]);
    if (sequential)
      c.ag_last = t = b.collective(ps_list.size() > 1 ? nm + "." + std::to_string(i) : nm, gather, ag_stream,
                                   fetch_kind, nn * part[pu] * b.b_lp, pass, {last_copy});
    const BufferId buf =
        b.transient(ps + ".gathered." + b.params[pu].name, Device::GPU, MemCategory::PARAMS, nn * part[pu] * b.b_lp);
    b.alloc_on(t, buf);
    mark_gathered(pu, t, buf);
  }
  b.free_on(t, staging);
}

void Inference::fetch(int pos)
{
  // fetch_sub_module (§5.3): gather the module's missing params now, wait for its in-flight ones, then (COMPLETE
  // trace) pop the queue past the module, prefetch the upcoming params up to min(max_live - available, B_p)
  // numel and, with NVMe parameters, swap in upcoming NVMe partitions (__prefetch_nvme_param_partitions).
  const TraceModule& m = trace[static_cast<std::size_t>(pos)];
  if (complete)
    c.pop_queue_to(entries.begin[static_cast<std::size_t>(pos) + 1], entries);
  const std::vector<int> now = c.missing(m.params);
  if (!now.empty())
    gather_call(now, "fetch");
  c.wait_inflight(b, m.params, ps, pass);
  // current_stream().wait_stream(allgather_stream): the compute stream waits for everything issued on the
  // all-gather stream so far, earlier prefetches included.
  c.ag_waited = c.ag_last;
  if (!complete)
    return;
  // _is_currently_on_nvme: NVMe partitions are prefetched by their own path, in trace order.
  const std::vector<int> ahead =
      c.prefetch(b, entries, std::min(z.stage3_max_live_parameters - c.n_available, z.stage3_prefetch_bucket_size),
                 [&](std::size_t pu) { return home[pu] == Home::NVME && c.swap[pu] == Swap::OUT && !c.available[pu]; });
  if (!ahead.empty())
    gather_call(ahead, "prefetch");
  if (nvme)
    prefetch_nvme();
}

void Inference::prefetch_nvme()
{
  // __prefetch_nvme_param_partitions (§5.3 step 4): walk the queue, stop once the numel considered exceeds twice
  // the numel in flight (gathered, not yet waited) or the free swap buffers are taken; swap in (asynchronously)
  // the NVMe partitions met that are only on NVMe.
  std::int64_t in_flight = 0;
  int buffers_used = 0;
  for (std::size_t p = 0; p < np; ++p) {
    if (c.inflight[p])
      in_flight += b.params[p].numel;
    if (c.swap[p] != Swap::OUT)
      ++buffers_used;
  }
  const int free_buffers = z.offload_param.buffer_count - buffers_used;
  std::int64_t considered = 0, bytes = 0;
  std::vector<int> to_read;
  for (std::size_t q = c.queue; q < entries.param.size(); ++q) {
    const auto pu = static_cast<std::size_t>(entries.param[q]);
    if (considered > 2 * in_flight || static_cast<int>(to_read.size()) >= free_buffers)
      break;
    if (home[pu] == Home::NVME && c.swap[pu] == Swap::OUT && !c.available[pu] &&
        std::find(to_read.begin(), to_read.end(), entries.param[q]) == to_read.end()) {
      to_read.push_back(entries.param[q]);
      bytes += sp.part[pu] * b.b_lp;
    }
    considered += b.params[pu].numel;
  }
  if (to_read.empty())
    return;
  c.last_read = b.nvme(ps + ".nvme_prefetch." + std::to_string(c.reads++), Phase::PARAM_GATHER, false, bytes, pass);
  for (int p : to_read)
    c.swap[static_cast<std::size_t>(p)] = Swap::INFLIGHT;
}

void Inference::release(int pos, TaskId by)
{
  // release_sub_module (§5.4): free unless persistent, reused within the distance or already popped by the
  // prefetcher for a later use (COMPLETE trace); an NVMe partition returns its swap buffer (no write-back).
  for (int p : trace[static_cast<std::size_t>(pos)].params) {
    const auto pu = static_cast<std::size_t>(p);
    if (sp.persistent[pu] || !c.available[pu])
      continue;
    if (complete && (kept_by_reuse(pos, p) || c.most_recent[pu] > pos))
      continue;
    b.free_on(by, c.gathered[pu]);
    c.gathered[pu] = -1;
    c.gathered_by[pu] = -1;
    c.available[pu] = 0;
    c.n_available -= b.params[pu].numel;
    c.swap[pu] = Swap::OUT;
  }
}

void Inference::layer_forward(int l)
{
  const auto lu = static_cast<std::size_t>(l);
  for (int pos : layer_positions[lu])
    fetch(pos);
  // The forward of the layer (one task per layer: the modules' fetches are issued before it, §5.3 as in
  // stage3.cpp). Pass 0 runs the model's layer (the prompt), a decode pass its decode layer.
  const int li = w.pass_layer(pass, l);
  const workload::Layer& layer = w.layers[static_cast<std::size_t>(li)];
  std::vector<TaskId> deps;
  for (int pos : layer_positions[lu])
    for (int p : trace[static_cast<std::size_t>(pos)].params)
      if (!sp.persistent[static_cast<std::size_t>(p)])
        deps.push_back(c.gathered_by[static_cast<std::size_t>(p)]);
  if (!layer_positions[lu].empty())
    deps.push_back(c.ag_waited);
  const TaskId id = b.layer_compute(ps + ".fwd." + w.layers[lu].name, Phase::FORWARD, pass, li, std::move(deps));
  b.scratch(id, ps + ".fwd_working." + w.layers[lu].name, MemCategory::ACTIVATIONS,
            layer.activation_bytes_forward_working);
  if (kv_cache < 0 && w.kv_cache_bytes > 0) {
    // The static KV cache of the request (docs/inference.md), from its first forward to its end.
    kv_cache = b.transient("kv_cache", Device::GPU, MemCategory::ACTIVATIONS, w.kv_cache_bytes);
    b.alloc_on(id, kv_cache);
  }
  c.last_compute = id;
  for (int pos : layer_positions[lu])
    release(pos, id);
}

TaskId Inference::next_token()
{
  // generate(): the next token from the last position's logits (greedy argmax over b x V).
  const TaskId id = b.gpu_pass(ps + ".next_token", Phase::OTHER, pass, 0,
                               static_cast<double>(batch * s.model.vocab * ba), 0, {c.last_compute});
  // The logits the LM head returned (every prompt position in the prompt's pass), alive until the argmax.
  const std::int64_t positions = pass == 0 ? s.inference.prompt_tokens : 1;
  b.scratch(id, ps + ".logits", MemCategory::ACTIVATIONS, batch * positions * s.model.vocab * ba);
  return id;
}

void Inference::run_pass(int p)
{
  pass = p;
  ps = "pass" + std::to_string(pass);
  // The trace is recorded by the run's first forward and frozen at the second reset_step (§5.2); a steady-state
  // request finds it COMPLETE in every pass. first_step: the prompt's pass RECORDs (no prefetch, no reuse).
  complete = !(b.first_step && pass == 0);
  // reset_step at the root module's forward (§5.2): queue rewound, prefetch marks and __n_available_params reset.
  c.queue = 0;
  c.n_available = 0;
  std::fill(c.most_recent.begin(), c.most_recent.end(), -1);

  for (int l = 0; l < nl; ++l)
    layer_forward(l);

  const TaskId next_id = next_token();
  // reset_step's _clean_inflight_param_registry: whatever is still gathered is released (nothing, when the
  // trace was followed).
  if (stage3)
    for (std::size_t q = 0; q < np; ++q) {
      if (!sp.persistent[q] && c.available[q]) {
        b.free_on(next_id, c.gathered[q]);
        c.gathered[q] = -1;
        c.gathered_by[q] = -1;
        c.available[q] = 0;
        c.inflight[q] = 0;
      }
      c.swap[q] = Swap::OUT;
    }
  // The stopping check `unfinished_sequences.max() == 0`: a host sync that ends the pass.
  last = b.sync(ps + ".generate_sync", pass, {next_id});
}

} // namespace

void build_inference(Builder& b, const std::vector<int>& passes)
{
  Inference inf(b);
  for (int pass : passes)
    inf.run_pass(pass);
  inf.finish();
}

} // namespace detail

} // namespace zerosim::schedule
