// DeepSpeed's activation_checkpointing block on the real workload of a small GPT (docs/offload.md): the PCIe
// volumes of cpu_checkpointing, where the checkpoints live (GPU and host peaks from the memory replay), the
// contiguous buffers and the host waits of synchronize_checkpoint_boundary and profile.
#include "memory/memory_model.hpp"
#include "schedule_test_util.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

namespace {

constexpr std::int64_t GiB = 1024LL * 1024 * 1024;
constexpr int L = 6;     // transformer blocks, each a deepspeed.checkpointing.checkpoint call
constexpr int B = 8;     // micro-batch
constexpr int SEQ = 512; // sequence
constexpr int H = 256;   // hidden
constexpr int BYTES = 2; // bf16 activations
/// One checkpoint: the block input, micro_batch · seq · hidden · 2 bytes (docs/workload.md §4.2, full).
constexpr std::int64_t C = static_cast<std::int64_t>(B) * SEQ * H * BYTES;

/// A 6-block GPT (h 256, 4 heads, ffn 1024, vocab 5000, learned positions 512) on 1 node x 2 GPUs, bf16 AdamW,
/// full activation checkpointing, DeepSpeed stage `stage`, `g` micro-steps. The LM head's logits and fp32
/// log-softmax (T·V·(2 + 4) with T = 4096 tokens) put the GPU peak in the LM head, above the model states.
spec::Scenario gpt(int stage, int g = 1)
{
  spec::Scenario s;
  s.name = "act-offload";
  auto& m = s.model;
  m.name = "gpt-act";
  m.layers = L;
  m.hidden = H;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 4 * H;
  m.vocab = 5000;
  m.max_position = SEQ;
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = 2;
  s.cluster.node.gpus = 2;
  s.cluster.node.gpu.memory_bytes = 80 * GiB;
  s.cluster.node.cpu.memory_bytes = 1024 * GiB;
  s.training.seq_len = SEQ;
  s.training.micro_batch = B;
  s.training.grad_accum = g;
  s.training.global_batch = static_cast<std::int64_t>(B) * g * 2;
  s.training.activation_checkpointing = spec::Checkpointing::FULL;
  s.deepspeed.zero.stage = stage;
  s.deepspeed.zero.overlap_comm = stage == 3;
  return s;
}

/// The same on DeepSpeed 0.16 (fp16: 0.16's bf16 stage 0 runs BF16_Optimizer, not modelled).
spec::Scenario gpt016(int stage, int g = 1)
{
  spec::Scenario s = gpt(stage, g);
  s.deepspeed_version = "0.16";
  s.training.precision = spec::Precision::FP16;
  s.deepspeed.communication_data_type = spec::Dtype::FP16;
  s.deepspeed.grad_accum_dtype = spec::Dtype::FP16;
  return s;
}

workload::Workload work(const spec::Scenario& s)
{
  return workload::build_workload(s.model, workload::workload_options(s));
}

struct Copies {
  std::int64_t d2h = 0, h2d = 0;
  int d2h_pinned = 0, d2h_pageable = 0, h2d_pinned = 0, h2d_pageable = 0;
};

/// The checkpoint copies (`mbK.ckpt_d2h.*`, `mbK.ckpt_h2d.*`) of micro-step `mb`.
Copies ckpt_copies(const TaskGraph& g, int mb)
{
  Copies c;
  const std::string pre = "mb" + std::to_string(mb) + ".ckpt_";
  for (const Task& t : g.tasks) {
    if (t.kind != TaskKind::COPY || t.name.rfind(pre, 0) != 0)
      continue;
    if (t.direction == CopyDirection::D2H) {
      c.d2h += t.bytes;
      (t.pinned ? c.d2h_pinned : c.d2h_pageable)++;
    } else {
      c.h2d += t.bytes;
      (t.pinned ? c.h2d_pinned : c.h2d_pageable)++;
    }
  }
  return c;
}

/// Tasks whose host barrier is `waited` (issued after the host waited for it).
int issued_after_wait(const TaskGraph& g, int waited)
{
  int n = 0;
  for (const Task& t : g.tasks)
    n += t.host_barrier == waited;
  return n;
}

int count_prefix(const TaskGraph& g, const std::string& prefix)
{
  int n = 0;
  for (const Task& t : g.tasks)
    n += t.name.rfind(prefix, 0) == 0;
  return n;
}

} // namespace

