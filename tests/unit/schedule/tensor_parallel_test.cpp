// Megatron tensor parallelism in the task graph (Builder::tensor_parallel_collectives, step_scalars, stage12's
// dp_rank): the TENSOR all-reduces of every layer kind and phase, their bytes, the data-parallel collectives on
// DATA_PARALLEL groups of GPUs / t ranks, and ZeRO-2's partition by dp_rank = rank / t. Expected values follow
// Megatron-LM core/tensor_parallel/{layers,mappings,cross_entropy}.py as stated beside each check. Symbols: t the
// tensor-parallel degree, L the blocks, T = micro_batch x seq_len tokens, h the hidden size, b_a the activation
// bytes (2 for bf16/fp16, 4 for fp32), H = T h b_a the bytes of one hidden-state tensor.
#include "schedule_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

namespace {

constexpr int SEQ = 128;
constexpr int MICRO_BATCH = 2;
constexpr int HIDDEN = 64;
constexpr std::int64_t TOKENS = std::int64_t{MICRO_BATCH} * SEQ;

/// A DeepSpeed scenario of `nodes` x `gpus` GPUs with tensor_parallel `t`, ZeRO `stage`, `g` micro-steps.
spec::Scenario tp_scenario(int stage, int nodes, int gpus, int t, int g = 1,
                           spec::Checkpointing ckpt = spec::Checkpointing::NONE,
                           spec::Precision p = spec::Precision::BF16)
{
  spec::Scenario s = scenario(stage, gpus, g);
  s.cluster.nodes = nodes;
  s.training.tensor_parallel = t;
  s.training.seq_len = SEQ;
  s.training.micro_batch = MICRO_BATCH;
  s.training.activation_checkpointing = ckpt;
  s.training.precision = p;
  if (p == spec::Precision::FP32) {
    s.deepspeed.communication_data_type = spec::Dtype::FP32;
    s.deepspeed.grad_accum_dtype = spec::Dtype::FP32;
  }
  s.model.hidden = HIDDEN;
  return s;
}

workload::Layer layer(const std::string& name, workload::LayerKind kind, std::int64_t numel, double recompute_flops)
{
  workload::Layer l;
  l.name = name;
  l.kind = kind;
  l.params.push_back(workload::ParamTensor{name + ".weight", numel, name});
  set_ops(l, 1e9, recompute_flops);
  l.activation_bytes_kept = 1000;
  l.activation_bytes_backward_working = 500;
  l.activation_bytes_forward_working = 250;
  return l;
}

/// embed, `blocks` BLOCK layers, final_norm, lm_head: every layer kind. Every layer has recompute work, so that
/// checkpointing issues a recompute task for each (the TENSOR all-reduces must still come from blocks only).
workload::Workload model(int blocks)
{
  workload::Workload w = synthetic(blocks, {{"attn.qkv.weight", 3000}, {"mlp.fc.weight", 4000}}, 1000, 1e9);
  w.layers.insert(w.layers.begin(), layer("embed", workload::LayerKind::EMBEDDING, 5000, 1e8));
  w.layers.push_back(layer("final_norm", workload::LayerKind::FINAL_NORM, 64, 1e6));
  w.layers.push_back(layer("lm_head", workload::LayerKind::LM_HEAD, 5000, 1e8));
  w.params = 0;
  for (const workload::Layer& l : w.layers)
    for (const workload::ParamTensor& p : l.params)
      w.params += p.numel;
  w.rank_params = w.params;
  return w;
}

std::vector<const Task*> tensor_collectives(const TaskGraph& g, int mb, Phase ph)
{
  std::vector<const Task*> out;
  for (const Task& t : g.tasks)
    if (t.kind == TaskKind::COLLECTIVE && t.group == CommGroup::TENSOR && t.micro_step == mb && t.phase == ph)
      out.push_back(&t);
  return out;
}

int count_group(const TaskGraph& g, CommGroup grp)
{
  return static_cast<int>(std::count_if(
      g.tasks.begin(), g.tasks.end(), [&](const Task& t) { return t.kind == TaskKind::COLLECTIVE && t.group == grp; }));
}

const Task& task(const TaskGraph& g, const std::string& name)
{
  const int i = find_task(g, name);
  REQUIRE_MESSAGE(i >= 0, "no task " << name);
  return g.tasks[static_cast<std::size_t>(i)];
}

const Buffer* buffer(const TaskGraph& g, const std::string& name)
{
  for (const Buffer& b : g.buffers)
    if (b.name == name)
      return &b;
  return nullptr;
}

} // namespace

