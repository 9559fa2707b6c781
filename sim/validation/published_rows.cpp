#include "validation/published_rows.hpp"
#include "spec/names.hpp"

#include "config/scenario_loader.hpp"
#include "core/error.hpp"
#include "validation/csv.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#ifndef ZEROSIM_DATA_DIR
#define ZEROSIM_DATA_DIR "."
#endif

namespace zerosim::validation {

namespace {

constexpr double GIB = 1073741824.0;

std::string lower(std::string s)
{
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool contains(const std::string& haystack, const std::string& needle)
{
  return lower(haystack).find(lower(needle)) != std::string::npos;
}

std::string trim(const std::string& s)
{
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return "";
  auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

const std::string& field(const PublishedRow& row, const std::string& key)
{
  static const std::string empty;
  auto it = row.find(key);
  return it == row.end() ? empty : it->second;
}

/// The whole field as a number ("13.1", "1e9"), or nullopt when anything else is written there.
std::optional<double> plain_number(const std::string& text)
{
  std::string t = trim(text);
  if (t.empty())
    return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size())
    return std::nullopt;
  return v;
}

std::optional<int> plain_int(const std::string& text)
{
  auto v = plain_number(text);
  if (!v || *v != std::floor(*v))
    return std::nullopt;
  return static_cast<int>(*v);
}

/// A shape the source paper publishes for a model size named only by its size in a max-model row.
struct PaperShape {
  const char* source_id;
  const char* size; ///< as the max_model_fit column writes it, e.g. "13B"
  int layers;
  int hidden;
  int heads;
  int micro_batch;     ///< 0: take the row's
  int tensor_parallel; ///< the paper's model-parallel degree for this size (Megatron tensor parallelism); 1: none
  const char* citation;
};

// ZeRO-Infinity (S04) Table 4, as quoted in the notes of published.csv rows 101-107; ZeRO-Offload (S03)
// Table 3, as in published.csv rows 59 and 70-73 (micro-batch: the largest that fits; MP: "MP setting in
// ZeRO-Offload", Table 3).
constexpr PaperShape PAPER_SHAPES[] = {
    {"S04", "1.4B", 40, 1536, 16, 0, 1,
     "ZeRO-Infinity Table 4 (published.csv row 101 notes): 40 layers x 1536, 16 heads"},
    {"S04", "10B", 50, 4096, 16, 0, 1,
     "ZeRO-Infinity Table 4 (published.csv row 102 notes): 50 layers x 4096, 16 heads"},
    {"S04", "20B", 98, 4096, 32, 0, 1,
     "ZeRO-Infinity Table 4 (published.csv row 105 notes): 98 layers x 4096, 32 heads"},
    {"S03", "13B", 65, 4096, 32, 4, 1,
     "ZeRO-Offload Table 3 (published.csv row 59): 65 layers x 4096, micro-batch 4 on one GPU; heads not stated, "
     "32 = hidden/128 assumed (as models/zero-offload-13b.yaml)"},
    {"S03", "30B", 38, 8192, 64, 8, 2,
     "ZeRO-Offload Table 3 has no 30B row: its 20B, 40B and 60B are 25, 50 and 75 layers x 8192 with MP 2 and "
     "micro-batch 8 (published.csv rows 70-72); 30B on that ladder is 38 layers x 8192 (30.8B); heads not stated, "
     "64 = hidden/128 assumed (as models/zero-offload-60b.yaml)"},
    {"S03", "70B", 69, 9216, 72, 8, 8,
     "ZeRO-Offload Table 3 (published.csv row 73): 69 layers x 9216, micro-batch 8, MP 8; heads not stated, "
     "72 = hidden/128 assumed (as models/zero-offload-70b.yaml)"},
};

/// Attention heads of the ZeRO-Infinity configurations (S04 Table 1 does not give them) by hidden size: the heads
/// the same paper's Table 4 gives its models of that hidden size, and the authors' SC21 artifact scripts.
struct InfinityHeads {
  int hidden;
  int heads;
  const char* citation;
};
constexpr InfinityHeads INFINITY_HEADS[] = {
    {8192, 32,
     "ZeRO-Infinity Table 4, 70B = 125 x 8192 with 32 heads (published.csv row 101 notes); the authors' SC21 artifact "
     "runs 62 x 8192 with --num-attention-heads 32 (DeepSpeedExamples fork jeffra/DeepSpeedExamples, "
     "Megatron-LM-v1.1.5-ZeRO3/examples/run_sc21.sh)"},
    {25600, 256, "ZeRO-Infinity Table 4, 1000B = 128 x 25600 with 256 heads (published.csv row 101 notes)"},
};

/// The first "<number>B" model size in a max_model_fit text ("ZeRO-Offload 13B" -> "13B").
std::optional<std::string> claimed_size(const std::string& claim)
{
  static const std::regex re(R"((\d+(?:\.\d+)?)B\b)");
  std::smatch m;
  if (std::regex_search(claim, m, re))
    return m.str(0);
  return std::nullopt;
}

spec::Dtype model_dtype(spec::Precision p)
{
  switch (p) {
  case spec::Precision::FP16:
    return spec::Dtype::FP16;
  case spec::Precision::BF16:
    return spec::Dtype::BF16;
  default:
    return spec::Dtype::FP32;
  }
}

spec::OffloadDevice parse_offload(const std::string& text)
{
  std::string t = lower(text);
  if (t.rfind("cpu", 0) == 0)
    return spec::OffloadDevice::CPU;
  if (t.rfind("nvme", 0) == 0)
    return spec::OffloadDevice::NVME;
  return spec::OffloadDevice::NONE;
}

void add_note(std::string& notes, const std::string& note)
{
  if (!notes.empty())
    notes += "; ";
  notes += note;
}

// The groups rows not covered are counted in (the throughput report groups by them; the memory report lists
// the reason texts alone).
const char* const CAT_NO_FIGURE = "no time or throughput figure";
const char* const CAT_FAIRSCALE = "FairScale sharded DDP";
const char* const CAT_AC = "activation checkpointing variant not modelled";
const char* const CAT_TP_PP = "tensor / pipeline parallelism (README trap 6)";
const char* const CAT_FP8 = "FP8 / context parallelism / ZeRO++ (README trap 4)";
const char* const CAT_ENCODER = "encoder-decoder or encoder-only model (README trap 8)";
const char* const CAT_TILING = "memory-centric tiling";
const char* const CAT_TRAP5 = "BLOOM ZeRO-0/1 table: time and TFLOPs columns swapped (README trap 5)";
const char* const CAT_STAGE = "not one ZeRO stage";
const char* const CAT_C = "completeness C: inputs missing";
const char* const CAT_INPUTS = "inputs missing";
const char* const CAT_FIGURE = "figure not comparable";
const char* const CAT_NODE = "no node file for the GPU";

struct Exclusion {
  const char* category;
  std::string text;
};

/// The ZeRO stage of a zero_stage cell: "2", or a stage with a remark in parentheses ("2 (single GPU)").
std::optional<int> stage_of(const std::string& text)
{
  std::string t = trim(text);
  if (auto s = plain_int(t))
    return s;
  static const std::regex re(R"(^([0-3])\s*\(.*\)$)");
  std::smatch m;
  if (std::regex_match(t, m, re))
    return std::stoi(m.str(1));
  return std::nullopt;
}

bool is_fairscale(const PublishedRow& row)
{
  return contains(field(row, "zero_stage"), "fairscale") || contains(field(row, "framework"), "fairscale");
}

/// The PyTorch framework of a row (FSDP or DDP), or DEEPSPEED for every other row (FairScale rows too: they are
/// not covered). Rules: framework_label in published_rows.hpp.
spec::Framework framework_of(const PublishedRow& row)
{
  if (is_fairscale(row))
    return spec::Framework::DEEPSPEED;
  const std::string& fw = field(row, "framework");
  const std::string sharding = lower(trim(field(row, "fsdp_sharding")));
  // "1.2B (PyTorch DDP baseline)" (ZeRO-3 Offload blog); "PyTorch DDP", "Accelerate + PyTorch DDP".
  if (contains(field(row, "model"), "ddp baseline") || (contains(fw, "ddp") && !contains(fw, "fsdp")))
    return spec::Framework::DDP;
  // Accelerate's FSDP table rows with sharding "none (DDP)" / "none": the DDP baseline of the comparison.
  if (sharding.rfind("none", 0) == 0 && contains(fw, "fsdp"))
    return spec::Framework::DDP;
  if (!sharding.empty() || contains(field(row, "zero_stage"), "equivalent") || contains(fw, "fsdp"))
    return spec::Framework::FSDP;
  return spec::Framework::DEEPSPEED;
}

/// An FSDP strategy and how it was read from the row.
struct ShardingRead {
  spec::FsdpSharding strategy = spec::FsdpSharding::FULL_SHARD;
  std::string note; ///< set when the strategy is not written in the row's fsdp_sharding column
};

/// The model size of a fms-fsdp row ("Llama 2 7B arch" -> "7"), "" when none is named.
std::string size_in_billions(const std::string& model)
{
  static const std::regex re(R"((\d+)B\b)");
  std::smatch m;
  return std::regex_search(model, m, re) ? m.str(1) : "";
}

/// The FSDP sharding strategy of an FSDP row: the fsdp_sharding column ("FULL_SHARD", "FSDP2 fully_shard",
/// "SHARD_GRAD_OP", ...), else the zero_stage column ("3-equivalent" = FULL_SHARD, "2-equivalent" =
/// SHARD_GRAD_OP: README "Columns"); nullopt when neither says.
std::optional<ShardingRead> fsdp_sharding_of(const PublishedRow& row)
{
  ShardingRead r;
  if (contains(field(row, "framework"), "fms-fsdp")) {
    // The IBM/PyTorch blog's table does not state the strategy. fms-fsdp's launch scripts do, per model size:
    // scripts/7b.sh and scripts/13b.sh pass --sharding_strategy=hsdp (HYBRID_SHARD: shard within a node,
    // replicate across nodes), scripts/34b.sh and scripts/70b.sh --sharding_strategy=fsdp (FULL_SHARD); their
    // activation checkpointing (off for 7b, on for 34b/70b) matches the table's rows.
    const std::string size = size_in_billions(field(row, "model"));
    if (size == "7" || size == "13") {
      r.strategy = spec::FsdpSharding::HYBRID_SHARD;
      r.note = "HYBRID_SHARD: fms-fsdp scripts/" + size + "b.sh --sharding_strategy=hsdp (not in the table)";
      return r;
    }
    if (size == "34" || size == "70") {
      r.strategy = spec::FsdpSharding::FULL_SHARD;
      r.note = "FULL_SHARD: fms-fsdp scripts/" + size + "b.sh --sharding_strategy=fsdp (not in the table)";
      return r;
    }
    return std::nullopt;
  }
  const std::string sharding = lower(field(row, "fsdp_sharding"));
  const std::string stage = lower(field(row, "zero_stage"));
  auto strategy_in = [](const std::string& t) -> std::optional<spec::FsdpSharding> {
    if (t.find("full_shard") != std::string::npos || t.find("fully_shard") != std::string::npos ||
        t.find("full shard") != std::string::npos)
      return spec::FsdpSharding::FULL_SHARD;
    if (t.find("shard_grad_op") != std::string::npos)
      return spec::FsdpSharding::SHARD_GRAD_OP;
    if (t.find("hybrid_shard") != std::string::npos)
      return spec::FsdpSharding::HYBRID_SHARD;
    if (t.find("no_shard") != std::string::npos)
      return spec::FsdpSharding::NO_SHARD;
    return std::nullopt;
  };
  if (auto st = strategy_in(sharding)) {
    r.strategy = *st;
    return r;
  }
  if (auto st = strategy_in(stage)) {
    r.strategy = *st;
    r.note = "strategy from zero_stage '" + field(row, "zero_stage") + "'";
    return r;
  }
  if (stage.rfind("3-equivalent", 0) == 0 || stage.rfind("2-equivalent", 0) == 0) {
    r.strategy = stage[0] == '3' ? spec::FsdpSharding::FULL_SHARD : spec::FsdpSharding::SHARD_GRAD_OP;
    r.note = std::string(stage[0] == '3' ? "FULL_SHARD" : "SHARD_GRAD_OP") + " from zero_stage '" +
             field(row, "zero_stage") + "' (README: 3-equivalent = FULL_SHARD, 2-equivalent = SHARD_GRAD_OP)";
    return r;
  }
  return std::nullopt;
}

const char* sharding_name(spec::FsdpSharding s)
{
  switch (s) {
  case spec::FsdpSharding::FULL_SHARD:
    return "FULL_SHARD";
  case spec::FsdpSharding::SHARD_GRAD_OP:
    return "SHARD_GRAD_OP";
  case spec::FsdpSharding::HYBRID_SHARD:
    return "HYBRID_SHARD";
  case spec::FsdpSharding::NO_SHARD:
    return "NO_SHARD";
  }
  return "?";
}

/// A PyTorch row's selective activation checkpointing: torchtitan's "selective layer" (every 2nd block fully
/// recomputed, selective_ac_option "2") or "selective op" (a per-op save list: every second matmul output and
/// the attention outputs kept, the rest recomputed), fms-fsdp's selective checkpointing (a fraction of the
/// blocks). None is Megatron's selective recompute (the attention core only), the selective mode modelled.
bool torch_selective_ac(const PublishedRow& row)
{
  const std::string ac = lower(trim(field(row, "activation_checkpointing")));
  return ac.rfind("selective", 0) == 0 || ac.find("(selective") != std::string::npos;
}

/// What a PyTorch row's selective activation checkpointing is, from its framework's code.
std::string selective_ac_text(const PublishedRow& row)
{
  const std::string ac = lower(field(row, "activation_checkpointing"));
  if (contains(field(row, "framework"), "torchtitan")) {
    // torchtitan torchtitan/models/llama/parallelize_llama.py apply_ac: selective_ac_option "op" saves the
    // outputs of the ops in _save_list (mm, SDPA, ...) but recomputes every second mm and everything else; an
    // integer option N checkpoints every N-th block whole (the config's default is "2"; the llama3 tomls set
    // "op").
    if (ac.find("layer") != std::string::npos)
      return "torchtitan's per-layer selective checkpointing (every 2nd block recomputed whole, the rest kept)";
    if (ac.find("op") != std::string::npos)
      return "torchtitan's per-op selective checkpointing (matmul and attention outputs kept except every second "
             "matmul's, the other ops recomputed)";
    return "torchtitan's selective checkpointing (per-op in the llama3 tomls: every second matmul and the "
           "non-matmul ops recomputed)";
  }
  if (contains(field(row, "framework"), "fms-fsdp"))
    // fms-fsdp fms_fsdp/policies/ac_handler.py: selective_checkpointing p checkpoints a fraction p of the blocks.
    return "fms-fsdp's selective checkpointing (a fraction of the blocks recomputed whole)";
  return "selective checkpointing of " + field(row, "framework");
}

/// Reasons why a row cannot be expressed yet (empty: it can). Trap numbers refer to shared/validation/README.md.
std::vector<Exclusion> exclusions(const PublishedRow& row)
{
  std::vector<Exclusion> why;
  const std::string& model = field(row, "model");
  const std::string& stage = field(row, "zero_stage");
  const std::string& other = field(row, "other_parallel");
  const spec::Framework fw = framework_of(row);
  if (is_fairscale(row))
    why.push_back({CAT_FAIRSCALE, "FairScale sharded DDP (OSS/SDP) is not modelled"});
  auto tp = leading_number(field(row, "tp"));
  auto pp = leading_number(field(row, "pp"));
  // "<=16 (MP within node ...)", "Megatron MP (degree not given)": model parallelism of a degree not given.
  bool mp_text = contains(field(row, "tp"), "mp ") || contains(field(row, "tp"), "<=");
  // Megatron tensor parallelism under DeepSpeed is modelled (docs/tensor-parallel.md); pipeline parallelism, a
  // model-parallel degree not given, and the PyTorch frameworks' tensor parallelism (DTensor, metaseq) are not.
  if ((pp && *pp > 1) || contains(stage, "mp") || mp_text)
    why.push_back({CAT_TP_PP, "pipeline parallelism or a model-parallel degree not given (tp " +
                                  trim(field(row, "tp")) + ", pp " + trim(field(row, "pp")) +
                                  (contains(stage, "mp") ? ", " + stage : "") + ") is not modelled (README trap 6)"});
  else if (tp && *tp > 1 && fw != spec::Framework::DEEPSPEED)
    why.push_back({CAT_TP_PP, "tensor parallelism (tp " + trim(field(row, "tp")) + ") with " + field(row, "framework") +
                                  ": only Megatron-DeepSpeed's is modelled (docs/tensor-parallel.md)"});
  if (contains(field(row, "precision"), "float8") || contains(field(row, "precision"), "fp8") ||
      contains(other, "float8") || contains(other, "cp ") || contains(other, "context parallel"))
    why.push_back({CAT_FP8, "FP8 / context parallelism is not modelled (README trap 4)"});
  static const char* const NOT_DECODER[] = {"t5", "t0_", "deberta", "blenderbot", "bart", "bert"};
  for (const char* name : NOT_DECODER) {
    if (contains(model, name)) {
      why.push_back({CAT_ENCODER, "encoder-decoder or encoder-only model (" + model +
                                      "): not expressible as a decoder-only transformer (README trap 8)"});
      break;
    }
  }
  if (contains(field(row, "max_model_fit"), "tiling"))
    why.push_back({CAT_TILING,
                   "the limit measured is memory-centric tiling under GPU memory pre-fragmented into 2 GB chunks (the "
                   "largest contiguous allocation); the memory model has neither tiling nor a fragmentation limit"});
  if (fw != spec::Framework::DEEPSPEED && torch_selective_ac(row))
    why.push_back({CAT_AC, "activation checkpointing '" + trim(field(row, "activation_checkpointing")) +
                               "': " + selective_ac_text(row) +
                               ", neither full recompute nor Megatron's selective recompute of the attention core "
                               "(the two modes modelled)"});
  if (fw == spec::Framework::FSDP && why.empty() && !fsdp_sharding_of(row))
    why.push_back({CAT_INPUTS, "FSDP sharding strategy not stated (fsdp_sharding '" + field(row, "fsdp_sharding") +
                                   "', zero_stage '" + stage + "')"});
  if (why.empty() && fw == spec::Framework::DEEPSPEED) {
    auto s = stage_of(stage);
    if (!s || *s < 0 || *s > 3)
      why.push_back({CAT_STAGE, "ZeRO stage '" + stage + "' is not one DeepSpeed stage"});
  }
  return why;
}

std::string joined(const std::vector<Exclusion>& why)
{
  std::string out;
  for (const auto& w : why)
    add_note(out, w.text);
  return out;
}

spec::ModelSpec model_from_shape(const PublishedRow& row, int layers, int hidden, int heads, int seq_len,
                                 std::string& notes)
{
  spec::ModelSpec m;
  m.name = field(row, "model");
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  static const std::regex kv_re(R"((\d+)\s*KV)");
  std::smatch km;
  const std::string& heads_text = field(row, "heads");
  if (std::regex_search(heads_text, km, kv_re))
    m.kv_heads = std::stoi(km.str(1));
  auto ffn = leading_number(field(row, "ffn_hidden"));
  m.ffn_hidden = ffn ? static_cast<int>(*ffn) : 4 * hidden;
  bool llama = contains(m.name, "llama");
  bool llama3 = contains(m.name, "llama 3") || contains(m.name, "llama-3") || contains(m.name, "llama3");
  if (llama && !llama3 && !ffn) {
    // LLaMA 1/2 (Touvron et al. 2023; facebookresearch/llama model.py): hidden_dim = 2/3 of 4h, rounded up to a
    // multiple of multiple_of = 256 (11008 for h = 4096).
    m.ffn_hidden = (2 * 4 * hidden / 3 + 255) / 256 * 256;
    add_note(notes, "ffn " + std::to_string(m.ffn_hidden) + " (LLaMA rule: 8h/3 rounded up to a multiple of 256)");
  }
  if (llama) {
    // Llama family: SwiGLU, RMSNorm, RoPE, no biases, untied embeddings (Touvron et al. 2023, Meta Llama 3 card).
    m.ffn = spec::FfnKind::SWIGLU;
    m.norm = spec::NormKind::RMSNORM;
    m.position = spec::PositionKind::ROPE;
    m.bias = false;
    m.tied_embeddings = false;
    m.max_position = 0;
  } else {
    // GPT-2 layout (Radford et al. 2019; Megatron-LM GPT-2): gelu MLP, layernorm with bias, learned positions,
    // biases, input embedding tied to the output layer.
    m.ffn = spec::FfnKind::GELU;
    m.norm = spec::NormKind::LAYERNORM;
    m.position = spec::PositionKind::LEARNED;
    m.bias = true;
    m.tied_embeddings = true;
    m.max_position = std::max(1024, seq_len);
  }
  if (contains(m.name, "mingpt")) {
    // karpathy/minGPT mingpt/model.py: the output head is its own nn.Linear(n_embd, vocab_size, bias=False), not
    // tied to tok_emb; the position table has block_size rows.
    m.tied_embeddings = false;
    m.max_position = seq_len;
    // minGPT's GPT.get_default_config (and the older GPTConfig): embd_pdrop = resid_pdrop = attn_pdrop = 0.1.
    m.dropout = 0.1;
    add_note(notes, "minGPT layout: GPT-2 blocks, untied output head, position table of seq_len rows, dropout 0.1 "
                    "(minGPT defaults)");
  } else if (lower(m.name).rfind("mpt-", 0) == 0) {
    // llm-foundry's benchmark configs (scripts/train/yamls/pretrain/mpt-*.yaml via submit_benchmarks.py) set
    // only d_model, n_heads, n_layers, expansion_ratio 4, vocab 50368 and max_seq_len = the run's sequence:
    // MPTConfig's defaults then give learned positions (learned_pos_emb true, alibi false) with max_seq_len
    // rows, biases (no_bias false), LayerNorm, GELU MLP, the output tied to wte. The README tables' NumParams
    // confirm it: MPT-70b at 2048 has 64,862,437,376 = this layout's count.
    // MPTConfig's attn_pdrop, resid_pdrop and emb_pdrop default to 0 and the benchmark yamls set none: biases but
    // no dropout (left unset, the workload's rule "dropout iff biases" would keep dropout masks the runs did not).
    m.max_position = seq_len;
    m.dropout = 0.0;
    add_note(notes, "MPT benchmark layout: learned positions of seq_len rows, biases, tied output, no dropout "
                    "(llm-foundry MPTConfig defaults)");
  }
  auto vocab = plain_int(field(row, "vocab"));
  if (vocab) {
    m.vocab = *vocab;
  } else if (llama) {
    // SentencePiece vocabulary of LLaMA 1 and 2 (32,000; Touvron et al. 2023); Llama 3's tiktoken one (128,256).
    m.vocab = llama3 ? 128256 : 32000;
    add_note(notes, "vocab " + std::to_string(m.vocab) + " (the Llama tokenizer)");
  } else if (contains(field(row, "framework"), "megatron") || contains(field(row, "framework"), "zero")) {
    m.vocab = 50304; // GPT-2 BPE 50,257 padded by Megatron-LM to a multiple of 128 (--make-vocab-size-divisible-by 128)
    add_note(notes, "vocab 50304 (GPT-2 BPE padded by Megatron-LM)");
  } else {
    m.vocab = 50257; // GPT-2 BPE as Hugging Face's gpt2 configs give it
    add_note(notes, "vocab 50257 (Hugging Face GPT-2)");
  }
  // The loss's code (docs/workload.md §4.4): Megatron-LM's vocab-parallel cross entropy for the runs of the
  // Megatron-LM and ZeRO papers and DeepSpeed's Megatron examples (the rule of the padded vocabulary above).
  if (!llama && (contains(field(row, "framework"), "megatron") || contains(field(row, "framework"), "zero"))) {
    m.loss = spec::LossKind::MEGATRON;
    add_note(notes, "Megatron-LM's vocab-parallel cross entropy (one fp32 copy of the logits)");
  }
  m.source = "published.csv row " + field(row, "row_id");
  return m;
}

/// The node for a row: the topology file, with the row's GPU or host memory where it differs from the file.
spec::NodeSpec node_for(const PublishedRow& row, const NodeLoader& load_node, std::string& notes)
{
  std::string name = node_name_for(field(row, "gpu"), field(row, "gpu_mem_GB"), field(row, "inter_node_network"));
  spec::NodeSpec node = load_node(name);
  add_note(notes, "node topologies/" + name + ".yaml");
  // GPU memory: row figures are GB as marketed (HBM sizes are binary: a "32 GB" V100 has 32 GiB); override only
  // when neither reading of the row's figure is within 3 % of the node file's.
  auto differs = [](double row_value, std::int64_t node_bytes) {
    auto off = [&](double bytes) {
      return std::abs(bytes - static_cast<double>(node_bytes)) / static_cast<double>(node_bytes);
    };
    return node_bytes > 0 && off(row_value * GIB) > 0.03 && off(row_value * 1e9) > 0.03;
  };
  if (auto g = leading_number(field(row, "gpu_mem_GB")); g && differs(*g, node.gpu.memory_bytes)) {
    node.gpu.memory_bytes = static_cast<std::int64_t>(*g * GIB);
    add_note(notes, "GPU memory " + trim(field(row, "gpu_mem_GB")) + " GiB (row) over the node file's");
  }
  const std::string& cpu_text = field(row, "cpu_mem_per_node_GB");
  // A host figure equal to what the node file leaves usable (memory less cpu.reserved) is the same machine.
  if (auto c = leading_number(cpu_text);
      c && differs(*c, node.cpu.memory_bytes) && differs(*c, node.cpu.memory_bytes - node.cpu.reserved_bytes)) {
    node.cpu.memory_bytes = static_cast<std::int64_t>(*c * GIB);
    static const std::regex usable_re(R"((\d+(?:\.\d+)?)\s*usable)");
    std::smatch um;
    if (std::regex_search(cpu_text, um, usable_re))
      node.cpu.reserved_bytes = node.cpu.memory_bytes - static_cast<std::int64_t>(std::stod(um.str(1)) * GIB);
    add_note(notes, "host memory " + trim(cpu_text) + " GiB (row) over the node file's");
  }
  return node;
}

/// The fabric between nodes: the row's inter_node_network figure (a hardware input, README "Columns") over the
/// node file's NICs. "N x B Gb/s" gives N NICs of B each; "B per GPU" one NIC of B per GPU; any other figure (per
/// node, or unqualified: "2 Tb/s RoCE", "800 Gbps inter-node") is the node's total, spread over the node file's
/// NIC count. The figure replaces the node file's only when the totals differ by more than 3 %; a text without a
/// bandwidth ("not stated", "AWS Elastic Fabric Adapter (EFA)") keeps the node file's NICs, and says so. Latency:
/// the config layer's default 5 us (scenario_loader.cpp: NCCL's network base latency, src/graph/tuning.cc
/// hwLat[NCCL_HW_NET]); non-blocking fabric.
spec::NetworkSpec network_for(const PublishedRow& row, const spec::NodeSpec& node, int nodes, std::string& notes)
{
  spec::NetworkSpec net;
  net.nic_bandwidth_Bps = node.nics.bandwidth_Bps;
  net.nics_per_node = node.nics.count;
  net.latency_s = 5e-6;
  net.oversubscription = 1;
  const std::string text = trim(field(row, "inter_node_network"));
  static const std::regex bw_re(R"((?:(\d+)\s*x\s*)?(\d+(?:\.\d+)?)\s*(Tb/s|Tbps|Gb/s|Gbps)\b)", std::regex::icase);
  std::smatch m;
  const double node_total_bps = node.nics.bandwidth_Bps * 8.0 * node.nics.count;
  auto gbps = [](double bps) {
    std::ostringstream os;
    os << bps / 1e9;
    return os.str();
  };
  if (!std::regex_search(text, m, bw_re)) {
    if (nodes > 1)
      add_note(notes, "inter-node network " + (text.empty() ? std::string("not stated") : "'" + text + "'") +
                          ": the node file's " + std::to_string(node.nics.count) + " x " +
                          gbps(node.nics.bandwidth_Bps * 8) + " Gb/s");
    return net;
  }
  double bps = std::stod(m.str(2)) * (lower(m.str(3))[0] == 't' ? 1e12 : 1e9);
  int count = node.nics.count;
  double per_nic_bps = bps / std::max(1, count);
  if (!m.str(1).empty()) {
    count = std::stoi(m.str(1));
    per_nic_bps = bps;
  } else if (contains(text, "per gpu")) {
    count = node.gpus;
    per_nic_bps = bps;
  }
  const double total_bps = per_nic_bps * count;
  if (node_total_bps > 0 && std::abs(total_bps - node_total_bps) / node_total_bps <= 0.03)
    return net;
  net.nics_per_node = count;
  net.nic_bandwidth_Bps = per_nic_bps / 8.0;
  add_note(notes, "inter-node network '" + text + "': " + std::to_string(count) + " x " + gbps(per_nic_bps) +
                      " Gb/s per node over the node file's " + std::to_string(node.nics.count) + " x " +
                      gbps(node.nics.bandwidth_Bps * 8) + " Gb/s");
  return net;
}

/// A ZeRO-Infinity paper (S04) run of ZeRO-3 with NVMe or parameter offload (Table 1's single-DGX-2 rows 96-99).
/// The paper's code is Megatron-LM-v1.1.5-ZeRO3 (DeepSpeedExamples); its authors published the ds_config and the
/// launch options of their SC21 artifact (jeffra/DeepSpeedExamples, Megatron-LM-v1.1.5-ZeRO3/examples/
/// ds_zero3_sc21.json and run_sc21.sh: the 50B model, 62 x 8192, optimizer on NVMe, parameters on the CPU).
bool infinity_paper_offload_run(const PublishedRow& row, int stage)
{
  const auto opt = parse_offload(field(row, "offload_optimizer"));
  const auto par = parse_offload(field(row, "offload_param"));
  return field(row, "source_id") == "S04" && stage == 3 &&
         (opt == spec::OffloadDevice::NVME || par != spec::OffloadDevice::NONE);
}

/// A run of DeepSpeedExamples' Megatron-LM-v1.1.5-ZeRO3 example (DeepSpeed issues #1776 and #2159, rows 117-119).
bool zero3_example_run(const PublishedRow& row)
{
  return contains(field(row, "framework"), "Megatron-LM-v1.1.5-ZeRO3");
}

/// The DeepSpeed zero_optimization block of a row: DeepSpeed 0.19's defaults as the config layer resolves them
/// (zero-schedule.md §11: overlap_comm = stage 3 unless given; pin_memory true), then the keys the source's
/// published ds_config sets (DeepSpeed tutorials docs/_tutorials/zero.md, zero-offload.md, zeropp.md).
spec::ZeroSpec zero_for(const PublishedRow& row, int stage, std::string& notes)
{
  spec::ZeroSpec z;
  z.stage = stage;
  z.overlap_comm = stage == 3;
  z.offload_optimizer.device = parse_offload(field(row, "offload_optimizer"));
  z.offload_param.device = parse_offload(field(row, "offload_param"));
  const std::string& locator = field(row, "locator");
  if (contains(locator, "_tutorials/zero.md") && stage == 1) {
    z.reduce_bucket_size = 500'000'000; // ds_zero_stage_1.config: {"stage": 1, "reduce_bucket_size": 5e8}
    add_note(notes, "ds_config of docs/_tutorials/zero.md (stage 1, reduce_bucket_size 5e8)");
  } else if (contains(locator, "_tutorials/zero.md") && stage == 2) {
    // ds_zero_stage_2.config: contiguous_gradients, overlap_comm, reduce_scatter true; both buckets 5e8
    z.contiguous_gradients = true;
    z.overlap_comm = true;
    z.reduce_scatter = true;
    z.reduce_bucket_size = 500'000'000;
    z.allgather_bucket_size = 500'000'000;
    add_note(notes, "ds_config of docs/_tutorials/zero.md (stage 2, overlap_comm, buckets 5e8)");
  } else if (contains(locator, "zero-offload.md")) {
    // ds_zero_offload.config: {"stage": 2, "cpu_offload": true, "contiguous_gradients": true, "overlap_comm": true}
    z.offload_optimizer.device = spec::OffloadDevice::CPU;
    z.contiguous_gradients = true;
    z.overlap_comm = true;
    add_note(notes, "ds_config of docs/_tutorials/zero-offload.md (cpu_offload, overlap_comm)");
  } else if (contains(locator, "zeropp.md")) {
    // ZeRO++ tutorial snippet without its three ZeRO++ keys (the row is the ZeRO baseline run)
    z.reduce_bucket_size = 10'000'000;
    z.reduce_scatter = false;
    z.contiguous_gradients = true;
    z.overlap_comm = true;
    add_note(notes, "ds_config of docs/_tutorials/zeropp.md without ZeRO++ keys (reduce_bucket_size 1e7)");
  } else if (infinity_paper_offload_run(row, stage)) {
    // The ZeRO-Infinity authors' SC21 artifact ds_config (ds_zero3_sc21.json, zero_optimization and the legacy
    // swap_tensor block): reduce_bucket_size 1e8, stage3_max_reuse_distance 1e8, sub_group_size 4e8,
    // stage3_max_live_parameters 1e9 and stage3_prefetch_bucket_size 5e7 (the defaults), optimizer_buffer_count 4
    // (the default), pinned memory, and fp16_params_buffer_size 1e9 (offload_param.buffer_size). Its
    // "stage3_param_persitance_threshold" is misspelled, so DeepSpeed keeps the default 1e5.
    z.reduce_bucket_size = 100'000'000;
    z.stage3_max_reuse_distance = 100'000'000;
    z.sub_group_size = 400'000'000;
    z.offload_param.buffer_size = 1'000'000'000;
    add_note(notes, "ds_config of the ZeRO-Infinity authors' SC21 artifact (jeffra/DeepSpeedExamples "
                    "Megatron-LM-v1.1.5-ZeRO3/examples/ds_zero3_sc21.json: reduce_bucket_size 1e8, "
                    "stage3_max_reuse_distance 1e8, sub_group_size 4e8, parameter swap buffers of 1e9 elements; "
                    "written for the 50B run, applied to every Table 1 offload run)");
  } else if (zero3_example_run(row) && z.offload_param.device == spec::OffloadDevice::NVME) {
    // The example's NVMe config, Megatron-LM-v1.1.5-ZeRO3/examples/ds_zero_stage_infinity_config.json (the launch
    // script names it for "offloads to NVMe"): reduce_bucket_size 9e7, sub_group_size 1e8,
    // stage3_max_reuse_distance 1e8, offload_optimizer buffer_count 4, offload_param max_in_cpu 1.
    z.reduce_bucket_size = 90'000'000;
    z.sub_group_size = 100'000'000;
    z.stage3_max_reuse_distance = 100'000'000;
    z.offload_param.max_in_cpu = 1;
    // That config sets no offload_param.buffer_size, and DeepSpeed's default (1e8 elements) refuses any NVMe
    // parameter partition that does not fit one swap buffer (partitioned_param_swapper.py get_buffer: "More
    // elements ... than buffer size"; zero-schedule.md §8). The run trained, so its config set a larger one, not
    // published; 1e9 is the ZeRO-Infinity authors' own (ds_zero3_sc21.json fp16_params_buffer_size). The swap
    // buffers are pinned host memory: the GPU figures do not depend on the choice.
    z.offload_param.buffer_size = 1'000'000'000;
    add_note(notes, "ds_config of the example's ds_zero_stage_infinity_config.json (reduce_bucket_size 9e7, "
                    "sub_group_size 1e8, max_in_cpu 1); offload_param.buffer_size 1e9 assumed (not set there, and "
                    "DeepSpeed's default 1e8 refuses this model's NVMe partitions; 1e9 as the ZeRO-Infinity authors' "
                    "ds_zero3_sc21.json; pinned host buffers, no effect on GPU memory)");
  } else {
    add_note(notes, "zero_optimization keys other than stage/offload not published: DeepSpeed 0.19 defaults");
  }
  return z;
}

spec::Precision parse_precision(const std::string& text, std::string& notes)
{
  std::string t = lower(text);
  if (t.rfind("bf16", 0) == 0)
    return spec::Precision::BF16;
  if (t.rfind("fp32", 0) == 0)
    return spec::Precision::FP32;
  if (t.rfind("fp16", 0) != 0)
    add_note(notes, "precision '" + text + "' read as fp16");
  return spec::Precision::FP16;
}

spec::Checkpointing parse_checkpointing(const std::string& text, std::string& notes)
{
  std::string t = lower(trim(text));
  if (t.rfind("yes", 0) == 0 || t.rfind("full", 0) == 0)
    return spec::Checkpointing::FULL;
  if (t.rfind("selective", 0) == 0)
    return spec::Checkpointing::SELECTIVE;
  if (t.empty() || t.rfind("not stated", 0) == 0)
    add_note(notes, "activation checkpointing not stated: none assumed");
  return spec::Checkpointing::NONE;
}

/// The training precision of a PyTorch row, and for FSDP the MixedPrecision dtypes of the run's code. zerosim's
/// precisions (scenario-format.md): bf16/fp16 = FSDP MixedPrecision(param_dtype = reduce_dtype = the 16-bit type)
/// over fp32 sharded parameters; amp_bf16/amp_fp16 = torch.autocast over fp32 parameters; fp32.
spec::Precision torch_precision(const PublishedRow& row, spec::Framework fw, spec::FsdpSpec& fsdp, std::string& notes)
{
  const std::string t = lower(trim(field(row, "precision")));
  const std::string& framework = field(row, "framework");
  if (t.rfind("fp32", 0) == 0 || (t.rfind("not stated", 0) == 0 && t.find("fp32") != std::string::npos)) {
    if (t.rfind("fp32", 0) != 0)
      add_note(notes, "precision '" + field(row, "precision") + "' read as fp32");
    return spec::Precision::FP32;
  }
  const bool bf16 = t.find("bf16") != std::string::npos;
  if (fw == spec::Framework::DDP) {
    // DDP has no parameter-dtype mixed precision: "fp16"/"bf16" with DDP (HF Trainer --fp16, Accelerate
    // mixed_precision, "DDP+AMP") is torch.autocast over fp32 parameters.
    add_note(notes, std::string("DDP mixed precision is torch.autocast: ") + (bf16 ? "amp_bf16" : "amp_fp16"));
    return bf16 ? spec::Precision::AMP_BF16 : spec::Precision::AMP_FP16;
  }
  if (t.rfind("amp_bf16", 0) == 0) {
    if (t.find("default") != std::string::npos) {
      // Composer 2023, which the llm-foundry tables ran on (prepare_fsdp_module in composer/trainer/
      // dist_strategy.py, and the get_mixed_precision helper that added amp_fp8): mixed_precision 'DEFAULT' =
      // MixedPrecision(param_dtype fp32 / None: the fp32 parameters are gathered as they are, reduce_dtype = the
      // autocast dtype, buffer_dtype = fp32), under autocast. Later Composer swapped DEFAULT to bf16 parameters
      // and fp32 reduction.
      fsdp.param_dtype = spec::Dtype::FP32;
      fsdp.reduce_dtype = spec::Dtype::BF16;
      add_note(notes, "Composer MP mode DEFAULT: autocast bf16, fp32 parameter all-gather, bf16 gradient reduction");
    }
    return spec::Precision::AMP_BF16;
  }
  if (bf16) {
    if (t.find("pure") != std::string::npos) {
      // Composer 'PURE' = MixedPrecision(param_dtype = reduce_dtype = buffer_dtype = the autocast dtype).
      fsdp.param_dtype = spec::Dtype::BF16;
      fsdp.reduce_dtype = spec::Dtype::BF16;
      add_note(notes, "Composer MP mode PURE: bf16 parameter all-gather and gradient reduction");
    } else if (contains(framework, "torchtitan")) {
      // torchtitan's job config defaults: mixed_precision_param "bfloat16", mixed_precision_reduce "float32"
      // (torchtitan/config_manager.py), applied by fully_shard's MixedPrecisionPolicy.
      fsdp.param_dtype = spec::Dtype::BF16;
      fsdp.reduce_dtype = spec::Dtype::FP32;
      add_note(notes, "torchtitan defaults: bf16 parameters, fp32 gradient reduction");
    } else if (contains(framework, "fms-fsdp")) {
      // fms-fsdp fms_fsdp/policies/mixed_precision.py bfSixteen: param_dtype = reduce_dtype = bfloat16.
      fsdp.param_dtype = spec::Dtype::BF16;
      fsdp.reduce_dtype = spec::Dtype::BF16;
      add_note(notes, "fms-fsdp bfSixteen policy: bf16 parameters and gradient reduction");
    } else {
      add_note(notes, "bf16 mixed precision: MixedPrecision(param_dtype = reduce_dtype = bf16) over fp32 parameters "
                      "(the reduce dtype is not stated)");
    }
    return spec::Precision::BF16;
  }
  if (t.find("fp16") != std::string::npos)
    return spec::Precision::FP16;
  add_note(notes, "precision '" + field(row, "precision") + "' read as bf16 mixed precision");
  return spec::Precision::BF16;
}

/// FlashAttention in the run's code: the row names it (the llm-foundry tables: "MPT models, FlashAttention";
/// fms-fsdp: "SDPA FlashAttention-2"; the Llama 2 70B FSDP blog: "flash-attn v2"), or torchtitan, whose Llama
/// attention calls F.scaled_dot_product_attention (torchtitan/models/llama/model.py), which runs the
/// FlashAttention-2 kernel for causal bf16 attention on A100 and H100.
bool flash_attention_of(const PublishedRow& row)
{
  for (const char* k : {"framework", "activation_checkpointing", "other_parallel", "notes"})
    if (contains(field(row, k), "flash"))
      return true;
  return contains(field(row, "framework"), "torchtitan");
}

/// Total GPUs: the leading number, unless the field says the figure's screenshot shows another count.
int total_gpus(const PublishedRow& row, std::string& notes)
{
  const std::string& text = field(row, "total_gpus");
  static const std::regex shows_re(R"(shows\s+(\d+)\s+busy)");
  std::smatch m;
  if (std::regex_search(text, m, shows_re)) {
    add_note(notes, "GPUs: " + m.str(1) + ", the count of busy GPUs in the screenshot the figure is read from ('" +
                        text + "')");
    return std::stoi(m.str(1));
  }
  auto n = leading_number(text);
  if (!n) {
    auto gpn = leading_number(field(row, "gpus_per_node"));
    auto nodes = leading_number(field(row, "nodes"));
    if (gpn && nodes)
      return static_cast<int>(*gpn * *nodes);
    throw core::InputError("published.csv row " + field(row, "row_id") + ": GPU count not given");
  }
  if (!plain_int(text))
    add_note(notes, "GPUs: " + std::to_string(static_cast<int>(*n)) + " from '" + text + "'");
  return static_cast<int>(*n);
}

std::string number_text(double v)
{
  std::ostringstream os;
  os << v;
  return os.str();
}

/// A model dimension: a whole number, or one followed by a remark in parentheses ("96 (assumed)": the FSDP
/// paper's minGPT 175B, whose GPT-3 shape the data file assumes); nullopt otherwise.
std::optional<int> dimension_of(const std::string& text)
{
  if (auto v = plain_int(text))
    return v;
  static const std::regex re(R"(^\s*(\d+)\s*\(.*\)\s*$)");
  std::smatch m;
  if (std::regex_match(text, m, re))
    return std::stoi(m.str(1));
  return std::nullopt;
}

/// The gradient-accumulation steps of a row: grad_accum as written (rounded when the source gives a fraction),
/// else global_batch / (micro_batch x GPUs), else 1.
int grad_accum_of(const PublishedRow& row, int micro_batch, int gpus, std::string& notes)
{
  const std::string& ga_text = field(row, "grad_accum");
  if (auto ga = leading_number(ga_text)) {
    if (*ga == std::floor(*ga))
      return std::max(1, static_cast<int>(*ga));
    int r = std::max(1, static_cast<int>(std::lround(*ga)));
    add_note(notes, "grad_accum " + trim(ga_text) + " in the row (not whole): " + std::to_string(r) + " used");
    return r;
  }
  std::optional<double> global = leading_number(field(row, "global_batch"));
  // "2048 (table) / 512 (heading)" (BLOOM prequel rows 315-317): the section heading's GBS is the run's; the
  // printed TFLOPs follow from it and the printed step time, and not from the table's 2048
  // (docs/research/validation-stacks.md, doubt (b)).
  if (const std::string& gb_text = field(row, "global_batch"); contains(gb_text, "(heading)")) {
    const std::size_t slash = gb_text.rfind('/', gb_text.find("(heading)"));
    if (slash != std::string::npos)
      if (auto heading = leading_number(gb_text.substr(slash + 1))) {
        global = heading;
        add_note(notes, "global batch " + number_text(*heading) + ", the section heading's ('" + trim(gb_text) +
                            "'; docs/research/validation-stacks.md)");
      }
  }
  if (global) {
    const double* gb = &*global;
    double ga = *gb / (static_cast<double>(micro_batch) * gpus);
    int r = std::max(1, static_cast<int>(std::lround(ga)));
    if (ga != std::floor(ga) || ga < 1)
      add_note(notes, "global batch " + number_text(*gb) + " over micro-batch " + std::to_string(micro_batch) + " x " +
                          std::to_string(gpus) + " GPUs = " + number_text(ga) + " micro-steps: " + std::to_string(r) +
                          " used");
    return r;
  }
  add_note(notes, "neither grad_accum nor global batch stated: 1 micro-step per step assumed");
  return 1;
}

struct Shape {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int micro_batch = 0;
  int tensor_parallel = 0; ///< 0: the row's tp column (tensor_parallel_of)
};

/// The Megatron tensor-parallel degree of a row: its tp column's leading number ("8 (inferred)" -> 8), 1 when the
/// column is empty or not a number ("not stated (likely 1)"). exclusions() keeps out the rows whose degree is not
/// given ("<=16 (MP within node ...)").
int tensor_parallel_of(const PublishedRow& row)
{
  auto tp = leading_number(field(row, "tp"));
  return tp && *tp >= 1 ? static_cast<int>(*tp) : 1;
}

struct BuildInputs {
  Shape shape;
  int seq_len = 0;
  int total_gpus = 0;
  int stage = 0;
};

/// The aio block and DeepSpeed activation checkpointing of the ZeRO-Infinity code's runs (Megatron-LM-v1.1.5-ZeRO3,
/// rows 96-99 and 117-119): the options their scripts pass. Megatron's --partition-activations and --checkpoint-in-cpu
/// set deepspeed.checkpointing's partition_activations and checkpoint_in_cpu (megatron/initialize.py,
/// _configure_deepspeed_checkpointing); with one model-parallel rank, partitioning splits over that one rank.
void infinity_code_settings(const PublishedRow& row, const BuildInputs& in, spec::Scenario& s, std::string& notes)
{
  auto& ac = s.deepspeed.activation_checkpointing;
  const bool paper = infinity_paper_offload_run(row, in.stage);
  const bool example = zero3_example_run(row);
  if (!paper && !example)
    return;
  if (paper || s.deepspeed.zero.offload_param.device == spec::OffloadDevice::NVME) {
    // aio of ds_zero3_sc21.json and of ds_zero_stage_infinity_config.json alike: block_size 1 MiB, queue_depth 16,
    // single_submit false, overlap_events true, thread_count 2 (intra_op_parallelism's former name).
    s.deepspeed.aio.block_size = 1'048'576;
    s.deepspeed.aio.queue_depth = 16;
    s.deepspeed.aio.intra_op_parallelism = 2;
    add_note(notes, "aio queue_depth 16, thread_count 2 (the same config)");
  }
  if (example) {
    // Megatron-LM-v1.1.5-ZeRO3/examples/ds_pretrain_gpt2-zero3.sh: PA=true, PA_CPU=true (--partition-activations
    // --checkpoint-in-cpu).
    ac.partition_activations = true;
    ac.cpu_checkpointing = true;
    add_note(notes, "DeepSpeed activation checkpointing with partition_activations and cpu_checkpointing (the "
                    "example's ds_pretrain_gpt2-zero3.sh: PA=true, PA_CPU=true)");
    return;
  }
  // The paper offloads activation checkpoints to CPU memory "where needed" (the row). Needed: the 16-bit checkpoints
  // of a micro-batch (one per layer, micro-batch x seq x hidden x 2 B each) exceed the GPU. The artifact's 50B run
  // (62 x 8192, the configuration of row 96) passes --checkpoint-in-cpu and --partition-activations (run_sc21.sh).
  const double ckpt_bytes =
      static_cast<double>(in.shape.layers) * in.shape.micro_batch * in.seq_len * in.shape.hidden * 2.0;
  const double gpu_bytes = static_cast<double>(s.cluster.node.gpu.memory_bytes);
  const bool artifact_shape = in.shape.layers == 62 && in.shape.hidden == 8192;
  const bool where_needed = contains(field(row, "activation_checkpointing"), "offload to cpu");
  std::ostringstream os;
  os.precision(3);
  os << "checkpoints " << ckpt_bytes / GIB << " GiB (layers x micro-batch x seq x hidden x 2 B) against the GPU's "
     << gpu_bytes / GIB << " GiB";
  if (where_needed && (artifact_shape || ckpt_bytes > gpu_bytes)) {
    ac.partition_activations = true;
    ac.cpu_checkpointing = true;
    add_note(notes, "DeepSpeed cpu_checkpointing and partition_activations on: the paper offloads checkpoints to the "
                    "CPU where needed; " +
                        std::string(artifact_shape ? "the authors' SC21 artifact passes --checkpoint-in-cpu "
                                                     "--partition-activations for this 62 x 8192 run (run_sc21.sh)"
                                                   : "needed here: " + os.str()));
  } else {
    add_note(notes, "activation checkpoints kept on the GPU (" + os.str() + ")");
  }
}

spec::Scenario build_scenario(const PublishedRow& row, const NodeLoader& load_node, const BuildInputs& in,
                              RowInfo& info)
{
  spec::Scenario s;
  s.name = "published.csv row " + field(row, "row_id");
  s.file = "results/validation/published.csv";
  s.model = model_from_shape(row, in.shape.layers, in.shape.hidden, in.shape.heads, in.seq_len, info.assumptions);
  spec::NodeSpec node = node_for(row, load_node, info.assumptions);
  s.cluster.node = node;
  s.cluster.gpus_per_node = std::min(in.total_gpus, node.gpus);
  s.cluster.nodes = (in.total_gpus + s.cluster.gpus_per_node - 1) / s.cluster.gpus_per_node;
  if (s.cluster.nodes * s.cluster.gpus_per_node != in.total_gpus)
    throw core::InputError(s.name + ": " + std::to_string(in.total_gpus) + " GPUs do not fill whole nodes of " +
                           std::to_string(node.gpus));
  s.cluster.network = network_for(row, node, s.cluster.nodes, info.assumptions);

  const spec::Framework fw = framework_of(row);
  s.training.seq_len = in.seq_len;
  s.training.micro_batch = in.shape.micro_batch;
  s.training.tensor_parallel = fw != spec::Framework::DEEPSPEED ? 1
                               : in.shape.tensor_parallel > 0   ? in.shape.tensor_parallel
                                                                : tensor_parallel_of(row);
  auto ga = plain_int(field(row, "grad_accum"));
  s.training.grad_accum = ga ? *ga : 1;
  s.training.global_batch = static_cast<std::int64_t>(s.training.micro_batch) * s.training.grad_accum * s.dp();
  s.training.precision = fw == spec::Framework::DEEPSPEED ? parse_precision(field(row, "precision"), info.assumptions)
                                                          : torch_precision(row, fw, s.fsdp, info.assumptions);
  s.training.activation_checkpointing = parse_checkpointing(field(row, "activation_checkpointing"), info.assumptions);
  // The stack each run used (stacks.csv, quoted or inferred from the source; docs/validation.md).
  s.software = software_of(row);
  s.training.flash_attention = spec::is_fused(s.software.attention);
  s.kernels = config::shipped_kernel_table();
  // DeepSpeed's Megatron examples use Adam (FusedAdam / DeepSpeedCPUAdam); the PyTorch runs' code uses AdamW
  // (Composer decoupled_adamw, torchtitan and fms-fsdp AdamW, minGPT's configure_optimizers, the HF Trainer).
  s.training.optimizer = fw == spec::Framework::DEEPSPEED ? spec::Optimizer::ADAM : spec::Optimizer::ADAMW;
  s.training.mode = spec::Mode::TRAIN;

  s.framework = fw;
  s.deepspeed_version = "0.19";
  std::ostringstream cfg;
  info.framework = framework_label(row);
  if (fw == spec::Framework::DEEPSPEED) {
    s.deepspeed.zero = zero_for(row, in.stage, info.assumptions);
    infinity_code_settings(row, in, s, info.assumptions);
    s.deepspeed.communication_data_type = model_dtype(s.training.precision); // §1.3: model dtype unless given
    s.deepspeed.grad_accum_dtype = model_dtype(s.training.precision);
    info.stage = in.stage;
    info.strategy = "stage " + std::to_string(in.stage);
    const auto& z = s.deepspeed.zero;
    info.offload =
        z.offload_optimizer.device == spec::OffloadDevice::NONE && z.offload_param.device == spec::OffloadDevice::NONE
            ? "none"
            : "opt " + std::string(spec::to_string(z.offload_optimizer.device)) + " + param " +
                  std::string(spec::to_string(z.offload_param.device));
    cfg << "ZeRO-" << in.stage;
    if (info.offload != "none")
      cfg << " (" << info.offload << ")";
  } else if (fw == spec::Framework::FSDP) {
    // exclusions() lets no FSDP row without a strategy through.
    ShardingRead sh = *fsdp_sharding_of(row);
    if (!sh.note.empty())
      add_note(info.assumptions, sh.note);
    spec::FsdpSpec& f = s.fsdp;
    f.sharding_strategy = sh.strategy;
    const std::string sharding_text = lower(field(row, "fsdp_sharding"));
    const std::string& framework = field(row, "framework");
    if (contains(framework, "fsdp2") || sharding_text.find("fully_shard") != std::string::npos) {
      // FSDP2 fully_shard: reshard_after_forward=True is FULL_SHARD's behaviour (torchtitan's default for the
      // data-parallel mesh, fsdp_reshard_after_forward "default").
      f.reshard_after_forward = sh.strategy != spec::FsdpSharding::SHARD_GRAD_OP;
      add_note(info.assumptions,
               "FSDP2 fully_shard, reshard_after_forward " + std::string(*f.reshard_after_forward ? "True" : "False"));
    }
    if (contains(framework, "composer")) {
      // Composer 2023 (composer/trainer/dist_strategy.py, prepare_fsdp_module): fsdp_config backward_prefetch
      // defaults to BACKWARD_POST; llm-foundry's submit_benchmarks.py sets limit_all_gathers true.
      f.backward_prefetch = spec::BackwardPrefetch::BACKWARD_POST;
      f.limit_all_gathers = true;
      add_note(info.assumptions, "Composer FSDP defaults: backward_prefetch BACKWARD_POST, limit_all_gathers true");
    }
    f.cpu_offload = parse_offload(field(row, "offload_param")) == spec::OffloadDevice::CPU;
    // One FSDP unit per transformer block: Composer's MPT fsdp_wrap_fn, torchtitan's per-block fully_shard,
    // fms-fsdp's and Accelerate's transformer auto-wrap policies, the FSDP paper's minGPT block wrapping.
    f.wrap = contains(field(row, "fsdp_sharding"), "whole model") ? "model" : "block";
    info.stage = sh.strategy == spec::FsdpSharding::SHARD_GRAD_OP ? 2
                 : sh.strategy == spec::FsdpSharding::NO_SHARD    ? 0
                                                                  : 3;
    info.strategy = std::string("FSDP ") + sharding_name(sh.strategy);
    info.offload = f.cpu_offload ? "FSDP CPU offload" : "none";
    cfg << info.strategy;
    if (f.param_dtype || f.reduce_dtype)
      cfg << " (params " << spec::to_string(f.param_dtype.value_or(model_dtype(s.training.precision))) << ", reduce "
          << spec::to_string(f.reduce_dtype.value_or(model_dtype(s.training.precision))) << ")";
    if (f.cpu_offload)
      cfg << " (CPU offload)";
  } else {
    info.stage = 0;
    info.strategy = "DDP";
    info.offload = "none";
    cfg << "DDP (bucket_cap_mb " << s.ddp.bucket_cap_mb << ")";
  }
  if (s.tp() > 1)
    cfg << ", tp " << s.tp();
  cfg << ", " << in.total_gpus << " x " << node.gpu.model << ", " << s.model.layers << "x" << s.model.hidden << ", mb "
      << s.training.micro_batch << ", seq " << in.seq_len << ", " << spec::to_string(s.training.precision) << ", ckpt "
      << spec::to_string(s.training.activation_checkpointing);
  if (s.deepspeed.activation_checkpointing.cpu_checkpointing)
    cfg << " (checkpoints on CPU)";
  if (s.training.flash_attention)
    cfg << ", FlashAttention";
  info.config = cfg.str();
  return s;
}

RowInfo info_of(const PublishedRow& row)
{
  RowInfo info;
  info.row_id = field(row, "row_id");
  info.source_id = field(row, "source_id");
  info.source = field(row, "source");
  info.locator = field(row, "locator");
  info.model = field(row, "model");
  info.framework = framework_label(row);
  return info;
}

int seq_len_of(const PublishedRow& row, std::string& notes)
{
  const std::string& text = field(row, "seq_len");
  if (auto s = plain_int(text))
    return *s;
  auto n = leading_number(text);
  if (n) {
    add_note(notes, "seq " + std::to_string(static_cast<int>(*n)) + " from '" + text + "'");
    return static_cast<int>(*n);
  }
  // Megatron-LM GPT-2 example default --seq-length 1024 (DeepSpeedExamples Megatron-LM, the code of these runs).
  add_note(notes, "seq 1024 assumed (Megatron-LM GPT-2 example default; the row: '" + text + "')");
  return 1024;
}

/// The model shape and micro-batch a row states, or nullopt when one of them is missing: layers and hidden as whole
/// numbers or with a remark ("96 (assumed)"), heads and micro-batch by their leading number ("32 (8 KV)"). Every
/// cell read from more than a plain number is noted in `notes`.
std::optional<Shape> shape_of(const PublishedRow& row, std::string& notes)
{
  auto layers = dimension_of(field(row, "layers"));
  auto hidden = dimension_of(field(row, "hidden"));
  auto heads = leading_number(field(row, "heads"));
  auto mb = leading_number(field(row, "micro_batch"));
  if (!layers || !hidden || !heads || !mb)
    return std::nullopt;
  Shape shape{*layers, *hidden, static_cast<int>(*heads), static_cast<int>(*mb)};
  for (const char* k : {"layers", "hidden"})
    if (!plain_int(field(row, k)))
      add_note(notes, std::string(k) + " from '" + field(row, k) + "'");
  if (!plain_int(field(row, "micro_batch")))
    add_note(notes, "micro-batch " + std::to_string(shape.micro_batch) + " from '" + field(row, "micro_batch") + "'");
  return shape;
}

/// The scenario of a row, for every mapping (memory figures, fit statements, time and throughput figures): the
/// model of `shape`, the node, network, framework (DeepSpeed stage and ds_config, FSDP strategy and options, DDP),
/// precision, checkpointing and batch the row gives (build_scenario), then the gradient-accumulation steps
/// (grad_accum_of) and the global batch they imply. Every input assumed goes to `info.assumptions`, the short
/// description to `info.config`. Rules: docs/validation.md, "Building the scenario from a row".
spec::Scenario row_scenario(const PublishedRow& row, const NodeLoader& load_node, const Shape& shape, RowInfo& info)
{
  BuildInputs in;
  in.shape = shape;
  in.seq_len = seq_len_of(row, info.assumptions);
  in.total_gpus = total_gpus(row, info.assumptions);
  // A PyTorch row has no DeepSpeed stage; build_scenario sets the one its strategy is equivalent to. exclusions()
  // lets no DeepSpeed row without one stage through.
  in.stage = framework_of(row) == spec::Framework::DEEPSPEED ? *stage_of(field(row, "zero_stage")) : 0;
  spec::Scenario s = build_scenario(row, load_node, in, info);
  spec::TrainingSpec& t = s.training;
  t.grad_accum = grad_accum_of(row, t.micro_batch, s.dp(), info.assumptions);
  t.global_batch = static_cast<std::int64_t>(t.micro_batch) * t.grad_accum * s.dp();
  t.global_batch_given = !trim(field(row, "global_batch")).empty();
  // The software stack the run used, as build_scenario took it (software_of): stacks.csv's, quoted from the source or
  // inferred from the run's date and code (stack.status), else today's stack, unstated, with FlashAttention where
  // the row names it (flash_attention_of).
  const spec::SoftwareSpec& sw = s.software;
  const std::string kernel = spec::to_string(sw.attention);
  if (sw.stated)
    add_note(info.assumptions, "stack: attention " + kernel + ", torch " + sw.torch +
                                   (sw.compile ? ", torch.compile" : "") + " (stacks.csv, " +
                                   field(row, "stack.status") + ")");
  else
    add_note(info.assumptions,
             "stack: not in stacks.csv, today's; attention " + kernel +
                 (spec::is_fused(sw.attention) ? " (the row names FlashAttention, or torchtitan's SDPA)"
                                               : " (the row names no FlashAttention)"));
  if (t.precision == spec::Precision::FP16 && !contains(field(row, "precision"), "fp16"))
    add_note(info.assumptions, "fp16 and bf16 have the same dense peak on these GPUs");
  info.config += ", ga " + std::to_string(t.grad_accum);
  return s;
}

void map_estimator_row(const PublishedRow& row, RowMapping& into)
{
  RowInfo info = info_of(row);
  auto params_b = leading_number(field(row, "params_B"));
  auto figure = plain_number(field(row, "peak_mem_GB"));
  auto stage = plain_int(field(row, "zero_stage"));
  static const std::regex largest_re(R"(largest layer\s+(\d+(?:\.\d+)?)M)");
  std::smatch lm;
  const std::string& model = field(row, "model");
  bool has_largest = std::regex_search(model, lm, largest_re);
  std::string why;
  if (!params_b)
    why = "parameter count not given";
  else if (!figure)
    why = "figure '" + field(row, "peak_mem_GB") + "' is not a single number";
  else if (!stage || (*stage != 2 && *stage != 3))
    why = "DeepSpeed has estimators for stages 2 and 3 only (stage '" + field(row, "zero_stage") + "')";
  else if (*stage == 3 && !has_largest)
    why = "stage-3 estimator needs the largest layer's parameter count, not given";
  if (!why.empty()) {
    into.not_covered.push_back({info.row_id, info.source_id, model, "memory", why, info.framework});
    return;
  }
  MemoryCase c;
  c.info = info;
  c.metric = MemMetric::ESTIMATOR;
  c.metric_text = field(row, "mem_metric");
  c.unit = "GiB";
  c.measured_bytes = *figure * figure_unit_bytes(row);
  memory::EstimatorQuery q;
  q.total_params = static_cast<std::int64_t>(std::llround(*params_b * 1e9));
  q.largest_layer_params = has_largest ? static_cast<std::int64_t>(std::llround(std::stod(lm.str(1)) * 1e6)) : 0;
  auto gpn = leading_number(field(row, "gpus_per_node"));
  auto nodes = leading_number(field(row, "nodes"));
  auto total = leading_number(field(row, "total_gpus"));
  q.gpus_per_node = gpn ? static_cast<int>(*gpn) : total ? static_cast<int>(*total) : 1;
  q.nodes = nodes ? static_cast<int>(*nodes) : 1;
  q.stage = *stage;
  q.offload_optimizer = parse_offload(field(row, "offload_optimizer")) == spec::OffloadDevice::CPU;
  q.offload_param = parse_offload(field(row, "offload_param")) == spec::OffloadDevice::CPU;
  c.estimator = q;
  c.estimator_zero_init = !contains(c.metric_text, "zero_init=0");
  c.estimator_older_formula = q.stage == 2 && !q.offload_optimizer && contains(field(row, "locator"), "memory.rst");
  c.info.stage = *stage;
  c.info.offload = !q.offload_optimizer ? "none" : q.offload_param ? "opt cpu + param cpu" : "opt cpu + param none";
  std::ostringstream cfg;
  cfg << "estimator ZeRO-" << q.stage << ", " << q.nodes << " x " << q.gpus_per_node << " GPUs, params "
      << q.total_params;
  if (q.stage == 3)
    cfg << ", largest layer " << q.largest_layer_params << ", zero_init " << (c.estimator_zero_init ? 1 : 0);
  c.info.config = cfg.str();
  add_note(c.info.assumptions, "parameter count from params_B (rounded as published)");
  if (c.estimator_older_formula)
    add_note(c.info.assumptions,
             "memory.rst prints the older ZeRO-2 formula 4P + 16P/N; the current code gives 2P + 18P/N");
  into.memory.push_back(std::move(c));
}

std::optional<MemMetric> metric_of(const std::string& metric_text)
{
  if (contains(metric_text, "nvidia-smi"))
    return MemMetric::DEVICE_USED;
  if (contains(metric_text, "allocated"))
    return MemMetric::ALLOCATED;
  if (contains(metric_text, "reserved") || contains(metric_text, "cached"))
    return MemMetric::RESERVED;
  return std::nullopt;
}

/// The ZeRO stage a row's run is equivalent to in what every GPU holds: the DeepSpeed stage; for FSDP, 3 for
/// FULL_SHARD and HYBRID_SHARD (parameters sharded), 2 for SHARD_GRAD_OP, 0 for NO_SHARD; 0 for DDP.
std::optional<int> equivalent_stage(const PublishedRow& row)
{
  switch (framework_of(row)) {
  case spec::Framework::DEEPSPEED:
    return stage_of(field(row, "zero_stage"));
  case spec::Framework::DDP:
    return 0;
  case spec::Framework::FSDP:
    break;
  }
  auto sh = fsdp_sharding_of(row);
  if (!sh)
    return std::nullopt;
  return sh->strategy == spec::FsdpSharding::SHARD_GRAD_OP ? 2 : sh->strategy == spec::FsdpSharding::NO_SHARD ? 0 : 3;
}

void map_memory_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into)
{
  RowInfo info = info_of(row);
  auto figure = plain_number(field(row, "peak_mem_GB"));
  auto metric = metric_of(field(row, "mem_metric"));
  std::string shape_notes;
  auto shape = shape_of(row, shape_notes);
  std::string why;
  if (!figure)
    why = "figure '" + field(row, "peak_mem_GB") + "' is not one number for one configuration";
  else if (!metric)
    why = "memory metric '" + field(row, "mem_metric") +
          "' is none the model predicts (torch allocated, reserved, nvidia-smi used)";
  else if (!dimension_of(field(row, "layers")) || !dimension_of(field(row, "hidden")) ||
           !leading_number(field(row, "heads")))
    why = "model dimensions not given ('" + info.model + "')";
  else if (!shape)
    why = "micro-batch not given";
  else if (node_name_for(field(row, "gpu"), field(row, "gpu_mem_GB"), field(row, "inter_node_network")).empty())
    why = "no node file for GPU '" + field(row, "gpu") + "'";
  if (!why.empty()) {
    into.not_covered.push_back({info.row_id, info.source_id, info.model, "memory", why, info.framework});
    return;
  }
  info.assumptions = shape_notes;
  MemoryCase c;
  c.scenario = row_scenario(row, load_node, *shape, info);
  c.metric = *metric;
  c.metric_text = field(row, "mem_metric");
  double unit = figure_unit_bytes(row);
  c.unit = unit == GIB ? "GiB" : "GB";
  c.measured_bytes = *figure * unit;
  if (c.unit == "GB")
    add_note(info.assumptions, "figures in GB read as 10^9 bytes (README trap 7)");
  if (auto tol = chart_tolerance(field(row, "evidence_type")))
    add_note(info.assumptions, "read off a chart, +/-" + number_text(*tol) + " " + c.unit);
  // torch's active_bytes (allocated blocks plus blocks whose release waits on another stream, record_stream) has no
  // predicted counterpart.
  static const std::regex active_re(R"(\bactive\s+(\d+(?:\.\d+)?))");
  std::smatch am;
  if (std::regex_search(c.metric_text, am, active_re))
    add_note(info.assumptions, "'active " + am.str(1) + "' not compared: torch's active bytes are not predicted");
  c.info = info;
  // A second figure in the same metric text: "torch max allocated (rank 0); max reserved 18.84 GB" (DeepSpeed log),
  // "peak allocated 47 / active 63 / reserved 78 GB" (FSDP paper, Figure 6).
  static const std::regex reserved_re(R"(reserved\s+(\d+(?:\.\d+)?))");
  std::smatch rm;
  bool second = c.metric == MemMetric::ALLOCATED && std::regex_search(c.metric_text, rm, reserved_re);
  MemoryCase reserved = c;
  into.memory.push_back(std::move(c));
  if (second) {
    reserved.metric = MemMetric::RESERVED;
    reserved.measured_bytes = std::stod(rm.str(1)) * unit;
    into.memory.push_back(std::move(reserved));
  }
}

/// A fit statement that the configuration as written ran out of memory ("OOM at BS 1").
bool claims_oom(const std::string& claim)
{
  return lower(trim(claim)).rfind("oom", 0) == 0;
}

void map_fit_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into)
{
  RowInfo info = info_of(row);
  const std::string& claim = field(row, "max_model_fit");
  auto size = claimed_size(claim);
  bool max_batch = contains(claim, "max bs");
  std::string kind = size ? "max-model" : "fit";
  // exclusions() lets through only rows with one DeepSpeed stage or a stated FSDP strategy.
  const int stage = *equivalent_stage(row);
  std::string why;
  if (node_name_for(field(row, "gpu"), field(row, "gpu_mem_GB"), field(row, "inter_node_network")).empty())
    why = "no node file for GPU '" + field(row, "gpu") + "'";
  Shape shape;
  std::string shape_note;
  auto layers = dimension_of(field(row, "layers"));
  auto hidden = dimension_of(field(row, "hidden"));
  auto heads = leading_number(field(row, "heads"));
  if (layers && hidden && heads) {
    shape = {*layers, *hidden, static_cast<int>(*heads), 0};
  } else if (size) {
    for (const auto& p : PAPER_SHAPES) {
      if (field(row, "source_id") == p.source_id && *size == p.size) {
        shape = {p.layers, p.hidden, p.heads, p.micro_batch, p.tensor_parallel};
        shape_note = p.citation;
      }
    }
    // At stage 0-2 every GPU holds its tensor-parallel shard of all 16-bit parameters: a size whose shard alone
    // exceeds one GPU cannot have run with the model-parallel degree known for it.
    const double params = std::stod(*size) * 1e9;
    const int tp = shape.tensor_parallel > 0 ? shape.tensor_parallel : tensor_parallel_of(row);
    auto gpu_gib = leading_number(field(row, "gpu_mem_GB"));
    if (why.empty() && stage < 3 && gpu_gib && 2.0 * params / tp > *gpu_gib * GIB) {
      std::ostringstream os;
      os << "the " << *size << " model's fp16 parameters alone (" << std::round(2.0 * params / tp / GIB)
         << " GiB per GPU at tensor parallelism " << tp << ") exceed one " << *gpu_gib << " GB GPU at ZeRO stage "
         << stage << " (parameters replicated), and the row gives no model-parallel degree";
      why = os.str();
    }
    if (why.empty() && shape.layers == 0)
      why = "no published shape (layers, hidden) for the " + *size + " model of '" + claim + "'";
  } else if (why.empty()) {
    why = "model dimensions not given ('" + info.model + "')";
  }
  if (!why.empty()) {
    into.not_covered.push_back({info.row_id, info.source_id, info.model, kind, why, info.framework});
    return;
  }
  if (!shape_note.empty())
    add_note(info.assumptions, "shape: " + shape_note);
  if (auto mb = leading_number(field(row, "micro_batch")))
    shape.micro_batch = static_cast<int>(*mb);
  if (shape.micro_batch == 0) {
    shape.micro_batch = 1;
    add_note(info.assumptions, "micro-batch 1 assumed (not stated)");
  }
  FitCase f;
  f.ran = row_scenario(row, load_node, shape, info);
  f.info = info;
  f.claim = claim;
  f.expect_fit = !claims_oom(claim);
  if (!f.expect_fit) {
    // "OOM at BS 1" (Accelerate FSDP blog, Table 2: DDP on GPT-2 XL): the configuration as written must be predicted
    // not to fit; there is no larger one to test.
  } else if (size) {
    spec::Scenario twice = f.ran;
    twice.model.layers *= 2;
    twice.name += " at twice the layers";
    f.doubled = twice;
    f.claimed_params = std::stod(*size) * 1e9;
    // The papers' own size ladders grow the layer count at a fixed hidden size around these sizes: ZeRO-Offload
    // Table 3 runs 10B, 11B, 12B, 13B and 15B as 50, 55, 60, 65 and 78 layers of 4096 (published.csv rows 56-59,
    // 69); ZeRO-Infinity Table 4 runs 10B, 13B and 20B as 50, 64 and 98 layers of 4096 (row 101 notes).
    f.family = "layers at hidden " + std::to_string(f.ran.model.hidden) +
               " (the papers' size ladders grow the layer count at a fixed hidden size: ZeRO-Offload Table 3, "
               "ZeRO-Infinity Table 4); heads, micro-batch, sequence, GPUs and offload as ran";
  } else if (max_batch) {
    spec::Scenario twice = f.ran;
    twice.training.micro_batch *= 2;
    twice.training.global_batch *= 2;
    twice.name += " at twice the micro-batch";
    f.doubled = twice;
  }
  into.fits.push_back(std::move(f));
}

} // namespace

