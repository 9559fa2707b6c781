// The `deepspeed:` block (or ds_config.json): DeepSpeed's code defaults for deepspeed_version
// (docs/deepspeed-schedule.md §11, §14), "auto" resolved as the Hugging Face Trainer resolves it, batch and precision
// keys checked against training:, keys that are not modelled named in Scenario::warnings.
#include "config/readers.hpp"
#include "core/text.hpp"
#include "spec/names.hpp"

#include <cmath>
#include <limits>

namespace zerosim::config {
namespace {

const std::string COUNT = "an element count (an integer such as 500000000 or 5e8)";
const std::string COUNT_OR_AUTO = "an element count (an integer such as 500000000 or 5e8) or auto";
const std::string DTYPE_WHAT = "one of fp32, fp16, bf16";

bool pins_by_default(const spec::Scenario& s)
{
  return s.deepspeed_version == "0.19"; // pin_memory False -> True in 0.19 (docs/deepspeed-schedule.md §14)
}

std::optional<spec::Dtype> read_dtype(FieldReader& r, const std::string& key)
{
  std::optional<std::string> v = r.opt_string(key);
  if (!v)
    return std::nullopt;
  std::optional<spec::Dtype> d = parse_dtype(*v);
  if (!d)
    r.fail_expected(key, DTYPE_WHAT);
  return d;
}

spec::OffloadDevice read_device(FieldReader& r)
{
  return r.get_enum<spec::OffloadDevice>(
      "device",
      {{"none", spec::OffloadDevice::NONE}, {"cpu", spec::OffloadDevice::CPU}, {"nvme", spec::OffloadDevice::NVME}});
}

/// An element count that may be "auto": `auto_value` then (the HF Trainer's rule).
std::optional<std::int64_t> count_or_auto(FieldReader& r, const std::string& key, std::int64_t auto_value)
{
  if (r.is_auto(key)) {
    r.take(key);
    return auto_value;
  }
  return r.opt_count(key, 0, COUNT_OR_AUTO);
}

/// DeepSpeed's pydantic aliases: `stage3_X` and `X` name the same field; both given is an error.
std::optional<std::int64_t> aliased_count(FieldReader& r, const std::string& long_name, const std::string& short_name,
                                          std::optional<std::int64_t> auto_value = std::nullopt)
{
  if (r.has(long_name) && r.has(short_name))
    r.fail(short_name, "give " + long_name + " or " + short_name + ", not both (they are the same key)");
  const std::string& key = r.has(short_name) ? short_name : long_name;
  if (auto_value && key == long_name)
    return count_or_auto(r, key, *auto_value);
  std::optional<std::int64_t> v = r.opt_count(key, 0, COUNT);
  r.take(key == long_name ? short_name : long_name);
  return v;
}

std::optional<bool> aliased_bool(FieldReader& r, const std::string& long_name, const std::string& short_name)
{
  if (r.has(long_name) && r.has(short_name))
    r.fail(short_name, "give " + long_name + " or " + short_name + ", not both (they are the same key)");
  std::optional<bool> a = r.opt_bool(long_name);
  std::optional<bool> b = r.opt_bool(short_name);
  return a ? a : b;
}

/// The same, the schema's default of `long_name` when neither name is given.
std::int64_t get_aliased_count(FieldReader& r, const std::string& long_name, const std::string& short_name,
                               std::optional<std::int64_t> auto_value = std::nullopt)
{
  return r.get<std::int64_t>(long_name,
                             [&](FieldReader& f) { return aliased_count(f, long_name, short_name, auto_value); });
}

bool get_aliased_bool(FieldReader& r, const std::string& long_name, const std::string& short_name)
{
  return r.get<bool>(long_name, [&](FieldReader& f) { return aliased_bool(f, long_name, short_name); });
}

void read_offload_optimizer(FieldReader& r, spec::OffloadOptimizerSpec& o, const spec::Scenario& s)
{
  o.device = read_device(r);
  o.nvme_path = r.get_string("nvme_path");
  o.buffer_count = static_cast<int>(r.get_int("buffer_count", 0, "a non-negative integer"));
  o.pin_memory = r.opt_bool("pin_memory").value_or(pins_by_default(s));
  o.pipeline_read = r.get_bool("pipeline_read");
  o.pipeline_write = r.get_bool("pipeline_write");
  o.fast_init = r.get_bool("fast_init");
  o.ratio = r.get_number("ratio", 0, 1, "a number from 0 to 1");
  // DeepSpeedZeroConfig.offload_ratio_check: "Partial offloading only supported for ZeRO Stage 3."
  if (o.ratio < 1.0 && s.deepspeed.zero.stage != 3)
    r.fail("ratio", "a ratio below 1 (Twin-Flow partial offload) needs ZeRO stage 3; DeepSpeed asserts \"Partial "
                    "offloading only supported for ZeRO Stage 3\" (zero/config.py offload_ratio_check)");
  o.super_offload = r.get_bool("super_offload");
  o.cpuadam_cores_perc = r.get_number("cpuadam_cores_perc", 0, 1, "a number from 0 to 1");
  if (o.device == spec::OffloadDevice::NVME && s.cluster.node.nvme.devices == 0)
    r.fail("device", "nvme needs NVMe devices, but node '" + s.cluster.node.name + "' has none (nvme.devices: 0)");
}

void read_offload_param(FieldReader& r, spec::OffloadParamSpec& o, const spec::Scenario& s)
{
  o.device = read_device(r);
  o.nvme_path = r.get_string("nvme_path");
  o.buffer_count = static_cast<int>(r.get_int("buffer_count", 0, "a non-negative integer"));
  o.buffer_size = r.get_count("buffer_size", 0, COUNT);
  o.max_in_cpu = r.get_count("max_in_cpu", 0, COUNT);
  o.pin_memory = r.opt_bool("pin_memory").value_or(pins_by_default(s));
  if (o.device == spec::OffloadDevice::NVME && s.cluster.node.nvme.devices == 0)
    r.fail("device", "nvme needs NVMe devices, but node '" + s.cluster.node.name + "' has none (nvme.devices: 0)");
}

/// The offload block `block` of zero_optimization, an absent one read as an empty one (device none, every key at its
/// default), with its deprecated flag (`flag_on`: the flag's value): true stands for {device: cpu}; given with the
/// block it fails, as DeepSpeed fails.
template <class Spec, class Read>
void read_offload(FieldReader& r, const std::string& block, const std::string& flag, bool flag_on, Spec& o, Read read)
{
  FieldReader b = r.map_or_empty(block);
  if (r.has(flag) && r.has(block)) {
    std::string message = "give ";
    message += block;
    message += " or the deprecated ";
    message += flag;
    message += ", not both (DeepSpeed: \"Cannot provide deprecated parameter '";
    message += flag;
    message += "' and replacing parameter '";
    message += block;
    message += "' together\")";
    r.fail(flag, message);
  }
  read(b, o);
  if (flag_on)
    o.device = spec::OffloadDevice::CPU;
}

void read_zero(FieldReader& r, spec::Scenario& s)
{
  spec::ZeroSpec& z = s.deepspeed.zero;
  const std::int64_t h = s.model.hidden;
  z.stage = static_cast<int>(r.get_int("stage", 0, "an integer from 0 to 3"));
  if (z.stage > 3)
    r.fail_expected("stage", "an integer from 0 to 3");
  z.contiguous_gradients = r.get_bool("contiguous_gradients");
  z.reduce_scatter = r.get_bool("reduce_scatter");
  // "auto" values as transformers' HfTrainerDeepSpeedConfig.trainer_config_finalize sets them:
  // reduce_bucket_size = h*h, stage3_prefetch_bucket_size = int(0.9*h*h), stage3_param_persistence_threshold = 10*h.
  z.reduce_bucket_size = r.get<std::int64_t>(
      "reduce_bucket_size", [&](FieldReader& f) { return count_or_auto(f, "reduce_bucket_size", h * h); });
  z.use_multi_rank_bucket_allreduce = r.get_bool("use_multi_rank_bucket_allreduce");
  z.allgather_bucket_size = r.get_count("allgather_bucket_size", 0, COUNT);
  std::optional<bool> overlap = r.opt_bool("overlap_comm");
  z.overlap_comm = overlap.value_or(spec::default_overlap_comm(z.stage)); // None: the stage's default
  z.overlap_comm_given = overlap.has_value();
  z.sub_group_size = r.get_count("sub_group_size", 0, COUNT);
  z.stage3_prefetch_bucket_size =
      get_aliased_count(r, "stage3_prefetch_bucket_size", "prefetch_bucket_size",
                        static_cast<std::int64_t>(0.9 * static_cast<double>(h) * static_cast<double>(h)));
  z.stage3_param_persistence_threshold =
      get_aliased_count(r, "stage3_param_persistence_threshold", "param_persistence_threshold", 10 * h);
  // sys.maxsize: no literal of the count syntax (the schema's text names it).
  z.stage3_model_persistence_threshold =
      aliased_count(r, "stage3_model_persistence_threshold", "model_persistence_threshold")
          .value_or(std::numeric_limits<std::int64_t>::max());
  z.stage3_max_live_parameters = get_aliased_count(r, "stage3_max_live_parameters", "max_live_parameters");
  z.stage3_max_reuse_distance = get_aliased_count(r, "stage3_max_reuse_distance", "max_reuse_distance");
  z.stage3_module_granularity_threshold =
      get_aliased_count(r, "stage3_module_granularity_threshold", "module_granularity_threshold");
  z.stage3_use_all_reduce_for_fetch_params =
      get_aliased_bool(r, "stage3_use_all_reduce_for_fetch_params", "use_all_reduce_for_fetch_params");
  z.stage3_allgather_sequential = get_aliased_bool(r, "stage3_allgather_sequential", "allgather_sequential");
  z.round_robin_gradients = r.get_bool("round_robin_gradients");

  // Deprecated keys (zero/config.py DeepSpeedZeroConfig, processed by DeepSpeedConfigModel._process_deprecated_field):
  // cpu_offload: true -> offload_optimizer = DeepSpeedZeroOffloadOptimizerConfig(device=cpu), cpu_offload_param:
  // true -> offload_param = DeepSpeedZeroOffloadParamConfig(device=cpu), each with its own defaults (pin_memory:
  // the version's default); false -> None. Giving a deprecated key (any value) with its replacement fails
  // ("Cannot provide deprecated parameter ... and replacing parameter ... together"). cpu_offload_use_pin_memory
  // has set_new_param=False: DeepSpeed only warns, it sets nothing (a "not modelled" warning here).
  const bool cpu_offload = r.get_bool("cpu_offload");
  const bool cpu_offload_param = r.get_bool("cpu_offload_param");
  r.opt_bool("cpu_offload_use_pin_memory"); // type-checked; no effect (warned about by collect_warnings)
  read_offload(r, "offload_optimizer", "cpu_offload", cpu_offload, z.offload_optimizer,
               [&](FieldReader& b, spec::OffloadOptimizerSpec& o) { read_offload_optimizer(b, o, s); });
  read_offload(r, "offload_param", "cpu_offload_param", cpu_offload_param, z.offload_param,
               [&](FieldReader& b, spec::OffloadParamSpec& o) { read_offload_param(b, o, s); });
}

void read_aio(FieldReader& r, spec::AioSpec& a)
{
  const std::string POS = "a positive integer";
  a.block_size = r.get_int("block_size", 1, POS);
  a.queue_depth = static_cast<int>(r.get_int("queue_depth", 1, POS));
  if (r.has("intra_op_parallelism") && r.has("thread_count"))
    r.fail("thread_count", "give intra_op_parallelism or thread_count, not both (they are the same key)");
  const std::optional<std::int64_t> threads = r.opt_int("thread_count", 1, POS); // the docs' name (§13)
  a.intra_op_parallelism = static_cast<int>(threads ? *threads : r.get_int("intra_op_parallelism", 1, POS));
  a.single_submit = r.get_bool("single_submit");
  a.overlap_events = r.get_bool("overlap_events");
  a.use_gds = r.get_bool("use_gds");
}

/// fp16.enabled / bf16.enabled: true or false or auto; must agree with training.precision.
void check_enabled(FieldReader& block, bool expected, const spec::Scenario& s, const std::string& precision_text)
{
  (void)s;
  if (block.is_auto("enabled")) {
    block.take("enabled");
    return;
  }
  std::optional<bool> enabled = block.opt_bool("enabled");
  if (enabled && *enabled != expected)
    block.fail_expected("enabled",
                        std::string(expected ? "true" : "false") + " (training.precision is " + precision_text + ")");
}

/// Does DeepSpeed's activation_checkpointing block act on this run? zerosim models it as Megatron-DeepSpeed uses
/// it: deepspeed.checkpointing.configure(deepspeed_config=...) and every transformer block run through
/// deepspeed.checkpointing.checkpoint, which is training.activation_checkpointing: full (docs/offload.md).
bool checkpoint_block_in_effect(const spec::Scenario& s)
{
  return s.training.mode == spec::Mode::TRAIN && s.training.activation_checkpointing == spec::Checkpointing::FULL;
}

void read_activation_checkpointing(FieldReader& r, spec::DsActivationCheckpointingSpec& a, const spec::Scenario& s)
{
  a.partition_activations = r.get_bool("partition_activations");
  a.cpu_checkpointing = r.get_bool("cpu_checkpointing");
  a.contiguous_memory_optimization = r.get_bool("contiguous_memory_optimization");
  if (std::optional<std::int64_t> n = r.opt_int("number_checkpoints", 1, "a positive integer"))
    a.number_checkpoints = static_cast<int>(*n);
  a.synchronize_checkpoint_boundary = r.get_bool("synchronize_checkpoint_boundary");
  a.profile = r.get_bool("profile");
  if (!checkpoint_block_in_effect(s) || !a.contiguous_memory_optimization)
    return;
  // checkpointing.py configure(): both asserts run when the blocks are checkpointed with DeepSpeed's checkpoint.
  if (!a.partition_activations)
    r.fail("contiguous_memory_optimization",
           "contiguous_memory_optimization needs partition_activations: true; DeepSpeed asserts \"Contiguous "
           "Checkpointing is only available with partitioned activations\" (checkpointing.py configure)");
  if (!a.number_checkpoints)
    r.fail("contiguous_memory_optimization",
           "contiguous_memory_optimization needs number_checkpoints (the contiguous buffer has one slot per "
           "checkpoint); DeepSpeed asserts \"Must specify the number of layers with contiguous memory "
           "checkpointing\" (checkpointing.py configure)");
}

/// Keys set away from their default that change nothing in this run, named in warnings after the keys the
/// schema marks not modelled (partition_activations is one of those: with model-parallel size 1 the partition
/// is the whole tensor). Decided on the resolved values, so a resolved_yaml reads back with the same warnings.
void no_effect_warnings(spec::Scenario& s)
{
  // Training only: the inference schedule has no flat CPU buffer, and pins its CPU partitions iff pin_memory
  // (docs/inference.md).
  if (s.training.mode == spec::Mode::TRAIN && s.deepspeed.zero.offload_param.pin_memory != pins_by_default(s))
    s.warnings.push_back(
        "deepspeed.zero_optimization.offload_param.pin_memory: no effect (stage 3 moves the CPU parameter "
        "partitions into a flat buffer it always pins, _create_param_groups_fp16_flat_cpu_memory, and the NVMe "
        "swap buffers are always pinned: docs/deepspeed-schedule.md §6.2, §8)");
  const spec::DsActivationCheckpointingSpec& a = s.deepspeed.activation_checkpointing;
  const std::string base = "deepspeed.activation_checkpointing.";
  if (!checkpoint_block_in_effect(s)) {
    const std::string why =
        s.training.mode == spec::Mode::INFERENCE
            ? std::string("training.mode is inference: nothing is checkpointed")
            : "training.activation_checkpointing is " +
                  std::string(spec::to_string(s.training.activation_checkpointing)) +
                  ": the block acts on the transformer blocks run through deepspeed.checkpointing.checkpoint, "
                  "which zerosim models with activation_checkpointing: full only";
    const std::pair<const char*, bool> keys[] = {{"cpu_checkpointing", a.cpu_checkpointing},
                                                 {"contiguous_memory_optimization", a.contiguous_memory_optimization},
                                                 {"number_checkpoints", a.number_checkpoints.has_value()},
                                                 {"synchronize_checkpoint_boundary", a.synchronize_checkpoint_boundary},
                                                 {"profile", a.profile}};
    for (const auto& [key, set] : keys)
      if (set)
        s.warnings.push_back(base + key + ": no effect (" + why + ")");
    return;
  }
  if (a.number_checkpoints && !a.contiguous_memory_optimization)
    s.warnings.push_back(base + "number_checkpoints: no effect (it sizes the contiguous_memory_optimization "
                                "buffers only, checkpointing.py partition_activations)");
}

/// Is a not-modelled key set to something that changes behaviour? A mapping unless it says enabled: false;
/// a scalar unless it equals the default (numerically where both are numbers).
bool is_active(const YAML::Node& v, const KeyDoc& doc)
{
  if (!v.IsDefined() || v.IsNull())
    return false;
  if (v.IsMap()) {
    YAML::Node en = v["enabled"];
    return !(en.IsDefined() && en.IsScalar() && (en.Scalar() == "false" || en.Scalar() == "False"));
  }
  if (!v.IsScalar())
    return true;
  if (doc.default_text == "\"\"" && v.Scalar().empty())
    return false; // an empty string where the default is the empty string
  std::optional<double> a = parse_number(v.Scalar());
  std::optional<double> b = parse_number(doc.default_text);
  if (a && b)
    return *a != *b;
  return v.Scalar() != doc.default_text && !(doc.default_text == "false" && v.Scalar() == "False");
}

void collect_warnings(const YAML::Node& node, const Schema& schema, const std::string& path, spec::Scenario& s,
                      std::vector<std::string>& ignored)
{
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar())
      continue; // FieldReader::check_keys reports it
    const KeyDoc* doc = schema.find(it->first.Scalar());
    if (!doc)
      continue;
    std::string p = path + "." + doc->key;
    if (doc->use == KeyUse::IGNORED) {
      ignored.push_back(p);
    } else if (doc->use == KeyUse::NOT_MODELLED && is_active(it->second, *doc)) {
      s.warnings.push_back(p + ": not modelled (" + doc->description + ")");
      YAML::Emitter e;
      e << YAML::Flow << it->second;
      s.deepspeed.unmodelled_keys.emplace_back(p, e.c_str());
    } else if (doc->child && it->second.IsMap()) {
      collect_warnings(it->second, *doc->child, p, s, ignored);
    }
  }
}

