// PyTorch DDP + torch.optim (+ autocast / GradScaler): all-reduce volumes, buckets, streams, waits and
// memory, read from the task graph (docs/ddp.md). Every expected value is derived in the comment above it.
#include "core/error.hpp"
#include "schedule_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

namespace {

/// A DDP scenario on `gpus` GPUs of one node, g micro-steps, AdamW, PyTorch's DDP defaults.
spec::Scenario ddp_scenario(int gpus, int g, spec::Precision p = spec::Precision::AMP_BF16)
{
  spec::Scenario s;
  s.name = "ddp-test";
  s.framework = spec::Framework::DDP;
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = gpus;
  s.training.grad_accum = g;
  s.training.precision = p;
  return s;
}

/// The bytes of the ALL_REDUCE tasks, in issue order.
std::vector<std::int64_t> ar_sizes(const TaskGraph& g, int mb)
{
  std::vector<std::int64_t> v;
  for (const Task& t : g.tasks)
    if (t.kind == TaskKind::COLLECTIVE && t.collective == CollectiveKind::ALL_REDUCE && t.micro_step == mb)
      v.push_back(t.bytes);
  return v;
}

const Task& task(const TaskGraph& g, const std::string& name)
{
  const int i = find_task(g, name);
  REQUIRE_MESSAGE(i >= 0, "no task " << name);
  return g.tasks[static_cast<std::size_t>(i)];
}

bool depends_on(const TaskGraph& g, const std::string& task_name, const std::string& dep_name)
{
  const Task& t = task(g, task_name);
  const int d = find_task(g, dep_name);
  return std::find(t.deps.begin(), t.deps.end(), d) != t.deps.end();
}

/// Tasks that must finish before `target` starts: its deps and, on its stream, the tasks issued before it
/// (a stream runs in issue order), transitively.
std::vector<char> predecessors(const TaskGraph& g, int target)
{
  std::vector<char> seen(g.tasks.size(), 0);
  std::vector<int> stack{target};
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    const Task& t = g.tasks[static_cast<std::size_t>(i)];
    std::vector<int> pre(t.deps.begin(), t.deps.end());
    for (int j = i - 1; j >= 0; --j)
      if (g.tasks[static_cast<std::size_t>(j)].stream == t.stream) {
        pre.push_back(j);
        break;
      }
    for (int p : pre)
      if (!seen[static_cast<std::size_t>(p)]) {
        seen[static_cast<std::size_t>(p)] = 1;
        stack.push_back(p);
      }
  }
  return seen;
}

/// Σ mem_bytes of the tasks whose name contains `part`.
double traffic_of(const TaskGraph& g, const std::string& part)
{
  double b = 0;
  for (const Task& t : g.tasks)
    if (t.name.find(part) != std::string::npos)
      b += t.mem_bytes;
  return b;
}

/// The task that frees the buffer named `name` (-1 if none).
int freed_by(const TaskGraph& g, const std::string& name)
{
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    for (BufferId b : g.tasks[i].frees)
      if (g.buffers[static_cast<std::size_t>(b)].name == name)
        return static_cast<int>(i);
  return -1;
}

int allocated_by(const TaskGraph& g, const std::string& name)
{
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    for (BufferId b : g.tasks[i].allocs)
      if (g.buffers[static_cast<std::size_t>(b)].name == name)
        return static_cast<int>(i);
  return -1;
}

/// 8 layers of two tensors, 300 and 200 elements: Ψ = 4000.
workload::Workload two_tensor_layers()
{
  return synthetic(8, {{"a.weight", 300}, {"b.weight", 200}});
}

} // namespace

