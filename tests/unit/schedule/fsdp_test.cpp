// PyTorch FSDP (docs/fsdp.md, cited as §n): collectives per unit and micro-step, dtypes, sharding strategies,
// the rate limiter, backward prefetch ordering, CPU offload and model-state memory, read from the task graph.
#include "core/error.hpp"
#include "schedule_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

namespace {

// A small transformer: an embedding (2000) and an LM head (2000) form the root unit (n_root = 4000); L blocks
// of qkv 4000 + fc 8000 = 12000 elements each (every one divisible by N = 4 and 8, no padding).
constexpr int L = 4;
constexpr std::int64_t N_ROOT = 4000, N_BLOCK = 12000;
constexpr std::int64_t PSI = N_ROOT + L * N_BLOCK; // Ψ = 52000

workload::Layer param_layer(const std::string& name, workload::LayerKind kind, std::int64_t numel)
{
  workload::Layer l;
  l.name = name;
  l.kind = kind;
  l.params.push_back(workload::ParamTensor{"weight", numel, name});
  set_ops(l, 1e8);
  l.activation_bytes_kept = 500;
  return l;
}

workload::Workload model(int blocks = L, std::int64_t qkv = 4000, std::int64_t fc = 8000)
{
  workload::Workload w = synthetic(blocks, {{"attn.qkv.weight", qkv}, {"mlp.fc.weight", fc}});
  w.layers.insert(w.layers.begin(), param_layer("embed", workload::LayerKind::EMBEDDING, N_ROOT / 2));
  w.layers.push_back(param_layer("lm_head", workload::LayerKind::LM_HEAD, N_ROOT / 2));
  w.params += N_ROOT;
  return w;
}

spec::Scenario fsdp(int gpus, int g, int nodes = 1)
{
  spec::Scenario s = scenario(0, gpus, g);
  s.cluster.nodes = nodes;
  s.framework = spec::Framework::FSDP;
  return s;
}

bool has(const std::string& s, const std::string& part)
{
  return s.find(part) != std::string::npos;
}

/// Collectives of `kind` in micro-step `mb` whose name contains `part`.
Volume named(const TaskGraph& g, CollectiveKind kind, int mb, const std::string& part)
{
  Volume v;
  for (const Task& t : g.tasks)
    if (t.kind == TaskKind::COLLECTIVE && t.collective == kind && t.micro_step == mb && has(t.name, part)) {
      v.bytes += t.bytes;
      ++v.calls;
    }
  return v;
}

const Task& task(const TaskGraph& g, const std::string& name)
{
  const int i = find_task(g, name);
  REQUIRE_MESSAGE(i >= 0, "no task " << name);
  return g.tasks[static_cast<std::size_t>(i)];
}

int at(const TaskGraph& g, const std::string& name)
{
  const int i = find_task(g, name);
  REQUIRE_MESSAGE(i >= 0, "no task " << name);
  return i;
}

/// Peak over issue order of the live GPU bytes of the buffers whose name starts with `prefix`.
std::int64_t peak_of(const TaskGraph& g, const std::string& prefix)
{
  std::int64_t live = 0, peak = 0;
  for (const Task& t : g.tasks) {
    for (BufferId b : t.allocs)
      if (g.buffers[static_cast<std::size_t>(b)].name.rfind(prefix, 0) == 0)
        live += g.buffers[static_cast<std::size_t>(b)].bytes;
    peak = std::max(peak, live);
    for (BufferId b : t.frees)
      if (g.buffers[static_cast<std::size_t>(b)].name.rfind(prefix, 0) == 0)
        live -= g.buffers[static_cast<std::size_t>(b)].bytes;
  }
  return peak;
}

} // namespace