std::string to_string(MemMetric m)
{
  switch (m) {
  case MemMetric::ALLOCATED:
    return "allocated";
  case MemMetric::RESERVED:
    return "reserved";
  case MemMetric::DEVICE_USED:
    return "nvidia-smi used (bound)";
  case MemMetric::ESTIMATOR:
    return "estimator";
  }
  return "?";
}

std::optional<double> leading_number(const std::string& text)
{
  std::string t = trim(text);
  if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.'))
    return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str())
    return std::nullopt;
  return v;
}

std::string node_name_for(const std::string& gpu, const std::string& gpu_mem_GB, const std::string& inter_node_network)
{
  auto mem = leading_number(gpu_mem_GB);
  // AWS's A100 instances with Elastic Fabric Adapter: p4d.24xlarge (A100 40 GB) and p4de.24xlarge (A100 80 GB),
  // 4 x 100 Gb/s EFA (topologies/aws-p4d-24xlarge.yaml, aws-p4de-24xlarge.yaml).
  if (contains(gpu, "a100") && !contains(gpu, "pcie") && contains(inter_node_network, "elastic fabric"))
    return mem && *mem < 60 ? "aws-p4d-24xlarge" : "aws-p4de-24xlarge";
  if (contains(gpu, "v100"))
    return mem && *mem < 20 ? "dgx-1v-16gb" : "dgx-2";
  if (contains(gpu, "titan rtx"))
    return "workstation-2x-titan-rtx";
  if (contains(gpu, "3090"))
    return "workstation-rtx3090";
  if (contains(gpu, "a100") && contains(gpu, "pcie"))
    return "workstation-a100-pcie-40gb";
  if (contains(gpu, "a100") && contains(gpu, "azure"))
    return "azure-ndm-a100-v4";
  if (contains(gpu, "a800"))
    return "hgx-a800-80gb";
  if (contains(gpu, "a100"))
    return mem && *mem < 60 ? "dgx-a100-40gb" : "dgx-a100-80gb";
  if (contains(gpu, "h200"))
    return "hgx-h200";
  if (contains(gpu, "h100"))
    return mem && *mem > 90 ? "grand-teton-h100-96gb" : "dgx-h100";
  return "";
}

