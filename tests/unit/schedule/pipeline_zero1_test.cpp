// ZeRO stage 1 on a stage of DeepSpeed's pipeline engine (issue 32, docs/pipeline-parallel.md §5, §6): the model
// states DeepSpeedZeroOptimizer keeps per stage, the reduction ReduceGrads runs once after the pipeline, ZeRO-Offload's
// host states and PCIe copies, the ranks that stand for a stage's memory, and an end-to-end replay. A small GPT on 2
// nodes x 4 GPUs, 2 pipeline stages of one node each (data-parallel degree 4), fp16, 4 micro-batches.
#include "config/scenario_loader.hpp"
#include "memory/memory_model.hpp"
#include "run/run_scenario.hpp"
#include "schedule/pipeline_partition.hpp"
#include "schedule/step_graph.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace zerosim;

namespace {

constexpr int DP = 4; ///< data-parallel degree: 8 GPUs / 2 stages

/// The scenario; `extra` is appended to the zero_optimization mapping, `version` is deepspeed_version.
spec::Scenario zero1(int micro_batches, const std::string& extra = "", const std::string& version = "0.19",
                     const std::string& precision = "fp16")
{
  return config::load_scenario_text(
      "name: pipeline zero1\n"
      "model: {name: tiny, layers: 8, hidden: 1024, heads: 16, vocab: 32000, tied_embeddings: true, norm: layernorm, "
      "position: learned, max_position: 1024}\n"
      "cluster: {node: dgx-a100-80gb, nodes: 2, gpus_per_node: 4}\n"
      "training: {seq_len: 1024, micro_batch: 1, grad_accum: " +
          std::to_string(micro_batches) + ", precision: " + precision +
          ", activation_checkpointing: full, pipeline_parallel: 2, pipeline: {schedule: 1f1b}}\n"
          "deepspeed_version: \"" +
          version + "\"\ndeepspeed: {zero_optimization: {stage: 1" + extra + "}}\n",
      "pipeline-zero1.yaml");
}

/// N, the parameters a stage's GPU holds: its layers' tensors, and on the last stage of a tied model its own copy of
/// the word embedding (TiedLayerSpec, docs/pipeline-parallel.md §2). In flat-buffer (forward) order.
std::vector<std::int64_t> stage_params(const spec::Scenario& s, const workload::Workload& w, int stage)
{
  const schedule::StageLayers sl = schedule::stage_layers(s, w).at(static_cast<std::size_t>(stage));
  std::vector<std::int64_t> out;
  for (int l = sl.first; l < sl.end; ++l) {
    const workload::Layer& layer = w.layers[static_cast<std::size_t>(l)];
    for (const workload::ParamTensor& t : layer.params)
      out.push_back(t.numel);
    if (layer.kind == workload::LayerKind::LM_HEAD && layer.params.empty() && stage > 0) {
      std::int64_t word = 0;
      for (const workload::Layer& e : w.layers)
        if (e.kind == workload::LayerKind::EMBEDDING)
          for (const workload::ParamTensor& t : e.params)
            word = std::max(word, t.numel);
      out.push_back(word);
    }
  }
  return out;
}

std::int64_t sum(const std::vector<std::int64_t>& v)
{
  std::int64_t total = 0;
  for (std::int64_t x : v)
    total += x;
  return total;
}

/// The flat buffer padded to a multiple of 2·DP elements (nccl_start_alignment_factor 2, docs/deepspeed-schedule.md
/// §3.1), and each rank's partition of it.
std::int64_t padded(std::int64_t n)
{
  return (n + 2 * DP - 1) / (2 * DP) * (2 * DP);
}

/// Bytes of the graph's buffers on `device` whose names start with `prefix`.
std::int64_t bytes_of(const spec::TaskGraph& g, spec::Device device, const std::string& prefix)
{
  std::int64_t total = 0;
  for (const spec::Buffer& b : g.buffers)
    if (b.device == device && b.name.starts_with(prefix))
      total += b.bytes;
  return total;
}

/// The index of the graph's last BACKWARD compute task.
std::size_t last_backward(const spec::TaskGraph& g)
{
  std::size_t last = 0;
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (g.tasks[i].kind == spec::TaskKind::COMPUTE && g.tasks[i].phase == spec::Phase::BACKWARD)
      last = i;
  return last;
}

bool dp_gradient_reduce(const spec::Task& t)
{
  return t.kind == spec::TaskKind::COLLECTIVE && t.phase == spec::Phase::GRAD_REDUCE &&
         t.group == spec::CommGroup::DATA_PARALLEL;
}

} // namespace

