// The decoder-only transformer as layers: parameter tensors, operations (FLOPs, HBM bytes) and
// activation bytes. Every formula and assumption is in docs/workload.md (cited as §n below).
#include "workload/transformer.hpp"

#include "core/error.hpp"
#include "workload/model_code.hpp"
#include "workload/op_graph.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace zerosim::workload {

std::int64_t Layer::param_count() const
{
  std::int64_t total = 0;
  for (const ParamTensor& p : params)
    total += p.numel;
  return total;
}

namespace {

using detail::BytesRule;
using detail::GraphMode;
using detail::GraphResult;
using detail::OpDef;
using detail::OpGraph;

/// The model's shape, validated and with its defaults resolved (docs/workload.md §1).
struct Shape {
  std::int64_t layers = 0;
  std::int64_t h = 0;   ///< hidden
  std::int64_t a = 0;   ///< attention heads
  std::int64_t kv = 0;  ///< key/value heads
  std::int64_t d = 0;   ///< head dimension h / a
  std::int64_t kvd = 0; ///< kv * d: width of the k and v projections
  std::int64_t f = 0;   ///< ffn hidden
  std::int64_t vocab = 0;
  std::int64_t max_position = 0;
  bool swiglu = false;
  bool layernorm = true;
  bool bias = true;
  bool tied = false;
  bool learned_positions = false;
  bool rope = false;
  /// One fused qkv module (GPT-2 c_attn, Megatron query_key_value) iff the model has biases and no GQA;
  /// separate q_proj, k_proj, v_proj otherwise (Llama). docs/workload.md §1.2.
  bool fused_qkv = false;
  /// Dropout (p > 0) in training: the model's `dropout` when given, else iff the model has biases (GPT-2/GPT-3/
  /// Megatron GPT train with p = 0.1, Llama/MPT/Mistral with none). docs/workload.md §1.3.
  bool dropout = false;
  bool megatron_loss = false; ///< LossKind::MEGATRON (docs/workload.md §4.4)
  // One tensor-parallel rank's share (docs/tensor-parallel.md); equal to the whole at t = 1.
  std::int64_t t = 1;       ///< tensor-parallel degree
  std::int64_t a_r = 0;     ///< attention heads of this rank: a / t
  std::int64_t h_r = 0;     ///< query/context width of this rank: a_r * d = h / t
  std::int64_t kvd_r = 0;   ///< k and v width of this rank: kv / t * d
  std::int64_t f_r = 0;     ///< FFN width of this rank: f / t
  std::int64_t vocab_r = 0; ///< vocab rows of this rank: ceil(vocab / t) (Megatron pads the vocab to a multiple of t)
};

std::string model_label(const spec::ModelSpec& m)
{
  return m.name.empty() ? std::string("model") : "model '" + m.name + "'";
}

Shape resolve(const spec::ModelSpec& m, int tensor_parallel = 1)
{
  const std::string who = model_label(m);
  const auto require_positive = [&](const char* key, long long v) {
    if (v <= 0)
      throw core::InputError(who + ": " + key + " must be a positive integer, found " + std::to_string(v));
  };
  require_positive("layers", m.layers);
  require_positive("hidden", m.hidden);
  require_positive("heads", m.heads);
  require_positive("vocab", m.vocab);
  if (m.kv_heads < 0)
    throw core::InputError(who + ": kv_heads must be positive (or absent = heads), found " +
                           std::to_string(m.kv_heads));
  if (m.ffn_hidden < 0)
    throw core::InputError(who + ": ffn_hidden must be positive (or absent = 4 * hidden), found " +
                           std::to_string(m.ffn_hidden));
  if (m.hidden % m.heads != 0)
    throw core::InputError(who + ": hidden (" + std::to_string(m.hidden) + ") must be a multiple of heads (" +
                           std::to_string(m.heads) + ")");
  Shape s;
  s.layers = m.layers;
  s.h = m.hidden;
  s.a = m.heads;
  s.kv = m.kv_heads == 0 ? m.heads : m.kv_heads;
  if (s.a % s.kv != 0)
    throw core::InputError(who + ": heads (" + std::to_string(m.heads) + ") must be a multiple of kv_heads (" +
                           std::to_string(s.kv) + ")");
  s.d = s.h / s.a;
  s.kvd = s.kv * s.d;
  s.f = m.ffn_hidden == 0 ? 4 * s.h : m.ffn_hidden;
  s.vocab = m.vocab;
  s.swiglu = m.ffn == spec::FfnKind::SWIGLU;
  s.layernorm = m.norm == spec::NormKind::LAYERNORM;
  s.bias = m.bias;
  s.tied = m.tied_embeddings;
  s.learned_positions = m.position == spec::PositionKind::LEARNED;
  s.rope = m.position == spec::PositionKind::ROPE;
  if (s.learned_positions) {
    if (m.max_position <= 0)
      throw core::InputError(who + ": position: learned needs max_position > 0, found " +
                             std::to_string(m.max_position));
    s.max_position = m.max_position;
  }
  s.fused_qkv = s.bias && s.kv == s.a;
  s.dropout = m.dropout ? *m.dropout > 0 : s.bias;
  s.megatron_loss = m.loss == spec::LossKind::MEGATRON;
  if (tensor_parallel < 1)
    throw core::InputError(who + ": tensor parallelism must be a positive integer, found " +
                           std::to_string(tensor_parallel));
  s.t = tensor_parallel;
  for (const auto& [what, v] : {std::pair{"heads", s.a}, std::pair{"kv_heads", s.kv}, std::pair{"ffn_hidden", s.f}})
    if (v % s.t != 0)
      throw core::InputError(who + ": " + what + " (" + std::to_string(v) +
                             ") must be a multiple of the tensor-parallel " + "degree " + std::to_string(s.t));
  s.a_r = s.a / s.t;
  s.h_r = s.a_r * s.d;
  s.kvd_r = s.kv / s.t * s.d;
  s.f_r = s.f / s.t;
  s.vocab_r = (s.vocab + s.t - 1) / s.t;
  return s;
}

// ---- parameters (docs/workload.md §2) -------------------------------------------------------------

void add_param(std::vector<ParamTensor>& ps, const std::string& module, const char* what, std::int64_t numel)
{
  ps.push_back(ParamTensor{module + "." + what, numel, module});
}

void add_norm(std::vector<ParamTensor>& ps, const Shape& s, const std::string& module)
{
  add_param(ps, module, "weight", s.h);
  if (s.layernorm)
    add_param(ps, module, "bias", s.h);
}

/// A linear layer's shard: weight in x out and, with biases, `bias` elements (out for a column-parallel or whole layer;
/// a row-parallel layer's bias is whole on every rank, added after the all-reduce: give the full width).
void add_linear(std::vector<ParamTensor>& ps, const Shape& s, const std::string& module, std::int64_t in,
                std::int64_t out, std::int64_t bias = -1)
{
  add_param(ps, module, "weight", in * out);
  if (s.bias)
    add_param(ps, module, "bias", bias < 0 ? out : bias);
}

std::vector<ParamTensor> embed_params(const Shape& s)
{
  std::vector<ParamTensor> ps;
  add_param(ps, "embed.tokens", "weight", s.vocab_r * s.h); // vocab-parallel
  if (s.learned_positions)
    add_param(ps, "embed.positions", "weight", s.max_position * s.h);
  return ps;
}

std::vector<ParamTensor> block_params(const Shape& s)
{
  std::vector<ParamTensor> ps;
  // Column-parallel: qkv, q/k/v, gate, up (outputs split); row-parallel: o_proj, down (inputs split, whole bias).
  add_norm(ps, s, "attn_norm");
  if (s.fused_qkv) {
    add_linear(ps, s, "attn.qkv", s.h, s.h_r + 2 * s.kvd_r);
  } else {
    add_linear(ps, s, "attn.q_proj", s.h, s.h_r);
    add_linear(ps, s, "attn.k_proj", s.h, s.kvd_r);
    add_linear(ps, s, "attn.v_proj", s.h, s.kvd_r);
  }
  add_linear(ps, s, "attn.o_proj", s.h_r, s.h, s.h);
  add_norm(ps, s, "mlp_norm");
  if (s.swiglu)
    add_linear(ps, s, "mlp.gate_proj", s.h, s.f_r);
  add_linear(ps, s, "mlp.up_proj", s.h, s.f_r);
  add_linear(ps, s, "mlp.down_proj", s.f_r, s.h, s.h);
  return ps;
}

std::vector<ParamTensor> final_norm_params(const Shape& s)
{
  std::vector<ParamTensor> ps;
  add_norm(ps, s, "final_norm");
  return ps;
}

std::vector<ParamTensor> lm_head_params(const Shape& s)
{
  std::vector<ParamTensor> ps;
  if (!s.tied) // tied: the LM head multiplies by embed.tokens.weight, counted once there
    add_param(ps, "lm_head", "weight", s.vocab_r * s.h); // vocab-parallel (column-parallel, parallel_output)
  return ps;
}

std::int64_t sum_numel(const std::vector<ParamTensor>& ps)
{
  std::int64_t total = 0;
  for (const ParamTensor& p : ps)
    total += p.numel;
  return total;
}

// ---- operations (docs/workload.md §3-§5) ----------------------------------------------------------

/// Builds one layer's graph for a micro-batch of b sequences of s tokens.
struct GraphBuilder {
  GraphBuilder(const Shape& s, const WorkloadOptions& o)
      : shape(s), batch(o.micro_batch), seq(o.seq_len), tokens(spec::tokens_per_micro_batch(o.micro_batch, o.seq_len)),
        ba(o.activation_dtype_bytes), fp32_stream(o.autocast_casts),
        hf_rmsnorm(o.model_code == spec::ModelCode::HF && !s.layernorm)
  {
  }