std::string framework_label(const PublishedRow& row)
{
  if (is_fairscale(row))
    return "FairScale";
  switch (framework_of(row)) {
  case spec::Framework::FSDP:
    return "FSDP";
  case spec::Framework::DDP:
    return "DDP";
  case spec::Framework::DEEPSPEED:
    break;
  }
  return "DeepSpeed";
}

double figure_unit_bytes(const PublishedRow& row)
{
  const std::string& metric = field(row, "mem_metric");
  if (field(row, "provenance") == "estimator")
    return GIB; // DeepSpeed's estimators print bytes / 2**30 (zero-schedule.md §10.2)
  if (contains(metric, "mib") || contains(metric, "gib") || contains(field(row, "peak_mem_GB"), "gib"))
    return GIB;
  if (contains(field(row, "evidence_type"), "log"))
    return GIB; // DeepSpeed see_memory_usage and Megatron print bytes / 2**30 (README trap 7)
  return 1e9;
}

void map_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into)
{
  bool has_mem = !trim(field(row, "peak_mem_GB")).empty();
  bool has_fit = !trim(field(row, "max_model_fit")).empty();
  if (!has_mem && !has_fit) {
    ++into.other_rows;
    return;
  }
  if (has_mem && field(row, "provenance") == "estimator") {
    map_estimator_row(row, into);
    return;
  }
  auto why = exclusions(row);
  if (!why.empty()) {
    std::string reason = joined(why);
    std::string kind = has_mem ? "memory" : claimed_size(field(row, "max_model_fit")) ? "max-model" : "fit";
    into.not_covered.push_back(
        {field(row, "row_id"), field(row, "source_id"), field(row, "model"), kind, reason, framework_label(row)});
    return;
  }
  if (has_mem)
    map_memory_row(row, load_node, into);
  if (has_fit)
    map_fit_row(row, load_node, into);
}

