// Tests of sim/workload/transformer.hpp. Every expected value is a formula or a published figure,
// with its source beside it. Symbols: b micro-batch, s sequence, h hidden, a heads, l layers,
// V vocabulary, f ffn hidden, T = b*s tokens, b_a activation bytes.
#include "core/error.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>

using namespace zerosim;
using workload::Layer;
using workload::LayerKind;
using workload::Op;
using workload::OpKind;
using workload::Workload;
using workload::WorkloadOptions;

namespace {

// GPT-2 XL: HF openai-community/gpt2-xl config.json (n_layer 48, n_embd 1600, n_head 25, vocab 50257,
// n_positions 1024, tied wte/lm_head, gelu, layernorm, biases).
spec::ModelSpec gpt2_xl()
{
  spec::ModelSpec m;
  m.name = "gpt2-xl";
  m.layers = 48;
  m.hidden = 1600;
  m.heads = 25;
  m.kv_heads = 25;
  m.ffn_hidden = 6400;
  m.ffn = spec::FfnKind::GELU;
  m.vocab = 50257;
  m.tied_embeddings = true;
  m.norm = spec::NormKind::LAYERNORM;
  m.position = spec::PositionKind::LEARNED;
  m.bias = true;
  m.max_position = 1024;
  return m;
}

// A GPT-style model of any shape (the shape Megatron-LM's eq. 3 assumes: f = 4h, fused qkv, tied).
spec::ModelSpec gpt(int layers, int hidden, int heads, int vocab, int max_position)
{
  spec::ModelSpec m = gpt2_xl();
  m.name = "gpt";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.max_position = max_position;
  return m;
}

spec::ModelSpec llama(int layers, int hidden, int heads, int kv_heads, int ffn, int vocab)
{
  spec::ModelSpec m;
  m.name = "llama";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn_hidden = ffn;
  m.ffn = spec::FfnKind::SWIGLU;
  m.vocab = vocab;
  m.tied_embeddings = false;
  m.norm = spec::NormKind::RMSNORM;
  m.position = spec::PositionKind::ROPE;
  m.bias = false;
  return m;
}

// HF meta-llama/Llama-2-70b-hf config.json.
spec::ModelSpec llama2_70b()
{
  return llama(80, 8192, 64, 8, 28672, 32000);
}
// HF meta-llama/Llama-2-7b-hf config.json.
spec::ModelSpec llama2_7b()
{
  return llama(32, 4096, 32, 32, 11008, 32000);
}
// HF meta-llama/Meta-Llama-3-8B config.json.
spec::ModelSpec llama3_8b()
{
  return llama(32, 4096, 32, 8, 14336, 128256);
}

WorkloadOptions options(int b, int s, spec::Checkpointing ckpt, bool flash)
{
  WorkloadOptions o;
  o.micro_batch = b;
  o.seq_len = s;
  o.checkpointing = ckpt;
  o.flash_attention = flash;
  o.activation_dtype_bytes = 2;
  return o;
}

const Layer& block0(const Workload& w)
{
  return w.layers.at(1);
}
const Layer& lm_head(const Workload& w)
{
  return w.layers.back();
}

const Op& find_op(const Layer& l, const std::string& name)
{
  for (const Op& op : l.ops)
    if (op.name == name)
      return op;
  FAIL("no op " << name << " in " << l.name);
  return l.ops.front();
}

bool has_module(const Layer& l, const std::string& module)
{
  for (const auto& p : l.params)
    if (p.module == module)
      return true;
  return false;
}

double rel(double a, double b)
{
  return (a - b) / b;
}

} // namespace