/// The batch keys: "auto" takes training's values; numbers fill what training: did not give and must agree
/// with the rest (DeepSpeed's _batch_assertion: train_batch_size == micro x grad_accum x world size).
void read_batch(FieldReader& r, spec::Scenario& s, TrainingBatchGiven given)
{
  const std::string WHAT = "a positive integer or auto";
  auto read = [&](const std::string& key) -> std::optional<std::int64_t> {
    if (r.is_auto(key)) {
      r.take(key);
      return std::nullopt;
    }
    return r.opt_int(key, 1, WHAT);
  };
  std::optional<std::int64_t> tbs = read("train_batch_size");
  std::optional<std::int64_t> mbs = read("train_micro_batch_size_per_gpu");
  std::optional<std::int64_t> gas = read("gradient_accumulation_steps");
  spec::TrainingSpec& t = s.training;
  const std::int64_t gpus = s.dp();
  if (!given.micro_batch && mbs)
    t.micro_batch = static_cast<int>(*mbs);
  if (!given.grad_accum && !given.global_batch) {
    if (gas) {
      t.grad_accum = static_cast<int>(*gas);
    } else if (tbs) {
      std::int64_t per_step = static_cast<std::int64_t>(t.micro_batch) * gpus;
      if (*tbs % per_step != 0)
        r.fail_expected("train_batch_size", "a multiple of micro_batch " + std::to_string(t.micro_batch) + " x " +
                                                dp_ranks_text(s) + " = " + std::to_string(per_step));
      t.grad_accum = static_cast<int>(*tbs / per_step);
      t.global_batch_given = true;
    }
  }
  t.global_batch = spec::global_batch_of(s);
  if (mbs && *mbs != t.micro_batch)
    r.fail("train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu " + std::to_string(*mbs) +
                                                 " != training.micro_batch " + std::to_string(t.micro_batch));
  if (gas && *gas != t.grad_accum)
    r.fail("gradient_accumulation_steps", "gradient_accumulation_steps " + std::to_string(*gas) +
                                              " != training.grad_accum " + std::to_string(t.grad_accum));
  if (tbs && *tbs != t.global_batch)
    r.fail("train_batch_size", "train_batch_size " + std::to_string(*tbs) + " != micro_batch " +
                                   std::to_string(t.micro_batch) + " x grad_accum " + std::to_string(t.grad_accum) +
                                   " x " + dp_ranks_text(s) + " = " + std::to_string(t.global_batch));
}

} // namespace