  OpGraph graph;

  int act(const char* name, std::int64_t numel) { return graph.add_tensor(name, numel, ba); }

  /// A tensor of the residual stream: fp32 under autocast over fp32 parameters (the embedding's output and every
  /// residual add are fp32 there; docs/workload.md §1.4), else the activation dtype.
  int stream(const char* name, std::int64_t numel) { return graph.add_tensor(name, numel, fp32_stream ? 4 : ba); }

  /// A linear layer y = x·Wᵀ (+ bias): m = tokens, n = out, k = in; 2mnk FLOPs forward, twice that
  /// backward (dX and dW). Saves its input. `outs` are the output tensors (views of one result).
  void linear(const char* name, int in, std::vector<int> outs, std::int64_t n, std::int64_t k)
  {
    OpDef o;
    o.op = gemm_op(name, OpKind::GEMM, tokens, n, k);
    o.rule = BytesRule::GEMM;
    o.inputs = {in};
    o.outputs = std::move(outs);
    o.saved = {in};
    o.weight_read_fwd = (n * k + (shape.bias ? n : 0)) * ba;
    graph.add_op(std::move(o));
  }

  int linear(const char* name, const char* out_name, int in, std::int64_t n, std::int64_t k)
  {
    const int y = act(out_name, tokens * n);
    linear(name, in, {y}, n, k);
    return y;
  }