TEST_CASE("pipeline zero1: a stage's model states are ZeRO-1's 2N + 2N + 12N/DP (fp16, Adam)")
{
  // ZeRO's model-state formula for stage 1 (Rajbhandari et al., ZeRO, §5.1: (2 + 2 + K/N_d)·Ψ with K = 12 for mixed
  // precision Adam): fp16 parameters 2N and gradients 2N whole on every rank of the stage, the fp32 master and Adam's
  // two moments (4 + 8 bytes) over the rank's 1/DP partition, with N the stage's own parameters and DP the stage's
  // data-parallel group. DeepSpeed pads the flat buffer to a multiple of 2·DP (docs/deepspeed-schedule.md §3.1).
  const spec::Scenario s = zero1(4);
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  for (int stage = 0; stage < 2; ++stage) {
    CAPTURE(stage);
    const std::int64_t N = sum(stage_params(s, w, stage));
    const std::int64_t P = padded(N) / DP;
    const spec::TaskGraph g = schedule::build_step_graph(s, w, stage * DP);
    CHECK(bytes_of(g, spec::Device::GPU, "lp_flat_params") == 2 * padded(N));
    CHECK(bytes_of(g, spec::Device::GPU, "grads.") == 2 * N);
    CHECK(bytes_of(g, spec::Device::GPU, "fp32_master_partition") +
              bytes_of(g, spec::Device::GPU, "optimizer_states") ==
          12 * P);
    // ZeRO-0 (FP16_Optimizer) on the same stage keeps 2N + 2N + 12N: ZeRO-1 saves 12N(1 - 1/DP) of it.
    const spec::Scenario z0 = config::load_scenario_text(
        "name: z0\nmodel: {name: tiny, layers: 8, hidden: 1024, heads: 16, vocab: 32000, tied_embeddings: true, "
        "norm: layernorm, position: learned, max_position: 1024}\n"
        "cluster: {node: dgx-a100-80gb, nodes: 2, gpus_per_node: 4}\n"
        "training: {seq_len: 1024, micro_batch: 1, grad_accum: 4, precision: fp16, activation_checkpointing: full, "
        "pipeline_parallel: 2}\n"
        "deepspeed: {zero_optimization: {stage: 0}}\n",
        "z0.yaml");
    const spec::TaskGraph g0 = schedule::build_step_graph(z0, w, stage * DP);
    CHECK(bytes_of(g0, spec::Device::GPU, "fp32_master") + bytes_of(g0, spec::Device::GPU, "optimizer_states") ==
          12 * N);
  }
}