TEST_SUITE("schedule")
{
  TEST_CASE("ddp: all-reduce bytes per step are Ψ·b with no_sync, g·Ψ·b without")
  {
    // Ψ = 4 layers x (1000 + 24) = 4096 elements, amp_bf16: fp32 gradients, b = 4 B. Every synchronised
    // backward all-reduces the whole bucket set, Σ S = Ψ·b = 16384 B (on the wire the ring moves
    // 2(N−1)/N·S per GPU; that is the engine's test). no_sync: only micro-step g−1; plain loop: all g.
    const std::int64_t psi = 4096;
    const auto w = synthetic(4, {{"mlp.fc.weight", 1000}, {"mlp.fc.bias", 24}});
    const int g = 3;
    spec::Scenario s = ddp_scenario(8, g);
    s.ddp.no_sync = true;
    const TaskGraph a = build_step_graph(s, w);
    CHECK(collectives(a, CollectiveKind::ALL_REDUCE).bytes == psi * 4);
    CHECK(collectives(a, CollectiveKind::ALL_REDUCE, g - 1).bytes == psi * 4);
    CHECK(collectives(a, CollectiveKind::ALL_REDUCE, 0).calls == 0);
    CHECK(collectives(a, CollectiveKind::ALL_GATHER).calls + collectives(a, CollectiveKind::REDUCE_SCATTER).calls == 0);

    s.ddp.no_sync = false;
    const TaskGraph b = build_step_graph(s, w);
    CHECK(collectives(b, CollectiveKind::ALL_REDUCE).bytes == g * psi * 4);
    for (int mb = 0; mb < g; ++mb)
      CHECK(collectives(b, CollectiveKind::ALL_REDUCE, mb).bytes == psi * 4);
    for (const Task& t : b.tasks)
      if (t.kind == TaskKind::COLLECTIVE) {
        CHECK(t.stream == Stream::REDUCTION); // ProcessGroupNCCL's stream, overlapped with the backward
        CHECK(t.group == CommGroup::WORLD);
        CHECK(t.group_size == 8);
        CHECK(t.phase == Phase::GRAD_REDUCE);
      }
  }

  TEST_CASE("ddp: buckets in gradient-ready order, the first closed at the first cap, the others at bucket_cap_mb")
  {
    // fp32 gradients (amp_bf16): a.weight 1200 B, b.weight 800 B per layer, 8 layers, Σ = 16000 B.
    // Caps: first 2^-9 MiB = 2048 B, then 2^-7 MiB = 8192 B; a bucket closes once its size >= the cap.
    // Ready order: block.7 b, a, block.6 b, a, ...
    //   bucket 0: 800 + 1200 + 800 = 2800 >= 2048 (block.7 b, a, block.6 b): complete at block.6's backward;
    //   bucket 1: 1200 + 800 + 1200 + 800 + 1200 + 800 + 1200 + 800 + 1200 = 9200 >= 8192 (to block.2 a);
    //   bucket 2: the rest, 800 + 1200 + 800 + 1200 = 4000 (block.1, block.0).
    spec::Scenario s = ddp_scenario(4, 1);
    s.ddp.first_bucket_cap_mb = 1.0 / 512;
    s.ddp.bucket_cap_mb = 1.0 / 128;
    const TaskGraph gr = build_step_graph(s, two_tensor_layers());
    CHECK(ar_sizes(gr, 0) == std::vector<std::int64_t>{2800, 9200, 4000});
    // Each all-reduce is issued right after the copy-in of the layer that completes its bucket, and waits for it.
    CHECK(depends_on(gr, "mb0.allreduce.0", "mb0.ddp.copy_in.block.6"));
    CHECK(find_task(gr, "mb0.allreduce.0") < find_task(gr, "mb0.bwd.block.5")); // overlapped with the backward
    CHECK(depends_on(gr, "mb0.allreduce.1", "mb0.ddp.copy_in.block.2"));
    CHECK(depends_on(gr, "mb0.allreduce.2", "mb0.ddp.copy_in.block.0"));
    // The bucket buffers are the same sizes, resident (BUFFERS without gradient_as_bucket_view).
    CHECK(resident_bytes(gr, Device::GPU, MemCategory::BUFFERS, false) == 16000);

    // PyTorch's defaults, 1 MiB then 25 MiB: 30 layers of one 2^18-element fp32 tensor (1 MiB each):
    // bucket 0 = one tensor (1 MiB >= 1 MiB), then 25 tensors (25 MiB), then the remaining 4.
    spec::Scenario d = ddp_scenario(2, 1);
    const TaskGraph gd = build_step_graph(d, synthetic(30, {{"mlp.fc.weight", 262'144}}));
    const std::int64_t mib = 1 << 20;
    CHECK(ar_sizes(gd, 0) == std::vector<std::int64_t>{mib, 25 * mib, 4 * mib});
  }

  TEST_CASE("ddp: find_unused_parameters keeps the construction buckets (forward order, reversed) + the used map")
  {
    // No rebuild: the forward order with the caps [2048, 8192] B: block.0 a, b, block.1 a = 1200 + 800 + 1200
    // = 3200 >= 2048; then block.1 b ... block.5 b = 800 + 4 x 2000 = 8800 >= 8192; the rest block.6, block.7
    // = 4000. Reversed for the backward: 4000, 8800, 3200 (the small first bucket is reduced last), then the
    // used-map all-reduce of one int32 per tensor: 16 x 4 = 64 B.
    spec::Scenario s = ddp_scenario(4, 1);
    s.ddp.first_bucket_cap_mb = 1.0 / 512;
    s.ddp.bucket_cap_mb = 1.0 / 128;
    s.ddp.find_unused_parameters = true;
    const TaskGraph gr = build_step_graph(s, two_tensor_layers());
    CHECK(ar_sizes(gr, 0) == std::vector<std::int64_t>{4000, 8800, 3200, 64});
    CHECK(depends_on(gr, "mb0.allreduce.0", "mb0.ddp.copy_in.block.6")); // lowest layer of bucket 0 is block.6
    CHECK(depends_on(gr, "mb0.allreduce.1", "mb0.ddp.copy_in.block.1"));
    CHECK(depends_on(gr, "mb0.allreduce.2", "mb0.ddp.copy_in.block.0"));
    CHECK(find_task(gr, "mb0.allreduce.local_used_map") > find_task(gr, "mb0.allreduce.2"));
    // static_graph rebuilds the buckets and has no used map after its first iteration: the default schedule.
    s.ddp.static_graph = true;
    CHECK(ar_sizes(build_step_graph(s, two_tensor_layers()), 0) == std::vector<std::int64_t>{2800, 9200, 4000});
  }

  TEST_CASE("ddp: the run's first step all-reduces one bucket after the whole backward")
  {
    // _ddp_init_helper: limits [sys.maxsize] without find_unused_parameters: one bucket of Ψ·b = 4000 x 4 B.
    spec::Scenario s = ddp_scenario(4, 1);
    const TaskGraph gr = build_step_graph(s, two_tensor_layers(), 0, StepOptions{.first_step = true});
    CHECK(ar_sizes(gr, 0) == std::vector<std::int64_t>{16000});
    CHECK(depends_on(gr, "mb0.allreduce.0", "mb0.ddp.copy_in.block.0"));
  }

  TEST_CASE("ddp: amp_bf16 all-reduces fp32 gradients (4 B/elem), bf16 all-reduces 2 B/elem")
  {
    // Ψ = 3 x 1000. amp: fp32 params and grads, the buckets are fp32: Ψ·4 = 12000 B per backward.
    // bf16 (zerosim's DeepSpeed-style reading): 16-bit params and grads, all-reduced in 16 bits: Ψ·2 = 6000 B.
    const std::int64_t psi = 3000;
    const auto w = synthetic(3, {{"mlp.fc.weight", 1000}});
    CHECK(collectives(build_step_graph(ddp_scenario(2, 1, spec::Precision::AMP_BF16), w), CollectiveKind::ALL_REDUCE)
              .bytes == psi * 4);
    CHECK(collectives(build_step_graph(ddp_scenario(2, 1, spec::Precision::AMP_FP16), w), CollectiveKind::ALL_REDUCE)
              .bytes == psi * 4);
    CHECK(
        collectives(build_step_graph(ddp_scenario(2, 1, spec::Precision::FP32), w), CollectiveKind::ALL_REDUCE).bytes ==
        psi * 4);
    CHECK(
        collectives(build_step_graph(ddp_scenario(2, 1, spec::Precision::BF16), w), CollectiveKind::ALL_REDUCE).bytes ==
        psi * 2);
    CHECK(
        collectives(build_step_graph(ddp_scenario(2, 1, spec::Precision::FP16), w), CollectiveKind::ALL_REDUCE).bytes ==
        psi * 2);
  }

  TEST_CASE("ddp: model-state memory, amp AdamW = (4 + 4 + 8)Ψ plus 4Ψ of buckets unless gradient_as_bucket_view")
  {
    // Ψ = 3 x 1000, amp_bf16, AdamW, 4 GPUs, g = 2. Resident: fp32 params 4Ψ + m,v 8Ψ + buckets 4Ψ = 16Ψ;
    // param.grad (fp32, 4Ψ) from the first backward to the step: 20Ψ of model states.
    const std::int64_t psi = 3000;
    const auto w = synthetic(3, {{"mlp.fc.weight", 1000}});
    spec::Scenario s = ddp_scenario(4, 2);
    const TaskGraph a = build_step_graph(s, w);
    CHECK(resident_bytes(a, Device::GPU) == 16 * psi);
    CHECK(resident_bytes(a, Device::GPU, MemCategory::BUFFERS, false) == 4 * psi);
    CHECK(transient_peak(a, MemCategory::GRADS) == 4 * psi);
    CHECK(resident_bytes(a, Device::GPU) + transient_peak(a, MemCategory::GRADS) == 20 * psi);
    // The step's foreach sqrt temporary, 4Ψ (Builder::torch_optimizer), is the only step buffer.
    CHECK(transient_peak(a, MemCategory::BUFFERS) == 4 * psi);

    // gradient_as_bucket_view: param.grad are the bucket views, so the buckets count as GRADS and no second
    // copy exists: (4 + 4 + 8)Ψ = 16Ψ resident. The fresh grad autograd makes after zero_grad(set_to_none)
    // lives one layer at a time (its backward -> its copy-in): 1000 x 4 B.
    s.ddp.gradient_as_bucket_view = true;
    const TaskGraph v = build_step_graph(s, w);
    CHECK(resident_bytes(v, Device::GPU) == 16 * psi);
    CHECK(resident_bytes(v, Device::GPU, MemCategory::GRADS, false) == 4 * psi);
    CHECK(transient_peak(v, MemCategory::GRADS) == 1000 * 4);
    // ... under no_sync with g = 2 the micro-step-0 grads are plain tensors until the synchronised backward
    // copies them into the buckets: 4Ψ of GRADS besides the resident buckets.
    s.ddp.no_sync = true;
    CHECK(transient_peak(build_step_graph(s, w), MemCategory::GRADS) == 4 * psi);

    // amp_fp16 adds GradScaler's 8 bytes (fp32 scale, int32 growth tracker).
    CHECK(resident_bytes(build_step_graph(ddp_scenario(4, 2, spec::Precision::AMP_FP16), w), Device::GPU) ==
          16 * psi + 8);
    // bf16 (zerosim's reading): bf16 params 2Ψ + fp32 master 4Ψ + m,v 8Ψ + bf16 buckets 2Ψ = 16Ψ resident,
    // bf16 grads 2Ψ; in the step the fp32 grads 4Ψ and the foreach sqrt 4Ψ are live together: 8Ψ.
    const TaskGraph h = build_step_graph(ddp_scenario(4, 2, spec::Precision::BF16), w);
    CHECK(resident_bytes(h, Device::GPU) == 16 * psi);
    CHECK(transient_peak(h, MemCategory::GRADS) == 2 * psi);
    CHECK(transient_peak(h, MemCategory::BUFFERS) == 8 * psi);
    // SGD (momentum 0) keeps no state: 4Ψ params + 4Ψ buckets.
    spec::Scenario sgd = ddp_scenario(4, 2);
    sgd.training.optimizer = spec::Optimizer::SGD;
    CHECK(resident_bytes(build_step_graph(sgd, w), Device::GPU) == 8 * psi);
  }

  TEST_CASE("ddp: the optimizer waits for every all-reduce, each micro-step for the previous backward's")
  {
    // finalize_backward makes the compute stream wait for each bucket's work (and, without the view, copy it
    // back): nothing on the compute stream after a synchronised backward starts before its all-reduces end.
    const auto w = two_tensor_layers();
    for (bool view : {false, true}) {
      INFO("gradient_as_bucket_view " << view);
      spec::Scenario s = ddp_scenario(4, 2);
      s.ddp.first_bucket_cap_mb = 1.0 / 512;
      s.ddp.bucket_cap_mb = 1.0 / 128;
      s.ddp.gradient_as_bucket_view = view;
      const TaskGraph gr = build_step_graph(s, w);
      const std::vector<char> before_opt = predecessors(gr, find_task(gr, "step.optimizer"));
      const std::vector<char> before_mb1 = predecessors(gr, find_task(gr, "mb1.fwd.block.0"));
      int ars = 0;
      for (std::size_t i = 0; i < gr.tasks.size(); ++i)
        if (gr.tasks[i].kind == TaskKind::COLLECTIVE) {
          ++ars;
          CHECK_MESSAGE(before_opt[i], gr.tasks[i].name << " is not waited for by the optimizer");
          if (gr.tasks[i].micro_step == 0)
            CHECK_MESSAGE(before_mb1[i], gr.tasks[i].name << " is not waited for by micro-step 1");
        }
      CHECK(ars == 2 * 3); // 3 buckets (see the bucket test) in each of the g = 2 backwards
      // Without the view, finalize copies each bucket back into param.grad (2 x 16000 B per backward) after
      // its own all-reduce; with it there is nothing to copy. The copy into the buckets happens either way.
      CHECK(traffic_of(gr, ".ddp.copy_out.") == (view ? 0 : 2 * 2 * 16000));
      CHECK(traffic_of(gr, ".ddp.copy_in.") == 2 * 2 * 16000);
      if (!view)
        CHECK(depends_on(gr, "mb0.ddp.copy_out.1", "mb0.allreduce.1"));
    }
  }

  TEST_CASE("ddp: a non-positive bucket cap in a hand-built scenario is an InputError")
  {
    // The config layer refuses it with file and line; a Scenario built in code is checked here.
    spec::Scenario s = ddp_scenario(2, 1);
    s.ddp.bucket_cap_mb = 0;
    CHECK_THROWS_AS(build_step_graph(s, synthetic(2, {{"mlp.fc.weight", 100}})), core::InputError);
  }

  TEST_CASE("ddp: one GPU is the plain single-GPU loop: no collective, no bucket, no copy")
  {
    // dp = 1 (docs/ddp.md): params 4Ψ + m,v 8Ψ resident, grads 4Ψ: 16Ψ, nothing all-reduced.
    const std::int64_t psi = 3000;
    const auto w = synthetic(3, {{"mlp.fc.weight", 1000}});
    const TaskGraph gr = build_step_graph(ddp_scenario(1, 2), w);
    CHECK(collectives(gr, CollectiveKind::ALL_REDUCE).calls == 0);
    CHECK(resident_bytes(gr, Device::GPU) == 12 * psi);
    CHECK(transient_peak(gr, MemCategory::GRADS) == 4 * psi);
    CHECK(traffic_of(gr, ".ddp.") == 0);
  }

  TEST_CASE("ddp: autocast keeps a 16-bit copy of each layer's matmul weights from its forward to its backward")
  {
    // Per layer: a norm (100, fp32 under autocast, not cast) and a linear (1000, cast): E = 1000, 2E = 2000 B,
    // the cast kernel moves 4 + 2 B per element (6000 B added to the forward), ToCopyBackward as much again.
    // 4 layers: all four copies are live at the end of the forward: 8000 B of PARAMS transients.
    const auto w = synthetic(4, {{"attn_norm.weight", 100}, {"mlp.fc.weight", 1000}}, 1000, 5e8);
    spec::Scenario s = ddp_scenario(2, 1);
    const TaskGraph a = build_step_graph(s, w);
    CHECK(transient_peak(a, MemCategory::PARAMS) == 4 * 2000);
    CHECK(freed_by(a, "mb0.autocast.block.1") == find_task(a, "mb0.bwd.block.1"));
    CHECK(task(a, "mb0.fwd.block.1").mem_bytes == 6000);
    CHECK(task(a, "mb0.bwd.block.1").mem_bytes == 6000);
    // Full checkpointing: the forward saves nothing, the autocast cache alone holds the copies until the
    // forward's end (the last forward task); the recompute casts again, kept until the backward.
    s.training.activation_checkpointing = spec::Checkpointing::FULL;
    const TaskGraph c = build_step_graph(s, w);
    CHECK(freed_by(c, "mb0.autocast.block.1") == find_task(c, "mb0.fwd.block.3"));
    CHECK(allocated_by(c, "mb0.autocast_recompute.block.1") == find_task(c, "mb0.recompute.block.1"));
    CHECK(freed_by(c, "mb0.autocast_recompute.block.1") == find_task(c, "mb0.bwd.block.1"));
    CHECK(task(c, "mb0.recompute.block.1").mem_bytes == 6000);
    // bf16 (a 16-bit model, no autocast): no copies.
    CHECK(transient_peak(build_step_graph(ddp_scenario(2, 1, spec::Precision::BF16), w), MemCategory::PARAMS) == 0);
  }

  TEST_CASE("ddp: GradScaler (amp_fp16) unscales Ψ fp32 grads and the host waits for its .item()")
  {
    // unscale_: read + write every fp32 gradient, 8 B x Ψ = 24000 B; _maybe_opt_step's found_inf.item()
    // is a host wait, so the optimizer is issued only after the unscale completes.
    const std::int64_t psi = 3000;
    const auto w = synthetic(3, {{"mlp.fc.weight", 1000}});
    const TaskGraph f = build_step_graph(ddp_scenario(2, 1, spec::Precision::AMP_FP16), w);
    const Task& unscale = task(f, "step.grad_scaler.unscale");
    CHECK(unscale.mem_bytes == 8.0 * psi);
    CHECK(task(f, "step.optimizer").host_barrier == find_task(f, "step.grad_scaler.unscale"));
    // bf16 autocast needs no scaler and DDP has no host sync: nothing blocks the host.
    const TaskGraph b = build_step_graph(ddp_scenario(2, 1, spec::Precision::AMP_BF16), w);
    CHECK(find_task(b, "step.grad_scaler.unscale") == -1);
    CHECK(task(b, "step.optimizer").host_barrier == -1);
    // fp16 (zerosim's reading): grads cast to fp32 (2 + 4 B/elem), unscaled, master copied back (4 + 2 B/elem).
    const TaskGraph h = build_step_graph(ddp_scenario(2, 1, spec::Precision::FP16), w);
    CHECK(task(h, "step.grads_to_fp32").mem_bytes == 6.0 * psi);
    CHECK(task(h, "step.master_to_params").mem_bytes == 6.0 * psi);
    CHECK(find_task(h, "step.grad_scaler.unscale") > find_task(h, "step.grads_to_fp32"));
    CHECK(task(h, "step.optimizer").elements == psi); // over the fp32 master
  }

  TEST_CASE("ddp: every configuration gives a balanced graph with unique names")
  {
    // Each transient buffer is allocated once and freed once, at or after its allocation; deps point back.
    const auto w = synthetic(4, {{"attn_norm.weight", 64}, {"mlp.fc.weight", 500}}, 1000, 5e8);
    for (spec::Precision p : {spec::Precision::AMP_BF16, spec::Precision::AMP_FP16, spec::Precision::BF16,
                              spec::Precision::FP16, spec::Precision::FP32})
      for (int gpus : {1, 4})
        for (int variant = 0; variant < 5; ++variant) {
          spec::Scenario s = ddp_scenario(gpus, 3, p);
          s.ddp.bucket_cap_mb = 1.0 / 512;
          s.ddp.gradient_as_bucket_view = variant == 1 || variant == 2;
          s.ddp.no_sync = variant == 2 || variant == 3;
          s.ddp.find_unused_parameters = variant == 4;
          s.training.activation_checkpointing = variant % 2 ? spec::Checkpointing::FULL : spec::Checkpointing::NONE;
          const TaskGraph gr = build_step_graph(s, w);
          INFO("precision " << static_cast<int>(p) << " gpus " << gpus << " variant " << variant);
          std::vector<int> allocs(gr.buffers.size(), 0), frees(gr.buffers.size(), 0), at(gr.buffers.size(), -1);
          std::set<std::string> names;
          bool ordered = true;
          for (std::size_t i = 0; i < gr.tasks.size(); ++i) {
            CHECK(names.insert(gr.tasks[i].name).second);
            for (TaskId d : gr.tasks[i].deps)
              ordered = ordered && d >= 0 && static_cast<std::size_t>(d) < i;
            for (BufferId b : gr.tasks[i].allocs) {
              ++allocs[static_cast<std::size_t>(b)];
              at[static_cast<std::size_t>(b)] = static_cast<int>(i);
            }
            for (BufferId b : gr.tasks[i].frees) {
              ++frees[static_cast<std::size_t>(b)];
              ordered = ordered && at[static_cast<std::size_t>(b)] >= 0;
            }
          }
          CHECK(ordered);
          std::vector<char> resident(gr.buffers.size(), 0);
          for (BufferId r : gr.resident)
            resident[static_cast<std::size_t>(r)] = 1;
          int bad = 0;
          for (std::size_t b = 0; b < gr.buffers.size(); ++b)
            if (resident[b] ? (allocs[b] != 0 || frees[b] != 0) : (allocs[b] != 1 || frees[b] != 1))
              ++bad;
          CHECK(bad == 0);
        }
  }
}
