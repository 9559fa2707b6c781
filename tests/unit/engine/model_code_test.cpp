// Kernels as the model code launches them (docs/workload.md §5.2): one decoder block of the single-GPU Llama-3.2-1B
// step measured on an H100 (results/measurements/h100-2026-11-27/training-step, `l1b_s4096_b2_none_amp`: Hugging Face
// transformers, amp_bf16 over fp32 parameters, cuDNN SDPA, foreach AdamW) against its profile (raw/profile.txt, per
// block as docs/research/model-code-kernels.md §2 tabulates it), class by class; and what each model code and
// torch.compile change in one block.
#include "compute/compute_model.hpp"
#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "run/run_scenario.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace zerosim;

namespace {

const std::string STEP_DIR = std::string(ZEROSIM_SOURCE_DIR) + "/results/measurements/h100-2026-11-27/training-step/";

struct ClassTotals {
  int kernels = 0;
  double seconds = 0;
};

/// Per class (GEMM, attention, element-wise) the kernels one block launches forward + backward and their GPU time,
/// from the compute model; the element-wise class includes autocast's weight casts the schedule attaches to the
/// block (6 B per weight element each way, one kernel per linear: docs/ddp.md "Autocast").
std::map<std::string, ClassTotals> block_classes(const spec::Scenario& s, const workload::Workload& w)
{
  const compute::ScenarioPricing pricing(s);
  const workload::Layer* block = nullptr;
  for (const workload::Layer& l : w.layers)
    if (l.kind == workload::LayerKind::BLOCK) {
      block = &l;
      break;
    }
  REQUIRE(block != nullptr);
  std::map<std::string, ClassTotals> out;
  int linears = 0;
  std::int64_t weights = 0;
  for (const workload::Op& op : block->ops) {
    const char* cls = op.kind == workload::OpKind::GEMM        ? "gemm"
                      : op.kind == workload::OpKind::ATTENTION ? "attention"
                                                               : "elementwise";
    for (const bool backward : {false, true}) {
      out[cls].kernels += compute::op_kernels(op, backward);
      out[cls].seconds += compute::op_time(op, backward, s.cluster.node.gpu, s.training.precision, pricing.gpu);
    }
    if (op.kind == workload::OpKind::GEMM) {
      ++linears;
      weights += op.n * op.k;
    }
  }
  const double hbm = s.cluster.node.gpu.memory_bandwidth_Bps * pricing.gpu.hbm;
  out["elementwise"].kernels += 2 * linears;
  // Forward fp32 -> bf16 (vectorized), backward ToCopyBackward's bf16 -> fp32 (the non-vectorized casting path).
  out["elementwise"].seconds += 6.0 * static_cast<double>(weights) / hbm +
                                6.0 * static_cast<double>(weights) / (hbm * pricing.gpu.hbm_nonvectorized) +
                                2 * linears * pricing.gpu.kernel_overhead_s;
  return out;
}

} // namespace

TEST_CASE("model code: one hf Llama block under autocast launches the H100 profile's kernels, class by class")
{
  config::LoadOptions priors; // the kernel figures as the priors price them (docs/calibration.md §8)
  priors.calibration = "none";
  const spec::Scenario s = config::load_scenario(STEP_DIR + "l1b_s4096_b2_none_amp.yaml", priors);
  REQUIRE(s.model_code() == spec::ModelCode::HF); // DDP's usual code: the scenario names none
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const auto c = block_classes(s, w);
  // raw/profile.txt per block (docs/research/model-code-kernels.md §2): GEMM 21 kernels in 3.80 ms, attention 6 (cuDNN
  // fprop; bprop, dot_do_o, convert_dq and two GQA head reductions) in 1.36 ms, element-wise 116 (casts, norms, rotary,
  // SwiGLU, residuals, their backward) in 4.67 ms. Each within 15 % (scale(0): relative to the larger of the two, not
  // doctest's default 1 + |value|, which would pass any figure in seconds).
  CHECK(c.at("gemm").kernels == 21);
  CHECK(c.at("gemm").seconds == doctest::Approx(3.80e-3).epsilon(0.15).scale(0));
  CHECK(c.at("attention").kernels == 6);
  CHECK(c.at("attention").seconds == doctest::Approx(1.36e-3).epsilon(0.15).scale(0));
  CHECK(c.at("elementwise").kernels == doctest::Approx(116).epsilon(0.15).scale(0));
  // Element-wise time, with the broadcast, mixed-dtype, strided, cat and casting kernels (TensorIterator's
  // non-vectorized paths, 0.9-2.5 TB/s in the profile) at kernels.yaml's `hbm_nonvectorized` share of the streaming
  // rate and the rest at the streaming rate: 3.90 ms before that share was modelled (-16.5 %).
  CHECK(c.at("elementwise").seconds == doctest::Approx(4.67e-3).epsilon(0.15).scale(0));
  // The optimizer (a step's, not a block's): foreach AdamW, 8 foreach ops x 60 multi_tensor_apply launches = 480
  // kernels in 36.1 ms (profile.txt).
  const engine::Timeline tl = run::simulate_step(s, w);
  const auto& rk = tl.ranks.at(0);
  bool found = false;
  for (std::size_t t = 0; t < rk.graph.tasks.size(); ++t)
    if (rk.graph.tasks[t].name == "step.optimizer") {
      found = true;
      CHECK(rk.graph.tasks[t].kernels == doctest::Approx(480).epsilon(0.15).scale(0));
      CHECK(rk.times[t].end - rk.times[t].start == doctest::Approx(36.1e-3).epsilon(0.15).scale(0));
    }
  CHECK(found);
}