TEST_CASE("pipeline zero1: ReduceGrads all-reduces the stage's gradients once, after the pipeline drains")
{
  // reduce_gradients(pipeline_parallel=True) (docs/pipeline-parallel.md §6): every parameter's fp16 gradient through
  // buckets of reduce_bucket_size elements, each all-reduced over the stage's data-parallel group: N x 2 bytes in all,
  // once per step whatever the micro-batch count, none before the last backward.
  const std::int64_t bucket = 3'000'000;
  for (int m : {4, 8}) {
    CAPTURE(m);
    const spec::Scenario s = zero1(m, ", reduce_bucket_size: " + std::to_string(bucket));
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    for (int stage = 0; stage < 2; ++stage) {
      CAPTURE(stage);
      const std::vector<std::int64_t> params = stage_params(s, w, stage);
      const spec::TaskGraph g = schedule::build_step_graph(s, w, stage * DP);
      const std::size_t drained = last_backward(g);
      std::int64_t bytes = 0;
      int buckets = 0;
      for (std::size_t i = 0; i < g.tasks.size(); ++i)
        if (dp_gradient_reduce(g.tasks[i])) {
          CHECK(i > drained);
          CHECK(g.tasks[i].collective == spec::CollectiveKind::ALL_REDUCE);
          CHECK(g.tasks[i].stream == spec::Stream::COMPUTE); // overlap_comm is off under the pipeline (§5)
          bytes += g.tasks[i].bytes;
          ++buckets;
        }
      CHECK(bytes == 2 * sum(params));
      // The buckets of §3.2's rule over the flat order: a bucket is flushed before a parameter that would overflow it.
      int expected = 0;
      std::int64_t filled = 0;
      for (std::int64_t n : params) {
        if (filled > 0 && filled + n > bucket) {
          ++expected;
          filled = 0;
        }
        filled += n;
      }
      CHECK(buckets == expected + 1);
    }
  }
}

TEST_CASE("pipeline zero1: the tied embedding is all-reduced in fp16 before ReduceGrads, and overlap_comm is off")
{
  // _exec_reduce_tied_grads reduces weight.grad (the model dtype) under DeepSpeedZeroOptimizer, before ReduceGrads.
  const spec::Scenario s = zero1(4, ", overlap_comm: true");
  REQUIRE(std::any_of(s.warnings.begin(), s.warnings.end(), [](const std::string& x) {
    return x.find("Pipeline parallelism does not support overlapped communication, will be disabled.") !=
           std::string::npos;
  }));
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  std::int64_t word = 0;
  for (const workload::Layer& e : w.layers)
    if (e.kind == workload::LayerKind::EMBEDDING)
      for (const workload::ParamTensor& t : e.params)
        word = std::max(word, t.numel);
  for (int stage = 0; stage < 2; ++stage) {
    const spec::TaskGraph g = schedule::build_step_graph(s, w, stage * DP);
    std::size_t tied = 0, first_reduce = 0;
    for (std::size_t i = 0; i < g.tasks.size(); ++i) {
      if (g.tasks[i].kind == spec::TaskKind::COLLECTIVE && g.tasks[i].group == spec::CommGroup::EMBEDDING) {
        tied = i;
        CHECK(g.tasks[i].bytes == 2 * word);
      }
      if (first_reduce == 0 && dp_gradient_reduce(g.tasks[i])) {
        first_reduce = i;
        CHECK(g.tasks[i].stream == spec::Stream::COMPUTE);
      }
    }
    CHECK(tied > 0);
    CHECK(tied < first_reduce);
  }
}