RowMapping map_rows(const std::vector<PublishedRow>& rows, const NodeLoader& load_node)
{
  RowMapping m;
  for (const auto& r : rows)
    map_row(r, load_node, m);
  return m;
}

// ---------------------------------------------------------------------------------------------------
// Time and throughput rows

namespace {

/// The figure columns of a row, in the priority order of the primary figure (docs/validation.md): figures of
/// time first (they do not depend on a FLOP-counting convention), then rates, then TFLOPs and utilisation
/// (README trap 1), and the file's derived step time only when no measured figure can be compared.
const char* const FIGURE_COLUMNS[] = {
    "step_time_s", "samples_per_s", "tokens_per_s_total", "tokens_per_s_per_gpu", "tflops_per_gpu",
    "mfu",         "hfu",           "derived_step_time_s"};

bool is_figure_column_empty(const PublishedRow& row)
{
  for (const char* c : FIGURE_COLUMNS)
    if (!trim(field(row, c)).empty())
      return false;
  return true;
}

/// Which TFLOPs a tflops_per_gpu figure is (README trap 1), and the note saying how that was decided.
TimeMetric tflops_metric(const PublishedRow& row, std::string& note)
{
  std::string inc = lower(trim(field(row, "tflops_includes_recompute")));
  // "not stated" is no answer (it begins with "no", which is one).
  if (inc.rfind("not stated", 0) == 0)
    inc.clear();
  if (inc.rfind("yes", 0) == 0)
    return TimeMetric::TFLOPS_HARDWARE;
  if (inc.rfind("no", 0) == 0)
    return TimeMetric::TFLOPS_MODEL;
  std::string ckpt = lower(trim(field(row, "activation_checkpointing")));
  bool recompute = ckpt.rfind("yes", 0) == 0 || ckpt.rfind("full", 0) == 0 || ckpt.rfind("selective", 0) == 0;
  if (!recompute) {
    note = "definition not stated; without activation checkpointing model and hardware TFLOPs are equal";
    return TimeMetric::TFLOPS_MODEL;
  }
  const std::string& fw = field(row, "framework");
  if (contains(fw, "deepspeed") || contains(fw, "megatron") || contains(fw, "zero")) {
    note = "definition not stated: recompute counted, the DeepSpeed/Megatron convention (README trap 1)";
    return TimeMetric::TFLOPS_HARDWARE;
  }
  // The PyTorch FSDP paper (S13) states no formula; its authors' minGPT benchmark (mrshenli/ptd_benchmark
  // trainer.py calc_flop) uses Megatron's 96·B·s·l·h²(1 + s/6h + V/16lh), which counts the recomputed forward
  // (docs/research/validation-stacks.md, doubt (a); inferred).
  if (field(row, "source_id") == "S13" && contains(lower(field(row, "model")), "mingpt")) {
    note = "definition not stated: recompute counted, as the paper's authors' minGPT benchmark counts it "
           "(ptd_benchmark calc_flop; inferred, docs/research/validation-stacks.md)";
    return TimeMetric::TFLOPS_HARDWARE;
  }
  note = "definition not stated: model FLOPs assumed";
  return TimeMetric::TFLOPS_MODEL;
}

TimeMetric metric_of_column(const std::string& column, const PublishedRow& row, std::string& note)
{
  if (column == "step_time_s")
    return TimeMetric::STEP_TIME;
  if (column == "samples_per_s")
    return TimeMetric::SAMPLES_PER_S;
  if (column == "tokens_per_s_total")
    return TimeMetric::TOKENS_PER_S_TOTAL;
  if (column == "tokens_per_s_per_gpu")
    return TimeMetric::TOKENS_PER_S_PER_GPU;
  if (column == "tflops_per_gpu")
    return tflops_metric(row, note);
  if (column == "mfu")
    return TimeMetric::MFU;
  if (column == "hfu")
    return TimeMetric::HFU;
  return TimeMetric::DERIVED_STEP_TIME;
}

/// A ZeRO-Offload Table 4 row: the optimizer step alone, for a model named by its size.
bool is_cpu_adam_row(const PublishedRow& row)
{
  return contains(field(row, "model"), "optimizer step only");
}

/// Another row of the same source that gives the shape (layers, hidden) of a model of the same size on one GPU.
const PublishedRow* same_size_shape(const PublishedRow& row, const std::vector<PublishedRow>& all)
{
  auto params = plain_number(field(row, "params_B"));
  if (!params)
    return nullptr;
  for (const auto& r : all) {
    if (field(r, "source_id") != field(row, "source_id") || &r == &row)
      continue;
    auto p = plain_number(field(r, "params_B"));
    auto gpus = leading_number(field(r, "total_gpus"));
    if (p && *p == *params && plain_int(field(r, "layers")) && plain_int(field(r, "hidden")) && gpus && *gpus == 1)
      return &r;
  }
  return nullptr;
}

/// The ZeRO-Infinity paper (S04) row whose configuration a "paper config" row of another source reruns: the same
/// layers, hidden size, GPU count and offload devices, with a micro-batch (DeepSpeed issue #1776, rows 117-118,
/// reruns Table 1's 50B and 100B runs, rows 96-97); nullptr when the row is not such a rerun.
const PublishedRow* paper_config_twin(const PublishedRow& row, const std::vector<PublishedRow>& all)
{
  if (!contains(field(row, "model"), "paper config") || field(row, "source_id") == "S04")
    return nullptr;
  for (const auto& r : all) {
    if (field(r, "source_id") != "S04" || !leading_number(field(r, "micro_batch")))
      continue;
    bool same = true;
    for (const char* k : {"layers", "hidden", "total_gpus"})
      same = same && trim(field(r, k)) == trim(field(row, k));
    for (const char* k : {"offload_optimizer", "offload_param"})
      same = same && parse_offload(field(r, k)) == parse_offload(field(row, k));
    if (same)
      return &r;
  }
  return nullptr;
}

/// The inputs a row needs for a throughput comparison that it does not give (empty: all given).
std::vector<std::string> missing_inputs(const PublishedRow& row)
{
  std::vector<std::string> miss;
  if (!dimension_of(field(row, "layers")) || !dimension_of(field(row, "hidden")))
    miss.push_back("model dimensions (layers '" + field(row, "layers") + "', hidden '" + field(row, "hidden") + "')");
  else if (!leading_number(field(row, "heads")))
    miss.push_back("attention heads ('" + field(row, "heads") + "')");
  if (!leading_number(field(row, "micro_batch")))
    miss.push_back("micro-batch per GPU ('" + field(row, "micro_batch") + "')");
  if (!leading_number(field(row, "total_gpus")) &&
      !(leading_number(field(row, "gpus_per_node")) && leading_number(field(row, "nodes"))))
    miss.push_back("GPU count");
  if (node_name_for(field(row, "gpu"), field(row, "gpu_mem_GB"), field(row, "inter_node_network")).empty())
    miss.push_back("a node file for GPU '" + field(row, "gpu") + "'");
  return miss;
}

std::string joined_list(const std::vector<std::string>& items)
{
  std::string out;
  for (const auto& i : items)
    add_note(out, i);
  return out;
}

/// The row with inputs filled in from the source's other rows or stated conventions, each recorded in `notes`.
PublishedRow completed_row(const PublishedRow& row, const std::vector<PublishedRow>& all, std::string& notes)
{
  PublishedRow r = row;
  if (is_cpu_adam_row(row)) {
    // ZeRO-Offload Table 4 times DeepSpeed's CPU-Adam on the optimizer step of a model of each size, on the
    // DGX-2's 2 x Xeon Platinum 8168 host. The model of that size is the one of the paper's Figure 8 (other rows
    // of the file); the run is ZeRO-2 with the optimizer on the CPU (the framework column), one GPU.
    if (const PublishedRow* twin = same_size_shape(row, all)) {
      r["layers"] = field(*twin, "layers");
      r["hidden"] = field(*twin, "hidden");
      add_note(notes, "shape " + field(*twin, "layers") + " x " + field(*twin, "hidden") + " of the " +
                          field(row, "params_B") + "B model of the same paper (published.csv row " +
                          field(*twin, "row_id") + ")");
    }
    r["zero_stage"] = "2";
    r["offload_optimizer"] = "cpu";
    r["micro_batch"] = "1";
    r["grad_accum"] = "1";
    add_note(notes, "ZeRO-2 with CPU optimizer offload on one GPU, micro-batch 1 (the optimizer step does not depend "
                    "on the batch)");
  }
  if (const PublishedRow* paper = paper_config_twin(row, all)) {
    // DeepSpeed issue #1776 (rows 117-118) reruns the ZeRO-Infinity paper's 50B and 100B configurations on one
    // DGX-2 ("paper config"); its scripts are in an attachment the data file does not hold. The batch is the
    // paper's for the same model, offload and GPUs (Table 1).
    for (const char* k : {"micro_batch", "global_batch"})
      if (trim(field(r, k)).empty())
        r[k] = field(*paper, k);
    add_note(notes, "micro-batch " + field(*paper, "micro_batch") + ", global batch " + field(*paper, "global_batch") +
                        " of the paper's configuration (published.csv row " + field(*paper, "row_id") +
                        ", ZeRO-Infinity Table 1): the issue reruns it ('paper config')");
  }
  auto hidden = plain_int(field(r, "hidden"));
  const bool infinity_config = field(row, "source_id") == "S04" || paper_config_twin(row, all) != nullptr;
  if (hidden && !leading_number(field(r, "heads")) && infinity_config) {
    for (const auto& t : INFINITY_HEADS) {
      if (t.hidden == *hidden) {
        r["heads"] = std::to_string(t.heads);
        add_note(notes, "heads not in Table 1: " + std::to_string(t.heads) + " (" + t.citation + ")");
      }
    }
  }
  if (hidden && !leading_number(field(r, "heads"))) {
    // Megatron-LM GPT configurations of these papers use 128-wide heads where stated (ZeRO-Offload 10B: 50 x 4096
    // with 32 heads, published.csv row 213; models/zero-offload-13b.yaml); 64-wide when 128 does not divide h.
    int heads = *hidden % 128 == 0 ? *hidden / 128 : *hidden % 64 == 0 ? *hidden / 64 : 1;
    r["heads"] = std::to_string(heads);
    add_note(notes, "heads not stated: " + std::to_string(heads) + " assumed (head width " +
                        std::to_string(*hidden / heads) + ")");
  }
  return r;
}

/// The figures of a row, primary first; `not_compared` collects the cells that cannot be compared, with why.
std::vector<TimeFigure> figures_of(const PublishedRow& row, std::string& not_compared)
{
  std::vector<TimeFigure> measured;
  std::optional<TimeFigure> derived;
  auto tolerance = chart_tolerance(field(row, "evidence_type"));
  for (const char* column : FIGURE_COLUMNS) {
    const std::string& text = field(row, column);
    if (trim(text).empty())
      continue;
    ParsedFigure p = parse_figure(text);
    if (!p.value) {
      add_note(not_compared, std::string(column) + " '" + text + "': " + p.why_not);
      continue;
    }
    TimeFigure f;
    f.column = column;
    f.written = text;
    f.value = *p.value;
    f.note = p.note;
    std::string def_note;
    f.metric = metric_of_column(column, row, def_note);
    if (p.part == "backward")
      f.metric = TimeMetric::BACKWARD_TIME;
    if (is_cpu_adam_row(row) && f.metric == TimeMetric::STEP_TIME) {
      f.metric = TimeMetric::CPU_ADAM_TIME;
      add_note(f.note, "DeepSpeed CPU-Adam latency of the optimizer step (Table 4; its PyTorch CPU and GPU Adam "
                       "figures, in the notes, time other implementations)");
    }
    if (!def_note.empty())
      add_note(f.note, def_note);
    if ((f.metric == TimeMetric::MFU || f.metric == TimeMetric::HFU) && f.value > 1.5) {
      f.value /= 100;
      add_note(f.note, "written in percent");
    }
    if (p.half_range)
      f.tolerance = *p.half_range;
    else if (tolerance && f.metric != TimeMetric::MFU && f.metric != TimeMetric::HFU)
      f.tolerance = *tolerance;
    if (f.metric == TimeMetric::DERIVED_STEP_TIME) {
      add_note(f.note, "derived by the file from measured throughput, not measured");
      derived = f;
    } else {
      measured.push_back(f);
    }
  }
  if (derived && contains(field(row, "notes"), "upper bound")) {
    // Row 634 (Llama 2 70B FSDP blog): "~13.5 h for 500 steps (incl. eval every 100 & 2 ckpt saves)"; the file's
    // notes: the derived step time "is an upper bound (includes eval/checkpoint time)" of unknown share.
    add_note(not_compared, "derived_step_time_s '" + derived->written +
                               "': an upper bound including evaluation and checkpointing (the row's notes), not "
                               "a step time");
    derived.reset();
  }
  if (measured.empty() && derived)
    measured.push_back(*derived);
  else if (derived)
    add_note(not_compared, "derived_step_time_s '" + derived->written + "': not used, a measured figure exists");
  // A samples/s figure printed as a whole number beside a tokens/s figure of the same run (the llm-foundry
  // tables round "Throughput (S/s)" to integers: "3" stands for 2.5-3.5, "0" for a fraction) gives way to the
  // tokens/s figure, the same measurement to 5-6 significant digits; it is still compared, after it.
  auto samples = std::find_if(measured.begin(), measured.end(),
                              [](const TimeFigure& f) { return f.metric == TimeMetric::SAMPLES_PER_S; });
  auto tokens = std::find_if(measured.begin(), measured.end(), [](const TimeFigure& f) {
    return f.metric == TimeMetric::TOKENS_PER_S_TOTAL || f.metric == TimeMetric::TOKENS_PER_S_PER_GPU;
  });
  if (samples != measured.end() && tokens != measured.end() && samples < tokens && plain_int(samples->written)) {
    TimeFigure moved = *samples;
    add_note(moved.note, "printed as a whole number (rounded); the tokens/s figure is the primary one");
    measured.erase(samples);
    auto after = std::find_if(measured.begin(), measured.end(), [](const TimeFigure& f) {
      return f.metric == TimeMetric::TOKENS_PER_S_TOTAL || f.metric == TimeMetric::TOKENS_PER_S_PER_GPU;
    });
    measured.insert(after + 1, moved);
  }
  return measured;
}

} // namespace

