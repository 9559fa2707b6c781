// resolved_yaml(): the scenario with model and node inlined, every default written and "auto" resolved.
// load_scenario_text(resolved_yaml(s)) gives s back (tests/unit/config/scenario_loader_test.cpp).
#include "config/deepspeed_keys.hpp"
#include "config/readers.hpp"
#include "config/scenario_loader.hpp"
#include "config/units.hpp"
#include "core/error.hpp"
#include "spec/names.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <limits>

namespace zerosim::config {
namespace {

std::string num(double v)
{
  char buf[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string q(double v, UnitKind k)
{
  return format_quantity(v, k);
}

YAML::Node model_node(const spec::ModelSpec& m)
{
  YAML::Node n;
  n["name"] = m.name;
  n["layers"] = m.layers;
  n["hidden"] = m.hidden;
  n["heads"] = m.heads;
  n["kv_heads"] = m.kv_heads;
  n["ffn_hidden"] = m.ffn_hidden;
  n["ffn"] = m.ffn == spec::FfnKind::GELU ? "gelu" : "swiglu";
  n["vocab"] = m.vocab;
  n["tied_embeddings"] = m.tied_embeddings;
  n["norm"] = m.norm == spec::NormKind::LAYERNORM ? "layernorm" : "rmsnorm";
  n["position"] = m.position == spec::PositionKind::LEARNED ? "learned"
                  : m.position == spec::PositionKind::ROPE  ? "rope"
                                                            : "alibi";
  n["bias"] = m.bias;
  if (m.dropout)
    n["dropout"] = *m.dropout;
  n["loss"] = m.loss == spec::LossKind::MEGATRON ? "megatron" : "hf";
  if (m.position == spec::PositionKind::LEARNED)
    n["max_position"] = m.max_position;
  n["source"] = m.source;
  return n;
}

YAML::Node node_node(const spec::NodeSpec& nd)
{
  YAML::Node n;
  n["name"] = nd.name;
  n["gpu"]["model"] = nd.gpu.model;
  n["gpu"]["memory"] = q(static_cast<double>(nd.gpu.memory_bytes), UnitKind::BYTES);
  n["gpu"]["memory_bandwidth"] = q(nd.gpu.memory_bandwidth_Bps, UnitKind::BANDWIDTH);
  YAML::Node peak(YAML::NodeType::Map);
  const std::pair<const char*, double> peaks[] = {{"bf16", nd.gpu.peak_bf16_flops},
                                                  {"fp16", nd.gpu.peak_fp16_flops},
                                                  {"tf32", nd.gpu.peak_tf32_flops},
                                                  {"fp32", nd.gpu.peak_fp32_flops}};
  for (const auto& [k, v] : peaks)
    if (v > 0)
      peak[k] = q(v, UnitKind::COMPUTE);
  n["gpu"]["peak"] = peak;
  if (nd.gpu.power_limit_W > 0) {
    n["gpu"]["power"]["limit"] = num(nd.gpu.power_limit_W);
    n["gpu"]["power"]["tdp"] = num(nd.gpu.tdp_W);
  }
  n["gpus"] = nd.gpus;
  if (nd.nvlink.present) {
    n["nvlink"]["bandwidth"] = q(nd.nvlink.bandwidth_Bps, UnitKind::BANDWIDTH);
    n["nvlink"]["latency"] = q(nd.nvlink.latency_s, UnitKind::TIME);
  }
  n["pcie"]["bandwidth"] = q(nd.pcie.bandwidth_Bps, UnitKind::BANDWIDTH);
  n["pcie"]["gpus_per_switch"] = nd.pcie.gpus_per_switch;
  n["pcie"]["switch_uplink"] = q(nd.pcie.switch_uplink_Bps, UnitKind::BANDWIDTH);
  n["pcie"]["latency"] = q(nd.pcie.latency_s, UnitKind::TIME);
  n["cpu"]["sockets"] = nd.cpu.sockets;
  n["cpu"]["cores"] = nd.cpu.cores;
  n["cpu"]["memory"] = q(static_cast<double>(nd.cpu.memory_bytes), UnitKind::BYTES);
  n["cpu"]["memory_bandwidth"] = q(nd.cpu.memory_bandwidth_Bps, UnitKind::BANDWIDTH);
  n["cpu"]["reserved"] = std::to_string(nd.cpu.reserved_bytes) + " B";
  n["cpu"]["adam_bytes_per_param"] = num(nd.cpu.adam_bytes_per_param);
  n["nvme"]["devices"] = nd.nvme.devices;
  if (nd.nvme.devices > 0) {
    n["nvme"]["read"] = q(nd.nvme.read_Bps, UnitKind::BANDWIDTH);
    n["nvme"]["write"] = q(nd.nvme.write_Bps, UnitKind::BANDWIDTH);
    n["nvme"]["capacity"] = q(static_cast<double>(nd.nvme.capacity_bytes), UnitKind::BYTES);
    n["nvme"]["read_latency"] = q(nd.nvme.read_latency_s, UnitKind::TIME);
    n["nvme"]["write_latency"] = q(nd.nvme.write_latency_s, UnitKind::TIME);
  }
  n["nics"]["count"] = nd.nics.count;
  if (nd.nics.count > 0)
    n["nics"]["bandwidth"] = q(nd.nics.bandwidth_Bps, UnitKind::BANDWIDTH);
  if (nd.nics.busbw_fraction > 0)
    n["nics"]["busbw_fraction"] = num(nd.nics.busbw_fraction);
  n["source"] = nd.source;
  return n;
}

std::string count(std::int64_t v)
{
  return std::to_string(v);
}

/// training.pipeline_parallel and its block (p > 1): the schedule as resolved, the explicit split or the partition
/// method (not both: the reader refuses both).
void write_pipeline(const spec::Scenario& s, YAML::Node& t)
{
  const spec::PipelineSpec& pl = s.training.pipeline;
  t["pipeline_parallel"] = s.training.pipeline_parallel;
  YAML::Node p;
  for (const auto& [name, schedule] : pipeline_schedule_names())
    if (schedule == pl.schedule)
      p["schedule"] = name;
  p["virtual_stages"] = pl.virtual_stages;
  if (pl.layers.empty()) {
    p["partition"] = pl.partition;
  } else {
    YAML::Node layers(YAML::NodeType::Sequence);
    for (int n : pl.layers)
      layers.push_back(n);
    layers.SetStyle(YAML::EmitterStyle::Flow);
    p["layers"] = layers;
  }
  t["pipeline"] = p;
}

YAML::Node deepspeed_node(const spec::Scenario& s)
{
  const spec::DeepSpeedSpec& d = s.deepspeed;
  YAML::Node n;
  n["train_batch_size"] = s.training.global_batch;
  n["train_micro_batch_size_per_gpu"] = s.training.micro_batch;
  n["gradient_accumulation_steps"] = s.training.grad_accum;
  YAML::Node z;
  z["stage"] = d.zero.stage;
  z["contiguous_gradients"] = d.zero.contiguous_gradients;
  z["reduce_scatter"] = d.zero.reduce_scatter;
  z["reduce_bucket_size"] = count(d.zero.reduce_bucket_size);
  z["use_multi_rank_bucket_allreduce"] = d.zero.use_multi_rank_bucket_allreduce;
  z["allgather_bucket_size"] = count(d.zero.allgather_bucket_size);
  if (d.zero.overlap_comm_given) // else it follows the stage, also when a sweep changes the stage
    z["overlap_comm"] = d.zero.overlap_comm;
  z["sub_group_size"] = count(d.zero.sub_group_size);
  z["stage3_prefetch_bucket_size"] = count(d.zero.stage3_prefetch_bucket_size);
  z["stage3_param_persistence_threshold"] = count(d.zero.stage3_param_persistence_threshold);
  z["stage3_model_persistence_threshold"] = count(d.zero.stage3_model_persistence_threshold);
  z["stage3_max_live_parameters"] = count(d.zero.stage3_max_live_parameters);
  z["stage3_max_reuse_distance"] = count(d.zero.stage3_max_reuse_distance);
  z["stage3_module_granularity_threshold"] = count(d.zero.stage3_module_granularity_threshold);
  z["stage3_use_all_reduce_for_fetch_params"] = d.zero.stage3_use_all_reduce_for_fetch_params;
  z["stage3_allgather_sequential"] = d.zero.stage3_allgather_sequential;
  z["round_robin_gradients"] = d.zero.round_robin_gradients;
  const spec::OffloadOptimizerSpec& oo = d.zero.offload_optimizer;
  z["offload_optimizer"]["device"] = spec::to_string(oo.device);
  z["offload_optimizer"]["nvme_path"] = oo.nvme_path;
  z["offload_optimizer"]["buffer_count"] = oo.buffer_count;
  z["offload_optimizer"]["pin_memory"] = oo.pin_memory;
  z["offload_optimizer"]["pipeline_read"] = oo.pipeline_read;
  z["offload_optimizer"]["pipeline_write"] = oo.pipeline_write;
  z["offload_optimizer"]["fast_init"] = oo.fast_init;
  z["offload_optimizer"]["ratio"] = num(oo.ratio);
  z["offload_optimizer"]["super_offload"] = oo.super_offload;
  z["offload_optimizer"]["cpuadam_cores_perc"] = num(oo.cpuadam_cores_perc);
  const spec::OffloadParamSpec& op = d.zero.offload_param;
  z["offload_param"]["device"] = spec::to_string(op.device);
  z["offload_param"]["nvme_path"] = op.nvme_path;
  z["offload_param"]["buffer_count"] = op.buffer_count;
  z["offload_param"]["buffer_size"] = count(op.buffer_size);
  z["offload_param"]["max_in_cpu"] = count(op.max_in_cpu);
  z["offload_param"]["pin_memory"] = op.pin_memory;
  n["zero_optimization"] = z;
  n["aio"]["block_size"] = d.aio.block_size;
  n["aio"]["queue_depth"] = d.aio.queue_depth;
  n["aio"]["intra_op_parallelism"] = d.aio.intra_op_parallelism;
  n["aio"]["single_submit"] = d.aio.single_submit;
  n["aio"]["overlap_events"] = d.aio.overlap_events;
  n["aio"]["use_gds"] = d.aio.use_gds;
  n["fp16"]["enabled"] = s.training.precision == spec::Precision::FP16;
  n["bf16"]["enabled"] = s.training.precision == spec::Precision::BF16;
  n["communication_data_type"] = spec::to_string(d.communication_data_type);
  n["data_types"]["grad_accum_dtype"] = spec::to_string(d.grad_accum_dtype);
  n["gradient_clipping"] = num(d.gradient_clipping);
  n["prescale_gradients"] = d.prescale_gradients;
  n["gradient_predivide_factor"] = num(d.gradient_predivide_factor);
  const spec::DsActivationCheckpointingSpec& a = d.activation_checkpointing;
  n["activation_checkpointing"]["partition_activations"] = a.partition_activations;
  n["activation_checkpointing"]["cpu_checkpointing"] = a.cpu_checkpointing;
  n["activation_checkpointing"]["contiguous_memory_optimization"] = a.contiguous_memory_optimization;
  if (a.number_checkpoints)
    n["activation_checkpointing"]["number_checkpoints"] = *a.number_checkpoints;
  n["activation_checkpointing"]["synchronize_checkpoint_boundary"] = a.synchronize_checkpoint_boundary;
  n["activation_checkpointing"]["profile"] = a.profile;
  // Keys accepted but not modelled, as written (they are what Scenario::warnings names).
  for (const auto& [path, value] : d.unmodelled_keys) {
    std::vector<std::string> segs;
    std::string cur;
    for (char c : path.substr(std::string("deepspeed.").size())) {
      if (c == '.') {
        segs.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    segs.push_back(cur);
    YAML::Node at;
    at.reset(n);
    for (size_t i = 0; i + 1 < segs.size(); ++i) {
      YAML::Node next = at[segs[i]];
      at.reset(next);
    }
    at[segs.back()] = YAML::Load(value);
  }
  return n;
}

const char* dtype_or_empty(const std::optional<spec::Dtype>& d)
{
  return d ? spec::to_string(*d) : nullptr;
}

} // namespace

namespace {

/// A JSON value of a YAML scalar as the resolved writer wrote it: true/false, an integer, a decimal, else a string.
std::string json_scalar(const std::string& v)
{
  if (v == "true" || v == "false")
    return v;
  char* end = nullptr;
  std::strtoll(v.c_str(), &end, 10);
  if (!v.empty() && *end == '\0')
    return v;
  std::strtod(v.c_str(), &end);
  if (!v.empty() && *end == '\0' && v.find_first_of("0123456789") != std::string::npos &&
      v.find_first_not_of("0123456789.eE+-") == std::string::npos)
    return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

void write_json(const YAML::Node& n, std::string& out, int depth)
{
  const std::string pad(static_cast<std::size_t>(2 * (depth + 1)), ' ');
  const std::string close(static_cast<std::size_t>(2 * depth), ' ');
  if (n.IsMap()) {
    out += "{";
    bool first = true;
    for (auto it = n.begin(); it != n.end(); ++it) {
      out += first ? "\n" : ",\n";
      first = false;
      out += pad + "\"" + it->first.Scalar() + "\": ";
      write_json(it->second, out, depth + 1);
    }
    out += "\n" + close + "}";
  } else if (n.IsSequence()) {
    out += "[";
    for (std::size_t i = 0; i < n.size(); ++i) {
      out += i ? ", " : "";
      write_json(n[i], out, depth + 1);
    }
    out += "]";
  } else if (n.IsNull()) {
    out += "null";
  } else {
    out += json_scalar(n.Scalar());
  }
}

} // namespace

namespace {

/// Keys a user must see in ds_config.json whatever their value: the batch, the stage, where the states live, the
/// precision (docs/recommend.md).
bool always_written(const std::string& path)
{
  static const char* const KEEP[] = {"train_batch_size",
                                     "train_micro_batch_size_per_gpu",
                                     "gradient_accumulation_steps",
                                     "zero_optimization.stage",
                                     "zero_optimization.offload_optimizer.device",
                                     "zero_optimization.offload_param.device",
                                     "fp16.enabled",
                                     "bf16.enabled"};
  for (const char* k : KEEP)
    if (path == k)
      return true;
  return false;
}

/// Does a resolved value equal DeepSpeed's default text (numbers by value: "5e8" and "500000000"; sys.maxsize is
/// 2^63 - 1 on the 64-bit hosts DeepSpeed runs on)?
bool equals_default(const std::string& value, std::string default_text)
{
  if (default_text == "sys.maxsize")
    default_text = std::to_string(std::numeric_limits<std::int64_t>::max());
  const std::optional<double> a = parse_number(value);
  const std::optional<double> b = parse_number(default_text);
  if (a && b)
    return *a == *b;
  return value == default_text;
}

/// `n` (a map at `prefix`) with only the keys the user must see or that differ from `v`'s defaults; the keys DeepSpeed
/// has no static default for (the dtypes, nvme_path) are compared with what zerosim reads for them when absent.
/// DeepSpeed's default of `path`: in version `v`, else (a key `v` lacks) in the newest version that has it, whose
/// default is what zerosim reads when the key is absent.
const DeepSpeedKey* default_of(const std::string& path, const DeepSpeedVersionKeys& v, const DeepSpeedKeyTable& table)
{
  if (const auto d = v.keys.find(path); d != v.keys.end())
    return &d->second;
  for (auto it = table.versions.rbegin(); it != table.versions.rend(); ++it)
    if (const auto d = it->second.keys.find(path); d != it->second.keys.end())
      return &d->second;
  return nullptr;
}

YAML::Node minimal(const YAML::Node& n, const std::string& prefix, const DeepSpeedVersionKeys& v,
                   const DeepSpeedKeyTable& table, const spec::Scenario& s)
{
  YAML::Node out(YAML::NodeType::Map);
  const std::string model_dtype_name = spec::to_string(spec::model_dtype(s.training.precision));
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = it->first.Scalar();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    const YAML::Node value = it->second;
    if (value.IsMap()) {
      YAML::Node sub = minimal(value, path, v, table, s);
      if (sub.size() > 0)
        out[key] = sub;
      continue;
    }
    if (!always_written(path) && value.IsScalar()) {
      const std::string text = value.Scalar();
      if (path == "communication_data_type" || path == "data_types.grad_accum_dtype") {
        if (text == model_dtype_name) // DeepSpeed's None: the model's dtype
          continue;
      } else if (key == "nvme_path") {
        if (text.empty()) // DeepSpeed's None
          continue;
      } else if (const DeepSpeedKey* d = default_of(path, v, table); d && equals_default(text, d->default_text)) {
        continue;
      }
    }
    // 0.14 and 0.15 read aio's thread count as thread_count (swap_tensor/constants.py at their tags).
    if (path == "aio.intra_op_parallelism" && !v.has(path) && v.has("aio.thread_count"))
      key = "thread_count";
    out[key] = value;
  }
  return out;
}

/// Every key of `n` that DeepSpeed `v` checks: zero_optimization's whole tree (a pydantic model with
/// extra="forbid"), the top-level keys, and the keys below a top-level block whose keys the table lists.
void check_keys_exist(const YAML::Node& n, const std::string& prefix, const DeepSpeedVersionKeys& v,
                      const DeepSpeedKeyTable& table)
{
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string path = prefix.empty() ? it->first.Scalar() : prefix + "." + it->first.Scalar();
    const std::string top = path.substr(0, path.find('.'));
    const bool checked = prefix.empty() || top == "zero_optimization" || v.describes_children(top);
    if (checked && !v.has(path))
      throw core::InputError("ds_config.json: " + path + " is not a key of DeepSpeed " + v.version + " (" + v.tag +
                             ", " + table.file + "); deepspeed_version " + v.version +
                             " refuses it: drop it or choose a version that has it");
    if (it->second.IsMap())
      check_keys_exist(it->second, path, v, table);
  }
}

} // namespace

std::string deepspeed_json(const spec::Scenario& s)
{
  const DeepSpeedKeyTable& table = deepspeed_key_table();
  const DeepSpeedVersionKeys& v = table.at(s.deepspeed_version_requested);
  YAML::Node full = deepspeed_node(s);
  // DeepSpeed's pipeline block (runtime/config.py get_pipeline_config): the degree, and the partition method unless an
  // explicit split gives it. DeepSpeed keeps both in config.pipeline and its engine reads neither (the model code's
  // PipelineModule takes them, from Megatron-DeepSpeed's launch arguments); they state the pipeline in the file, and
  // zerosim reads them back as training.pipeline_parallel and the partition (docs/recommend.md "Pipeline scenarios").
  if (s.pp() > 1) {
    full["pipeline"]["stages"] = s.pp();
    if (s.training.pipeline.layers.empty())
      full["pipeline"]["partition"] = s.training.pipeline.partition;
  }
  const YAML::Node n = minimal(full, "", v, table, s);
  check_keys_exist(n, "", v, table);
  std::string out;
  write_json(n, out, 0);
  return out + "\n";
}

std::string resolved_yaml(const spec::Scenario& s, const std::string& deepspeed_file)
{
  std::string text = resolved_yaml(s);
  if (deepspeed_file.empty() || s.framework != spec::Framework::DEEPSPEED)
    return text;
  // The inline deepspeed: block replaced by the file's name (a path relative to the scenario).
  YAML::Node root = YAML::Load(text);
  root["deepspeed"] = deepspeed_file;
  YAML::Emitter out;
  out << YAML::Comment("resolved by zerosim: every default applied, \"auto\" resolved (docs/config.md)");
  out << YAML::Newline << root;
  return std::string(out.c_str()) + "\n";
}

std::string resolved_yaml(const spec::Scenario& s)
{
  YAML::Node root;
  root["name"] = s.name;
  root["model"] = model_node(s.model);
  root["cluster"]["node"] = node_node(s.cluster.node);
  root["cluster"]["nodes"] = s.cluster.nodes;
  root["cluster"]["gpus_per_node"] = s.cluster.gpus_per_node;
  if (s.cluster.network.nics_per_node > 0) {
    root["cluster"]["network"]["nic_bandwidth"] = q(s.cluster.network.nic_bandwidth_Bps, UnitKind::BANDWIDTH);
    root["cluster"]["network"]["nics_per_node"] = s.cluster.network.nics_per_node;
  }
  root["cluster"]["network"]["latency"] = q(s.cluster.network.latency_s, UnitKind::TIME);
  root["cluster"]["network"]["oversubscription"] = num(s.cluster.network.oversubscription);
  YAML::Node t;
  t["seq_len"] = s.training.seq_len;
  t["micro_batch"] = s.training.micro_batch;
  if (s.training.global_batch_given)
    t["global_batch"] = s.training.global_batch;
  else
    t["grad_accum"] = s.training.grad_accum;
  t["precision"] = spec::to_string(s.training.precision);
  t["activation_checkpointing"] = spec::to_string(s.training.activation_checkpointing);
  // flash_attention is software.attention's shorthand. A stated stack is written as the software block (below);
  // an unstated one as what the absent block gives (today's stack, flash_attention: false for eager), so the
  // reload keeps software.stated false (meta.software.stated).
  const spec::SoftwareSpec today;
  const bool shorthand =
      !s.software.stated && !s.software.compile && s.software.torch == today.torch &&
      s.software.model_code == spec::ModelCode::AUTO &&
      (s.software.attention == spec::AttentionKernel::FLASH2 || s.software.attention == spec::AttentionKernel::EAGER);
  if (shorthand && s.software.attention == spec::AttentionKernel::EAGER)
    t["flash_attention"] = false;
  t["optimizer"] = s.training.optimizer == spec::Optimizer::ADAMW  ? "adamw"
                   : s.training.optimizer == spec::Optimizer::ADAM ? "adam"
                                                                   : "sgd";
  t["optimizer_impl"] = s.training.optimizer_impl == spec::OptimizerImpl::AUTO            ? "auto"
                        : s.training.optimizer_impl == spec::OptimizerImpl::SINGLE_TENSOR ? "single_tensor"
                        : s.training.optimizer_impl == spec::OptimizerImpl::FOREACH       ? "foreach"
                                                                                          : "fused";
  t["mode"] = s.training.mode == spec::Mode::TRAIN ? "train" : "inference";
  if (s.training.total_tokens)
    t["total_tokens"] = num(*s.training.total_tokens);
  if (s.tp() > 1)
    t["tensor_parallel"] = s.training.tensor_parallel;
  if (s.pp() > 1)
    write_pipeline(s, t);
  root["training"] = t;
  if (!shorthand) { // stated, or a stack the absent block cannot give (built in code): written out
    root["software"]["attention"] = spec::to_string(s.software.attention);
    root["software"]["compile"] = s.software.compile;
    if (s.software.model_code != spec::ModelCode::AUTO)
      root["software"]["model_code"] = spec::to_string(s.software.model_code);
    root["software"]["torch"] = s.software.torch;
  }
  if (s.training.mode == spec::Mode::INFERENCE) {
    root["inference"]["batch"] = s.inference.batch;
    root["inference"]["prompt_tokens"] = s.inference.prompt_tokens;
    root["inference"]["generate_tokens"] = s.inference.generate_tokens;
  }
  if (s.price_per_gpu_hour)
    root["price_per_gpu_hour"] = num(*s.price_per_gpu_hour);
  root["deepspeed_version"] = s.deepspeed_version_requested;
  switch (s.framework) {
  case spec::Framework::DEEPSPEED:
    root["deepspeed"] = deepspeed_node(s);
    break;
  case spec::Framework::FSDP: {
    const spec::FsdpSpec& f = s.fsdp;
    YAML::Node n;
    n["sharding_strategy"] = spec::to_string(f.sharding_strategy);
    if (const char* p = dtype_or_empty(f.param_dtype))
      n["mixed_precision"]["param_dtype"] = p;
    if (const char* r = dtype_or_empty(f.reduce_dtype))
      n["mixed_precision"]["reduce_dtype"] = r;
    const char* prefetch[] = {"BACKWARD_PRE", "BACKWARD_POST", "NONE"};
    n["backward_prefetch"] = prefetch[static_cast<int>(f.backward_prefetch)];
    n["forward_prefetch"] = f.forward_prefetch;
    n["limit_all_gathers"] = f.limit_all_gathers;
    if (f.reshard_after_forward)
      n["reshard_after_forward"] = *f.reshard_after_forward;
    n["cpu_offload"] = f.cpu_offload;
    n["wrap"] = f.wrap;
    root["fsdp"] = n;
    break;
  }
  case spec::Framework::DDP: {
    const spec::DdpSpec& d = s.ddp;
    YAML::Node n;
    n["bucket_cap_mb"] = num(d.bucket_cap_mb);
    n["first_bucket_cap_mb"] = num(d.first_bucket_cap_mb);
    n["gradient_as_bucket_view"] = d.gradient_as_bucket_view;
    n["no_sync"] = d.no_sync;
    n["find_unused_parameters"] = d.find_unused_parameters;
    n["static_graph"] = d.static_graph;
    n["broadcast_buffers"] = d.broadcast_buffers;
    root["ddp"] = n;
    break;
  }
  }
  if (!s.sweep.empty()) {
    YAML::Node sw;
    for (const auto& [key, values] : s.sweep) {
      YAML::Node list(YAML::NodeType::Sequence);
      for (const std::string& v : values)
        list.push_back(YAML::Load(v));
      sw[key] = list;
    }
    root["sweep"] = sw;
  }
  const spec::MeasuredSpec& m = s.measured;
  if (m.step_time_s || m.tflops_per_gpu || m.peak_memory_bytes || !m.source.empty()) {
    YAML::Node n(YAML::NodeType::Map);
    if (m.step_time_s)
      n["step_time"] = q(*m.step_time_s, UnitKind::TIME);
    if (m.tflops_per_gpu) {
      n["tflops_per_gpu"] = num(*m.tflops_per_gpu);
      n["tflops_definition"] = m.tflops_definition;
    }
    if (m.peak_memory_bytes)
      n["peak_memory"] = std::to_string(*m.peak_memory_bytes) + " B";
    if (!m.source.empty())
      n["source"] = m.source;
    root["measured"] = n;
  }
  YAML::Emitter out;
  out << YAML::Comment("resolved by zerosim: every default applied, \"auto\" resolved (docs/config.md)");
  out << YAML::Newline << root;
  return std::string(out.c_str()) + "\n";
}

} // namespace zerosim::config