std::string dp_ranks_text(const spec::Scenario& s)
{
  if (s.tp() == 1 && s.pp() == 1)
    return std::to_string(s.world()) + " GPUs";
  const std::string tp = "tensor_parallel " + std::to_string(s.tp());
  const std::string pp = "pipeline_parallel " + std::to_string(s.pp());
  const std::string over = s.pp() == 1 ? tp : s.tp() == 1 ? pp : "(" + tp + " x " + pp + ")";
  return std::to_string(s.dp()) + " data-parallel ranks (" + std::to_string(s.world()) + " GPUs / " + over + ")";
}

const std::vector<std::pair<std::string, spec::PipelineSchedule>>& pipeline_schedule_names()
{
  static const std::vector<std::pair<std::string, spec::PipelineSchedule>> names = {
      {"auto", spec::PipelineSchedule::AUTO},
      {"gpipe", spec::PipelineSchedule::GPIPE},
      {"1f1b", spec::PipelineSchedule::ONE_F_ONE_B},
      {"interleaved_1f1b", spec::PipelineSchedule::INTERLEAVED_1F1B},
      {"zero_bubble", spec::PipelineSchedule::ZERO_BUBBLE}};
  return names;
}

std::optional<std::string> partition_method(const std::string& text)
{
  const std::string m = core::lowercase(text);
  if (m == "parameters" || m == "uniform")
    return m;
  if (m.starts_with("type:") && m.size() > 5)
    return m;
  return std::nullopt;
}