TEST_SUITE("schedule")
{
  TEST_CASE("fsdp: FULL_SHARD gathers every block twice and the root once per micro-step, and reduce-scatters "
            "every unit once")
  {
    const int n = 4, g = 2;
    const TaskGraph gr = build_step_graph(fsdp(n, g), model());
    check_invariants(gr);
    const int units = 1 + L;
    for (int mb = 0; mb < g; ++mb) {
      CAPTURE(mb);
      // §2, §3: blocks are resharded after forward and gathered again in backward; the root is never resharded
      // after forward. Bytes = W·S_u·b_p = n_u·2 (bf16, N divides every unit).
      const Volume ag = collectives(gr, CollectiveKind::ALL_GATHER, mb);
      CHECK(ag.calls == 1 + 2 * L);
      CHECK(ag.bytes == 2 * (N_ROOT + 2 * L * N_BLOCK));
      // The forward's all-gathers carry Σ_u n_u · b_p = Ψ·2.
      CHECK(named(gr, CollectiveKind::ALL_GATHER, mb, ".fwd").bytes == PSI * 2);
      CHECK(named(gr, CollectiveKind::ALL_GATHER, mb, ".fwd").calls == units);
      // One reduce-scatter per unit of W·S_u·b_r: Σ = Ψ·2.
      const Volume rs = collectives(gr, CollectiveKind::REDUCE_SCATTER, mb);
      CHECK(rs.calls == units);
      CHECK(rs.bytes == PSI * 2);
      CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, mb).calls == 0);
    }
    // Streams (§1): all-gathers on the unshard stream, reduce-scatters on the post-backward stream.
    CHECK(task(gr, "mb0.allgather.block.0.fwd").stream == Stream::ALLGATHER);
    CHECK(task(gr, "mb0.reduce_scatter.block.0").stream == Stream::REDUCE_PARTITION);
    CHECK(task(gr, "mb0.allgather.block.0.fwd").group_size == n);
    // The root's reduce-scatter is the last one (after the embedding's backward, §3 step 5).
    CHECK(at(gr, "mb0.reduce_scatter.root") > at(gr, "mb0.bwd.embed"));
    CHECK(at(gr, "mb0.reduce_scatter.root") > at(gr, "mb0.reduce_scatter.block.0"));
    // One optimizer step over P = Ψ/N sharded fp32 elements (§4).
    CHECK(task(gr, "step.optimizer").elements == PSI / n);

    // Without resharding after forward every unit is gathered once per micro-step: SHARD_GRAD_OP (FSDP1) and
    // FSDP2 with reshard_after_forward false; FSDP2 with true behaves like FULL_SHARD.
    spec::Scenario sgo = fsdp(n, g);
    sgo.fsdp.sharding_strategy = spec::FsdpSharding::SHARD_GRAD_OP;
    spec::Scenario v2_keep = fsdp(n, g);
    v2_keep.fsdp.reshard_after_forward = false;
    spec::Scenario v2_free = fsdp(n, g);
    v2_free.fsdp.reshard_after_forward = true;
    for (const auto& [s, gathers] : {std::pair{sgo, units}, std::pair{v2_keep, units}, std::pair{v2_free, 1 + 2 * L}}) {
      const TaskGraph gs = build_step_graph(s, model());
      check_invariants(gs);
      for (int mb = 0; mb < g; ++mb) {
        CHECK(collectives(gs, CollectiveKind::ALL_GATHER, mb).calls == gathers);
        CHECK(collectives(gs, CollectiveKind::REDUCE_SCATTER, mb).calls == units);
        CHECK(collectives(gs, CollectiveKind::REDUCE_SCATTER, mb).bytes == PSI * 2);
      }
    }
  }

  TEST_CASE("fsdp: an uneven unit is padded to a multiple of W (FSDP1) or per parameter (FSDP2)")
  {
    const int n = 4;
    // Blocks of 4001 + 8003 elements: FSDP1 pads the flat parameter, W·⌈12004/4⌉ = 12004; FSDP2 pads each
    // parameter, 4·(⌈4001/4⌉ + ⌈8003/4⌉) = 4·(1001 + 2001) = 12008.
    const auto w = model(L, 4001, 8003);
    const TaskGraph g1 = build_step_graph(fsdp(n, 1), w);
    CHECK(task(g1, "mb0.allgather.block.0.fwd").bytes == 12004 * 2);
    CHECK(task(g1, "mb0.reduce_scatter.block.0").bytes == 12004 * 2);
    spec::Scenario v2 = fsdp(n, 1);
    v2.fsdp.reshard_after_forward = true;
    const TaskGraph g2 = build_step_graph(v2, w);
    CHECK(task(g2, "mb0.allgather.block.0.fwd").bytes == 12008 * 2);
    CHECK(task(g2, "mb0.reduce_scatter.block.0").bytes == 12008 * 2);
    check_invariants(g1);
    check_invariants(g2);
    // FSDP1 reduce-scatters a padded copy of the 12004-element gradient: W·S_u = 12004 here (4 divides it); with
    // N = 8, ⌈12004/8⌉·8 = 12008 and the F.pad copy (12008·2 bytes) appears inside the reduce-scatter.
    const TaskGraph g8 = build_step_graph(fsdp(8, 1), w);
    bool pad = false;
    for (BufferId b : task(g8, "mb0.reduce_scatter.block.0").allocs)
      pad |= g8.buffers[static_cast<std::size_t>(b)].name == "mb0.reduce_scatter.block.0.pad" &&
             g8.buffers[static_cast<std::size_t>(b)].bytes == 12008 * 2;
    CHECK(pad);
  }

  TEST_CASE("fsdp: before torch 2.0 the reduce-scatter input is always a padded copy and torch.optim steps one tensor "
            "at a time")
  {
    // torch 1.13 FSDP1 _post_backward_hook: input_flattened = F.pad(grad_flatten, [0, num_pad]) with num_pad 0
    // here (4 divides 12000), and F.pad with no positive pad clones: W·S_u·b_r = 12000·2 bytes on the
    // post-backward stream. From 2.0 (_get_reduce_scatter_tensors) the copy is made only when num_pad > 0.
    auto pad_bytes = [](const TaskGraph& g) {
      std::int64_t bytes = 0;
      for (BufferId b : task(g, "mb0.reduce_scatter.block.0").allocs)
        if (g.buffers[static_cast<std::size_t>(b)].name == "mb0.reduce_scatter.block.0.pad")
          bytes += g.buffers[static_cast<std::size_t>(b)].bytes;
      return bytes;
    };
    spec::Scenario old = fsdp(4, 1);
    old.software.torch = "1.13";
    spec::Scenario now = fsdp(4, 1);
    now.software.torch = "2.0";
    const TaskGraph g_old = build_step_graph(old, model());
    const TaskGraph g_now = build_step_graph(now, model());
    check_invariants(g_old);
    CHECK(pad_bytes(g_old) == N_BLOCK * 2);
    CHECK(pad_bytes(g_now) == 0);
    // With the stack switched off (--without stack) the default stack prices it: no copy.
    old.mechanisms.stack = false;
    CHECK(pad_bytes(build_step_graph(old, model())) == 0);
    old.mechanisms.stack = true;

    // torch.optim AdamW on CUDA: foreach from 2.0 (one sqrt temporary of 4 B over all Ψ/N elements the rank steps),
    // single-tensor before (sqrt and quotient of the largest tensor at once: 8 B x the largest flat shard,
    // N_BLOCK/4 = 3000 elements; the root's shard is 4000/4 = 1000).
    old.training.optimizer = spec::Optimizer::ADAMW;
    now.training.optimizer = spec::Optimizer::ADAMW;
    const TaskGraph o_old = build_step_graph(old, model());
    const TaskGraph o_now = build_step_graph(now, model());
    CHECK(peak_of(o_old, "step.optimizer.sqrt") == 8 * (N_BLOCK / 4));
    CHECK(peak_of(o_old, "step.optimizer.foreach_sqrt") == 0);
    CHECK(peak_of(o_now, "step.optimizer.foreach_sqrt") == 4 * (PSI / 4));
    // Traffic: 88 B/elem single-tensor (mul_ and add_ for exp_avg instead of lerp_) against foreach's 80.
    CHECK(task(o_old, "step.optimizer").mem_bytes == doctest::Approx(88.0 * PSI / 4));
    CHECK(task(o_now, "step.optimizer").mem_bytes == doctest::Approx(80.0 * PSI / 4));
  }

  TEST_CASE("fsdp: an fp32 reduce_dtype doubles the reduce-scatter bytes, param_dtype sets the all-gather bytes")
  {
    const int n = 4;
    const TaskGraph bf = build_step_graph(fsdp(n, 1), model());
    spec::Scenario s = fsdp(n, 1);
    s.fsdp.reduce_dtype = spec::Dtype::FP32;
    const TaskGraph f32 = build_step_graph(s, model());
    check_invariants(f32);
    // RS bytes = Ψ·b_r: 4 bytes against 2 (§6); the all-gathers stay in param_dtype bf16.
    CHECK(collectives(f32, CollectiveKind::REDUCE_SCATTER).bytes == PSI * 4);
    CHECK(collectives(f32, CollectiveKind::REDUCE_SCATTER).bytes ==
          2 * collectives(bf, CollectiveKind::REDUCE_SCATTER).bytes);
    CHECK(collectives(f32, CollectiveKind::ALL_GATHER).bytes == collectives(bf, CollectiveKind::ALL_GATHER).bytes);
    // amp_bf16 without fsdp.mixed_precision: no FSDP mixed precision, fp32 all-gathers and reduce-scatters (§9).
    spec::Scenario amp = fsdp(n, 1);
    amp.training.precision = spec::Precision::AMP_BF16;
    const TaskGraph ga = build_step_graph(amp, model());
    CHECK(collectives(ga, CollectiveKind::ALL_GATHER).bytes == 4 * (N_ROOT + 2 * L * N_BLOCK));
    CHECK(collectives(ga, CollectiveKind::REDUCE_SCATTER).bytes == PSI * 4);
    // fp32: everything fp32.
    spec::Scenario f = fsdp(n, 1);
    f.training.precision = spec::Precision::FP32;
    CHECK(collectives(build_step_graph(f, model()), CollectiveKind::REDUCE_SCATTER).bytes == PSI * 4);
  }

  TEST_CASE("fsdp: NO_SHARD all-reduces Ψ·b per micro-step and gathers nothing")
  {
    const int n = 4, g = 2;
    spec::Scenario s = fsdp(n, g);
    s.fsdp.sharding_strategy = spec::FsdpSharding::NO_SHARD;
    const TaskGraph gr = build_step_graph(s, model());
    check_invariants(gr);
    for (int mb = 0; mb < g; ++mb) {
      CHECK(collectives(gr, CollectiveKind::ALL_GATHER, mb).calls == 0);
      CHECK(collectives(gr, CollectiveKind::REDUCE_SCATTER, mb).calls == 0);
      // §5: one all-reduce per unit of n_u·b_r: Σ = Ψ·2 (bf16).
      const Volume ar = collectives(gr, CollectiveKind::ALL_REDUCE, mb);
      CHECK(ar.calls == 1 + L);
      CHECK(ar.bytes == PSI * 2);
    }
    // Model states are not sharded: params 4Ψ, Adam 8Ψ resident.
    CHECK(resident_bytes(gr, Device::GPU) == 12 * PSI);
    CHECK(task(gr, "step.optimizer").elements == PSI);
    // One GPU: FSDP1 switches to NO_SHARD (§5) and the one-rank all-reduce moves nothing.
    const TaskGraph g1 = build_step_graph(fsdp(1, 1), model());
    CHECK(collectives(g1, CollectiveKind::ALL_GATHER).calls == 0);
    CHECK(collectives(g1, CollectiveKind::ALL_REDUCE).calls == 0);
    check_invariants(g1);
  }

  TEST_CASE("fsdp: HYBRID_SHARD reduce-scatters within the node and all-reduces the shard across nodes")
  {
    const int gpn = 4, nodes = 2, g = 2;
    spec::Scenario s = fsdp(gpn, g, nodes);
    s.fsdp.sharding_strategy = spec::FsdpSharding::HYBRID_SHARD;
    const TaskGraph gr = build_step_graph(s, model());
    check_invariants(gr);
    for (int mb = 0; mb < g; ++mb) {
      // §5: W = gpus_per_node = 4. RS per unit: W·S_u·b_r = n_u·2 over the node; AR of the shard S_u·b_r =
      // n_u/4·2 over the R = 2 nodes; all-gathers over the node, n_u·2.
      CHECK(collectives(gr, CollectiveKind::REDUCE_SCATTER, mb).bytes == PSI * 2);
      CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, mb).bytes == PSI / gpn * 2);
      CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, mb).calls == 1 + L);
      CHECK(collectives(gr, CollectiveKind::ALL_GATHER, mb).bytes == 2 * (N_ROOT + 2 * L * N_BLOCK));
    }
    for (const Task& t : gr.tasks) {
      if (t.kind != TaskKind::COLLECTIVE || t.micro_step < 0)
        continue;
      if (t.collective == CollectiveKind::ALL_REDUCE) {
        CHECK(t.group == CommGroup::INTER_NODE);
        CHECK(t.group_size == nodes);
        CHECK(t.stream == Stream::REDUCTION); // HSDP's all-reduce stream
      } else {
        CHECK(t.group == CommGroup::INTRA_NODE);
        CHECK(t.group_size == gpn);
      }
    }
    // Each all-reduce waits for its unit's reduce-scatter.
    const Task& ar = task(gr, "mb1.all_reduce.block.2");
    CHECK(std::find(ar.deps.begin(), ar.deps.end(), at(gr, "mb1.reduce_scatter.block.2")) != ar.deps.end());
    // Model states shard over the node: (4 + 8)·Ψ/4 resident, 4·Ψ/4 of sharded gradients (§10).
    CHECK(resident_bytes(gr, Device::GPU) == 12 * PSI / gpn);
    CHECK(peak_of(gr, "sharded_grad.") == 4 * PSI / gpn);
    // One node: the replicate group has one rank, no all-reduce.
    spec::Scenario one = fsdp(gpn, 1);
    one.fsdp.sharding_strategy = spec::FsdpSharding::HYBRID_SHARD;
    CHECK(collectives(build_step_graph(one, model()), CollectiveKind::ALL_REDUCE).calls == 0);
  }

  TEST_CASE("fsdp: limit_all_gathers bounds the unsharded blocks the CPU can have in flight")
  {
    // §2.1: `_unshard` pops the oldest free event (and the CPU waits for it) when the queue holds >= 2; every
    // free pushes one. Per micro-step with a root and L blocks: forward, 1 + L unshards and L frees; backward,
    // the root's unshard (no gather), L all-gathers (the root prefetches block L-1, block i prefetches i-1, block
    // 0 prefetches nothing) and L + 1 frees. Starting from q events: the forward ends with 3 whenever q >= 4; the
    // backward's pops are skipped while fewer than 2 remain and its last two frees (block 0, root) come after
    // its last pop, so it ends with 4: the steady queue holds q = 4 at the step's start. In the forward the
    // queue then holds 3 at every block all-gather: block i's all-gather waits for block i-3's forward, so at
    // most 3 blocks' unsharded parameters (i-2, i-1, i) can be alive when it is issued; in the backward block i's
    // prefetch of i-1 waits for block i+2's backward: 3 again (i+1, i, i-1). Without the limiter nothing makes
    // the CPU wait: every unsharded buffer of the micro-step allocated so far may still be alive (2 per block).
    const int n = 4, blocks = 6;
    struct Seen {
      int forward = 0, any = 0, syncs = 0;
    };
    auto inflight = [&](bool limit) {
      spec::Scenario s = fsdp(n, 2);
      s.fsdp.limit_all_gathers = limit;
      const TaskGraph gr = build_step_graph(s, model(blocks));
      check_invariants(gr);
      std::map<BufferId, std::pair<int, int>> life; // mb1 block buffers: alloc task, free task
      for (std::size_t i = 0; i < gr.tasks.size(); ++i) {
        for (BufferId b : gr.tasks[i].allocs)
          if (gr.buffers[static_cast<std::size_t>(b)].name.rfind("mb1.unsharded.block.", 0) == 0)
            life[b].first = static_cast<int>(i);
        for (BufferId b : gr.tasks[i].frees)
          if (life.count(b) != 0)
            life[b].second = static_cast<int>(i);
      }
      Seen seen;
      for (std::size_t i = 0; i < gr.tasks.size(); ++i) {
        const Task& t = gr.tasks[i];
        seen.syncs += has(t.name, "rate_limiter");
        if (t.kind != TaskKind::COLLECTIVE || t.micro_step != 1 || !has(t.name, "allgather.block."))
          continue;
        // The compute tasks the CPU knows complete: up to the latest compute task its last wait depended on.
        int known = -1;
        if (t.host_barrier >= 0)
          for (TaskId d : gr.tasks[static_cast<std::size_t>(t.host_barrier)].deps)
            if (gr.tasks[static_cast<std::size_t>(d)].stream == Stream::COMPUTE)
              known = std::max(known, static_cast<int>(d));
        int alive = 0;
        for (const auto& [b, span] : life)
          alive += span.first <= static_cast<int>(i) && span.second > known;
        seen.any = std::max(seen.any, alive);
        if (has(t.name, ".fwd"))
          seen.forward = std::max(seen.forward, alive);
      }
      return seen;
    };
    const Seen with = inflight(true), without = inflight(false);
    CHECK(with.forward == 3);
    CHECK(with.any == 3);
    CHECK(with.syncs > 0);
    CHECK(without.forward == blocks);
    CHECK(without.any == 2 * blocks);
    CHECK(without.syncs == 0);
  }

  TEST_CASE("fsdp: backward_prefetch decides where the next all-gather is issued, one NCCL stream per group")
  {
    const int n = 4;
    auto graph = [&](spec::BackwardPrefetch p) {
      spec::Scenario s = fsdp(n, 1);
      s.fsdp.backward_prefetch = p;
      return build_step_graph(s, model());
    };
    // §3 step 2. BACKWARD_PRE: block 1's all-gather is issued in block 2's pre-backward, before its gradient
    // computation. BACKWARD_POST: in block 2's post-backward hook, after its backward, before its reduce-scatter.
    // NONE: in block 1's own pre-backward, after block 2's reduce-scatter.
    const TaskGraph pre = graph(spec::BackwardPrefetch::BACKWARD_PRE);
    CHECK(at(pre, "mb0.allgather.block.1.bwd") < at(pre, "mb0.bwd.block.2"));
    const TaskGraph post = graph(spec::BackwardPrefetch::BACKWARD_POST);
    CHECK(at(post, "mb0.bwd.block.2") < at(post, "mb0.allgather.block.1.bwd"));
    CHECK(at(post, "mb0.allgather.block.1.bwd") < at(post, "mb0.reduce_scatter.block.2"));
    const TaskGraph none = graph(spec::BackwardPrefetch::NONE);
    CHECK(at(none, "mb0.reduce_scatter.block.2") < at(none, "mb0.allgather.block.1.bwd"));
    // The root's pre-backward prefetches the last block with BACKWARD_PRE only.
    CHECK(at(pre, "mb0.allgather.block.3.bwd") < at(pre, "mb0.bwd.lm_head"));
    CHECK(at(none, "mb0.allgather.block.3.bwd") > at(none, "mb0.bwd.lm_head"));
    // api.py:BackwardPrefetch: collectives of one process group share one NCCL stream, in issue order: every
    // collective depends on the previous one of its group. The backward compute waits for its all-gather.
    for (const TaskGraph* gp : {&pre, &post, &none}) {
      TaskId prev = -1;
      for (std::size_t i = 0; i < gp->tasks.size(); ++i) {
        const Task& t = gp->tasks[i];
        if (t.kind != TaskKind::COLLECTIVE)
          continue;
        if (prev >= 0)
          CHECK(std::find(t.deps.begin(), t.deps.end(), prev) != t.deps.end());
        prev = static_cast<TaskId>(i);
      }
      const Task& bwd = task(*gp, "mb0.bwd.block.1");
      CHECK(std::find(bwd.deps.begin(), bwd.deps.end(), at(*gp, "mb0.allgather.block.1.bwd")) != bwd.deps.end());
    }
  }

  TEST_CASE("fsdp: model states peak at (4 + 4 + 8)·Ψ/N, CPU offload moves them to the host")
  {
    const int n = 4, g = 2;
    const TaskGraph gr = build_step_graph(fsdp(n, g), model());
    // §10: sharded fp32 params 4Ψ/N and AdamW m, v 8Ψ/N resident; sharded fp32 gradients 4Ψ/N from micro-step
    // 0's reduce-scatters to the optimizer step (zero_grad frees them): 16Ψ/N at the step.
    const std::int64_t p = PSI / n;
    CHECK(resident_bytes(gr, Device::GPU, MemCategory::PARAMS, false) == 4 * p);
    CHECK(resident_bytes(gr, Device::GPU, MemCategory::OPTIMIZER, false) == 8 * p);
    CHECK(peak_of(gr, "sharded_grad.") == 4 * p);
    std::int64_t at_step = resident_bytes(gr, Device::GPU, MemCategory::PARAMS, false) +
                           resident_bytes(gr, Device::GPU, MemCategory::OPTIMIZER, false);
    std::int64_t live = 0;
    const int opt = at(gr, "step.optimizer");
    for (int i = 0; i <= opt; ++i) {
      for (BufferId b : gr.tasks[static_cast<std::size_t>(i)].allocs)
        if (gr.buffers[static_cast<std::size_t>(b)].name.rfind("sharded_grad.", 0) == 0)
          live += gr.buffers[static_cast<std::size_t>(b)].bytes;
      if (i < opt)
        for (BufferId b : gr.tasks[static_cast<std::size_t>(i)].frees)
          if (gr.buffers[static_cast<std::size_t>(b)].name.rfind("sharded_grad.", 0) == 0)
            live -= gr.buffers[static_cast<std::size_t>(b)].bytes;
    }
    at_step += live;
    CHECK(at_step == 16 * PSI / n);
    // The sharded gradients are allocated by micro-step 0's reductions only (micro-step 1 accumulates into them).
    int allocated_in_mb1 = 0;
    for (const Task& t : gr.tasks)
      for (BufferId b : t.allocs)
        allocated_in_mb1 +=
            t.micro_step == 1 && gr.buffers[static_cast<std::size_t>(b)].name.rfind("sharded_grad.", 0) == 0;
    CHECK(allocated_in_mb1 == 0);
    // Unsharded parameters in bf16: the root's 4000·2 bytes stay gathered from the forward to its backward (§2 step 4).
    const int root_ag = at(gr, "mb0.allgather.root.fwd");
    bool root_buf = false;
    for (BufferId b : gr.tasks[static_cast<std::size_t>(root_ag)].allocs)
      root_buf |= gr.buffers[static_cast<std::size_t>(b)].category == MemCategory::PARAMS &&
                  gr.buffers[static_cast<std::size_t>(b)].bytes == N_ROOT * 2;
    CHECK(root_buf);

    // CPU offload (§7): nothing of the model states on the GPU; on the host fp32 params 4P and `_cpu_grad` 4P
    // pinned, Adam states 8P pageable.
    spec::Scenario off = fsdp(n, g);
    off.fsdp.cpu_offload = true;
    const TaskGraph go = build_step_graph(off, model());
    check_invariants(go);
    CHECK(resident_bytes(go, Device::GPU) == 0);
    std::int64_t pinned = 0, pageable = 0;
    for (BufferId b : go.resident) {
      const Buffer& buf = go.buffers[static_cast<std::size_t>(b)];
      (buf.pinned ? pinned : pageable) += buf.bytes;
    }
    CHECK(pinned == 8 * p);
    CHECK(pageable == 8 * p);
    for (int mb = 0; mb < g; ++mb) {
      // Per micro-step: a D2H of every fp32 shard (Σ = 4P) and an H2D of the fp32 shard before every unshard:
      // U in forward, U in backward (the root too: with mixed precision pre_unshard copies and casts its shard
      // although it is still gathered), 2·(4·S_root + L·4·S_block) = 2·4P.
      std::int64_t h2d = 0, d2h = 0;
      for (const Task& t : go.tasks)
        if (t.kind == TaskKind::COPY && t.micro_step == mb)
          (t.direction == CopyDirection::H2D ? h2d : d2h) += t.bytes;
      CHECK(d2h == 4 * p);
      CHECK(h2d == 2 * 4 * p);
      CHECK(task(go, "mb" + std::to_string(mb) + ".post_backward_final_callback.synchronize").kind == TaskKind::SYNC);
    }
    // The optimizer runs on the CPU over P elements.
    CHECK(task(go, "step.cpu_optimizer").kind == TaskKind::CPU_COMPUTE);
    CHECK(task(go, "step.cpu_optimizer").elements == p);
  }

  TEST_CASE("fsdp: FSDP2 (reshard_after_forward given) copies out of the all-gather and into the reduce-scatter")
  {
    // torchtitan's setup (scenarios/llama3-8b-fsdp-8xh100.yaml): amp_bf16, MixedPrecisionPolicy(bf16, fp32).
    const int n = 4, g = 2;
    spec::Scenario s = fsdp(n, g);
    s.training.precision = spec::Precision::AMP_BF16;
    s.fsdp.param_dtype = spec::Dtype::BF16;
    s.fsdp.reduce_dtype = spec::Dtype::FP32;
    s.fsdp.reshard_after_forward = true;
    const TaskGraph gr = build_step_graph(s, model());
    check_invariants(gr);
    for (int mb = 0; mb < g; ++mb) {
      // §8: bf16 all-gathers, blocks twice, the root once (never resharded after forward); fp32 reduce-scatters.
      CHECK(collectives(gr, CollectiveKind::ALL_GATHER, mb).bytes == 2 * (N_ROOT + 2 * L * N_BLOCK));
      CHECK(collectives(gr, CollectiveKind::REDUCE_SCATTER, mb).bytes == PSI * 4);
      int copy_out = 0, copy_in = 0;
      for (const Task& t : gr.tasks)
        if (t.micro_step == mb) {
          copy_out += has(t.name, ".copy_out.");
          copy_in += has(t.name, ".rs_copy_in.");
        }
      CHECK(copy_out == 1 + 2 * L); // one per all-gather
      CHECK(copy_in == 1 + L);      // one per reduce-scatter
    }
    // The copy-out runs on the compute stream after its all-gather; the forward waits for it. Its traffic is a
    // read and a write of the unsharded parameters: 2·W·S·b_p.
    const Task& co = task(gr, "mb0.copy_out.block.1.fwd");
    CHECK(co.stream == Stream::COMPUTE);
    CHECK(co.mem_bytes == 2.0 * N_BLOCK * 2);
    CHECK(std::find(co.deps.begin(), co.deps.end(), at(gr, "mb0.allgather.block.1.fwd")) != co.deps.end());
    // Forward: the all-gather of block 2 waits for block 0's copy-out (AllGatherState); backward: the prefetched
    // all-gather of block 1 waits for block 2's copy-out.
    const Task& ag2 = task(gr, "mb0.allgather.block.2.fwd");
    CHECK(std::find(ag2.deps.begin(), ag2.deps.end(), at(gr, "mb0.copy_out.block.0.fwd")) != ag2.deps.end());
    const Task& ag1b = task(gr, "mb0.allgather.block.1.bwd");
    CHECK(std::find(ag1b.deps.begin(), ag1b.deps.end(), at(gr, "mb0.copy_out.block.2.bwd")) != ag1b.deps.end());
    CHECK(at(gr, "mb0.allgather.block.1.bwd") < at(gr, "mb0.bwd.block.2")); // implicit backward prefetch
    // Model states as FSDP1: 16Ψ/N at the step (gradients fp32 after the fp32 reduce-scatter).
    CHECK(resident_bytes(gr, Device::GPU) == 12 * PSI / n);
    CHECK(peak_of(gr, "sharded_grad.") == 4 * PSI / n);
    // No rate limiter in FSDP2.
    for (const Task& t : gr.tasks)
      CHECK_FALSE(has(t.name, "rate_limiter"));
  }

  TEST_CASE("fsdp: every configuration gives a balanced, ordered graph")
  {
    using FS = spec::FsdpSharding;
    using BP = spec::BackwardPrefetch;
    const auto w = model(3, 4001, 8003); // uneven: padding paths
    for (FS st : {FS::FULL_SHARD, FS::SHARD_GRAD_OP, FS::HYBRID_SHARD, FS::NO_SHARD})
      for (int v : {1, 2})
        for (bool off : {false, true})
          for (spec::Precision p :
               {spec::Precision::BF16, spec::Precision::FP16, spec::Precision::AMP_BF16, spec::Precision::FP32})
            for (BP bp : {BP::BACKWARD_PRE, BP::BACKWARD_POST, BP::NONE})
              for (int g : {1, 3}) {
                if (v == 2 && st == FS::NO_SHARD)
                  continue;
                spec::Scenario s = fsdp(4, g, st == FS::HYBRID_SHARD ? 2 : 1);
                s.fsdp.sharding_strategy = st;
                s.fsdp.cpu_offload = off;
                s.fsdp.backward_prefetch = bp;
                s.fsdp.forward_prefetch = g == 3;
                s.fsdp.limit_all_gathers = bp != BP::NONE;
                s.training.precision = p;
                s.training.activation_checkpointing = g == 3 ? spec::Checkpointing::FULL : spec::Checkpointing::NONE;
                if (v == 2)
                  s.fsdp.reshard_after_forward = bp != BP::BACKWARD_POST;
                CAPTURE(static_cast<int>(st));
                CAPTURE(v);
                CAPTURE(off);
                CAPTURE(static_cast<int>(p));
                CAPTURE(static_cast<int>(bp));
                CAPTURE(g);
                const TaskGraph gr = build_step_graph(s, w);
                check_invariants(gr);
                // Every micro-step reduces every unit's gradient exactly once (Ψ elements in all).
                CHECK(collectives(gr, CollectiveKind::REDUCE_SCATTER, 0).calls +
                          (st == FS::NO_SHARD ? collectives(gr, CollectiveKind::ALL_REDUCE, 0).calls : 0) ==
                      4);
              }
    // wrap: model is one root unit holding Ψ: one all-gather and one reduce-scatter per micro-step.
    spec::Scenario m = fsdp(4, 2);
    m.fsdp.wrap = "model";
    const TaskGraph gm = build_step_graph(m, model());
    check_invariants(gm);
    CHECK(collectives(gm, CollectiveKind::ALL_GATHER, 1).calls == 1);
    CHECK(collectives(gm, CollectiveKind::ALL_GATHER, 1).bytes == PSI * 2);
    CHECK(collectives(gm, CollectiveKind::REDUCE_SCATTER, 1).calls == 1);
  }

  TEST_CASE("fsdp: what is not modelled is refused, naming the key")
  {
    auto message = [](const spec::Scenario& s) {
      try {
        build_step_graph(s, model());
      } catch (const core::UnsupportedError& e) {
        return std::string("unsupported: ") + e.what();
      } catch (const core::InputError& e) {
        return std::string("input: ") + e.what();
      }
      return std::string("accepted");
    };
    spec::Scenario wrap = fsdp(4, 1);
    wrap.fsdp.wrap = "size_based";
    CHECK(has(message(wrap), "unsupported: scenario 'schedule-test': fsdp.wrap size_based"));
    spec::Scenario v2_no_shard = fsdp(4, 1);
    v2_no_shard.fsdp.sharding_strategy = spec::FsdpSharding::NO_SHARD;
    v2_no_shard.fsdp.reshard_after_forward = true;
    CHECK(has(message(v2_no_shard), "unsupported: scenario 'schedule-test': fsdp.reshard_after_forward"));
    spec::Scenario hsdp1 = fsdp(1, 1, 4);
    hsdp1.fsdp.sharding_strategy = spec::FsdpSharding::HYBRID_SHARD;
    CHECK(has(message(hsdp1), "unsupported: scenario 'schedule-test': fsdp.sharding_strategy HYBRID_SHARD"));
    spec::Scenario contradict = fsdp(4, 1);
    contradict.training.precision = spec::Precision::FP32;
    contradict.fsdp.param_dtype = spec::Dtype::BF16;
    CHECK(has(message(contradict), "input: scenario 'schedule-test': fsdp.mixed_precision.param_dtype bf16"));
    spec::Scenario ok = fsdp(4, 1);
    ok.training.precision = spec::Precision::AMP_BF16;
    ok.fsdp.param_dtype = spec::Dtype::BF16;
    CHECK(message(ok) == "accepted");
  }
}