std::string to_string(TimeMetric m)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
    return "step time";
  case TimeMetric::SAMPLES_PER_S:
    return "samples/s";
  case TimeMetric::TOKENS_PER_S_TOTAL:
    return "tokens/s (all GPUs)";
  case TimeMetric::TOKENS_PER_S_PER_GPU:
    return "tokens/s per GPU";
  case TimeMetric::TFLOPS_MODEL:
    return "TFLOPs/GPU (model)";
  case TimeMetric::TFLOPS_HARDWARE:
    return "TFLOPs/GPU (hardware)";
  case TimeMetric::MFU:
    return "MFU";
  case TimeMetric::HFU:
    return "HFU";
  case TimeMetric::DERIVED_STEP_TIME:
    return "step time (derived)";
  case TimeMetric::BACKWARD_TIME:
    return "backward time";
  case TimeMetric::CPU_ADAM_TIME:
    return "CPU-Adam step";
  }
  return "?";
}

std::string unit_of(TimeMetric m)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
  case TimeMetric::DERIVED_STEP_TIME:
  case TimeMetric::BACKWARD_TIME:
  case TimeMetric::CPU_ADAM_TIME:
    return "s";
  case TimeMetric::SAMPLES_PER_S:
    return "samples/s";
  case TimeMetric::TOKENS_PER_S_TOTAL:
  case TimeMetric::TOKENS_PER_S_PER_GPU:
    return "tokens/s";
  case TimeMetric::TFLOPS_MODEL:
  case TimeMetric::TFLOPS_HARDWARE:
    return "TFLOPs";
  case TimeMetric::MFU:
  case TimeMetric::HFU:
    return "";
  }
  return "";
}

