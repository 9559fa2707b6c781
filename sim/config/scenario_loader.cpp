// scenarios/NAME.yaml (docs/scenario-format.md "Scenario file"; docs/config.md). Reading order, which fixes which
// problem is reported first: --set, references, cluster.overrides, then top-level keys, training, model,
// cluster, the pipeline degree (with deepspeed.pipeline's stages), batch arithmetic, inference, the framework block
// (the pipeline against it), sweep, measured.
#include "config/scenario_loader.hpp"

#include "config/document.hpp"
#include "config/readers.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/text.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>

namespace fs = std::filesystem;

namespace zerosim::config {
namespace {

/// Resource bounds (not physical ones): the cluster's GPUs in all, and the tokens one inference request generates.
constexpr std::int64_t MAX_CLUSTER_GPUS = std::int64_t{1} << 26;
constexpr std::int64_t MAX_GENERATE_TOKENS = std::int64_t{1} << 20;
constexpr double MAX_GLOBAL_BATCH = 1099511627776.0; // 2^40 sequences per step

struct TrainingRead {
  std::optional<std::int64_t> micro_batch, grad_accum, global_batch;
  bool pipeline_parallel_given = false;
  std::optional<FieldReader> pipeline; ///< training.pipeline, when given
};

/// training.pipeline.layers: the blocks of each stage (empty when absent); counted against the stages and the model
/// once both are known (check_pipeline_shape).
std::vector<int> read_stage_layers(FieldReader& p)
{
  std::vector<int> out;
  const YAML::Node list = p.take("layers");
  if (!list.IsDefined() || list.IsNull())
    return out;
  if (!list.IsSequence() || list.size() == 0)
    p.fail_expected("layers", "a list of transformer block counts, one per stage");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::optional<double> v = item.IsScalar() ? parse_number(item.Scalar()) : std::nullopt;
    if (!v || *v != std::floor(*v) || *v < 1 || *v > std::numeric_limits<std::int32_t>::max())
      p.fail("layers", "expected a positive integer at entry " + std::to_string(i) +
                           " (every stage holds a transformer block), found " + describe_found(item));
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

/// training.pipeline (docs/config.md "Pipeline parallelism"): each key alone; against the degree, the model and the
/// framework in check_pipeline_shape and check_pipeline_framework.
void read_pipeline_block(FieldReader& p, spec::PipelineSpec& out)
{
  out.schedule = p.get_enum<spec::PipelineSchedule>("schedule", pipeline_schedule_names());
  out.virtual_stages = static_cast<int>(p.get_int("virtual_stages", 1, "a positive integer"));
  out.layers = read_stage_layers(p);
  const std::optional<std::string> method = partition_method(p.get_string("partition"));
  if (!method)
    p.fail_expected("partition", PARTITION_WHAT);
  out.partition = *method;
}

TrainingRead read_training(FieldReader& t, spec::TrainingSpec& out)
{
  const std::string POS = "a positive integer";
  TrainingRead tr;
  out.seq_len = static_cast<int>(t.req_int("seq_len", 1, POS));
  tr.micro_batch = t.opt_int("micro_batch", 1, POS);
  tr.grad_accum = t.opt_int("grad_accum", 1, POS);
  tr.global_batch = t.opt_int("global_batch", 1, POS);
  if (tr.grad_accum && tr.global_batch)
    t.fail("global_batch", "give grad_accum or global_batch, not both");
  // fp8 is named, not listed among the unknown values (docs/config.md "Not yet").
  const YAML::Node precision = t.node()["precision"];
  if (precision.IsDefined() && precision.IsScalar() &&
      (core::lowercase(precision.Scalar()).rfind("fp8", 0) == 0 ||
       core::lowercase(precision.Scalar()).rfind("float8", 0) == 0))
    t.fail("precision", "fp8 training (Transformer Engine, torchao float8) is not modelled yet: expected one of bf16, "
                        "fp16, amp_bf16, amp_fp16, fp32, found \"" +
                            precision.Scalar() + "\" (docs/config.md \"Not yet\")");
  out.precision = t.get_enum<spec::Precision>("precision", {{"bf16", spec::Precision::BF16},
                                                            {"fp16", spec::Precision::FP16},
                                                            {"amp_bf16", spec::Precision::AMP_BF16},
                                                            {"amp_fp16", spec::Precision::AMP_FP16},
                                                            {"fp32", spec::Precision::FP32}});
  out.activation_checkpointing =
      t.get_enum<spec::Checkpointing>("activation_checkpointing", {{"none", spec::Checkpointing::NONE},
                                                                   {"full", spec::Checkpointing::FULL},
                                                                   {"selective", spec::Checkpointing::SELECTIVE},
                                                                   {"per_op", spec::Checkpointing::PER_OP}});
  // flash_attention: read with software: (read_software).
  out.optimizer = t.get_enum<spec::Optimizer>(
      "optimizer", {{"adamw", spec::Optimizer::ADAMW}, {"adam", spec::Optimizer::ADAM}, {"sgd", spec::Optimizer::SGD}});
  out.optimizer_impl =
      t.get_enum<spec::OptimizerImpl>("optimizer_impl", {{"auto", spec::OptimizerImpl::AUTO},
                                                         {"single_tensor", spec::OptimizerImpl::SINGLE_TENSOR},
                                                         {"foreach", spec::OptimizerImpl::FOREACH},
                                                         {"fused", spec::OptimizerImpl::FUSED}});
  out.mode = t.get_enum<spec::Mode>("mode", {{"train", spec::Mode::TRAIN}, {"inference", spec::Mode::INFERENCE}});
  out.total_tokens = t.opt_number("total_tokens", 1e-300, 1e300, "a positive number");
  out.tensor_parallel = static_cast<int>(t.get_int("tensor_parallel", 1, POS));
  tr.pipeline_parallel_given = t.has("pipeline_parallel");
  out.pipeline_parallel = static_cast<int>(t.get_int("pipeline_parallel", 1, POS));
  tr.pipeline = t.opt_map("pipeline");
  if (tr.pipeline)
    read_pipeline_block(*tr.pipeline, out.pipeline);
  return tr;
}

/// software: (docs/scenario-format.md). training.flash_attention is the shorthand for flash2 | eager when
/// software.attention is absent; both given and disagreeing is an error naming both keys.
void read_software(FieldReader& r, FieldReader& t, spec::Scenario& s)
{
  spec::SoftwareSpec& sw = s.software;
  sw.stated = r.has("software");
  FieldReader b = r.map_or_empty("software"); // absent: today's stack, the keys' defaults
  const std::optional<bool> flash = t.opt_bool("flash_attention");
  sw.attention = t.get_bool("flash_attention") ? spec::AttentionKernel::FLASH2 : spec::AttentionKernel::EAGER;
  if (b.has("attention")) {
    sw.attention =
        *b.opt_named<spec::AttentionKernel>("attention", spec::attention_kernel, spec::attention_kernel_names(", "));
    if (flash && *flash != spec::is_fused(sw.attention))
      b.fail("attention", std::string("contradicts training.flash_attention: ") + (*flash ? "true" : "false") + " (" +
                              t.where("flash_attention") + "): " + spec::to_string(sw.attention) +
                              (spec::is_fused(sw.attention) ? " is" : " is not") +
                              " a fused kernel; give one of the two keys");
  }
  s.training.flash_attention = spec::is_fused(sw.attention);
  sw.compile = b.get_bool("compile");
  if (b.has("model_code"))
    sw.model_code = *b.opt_named<spec::ModelCode>("model_code", spec::model_code, spec::model_code_names(", "));
  sw.torch = b.get_string("torch");
  if (!spec::torch_generation(sw.torch))
    b.fail_expected("torch", "a major.minor version such as \"2.4\" (quoted, so YAML keeps it a string)");
  // torch.compile came with torch 2.0 (PyTorch 2.0 release notes).
  constexpr int FIRST_COMPILE_GENERATION = 2000; // spec::torch_generation("2.0")
  if (sw.compile && *spec::torch_generation(sw.torch) < FIRST_COMPILE_GENERATION)
    b.fail("compile", "true needs software.torch 2.0 or later (torch.compile came with torch 2.0), but "
                      "software.torch is " +
                          sw.torch + " (" + b.where("torch") + ")");
}

/// Without a calibration profile: the priors' accuracy bands of the validation report (SHIPPED_PRIORS_ACCURACY, looked
/// up as data files are), each file read once per process. None found: no band.
void attach_priors_accuracy(const ScenarioDocument& doc, spec::Calibration& c)
{
  const std::string file = find_data_file(SHIPPED_PRIORS_ACCURACY, doc.options.data_dir, doc.dir).file;
  if (file.empty())
    return;
  static std::mutex mutex;
  static std::map<std::string, std::map<std::string, spec::AccuracyBand>> read;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = read.find(file);
  if (it == read.end())
    it = read.emplace(file, load_priors_accuracy(file)).first;
  c.accuracy = it->second;
  c.accuracy_file = SHIPPED_PRIORS_ACCURACY; // its name in the data folder: outputs carry no machine path
}

/// The calibration profile (docs/calibration.md "Precedence"): --calibration, the scenario's key, the node file's
/// key, the shipped profile; `none` at any level means the priors alone. A profile naming a GPU kind the kernel
/// data do not know is an input error.
void read_calibration(FieldReader& r, const ScenarioDocument& doc, spec::Scenario& s)
{
  std::string chosen;
  std::string from;
  if (!doc.options.calibration.empty()) {
    chosen = doc.options.calibration;
    from = "--calibration";
  } else if (std::optional<std::string> c = r.opt_string("calibration")) {
    if (c->empty())
      r.fail_expected("calibration", "the path of a calibration profile, or none");
    chosen = *c == "none" ? *c : (fs::path(doc.dir) / *c).lexically_normal().string();
    from = r.where("calibration");
  } else if (!s.cluster.node.calibration.empty()) {
    chosen = s.cluster.node.calibration;
    from = "cluster.node.calibration";
  } else {
    chosen = shipped_calibration_path(doc.options.data_dir, doc.dir);
    from = "the shipped profile";
  }
  if (chosen == "none") {
    s.calibration = spec::Calibration{};
    s.calibration.path = "none";
    attach_priors_accuracy(doc, s.calibration);
    return;
  }
  if (chosen.empty()) {
    attach_priors_accuracy(doc, s.calibration); // no profile shipped: the priors
    return;
  }
  if (!core::path_exists(chosen, from + ": calibration profile"))
    throw core::InputError(from + ": calibration profile " + chosen + " does not exist");
  s.calibration = load_calibration(chosen);
  for (const auto& [name, value] : s.calibration.factors) {
    const std::optional<spec::ParamFamilyInfo> fam = spec::param_family_of(name);
    if (!fam || !fam->keys.empty() || fam->family == spec::ParamFamily::INTERFERENCE)
      continue;
    const std::string kind = spec::param_key(name);
    bool known = false;
    std::string kinds;
    for (const spec::GpuKindData& k : s.kernels.kinds) {
      known = known || k.kind == kind;
      kinds += (kinds.empty() ? "" : ", ") + k.kind;
    }
    if (!known)
      throw core::InputError(chosen + ": parameters." + name + ": expected a GPU kind of " + s.kernels.file + " (" +
                             kinds + "), found \"" + kind + "\"");
  }
}

void read_cluster(FieldReader& c, ScenarioDocument& doc, spec::Scenario& s)
{
  // The node: an inline mapping, or a file (resolved before reading; its messages name that file).
  YAML::Node node_value = c.take("node");
  if (!node_value.IsDefined() || node_value.IsNull())
    c.fail_missing("node");
  if (!node_value.IsMap())
    c.fail_expected("node", "a node name, a path or a mapping");
  FieldReader nr(node_value, doc.file_of("cluster.node"), "cluster.node", node_schema(), &doc.origins);
  s.cluster.node = read_node(nr, s.training.precision);
  // Applied to the node's tree before reading (document.cpp apply_overrides), which skips anything else.
  if (YAML::Node ov = c.take("overrides"); ov.IsDefined() && !ov.IsNull() && !ov.IsMap())
    c.fail_expected("overrides", "a mapping of node keys to values (gpu.memory: 40 GiB)");

  const std::int64_t nodes = c.get_int("nodes", 1, "a positive integer");
  s.cluster.gpus_per_node =
      static_cast<int>(c.opt_int("gpus_per_node", 1, "a positive integer").value_or(s.cluster.node.gpus));
  if (s.cluster.gpus_per_node > s.cluster.node.gpus)
    c.fail_expected("gpus_per_node", "at most the node's gpus (" + std::to_string(s.cluster.node.gpus) + ")");
  // A resource bound: ranks are counted in int, and the symmetric replay's per-rank tables grow with them.
  if (nodes > MAX_CLUSTER_GPUS / s.cluster.gpus_per_node)
    c.fail("nodes", "expected at most " + std::to_string(MAX_CLUSTER_GPUS) + " GPUs in all (nodes x gpus_per_node " +
                        std::to_string(s.cluster.gpus_per_node) + "), found " + std::to_string(nodes) + " nodes");
  s.cluster.nodes = static_cast<int>(nodes);

  spec::NetworkSpec& net = s.cluster.network;
  FieldReader n = c.map_or_empty("network");
  net.nic_bandwidth_Bps =
      n.opt_quantity("nic_bandwidth", UnitKind::BANDWIDTH).value_or(s.cluster.node.nics.bandwidth_Bps);
  net.nics_per_node =
      static_cast<int>(n.opt_int("nics_per_node", 1, "a positive integer").value_or(s.cluster.node.nics.count));
  net.latency_s = n.get_quantity("latency", UnitKind::TIME, false);
  net.oversubscription = n.get_number("oversubscription", 1, 1e300, "a number >= 1");
  if (s.cluster.nodes > 1 && (net.nics_per_node == 0 || net.nic_bandwidth_Bps <= 0))
    c.fail("nodes", std::to_string(s.cluster.nodes) + " nodes need a network, but node '" + s.cluster.node.name +
                        "' has no NICs and cluster.network gives none (set nics_per_node and nic_bandwidth)");
}

/// training.tensor_parallel against the node and the model (docs/tensor-parallel.md): the TP group is t consecutive
/// GPUs of one node, and Megatron's column/row-parallel layers split heads, key/value heads and the FFN width evenly.
void check_tensor_parallel(FieldReader& t, const spec::Scenario& s)
{
  const int tp = s.training.tensor_parallel;
  if (tp == 1)
    return;
  const auto need = [&](const char* what, std::int64_t v) {
    if (v % tp != 0)
      t.fail_expected("tensor_parallel",
                      std::string("a divisor of the model's ") + what + " (" + std::to_string(v) + ")");
  };
  if (s.cluster.gpus_per_node % tp != 0)
    t.fail_expected("tensor_parallel", "a divisor of cluster.gpus_per_node (" +
                                           std::to_string(s.cluster.gpus_per_node) +
                                           "; a tensor-parallel group is GPUs of one node)");
  need("heads", s.model.heads);
  need("kv_heads", s.model.kv_heads > 0 ? s.model.kv_heads : s.model.heads);
  need("ffn_hidden", s.model.ffn_hidden > 0 ? s.model.ffn_hidden : 4 * s.model.hidden);
}

/// The key that gave the pipeline degree, for messages: training.pipeline_parallel, or deepspeed.pipeline.stages when
/// only that gave it.
struct PipelineDegree {
  FieldReader* reader = nullptr;
  std::string key;

  std::string path() const { return reader->key_path(key); }
  [[noreturn]] void fail_expected(const std::string& what) const { reader->fail_expected(key, what); }
};

/// The pipeline degree: training.pipeline_parallel, or deepspeed.pipeline.stages above 1 when training does not give
/// it; both given must agree (docs/config.md "Pipeline parallelism").
PipelineDegree resolve_pipeline_degree(FieldReader& t, const TrainingRead& tr, DeepSpeedPipelineRead& ds,
                                       spec::Scenario& s)
{
  if (!ds.stages)
    return {&t, "pipeline_parallel"};
  if (!tr.pipeline_parallel_given) {
    s.training.pipeline_parallel = *ds.stages;
    return {&*ds.reader, "stages"};
  }
  if (*ds.stages != s.training.pipeline_parallel)
    ds.reader->fail_expected("stages", "auto, 1 or " + std::to_string(s.training.pipeline_parallel) +
                                           ", training.pipeline_parallel's (" + t.where("pipeline_parallel") +
                                           "): both keys give the pipeline degree");
  return {&t, "pipeline_parallel"};
}

/// The pipeline degree against the cluster and the model, and training.pipeline against the degree (docs/config.md
/// "Pipeline parallelism"): what the batch arithmetic needs settled.
void check_pipeline_shape(FieldReader& t, const TrainingRead& tr, const PipelineDegree& from, const spec::Scenario& s)
{
  const int p = s.pp();
  if (p == 1) {
    if (tr.pipeline)
      t.fail("pipeline", "only with pipeline_parallel > 1 (" + from.path() +
                             " is 1): the block sets how pipeline stages are scheduled and split");
    return;
  }
  const std::string P = std::to_string(p);
  if (s.training.mode == spec::Mode::INFERENCE)
    from.fail_expected("1 with training.mode inference (pipeline parallelism is modelled for training, as DeepSpeed's "
                       "PipelineEngine runs its TrainSchedule; docs/config.md \"Pipeline parallelism\")");
  const int gpus = s.world();
  const int gpn = s.cluster.gpus_per_node;
  const std::string GPUS = std::to_string(gpus) + " GPUs (cluster.nodes " + std::to_string(s.cluster.nodes) +
                           " x gpus_per_node " + std::to_string(gpn) + ")";
  if ((gpus / s.tp()) % p != 0)
    from.fail_expected("a divisor of " + std::to_string(gpus / s.tp()) + ": " + GPUS + " / training.tensor_parallel " +
                       std::to_string(s.tp()) +
                       ", as the data-parallel degree is GPUs / (tensor_parallel x pipeline_parallel)");
  if (p > s.model.layers)
    from.fail_expected("at most the model's transformer blocks (model.layers " + std::to_string(s.model.layers) +
                       "): every stage holds at least one");
  const int per_stage = gpus / p; // data-parallel x tensor-parallel ranks
  if (per_stage % gpn != 0 && gpn % per_stage != 0)
    from.fail_expected("a degree whose stages fill whole nodes or share one: a stage's " + std::to_string(per_stage) +
                       " ranks (data-parallel x tensor-parallel: " + GPUS + " / " + P +
                       " stages) must be a multiple or a divisor of cluster.gpus_per_node " + std::to_string(gpn) +
                       " (a layout limit of zerosim's engine)");
  const std::vector<int>& layers = s.training.pipeline.layers;
  if (!tr.pipeline || layers.empty())
    return;
  if (static_cast<int>(layers.size()) != p)
    tr.pipeline->fail("layers", "expected " + P + " entries, one per stage (" + from.path() + " " + P + "), found " +
                                    std::to_string(layers.size()));
  std::int64_t sum = 0;
  for (int n : layers)
    sum += n;
  if (sum != s.model.layers)
    tr.pipeline->fail("layers", "expected entries summing to the model's transformer blocks (model.layers " +
                                    std::to_string(s.model.layers) + "), found a sum of " + std::to_string(sum));
  if (tr.pipeline->has("partition"))
    tr.pipeline->fail("partition", "give layers (an explicit split, " + tr.pipeline->where("layers") +
                                       ") or partition (DeepSpeed's partition method), not both");
}

/// The pipeline against the framework, once it is known (docs/config.md "Pipeline parallelism"): DeepSpeed's
/// PipelineEngine only, its one schedule (auto resolved to it), and deepspeed.pipeline's partition and checkpoint
/// interval. The ZeRO stage is checked where it is read (read_deepspeed).
void check_pipeline_framework(const TrainingRead& tr, const PipelineDegree& from, const DeepSpeedPipelineRead& ds,
                              spec::Scenario& s)
{
  if (s.pp() == 1)
    return;
  if (s.framework != spec::Framework::DEEPSPEED)
    from.fail_expected(std::string("1 with ") + (s.framework == spec::Framework::FSDP ? "fsdp" : "ddp") +
                       " (pipeline parallelism is modelled for DeepSpeed's PipelineEngine; PyTorch DDP/FSDP have "
                       "none)");
  spec::PipelineSpec& pl = s.training.pipeline;
  const std::string ONLY_1F1B =
      "DeepSpeed's PipelineEngine has only TrainSchedule (1F1B); interleaved and "
      "zero-bubble schedules are Megatron-LM's and torchtitan's: docs/pipeline-parallel.md §3";
  if (pl.virtual_stages > 1)
    tr.pipeline->fail_expected("virtual_stages", "1 (" + ONLY_1F1B + ")");
  if (pl.schedule == spec::PipelineSchedule::INTERLEAVED_1F1B || pl.schedule == spec::PipelineSchedule::ZERO_BUBBLE)
    tr.pipeline->fail_expected("schedule", "auto, 1f1b or gpipe (" + ONLY_1F1B + ")");
  if (pl.schedule == spec::PipelineSchedule::AUTO)
    pl.schedule = spec::PipelineSchedule::ONE_F_ONE_B;
  if (ds.partition) {
    if (tr.pipeline && tr.pipeline->has("layers"))
      ds.reader->fail("partition", "give training.pipeline.layers (an explicit split, " + tr.pipeline->where("layers") +
                                       ") or a partition method, not both");
    if (tr.pipeline && tr.pipeline->has("partition") && *ds.partition != pl.partition)
      ds.reader->fail("partition", "contradicts training.pipeline.partition: " + pl.partition + " (" +
                                       tr.pipeline->where("partition") + "); give one of the two keys");
    pl.partition = *ds.partition;
  }
  const int interval = ds.activation_checkpoint_interval;
  const spec::Checkpointing ckpt = s.training.activation_checkpointing;
  if (interval == 0 || (interval == 1 && ckpt == spec::Checkpointing::FULL))
    return;
  const std::string how = ckpt == spec::Checkpointing::FULL   ? "each transformer block its own checkpoint, interval 1"
                          : ckpt == spec::Checkpointing::NONE ? "no checkpoint, interval 0"
                                                              : "a recomputation policy inside each block";
  s.warnings.push_back("deepspeed.pipeline.activation_checkpoint_interval: not modelled (DeepSpeed's PipelineEngine "
                       "would checkpoint the PipelineModule's layers in chunks of " +
                       std::to_string(interval) + "; zerosim checkpoints as training.activation_checkpointing: " +
                       spec::to_string(ckpt) + " says, " + how + "; docs/pipeline-parallel.md §7)");
  // Kept as given, so that the resolved file and the ds_config.json written from it carry it (and the warning).
  s.deepspeed.unmodelled_keys.emplace_back("deepspeed.pipeline.activation_checkpoint_interval",
                                           std::to_string(interval));
}

/// training: batch keys once the GPU count is known (global_batch must divide evenly).
void resolve_batch(FieldReader& t, const TrainingRead& tr, spec::Scenario& s)
{
  spec::TrainingSpec& out = s.training;
  out.micro_batch = static_cast<int>(tr.micro_batch.value_or(1));
  const std::int64_t per_step = static_cast<std::int64_t>(out.micro_batch) * s.dp();
  if (tr.global_batch) {
    if (*tr.global_batch % per_step != 0)
      t.fail_expected("global_batch", "a multiple of micro_batch " + std::to_string(out.micro_batch) + " x " +
                                          dp_ranks_text(s) + " = " + std::to_string(per_step));
    out.grad_accum = static_cast<int>(*tr.global_batch / per_step);
    out.global_batch_given = true;
  } else {
    out.grad_accum = static_cast<int>(tr.grad_accum.value_or(1));
    out.global_batch_given = false;
  }
  // A resource bound: sequences and tokens per step are int64 and doubles.
  if (static_cast<double>(per_step) * out.grad_accum > MAX_GLOBAL_BATCH)
    t.fail("grad_accum", "expected a global batch (micro_batch x data-parallel ranks x grad_accum) of at most 2^40 "
                         "sequences, found " +
                             std::to_string(per_step) + " x " + std::to_string(out.grad_accum));
  out.global_batch = spec::global_batch_of(s);
}

void read_sweep(FieldReader& r, spec::Scenario& s)
{
  YAML::Node sw = r.take("sweep");
  if (!sw.IsDefined() || sw.IsNull())
    return;
  if (!sw.IsMap())
    r.fail_expected("sweep", "a mapping of dotted keys to lists of values");
  for (auto it = sw.begin(); it != sw.end(); ++it) {
    const YAML::Node k = it->first; // a copy: it->first dies with its statement (yaml_reader.cpp check_keys)
    const std::string key = key_name(k, r.file(), "sweep");
    std::string where = position(r.file(), k.Mark());
    if (std::string problem = check_scenario_path(key); !problem.empty())
      throw core::InputError(where + ": sweep." + problem);
    if (key == "sweep" || key.rfind("sweep.", 0) == 0)
      throw core::InputError(where + ": sweep." + key + ": a sweep cannot sweep itself");
    const YAML::Node values = it->second;
    if (!values.IsSequence() || values.size() == 0)
      throw core::InputError(position(r.file(), values.Mark()) + ": sweep." + key +
                             ": expected a non-empty list of values, found " + describe_found(values));
    std::vector<std::string> written;
    for (const YAML::Node& v : values) {
      if (v.IsScalar()) {
        written.push_back(v.Scalar());
      } else {
        YAML::Emitter e;
        e << YAML::Flow << v;
        written.push_back(e.c_str());
      }
    }
    s.sweep.emplace_back(key, std::move(written));
  }
}

/// The ddp block (docs/ddp.md "Defaults and keys"). bucket_cap_mb is read by read_ddp; the first bucket's cap
/// follows PyTorch: dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB) only when bucket_cap_mb is not given.
void read_ddp_block(FieldReader& d, spec::Scenario& s)
{
  const bool cap_given = d.has("bucket_cap_mb");
  s.ddp = read_ddp(d);
  spec::DdpSpec& out = s.ddp;
  out.first_bucket_cap_mb = d.opt_number("first_bucket_cap_mb", 1e-300, 1e300, "a positive number")
                                .value_or(cap_given ? out.bucket_cap_mb : 1.0);
  out.gradient_as_bucket_view = d.get_bool("gradient_as_bucket_view");
  out.no_sync = d.get_bool("no_sync");
  out.find_unused_parameters = d.get_bool("find_unused_parameters");
  out.static_graph = d.get_bool("static_graph");
  out.broadcast_buffers = d.get_bool("broadcast_buffers");
  if (out.find_unused_parameters)
    s.warnings.push_back("ddp.find_unused_parameters: not modelled (the autograd-graph traversal on the CPU at every "
                         "forward; its buckets and used-map all-reduce are modelled)");
  if (out.static_graph)
    s.warnings.push_back("ddp.static_graph: not modelled (static graph: the steady state is the default one; its "
                         "first iteration is not modelled)");
}

void read_measured(FieldReader& m, spec::MeasuredSpec& out)
{
  out.step_time_s = m.opt_quantity("step_time", UnitKind::TIME);
  out.tflops_per_gpu = m.opt_number("tflops_per_gpu", 1e-300, 1e300, "a positive number");
  std::optional<std::string> def =
      m.opt_enum<std::string>("tflops_definition", {{"model", "model"}, {"hardware", "hardware"}});
  if (out.tflops_per_gpu && !def)
    m.fail_missing("tflops_definition",
                   "tflops_per_gpu needs it: model or hardware (docs/scenario-format.md \"TFLOPs\")");
  out.tflops_definition = def.value_or("");
  if (std::optional<double> pm = m.opt_quantity("peak_memory", UnitKind::BYTES))
    out.peak_memory_bytes = static_cast<std::int64_t>(*pm);
  out.source = m.get_string("source");
}

/// deepspeed_version: a minor version from 0.14 to 0.19, each as DeepSpeed's last patch tag of it reads
/// (data/deepspeed_config_keys.csv). The behaviour modelled is the nearest modelled version at or below it: 0.19, or
/// 0.16 for 0.14-0.18. 0.14 and 0.15 have no modelled version below them; their defaults of every key zerosim models
/// match 0.16.9's (tests/unit/config/deepspeed_keys_test.cpp checks it against the table), so they are modelled as
/// 0.16 with that assumption named in the warnings.
void read_deepspeed_version(FieldReader& r, spec::Scenario& s)
{
  if (const YAML::Node v = r.node()["deepspeed_version"]; v.IsDefined() && v.IsScalar()) {
    const std::string text = v.Scalar();
    const bool patch = text.size() > 5 && text.starts_with("0.1") && text[3] >= '4' && text[3] <= '9' &&
                       text[4] == '.' && text.find_first_not_of("0123456789", 5) == std::string::npos;
    if (patch)
      r.fail("deepspeed_version", "give the minor version \"" + text.substr(0, 4) +
                                      "\", not a patch version (found \"" + text +
                                      "\"): each minor version is read at its last patch tag (docs/config.md)");
  }
  s.deepspeed_version_requested = r.get_enum<std::string>(
      "deepspeed_version",
      {{"0.19", "0.19"}, {"0.18", "0.18"}, {"0.17", "0.17"}, {"0.16", "0.16"}, {"0.15", "0.15"}, {"0.14", "0.14"}});
  s.deepspeed_version = s.deepspeed_version_requested == "0.19" ? "0.19" : "0.16";
  if (s.deepspeed_version_requested == "0.14" || s.deepspeed_version_requested == "0.15")
    s.warnings.push_back("deepspeed_version: " + s.deepspeed_version_requested +
                         " is modelled as 0.16 (no modelled version is older): its defaults of every key zerosim "
                         "models are 0.16's (data/deepspeed_config_keys.csv); it lacks "
                         "zero_optimization.stage3_module_granularity_threshold (0, off, in 0.16) and aio.use_gds, "
                         "and calls aio.intra_op_parallelism thread_count");
}

/// The minor version N of a deepspeed_version "0.N" older than the modelled ones (N from 1 to 13); nullopt otherwise.
std::optional<int> older_deepspeed_minor(const FieldReader& r)
{
  const YAML::Node v = r.node()["deepspeed_version"];
  if (!v.IsDefined() || !v.IsScalar())
    return std::nullopt;
  const std::string text = v.Scalar();
  if (text.size() < 3 || text.size() > 4 || !text.starts_with("0.") ||
      text.find_first_not_of("0123456789", 2) != std::string::npos || text[2] == '0')
    return std::nullopt;
  const int minor = std::stoi(text.substr(2));
  return minor <= 13 ? std::optional<int>(minor) : std::nullopt;
}

/// The last minor version whose PipelineEngine refuses bf16 at ZeRO stage 1 (its last patch, v0.8.3, as every minor
/// version is read): ReduceGrads asserts "only bf16 + z1 are supported" and raises NotImplementedError up to v0.9.1;
/// #3399 (v0.9.2) lets it through (docs/pipeline-parallel.md §5).
constexpr int LAST_MINOR_REFUSING_BF16_ZERO1_PIPELINE = 8;

/// deepspeed_version, read (read_deepspeed_version) unless it is older than the modelled ones: then its minor version
/// is returned and its refusal waits until the blocks are read (refuse_older_deepspeed_version), so that it can give
/// DeepSpeed's own reason; the blocks are read meanwhile with 0.16's defaults.
std::optional<int> read_deepspeed_version_or_defer(FieldReader& r, spec::Scenario& s)
{
  const std::optional<int> older = older_deepspeed_minor(r);
  if (!older) {
    read_deepspeed_version(r, s);
    return std::nullopt;
  }
  s.deepspeed_version = "0.16";
  s.deepspeed_version_requested = "0.16";
  return older;
}

/// A deepspeed_version older than the modelled ones (`minor`, older_deepspeed_minor) is refused once the blocks are
/// read: with DeepSpeed's own reason where its pipeline engine would refuse the run (bf16 at ZeRO stage 1 with
/// pipeline stages, before 0.9), else as any version outside 0.14-0.19.
[[noreturn]] void refuse_older_deepspeed_version(FieldReader& r, spec::Scenario& s, int minor)
{
  if (minor <= LAST_MINOR_REFUSING_BF16_ZERO1_PIPELINE && s.pp() > 1 && s.framework == spec::Framework::DEEPSPEED &&
      s.training.precision == spec::Precision::BF16 && s.deepspeed.zero.stage == 1)
    r.fail("deepspeed_version",
           "DeepSpeed 0." + std::to_string(minor) +
               "'s PipelineEngine refuses training.precision bf16 with deepspeed.zero_optimization.stage 1 and " +
               std::to_string(s.pp()) +
               " pipeline stages: ReduceGrads asserts \"only bf16 + z1 are supported\" and raises "
               "NotImplementedError (deepspeed/runtime/pipe/engine.py _exec_reduce_grads, up to 0.9.1; "
               "docs/pipeline-parallel.md §5); use ZeRO stage 0 (BF16_Optimizer, as BLOOM ran) or a deepspeed_version "
               "from 0.14 to 0.19 (zerosim models those)");
  read_deepspeed_version(r, s); // the refusal of a version outside 0.14-0.19
  throw core::InternalError("config: deepspeed_version 0." + std::to_string(minor) + " was not refused");
}

spec::Scenario read_scenario(ScenarioDocument& doc)
{
  require_mapping(doc.root, doc.file);
  for (const std::string& set : doc.options.sets)
    apply_set(doc, set);
  // Top-level keys are checked before references are followed, so a typo is reported as such.
  FieldReader r(doc.root, doc.file, "", scenario_schema(), &doc.origins);
  for (const char* ref : {"model", "cluster.node", "deepspeed"})
    resolve_reference(doc, ref);
  apply_overrides(doc);

  spec::Scenario s;
  s.file = doc.file;
  s.name = r.opt_string("name").value_or(fs::path(doc.file).stem().string());
  const std::optional<int> older_minor = read_deepspeed_version_or_defer(r, s);

  FieldReader t = r.req_map("training");
  TrainingRead tr = read_training(t, s.training);
  read_software(r, t, s);

  YAML::Node model = r.take("model");
  if (!model.IsDefined() || model.IsNull())
    r.fail_missing("model");
  if (!model.IsMap())
    r.fail_expected("model", "a model name, a path or a mapping");
  FieldReader mr(model, doc.file_of("model"), "model", model_schema(), &doc.origins);
  s.model = read_model(mr);

  FieldReader c = r.req_map("cluster");
  read_cluster(c, doc, s);
  check_tensor_parallel(t, s);
  DeepSpeedPipelineRead ds_pipeline =
      read_deepspeed_pipeline(r.take("deepspeed"), doc.file_of("deepspeed"), &doc.origins);
  const PipelineDegree pipeline_degree = resolve_pipeline_degree(t, tr, ds_pipeline, s);
  check_pipeline_shape(t, tr, pipeline_degree, s);
  resolve_batch(t, tr, s);

  std::optional<FieldReader> inf = r.opt_map("inference");
  if (inf && s.training.mode != spec::Mode::INFERENCE)
    r.fail("inference", "only with training.mode: inference");
  if (!inf && s.training.mode == spec::Mode::INFERENCE)
    r.fail_missing("inference", "training.mode: inference needs it");
  if (inf) {
    s.inference.batch = static_cast<int>(inf->get_int("batch", 1, "a positive integer"));
    s.inference.prompt_tokens = static_cast<int>(inf->req_int("prompt_tokens", 1, "a positive integer"));
    // A resource bound: the metrics keep a time per pass of the request (measured: 2^20 tokens of the BLOOM scenario
    // take 29 s and 3.4 GiB; 10^8 did not finish in a minute within 8 GiB).
    const std::int64_t generate = inf->get_int("generate_tokens", 0, "a non-negative integer");
    if (generate > MAX_GENERATE_TOKENS)
      inf->fail("generate_tokens", "expected at most " + std::to_string(MAX_GENERATE_TOKENS) +
                                       " tokens per request (zerosim keeps a time per forward pass), found " +
                                       std::to_string(generate));
    s.inference.generate_tokens = static_cast<int>(generate);
  }
  s.price_per_gpu_hour = r.opt_number("price_per_gpu_hour", 0, 1e300, "a non-negative number");

  // Exactly one framework block; none = DeepSpeed with every default (docs/config.md).
  std::string first;
  for (const char* fw : {"deepspeed", "fsdp", "ddp"})
    if (r.has(fw)) {
      if (!first.empty())
        r.fail(fw, "give one of deepspeed, fsdp, ddp, not several (" + first + " is also given)");
      first = fw;
    }
  TrainingBatchGiven given{tr.micro_batch.has_value(), tr.grad_accum.has_value(), tr.global_batch.has_value()};
  // The DeepSpeed block, absent (also with fsdp and ddp) read as an empty one: every key at DeepSpeed's default.
  YAML::Node ds = r.take("deepspeed");
  if (ds.IsDefined() && !ds.IsNull() && !ds.IsMap())
    r.fail_expected("deepspeed", "a mapping or the path of a ds_config.json");
  FieldReader dr(is_map(ds) ? ds : YAML::Node(YAML::NodeType::Map), doc.file_of("deepspeed"), "deepspeed",
                 deepspeed_schema(), &doc.origins);
  read_deepspeed(dr, s, given);
  if (first == "deepspeed" || first.empty()) {
    s.framework = spec::Framework::DEEPSPEED;
  } else if (first == "fsdp") {
    s.framework = spec::Framework::FSDP;
    if (std::optional<FieldReader> f = r.opt_map("fsdp"))
      s.fsdp = read_fsdp(*f);
  } else {
    s.framework = spec::Framework::DDP;
    if (std::optional<FieldReader> d = r.opt_map("ddp"))
      read_ddp_block(*d, s);
  }
  check_pipeline_framework(tr, pipeline_degree, ds_pipeline, s);
  if (older_minor)
    refuse_older_deepspeed_version(r, s, *older_minor);
  if (s.tp() > 1 && s.framework != spec::Framework::DEEPSPEED)
    t.fail("tensor_parallel", std::string("tensor parallelism is modelled as Megatron-DeepSpeed runs it (a deepspeed "
                                          "block); with ") +
                                  (s.framework == spec::Framework::FSDP ? "fsdp" : "ddp") +
                                  " it is not modelled (docs/tensor-parallel.md)");
  // training.optimizer_impl: torch.optim's implementation (docs/ddp.md "Optimizer"). DeepSpeed steps with its own
  // optimizer (FusedAdam on the GPU, DeepSpeedCPUAdam offloaded); fused=True came with torch 2.0 for Adam and AdamW.
  if (s.training.optimizer_impl != spec::OptimizerImpl::AUTO) {
    if (s.framework == spec::Framework::DEEPSPEED)
      t.fail("optimizer_impl", "chooses torch.optim's implementation (a ddp: or fsdp: run); DeepSpeed steps with its "
                               "own optimizer (FusedAdam, or DeepSpeedCPUAdam when offloaded): leave it at auto");
    if (s.training.optimizer_impl == spec::OptimizerImpl::FUSED) {
      if (s.training.optimizer == spec::Optimizer::SGD)
        t.fail("optimizer_impl", "fused is modelled for adam and adamw (torch.optim.AdamW/Adam fused=True), found "
                                 "training.optimizer sgd");
      constexpr int FIRST_FUSED_ADAM_GENERATION = 2000; // spec::torch_generation("2.0")
      if (*spec::torch_generation(s.software.torch) < FIRST_FUSED_ADAM_GENERATION)
        t.fail("optimizer_impl", "fused needs software.torch 2.0 or later (AdamW's fused=True came with torch 2.0), "
                                 "found software.torch " +
                                     s.software.torch);
    }
    if (s.framework == spec::Framework::FSDP && s.fsdp.cpu_offload)
      s.warnings.push_back("training.optimizer_impl: with fsdp.cpu_offload the optimizer steps on the CPU, priced as "
                           "torch's per-parameter CPU AdamW whatever the implementation (docs/fsdp.md)");
  }
  if (s.tp() > 1 && s.training.mode == spec::Mode::INFERENCE)
    t.fail("tensor_parallel", "tensor parallelism in inference (DeepSpeed-Inference's kernel injection) is not "
                              "modelled: ZeRO-Inference runs one rank per model copy (docs/inference.md)");
  if (s.tp() > 1 && s.deepspeed.activation_checkpointing.partition_activations)
    s.warnings.push_back("deepspeed.activation_checkpointing.partition_activations: with tensor_parallel " +
                         std::to_string(s.tp()) +
                         " DeepSpeed splits each checkpoint over the tensor-parallel group and all-gathers it before "
                         "the recompute; not modelled: the checkpoint is kept whole (docs/tensor-parallel.md)");
  // fsdp: {} / ddp: {} (empty) are valid: take the keys so they are not reported.
  r.take("fsdp");
  r.take("ddp");

  read_sweep(r, s);
  if (std::optional<FieldReader> m = r.opt_map("measured"))
    read_measured(*m, s.measured);
  s.kernels = load_kernel_table(kernel_table_path(doc.options.data_dir, doc.dir));
  read_calibration(r, doc, s);
  bool known = true;
  const spec::GpuKindData& kind = s.kernels.kind_of(s.cluster.node.gpu.model, &known);
  if (!known)
    s.warnings.push_back("cluster.node.gpu.model: '" + s.cluster.node.gpu.model + "' matches no GPU kind of " +
                         s.kernels.file + "; priced with its '" + kind.kind + "' figures");
  spec::AttentionKernel used = s.software.attention;
  spec::attention_figure(kind, s.software.attention, &used);
  if (spec::is_fused(s.software.attention) && used != s.software.attention)
    s.warnings.push_back(std::string("software.attention: ") + spec::to_string(s.software.attention) +
                         " does not run on " + kind.kind + " (" + s.kernels.file +
                         " lists no figures for it); priced as " + spec::to_string(used));
  return s;
}

ScenarioDocument make_document(YAML::Node root, const std::string& file, const LoadOptions& options)
{
  ScenarioDocument doc;
  doc.root = std::move(root);
  doc.file = file;
  doc.dir = fs::path(file).parent_path().string();
  doc.options = options;
  return doc;
}

} // namespace

spec::Scenario load_scenario(const std::string& path, const LoadOptions& options)
{
  return guard_yaml(path, [&] {
    ScenarioDocument doc = make_document(load_yaml_file(path), path, options);
    return read_scenario(doc);
  });
}

spec::Scenario load_scenario_text(const std::string& text, const std::string& file, const LoadOptions& options)
{
  return guard_yaml(file, [&] {
    ScenarioDocument doc = make_document(parse_yaml(text, file), file, options);
    return read_scenario(doc);
  });
}

spec::Scenario load_deepspeed_text(const std::string& ds_text, const std::string& ds_file,
                                   const std::string& scenario_text, const std::string& scenario_file,
                                   const LoadOptions& options)
{
  return guard_yaml(scenario_file, [&] {
    ScenarioDocument doc = make_document(parse_yaml(scenario_text, scenario_file), scenario_file, options);
    require_mapping(doc.root, doc.file);
    if (ds_file.ends_with(".json"))
      check_strict_json(ds_text, ds_file);
    YAML::Node ds = guard_yaml(ds_file, [&] { return parse_yaml(ds_text, ds_file); });
    require_mapping(ds, ds_file);
    doc.root["deepspeed"] = ds;
    doc.part_files["deepspeed"] = ds_file;
    return read_scenario(doc);
  });
}

spec::ModelSpec load_model_text(const std::string& text, const std::string& file)
{
  return guard_yaml(file, [&] {
    YAML::Node root = parse_yaml(text, file);
    require_mapping(root, file);
    FieldReader r(root, file, "", model_schema(), nullptr);
    return read_model(r);
  });
}

spec::NodeSpec load_node_text(const std::string& text, const std::string& file)
{
  return guard_yaml(file, [&] {
    YAML::Node root = parse_yaml(text, file);
    require_mapping(root, file);
    FieldReader r(root, file, "", node_schema(), nullptr);
    return read_node(r, std::nullopt);
  });
}

spec::ModelSpec load_model(const std::string& path)
{
  return guard_yaml(path, [&] {
    YAML::Node root = load_yaml_file(path);
    require_mapping(root, path);
    FieldReader r(root, path, "", model_schema(), nullptr);
    return read_model(r);
  });
}

spec::NodeSpec load_node(const std::string& path)
{
  return guard_yaml(path, [&] {
    YAML::Node root = load_yaml_file(path);
    require_mapping(root, path);
    FieldReader r(root, path, "", node_schema(), nullptr);
    return read_node(r, std::nullopt);
  });
}

} // namespace zerosim::config