TEST_CASE("model code: the element-wise kernels and bytes of one block follow the code, and compile fuses them")
{
  // docs/research/model-code-kernels.md §9 per block (element-wise, weight casts excluded): hf under autocast 34
  // forward + 68 backward; hf with 16-bit parameters 31 + 57; megatron (fused kernels) 8 + 18 less the Llama variant's
  // rotary/SwiGLU (a GPT shape here: LayerNorm, GELU, bias); torch.compile fewer than any eager code.
  auto block = [](const std::string& sets_model, const std::string& framework, const std::string& precision,
                  const std::string& code, bool compile, const char* attention = "flash2") {
    const std::string text = "name: model-code\nmodel: " + sets_model +
                             "\ncluster:\n  node: dgx-h100\n  gpus_per_node: 1\ntraining: {seq_len: 1024, "
                             "micro_batch: 1, grad_accum: 1, precision: " +
                             precision + "}\nsoftware: {model_code: " + code + ", attention: " + attention +
                             ", torch: \"2.4\", compile: " + (compile ? "true" : "false") + "}\n" + framework;
    const spec::Scenario s =
        config::load_scenario_text(text, std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/model-code.yaml");
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    std::pair<int, int> kernels{0, 0};
    double bytes = 0;
    for (const workload::Layer& l : w.layers)
      if (l.kind == workload::LayerKind::BLOCK) {
        for (const workload::Op& op : l.ops)
          if (op.kind == workload::OpKind::ELEMENTWISE) {
            kernels.first += compute::op_kernels(op, false);
            kernels.second += compute::op_kernels(op, true);
            bytes += op.fwd_bytes + op.bwd_bytes;
          }
        break;
      }
    return std::pair{kernels, bytes};
  };
  const auto [hf_amp, hf_amp_bytes] = block("llama2-7b", "ddp: {}", "amp_bf16", "hf", false);
  CHECK(hf_amp.first == 34);
  CHECK(hf_amp.second == 68);
  const auto [hf_bf16, hf_bf16_bytes] = block("llama2-7b", "ddp: {}", "bf16", "hf", false);
  CHECK(hf_bf16.first == 31);
  CHECK(hf_bf16.second == 57);
  CHECK(hf_bf16_bytes < hf_amp_bytes); // no casts, a 16-bit residual stream
  const auto [titan, titan_bytes] =
      block("llama2-7b", "fsdp: {sharding_strategy: FULL_SHARD}", "bf16", "torchtitan", false);
  CHECK(titan.first == 13);
  CHECK(titan.second == 21);
  const auto [compiled, compiled_bytes] =
      block("llama2-7b", "fsdp: {sharding_strategy: FULL_SHARD}", "bf16", "torchtitan", true);
  CHECK(compiled.first < titan.first);
  CHECK(compiled.second < titan.second);
  CHECK(compiled_bytes < titan_bytes);
  // Megatron's GPT with eager attention: 2 norms, 2 bias-dropout-adds (the dropouts fused in), bias-GeLU, the
  // softmax, the attention dropout and the context's layout copy forward; backward 2 x 3 norm kernels, 2 x 3 for the
  // residuals, the QKV cat and dbias, bias-GeLU's 2, softmax and dropout: 8 + 18 with the fused softmax. GPT-2 XL's
  // 25 heads at micro-batch 1 fail the fused kernel's (b x heads) % 4 == 0, so Megatron runs its eager softmax: 4
  // more kernels each way (float(), scale, mask, softmax, cast back: 5 for 1).
  const auto [meg, meg_bytes] =
      block("gpt2-xl", "deepspeed: {zero_optimization: {stage: 1}}", "bf16", "megatron", false, "eager");
  CHECK(meg.first == 8 + 4);
  CHECK(meg.second == 18 + 4);
}