  /// A norm: saves its input and fp32 statistics (mean and rstd for layernorm, rstd for RMSNorm), one per token,
  /// as a fused kernel (Apex/TE/Megatron) does. Hugging Face's eager LlamaRMSNorm saves more (docs/workload.md
  /// §1.4): `pow` saves the input as fp32 (a copy unless it is fp32 already) and the weight multiply saves the
  /// normalised tensor (fp32 under autocast, else 16-bit). Under autocast over fp32 parameters the output is fp32
  /// and each of the `readers` linears casts it itself and saves its own 16-bit copy (autocast caches weight casts
  /// only): `inputs` receives what each reader reads and saves (the casts, outputs of this op; else the output).
  int norm(const char* name, int in, int readers = 1, std::vector<int>* inputs = nullptr)
  {
    const int y = stream(name, tokens * shape.h); // fp32 under autocast over fp32 parameters
    const int stats = graph.add_tensor(std::string(name) + ".stats", tokens * (shape.layernorm ? 2 : 1), 4, false);
    OpDef o;
    o.op = elementwise_op(name);
    o.inputs = {in};
    o.outputs = {y, stats};
    o.saved = {in, stats};
    if (hf_rmsnorm) {
      int x32 = in;
      if (graph.tensor(in).elem_bytes != 4) {
        x32 = graph.add_tensor(std::string(name) + ".fp32", tokens * shape.h, 4, false);
        o.outputs.push_back(x32);
      }
      const int normalised =
          graph.add_tensor(std::string(name) + ".normalised", tokens * shape.h, fp32_stream ? 4 : ba, false);
      o.outputs.push_back(normalised);
      o.saved = {x32, normalised, stats};
    }
    if (inputs) {
      inputs->assign(static_cast<std::size_t>(readers), y);
      if (fp32_stream)
        for (int i = 0; i < readers; ++i) {
          const int cast =
              graph.add_tensor(std::string(name) + ".cast" + std::to_string(i), tokens * shape.h, ba, false);
          o.outputs.push_back(cast);
          (*inputs)[static_cast<std::size_t>(i)] = cast;
        }
    }
    const std::int64_t weights = (shape.layernorm ? 2 : 1) * shape.h * ba;
    o.weight_read_fwd = weights;
    o.weight_read_bwd = weights;
    o.weight_grad_write = weights;
    graph.add_op(std::move(o));
    return y;
  }

  /// An elementwise op; `saved` lists what its backward needs.
  void elementwise(const char* name, std::vector<int> ins, std::vector<int> outs, std::vector<int> saved,
                   bool core = false)
  {
    OpDef o;
    o.op = elementwise_op(name);
    o.op.selective_recompute = core;
    o.inputs = std::move(ins);
    o.outputs = std::move(outs);
    o.saved = std::move(saved);
    graph.add_op(std::move(o));
  }

  /// Dropout: saves a 1-byte mask per element (PyTorch's native_dropout returns a bool mask).
  int dropout(const char* name, int in, bool core = false)
  {
    const std::int64_t numel = graph.tensor(in).numel;
    const int y = graph.add_tensor(name, numel, graph.tensor(in).elem_bytes); // the input's dtype
    const int mask = graph.add_tensor(std::string(name) + ".mask", numel, 1, false);
    elementwise(name, {in}, {y, mask}, {mask}, core);
    return y;
  }

  /// A residual add: its output is on the residual stream (stream()).
  int add(const char* name, int x, int y)
  {
    const int out = stream(name, graph.tensor(x).numel);
    elementwise(name, {x, y}, {out}, {});
    return out;
  }

  Op gemm_op(const char* name, OpKind kind, std::int64_t m, std::int64_t n, std::int64_t k) const
  {
    Op op;
    op.name = name;
    op.kind = kind;
    op.m = m;
    op.n = n;
    op.k = k;
    op.fwd_flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    op.bwd_flops = 2.0 * op.fwd_flops;
    return op;
  }