DeepSpeedPipelineRead read_deepspeed_pipeline(const YAML::Node& deepspeed, const std::string& file,
                                              const Origins* origins)
{
  DeepSpeedPipelineRead out;
  if (!is_map(deepspeed) || !is_map(deepspeed["pipeline"]))
    return out;
  out.reader.emplace(deepspeed["pipeline"], file, "deepspeed.pipeline", sub_schema(deepspeed_schema(), "pipeline"),
                     origins);
  FieldReader& p = *out.reader;
  if (p.is_auto("stages"))
    p.take("stages");
  else if (const std::optional<std::int64_t> stages = p.opt_int("stages", 1, "a positive integer or auto");
           stages && *stages > 1)
    out.stages = static_cast<int>(*stages);
  if (const std::optional<std::string> partition = p.opt_string("partition"); partition && *partition != "best") {
    out.partition = partition_method(*partition);
    if (!out.partition)
      p.fail_expected("partition", std::string(PARTITION_WHAT) + ", or best (DeepSpeed's config default)");
  }
  out.activation_checkpoint_interval =
      static_cast<int>(p.get_int("activation_checkpoint_interval", 0, "a non-negative integer"));
  return out;
}

std::optional<spec::Dtype> parse_dtype(const std::string& s)
{
  if (s == "fp32" || s == "float32" || s == "float" || s == "torch.float32")
    return spec::Dtype::FP32;
  if (s == "fp16" || s == "float16" || s == "half" || s == "torch.float16")
    return spec::Dtype::FP16;
  if (s == "bf16" || s == "bfloat16" || s == "torch.bfloat16")
    return spec::Dtype::BF16;
  return std::nullopt;
}

