#include "validation/published_rows.hpp"
#include "spec/names.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

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
  const char* size;        ///< as the max_model_fit column writes it, e.g. "13B"
  int layers;
  int hidden;
  int heads;
  int micro_batch;         ///< 0: take the row's
  const char* citation;
};

// ZeRO-Infinity (S04) Table 4, as quoted in the notes of published.csv rows 101-107; ZeRO-Offload (S03)
// Table 3, as in published.csv rows 59 and 73 (micro-batch: the largest that fits, Table 3).
constexpr PaperShape PAPER_SHAPES[] = {
    {"S04", "1.4B", 40, 1536, 16, 0, "ZeRO-Infinity Table 4 (published.csv row 101 notes): 40 layers x 1536, 16 heads"},
    {"S04", "10B", 50, 4096, 16, 0, "ZeRO-Infinity Table 4 (published.csv row 102 notes): 50 layers x 4096, 16 heads"},
    {"S04", "20B", 98, 4096, 32, 0, "ZeRO-Infinity Table 4 (published.csv row 105 notes): 98 layers x 4096, 32 heads"},
    {"S03", "13B", 65, 4096, 32, 4,
     "ZeRO-Offload Table 3 (published.csv row 59): 65 layers x 4096, micro-batch 4 on one GPU; heads not stated, "
     "32 = hidden/128 assumed (as models/zero-offload-13b.yaml)"},
    {"S03", "70B", 69, 9216, 72, 8,
     "ZeRO-Offload Table 3 (published.csv row 73): 69 layers x 9216, micro-batch 8; heads not stated, 72 = hidden/128 "
     "assumed (as models/zero-offload-70b.yaml)"},
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

/// Reasons why a row cannot be expressed yet (empty: it can). Trap numbers refer to shared/validation/README.md.
std::vector<std::string> exclusions(const PublishedRow& row)
{
  std::vector<std::string> why;
  const std::string& model = field(row, "model");
  const std::string& stage = field(row, "zero_stage");
  const std::string& framework = field(row, "framework");
  const std::string& other = field(row, "other_parallel");
  if (!trim(field(row, "fsdp_sharding")).empty() || contains(stage, "equivalent") || contains(framework, "fsdp") ||
      contains(framework, "ddp"))
    why.push_back("PyTorch FSDP/DDP run: the FSDP and DDP schedules are not built yet (issue 4)");
  if (contains(stage, "fairscale") || contains(framework, "fairscale"))
    why.push_back("FairScale sharded DDP (OSS/SDP) is not modelled");
  auto tp = leading_number(field(row, "tp"));
  auto pp = leading_number(field(row, "pp"));
  if ((tp && *tp > 1) || (pp && *pp > 1) || contains(stage, "mp"))
    why.push_back("tensor/pipeline parallelism (tp " + trim(field(row, "tp")) + ", pp " + trim(field(row, "pp")) +
                  (contains(stage, "mp") ? ", " + stage : "") + ") is not modelled yet (README trap 6)");
  if (contains(field(row, "precision"), "float8") || contains(field(row, "precision"), "fp8") ||
      contains(other, "float8") || contains(other, "cp ") || contains(other, "context parallel"))
    why.push_back("FP8 / context parallelism is not modelled (README trap 4)");
  static const char* const NOT_DECODER[] = {"t5", "t0_", "deberta", "blenderbot", "bart", "bert"};
  for (const char* name : NOT_DECODER) {
    if (contains(model, name)) {
      why.push_back("encoder-decoder or encoder-only model (" + model +
                    "): not expressible as a decoder-only transformer (README trap 8)");
      break;
    }
  }
  if (contains(field(row, "max_model_fit"), "tiling"))
    why.push_back("the limit measured is memory-centric tiling under GPU memory pre-fragmented into 2 GB chunks (the "
                  "largest contiguous allocation); the memory model has neither tiling nor a fragmentation limit");
  if (why.empty()) {
    auto s = plain_int(stage);
    if (!s || *s < 0 || *s > 3)
      why.push_back("ZeRO stage '" + stage + "' is not one DeepSpeed stage");
  }
  return why;
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
  auto vocab = plain_int(field(row, "vocab"));
  if (vocab) {
    m.vocab = *vocab;
  } else if (contains(field(row, "framework"), "megatron") || contains(field(row, "framework"), "zero")) {
    m.vocab = 50304; // GPT-2 BPE 50,257 padded by Megatron-LM to a multiple of 128 (--make-vocab-size-divisible-by 128)
    add_note(notes, "vocab 50304 (GPT-2 BPE padded by Megatron-LM)");
  } else {
    m.vocab = 50257; // GPT-2 BPE as Hugging Face's gpt2 configs give it
    add_note(notes, "vocab 50257 (Hugging Face GPT-2)");
  }
  m.source = "published.csv row " + field(row, "row_id");
  return m;
}

/// The node for a row: the topology file, with the row's GPU or host memory where it differs from the file.
spec::NodeSpec node_for(const PublishedRow& row, const NodeLoader& load_node, std::string& notes)
{
  std::string name = node_name_for(field(row, "gpu"), field(row, "gpu_mem_GB"));
  spec::NodeSpec node = load_node(name);
  add_note(notes, "node topologies/" + name + ".yaml");
  // GPU memory: row figures are GB as marketed (HBM sizes are binary: a "32 GB" V100 has 32 GiB); override only
  // when neither reading of the row's figure is within 3 % of the node file's.
  auto differs = [](double row_value, std::int64_t node_bytes) {
    auto off = [&](double bytes) { return std::abs(bytes - static_cast<double>(node_bytes)) / static_cast<double>(node_bytes); };
    return node_bytes > 0 && off(row_value * GIB) > 0.03 && off(row_value * 1e9) > 0.03;
  };
  if (auto g = leading_number(field(row, "gpu_mem_GB")); g && differs(*g, node.gpu.memory_bytes)) {
    node.gpu.memory_bytes = static_cast<std::int64_t>(*g * GIB);
    add_note(notes, "GPU memory " + trim(field(row, "gpu_mem_GB")) + " GiB (row) over the node file's");
  }
  const std::string& cpu_text = field(row, "cpu_mem_per_node_GB");
  if (auto c = leading_number(cpu_text); c && differs(*c, node.cpu.memory_bytes)) {
    node.cpu.memory_bytes = static_cast<std::int64_t>(*c * GIB);
    static const std::regex usable_re(R"((\d+(?:\.\d+)?)\s*usable)");
    std::smatch um;
    if (std::regex_search(cpu_text, um, usable_re))
      node.cpu.reserved_bytes = node.cpu.memory_bytes - static_cast<std::int64_t>(std::stod(um.str(1)) * GIB);
    add_note(notes, "host memory " + trim(cpu_text) + " GiB (row) over the node file's");
  }
  return node;
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
  if (t.empty())
    add_note(notes, "activation checkpointing not stated: none assumed");
  return spec::Checkpointing::NONE;
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

struct Shape {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int micro_batch = 0;
};

struct BuildInputs {
  Shape shape;
  int seq_len = 0;
  int total_gpus = 0;
  int stage = 0;
};

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
  s.cluster.network.nic_bandwidth_Bps = node.nics.bandwidth_Bps;
  s.cluster.network.nics_per_node = node.nics.count;

  s.training.seq_len = in.seq_len;
  s.training.micro_batch = in.shape.micro_batch;
  auto ga = plain_int(field(row, "grad_accum"));
  s.training.grad_accum = ga ? *ga : 1;
  s.training.global_batch = static_cast<std::int64_t>(s.training.micro_batch) * s.training.grad_accum * in.total_gpus;
  s.training.precision = parse_precision(field(row, "precision"), info.assumptions);
  s.training.activation_checkpointing = parse_checkpointing(field(row, "activation_checkpointing"), info.assumptions);
  // V100 and Turing GPUs have no FlashAttention kernels, and the Megatron-LM/HF code of these runs predates it.
  s.training.flash_attention = false;
  s.training.optimizer = spec::Optimizer::ADAM;
  s.training.mode = spec::Mode::TRAIN;

  s.framework = spec::Framework::DEEPSPEED;
  s.deepspeed_version = "0.19";
  s.deepspeed.zero = zero_for(row, in.stage, info.assumptions);
  s.deepspeed.communication_data_type = model_dtype(s.training.precision); // §1.3: model dtype unless given
  s.deepspeed.grad_accum_dtype = model_dtype(s.training.precision);

  info.stage = in.stage;
  const auto& z = s.deepspeed.zero;
  info.offload = z.offload_optimizer.device == spec::OffloadDevice::NONE && z.offload_param.device == spec::OffloadDevice::NONE
                     ? "none"
                     : "opt " + std::string(spec::to_string(z.offload_optimizer.device)) + " + param " + std::string(spec::to_string(z.offload_param.device));
  std::ostringstream cfg;
  cfg << "ZeRO-" << in.stage;
  if (info.offload != "none")
    cfg << " (" << info.offload << ")";
  cfg << ", " << in.total_gpus << " x " << node.gpu.model << ", " << s.model.layers << "x" << s.model.hidden
      << ", mb " << s.training.micro_batch << ", seq " << in.seq_len << ", "
      << spec::to_string(s.training.precision) << ", ckpt "
      << (s.training.activation_checkpointing == spec::Checkpointing::FULL        ? "full"
          : s.training.activation_checkpointing == spec::Checkpointing::SELECTIVE ? "selective"
                                                                                  : "none");
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
    into.not_covered.push_back({info.row_id, info.source_id, model, "memory", why});
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
    add_note(c.info.assumptions, "memory.rst prints the older ZeRO-2 formula 4P + 16P/N; the current code gives 2P + 18P/N");
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

void map_memory_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into)
{
  RowInfo info = info_of(row);
  auto figure = plain_number(field(row, "peak_mem_GB"));
  auto metric = metric_of(field(row, "mem_metric"));
  auto layers = plain_int(field(row, "layers"));
  auto hidden = plain_int(field(row, "hidden"));
  auto heads = leading_number(field(row, "heads"));
  auto mb = leading_number(field(row, "micro_batch"));
  std::string why;
  if (!figure)
    why = "figure '" + field(row, "peak_mem_GB") + "' is not one number for one configuration";
  else if (!metric)
    why = "memory metric '" + field(row, "mem_metric") +
          "' is none the model predicts (torch allocated, reserved, nvidia-smi used)";
  else if (!layers || !hidden || !heads)
    why = "model dimensions not given ('" + info.model + "')";
  else if (!mb)
    why = "micro-batch not given";
  else if (node_name_for(field(row, "gpu"), field(row, "gpu_mem_GB")).empty())
    why = "no node file for GPU '" + field(row, "gpu") + "'";
  if (!why.empty()) {
    into.not_covered.push_back({info.row_id, info.source_id, info.model, "memory", why});
    return;
  }
  BuildInputs in;
  in.shape = {*layers, *hidden, static_cast<int>(*heads), static_cast<int>(*mb)};
  in.seq_len = seq_len_of(row, info.assumptions);
  in.total_gpus = total_gpus(row, info.assumptions);
  in.stage = *plain_int(field(row, "zero_stage"));
  MemoryCase c;
  c.scenario = build_scenario(row, load_node, in, info);
  c.info = info;
  c.metric = *metric;
  c.metric_text = field(row, "mem_metric");
  double unit = figure_unit_bytes(row);
  c.unit = unit == GIB ? "GiB" : "GB";
  c.measured_bytes = *figure * unit;
  // A second figure in the same metric text: "torch max allocated (rank 0); max reserved 18.84 GB".
  static const std::regex reserved_re(R"(max reserved\s+(\d+(?:\.\d+)?))");
  std::smatch rm;
  std::string metric_text = c.metric_text;
  bool second = c.metric == MemMetric::ALLOCATED && std::regex_search(metric_text, rm, reserved_re);
  MemoryCase reserved = c;
  into.memory.push_back(std::move(c));
  if (second) {
    reserved.metric = MemMetric::RESERVED;
    reserved.measured_bytes = std::stod(rm.str(1)) * unit;
    into.memory.push_back(std::move(reserved));
  }
}

void map_fit_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into)
{
  RowInfo info = info_of(row);
  const std::string& claim = field(row, "max_model_fit");
  auto size = claimed_size(claim);
  bool max_batch = contains(claim, "max bs");
  std::string kind = size ? "max-model" : "fit";
  auto stage = *plain_int(field(row, "zero_stage"));
  std::string why;
  if (node_name_for(field(row, "gpu"), field(row, "gpu_mem_GB")).empty())
    why = "no node file for GPU '" + field(row, "gpu") + "'";
  Shape shape;
  std::string shape_note;
  auto layers = plain_int(field(row, "layers"));
  auto hidden = plain_int(field(row, "hidden"));
  auto heads = leading_number(field(row, "heads"));
  if (layers && hidden && heads) {
    shape = {*layers, *hidden, static_cast<int>(*heads), 0};
  } else if (size) {
    // At stage 0-2 every GPU holds all 16-bit parameters: a size whose fp16 parameters alone exceed one GPU
    // cannot have run without model parallelism (ZeRO-Offload Table 3 marks its 15B+ runs "with MP").
    double params = std::stod(*size) * 1e9;
    auto gpu_gib = leading_number(field(row, "gpu_mem_GB"));
    if (why.empty() && stage < 3 && gpu_gib && 2.0 * params > *gpu_gib * GIB) {
      std::ostringstream os;
      os << "the " << *size << " model's fp16 parameters alone (" << std::round(2.0 * params / GIB)
         << " GiB) exceed one " << *gpu_gib << " GB GPU at ZeRO stage " << stage
         << " (parameters replicated), so the run used model parallelism, which is not modelled yet";
      why = os.str();
    }
    for (const auto& p : PAPER_SHAPES) {
      if (field(row, "source_id") == p.source_id && *size == p.size) {
        shape = {p.layers, p.hidden, p.heads, p.micro_batch};
        shape_note = p.citation;
      }
    }
    if (why.empty() && shape.layers == 0)
      why = "no published shape (layers, hidden) for the " + *size + " model of '" + claim + "'";
  } else if (why.empty()) {
    why = "model dimensions not given ('" + info.model + "')";
  }
  if (!why.empty()) {
    into.not_covered.push_back({info.row_id, info.source_id, info.model, kind, why});
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
  BuildInputs in;
  in.shape = shape;
  in.seq_len = seq_len_of(row, info.assumptions);
  in.total_gpus = total_gpus(row, info.assumptions);
  in.stage = stage;
  FitCase f;
  f.ran = build_scenario(row, load_node, in, info);
  f.info = info;
  f.claim = claim;
  if (size) {
    spec::Scenario twice = f.ran;
    twice.model.layers *= 2;
    twice.name += " at twice the layers";
    f.doubled = twice;
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

std::string node_name_for(const std::string& gpu, const std::string& gpu_mem_GB)
{
  auto mem = leading_number(gpu_mem_GB);
  if (contains(gpu, "v100"))
    return mem && *mem < 20 ? "dgx-1v-16gb" : "dgx-2";
  if (contains(gpu, "titan rtx"))
    return "workstation-2x-titan-rtx";
  if (contains(gpu, "3090"))
    return "workstation-rtx3090";
  if (contains(gpu, "a100") && contains(gpu, "pcie"))
    return "workstation-a100-pcie-40gb";
  if (contains(gpu, "a100"))
    return mem && *mem < 60 ? "dgx-a100-40gb" : "dgx-a100-80gb";
  if (contains(gpu, "h200"))
    return "hgx-h200";
  if (contains(gpu, "h100"))
    return mem && *mem > 90 ? "grand-teton-h100-96gb" : "dgx-h100";
  return "";
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
    std::string reason;
    for (const auto& w : why)
      add_note(reason, w);
    std::string kind = has_mem ? "memory" : claimed_size(field(row, "max_model_fit")) ? "max-model" : "fit";
    into.not_covered.push_back({field(row, "row_id"), field(row, "source_id"), field(row, "model"), kind, reason});
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

} // namespace zerosim::validation