  static Op elementwise_op(const char* name)
  {
    Op op;
    op.name = name;
    op.kind = OpKind::ELEMENTWISE; // memory-bound: charged by bytes, no FLOPs (docs/workload.md §3)
    return op;
  }

  Shape shape;              ///< the model
  std::int64_t batch = 0;   ///< b, sequences per micro-batch
  std::int64_t seq = 0;     ///< s, tokens per sequence
  std::int64_t tokens = 0;  ///< b * s
  int ba = 2;               ///< activation dtype, bytes per element
  bool fp32_stream = false; ///< autocast over fp32 parameters: an fp32 residual stream, per-linear input casts
  bool hf_rmsnorm = false;  ///< Hugging Face's eager LlamaRMSNorm (its saved tensors, norm())
};

/// One transformer block. Inference with generation (docs/inference.md): the new tokens' k and v are written into
/// the KV cache (a resident tensor: the schedule allocates the cache); `past` > 0 is a decode pass, whose attention
/// reads the cache of past + seq positions instead of this pass's k and v.
OpGraph block_graph(const Shape& s, const WorkloadOptions& o, std::int64_t past = 0)
{
  GraphBuilder g(s, o);
  const std::int64_t T = g.tokens;
  const std::int64_t b = g.batch;
  const std::int64_t sq = g.seq;
  const std::int64_t kv_len = past + sq; // positions each new token attends to
  const bool train_dropout = s.dropout && !o.inference;
  const bool kv_cache = o.inference && o.generate_tokens >= 1;

  const int x = g.stream("x", T * s.h);
  std::vector<int> y1s;
  g.norm("attn_norm", x, s.fused_qkv ? 1 : 3, &y1s);
  const int y1 = y1s[0];

  int q = -1, k = -1, v = -1;
  // From here to the attention output projection every tensor is this rank's heads (h_r, kvd_r;
  // docs/tensor-parallel.md).
  if (s.fused_qkv) {
    q = g.act("q", T * s.h_r);
    k = g.act("k", T * s.kvd_r);
    v = g.act("v", T * s.kvd_r);
    g.linear("attn.qkv", y1, {q, k, v}, s.h_r + 2 * s.kvd_r, s.h);
  } else {
    q = g.linear("attn.q_proj", "q", y1s[0], s.h_r, s.h);
    k = g.linear("attn.k_proj", "k", y1s[1], s.kvd_r, s.h);
    v = g.linear("attn.v_proj", "v", y1s[2], s.kvd_r, s.h);
  }
  if (s.rope) {
    // q·cos + rotate_half(q)·sin: autograd saves only cos/sin (s x d, negligible), not q or k.
    const int qr = g.act("q.rot", T * s.h_r);
    const int kr = g.act("k.rot", T * s.kvd_r);
    g.elementwise("attn.rotary", {q, k}, {qr, kr}, {});
    q = qr;
    k = kr;
  }
  if (kv_cache) {
    // The new positions' k and v are copied into the (static) cache: read k, v, write their cache slots.
    const int kc = g.graph.add_resident_tensor("kv_cache.k.new", T * s.kvd_r, g.ba);
    const int vc = g.graph.add_resident_tensor("kv_cache.v.new", T * s.kvd_r, g.ba);
    g.elementwise("attn.kv_cache_write", {k, v}, {kc, vc}, {});
  }
  if (past > 0) {
    // Decode: the attention reads the whole cache, past + seq positions of k and v.
    k = g.graph.add_resident_tensor("kv_cache.k", b * kv_len * s.kvd_r, g.ba);
    v = g.graph.add_resident_tensor("kv_cache.v", b * kv_len * s.kvd_r, g.ba);
  }

  const std::int64_t bas = b * s.a_r * sq; // rows of the batched attention GEMMs (this rank's heads)
  int ctx = -1;
  if (o.flash_attention) {
    // FlashAttention-2 (flash_attn_interface.py: ctx.save_for_backward(q, k, v, out, softmax_lse, ...)):
    // one kernel; the s x s scores never reach HBM. Dropout, if any, is regenerated from the RNG state.
    ctx = g.act("attn.out", T * s.h_r);
    const int lse = g.graph.add_tensor("attn.lse", bas, 4, false);
    OpDef op;
    op.op = g.gemm_op("attn.flash", OpKind::ATTENTION, bas, kv_len, s.d);
    op.op.fwd_flops *= 2.0; // QKᵀ and AV: 2·2·b·s·s·h
    op.op.bwd_flops *= 2.0;
    op.op.selective_recompute = true;
    op.rule = BytesRule::STREAM;
    op.inputs = {q, k, v};
    op.outputs = {ctx, lse};
    op.saved = {q, k, v, ctx, lse};
    g.graph.add_op(std::move(op));
  } else {
    int ke = k, ve = v;
    if (s.kv < s.a) {
      // repeat_kv (HF eager) / repeat_interleave (Megatron): k and v expanded to every query head.
      ke = g.act("k.expanded", b * kv_len * s.h_r);
      ve = g.act("v.expanded", b * kv_len * s.h_r);
      g.elementwise("attn.repeat_kv", {k, v}, {ke, ve}, {}, true);
    }
    const int scores = g.act("attn.scores", bas * kv_len);
    OpDef qk;
    qk.op = g.gemm_op("attn.scores", OpKind::ATTENTION, bas, kv_len, s.d);
    qk.op.selective_recompute = true;
    qk.rule = BytesRule::GEMM;
    qk.inputs = {q, ke};
    qk.outputs = {scores};
    qk.saved = {q, ke};
    g.graph.add_op(std::move(qk));
    // Fused scale-mask-softmax (Megatron FusedScaleMaskSoftmax): saves its output only.
    const int probs = g.act("attn.probs", bas * kv_len);
    g.elementwise("attn.softmax", {scores}, {probs}, {probs}, true);
    const int p = train_dropout ? g.dropout("attn.dropout", probs, true) : probs;
    ctx = g.act("attn.out", T * s.h_r);
    OpDef av;
    av.op = g.gemm_op("attn.context", OpKind::ATTENTION, bas, s.d, kv_len);
    av.op.selective_recompute = true;
    av.rule = BytesRule::GEMM;
    av.inputs = {p, ve};
    av.outputs = {ctx};
    av.saved = {p, ve};
    g.graph.add_op(std::move(av));
  }

  // Row-parallel: this rank's partial sum of the whole width; the all-reduce (schedule) makes it whole.
  int attn = g.linear("attn.o_proj", "attn.proj", ctx, s.h, s.h_r);
  if (train_dropout)
    attn = g.dropout("attn.resid_dropout", attn);
  const int x2 = g.add("attn.residual", x, attn);

  std::vector<int> y2s;
  g.norm("mlp_norm", x2, s.swiglu ? 2 : 1, &y2s);
  const int y2 = y2s[0];
  int mlp_in = -1;
  if (s.swiglu) {
    const int gate = g.linear("mlp.gate_proj", "mlp.gate", y2s[0], s.f_r, s.h);
    const int up = g.linear("mlp.up_proj", "mlp.up", y2s[1], s.f_r, s.h);
    const int act = g.act("mlp.act", T * s.f_r);
    g.elementwise("mlp.act", {gate}, {act}, {gate}); // SiLU saves its input
    mlp_in = g.act("mlp.mul", T * s.f_r);
    g.elementwise("mlp.mul", {act, up}, {mlp_in}, {act, up}); // a product saves both factors
  } else {
    const int up = g.linear("mlp.up_proj", "mlp.up", y2, s.f_r, s.h);
    mlp_in = g.act("mlp.act", T * s.f_r);
    g.elementwise("mlp.act", {up}, {mlp_in}, {up}); // GELU saves its input
  }
  int mlp = g.linear("mlp.down_proj", "mlp.down", mlp_in, s.h, s.f_r); // row-parallel
  if (train_dropout)
    mlp = g.dropout("mlp.resid_dropout", mlp);
  const int x3 = g.add("mlp.residual", x2, mlp);
  g.graph.set_boundary(x, x3);
  return std::move(g.graph);
}

OpGraph embed_graph(const Shape& s, const WorkloadOptions& o)
{
  GraphBuilder g(s, o);
  const std::int64_t T = g.tokens;
  const int ba = g.ba;
  const int ids = g.graph.add_tensor("token_ids", T, 8, false);
  const int tok = g.stream("embed.tokens", T * s.h);
  // nn.Embedding: gathers T rows; its backward (embedding_dense_backward) writes a dense vocab x h gradient.
  OpDef lookup;
  lookup.op = GraphBuilder::elementwise_op("embed.tokens");
  lookup.inputs = {ids};
  lookup.outputs = {tok};
  lookup.saved = {ids};
  lookup.weight_read_fwd = T * s.h * ba;
  lookup.weight_grad_write = s.vocab_r * s.h * ba;
  g.graph.add_op(std::move(lookup));
  int out = tok;
  if (s.learned_positions) {
    const int pos_ids = g.graph.add_tensor("position_ids", g.seq, 8, false);
    const int pos = g.act("embed.positions", g.seq * s.h); // [1, s, h], broadcast over the batch
    OpDef plookup;
    plookup.op = GraphBuilder::elementwise_op("embed.positions");
    plookup.inputs = {pos_ids};
    plookup.outputs = {pos};
    plookup.saved = {pos_ids};
    plookup.weight_read_fwd = g.seq * s.h * ba;
    plookup.weight_grad_write = s.max_position * s.h * ba;
    g.graph.add_op(std::move(plookup));
    out = g.add("embed.add", tok, pos);
  }
  if (s.dropout && !o.inference)
    out = g.dropout("embed.dropout", out);
  g.graph.set_boundary(ids, out);
  return std::move(g.graph);
}

OpGraph final_norm_graph(const Shape& s, const WorkloadOptions& o)
{
  GraphBuilder g(s, o);
  const int x = g.stream("x", g.tokens * s.h);
  const int y = g.norm("final_norm", x);
  g.graph.set_boundary(x, y);
  return std::move(g.graph);
}

OpGraph lm_head_graph(const Shape& s, const WorkloadOptions& o)
{
  GraphBuilder g(s, o);
  const std::int64_t T = g.tokens;
  const int y = g.act("x", T * s.h);
  const int logits = g.act("logits", T * s.vocab_r); // vocab-parallel: this rank's columns
  OpDef head;
  head.op = g.gemm_op("lm_head", OpKind::GEMM, T, s.vocab_r, s.h);
  head.rule = BytesRule::GEMM;
  head.inputs = {y};
  head.outputs = {logits};
  head.saved = {y};
  head.weight_read_fwd = s.vocab_r * s.h * g.ba; // no bias on the LM head (GPT-2, Megatron, Llama)
  g.graph.add_op(std::move(head));
  if (o.inference) {
    g.graph.set_boundary(y, logits);
    return std::move(g.graph);
  }
  if (s.megatron_loss) {
    // Megatron-LM (docs/workload.md §4.4): vocab_parallel_cross_entropy(output.float(), labels); the 16-bit
    // logits die with the upcast (nothing saves them), the fp32 copy becomes the softmax in place and is what
    // backward keeps.
    int lf = logits;
    if (g.ba < 4) {
      lf = g.graph.add_tensor("logits.fp32", T * s.vocab_r, 4);
      g.elementwise("loss.upcast", {logits}, {lf}, {});
    }
    const int labels = g.graph.add_tensor("labels", T, 8, false);
    const int loss = g.graph.add_tensor("loss", 1, 4);
    g.elementwise("loss.vocab_parallel_cross_entropy", {lf, labels}, {loss}, {lf, labels});
    g.graph.set_boundary(y, loss);
    return std::move(g.graph);
  }
  // Loss (docs/workload.md §4.4): the logits are returned to the caller (HF CausalLMOutput.logits) and
  // stay alive until backward, except where the training loop drops them first (torchtitan's train step: `del pred`
  // before `loss.backward()`).
  if (o.model_code != spec::ModelCode::TORCHTITAN)
    g.graph.hold(logits);
  const int labels = g.graph.add_tensor("labels", T, 8, false);
  const int loss = g.graph.add_tensor("loss", 1, 4);
  if (o.compiled && g.ba < 4) {
    // Compiled (Inductor): the upcast, log_softmax and nll are one kernel each way, and the partitioner saves the
    // 16-bit logits and each row's fp32 logsumexp (2 B + 4/V per element) instead of the fp32 log-probabilities.
    const int lse = g.graph.add_tensor("loss.logsumexp", T, 4, false);
    g.elementwise("loss.cross_entropy", {logits, labels}, {loss, lse}, {logits, lse, labels});
    g.graph.set_boundary(y, loss);
    return std::move(g.graph);
  }
  // Eager: cross_entropy upcasts to fp32 and log_softmax saves its fp32 output.
  int lf = logits;
  if (g.ba < 4) {
    lf = g.graph.add_tensor("logits.fp32", T * s.vocab_r, 4);
    g.elementwise("loss.upcast", {logits}, {lf}, {});
  }
  const int lsm = g.graph.add_tensor("loss.log_softmax", T * s.vocab_r, 4);
  g.elementwise("loss.log_softmax", {lf}, {lsm}, {lsm});
  g.elementwise("loss.nll", {lsm, labels}, {loss}, {labels});
  g.graph.set_boundary(y, loss);
  return std::move(g.graph);
}

GraphMode mode_for(const WorkloadOptions& o, bool checkpointed)
{
  if (o.inference)
    return GraphMode::INFERENCE;
  if (!checkpointed)
    return GraphMode::TRAIN;
  switch (o.checkpointing) {
  case spec::Checkpointing::FULL:
    return GraphMode::TRAIN_FULL;
  case spec::Checkpointing::SELECTIVE:
    return GraphMode::TRAIN_SELECTIVE;
  case spec::Checkpointing::PER_OP:
    return GraphMode::TRAIN_PER_OP;
  case spec::Checkpointing::NONE:
    break;
  }
  return GraphMode::TRAIN;
}

/// How a block's element-wise ops are launched (docs/workload.md §5.2): the model code and the block's tensor sizes.
struct KernelPricing {
  detail::KernelContext ctx;
  detail::BlockDims dims;
};

/// The pricing of a block (or the final norm) for `o`; none without a model code (the graph's fused pricing). `past`
/// as block_graph's.
std::optional<KernelPricing> kernel_pricing(const Shape& s, const WorkloadOptions& o, std::int64_t past = 0)
{
  if (!o.model_code)
    return std::nullopt;
  KernelPricing p;
  p.ctx.code = *o.model_code;
  p.ctx.autocast_casts = o.autocast_casts;
  p.ctx.compiled = o.compiled;
  p.ctx.fused_attention = o.flash_attention;
  p.ctx.inference = o.inference;
  p.ctx.activation_bytes = o.activation_dtype_bytes;
  const auto T = static_cast<double>(spec::tokens_per_micro_batch(o.micro_batch, o.seq_len));
  detail::BlockDims& d = p.dims;
  d.H = T * static_cast<double>(s.h);
  d.Q = T * static_cast<double>(s.h_r);
  d.K = T * static_cast<double>(s.kvd_r);
  d.F = T * static_cast<double>(s.f_r);
  d.A = static_cast<double>(std::int64_t{o.micro_batch} * s.a_r * o.seq_len) * static_cast<double>(past + o.seq_len);
  d.q_inputs = s.fused_qkv ? 1 : 3;
  d.mlp_inputs = s.swiglu ? 2 : 1;
  d.layernorm = s.layernorm;
  d.swiglu = s.swiglu;
  d.gqa = s.kv < s.a;
  d.bias = s.bias;
  d.seq = o.seq_len;
  d.attn_batches = std::int64_t{o.micro_batch} * s.a_r;
  return p;
}

Layer make_layer(std::string name, LayerKind kind, std::vector<ParamTensor> params, const OpGraph& graph,
                 GraphMode mode, const std::optional<KernelPricing>& pricing = std::nullopt)
{
  GraphResult r = graph.analyse(mode);
  Layer l;
  l.name = std::move(name);
  l.kind = kind;
  l.params = std::move(params);
  l.ops = std::move(r.ops);
  if (pricing)
    detail::price_block_kernels(l.ops, pricing->ctx, pricing->dims);
  for (const Op& op : l.ops) {
    l.fwd_flops += op.fwd_flops;
    l.bwd_flops += op.bwd_flops;
    if (op.recomputed)
      l.recompute_flops += op.fwd_flops;
  }
  l.activation_bytes_kept = r.kept_bytes;
  l.activation_bytes_backward_working = r.backward_working_bytes;
  l.activation_bytes_forward_working = r.forward_working_bytes;
  l.kept_tensors = std::move(r.kept_tensors);
  l.forward_trace_bytes = std::move(r.forward_trace_bytes);
  l.forward_trace = std::move(r.forward_trace);
  l.forward_working_tensors = std::move(r.forward_working_tensors);
  l.backward_working_tensors = std::move(r.backward_working_tensors);
  return l;
}

void validate(const WorkloadOptions& o, const spec::ModelSpec& m, const Shape& s)
{
  const std::string who = model_label(m);
  if (o.micro_batch <= 0)
    throw core::InputError(who + ": micro-batch must be a positive integer, found " + std::to_string(o.micro_batch));
  if (o.seq_len <= 0)
    throw core::InputError(who + ": sequence length must be a positive integer, found " + std::to_string(o.seq_len));
  if (o.activation_dtype_bytes != 2 && o.activation_dtype_bytes != 4)
    throw core::InputError(who + ": activation dtype must be 2 or 4 bytes, found " +
                           std::to_string(o.activation_dtype_bytes));
  if (s.learned_positions && o.seq_len > s.max_position)
    throw core::InputError(who + ": sequence length " + std::to_string(o.seq_len) +
                           " exceeds the learned position table (max_position " + std::to_string(s.max_position) + ")");
  if (o.generate_tokens < 0)
    throw core::InputError(who + ": tokens to generate must be zero or more, found " +
                           std::to_string(o.generate_tokens));
  if (o.inference && s.learned_positions && std::int64_t{o.seq_len} + o.generate_tokens > s.max_position)
    throw core::InputError(
        who + ": prompt " + std::to_string(o.seq_len) + " + generated " + std::to_string(o.generate_tokens) +
        " tokens exceed the learned position table (max_position " + std::to_string(s.max_position) + ")");
}

/// The decode passes' layers (docs/inference.md), appended after the model's: one embedding, final norm and LM head
/// for one new token per sequence (the same in every pass) and one block per decode pass t = 1 .. g - 1, whose
/// attention spans the prompt and t cached positions. They own no parameters: the schedule fetches the model
/// layer's.
void add_decode_layers(Workload& w, const Shape& s, const WorkloadOptions& o)
{
  WorkloadOptions d = o;
  d.seq_len = 1; // one new token per sequence
  const GraphMode mode = GraphMode::INFERENCE;
  w.decode_passes = o.generate_tokens - 1;
  w.decode_embed = static_cast<int>(w.layers.size());
  w.layers.push_back(make_layer("decode.embed", LayerKind::EMBEDDING, {}, embed_graph(s, d), mode));
  w.decode_final_norm = static_cast<int>(w.layers.size());
  w.layers.push_back(
      make_layer("decode.final_norm", LayerKind::FINAL_NORM, {}, final_norm_graph(s, d), mode, kernel_pricing(s, d)));
  w.decode_lm_head = static_cast<int>(w.layers.size());
  w.layers.push_back(make_layer("decode.lm_head", LayerKind::LM_HEAD, {}, lm_head_graph(s, d), mode));
  const double fixed = w.layers[static_cast<std::size_t>(w.decode_embed)].fwd_flops +
                       w.layers[static_cast<std::size_t>(w.decode_final_norm)].fwd_flops +
                       w.layers[static_cast<std::size_t>(w.decode_lm_head)].fwd_flops;
  w.decode_block.reserve(static_cast<std::size_t>(w.decode_passes));
  for (int t = 1; t <= w.decode_passes; ++t) {
    // Pass t feeds the token at position prompt + t - 1: prompt + t - 1 positions are already cached.
    const std::int64_t past = std::int64_t{o.seq_len} + t - 1;
    w.decode_block.push_back(static_cast<int>(w.layers.size()));
    Layer& l = w.layers.emplace_back(make_layer("decode." + std::to_string(t) + ".block", LayerKind::BLOCK, {},
                                                block_graph(s, d, past), mode, kernel_pricing(s, d, past)));
    w.decode_flops += fixed + static_cast<double>(s.layers) * l.fwd_flops;
  }
}

} // namespace