void read_deepspeed(FieldReader& r, spec::Scenario& s, TrainingBatchGiven given)
{
  spec::DeepSpeedSpec& d = s.deepspeed;
  d = spec::DeepSpeedSpec{};
  read_batch(r, s, given);
  FieldReader z = r.map_or_empty("zero_optimization");
  read_zero(z, s);
  // pipe/engine.py PipelineEngine.__init__ (docs/pipeline-parallel.md §5): the same assert at 0.7.0, 0.16 and 0.19.
  if (s.pp() > 1 && d.zero.stage >= 2)
    z.fail_expected("stage", "0 or 1 with " + std::to_string(s.pp()) +
                                 " pipeline stages (DeepSpeed's PipelineEngine asserts \"ZeRO-2 and ZeRO-3 are "
                                 "incompatible with pipeline parallelism\": deepspeed/runtime/pipe/engine.py; "
                                 "docs/pipeline-parallel.md §5)");
  FieldReader a = r.map_or_empty("aio");
  read_aio(a, d.aio);

  const std::string ptext = std::string(spec::to_string(s.training.precision));
  if (r.has("bf16") && r.has("bfloat16"))
    r.fail("bfloat16", "give bf16 or its old name bfloat16, not both");
  if (std::optional<FieldReader> f = r.opt_map("fp16"))
    check_enabled(*f, s.training.precision == spec::Precision::FP16, s, ptext);
  for (const char* k : {"bf16", "bfloat16"})
    if (std::optional<FieldReader> b = r.opt_map(k))
      check_enabled(*b, s.training.precision == spec::Precision::BF16, s, ptext);

  d.communication_data_type =
      read_dtype(r, "communication_data_type").value_or(spec::model_dtype(s.training.precision));
  FieldReader dt = r.map_or_empty("data_types");
  d.grad_accum_dtype = read_dtype(dt, "grad_accum_dtype").value_or(spec::model_dtype(s.training.precision));
  if (r.is_auto("gradient_clipping")) {
    r.take("gradient_clipping");
    d.gradient_clipping = 1.0; // HF Trainer: max_grad_norm, default 1.0
  } else {
    d.gradient_clipping = r.opt_number("gradient_clipping", 0, 1e300, "a non-negative number or auto")
                              .value_or(s.deepspeed_version == "0.19" ? 1.0 : 0.0); // constants.py (§14)
  }
  d.prescale_gradients = r.get_bool("prescale_gradients");
  d.gradient_predivide_factor = r.get_number("gradient_predivide_factor", 1e-300, 1e300, "a positive number");
  FieldReader ac = r.map_or_empty("activation_checkpointing");
  read_activation_checkpointing(ac, d.activation_checkpointing, s);

  // DeepSpeedZeroOptimizer under the pipeline engine (not BF16_Optimizer: bf16 with an fp32 grad_accum_dtype and no
  // offload) runs without overlap_comm: engine.py _configure_zero_optimizer warns and turns it off for a PipelineModule
  // (docs/pipeline-parallel.md §5).
  if (s.pp() > 1 && d.zero.stage == 1 && d.zero.overlap_comm && !spec::pipeline_runs_bf16_optimizer(s))
    s.warnings.push_back("deepspeed.zero_optimization.overlap_comm: true has no effect with pipeline stages: "
                         "DeepSpeed's engine warns \"Pipeline parallelism does not support overlapped communication, "
                         "will be disabled.\" and reduces after the pipeline on the compute stream "
                         "(docs/pipeline-parallel.md §5)");
  // The pipeline block was read before the batch keys (read_deepspeed_pipeline); a value that is not a mapping is
  // reported here.
  r.opt_map("pipeline");
  std::vector<std::string> ignored;
  collect_warnings(r.node(), r.schema(), r.path(), s, ignored);
  if (!ignored.empty()) {
    std::string keys;
    for (const std::string& k : ignored)
      keys += (keys.empty() ? "" : ", ") + k;
    s.warnings.push_back("accepted, no effect on time or memory (learning rate, logging, checkpoint format, ...): " +
                         keys + " (zerosim describe deepspeed)");
  }
  no_effect_warnings(s);
}