TEST_SUITE("schedule")
{
  TEST_CASE("activation offload: the checkpoint of a block is its input, micro_batch x seq x hidden x 2 bytes")
  {
    const auto w = work(gpt(0));
    int blocks = 0;
    for (const workload::Layer& l : w.layers)
      if (l.kind == workload::LayerKind::BLOCK) {
        CHECK(l.activation_bytes_kept == C);
        ++blocks;
      }
    CHECK(blocks == L);
  }

  TEST_CASE("activation offload: 0.16 cpu_checkpointing copies every checkpoint D2H and back H2D, blocking")
  {
    // checkpointing.py (0.16.5) CheckpointFunction: copy_to_device(args, cpu) before the block's forward and
    // move_to_device(..., cuda) before its recompute: `.to()` with pageable memory, a host wait each.
    for (int stage = 0; stage <= 3; ++stage) {
      CAPTURE(stage);
      spec::Scenario base = gpt016(stage, 2);
      spec::Scenario off = base;
      off.deepspeed.activation_checkpointing.cpu_checkpointing = true;
      const auto w = work(base);
      const TaskGraph g = build_step_graph(off, w, 0);
      check_invariants(g);
      for (int mb = 0; mb < 2; ++mb) {
        const Copies c = ckpt_copies(g, mb);
        // Per micro-step: D2H L·c and H2D L·c (the formula of docs/offload.md, blocking path).
        CHECK(c.d2h == L * C);
        CHECK(c.h2d == L * C);
        CHECK(c.d2h_pageable == L);
        CHECK(c.h2d_pageable == L);
      }
      // Every copy is a host wait: the next task issued waits for it.
      const int d2h = find_task(g, "mb0.ckpt_d2h.block.0");
      REQUIRE(d2h >= 0);
      CHECK(g.tasks[static_cast<std::size_t>(d2h)].stream == Stream::COMPUTE);
      CHECK(issued_after_wait(g, d2h) >= 1);
      const int h2d = find_task(g, "mb0.ckpt_h2d.block.0");
      REQUIRE(h2d >= 0);
      CHECK(issued_after_wait(g, h2d) >= 1);
      // The recompute of block 0 waits for its H2D.
      const int rec = find_task(g, "mb0.recompute.block.0");
      REQUIRE(rec >= 0);
      const auto& deps = g.tasks[static_cast<std::size_t>(rec)].deps;
      CHECK(std::find(deps.begin(), deps.end(), h2d) != deps.end());
    }
  }

  TEST_CASE("activation offload: blocking copies move L checkpoints from the GPU peak to the host")
  {
    // Stage 0 (model states constant): the GPU peak (the LM head's backward) holds every block's checkpoint
    // without offload, none with it; the host holds all L at the end of each forward.
    spec::Scenario base = gpt016(0);
    spec::Scenario off = base;
    off.deepspeed.activation_checkpointing.cpu_checkpointing = true;
    const auto w = work(base);
    const auto rb = memory::replay_memory(base, build_step_graph(base, w, 0));
    const auto ro = memory::replay_memory(off, build_step_graph(off, w, 0));
    CHECK(ro.peak_task == rb.peak_task);
    CHECK(ro.gpu == rb.gpu - L * C);
    CHECK(ro.breakdown[static_cast<std::size_t>(MemCategory::ACTIVATIONS)] ==
          rb.breakdown[static_cast<std::size_t>(MemCategory::ACTIVATIONS)] - L * C);
    CHECK(ro.cpu_per_rank == rb.cpu_per_rank + L * C);
    CHECK(ro.cpu_pinned_per_rank == rb.cpu_pinned_per_rank); // pageable (`.to('cpu')`)
    CHECK(ro.cpu_per_node == 2 * ro.cpu_per_rank);           // 2 ranks per node
  }

  TEST_CASE("activation offload: 0.19 cpu_checkpointing is the async engine: keep-last, stash, pinned copies")
  {
    // _ActivationOffloadEngine(keep_last_count=1), max_fwd_stash_count 2: block L-1's input never leaves the
    // GPU; block L-2's is copied out but its GPU copy is still stashed when the backward restores it (no H2D);
    // blocks 0..L-3 go out and come back. Per micro-step D2H (L-1)·c, H2D (L-2)·c, pinned, no host wait.
    for (int stage = 0; stage <= 3; ++stage) {
      CAPTURE(stage);
      spec::Scenario off = gpt(stage, 2);
      off.deepspeed.activation_checkpointing.cpu_checkpointing = true;
      const TaskGraph g = build_step_graph(off, work(off), 0);
      check_invariants(g);
      for (int mb = 0; mb < 2; ++mb) {
        const Copies c = ckpt_copies(g, mb);
        CHECK(c.d2h == (L - 1) * C);
        CHECK(c.h2d == (L - 2) * C);
        CHECK(c.d2h_pinned == L - 1);
        CHECK(c.h2d_pinned == L - 2);
        CHECK(c.d2h_pageable + c.h2d_pageable == 0);
      }
      CHECK(find_task(g, "mb0.ckpt_d2h.block." + std::to_string(L - 1)) < 0);
      CHECK(find_task(g, "mb0.ckpt_h2d.block." + std::to_string(L - 2)) < 0);
      // Block j's D2H starts once block j+1's forward was issued (offload_input of j+1 flushes j).
      const int d2h0 = find_task(g, "mb0.ckpt_d2h.block.0");
      REQUIRE(d2h0 >= 0);
      CHECK(d2h0 > find_task(g, "mb0.fwd.block.1"));
      CHECK(issued_after_wait(g, d2h0) == 0);
      // Block L-2's recompute waits for its D2H (compute_stream.wait_event); block 0's for its H2D.
      const int rec = find_task(g, "mb0.recompute.block." + std::to_string(L - 2));
      const int d2h = find_task(g, "mb0.ckpt_d2h.block." + std::to_string(L - 2));
      REQUIRE(rec >= 0);
      const auto& deps = g.tasks[static_cast<std::size_t>(rec)].deps;
      CHECK(std::find(deps.begin(), deps.end(), d2h) != deps.end());
      const int rec0 = find_task(g, "mb0.recompute.block.0");
      const int h2d0 = find_task(g, "mb0.ckpt_h2d.block.0");
      const auto& deps0 = g.tasks[static_cast<std::size_t>(rec0)].deps;
      CHECK(std::find(deps0.begin(), deps0.end(), h2d0) != deps0.end());
    }
  }

  TEST_CASE("activation offload: the async engine leaves two checkpoints on the GPU and L-1 in pinned memory")
  {
    spec::Scenario base = gpt(0);
    spec::Scenario off = base;
    off.deepspeed.activation_checkpointing.cpu_checkpointing = true;
    const auto w = work(base);
    const auto rb = memory::replay_memory(base, build_step_graph(base, w, 0));
    const auto ro = memory::replay_memory(off, build_step_graph(off, w, 0));
    // At the peak (the LM head's backward) the GPU still holds block L-1's input (kept last) and block L-2's
    // (stashed): (L-2)·c less than without offload; the host holds blocks 0..L-2, pinned.
    CHECK(ro.peak_task == rb.peak_task);
    CHECK(ro.gpu == rb.gpu - (L - 2) * C);
    CHECK(ro.cpu_per_rank == rb.cpu_per_rank + (L - 1) * C);
    CHECK(ro.cpu_pinned_per_rank == rb.cpu_pinned_per_rank + (L - 1) * C);
  }

  TEST_CASE("activation offload: partition_activations selects the blocking copies on 0.19 too")
  {
    // checkpointing.py _get_cpu_offload_engine returns None with PARTITION_ACTIVATIONS: partition_activations()
    // copies each (whole, mp size 1) partition with a blocking `.cpu()`.
    spec::Scenario off = gpt(3, 1);
    off.deepspeed.activation_checkpointing.cpu_checkpointing = true;
    off.deepspeed.activation_checkpointing.partition_activations = true;
    const TaskGraph g = build_step_graph(off, work(off), 0);
    check_invariants(g);
    const Copies c = ckpt_copies(g, 0);
    CHECK(c.d2h == L * C);
    CHECK(c.h2d == L * C);
    CHECK(c.d2h_pageable == L);
    CHECK(c.h2d_pageable == L);
    // partition_activations alone (mp size 1): no task, no buffer differs from the plain run.
    spec::Scenario part = gpt(3, 1);
    part.deepspeed.activation_checkpointing.partition_activations = true;
    const TaskGraph gp = build_step_graph(part, work(part), 0);
    const TaskGraph g0 = build_step_graph(gpt(3, 1), work(part), 0);
    CHECK(gp.tasks.size() == g0.tasks.size());
    CHECK(gp.buffers.size() == g0.buffers.size());
  }

  TEST_CASE("activation offload: contiguous_memory_optimization allocates number_checkpoints slots up front")
  {
    const int n = L + 3;
    spec::Scenario base = gpt(0);
    const auto w = work(base);
    const auto rb = memory::replay_memory(base, build_step_graph(base, w, 0));
    // On the GPU (no cpu_checkpointing): n slots at the first block's forward; the n - L unused ones are freed
    // at the first CheckpointFunction.backward, after the LM head's backward (the peak): + (n - L)·c.
    spec::Scenario gpu = base;
    gpu.deepspeed.activation_checkpointing.partition_activations = true;
    gpu.deepspeed.activation_checkpointing.contiguous_memory_optimization = true;
    gpu.deepspeed.activation_checkpointing.number_checkpoints = n;
    const TaskGraph gg = build_step_graph(gpu, w, 0);
    check_invariants(gg);
    const auto rg = memory::replay_memory(gpu, gg);
    CHECK(rg.peak_task == rb.peak_task);
    CHECK(rg.gpu == rb.gpu + (n - L) * C);
    // With cpu_checkpointing the slots are pageable host memory: n·c on the host, none of the checkpoints on
    // the GPU at the peak.
    spec::Scenario host = gpu;
    host.deepspeed.activation_checkpointing.cpu_checkpointing = true;
    const TaskGraph gh = build_step_graph(host, w, 0);
    check_invariants(gh);
    const auto rh = memory::replay_memory(host, gh);
    CHECK(rh.gpu == rb.gpu - L * C);
    CHECK(rh.cpu_per_rank == rb.cpu_per_rank + n * C);
    CHECK(rh.cpu_pinned_per_rank == rb.cpu_pinned_per_rank);
    CHECK(ckpt_copies(gh, 0).d2h == L * C);
    // Fewer slots than checkpointed blocks: DeepSpeed's partition_activations raises IndexError.
    spec::Scenario few = gpu;
    few.deepspeed.activation_checkpointing.number_checkpoints = L - 1;
    CHECK_THROWS_AS(build_step_graph(few, w, 0), core::InputError);
  }

  TEST_CASE("activation offload: synchronize_checkpoint_boundary and profile are host waits per checkpoint")
  {
    for (int stage = 0; stage <= 3; ++stage) {
      CAPTURE(stage);
      spec::Scenario sy = gpt(stage, 2);
      sy.deepspeed.activation_checkpointing.synchronize_checkpoint_boundary = true;
      const TaskGraph g = build_step_graph(sy, work(sy), 0);
      check_invariants(g);
      // CheckpointFunction.forward and .backward: get_accelerator().synchronize() at the start and the end.
      for (const char* where : {"fwd_begin", "fwd_end", "bwd_begin", "bwd_end"}) {
        CHECK(count_prefix(g, std::string("mb0.ckpt_synchronize.") + where + ".block.") == L);
        CHECK(count_prefix(g, std::string("mb1.ckpt_synchronize.") + where + ".block.") == L);
      }
      const int s0 = find_task(g, "mb0.ckpt_synchronize.fwd_end.block.0");
      REQUIRE(s0 >= 0);
      CHECK(g.tasks[static_cast<std::size_t>(s0)].kind == TaskKind::SYNC);
      const auto& d = g.tasks[static_cast<std::size_t>(s0)].deps;
      CHECK(std::find(d.begin(), d.end(), find_task(g, "mb0.fwd.block.0")) != d.end());
      CHECK(issued_after_wait(g, s0) >= 1);

      // profile: timers.log reads the CUDA-event timer after each checkpointed forward and backward.
      spec::Scenario pr = gpt(stage, 2);
      pr.deepspeed.activation_checkpointing.profile = true;
      const TaskGraph gp = build_step_graph(pr, work(pr), 0);
      check_invariants(gp);
      CHECK(count_prefix(gp, "mb0.ckpt_profile.fwd.block.") == L);
      CHECK(count_prefix(gp, "mb0.ckpt_profile.bwd.block.") == L);
      const int p0 = find_task(gp, "mb0.ckpt_profile.fwd.block.0");
      REQUIRE(p0 >= 0);
      CHECK(issued_after_wait(gp, p0) >= 1);
    }
  }

  TEST_CASE("activation offload: the block acts only on DeepSpeed training with full checkpointing")
  {
    spec::Scenario sel = gpt(2, 1);
    sel.training.activation_checkpointing = spec::Checkpointing::SELECTIVE;
    sel.deepspeed.activation_checkpointing.cpu_checkpointing = true;
    sel.deepspeed.activation_checkpointing.synchronize_checkpoint_boundary = true;
    const TaskGraph g = build_step_graph(sel, work(sel), 0);
    CHECK(count_prefix(g, "mb0.ckpt_") == 0);
    spec::Scenario fsdp = gpt(0, 1);
    fsdp.framework = spec::Framework::FSDP;
    fsdp.deepspeed.activation_checkpointing.cpu_checkpointing = true;
    const TaskGraph gf = build_step_graph(fsdp, work(fsdp), 0);
    CHECK(count_prefix(gf, "mb0.ckpt_") == 0);
  }
}