std::int64_t count_params(const spec::ModelSpec& m)
{
  const Shape s = resolve(m);
  return sum_numel(embed_params(s)) + s.layers * sum_numel(block_params(s)) + sum_numel(final_norm_params(s)) +
         sum_numel(lm_head_params(s));
}

Workload build_workload(const spec::ModelSpec& m, const WorkloadOptions& o)
{
  const Shape s = resolve(m, o.tensor_parallel);
  validate(o, m, s);

  Workload w;
  w.layers.reserve(static_cast<std::size_t>(s.layers) + 3);
  w.layers.push_back(make_layer("embed", LayerKind::EMBEDDING, embed_params(s), embed_graph(s, o), mode_for(o, false)));
  // Blocks are identical: build and analyse one, copy it (docs/workload.md §6).
  const Layer block = make_layer("block.0", LayerKind::BLOCK, block_params(s), block_graph(s, o), mode_for(o, true),
                                 kernel_pricing(s, o));
  for (int i = 0; i < s.layers; ++i) {
    Layer& l = w.layers.emplace_back(block);
    l.name = "block." + std::to_string(i);
    l.block = i;
  }
  w.layers.push_back(make_layer("final_norm", LayerKind::FINAL_NORM, final_norm_params(s), final_norm_graph(s, o),
                                mode_for(o, false), kernel_pricing(s, o)));
  w.layers.push_back(
      make_layer("lm_head", LayerKind::LM_HEAD, lm_head_params(s), lm_head_graph(s, o), mode_for(o, false)));

  std::map<std::string, std::int64_t> module_numel;
  w.params = count_params(m);
  for (const Layer& l : w.layers) {
    w.rank_params += l.param_count();
    w.model_flops += l.fwd_flops + l.bwd_flops;
    w.hardware_flops += l.fwd_flops + l.bwd_flops + l.recompute_flops;
    if (l.kind == LayerKind::BLOCK && l.block > 0)
      continue; // the same modules as block 0
    module_numel.clear();
    for (const ParamTensor& p : l.params) {
      module_numel[p.module] += p.numel;
      w.largest_param_numel = std::max(w.largest_param_numel, p.numel);
    }
    for (const auto& [module, numel] : module_numel)
      w.largest_layer_params = std::max(w.largest_layer_params, numel);
  }
  w.model_layers = static_cast<int>(w.layers.size());
  if (o.inference && o.generate_tokens >= 1) {
    // A static cache of prompt + generated positions, k and v, every block (docs/inference.md).
    w.kv_cache_bytes = 2 * s.layers * s.kvd_r * (std::int64_t{o.seq_len} + o.generate_tokens) * o.micro_batch *
                       o.activation_dtype_bytes;
    if (o.generate_tokens >= 2)
      add_decode_layers(w, s, o);
  }
  return w;
}