spec::FsdpSpec read_fsdp(FieldReader& r)
{
  spec::FsdpSpec f;
  f.sharding_strategy =
      r.get_enum<spec::FsdpSharding>("sharding_strategy", {{"FULL_SHARD", spec::FsdpSharding::FULL_SHARD},
                                                           {"SHARD_GRAD_OP", spec::FsdpSharding::SHARD_GRAD_OP},
                                                           {"HYBRID_SHARD", spec::FsdpSharding::HYBRID_SHARD},
                                                           {"NO_SHARD", spec::FsdpSharding::NO_SHARD}});
  if (std::optional<FieldReader> mp = r.opt_map("mixed_precision")) {
    f.param_dtype = read_dtype(*mp, "param_dtype");
    f.reduce_dtype = read_dtype(*mp, "reduce_dtype");
    read_dtype(*mp, "buffer_dtype"); // checked, no effect on time or memory here
  }
  f.backward_prefetch =
      r.get_enum<spec::BackwardPrefetch>("backward_prefetch", {{"BACKWARD_PRE", spec::BackwardPrefetch::BACKWARD_PRE},
                                                               {"BACKWARD_POST", spec::BackwardPrefetch::BACKWARD_POST},
                                                               {"NONE", spec::BackwardPrefetch::NONE}});
  f.forward_prefetch = r.get_bool("forward_prefetch");
  f.limit_all_gathers = r.get_bool("limit_all_gathers");
  f.reshard_after_forward = r.opt_bool("reshard_after_forward");
  f.cpu_offload = r.get_bool("cpu_offload");
  f.wrap = r.get_enum<std::string>("wrap", {{"block", "block"}, {"model", "model"}});
  return f;
}

spec::DdpSpec read_ddp(FieldReader& r)
{
  spec::DdpSpec d;
  d.bucket_cap_mb = r.get_number("bucket_cap_mb", 1e-300, 1e300, "a positive number");
  return d;
}

} // namespace zerosim::config