TEST_SUITE("schedule: tensor parallelism")
{
  TEST_CASE("per micro-step: forward 1 + 2L + 3 TENSOR all-reduces, backward 2L + 1, with Megatron's bytes")
  {
    // Megatron: the vocab-parallel embedding all-reduces its output (H); each block's row-parallel attention output
    // and MLP output projections all-reduce their outputs (2 x H); the vocab-parallel cross entropy all-reduces the
    // logits' max, the target logit and the sum of exponentials, one fp32 per token each (3 x 4T). Backward: each
    // block's column-parallel QKV and MLP-up input gradients (2 x H), and the LM head's input gradient (H).
    const int L = 3;
    const workload::Workload w = model(L);
    for (const auto& [t, p] : std::vector<std::pair<int, spec::Precision>>{
             {2, spec::Precision::BF16}, {4, spec::Precision::BF16}, {2, spec::Precision::FP32}}) {
      CAPTURE(t);
      const std::int64_t b_a = p == spec::Precision::FP32 ? 4 : 2;
      const std::int64_t H = TOKENS * HIDDEN * b_a;
      const int g = 2;
      const TaskGraph gr = build_step_graph(tp_scenario(0, 1, 4, t, g, spec::Checkpointing::NONE, p), w, 0);
      check_invariants(gr, "tp stage 0");
      for (int mb = 0; mb < g; ++mb) {
        CAPTURE(mb);
        const auto fwd = tensor_collectives(gr, mb, Phase::FORWARD);
        const auto bwd = tensor_collectives(gr, mb, Phase::BACKWARD);
        CHECK(fwd.size() == static_cast<std::size_t>(1 + 2 * L + 3));
        CHECK(bwd.size() == static_cast<std::size_t>(2 * L + 1));
        CHECK(tensor_collectives(gr, mb, Phase::RECOMPUTE).empty()); // no checkpointing, no recompute
        std::int64_t fwd_bytes = 0, bwd_bytes = 0;
        for (const Task* k : fwd)
          fwd_bytes += k->bytes;
        for (const Task* k : bwd)
          bwd_bytes += k->bytes;
        CHECK(fwd_bytes == (1 + 2 * L) * H + 3 * TOKENS * 4);
        CHECK(bwd_bytes == (2 * L + 1) * H);
        for (const auto* list : {&fwd, &bwd})
          for (const Task* k : *list) {
            CHECK(k->collective == CollectiveKind::ALL_REDUCE);
            CHECK(k->group_size == t);
            CHECK(k->stream == Stream::COMPUTE); // Megatron's all-reduces run on the default stream
          }
        // Per layer kind, by name: block l forward "attn.out", "mlp.out" (H each), backward "attn.dgrad",
        // "mlp.dgrad"; the embedding's "out" (H); the LM head's loss scalars (4T each) and its "dgrad" (H).
        const std::string m = "mb" + std::to_string(mb) + ".tp_allreduce.";
        for (int l = 0; l < L; ++l) {
          const std::string b = "block." + std::to_string(l);
          for (const char* what : {".attn.out", ".mlp.out"})
            CHECK(task(gr, m + "fwd." + b + what).bytes == H);
          for (const char* what : {".attn.dgrad", ".mlp.dgrad"})
            CHECK(task(gr, m + "bwd." + b + what).bytes == H);
          // The all-reduces follow the layer's compute (they are inside its forward / backward).
          CHECK(find_task(gr, m + "fwd." + b + ".attn.out") > find_task(gr, "mb" + std::to_string(mb) + ".fwd." + b));
          CHECK(find_task(gr, m + "bwd." + b + ".attn.dgrad") > find_task(gr, "mb" + std::to_string(mb) + ".bwd." + b));
        }
        CHECK(task(gr, m + "fwd.embed.out").bytes == H);
        for (const char* what : {".loss.max", ".loss.sum_exp", ".loss.target"})
          CHECK(task(gr, m + "fwd.lm_head" + what).bytes == 4 * TOKENS);
        CHECK(task(gr, m + "bwd.lm_head.dgrad").bytes == H);
        CHECK(find_task(gr, m + "bwd.embed.out") < 0);
        CHECK(find_task(gr, m + "bwd.embed.dgrad") < 0);
        for (const Task& k : gr.tasks)
          CHECK(k.name.find("tp_allreduce.fwd.final_norm") == std::string::npos);
      }
    }
  }

  TEST_CASE("the next layer's forward waits for the previous layer's last TENSOR all-reduce")
  {
    // The row-parallel output is only complete after its all-reduce: block 0's forward depends (through the
    // compute stream, and explicitly) on the embedding's all-reduce, which comes after the embedding's compute.
    const TaskGraph gr = build_step_graph(tp_scenario(0, 1, 2, 2), model(2), 0);
    const int embed = find_task(gr, "mb0.fwd.embed");
    const int ar = find_task(gr, "mb0.tp_allreduce.fwd.embed.out");
    const int block0 = find_task(gr, "mb0.fwd.block.0");
    REQUIRE(embed >= 0);
    REQUIRE(ar >= 0);
    REQUIRE(block0 >= 0);
    CHECK(embed < ar);
    CHECK(ar < block0);
    const auto& deps = gr.tasks[static_cast<std::size_t>(ar)].deps;
    CHECK(std::find(deps.begin(), deps.end(), embed) != deps.end());
  }

  TEST_CASE("full checkpointing re-runs each block's 2 row-parallel all-reduces in recompute, selective none")
  {
    // Full recompute re-runs the block's forward, its attention-output and MLP-output all-reduces included (2 x H
    // per block); selective recomputes only the attention core, which has no collective. Embedding and LM head
    // are not checkpointed blocks: no recompute all-reduce even with recompute work.
    const int L = 3, t = 2, g = 2;
    const std::int64_t H = TOKENS * HIDDEN * 2;
    const workload::Workload w = model(L);
    const TaskGraph full = build_step_graph(tp_scenario(1, 1, 4, t, g, spec::Checkpointing::FULL), w, 0);
    const TaskGraph sel = build_step_graph(tp_scenario(1, 1, 4, t, g, spec::Checkpointing::SELECTIVE), w, 0);
    check_invariants(full, "full");
    check_invariants(sel, "selective");
    for (int mb = 0; mb < g; ++mb) {
      const auto rec = tensor_collectives(full, mb, Phase::RECOMPUTE);
      CHECK(rec.size() == static_cast<std::size_t>(2 * L));
      std::int64_t bytes = 0;
      for (const Task* k : rec) {
        bytes += k->bytes;
        CHECK(k->name.find("tp_allreduce.recompute.block.") != std::string::npos);
        CHECK(k->group_size == t);
      }
      CHECK(bytes == 2 * L * H);
      for (int l = 0; l < L; ++l) {
        // Between the block's recompute and its backward.
        const std::string b = "block." + std::to_string(l), m = "mb" + std::to_string(mb) + ".";
        const int r = find_task(full, m + "recompute." + b);
        const int ar = find_task(full, m + "tp_allreduce.recompute." + b + ".mlp.out");
        REQUIRE(r >= 0);
        REQUIRE(ar >= 0);
        CHECK(r < ar);
        CHECK(ar < find_task(full, m + "bwd." + b));
      }
      // Forward and backward are unchanged by checkpointing.
      CHECK(tensor_collectives(full, mb, Phase::FORWARD).size() == static_cast<std::size_t>(1 + 2 * L + 3));
      CHECK(tensor_collectives(full, mb, Phase::BACKWARD).size() == static_cast<std::size_t>(2 * L + 1));
      // Selective: recompute tasks run, but no TENSOR all-reduce among them.
      CHECK(find_task(sel, "mb" + std::to_string(mb) + ".recompute.block.0") >= 0);
      CHECK(tensor_collectives(sel, mb, Phase::RECOMPUTE).empty());
      CHECK(tensor_collectives(sel, mb, Phase::FORWARD).size() == static_cast<std::size_t>(1 + 2 * L + 3));
    }
  }

  TEST_CASE("t = 1: no TENSOR and no DATA_PARALLEL collective, the data-parallel ones stay WORLD over every GPU")
  {
    for (int stage : {0, 1, 2, 3}) {
      CAPTURE(stage);
      const TaskGraph gr = build_step_graph(tp_scenario(stage, 2, 4, 1, 2, spec::Checkpointing::FULL), model(2), 0);
      CHECK(count_group(gr, CommGroup::TENSOR) == 0);
      CHECK(count_group(gr, CommGroup::DATA_PARALLEL) == 0);
      CHECK(count_group(gr, CommGroup::WORLD) > 0);
      CHECK(gr.dp == 8);
      for (const Task& k : gr.tasks)
        if (k.kind == TaskKind::COLLECTIVE)
          CHECK(k.group_size == 8);
      CHECK(find_task(gr, "mb0.tp_allreduce.fwd.embed.out") < 0);
    }
  }

  TEST_CASE("t > 1: the data-parallel collectives run on DATA_PARALLEL groups of GPUs / t ranks")
  {
    // 2 nodes x 4 GPUs: t = 2 gives N = 4 data-parallel ranks, t = 4 gives N = 2.
    for (int t : {2, 4})
      for (int stage : {0, 1, 2, 3}) {
        CAPTURE(t);
        CAPTURE(stage);
        const int N = 8 / t;
        const TaskGraph gr = build_step_graph(tp_scenario(stage, 2, 4, t, 2), model(2), 0);
        CHECK(gr.dp == N);
        CHECK(count_group(gr, CommGroup::WORLD) == 0);
        CHECK(count_group(gr, CommGroup::DATA_PARALLEL) > 0);
        for (const Task& k : gr.tasks) {
          if (k.kind != TaskKind::COLLECTIVE)
            continue;
          CAPTURE(k.name);
          if (k.group == CommGroup::TENSOR) {
            CHECK(k.group_size == t);
            CHECK(k.collective == CollectiveKind::ALL_REDUCE);
          } else {
            CHECK(k.group == CommGroup::DATA_PARALLEL);
            CHECK(k.group_size == N);
          }
        }
      }
  }

  TEST_CASE("step scalars: each data-parallel all-reduce of the overflow flag and the norm is followed by a TENSOR one")
  {
    // DeepSpeed ZeRO-1/2/3 with an mpu: has_overflow and get_grad_norm all-reduce over the data-parallel group, then
    // _model_parallel_all_reduce over the model-parallel group: 1 byte (overflow flag, MAX), then 4 bytes (norm).
    // bf16 checks overflow in ZeRO-1/2 (check_grad_overflow); ZeRO-3 only for fp16.
    for (const auto& [stage, p] : std::vector<std::pair<int, spec::Precision>>{
             {1, spec::Precision::BF16}, {2, spec::Precision::BF16}, {3, spec::Precision::FP16}}) {
      CAPTURE(stage);
      const TaskGraph gr = build_step_graph(tp_scenario(stage, 1, 4, 2, 1, spec::Checkpointing::NONE, p), model(2), 0);
      const Task& ovf_dp = task(gr, "step.overflow_check");
      const Task& ovf_tp = task(gr, "step.overflow_check.tp");
      const Task& norm_dp = task(gr, "step.grad_norm");
      const Task& norm_tp = task(gr, "step.grad_norm.tp");
      CHECK(ovf_dp.group == CommGroup::DATA_PARALLEL);
      CHECK(ovf_tp.group == CommGroup::TENSOR);
      CHECK(norm_dp.group == CommGroup::DATA_PARALLEL);
      CHECK(norm_tp.group == CommGroup::TENSOR);
      CHECK(ovf_dp.bytes == 1);
      CHECK(ovf_tp.bytes == 1);
      CHECK(norm_dp.bytes == 4);
      CHECK(norm_tp.bytes == 4);
      CHECK(ovf_tp.group_size == 2);
      CHECK(norm_tp.group_size == 2);
      CHECK(find_task(gr, "step.overflow_check") < find_task(gr, "step.overflow_check.tp"));
      CHECK(find_task(gr, "step.overflow_check.tp") < find_task(gr, "step.grad_norm"));
      CHECK(find_task(gr, "step.grad_norm") < find_task(gr, "step.grad_norm.tp"));
      // The step's TENSOR all-reduces are exactly these two.
      CHECK(tensor_collectives(gr, -1, Phase::OPTIMIZER).size() == 2);
    }
  }

  TEST_CASE("ZeRO-2 partitions the flat buffer by dp_rank = rank / t: ranks of one TP group hold the same partition")
  {
    // One block of tensors 100, 300, 50, 550: Ψ = 1000. 4 GPUs, t = 2: N = 2 data-parallel ranks, Ψ_pad =
    // ceil(Ψ / 2N) 2N = 1000, P = Ψ_pad / N = 500 (docs/deepspeed-schedule.md §3.1). dp_rank 0 owns [0, 500): every
    // tensor touches it, P_in = 1000; dp_rank 1 owns [500, 1000): only the 550 tensor, P_in = 550. grads_in_partition
    // holds P_in lp elements (2 bytes, bf16); the fp32 master partition P x 4 bytes.
    const workload::Workload w =
        synthetic(1, {{"a.weight", 100}, {"b.weight", 300}, {"c.weight", 50}, {"d.weight", 550}});
    const spec::Scenario s = tp_scenario(2, 1, 4, 2, 1);
    std::vector<std::int64_t> gip(4, -1);
    for (int r = 0; r < 4; ++r) {
      const TaskGraph gr = build_step_graph(s, w, r);
      const Buffer* b = buffer(gr, "mb0.grads_in_partition");
      REQUIRE(b != nullptr);
      gip[static_cast<std::size_t>(r)] = b->bytes;
      const Buffer* master = buffer(gr, "fp32_master_partition");
      REQUIRE(master != nullptr);
      CHECK(master->bytes == 500 * 4); // P = Ψ_pad / N with N = GPUs / t = 2, not GPUs = 4 (P = 250)
    }
    // Ranks r and r + 1 of one TP group {0, 1}, {2, 3}: the same dp_rank, the same partition.
    CHECK(gip[0] == 1000 * 2);
    CHECK(gip[1] == 1000 * 2);
    CHECK(gip[2] == 550 * 2);
    CHECK(gip[3] == 550 * 2);
    CHECK(gip[0] != gip[2]); // ranks t apart: consecutive dp_ranks
    // t = 4 on 4 GPUs: N = 1, one partition of the whole buffer on every rank.
    for (int r = 0; r < 4; ++r) {
      const TaskGraph gr = build_step_graph(tp_scenario(2, 1, 4, 4, 1), w, r);
      const Buffer* b = buffer(gr, "mb0.grads_in_partition");
      REQUIRE(b != nullptr);
      CHECK(b->bytes == 1000 * 2);
    }
  }

  TEST_CASE("every rank issues the same collective sequence (kind, group, size, bytes)")
  {
    // NCCL matches the k-th call of every rank of a communicator: with TP the ranks differ in their ZeRO-1/2
    // partitions (dp_rank), never in their calls.
    const workload::Workload w = model(3);
    for (int stage : {0, 1, 2, 3})
      for (int t : {2, 4}) {
        CAPTURE(stage);
        CAPTURE(t);
        const spec::Scenario s = tp_scenario(stage, 2, 4, t, 2, spec::Checkpointing::FULL);
        using Call = std::tuple<CollectiveKind, CommGroup, int, std::int64_t>;
        std::vector<Call> first;
        for (int r = 0; r < 8; ++r) {
          std::vector<Call> calls;
          for (const Task& k : build_step_graph(s, w, r).tasks)
            if (k.kind == TaskKind::COLLECTIVE)
              calls.emplace_back(k.collective, k.group, k.group_size, k.bytes);
          if (r == 0)
            first = calls;
          CAPTURE(r);
          CHECK(calls == first);
        }
        CHECK(!first.empty());
      }
  }
}