WorkloadOptions workload_options(const spec::Scenario& s)
{
  WorkloadOptions o;
  o.checkpointing = s.training.activation_checkpointing;
  // The attention the workload builds is that of the stack the kernels are priced for (Scenario::priced_software),
  // so the `stack` mechanism means one thing for run, memory and validate.
  o.flash_attention = spec::is_fused(s.priced_software().attention);
  o.activation_dtype_bytes = s.training.precision == spec::Precision::FP32 ? 4 : 2;
  o.tensor_parallel = s.tp();
  if (s.mechanisms.model_code) {
    o.model_code = s.model_code();
    o.compiled = s.priced_software().compile;
    // Autocast over fp32 parameters: DDP, and FSDP unless its param_dtype is 16-bit (DeepSpeed refuses amp_*).
    const bool amp =
        s.training.precision == spec::Precision::AMP_BF16 || s.training.precision == spec::Precision::AMP_FP16;
    const bool fp32_params =
        s.framework == spec::Framework::DDP ||
        (s.framework == spec::Framework::FSDP && s.fsdp.param_dtype.value_or(spec::Dtype::FP32) == spec::Dtype::FP32);
    o.autocast_casts = amp && fp32_params;
  }
  if (s.training.mode == spec::Mode::INFERENCE) {
    o.inference = true;
    o.micro_batch = s.inference.batch;
    o.seq_len = s.inference.prompt_tokens;
    o.generate_tokens = s.inference.generate_tokens;
    o.checkpointing = spec::Checkpointing::NONE; // nothing is kept, nothing recomputed
  } else {
    o.micro_batch = s.training.micro_batch;
    o.seq_len = s.training.seq_len;
  }
  return o;
}

} // namespace zerosim::workload