std::string definition_of(TimeMetric m)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
    return "seconds per optimizer step";
  case TimeMetric::SAMPLES_PER_S:
    return "global batch / step time";
  case TimeMetric::TOKENS_PER_S_TOTAL:
    return "global batch x sequence / step time";
  case TimeMetric::TOKENS_PER_S_PER_GPU:
    return "tokens/s over the GPU count";
  case TimeMetric::TFLOPS_MODEL:
    return "model FLOPs (no recompute) per step / step time / GPU";
  case TimeMetric::TFLOPS_HARDWARE:
    return "FLOPs with the recomputed forward per step / step time / GPU";
  case TimeMetric::MFU:
    return "model TFLOPs over dense peak";
  case TimeMetric::HFU:
    return "hardware TFLOPs over dense peak";
  case TimeMetric::DERIVED_STEP_TIME:
    return "seconds per step, derived by the file from throughput (not measured)";
  case TimeMetric::BACKWARD_TIME:
    return "first backward or recompute task start to last backward, recompute or gradient-reduce task end, rank 0";
  case TimeMetric::CPU_ADAM_TIME:
    return "sum of rank 0's CPU-Adam update tasks";
  }
  return "";
}

bool is_component(TimeMetric m)
{
  return m == TimeMetric::BACKWARD_TIME || m == TimeMetric::CPU_ADAM_TIME;
}

