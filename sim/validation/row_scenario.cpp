// The scenario of a published row: model, node, network, framework, precision and batch (docs/validation.md,
// "Building the scenario from a row").
#include "spec/names.hpp"
#include "validation/row_mapping.hpp"

#include "config/scenario_loader.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace zerosim::validation::detail {

/// The model of a row: the shape it states, the layout of its model family and the conventions of its framework
/// where the row gives no FFN width, vocabulary or loss (the general rules' model_layouts and frameworks), each such
/// input noted.
spec::ModelSpec model_from_shape(const PublishedRow& row, const Shape& shape, int seq_len,
                                 const spec::GeneralRules& rules, std::string& notes)
{
  spec::ModelSpec m;
  m.name = field(row, "model");
  m.layers = shape.layers;
  m.hidden = shape.hidden;
  m.heads = shape.heads;
  m.kv_heads = shape.heads;
  static const std::regex kv_re(R"((\d+)\s*KV)");
  std::smatch km;
  const std::string& heads_text = field(row, "heads");
  if (std::regex_search(heads_text, km, kv_re))
    m.kv_heads = std::stoi(km.str(1));
  const spec::ModelLayout& layout = model_layout(m.name, rules);
  const spec::FrameworkConvention& fw = framework_convention(row, rules);
  if (auto ffn = leading_number(field(row, "ffn_hidden"))) {
    m.ffn_hidden = static_cast<int>(*ffn);
  } else {
    const spec::FfnWidthRule& w = layout.ffn_hidden;
    m.ffn_hidden = (w.times * m.hidden / w.over + w.multiple_of - 1) / w.multiple_of * w.multiple_of;
    if (!w.note.empty())
      add_note(notes, "ffn " + std::to_string(m.ffn_hidden) + " (" + w.note + ")");
  }
  m.ffn = layout.ffn;
  m.norm = layout.norm;
  m.position = layout.position;
  m.bias = layout.bias;
  m.tied_embeddings = layout.tied_embeddings;
  m.max_position = layout.max_position_seq_len ? std::max(layout.max_position_at_least, seq_len) : 0;
  m.dropout = layout.dropout;
  if (!layout.note.empty())
    add_note(notes, layout.note);
  if (auto vocab = plain_int(field(row, "vocab"))) {
    m.vocab = *vocab;
  } else {
    m.vocab = layout.vocab.value_or(fw.vocab);
    add_note(notes,
             "vocab " + std::to_string(m.vocab) + " (" + (layout.vocab ? layout.vocab_note : fw.vocab_note) + ")");
  }
  if (!layout.loss && fw.loss) {
    m.loss = *fw.loss;
    add_note(notes, fw.loss_note);
  } else if (layout.loss) {
    m.loss = *layout.loss;
  }
  m.source = "published.csv row " + field(row, "row_id");
  return m;
}

