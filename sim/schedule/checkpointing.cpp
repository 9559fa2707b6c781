// DeepSpeed activation checkpointing (docs/offload.md): the checkpointed blocks and the tasks of checkpoint()'s
// entry and of CheckpointFunction.backward's, with the CPU copies of the checkpoints (blocking, or the async
// _ActivationOffloadEngine).
#include "schedule/schedule_builder.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <utility>

namespace zerosim::schedule::detail {

CheckpointState::CheckpointState(const spec::Scenario& s, const workload::Workload& w, bool v016)
{
  // DeepSpeed's activation_checkpointing block (docs/offload.md). zerosim checkpoints every transformer block
  // under `full`; DeepSpeed's block acts on blocks run through deepspeed.checkpointing.checkpoint.
  const spec::DsActivationCheckpointingSpec& a = s.deepspeed.activation_checkpointing;
  config.active = s.framework == spec::Framework::DEEPSPEED && s.training.mode == spec::Mode::TRAIN &&
                  s.training.activation_checkpointing == spec::Checkpointing::FULL;
  slot.assign(w.layers.size(), -1);
  if (config.active) {
    for (std::size_t l = 0; l < w.layers.size(); ++l)
      if (w.layers[l].kind == workload::LayerKind::BLOCK) {
        slot[l] = static_cast<int>(layers.size());
        layers.push_back(static_cast<int>(l));
      }
    // checkpointing.py CheckpointFunction.forward: partition_activations -> partition_activations() (`.cpu()` of
    // the clone); else cpu_checkpointing -> the async engine (0.19, _get_cpu_offload_engine) or copy_to_device
    // (0.16: `.to('cpu')`).
    if (a.cpu_checkpointing)
      config.copy = a.partition_activations || v016 ? DsCheckpointing::Copy::BLOCKING : DsCheckpointing::Copy::ASYNC;
    config.contiguous = a.contiguous_memory_optimization && a.partition_activations && a.number_checkpoints;
    config.slots = a.number_checkpoints.value_or(0);
    config.synchronize = a.synchronize_checkpoint_boundary;
    config.profile = a.profile;
    if (config.contiguous && config.slots < static_cast<int>(layers.size()))
      throw core::InputError(scenario_label(s) + ": deepspeed.activation_checkpointing.number_checkpoints: " +
                             std::to_string(config.slots) + " contiguous slots for " + std::to_string(layers.size()) +
                             " checkpointed blocks per forward; DeepSpeed's partition_activations runs out of "
                             "contiguous_data_buffers (IndexError) at block " +
                             std::to_string(config.slots));
  }
  fwd_begun.assign(w.layers.size(), 0);
  bwd_begun.assign(w.layers.size(), 0);
  host.assign(w.layers.size(), -1);
  d2h.assign(w.layers.size(), -1);
  input.assign(w.layers.size(), -1);
}

void Builder::ckpt_offload(int mb, int layer, int id, int newest_id)
{
  // _start_offload: drop the stash entries older than max_fwd_stash_count (their GPU memory returns once the
  // side stream has drained, record_stream), then an async D2H into a pinned host buffer.
  const workload::Layer& l = w.layers[static_cast<std::size_t>(layer)];
  const auto li = static_cast<std::size_t>(layer);
  const std::string mbs = "mb" + std::to_string(mb);
  // The side stream waits for the compute stream (the checkpoint is the output of the work issued before).
  std::vector<TaskId> after;
  if (const TaskId producer = last_on_stream_[static_cast<std::size_t>(Stream::COMPUTE)]; producer >= 0)
    after.push_back(producer);
  const TaskId d2h = copy(mbs + ".ckpt_d2h." + l.name, Phase::FORWARD, ACT_OFFLOAD_STREAM, CopyDirection::D2H,
                          l.activation_bytes_kept, true, mb, std::move(after));
  for (auto it = ckpt_.stash.begin(); it != ckpt_.stash.end();) {
    if (it->first > newest_id - ACT_OFFLOAD_FWD_STASH) {
      ++it;
      continue;
    }
    const auto sl = static_cast<std::size_t>(it->second);
    free_on(d2h, act_kept(mb, sl));
    act_kept(mb, sl) = -1;
    it = ckpt_.stash.erase(it);
  }
  ckpt_.host[li] =
      transient(mbs + ".ckpt_host." + l.name, Device::HOST, MemCategory::ACTIVATIONS, l.activation_bytes_kept, true);
  alloc_on(d2h, ckpt_.host[li]);
  ckpt_.d2h[li] = d2h;
  ckpt_.stash.emplace_back(id, layer);
}

TaskId Builder::device_synchronize(std::string name, int mb)
{
  // torch.cuda.synchronize(): every CUDA stream's work issued so far (not the host thread's, not aio's).
  std::vector<TaskId> deps;
  for (Stream st : {Stream::COMPUTE, Stream::REDUCTION, Stream::ALLGATHER, Stream::REDUCE_PARTITION})
    deps.push_back(last_on_stream_[static_cast<std::size_t>(st)]);
  return sync(std::move(name), mb, std::move(deps));
}

bool Builder::checkpoint_entry(int mb, int layer, std::vector<char>& begun, const char* what)
{
  if (!ckpt_.on(layer))
    return false;
  const auto li = static_cast<std::size_t>(layer);
  if (begun[li])
    return false;
  begun[li] = 1;
  if (ckpt_.config.synchronize)
    device_synchronize("mb" + std::to_string(mb) + ".ckpt_synchronize." + what + "." + w.layers[li].name, mb);
  return true;
}

void Builder::checkpoint_forward_begin(int mb, int layer)
{
  if (!checkpoint_entry(mb, layer, ckpt_.fwd_begun, "fwd_begin") ||
      ckpt_.config.copy != DsCheckpointing::Copy::BLOCKING)
    return;
  const auto li = static_cast<std::size_t>(layer);
  const workload::Layer& l = w.layers[li];
  const std::string mbs = "mb" + std::to_string(mb);
  // partition_activations() `partition.cpu()` (or its copy_ into a contiguous slot) / copy_to_device(cpu): a
  // synchronous copy into pageable memory on the compute stream, before the block's forward.
  const TaskId d2h = copy(mbs + ".ckpt_d2h." + l.name, Phase::FORWARD, Stream::COMPUTE, CopyDirection::D2H,
                          l.activation_bytes_kept, false, mb);
  ckpt_.input[li] = transient(mbs + ".act." + l.name, Device::GPU, MemCategory::ACTIVATIONS, l.activation_bytes_kept);
  alloc_on(d2h, ckpt_.input[li]);
  if (ckpt_.config.contiguous && ckpt_.slots_mb != mb) {
    // contiguous_data_buffers on the host: number_checkpoints pageable slots at the first checkpoint.
    ckpt_.slots_mb = mb;
    for (int cl : ckpt_.layers) {
      const workload::Layer& c = w.layers[static_cast<std::size_t>(cl)];
      ckpt_.host[static_cast<std::size_t>(cl)] = transient(mbs + ".ckpt_contiguous." + c.name, Device::HOST,
                                                           MemCategory::ACTIVATIONS, c.activation_bytes_kept);
      alloc_on(d2h, ckpt_.host[static_cast<std::size_t>(cl)]);
    }
    ckpt_.unused_slots =
        transient(mbs + ".ckpt_contiguous.unused", Device::HOST, MemCategory::ACTIVATIONS,
                  (ckpt_.config.slots - static_cast<std::int64_t>(ckpt_.layers.size())) * l.activation_bytes_kept);
    alloc_on(d2h, ckpt_.unused_slots);
  } else if (!ckpt_.config.contiguous) {
    ckpt_.host[li] =
        transient(mbs + ".ckpt_host." + l.name, Device::HOST, MemCategory::ACTIVATIONS, l.activation_bytes_kept);
    alloc_on(d2h, ckpt_.host[li]);
  }
  ckpt_.d2h[li] = d2h;
  host_wait(d2h);
}

void Builder::checkpoint_backward_begin(int mb, int layer)
{
  if (!checkpoint_entry(mb, layer, ckpt_.bwd_begun, "bwd_begin"))
    return;
  const auto li = static_cast<std::size_t>(layer);
  const workload::Layer& l = w.layers[li];
  const std::string mbs = "mb" + std::to_string(mb);
  // CheckpointFunction.backward: `contiguous_data_buffers = []` drops the slots no checkpoint holds.
  if (ckpt_.unused_slots >= 0) {
    ckpt_.pending_frees.push_back(ckpt_.unused_slots);
    ckpt_.unused_slots = -1;
  }
  if (ckpt_.config.copy == DsCheckpointing::Copy::NONE)
    return;
  if (ckpt_.config.copy == DsCheckpointing::Copy::ASYNC) {
    // engine.restore_input (offload_activations.py _restore_tensor): the kept-last input is still on the GPU; a
    // stashed one too (the compute stream waits for its D2H, its host buffer returns to the pool); any other
    // is copied back on the side stream and the compute stream waits for it.
    auto kept = std::find_if(ckpt_.keep.begin(), ckpt_.keep.end(),
                             [layer](const std::pair<int, int>& e) { return e.second == layer; });
    if (kept != ckpt_.keep.end()) {
      ckpt_.keep.erase(kept);
      return;
    }
    auto stashed = std::find_if(ckpt_.stash.begin(), ckpt_.stash.end(),
                                [layer](const std::pair<int, int>& e) { return e.second == layer; });
    if (stashed != ckpt_.stash.end()) {
      ckpt_.stash.erase(stashed);
      ckpt_.pending_deps.push_back(ckpt_.d2h[li]);
      ckpt_.pending_frees.push_back(ckpt_.host[li]);
      ckpt_.host[li] = -1;
      return;
    }
  }
  // Blocking: `t.saved_data.to(t.device)`, a synchronous copy from pageable memory on the compute stream.
  // Async: a non-blocking copy from the pinned buffer on the engine's stream.
  const bool async = ckpt_.config.copy == DsCheckpointing::Copy::ASYNC;
  const TaskId h2d = copy(mbs + ".ckpt_h2d." + l.name, Phase::RECOMPUTE, async ? ACT_OFFLOAD_STREAM : Stream::COMPUTE,
                          CopyDirection::H2D, l.activation_bytes_kept, async, mb);
  act_kept(mb, li) =
      transient(mbs + ".act_restored." + l.name, Device::GPU, MemCategory::ACTIVATIONS, l.activation_bytes_kept);
  alloc_on(h2d, act_kept(mb, li));
  free_on(h2d, ckpt_.host[li]);
  ckpt_.host[li] = -1;
  ckpt_.pending_deps.push_back(h2d);
  if (!async)
    host_wait(h2d);
}

void Builder::checkpoint_backward_end(int mb, int layer)
{
  if (!ckpt_.on(layer))
    return;
  const std::string mbs = "mb" + std::to_string(mb);
  const std::string& name = w.layers[static_cast<std::size_t>(layer)].name;
  if (ckpt_.config.profile)
    sync(mbs + ".ckpt_profile.bwd." + name, mb, {last_on_stream_[static_cast<std::size_t>(Stream::COMPUTE)]});
  if (ckpt_.config.synchronize)
    device_synchronize(mbs + ".ckpt_synchronize.bwd_end." + name, mb);
}

} // namespace zerosim::schedule::detail