TEST_SUITE("workload")
{
  TEST_CASE("workload: parameter counts equal the published ones exactly")
  {
    // HF meta-llama/Llama-2-70b-hf model card / config.json: 68,976,648,192 parameters.
    CHECK(workload::count_params(llama2_70b()) == 68'976'648'192);
    // OpenAI GPT-2 release (1.5B "XL"), HF openai-community/gpt2-xl: 1,557,611,200 parameters.
    CHECK(workload::count_params(gpt2_xl()) == 1'557'611'200);
    // HF meta-llama/Llama-2-7b-hf model card / config.json: 6,738,415,616 parameters.
    CHECK(workload::count_params(llama2_7b()) == 6'738'415'616);
    // HF meta-llama/Meta-Llama-3-8B model card / config.json: 8,030,261,248 parameters.
    CHECK(workload::count_params(llama3_8b()) == 8'030'261'248);
  }

  TEST_CASE("workload: layers in forward order, params sum to count_params, tied head counted once")
  {
    const Workload w = workload::build_workload(gpt2_xl(), options(1, 1024, spec::Checkpointing::NONE, true));
    REQUIRE(w.layers.size() == 48 + 3);
    CHECK(w.layers.front().name == "embed");
    CHECK(w.layers.front().kind == LayerKind::EMBEDDING);
    CHECK(w.layers[1].name == "block.0");
    CHECK(w.layers[48].name == "block.47");
    CHECK(w.layers[48].block == 47);
    CHECK(w.layers[49].name == "final_norm");
    CHECK(w.layers[50].name == "lm_head");
    CHECK(w.params == 1'557'611'200); // as above
    // Tied: the head owns no parameter but still multiplies T x h by h x V.
    CHECK(lm_head(w).param_count() == 0);
    CHECK(find_op(lm_head(w), "lm_head").fwd_flops == doctest::Approx(2.0 * 1024 * 50257 * 1600));
    // Embedding: wte V*h and wpe 1024*h as two modules (HF GPT2Model.wte, .wpe).
    CHECK(w.layers.front().param_count() == 50257LL * 1600 + 1024LL * 1600);
    CHECK(has_module(w.layers.front(), "embed.positions"));

    const Workload u = workload::build_workload(llama2_70b(), options(1, 4096, spec::Checkpointing::NONE, true));
    CHECK(u.params == 68'976'648'192);
    CHECK(lm_head(u).param_count() == 32000LL * 8192);            // untied head: its own V x h weight
    CHECK_FALSE(has_module(u.layers.front(), "embed.positions")); // rope: no position table
  }

  TEST_CASE("workload: block tensors: fused qkv for GPT, separate q/k/v with GQA widths for Llama")
  {
    const Workload g = workload::build_workload(gpt2_xl(), options(1, 1024, spec::Checkpointing::NONE, true));
    // GPT-2 c_attn: weight h x 3h plus bias 3h, one module; layernorm weight and bias.
    bool found_qkv = false;
    for (const auto& p : block0(g).params) {
      if (p.name == "attn.qkv.weight") {
        found_qkv = true;
        CHECK(p.numel == 1600LL * 4800);
        CHECK(p.module == "attn.qkv");
      }
      if (p.name == "attn.qkv.bias")
        CHECK(p.numel == 4800);
    }
    CHECK(found_qkv);
    CHECK(has_module(block0(g), "attn.qkv"));
    CHECK_FALSE(has_module(block0(g), "attn.q_proj"));
    // Per GPT block: 12h^2 + 13h (4 linears with biases, 2 layernorms with weight and bias).
    CHECK(block0(g).param_count() == 12LL * 1600 * 1600 + 13LL * 1600);

    const Workload l = workload::build_workload(llama2_70b(), options(1, 4096, spec::Checkpointing::NONE, true));
    // Llama-2-70B: q h x h, k and v h x (kv_heads * head_dim) = 8192 x 1024, no biases, rmsnorm weight only.
    std::int64_t k_numel = 0, q_numel = 0;
    for (const auto& p : block0(l).params) {
      if (p.name == "attn.k_proj.weight")
        k_numel = p.numel;
      if (p.name == "attn.q_proj.weight")
        q_numel = p.numel;
      CHECK(p.name.find("bias") == std::string::npos);
    }
    CHECK(k_numel == 8192LL * 8 * 128);
    CHECK(q_numel == 8192LL * 8192);
    CHECK(has_module(block0(l), "mlp.gate_proj"));
    // 2h (norms) + 2h^2 + 2*h*kv*d + 3*h*f.
    CHECK(block0(l).param_count() == 2LL * 8192 + 2LL * 8192 * 8192 + 2LL * 8192 * 1024 + 3LL * 8192 * 28672);
  }

  TEST_CASE("workload: largest module and largest tensor")
  {
    // Llama-2-70B: the embedding (V*h = 262,144,000) exceeds the largest linear (h*f = 234,881,024).
    const Workload l = workload::build_workload(llama2_70b(), options(1, 4096, spec::Checkpointing::NONE, true));
    CHECK(l.largest_layer_params == 32000LL * 8192);
    CHECK(l.largest_param_numel == 32000LL * 8192);
    // GPT-2 XL: wte alone (V*h = 80,411,200); wpe is a separate module and does not add to it.
    const Workload g = workload::build_workload(gpt2_xl(), options(1, 1024, spec::Checkpointing::NONE, true));
    CHECK(g.largest_layer_params == 50257LL * 1600);
    // A small vocabulary: mlp.up_proj (h x 4h weight + 4h bias) is the largest module; the largest
    // tensor is an h x 4h weight (up and down are the same size).
    const Workload small =
        workload::build_workload(gpt(2, 1024, 16, 1000, 512), options(1, 512, spec::Checkpointing::NONE, true));
    CHECK(small.largest_layer_params == 1024LL * 4096 + 4096); // mlp.up_proj: h*4h + 4h bias
    CHECK(small.largest_param_numel == 1024LL * 4096);
  }

  TEST_CASE("workload: model FLOPs equal Megatron-LM's 72Bslh^2(1 + s/6h + V/12lh) for GPT shapes")
  {
    // Narayanan et al. 2021 (arXiv 2104.04473) eq. 3; docs/scenario-format.md "TFLOPs".
    struct Case {
      int l, h, a, V, s, b;
    };
    const Case cases[] = {{48, 1600, 25, 50257, 1024, 4},  // GPT-2 XL
                          {96, 12288, 96, 50257, 2048, 1}, // GPT-3 175B (Brown et al. 2020, Table 2.1)
                          {24, 2048, 16, 51200, 2048, 8}}; // GPT-3 XL shape, padded vocab
    for (const Case& c : cases) {
      for (bool flash : {true, false}) {
        CAPTURE(c.h);
        CAPTURE(flash);
        const double B = c.b, s = c.s, l = c.l, h = c.h, V = c.V;
        const double model = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
        const double hw_full = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
        const auto m = gpt(c.l, c.h, c.a, c.V, c.s);
        const Workload none = workload::build_workload(m, options(c.b, c.s, spec::Checkpointing::NONE, flash));
        CHECK(std::abs(rel(none.model_flops, model)) < 1e-12);
        CHECK(none.hardware_flops == none.model_flops); // nothing recomputed
        const Workload full = workload::build_workload(m, options(c.b, c.s, spec::Checkpointing::FULL, flash));
        CHECK(std::abs(rel(full.model_flops, model)) < 1e-12);
        CHECK(std::abs(rel(full.hardware_flops, hw_full)) < 1e-12);
        // Selective (Korthikanti et al. 2022, section 5): only QK^T and AV are re-run, 4·B·s²·h per layer.
        const Workload sel = workload::build_workload(m, options(c.b, c.s, spec::Checkpointing::SELECTIVE, flash));
        CHECK(std::abs(rel(sel.hardware_flops, model + 4 * B * s * s * h * l)) < 1e-12);
      }
    }
  }

  TEST_CASE("workload: Llama model FLOPs = 6·tokens·(matmul weights) + 12·l·s·h·tokens")
  {
    // docs/scenario-format.md "TFLOPs" (6 FLOPs per token per matmul weight incl. the LM head, not the lookup).
    for (const auto& m : {llama2_70b(), llama3_8b()}) {
      const int b = 2, s = 4096;
      const Workload w = workload::build_workload(m, options(b, s, spec::Checkpointing::NONE, true));
      const double tokens = double(b) * s;
      const double h = m.hidden, l = m.layers;
      // Matmul weights: all parameters less the embedding table and the norm weights (2 per block + final).
      const double matmul = double(w.params) - double(m.vocab) * h - (2 * l + 1) * h;
      CHECK(std::abs(rel(w.model_flops, 6 * tokens * matmul + 12 * l * s * h * tokens)) < 1e-12);
      // Full checkpointing adds the blocks' forward: 2 per token per block weight + 4·s·h per token per layer.
      const Workload f = workload::build_workload(m, options(b, s, spec::Checkpointing::FULL, true));
      const double block_matmul = matmul - double(m.vocab) * h;
      CHECK(std::abs(rel(f.hardware_flops - f.model_flops, 2 * tokens * block_matmul + 4 * l * s * h * tokens)) <
            1e-12);
    }
  }

  TEST_CASE("workload: GPT block activations equal Korthikanti et al. 2022: sbh(34 + 5as/h) + layernorm stats")
  {
    // arXiv 2205.05198, section 4.1, eq. 2 (b_a = 2, dropout, no flash). The paper leaves out "small buffers" such as
    // layernorm statistics; we keep them: 2 layernorms x (mean + rstd) x 4 bytes (fp32) x s·b.
    struct Case {
      int l, h, a, V, s, b;
    };
    const Case cases[] = {{96, 12288, 96, 50257, 2048, 1}, {48, 1600, 25, 50257, 1024, 2}};
    for (const Case& c : cases) {
      CAPTURE(c.h);
      const auto m = gpt(c.l, c.h, c.a, c.V, c.s);
      const std::int64_t s = c.s, b = c.b, h = c.h, a = c.a;
      const std::int64_t sbh = s * b * h;
      const std::int64_t stats = 2 * 2 * 4 * s * b;
      const std::int64_t korthikanti = sbh * 34 + 5 * a * s * s * b; // s·b·h·(34 + 5as/h)

      const Workload none = workload::build_workload(m, options(c.b, c.s, spec::Checkpointing::NONE, false));
      CHECK(block0(none).activation_bytes_kept == korthikanti + stats);
      // Non-flash forward: the pre-softmax scores (a·s²·b·b_a) are transient, not kept.
      CHECK(block0(none).activation_bytes_forward_working >= 2 * a * s * s * b);

      // Selective: the paper's Table 2 "selective" row: 34·sbh (the 5as/h term is recomputed).
      const Workload sel = workload::build_workload(m, options(c.b, c.s, spec::Checkpointing::SELECTIVE, false));
      CHECK(block0(sel).activation_bytes_kept == 34 * sbh + stats);
      // Its backward rebuilds the 5as²b bytes, on top of the gradient temporaries of no checkpointing.
      CHECK(block0(sel).activation_bytes_backward_working - block0(none).activation_bytes_backward_working ==
            5 * a * s * s * b);

      // Flash attention: no s² tensor; FlashAttention keeps the fp32 logsumexp, b·a·s·4 bytes.
      const Workload fl = workload::build_workload(m, options(c.b, c.s, spec::Checkpointing::NONE, true));
      CHECK(block0(fl).activation_bytes_kept == 34 * sbh + stats + 4 * a * s * b);

      // Full: only the block input, s·b·h·b_a; backward rebuilds everything else of the no-checkpoint set.
      const Workload full = workload::build_workload(m, options(c.b, c.s, spec::Checkpointing::FULL, false));
      CHECK(block0(full).activation_bytes_kept == 2 * sbh);
      CHECK(block0(full).activation_bytes_backward_working - block0(none).activation_bytes_backward_working ==
            korthikanti + stats - 2 * sbh);
      // Embedding, final norm and LM head are outside the checkpointed blocks: unchanged.
      CHECK(lm_head(full).activation_bytes_kept == lm_head(none).activation_bytes_kept);
      CHECK(full.layers.front().activation_bytes_kept == none.layers.front().activation_bytes_kept);
    }
  }

  TEST_CASE("workload: a model's dropout key overrides the bias rule")
  {
    // Korthikanti et al. 2022 eq. 2 with dropout: sbh(34 + 5as/h). Without dropout (dropout: 0, a model with
    // biases): the two 1-byte residual masks (2 sbh) go, and in the attention core the mask (a s^2 b) and the
    // dropped-out probabilities (2 a s^2 b) go, AV saving the softmax output itself: 34 - 2 = 32 sbh and
    // 5 - 3 = 2 as^2 b (no flash).
    const std::int64_t l = 4, h = 1600, a = 25, V = 50257, s = 1024, b = 1;
    auto m = gpt(l, h, a, V, s);
    const Workload rule = workload::build_workload(m, options(b, s, spec::Checkpointing::NONE, false));
    m.dropout = 0.0;
    const Workload off = workload::build_workload(m, options(b, s, spec::Checkpointing::NONE, false));
    CHECK(block0(rule).activation_bytes_kept - block0(off).activation_bytes_kept == 2 * s * b * h + 3 * a * s * s * b);
    // A bias-free model given dropout: 0.1 gets the masks the rule would not give it.
    m.dropout = 0.1;
    m.bias = false;
    const Workload on = workload::build_workload(m, options(b, s, spec::Checkpointing::NONE, false));
    m.dropout.reset();
    const Workload none = workload::build_workload(m, options(b, s, spec::Checkpointing::NONE, false));
    CHECK(block0(on).activation_bytes_kept - block0(none).activation_bytes_kept == 2 * s * b * h + 3 * a * s * s * b);
  }

  TEST_CASE("workload: Llama block activations from the tensors autograd saves (no dropout, GQA, SwiGLU)")
  {
    // Saved per block (docs/workload.md §4.2): rmsnorm inputs x and x2 (+ fp32 rstd, 4 bytes/token each),
    // q/k/v input, rotated q and k, v, attention output (o_proj input), MLP input, gate (SiLU input),
    // SiLU output and up (the product's factors), product (down_proj input).
    const auto m = llama3_8b();
    const std::int64_t b = 1, s = 8192, h = 4096, a = 32, kvd = 8 * 128, f = 14336, T = b * s;
    const std::int64_t rstd = 2 * 4 * T;
    const Workload fl = workload::build_workload(m, options(1, 8192, spec::Checkpointing::NONE, true));
    // Flash: x, y1, q, out, x2, y2 (6·T·h) + k, v (2·T·kv·d) + 4·T·f, all at 2 bytes; + lse b·a·s·4.
    CHECK(block0(fl).activation_bytes_kept == 2 * T * (6 * h + 2 * kvd + 4 * f) + rstd + 4 * a * s * b);
    // Eager attention: k and v are expanded to all heads (repeat_kv) before QK^T and AV, which save the
    // expanded copies (2·T·h) and the softmax output a·s²·b; no dropout so AV saves the same probs tensor.
    const Workload eager = workload::build_workload(m, options(1, 8192, spec::Checkpointing::NONE, false));
    CHECK(block0(eager).activation_bytes_kept == 2 * T * (8 * h + 4 * f) + 2 * a * s * s * b + rstd);
    // Selective keeps the attention core's inputs (q and the small k, v) and drops the s² probabilities.
    const Workload sel = workload::build_workload(m, options(1, 8192, spec::Checkpointing::SELECTIVE, false));
    CHECK(block0(sel).activation_bytes_kept == 2 * T * (6 * h + 2 * kvd + 4 * f) + rstd);
  }

  TEST_CASE("workload: per_op keeps what torchtitan's policy saves and recomputes the rest")
  {
    // torchtitan (torchtitan/models/llama3/infra/parallelize.py, _custom_policy): in each checkpointed block,
    // aten.mm outputs are saved unless their running count is even, SDPA (flash) outputs are saved, everything
    // else is recomputed. A Llama block runs its matmuls in the order q, k, v, o, gate, up, down: q, v, gate and
    // down (counts 1, 3, 5, 7) are saved, k, o and up (2, 4, 6) recomputed. checkpoint() also keeps the block's
    // input x.
    const auto m = llama3_8b();
    const std::int64_t b = 1, s = 8192, h = 4096, a = 32, kvd = 8 * 128, f = 14336, T = b * s;
    const Workload w = workload::build_workload(m, options(1, 8192, spec::Checkpointing::PER_OP, true));
    const Layer& blk = block0(w);
    // x (T·h) + q (T·h) + v (T·kvd) + SDPA output (T·h) and its fp32 logsumexp (4·b·a·s) + gate (T·f) + down
    // (T·h), 16-bit.
    CHECK(blk.activation_bytes_kept == 2 * T * (4 * h + kvd + f) + 4 * a * s * b);
    // Between full (x alone) and none (everything autograd saves).
    const Workload full = workload::build_workload(m, options(1, 8192, spec::Checkpointing::FULL, true));
    const Workload none = workload::build_workload(m, options(1, 8192, spec::Checkpointing::NONE, true));
    CHECK(block0(full).activation_bytes_kept < blk.activation_bytes_kept);
    CHECK(blk.activation_bytes_kept < block0(none).activation_bytes_kept);
    // Recomputed matmuls: k (h -> kvd), o (h -> h), up (h -> f), 2·T·in·out FLOPs each; the flash kernel is not
    // re-run, the elementwise ops carry no FLOPs.
    CHECK(blk.recompute_flops == doctest::Approx(2.0 * double(T) * double(h * kvd + h * h + h * f)));
    for (const Op& op : blk.ops)
      if (op.kind == OpKind::ATTENTION)
        CHECK_FALSE(op.recomputed);
  }

  TEST_CASE("workload: LM head keeps the logits and the fp32 log-softmax of the loss")
  {
    // docs/workload.md §4.4: logits T·V·b_a (held by the caller), log_softmax output T·V·4 (cross_entropy
    // upcasts), the head's input T·h·b_a, labels T·8 (int64).
    const auto m = llama3_8b();
    const std::int64_t T = 8192, V = 128256, h = 4096;
    const Workload w = workload::build_workload(m, options(1, 8192, spec::Checkpointing::FULL, true));
    CHECK(lm_head(w).activation_bytes_kept == T * h * 2 + T * V * 2 + T * V * 4 + T * 8);
    CHECK(lm_head(w).activation_bytes_forward_working == T * V * 4);      // the fp32 copy fed to log_softmax
    CHECK(lm_head(w).activation_bytes_backward_working == 2 * T * V * 4); // d(log_softmax) in and out, fp32
    CHECK(lm_head(w).recompute_flops == 0);                               // the head is never checkpointed
  }

  TEST_CASE("workload: Hugging Face's eager RMSNorm and autocast's per-linear casts keep what autograd saves")
  {
    // docs/workload.md §1.4, from transformers' LlamaRMSNorm (`hidden.to(float32)`; `pow` saves the fp32 input; the
    // weight multiply saves the normalised tensor) and autocast (no cache for activation casts: each linear saves
    // its own 16-bit copy of its input). Per token per hidden unit, against a fused norm that saves its 16-bit
    // input x and whose 16-bit output the readers share (2 + 2):
    //  - amp over fp32 parameters: an fp32 residual stream; a norm saves x (4) and the fp32 normalised (4); its n
    //    readers each save a cast (2n): q/k/v 4 + 4 + 6 = 14, gate/up 4 + 4 + 4 = 12, i.e. 18·T·h more per block,
    //    the gap the H100 steps measured (results/measurements/h100-2026-11-27/training-step/README.md, "Memory");
    //  - 16-bit parameters (no casts): a norm saves an fp32 copy of x (4) and the 16-bit normalised (2) where the
    //    fused one saves x (2): 4·T·h more per norm, 8·T·h per block.
    const auto m = llama(16, 2048, 32, 8, 8192, 128256); // Llama-3.2-1B's block
    const std::int64_t T = 8192, h = 2048;
    WorkloadOptions fused = options(2, 4096, spec::Checkpointing::NONE, true);
    fused.model_code = spec::ModelCode::MEGATRON;
    WorkloadOptions hf16 = fused;
    hf16.model_code = spec::ModelCode::HF;
    WorkloadOptions amp = hf16;
    amp.autocast_casts = true;
    const std::int64_t base = block0(workload::build_workload(m, fused)).activation_bytes_kept;
    CHECK(block0(workload::build_workload(m, amp)).activation_bytes_kept - base == 18 * T * h);
    CHECK(block0(workload::build_workload(m, hf16)).activation_bytes_kept - base == 8 * T * h);
    // Under full checkpointing only the block's input is kept: fp32 on the autocast stream (4·T·h, not 2).
    WorkloadOptions amp_full = amp;
    amp_full.checkpointing = spec::Checkpointing::FULL;
    CHECK(block0(workload::build_workload(m, amp_full)).activation_bytes_kept == 4 * T * h);
  }

  TEST_CASE("workload: the loss as the training loop and torch.compile leave it")
  {
    // docs/workload.md §4.4. torchtitan's train step frees the logits before backward (`del pred`, torchtitan
    // train.py at 775a486e): the head keeps its input, the fp32 log-softmax and the labels, not the 16-bit logits.
    const auto m = llama3_8b();
    const std::int64_t T = 8192, V = 128256, h = 4096;
    WorkloadOptions titan = options(1, 8192, spec::Checkpointing::FULL, true);
    titan.model_code = spec::ModelCode::TORCHTITAN;
    CHECK(lm_head(workload::build_workload(m, titan)).activation_bytes_kept == T * h * 2 + T * V * 4 + T * 8);
    // Compiled (torchtitan compiles its loss with its blocks): the upcast, log-softmax and nll are one Inductor
    // kernel, whose partitioner saves the 16-bit logits and the fp32 logsumexp per row rather than T·V·4.
    titan.compiled = true;
    const Workload compiled = workload::build_workload(m, titan);
    const Layer& head = lm_head(compiled);
    CHECK(head.activation_bytes_kept == T * h * 2 + T * V * 2 + T * 4 + T * 8);
    // Backward: the logits' 16-bit gradient, written by the fused backward kernel (no fp32 copy), beside the head
    // GEMM's input gradient (its largest gradient pair, op_graph's rule).
    CHECK(head.activation_bytes_backward_working == T * V * 2 + T * h * 2);
  }

  TEST_CASE("workload: Megatron-LM's loss keeps one fp32 copy of the logits")
  {
    // docs/workload.md §4.4, loss: megatron (vocab_parallel_cross_entropy(output.float(), labels)): the 16-bit
    // logits T·V·b_a die with the upcast (forward working), the fp32 copy T·V·4 is the softmax backward keeps;
    // backward working is the upcast's gradients, fp32 in and 16-bit out: T·V·(4 + 2).
    auto m = llama3_8b();
    m.loss = spec::LossKind::MEGATRON;
    const std::int64_t T = 8192, V = 128256, h = 4096;
    const Workload w = workload::build_workload(m, options(1, 8192, spec::Checkpointing::FULL, true));
    CHECK(lm_head(w).activation_bytes_kept == T * h * 2 + T * V * 4 + T * 8);
    CHECK(lm_head(w).activation_bytes_forward_working == T * V * 2);
    CHECK(lm_head(w).activation_bytes_backward_working == T * V * (4 + 2));
  }

  TEST_CASE("workload: operation FLOPs and bytes")
  {
    const std::int64_t b = 2, s = 4096, h = 8192, T = b * s;
    const Workload w = workload::build_workload(llama2_70b(), options(2, 4096, spec::Checkpointing::NONE, true));
    // GEMM: 2·m·n·k forward (m = tokens), twice that backward; bytes = (X + W + Y)·2, backward twice.
    const Op& o = find_op(block0(w), "attn.o_proj");
    CHECK(o.kind == OpKind::GEMM);
    CHECK(o.m == T);
    CHECK(o.fwd_flops == doctest::Approx(2.0 * T * h * h));
    CHECK(o.bwd_flops == doctest::Approx(4.0 * T * h * h));
    CHECK(o.fwd_bytes == doctest::Approx(2.0 * (T * h + h * h + T * h)));
    CHECK(o.bwd_bytes == doctest::Approx(2 * o.fwd_bytes));
    // Attention core: 2·2·b·s²·h forward, twice backward; selective recompute flag.
    const Op& fa = find_op(block0(w), "attn.flash");
    CHECK(fa.kind == OpKind::ATTENTION);
    CHECK(fa.fwd_flops == doctest::Approx(4.0 * b * s * s * h));
    CHECK(fa.bwd_flops == doctest::Approx(8.0 * b * s * s * h));
    CHECK(fa.selective_recompute);
    CHECK_FALSE(o.selective_recompute);
    // RMSNorm: read x, write y (T·h·2 each), read gamma (h·2), write rstd (T·4).
    const Op& n = find_op(block0(w), "attn_norm");
    CHECK(n.kind == OpKind::ELEMENTWISE);
    CHECK(n.fwd_flops == 0);
    CHECK(n.fwd_bytes == doctest::Approx(2.0 * T * h * 2 + h * 2 + T * 4));
    // Residual add: read two, write one.
    CHECK(find_op(block0(w), "attn.residual").fwd_bytes == doctest::Approx(3.0 * T * h * 2));
    // Layer sums.
    double fwd = 0;
    for (const Op& op : block0(w).ops)
      fwd += op.fwd_flops;
    CHECK(block0(w).fwd_flops == fwd);
  }

  TEST_CASE("workload: inference keeps nothing and runs forward only")
  {
    const auto m = llama2_7b();
    WorkloadOptions o = options(4, 2048, spec::Checkpointing::NONE, false);
    o.inference = true;
    const Workload w = workload::build_workload(m, o);
    const double tokens = 4.0 * 2048, h = 4096, l = 32, s = 2048;
    const double matmul = double(w.params) - 32000.0 * h - (2 * l + 1) * h;
    // Forward only: 2 per token per matmul weight + 4·s·h per token per layer (a third of the training count).
    CHECK(std::abs(rel(w.model_flops, 2 * tokens * matmul + 4 * l * s * h * tokens)) < 1e-12);
    for (const Layer& l2 : w.layers) {
      CHECK(l2.activation_bytes_kept == 0);
      CHECK(l2.activation_bytes_backward_working == 0);
      CHECK(l2.bwd_flops == 0);
    }
    // The largest transient of an eager block holds the scores and the probabilities at once: 2·a·s²·b·2.
    CHECK(block0(w).activation_bytes_forward_working >= 2 * 32 * 2048LL * 2048 * 4 * 2);
  }

  TEST_CASE("workload: options follow the scenario")
  {
    spec::Scenario sc;
    sc.training.micro_batch = 2;
    sc.training.seq_len = 4096;
    sc.training.activation_checkpointing = spec::Checkpointing::SELECTIVE;
    sc.software.attention = spec::AttentionKernel::EAGER; // what `training.flash_attention: false` loads as
    sc.training.precision = spec::Precision::AMP_BF16;
    WorkloadOptions o = workload::workload_options(sc);
    CHECK(o.micro_batch == 2);
    CHECK(o.seq_len == 4096);
    CHECK(o.checkpointing == spec::Checkpointing::SELECTIVE);
    CHECK_FALSE(o.flash_attention);
    CHECK(o.activation_dtype_bytes == 2);
    CHECK_FALSE(o.inference);
    sc.training.precision = spec::Precision::FP32;
    CHECK(workload::workload_options(sc).activation_dtype_bytes == 4);
    sc.training.mode = spec::Mode::INFERENCE;
    sc.inference.batch = 8;
    sc.inference.prompt_tokens = 512;
    o = workload::workload_options(sc);
    CHECK(o.inference);
    CHECK(o.micro_batch == 8);
    CHECK(o.seq_len == 512);
  }

  TEST_CASE("workload: fp32 activations double the 16-bit bytes and skip the loss upcast")
  {
    const auto m = gpt2_xl();
    WorkloadOptions o = options(1, 1024, spec::Checkpointing::NONE, true);
    const Workload w2 = workload::build_workload(m, o);
    o.activation_dtype_bytes = 4;
    const Workload w4 = workload::build_workload(m, o);
    // Everything in activation dtype doubles; what does not: the two 1-byte dropout masks of T·h (after
    // o_proj and after down_proj; flash regenerates the attention dropout), the fp32 layernorm statistics
    // (2 norms x mean and rstd x 4 bytes x T) and the fp32 logsumexp (b·a·s·4).
    const std::int64_t T = 1024, h = 1600, a = 25;
    const std::int64_t masks = 2 * T * h, fp32 = 2 * 2 * 4 * T + 4 * a * T;
    CHECK(block0(w4).activation_bytes_kept - fp32 - masks == 2 * (block0(w2).activation_bytes_kept - fp32 - masks));
    bool upcast = false;
    for (const Op& op : lm_head(w4).ops)
      upcast = upcast || op.name == "loss.upcast";
    CHECK_FALSE(upcast);
  }

  TEST_CASE("workload: bad shapes and options are input errors")
  {
    auto m = llama2_7b();
    m.heads = 30; // 4096 is not a multiple of 30
    CHECK_THROWS_AS(workload::count_params(m), core::InputError);
    m = llama2_70b();
    m.kv_heads = 7; // 64 heads not divisible into 7 groups
    CHECK_THROWS_AS(workload::count_params(m), core::InputError);
    CHECK_THROWS_WITH_AS(workload::build_workload(gpt2_xl(), options(1, 2048, spec::Checkpointing::NONE, true)),
                         "model 'gpt2-xl': sequence length 2048 exceeds the learned position table (max_position 1024)",
                         core::InputError);
    CHECK_THROWS_AS(workload::build_workload(llama2_7b(), options(0, 2048, spec::Checkpointing::NONE, true)),
                    core::InputError);
  }
}

TEST_SUITE("workload: tensor parallelism")
{
  WorkloadOptions tp_options(int b, int s, spec::Checkpointing ckpt, int t)
  {
    WorkloadOptions o = options(b, s, ckpt, false);
    o.tensor_parallel = t;
    return o;
  }

  TEST_CASE("workload: a block's activations under tensor parallelism equal Korthikanti et al. 2022 eq. 2")
  {
    // arXiv 2205.05198, section 4.2.1 (tensor parallelism without sequence parallelism): sbh(10 + 24/t + 5as/(ht))
    // bytes per layer: the norms' inputs and outputs, the residual-dropout masks stay whole (10 sbh); the QKV outputs,
    // the context, the MLP up and activation outputs split t ways (24 sbh / t) and so do the attention scores' softmax,
    // dropout mask and output (5as²b / t). Plus our fp32 layernorm statistics (2 norms x 2 x 4 B x sb), replicated.
    const std::int64_t s = 2048, b = 1, h = 12288, a = 96;
    for (int t : {1, 2, 4, 8}) {
      CAPTURE(t);
      const Workload w =
          workload::build_workload(gpt(96, 12288, 96, 51200, 2048), tp_options(1, 2048, spec::Checkpointing::NONE, t));
      const std::int64_t sbh = s * b * h;
      const std::int64_t expected = sbh * 10 + sbh * 24 / t + 5 * a * s * s * b / t + 2 * 2 * 4 * s * b;
      CHECK(block0(w).activation_bytes_kept == expected);
    }
  }

  TEST_CASE("workload: tensor parallelism splits the block's parameters and FLOPs t ways, norms and row biases stay")
  {
    // Megatron-LM ColumnParallelLinear (QKV, fc1) splits weight and bias; RowParallelLinear (proj, fc2) splits the
    // weight and keeps the whole bias; the layernorms are replicated. Per block: 12h²/t + (3h + 4h)/t + 2h + 4h.
    const std::int64_t h = 4096, t = 4;
    const auto m = gpt(24, 4096, 32, 50304, 1024);
    const Workload one = workload::build_workload(m, tp_options(2, 1024, spec::Checkpointing::NONE, 1));
    const Workload four = workload::build_workload(m, tp_options(2, 1024, spec::Checkpointing::NONE, 4));
    CHECK(block0(four).param_count() == 12 * h * h / t + 7 * h / t + 2 * h + 4 * h);
    CHECK(block0(one).param_count() == 12 * h * h + 7 * h + 2 * h + 4 * h);
    // The GEMM FLOPs and the attention core divide exactly; elementwise ops carry none (docs/workload.md §3).
    CHECK(block0(four).fwd_flops * 4 == doctest::Approx(block0(one).fwd_flops).epsilon(1e-12));
    // The vocab-parallel LM head: V / t columns (50304 / 4 = 12576).
    CHECK(lm_head(four).fwd_flops * 4 == doctest::Approx(lm_head(one).fwd_flops).epsilon(1e-12));
    // The whole model's count does not change; a rank holds its shard.
    CHECK(four.params == one.params);
    CHECK(four.params == workload::count_params(m));
    CHECK(four.rank_params < one.rank_params / 3);
    CHECK(one.rank_params == one.params);
    // Model FLOPs per GPU: the micro-batch's, shared by the t ranks of the group.
    CHECK(four.model_flops * 4 == doctest::Approx(one.model_flops).epsilon(1e-12));
  }

  TEST_CASE("workload: a tensor-parallel degree that does not divide the heads is an input error")
  {
    CHECK_THROWS_WITH_AS(
        workload::build_workload(gpt(24, 4096, 32, 50304, 1024), tp_options(1, 1024, spec::Checkpointing::NONE, 3)),
        "model 'gpt': heads (32) must be a multiple of the tensor-parallel degree 3", core::InputError);
  }
}