/// The node for a row: the topology file, with the row's GPU or host memory where it differs from the file.
spec::NodeSpec node_for(const PublishedRow& row, const NodeLoader& load_node, const spec::GeneralRules& rules,
                        std::string& notes)
{
  std::string name = node_name_of(row, rules);
  spec::NodeSpec node = load_node(name);
  add_note(notes, "node topologies/" + name + ".yaml");
  // GPU memory: row figures are GB as marketed (HBM sizes are binary: a "32 GB" V100 has 32 GiB); override only
  // when neither reading of the row's figure is within 3 % of the node file's.
  auto differs = [](double row_value, std::int64_t node_bytes) {
    auto off = [&](double bytes) {
      return std::abs(bytes - static_cast<double>(node_bytes)) / static_cast<double>(node_bytes);
    };
    return node_bytes > 0 && off(row_value * core::GIB) > 0.03 && off(row_value * 1e9) > 0.03;
  };
  if (auto g = leading_number(field(row, "gpu_mem_GB")); g && differs(*g, node.gpu.memory_bytes)) {
    node.gpu.memory_bytes = static_cast<std::int64_t>(*g * core::GIB);
    add_note(notes, "GPU memory " + trim(field(row, "gpu_mem_GB")) + " GiB (row) over the node file's");
  }
  const std::string& cpu_text = field(row, "cpu_mem_per_node_GB");
  // A host figure equal to what the node file leaves usable (memory less cpu.reserved) is the same machine.
  if (auto c = leading_number(cpu_text);
      c && differs(*c, node.cpu.memory_bytes) && differs(*c, node.cpu.memory_bytes - node.cpu.reserved_bytes)) {
    node.cpu.memory_bytes = static_cast<std::int64_t>(*c * core::GIB);
    static const std::regex usable_re(R"((\d+(?:\.\d+)?)\s*usable)");
    std::smatch um;
    if (std::regex_search(cpu_text, um, usable_re))
      node.cpu.reserved_bytes = node.cpu.memory_bytes - static_cast<std::int64_t>(std::stod(um.str(1)) * core::GIB);
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

int pipeline_parallel_of(const PublishedRow& row)
{
  auto pp = leading_number(field(row, "pp"));
  return pp && *pp >= 1 ? static_cast<int>(*pp) : 1;
}

struct BuildInputs {
  Shape shape;
  int seq_len = 0;
  int total_gpus = 0;
  int row_stage = 0; ///< the stage the row's zero_stage cell names (what the source's entries are selected by)
  int stage = 0;     ///< the stage the run's ds_config set (the source's zero_optimization.stage, else row_stage)
};

/// The first entry of the source's `deepspeed` data with zero_optimization keys that selects the row, nullptr when none
/// does.
const spec::SourceDeepSpeed* source_zero_entry(const PublishedRow& row, int row_stage, const spec::SourceRule* src)
{
  if (src)
    for (const spec::SourceDeepSpeed& d : src->deepspeed)
      if (d.zero && matches(d.when, row, row_stage))
        return &d;
  return nullptr;
}

/// The DeepSpeed zero_optimization block of a row: DeepSpeed 0.19's defaults as the config layer resolves them
/// (docs/deepspeed-schedule.md §11: overlap_comm = stage 3 unless given; pin_memory true), then the keys of the first
/// entry of the source's `deepspeed` data that selects the row (the source's published ds_config), its stage included.
spec::ZeroSpec zero_for(const PublishedRow& row, const BuildInputs& in, std::string& notes, const spec::SourceRule* src)
{
  spec::ZeroSpec z;
  z.set_stage(in.stage); // overlap_comm: the stage's default
  z.offload_optimizer.device = parse_offload(field(row, "offload_optimizer"));
  z.offload_param.device = parse_offload(field(row, "offload_param"));
  const spec::SourceDeepSpeed* found = source_zero_entry(row, in.row_stage, src);
  if (!found) {
    add_note(notes, "zero_optimization keys other than stage/offload not published: DeepSpeed 0.19 defaults");
    return z;
  }
  const spec::SourceZeroKeys& k = *found->zero;
  z.reduce_bucket_size = k.reduce_bucket_size.value_or(z.reduce_bucket_size);
  z.allgather_bucket_size = k.allgather_bucket_size.value_or(z.allgather_bucket_size);
  z.contiguous_gradients = k.contiguous_gradients.value_or(z.contiguous_gradients);
  z.overlap_comm = k.overlap_comm.value_or(z.overlap_comm);
  z.reduce_scatter = k.reduce_scatter.value_or(z.reduce_scatter);
  z.sub_group_size = k.sub_group_size.value_or(z.sub_group_size);
  z.stage3_max_reuse_distance = k.stage3_max_reuse_distance.value_or(z.stage3_max_reuse_distance);
  z.offload_optimizer.device = k.offload_optimizer_device.value_or(z.offload_optimizer.device);
  z.offload_param.buffer_size = k.offload_param_buffer_size.value_or(z.offload_param.buffer_size);
  if (k.offload_param_max_in_cpu)
    z.offload_param.max_in_cpu = *k.offload_param_max_in_cpu;
  add_note(notes, found->zero_note);
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

/// The MixedPrecision dtypes of the source's code for a row (the first `mixed_precision` entry of the source's data
/// that selects it and is, or is not, autocast); false when there is none.
bool source_mixed_precision(const PublishedRow& row, const spec::SourceRule* src, bool autocast, spec::FsdpSpec& fsdp,
                            std::string& notes)
{
  if (!src)
    return false;
  for (const spec::SourceMixedPrecision& m : src->mixed_precision) {
    if (m.autocast != autocast || !matches(m.when, row))
      continue;
    if (m.param_dtype)
      fsdp.param_dtype = m.param_dtype;
    if (m.reduce_dtype)
      fsdp.reduce_dtype = m.reduce_dtype;
    add_note(notes, m.note);
    return true;
  }
  return false;
}

/// The training precision of a PyTorch row, and for FSDP the MixedPrecision dtypes of the run's code. zerosim's
/// precisions (docs/scenario-format.md): bf16/fp16 = FSDP MixedPrecision(param_dtype = reduce_dtype = the 16-bit type)
/// over fp32 sharded parameters; amp_bf16/amp_fp16 = torch.autocast over fp32 parameters; fp32.
spec::Precision torch_precision(const PublishedRow& row, spec::Framework fw, spec::FsdpSpec& fsdp, std::string& notes,
                                const spec::SourceRule* src)
{
  const std::string t = lower(trim(field(row, "precision")));
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
    // Autocast over fp32 parameters; the FSDP dtypes where the source's code sets them (its mixed_precision data).
    source_mixed_precision(row, src, true, fsdp, notes);
    return spec::Precision::AMP_BF16;
  }
  if (bf16) {
    if (!source_mixed_precision(row, src, false, fsdp, notes))
      add_note(notes, "bf16 mixed precision: MixedPrecision(param_dtype = reduce_dtype = bf16) over fp32 parameters "
                      "(the reduce dtype is not stated)");
    return spec::Precision::BF16;
  }
  if (t.find("fp16") != std::string::npos)
    return spec::Precision::FP16;
  add_note(notes, "precision '" + field(row, "precision") + "' read as bf16 mixed precision");
  return spec::Precision::BF16;
}

/// FlashAttention in the run's code: the row names it (the llm-foundry tables: "MPT models, FlashAttention";
/// fms-fsdp: "SDPA FlashAttention-2"; the Llama 2 70B FSDP blog: "flash-attn v2"), or its source's attention is
/// SDPA, which runs the FlashAttention-2 kernel for causal bf16 attention on A100 and H100 (sdpa_flash: torchtitan).
bool flash_attention_of(const PublishedRow& row, const spec::SourceRule* src)
{
  for (const char* k : {"framework", "activation_checkpointing", "other_parallel", "notes"})
    if (contains(field(row, k), "flash"))
      return true;
  return src && src->sdpa_flash;
}

/// The entry of the source's cell_readings that selects the row and reads `column`, nullptr when none does.
const spec::SourceCellReading* cell_reading(const PublishedRow& row, const std::string& column,
                                            const spec::SourceRule* src)
{
  return src ? column_entry(src->cell_readings, row, column) : nullptr;
}

/// The note of a cell reading, "{cell}" replaced by the cell as written.
std::string reading_note(const spec::SourceCellReading& c, const PublishedRow& row)
{
  std::string note = c.note;
  const std::size_t at = note.find("{cell}");
  if (at != std::string::npos)
    note.replace(at, 6, trim(field(row, c.column)));
  return note;
}

/// Total GPUs: the leading number, unless the source's data reads the cell as another count (cell_readings: the
/// GPUs busy in the screenshot a figure is read from).
int total_gpus(const PublishedRow& row, std::string& notes, const spec::SourceRule* src)
{
  const std::string& text = field(row, "total_gpus");
  if (const spec::SourceCellReading* c = cell_reading(row, "total_gpus", src)) {
    add_note(notes, reading_note(*c, row));
    return c->value;
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

/// The gradient-accumulation steps of a row: grad_accum as written (rounded when the source gives a fraction),
/// else global_batch / (micro_batch x GPUs), else 1. The global batch is the cell's leading number unless the
/// source's data reads it as another (cell_readings: a section heading's batch).
int grad_accum_of(const PublishedRow& row, int micro_batch, int gpus, std::string& notes, const spec::SourceRule* src)
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
  if (const spec::SourceCellReading* c = cell_reading(row, "global_batch", src)) {
    global = c->value;
    add_note(notes, reading_note(*c, row));
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

/// The micro-batches a pipeline step runs: DeepSpeed's PipelineEngine runs gradient_accumulation_steps of them and
/// asserts train_batch_size = micro_batch x micro_batches x dp (pipe/engine.py:81-94, docs/pipeline-parallel.md §5), so
/// a stated global batch decides over a grad_accum cell that disagrees with it (the disagreement is noted).
int pipeline_micro_batches(const PublishedRow& row, const spec::Scenario& s, int grad_accum, std::string& notes,
                           const spec::SourceRule* src)
{
  std::optional<double> global = leading_number(field(row, "global_batch"));
  if (const spec::SourceCellReading* c = cell_reading(row, "global_batch", src))
    global = c->value;
  if (!global)
    return grad_accum;
  const double m = *global / (static_cast<double>(s.training.micro_batch) * s.dp());
  if (m < 1 || m != std::floor(m) || static_cast<int>(m) == grad_accum)
    return grad_accum;
  add_note(notes, "micro-batches " + number_text(m) + " = global batch " + number_text(*global) + " / (micro-batch " +
                      std::to_string(s.training.micro_batch) + " x dp " + std::to_string(s.dp()) +
                      "), DeepSpeed's PipelineEngine's; the grad_accum cell '" + trim(field(row, "grad_accum")) +
                      "' disagrees");
  return static_cast<int>(m);
}

/// The Megatron tensor-parallel degree of a row: its tp column's leading number ("8 (inferred)" -> 8), 1 when the
/// column is empty or not a number ("not stated (likely 1)"). exclusions() keeps out the rows whose degree is not
/// given ("<=16 (MP within node ...)").
int tensor_parallel_of(const PublishedRow& row)
{
  auto tp = leading_number(field(row, "tp"));
  return tp && *tp >= 1 ? static_cast<int>(*tp) : 1;
}

/// Checkpoints on the CPU where needed (cpu_checkpoints where_needed): where the row asks for it and the 16-bit
/// checkpoints of a micro-batch (one per layer, micro-batch x seq x hidden x 2 B each) exceed the GPU, or the run is
/// one the source's scripts put there (known_runs).
void checkpoints_where_needed(const PublishedRow& row, const BuildInputs& in, const spec::SourceDeepSpeed& d,
                              spec::Scenario& s, std::string& notes)
{
  const double ckpt_bytes =
      static_cast<double>(in.shape.layers) * in.shape.micro_batch * in.seq_len * in.shape.hidden * 2.0;
  const double gpu_bytes = static_cast<double>(s.cluster.node.gpu.memory_bytes);
  const spec::KnownCheckpointRun* known = nullptr;
  for (const spec::KnownCheckpointRun& k : d.known_runs)
    if (k.layers == in.shape.layers && k.hidden == in.shape.hidden)
      known = &k;
  const bool where_needed = contains(field(row, "activation_checkpointing"), d.where_needed_text);
  std::ostringstream os;
  os.precision(3);
  os << "checkpoints " << ckpt_bytes / core::GIB
     << " GiB (layers x micro-batch x seq x hidden x 2 B) against the GPU's " << gpu_bytes / core::GIB << " GiB";
  if (where_needed && (known || ckpt_bytes > gpu_bytes)) {
    s.deepspeed.activation_checkpointing.partition_activations = true;
    s.deepspeed.activation_checkpointing.cpu_checkpointing = true;
    add_note(notes, d.checkpoint_note + "; " + (known ? known->citation : "needed here: " + os.str()));
  } else {
    add_note(notes, "activation checkpoints kept on the GPU (" + os.str() + ")");
  }
}

/// The aio block and DeepSpeed activation checkpointing of the source's code for a row: every entry of the source's
/// `deepspeed` data that selects it, aio first, then where the checkpoints go.
void source_code_settings(const PublishedRow& row, const BuildInputs& in, spec::Scenario& s, std::string& notes,
                          const spec::SourceRule* src)
{
  if (!src)
    return;
  for (const spec::SourceDeepSpeed& d : src->deepspeed) {
    if (!d.aio || !matches(d.when, row, in.row_stage))
      continue;
    s.deepspeed.aio.block_size = d.aio->block_size;
    s.deepspeed.aio.queue_depth = d.aio->queue_depth;
    s.deepspeed.aio.intra_op_parallelism = d.aio->thread_count;
    add_note(notes, d.aio_note);
  }
  for (const spec::SourceDeepSpeed& d : src->deepspeed) {
    if (d.cpu_checkpoints == spec::CpuCheckpoints::NEVER || !matches(d.when, row, in.row_stage))
      continue;
    if (d.cpu_checkpoints == spec::CpuCheckpoints::WHERE_NEEDED) {
      checkpoints_where_needed(row, in, d, s, notes);
      continue;
    }
    s.deepspeed.activation_checkpointing.partition_activations = true;
    s.deepspeed.activation_checkpointing.cpu_checkpointing = true;
    add_note(notes, d.checkpoint_note);
  }
}

/// DeepSpeed's pipeline engine for a pipeline row (docs/pipeline-parallel.md): the degree of its pp cell, the schedule
/// and partition its source's data gives (`pipeline`), else TrainSchedule (1F1B) with Megatron-DeepSpeed's default
/// partition (PipelineSpec's). exclusions() lets through no schedule DeepSpeed's engine lacks.
void pipeline_for(const PublishedRow& row, spec::Scenario& s, RowInfo& info, const spec::MappingRules& rules)
{
  spec::PipelineSpec& p = s.training.pipeline;
  p.schedule = spec::PipelineSchedule::ONE_F_ONE_B;
  if (!plain_int(field(row, "pp")))
    add_note(info.assumptions, "pp " + std::to_string(s.pp()) + " from '" + trim(field(row, "pp")) + "'");
  if (const spec::SourcePipeline* pl = pipeline_of(row, rules)) {
    p.schedule = pl->schedule;
    if (!pl->partition.empty())
      p.partition = pl->partition;
    add_note(info.assumptions, pl->note);
  } else {
    add_note(info.assumptions, "pipeline: DeepSpeed's TrainSchedule (1F1B) and Megatron-DeepSpeed's default partition '" +
                                   p.partition + "' (the source states neither)");
  }
  const char* schedule = p.schedule == spec::PipelineSchedule::GPIPE ? "gpipe" : "1f1b";
  info.pipeline = std::string(schedule) + " pp " + std::to_string(s.pp());
  // BF16_Optimizer at ZeRO stage 0 behaves at 0.16 as at 0.7.0, the 2022 runs' DeepSpeed; 0.19 accumulates in bf16
  // and refuses the fp32 accumulator without ZeRO (docs/pipeline-parallel.md §5's table).
  if (s.training.precision == spec::Precision::BF16 && s.deepspeed.zero.stage == 0) {
    s.deepspeed_version = "0.16";
    s.deepspeed_version_requested = "0.16";
    add_note(info.assumptions, "DeepSpeed 0.16: BF16_Optimizer at ZeRO stage 0 as at 0.7.0 (fp32 gradient "
                               "accumulator; docs/pipeline-parallel.md §5)");
  }
}

spec::Scenario build_scenario(const PublishedRow& row, const NodeLoader& load_node, const BuildInputs& in,
                              RowInfo& info, const spec::MappingRules& rules)
{
  spec::Scenario s;
  s.name = "published.csv row " + field(row, "row_id");
  s.file = "results/validation/published.csv";
  s.model = model_from_shape(row, in.shape, in.seq_len, rules.general, info.assumptions);
  const spec::SourceRule* src = rule_of(row, rules);
  // The vocabulary the run padded the row's to, where its source says so (cell_readings: Megatron's padding).
  if (const spec::SourceCellReading* c = cell_reading(row, "vocab", src)) {
    s.model.vocab = c->value;
    add_note(info.assumptions, reading_note(*c, row));
  }
  spec::NodeSpec node = node_for(row, load_node, rules.general, info.assumptions);
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
  s.training.pipeline_parallel = fw == spec::Framework::DEEPSPEED ? pipeline_parallel_of(row) : 1;
  auto ga = plain_int(field(row, "grad_accum"));
  s.training.grad_accum = ga ? *ga : 1;
  s.training.global_batch = spec::global_batch_of(s);
  s.training.precision = fw == spec::Framework::DEEPSPEED ? parse_precision(field(row, "precision"), info.assumptions)
                                                          : torch_precision(row, fw, s.fsdp, info.assumptions, src);
  s.training.activation_checkpointing = parse_checkpointing(field(row, "activation_checkpointing"), info.assumptions);
  // The stack each run used (stacks.csv, quoted or inferred from the source; docs/validation.md).
  s.software = software_of(row, rules);
  s.training.flash_attention = spec::is_fused(s.software.attention);
  s.kernels = config::shipped_kernel_table();
  // DeepSpeed's Megatron examples use Adam (FusedAdam / DeepSpeedCPUAdam); the PyTorch runs' code uses AdamW
  // (Composer decoupled_adamw, torchtitan and fms-fsdp AdamW, minGPT's configure_optimizers, the HF Trainer).
  s.training.optimizer = fw == spec::Framework::DEEPSPEED ? spec::Optimizer::ADAM : spec::Optimizer::ADAMW;
  s.training.mode = spec::Mode::TRAIN;

  s.framework = fw;
  s.deepspeed_version = "0.19";
  s.deepspeed_version_requested = "0.19";
  std::ostringstream cfg;
  info.framework = framework_label(row);
  if (fw == spec::Framework::DEEPSPEED) {
    s.deepspeed.zero = zero_for(row, in, info.assumptions, src);
    source_code_settings(row, in, s, info.assumptions, src);
    s.deepspeed.communication_data_type = spec::model_dtype(s.training.precision); // docs/deepspeed-schedule.md §1.3
    s.deepspeed.grad_accum_dtype = spec::model_dtype(s.training.precision);
    if (s.pp() > 1)
      pipeline_for(row, s, info, rules);
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
    ShardingRead sh = *fsdp_sharding_of(row, rules);
    if (!sh.note.empty())
      add_note(info.assumptions, sh.note);
    spec::FsdpSpec& f = s.fsdp;
    f.sharding_strategy = sh.strategy;
    const spec::Fsdp2Rule& fsdp2 = rules.general.fsdp2;
    if (contains_any(field(row, "framework"), fsdp2.framework_contains_any) ||
        contains_any(field(row, "fsdp_sharding"), fsdp2.sharding_contains_any)) {
      // FSDP2 fully_shard (the general rules' fsdp2): it reshards after the forward but for the strategies listed.
      const auto& keep = fsdp2.no_reshard_after_forward;
      f.reshard_after_forward = std::find(keep.begin(), keep.end(), sh.strategy) == keep.end();
      add_note(info.assumptions,
               "FSDP2 fully_shard, reshard_after_forward " + std::string(*f.reshard_after_forward ? "True" : "False"));
    }
    if (src && src->fsdp) {
      // The FSDP defaults of the source's code (its fsdp data: Composer's backward_prefetch, limit_all_gathers).
      f.backward_prefetch = src->fsdp->backward_prefetch.value_or(f.backward_prefetch);
      f.limit_all_gathers = src->fsdp->limit_all_gathers.value_or(f.limit_all_gathers);
      add_note(info.assumptions, src->fsdp->note);
    }
    f.cpu_offload = parse_offload(field(row, "offload_param")) == spec::OffloadDevice::CPU;
    // One FSDP unit per transformer block: Composer's MPT fsdp_wrap_fn, torchtitan's per-block fully_shard,
    // fms-fsdp's and Accelerate's transformer auto-wrap policies, the FSDP paper's minGPT block wrapping.
    f.wrap = contains(field(row, "fsdp_sharding"), "whole model") ? "model" : "block";
    info.stage = spec::equivalent_zero_stage(sh.strategy);
    info.strategy = std::string("FSDP ") + sharding_name(sh.strategy);
    info.offload = f.cpu_offload ? "FSDP CPU offload" : "none";
    cfg << info.strategy;
    if (f.param_dtype || f.reduce_dtype)
      cfg << " (params " << spec::to_string(f.param_dtype.value_or(spec::model_dtype(s.training.precision)))
          << ", reduce " << spec::to_string(f.reduce_dtype.value_or(spec::model_dtype(s.training.precision))) << ")";
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
  if (s.pp() > 1)
    cfg << ", pp " << s.pp() << " (" << info.pipeline << ", partition " << s.training.pipeline.partition << ")";
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
spec::Scenario row_scenario(const PublishedRow& row, const NodeLoader& load_node, const Shape& shape, RowInfo& info,
                            const spec::MappingRules& rules)
{
  BuildInputs in;
  in.shape = shape;
  in.seq_len = seq_len_of(row, info.assumptions);
  const spec::SourceRule* src = rule_of(row, rules);
  in.total_gpus = total_gpus(row, info.assumptions, src);
  // A PyTorch row has no DeepSpeed stage; build_scenario sets the one its strategy is equivalent to. exclusions()
  // lets no DeepSpeed row without one stage through.
  in.row_stage = framework_of(row) == spec::Framework::DEEPSPEED ? *stage_of(field(row, "zero_stage")) : 0;
  // The stage the run's ds_config set, where the source says the row's cell names what it was equivalent to
  // (zero_optimization.stage: BLOOM's "ZeRO-1 via BF16_Optimizer" ran ZERO_STAGE=0); zero_for notes why.
  const spec::SourceDeepSpeed* ds = source_zero_entry(row, in.row_stage, src);
  in.stage = ds && ds->zero->stage ? *ds->zero->stage : in.row_stage;
  spec::Scenario s = build_scenario(row, load_node, in, info, rules);
  spec::TrainingSpec& t = s.training;
  t.grad_accum = grad_accum_of(row, t.micro_batch, s.dp(), info.assumptions, src);
  if (s.pp() > 1)
    t.grad_accum = pipeline_micro_batches(row, s, t.grad_accum, info.assumptions, src);
  t.global_batch = spec::global_batch_of(s);
  t.global_batch_given = !trim(field(row, "global_batch")).empty();
  // The software stack the run used, as build_scenario took it (software_of): stacks.csv's, quoted from the source or
  // inferred from the run's date and code (stack.status), else today's stack, unstated, with FlashAttention where
  // the row names it (flash_attention_of).
  const spec::SoftwareSpec& sw = s.software;
  const std::string kernel = spec::to_string(sw.attention);
  if (sw.stated)
    add_note(info.assumptions, "stack: attention " + kernel + ", torch " + sw.torch +
                                   (sw.compile ? ", torch.compile" : "") + " (stacks.csv, " +
                                   field(row, "stack.status") + "); model code " + spec::to_string(sw.model_code) +
                                   " (" + field(row, "stack.model_code_status") + ")");
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

} // namespace zerosim::validation::detail