TEST_CASE("pipeline zero1: with CPU offload the host holds the partition's master and moments, and the step copies")
{
  // ZeRO-Offload on a pipeline stage (docs/pipeline-parallel.md §5, §6; docs/deepspeed-schedule.md §3.6): the fp32
  // master (4P), its fp32 gradient (4P) and Adam's moments (8P) on the host; after each bucket's all-reduce the
  // partition's slice is cast to fp32 and copied D2H (4 bytes an element, P in all on rank 0 of a stage, whose
  // partition holds no padding), CPU Adam steps P, and the fp16 parameters go back H2D. micro_step_id is 0 at
  // ReduceGrads (one backward counted a step), so 0.19 adds no accumulation copies; 0.16, whose condition is only
  // gradient_accumulation_steps > 1, copies the gradients of the parameters touching the partition to the host
  // (P_in x 2 bytes) and steps by an H2D of the fp32 partition (4P) cast on the GPU.
  for (const std::string version : {"0.19", "0.16"}) {
    CAPTURE(version);
    const spec::Scenario s = zero1(4, ", offload_optimizer: {device: cpu}", version);
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    const std::vector<std::int64_t> params = stage_params(s, w, 0);
    const std::int64_t P = padded(sum(params)) / DP;
    std::int64_t p_in = 0, begin = 0; // the elements of the parameters touching rank 0's partition [0, P)
    for (std::int64_t n : params) {
      if (begin < P)
        p_in += n;
      begin += n;
    }
    const spec::TaskGraph g = schedule::build_step_graph(s, w, 0);
    CHECK(bytes_of(g, spec::Device::HOST, "fp32_master_partition") == 4 * P);
    CHECK(bytes_of(g, spec::Device::HOST, "fp32_grad_partition") == 4 * P);
    CHECK(bytes_of(g, spec::Device::HOST, "optimizer_states") == 8 * P);
    CHECK(bytes_of(g, spec::Device::GPU, "fp32_master") + bytes_of(g, spec::Device::GPU, "optimizer_states") == 0);
    CHECK(bytes_of(g, spec::Device::HOST, "accumulated_grads_in_cpu") == (version == "0.16" ? 2 * p_in : 0));
    std::int64_t d2h = 0, h2d = 0, adam = 0;
    for (const spec::Task& t : g.tasks) {
      if (t.kind == spec::TaskKind::COPY)
        (t.direction == spec::CopyDirection::D2H ? d2h : h2d) += t.bytes;
      if (t.kind == spec::TaskKind::CPU_COMPUTE && t.phase == spec::Phase::OPTIMIZER && t.name == "step.cpu_adam")
        adam += t.elements;
    }
    CHECK(adam == P);
    CHECK(d2h == 4 * P + (version == "0.16" ? 2 * p_in : 0));
    CHECK(h2d == (version == "0.16" ? 4 * P : 2 * P));
  }
}

TEST_CASE("pipeline zero1: the ranks memory_ranks names hold each stage's largest peak")
{
  // Under DeepSpeedZeroOptimizer a stage's data-parallel ranks own different cuts of the stage's flat buffer: the
  // largest peak of each stage over the ranks schedule::memory_ranks names equals the largest over all its ranks
  // (brute force, each rank's graph built and replayed). Small buckets so that the cuts fall in different buckets.
  const spec::Scenario s = zero1(4, ", reduce_bucket_size: 3000000");
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const std::vector<int> named = schedule::memory_ranks(s, w);
  std::map<int, std::int64_t> all, few; // per stage
  for (int r = 0; r < s.world(); ++r) {
    const std::int64_t gpu = memory::replay_memory(s, schedule::build_step_graph(s, w, r)).gpu;
    all[r / DP] = std::max(all[r / DP], gpu);
    if (std::find(named.begin(), named.end(), r) != named.end())
      few[r / DP] = std::max(few[r / DP], gpu);
  }
  CHECK(few == all);
  CHECK(named.size() >= 2); // at least each stage's first rank
}

TEST_CASE("pipeline zero1: end to end, the step holds each stage's compute and its reduction after the drain")
{
  // One step replayed on the cluster (symmetric replay: each stage's first node). The reduction runs on the compute
  // stream after the stage's last backward, so a stage's step is at least its compute plus its reduction.
  const spec::Scenario s = zero1(4);
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const engine::Timeline t = run::simulate_step(s, w);
  REQUIRE(t.step_time_s > 0);
  for (int stage = 0; stage < 2; ++stage) {
    CAPTURE(stage);
    const auto rt = std::find_if(t.ranks.begin(), t.ranks.end(),
                                 [&](const engine::RankTimeline& r) { return r.rank == stage * DP; });
    REQUIRE(rt != t.ranks.end());
    const spec::TaskGraph& g = rt->graph;
    const std::size_t drained = last_backward(g);
    double compute = 0, reduce = 0;
    for (std::size_t i = 0; i < g.tasks.size(); ++i) {
      const spec::Task& k = g.tasks[i];
      const double d = rt->times[i].end - rt->times[i].start;
      if (k.kind == spec::TaskKind::COMPUTE && k.layer >= 0)
        compute += d;
      if (dp_gradient_reduce(k)) {
        reduce += d;
        CHECK(rt->times[i].start >= rt->times[drained].end);
      }
    }
    CHECK(reduce > 0);
    CHECK(t.step_time_s >= compute + reduce);
  }
}