bool is_time(TimeMetric m)
{
  switch (m) {
  case TimeMetric::STEP_TIME:
  case TimeMetric::DERIVED_STEP_TIME:
  case TimeMetric::BACKWARD_TIME:
  case TimeMetric::CPU_ADAM_TIME:
    return true;
  case TimeMetric::SAMPLES_PER_S:
  case TimeMetric::TOKENS_PER_S_TOTAL:
  case TimeMetric::TOKENS_PER_S_PER_GPU:
  case TimeMetric::TFLOPS_MODEL:
  case TimeMetric::TFLOPS_HARDWARE:
  case TimeMetric::MFU:
  case TimeMetric::HFU:
    return false;
  }
  return false;
}

ParsedFigure parse_figure(const std::string& text)
{
  ParsedFigure p;
  std::string t = trim(text);
  if (t.empty())
    return p;
  static const std::string NUM = R"(([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?))";
  static const std::regex single("^(~?)\\s*" + NUM + R"(\s*(?:\((.*)\))?$)");
  static const std::regex range("^" + NUM + R"(\s*-\s*)" + NUM + "$");
  static const std::regex backward(R"(^backward only:\s*)" + NUM + "$", std::regex::icase);
  std::smatch m;
  if (std::regex_match(t, m, backward)) {
    p.value = std::stod(m.str(1));
    p.part = "backward";
    p.note = "backward pass only";
    return p;
  }
  if (std::regex_match(t, m, range)) {
    double lo = std::stod(m.str(1)), hi = std::stod(m.str(2));
    p.value = (lo + hi) / 2;
    p.half_range = std::abs(hi - lo) / 2;
    p.note = "midpoint of the printed range " + t;
    return p;
  }
  if (std::regex_match(t, m, single)) {
    std::string remark = m.str(3);
    if (contains(remark, "failed")) {
      p.why_not = "the run failed at the source (no throughput to compare)";
      return p;
    }
    if (contains(remark, "ambiguous") || contains(remark, "as printed")) {
      p.why_not = "the source's columns are ambiguous (" + remark + ")";
      return p;
    }
    if (std::stod(m.str(2)) == 0) {
      p.why_not = "a zero figure";
      return p;
    }
    p.value = std::stod(m.str(2));
    if (!m.str(1).empty())
      p.note = "approximate ('~' in the source)";
    if (!remark.empty())
      add_note(p.note, "the source adds: " + remark);
    return p;
  }
  if (contains(t, "epoch"))
    p.why_not = "a time per epoch, and the row does not give the samples per epoch";
  else if (contains(t, " for ") && contains(t, "samples"))
    p.why_not = "a total time for a number of samples, not a step time";
  else if (contains(t, "up to"))
    p.why_not = "an upper bound over configurations ('up to'), not one measurement";
  else if (contains(t, " or "))
    p.why_not = "two candidate values (ambiguous)";
  else if (t.find(';') != std::string::npos || t.find(':') != std::string::npos)
    p.why_not = "several values for different configurations in one cell";
  else
    p.why_not = "not one number";
  return p;
}

std::optional<double> chart_tolerance(const std::string& evidence_type)
{
  static const std::regex re(R"(\+/-\s*([0-9]+(?:\.[0-9]+)?))");
  std::smatch m;
  if (std::regex_search(evidence_type, m, re))
    return std::stod(m.str(1));
  return std::nullopt;
}

void map_throughput_row(const PublishedRow& row, const std::vector<PublishedRow>& all, const NodeLoader& load_node,
                        ThroughputMapping& into)
{
  RowInfo info = info_of(row);
  auto not_covered = [&](const char* category, const std::string& reason) {
    into.not_covered.push_back({info.row_id, info.source_id, info.model, category, reason, info.framework});
  };
  if (is_figure_column_empty(row)) {
    std::string what = field(row, "provenance") == "estimator" ? "a DeepSpeed estimator output (memory.md compares it)"
                       : !trim(field(row, "peak_mem_GB")).empty() || !trim(field(row, "max_model_fit")).empty()
                           ? "only a memory figure or a fit statement (memory.md compares it)"
                           : "no figure at all";
    not_covered(CAT_NO_FIGURE, "the row has " + what);
    return;
  }
  std::string notes;
  const PublishedRow r = completed_row(row, all, notes);
  std::vector<Exclusion> why = exclusions(r);
  if (field(r, "source_id") == "S12" && contains(field(r, "locator"), "ZERO_STAGE=0/1"))
    why.push_back({CAT_TRAP5, "the BLOOM 'Trying with ZeRO_STAGE=0/1' table's time and TFLOPs columns look swapped; "
                              "only its memory values are used (README trap 5)"});
  if (!why.empty()) {
    not_covered(why.front().category, joined(why));
    return;
  }
  auto missing = missing_inputs(r);
  if (field(r, "completeness") == "C") {
    std::string reason = "graded C by the data file (headline figures without the batch or model dimensions needed)";
    if (!missing.empty())
      reason += ": no " + joined_list(missing);
    else
      reason += "; the row's notes: " +
                (field(r, "notes").size() > 240 ? field(r, "notes").substr(0, 240) + "..." : field(r, "notes"));
    // A figure that could not be compared anyway is named too (row 633: a time per epoch).
    std::string not_compared;
    if (figures_of(r, not_compared).empty() && !not_compared.empty())
      reason += "; nor is its figure comparable: " + not_compared;
    not_covered(CAT_C, reason);
    return;
  }
  if (!missing.empty()) {
    bool node_only = missing.size() == 1 && missing.front().rfind("a node file", 0) == 0;
    not_covered(node_only ? CAT_NODE : CAT_INPUTS, "not given: " + joined_list(missing));
    return;
  }
  std::string not_compared;
  std::vector<TimeFigure> figures = figures_of(r, not_compared);
  if (figures.empty()) {
    not_covered(CAT_FIGURE, not_compared);
    return;
  }

  // missing_inputs() lets no row without layers, hidden, heads or micro-batch through.
  const Shape shape = *shape_of(r, notes);
  ThroughputCase c;
  c.info = info;
  c.info.assumptions = notes;
  c.scenario = row_scenario(r, load_node, shape, c.info);
  c.figures = std::move(figures);
  c.evidence = field(r, "evidence_type");
  c.completeness = field(r, "completeness");
  c.not_compared = not_compared;
  into.cases.push_back(std::move(c));
}

ThroughputMapping map_throughput_rows(const std::vector<PublishedRow>& rows, const NodeLoader& load_node)
{
  ThroughputMapping m;
  for (const auto& r : rows) {
    try {
      map_throughput_row(r, rows, load_node, m);
    } catch (const core::InputError& e) {
      m.not_covered.push_back({field(r, "row_id"), field(r, "source_id"), field(r, "model"), CAT_INPUTS,
                               std::string("the row cannot be mapped: ") + e.what(), framework_label(r)});
    }
  }
  return m;
}

NodeLoader node_loader_near(const std::string& csv)
{
  namespace fs = std::filesystem;
  fs::path p = fs::absolute(fs::path(csv)).parent_path();
  std::vector<fs::path> candidates = {p, p.parent_path(), p.parent_path().parent_path(), fs::current_path(),
                                      fs::path(ZEROSIM_DATA_DIR)};
  for (const auto& c : candidates) {
    if (fs::is_directory(c / "topologies")) {
      std::string dir = (c / "topologies").string();
      return [dir](const std::string& name) { return config::load_node(dir + "/" + name + ".yaml"); };
    }
  }
  throw core::InputError(csv + ": no topologies/ folder found near the file, in the current directory or in " +
                         std::string(ZEROSIM_DATA_DIR));
}

namespace {

std::string read_text_file(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw core::InputError(path + ": cannot read the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "3-4;6-11;13" -> {3, 4, 6, ..., 11, 13}.
std::vector<long> row_ranges(const std::string& text, const std::string& where)
{
  std::vector<long> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ';')) {
    part = trim(part);
    const std::size_t dash = part.find('-');
    char* end = nullptr;
    const long a = std::strtol(part.c_str(), &end, 10);
    long b = a;
    bool ok = !part.empty() && end != part.c_str();
    if (ok && dash != std::string::npos) {
      const std::string tail = part.substr(dash + 1);
      char* e2 = nullptr;
      b = std::strtol(tail.c_str(), &e2, 10);
      ok = e2 != tail.c_str() && *e2 == '\0' && b >= a;
    } else if (ok) {
      ok = *end == '\0';
    }
    if (!ok)
      throw core::InputError(where + ": rows: expected row ids and ranges such as 3-4;6, found \"" + text + "\"");
    for (long r = a; r <= b; ++r)
      out.push_back(r);
  }
  return out;
}

} // namespace

std::vector<PublishedRow> read_published_rows(const std::string& csv)
{
  CsvTable table = CsvTable::parse(read_text_file(csv), csv);
  std::vector<PublishedRow> rows;
  for (std::size_t i = 0; i < table.size(); ++i)
    rows.push_back(table.record(i));
  const std::string stacks_path = (std::filesystem::path(csv).parent_path() / "stacks.csv").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(stacks_path, ec))
    return rows;
  CsvTable stacks = CsvTable::parse(read_text_file(stacks_path), stacks_path);
  std::map<long, std::size_t> index;
  for (std::size_t i = 0; i < rows.size(); ++i)
    index[std::strtol(rows[i]["row_id"].c_str(), nullptr, 10)] = i;
  std::map<long, std::size_t> listed; // row id -> line of stacks.csv
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    const std::string where = stacks_path + ":" + std::to_string(i + 2);
    const std::string attention = stacks.get(i, "attention");
    if (!spec::attention_kernel(attention))
      throw core::InputError(where + ": attention: expected one of scenario-format.md's kernels, found \"" + attention +
                             "\"");
    const std::string compile = stacks.get(i, "compile");
    if (compile != "true" && compile != "false")
      throw core::InputError(where + ": compile: expected true or false, found \"" + compile + "\"");
    const std::string status = stacks.get(i, "status");
    if (status != "quoted" && status != "inferred")
      throw core::InputError(where + ": status: expected quoted or inferred, found \"" + status + "\"");
    const std::string torch = stacks.get(i, "torch");
    if (!spec::torch_generation(torch))
      throw core::InputError(where + ": torch: expected major.minor, found \"" + torch + "\"");
    for (long id : row_ranges(stacks.get(i, "rows"), where)) {
      if (listed.count(id))
        throw core::InputError(where + ": row " + std::to_string(id) + " is already listed on line " +
                               std::to_string(listed[id] + 2));
      listed[id] = i;
      auto it = index.find(id);
      if (it == index.end())
        throw core::InputError(where + ": row " + std::to_string(id) + " is not in " + csv);
      PublishedRow& row = rows[it->second];
      row["stack.attention"] = attention;
      row["stack.torch"] = torch;
      row["stack.compile"] = compile;
      row["stack.status"] = status;
    }
  }
  return rows;
}

std::map<std::string, RowCause> read_row_causes(const std::string& csv, const std::vector<PublishedRow>& rows)
{
  std::map<std::string, RowCause> out;
  const std::string path = (std::filesystem::path(csv).parent_path() / "causes.csv").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return out;
  std::map<std::string, std::string> source_of; // row id -> source id
  for (const PublishedRow& r : rows)
    source_of[r.at("row_id")] = r.count("source_id") ? r.at("source_id") : "";
  CsvTable t = CsvTable::parse(read_text_file(path), path);
  std::map<std::string, std::size_t> listed;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::string where = path + ":" + std::to_string(i + 2);
    RowCause c{t.get(i, "kind"), t.get(i, "cause"), t.get(i, "evidence")};
    if (c.kind != "mechanism" && c.kind != "data" && c.kind != "unknown")
      throw core::InputError(where + ": kind: expected mechanism, data or unknown, found \"" + c.kind + "\"");
    if (trim(c.cause).empty())
      throw core::InputError(where + ": cause: expected one line of cause, found an empty field");
    const std::string source = t.get(i, "source_id");
    for (long n : row_ranges(t.get(i, "rows"), where)) {
      const std::string id = std::to_string(n);
      auto it = source_of.find(id);
      if (it == source_of.end())
        throw core::InputError(where + ": row " + id + " is not in " + csv);
      if (it->second != source)
        throw core::InputError(where + ": source_id: row " + id + " is " + it->second + "'s, found \"" + source + "\"");
      if (listed.count(id))
        throw core::InputError(where + ": row " + id + " is already listed on line " + std::to_string(listed[id] + 2));
      listed[id] = i;
      out[id] = c;
    }
  }
  return out;
}

spec::SoftwareSpec software_of(const PublishedRow& row)
{
  spec::SoftwareSpec sw;
  auto it = row.find("stack.attention");
  if (it == row.end()) {
    // Not in stacks.csv: today's stack, unstated; V100 and Turing GPUs have no FlashAttention kernels and the
    // PyTorch runs that used one say so (flash_attention_of).
    sw.attention = flash_attention_of(row) ? spec::AttentionKernel::FLASH2 : spec::AttentionKernel::EAGER;
    return sw;
  }
  const std::optional<spec::AttentionKernel> kernel = spec::attention_kernel(it->second);
  if (!kernel) // read_published_rows checked it
    throw core::InternalError("software_of: row " + field(row, "row_id") + ": unknown attention \"" + it->second +
                              "\"");
  sw.attention = *kernel;
  sw.torch = row.at("stack.torch");
  sw.compile = row.at("stack.compile") == "true";
  sw.stated = true;
  return sw;
}

} // namespace zerosim::validation
