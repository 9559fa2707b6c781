#include "config/schema.hpp"

#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>

namespace zerosim::config {

const KeyDoc* Schema::find(std::string_view key) const
{
  for (const KeyDoc& k : keys)
    if (k.key == key)
      return &k;
  return nullptr;
}

std::vector<std::string> Schema::names() const
{
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const KeyDoc& k : keys)
    out.push_back(k.key);
  return out;
}

KeyDoc modelled_key(std::string k, std::string type, std::string def, std::string desc, const Schema* child)
{
  return KeyDoc{std::move(k), std::move(type), std::move(def), std::move(desc), child, KeyUse::MODELLED, false};
}

const Schema& sub_schema(const Schema& parent, std::string_view key)
{
  const KeyDoc* k = parent.find(key);
  if (!k || !k->child)
    throw core::InternalError("config: no schema for " + parent.name + "." + std::string(key));
  return *k->child;
}

namespace {

constexpr KeyUse M = KeyUse::MODELLED;
constexpr KeyUse I = KeyUse::IGNORED;
constexpr KeyUse N = KeyUse::NOT_MODELLED;

KeyDoc key(std::string k, std::string type, std::string def, std::string desc, const Schema* child = nullptr,
           KeyUse use = M, bool opaque = false)
{
  return KeyDoc{std::move(k), std::move(type), std::move(def), std::move(desc), child, use, opaque};
}

/// A DeepSpeed key accepted silently, whatever its content (it cannot change time or memory).
KeyDoc ignored(std::string k, std::string desc)
{
  return KeyDoc{std::move(k), "any", "-", std::move(desc), nullptr, I, true};
}

/// A DeepSpeed key that changes time or memory but is not modelled: accepted, warned about when active
/// (a value other than the default, a mapping without `enabled: false`).
KeyDoc unmodelled(std::string k, std::string type, std::string def, std::string desc)
{
  return KeyDoc{std::move(k), std::move(type), std::move(def), std::move(desc), nullptr, N, true};
}

/// A key of the user's contract for a feature not built yet: accepted at `accepted` (the value that means the
/// feature is off; "none" for a block refused whenever it is given), refused otherwise, naming `feature`.
KeyDoc not_yet(std::string k, std::string type, std::string accepted, std::string feature)
{
  return KeyDoc{std::move(k), std::move(type), std::move(accepted), std::move(feature), nullptr, KeyUse::NOT_YET, true};
}

const std::string DTYPE = "one of fp32, fp16, bf16 (also float32, float16, bfloat16, torch.* names)";

} // namespace

const Schema& model_schema()
{
  static const Schema s{
      "model",
      {key("name", "string", "required", "the model's name, as printed in reports"),
       key("layers", "integer >= 1", "required", "transformer blocks"),
       key("hidden", "integer >= 1", "required", "hidden size h; divisible by heads"),
       key("heads", "integer >= 1", "required", "attention heads"),
       key("kv_heads", "integer >= 1", "heads", "key/value heads (grouped-query attention); must divide heads"),
       key("ffn_hidden", "integer >= 1", "4 * hidden", "inner size of the MLP"),
       key("ffn", "one of gelu, swiglu", "gelu", "gelu: 2 matrices (up, down); swiglu: 3 (gate, up, down)"),
       key("vocab", "integer >= 1", "required", "vocabulary size"),
       key("tied_embeddings", "bool", "false", "the LM head shares the input embedding's weights"),
       key("norm", "one of layernorm, rmsnorm", "layernorm", "layernorm has weight and bias; rmsnorm a weight only"),
       key("position", "one of learned, rope, alibi", "learned", "learned adds a max_position x hidden table"),
       key("bias", "bool", "true", "biases on every linear layer (GPT-2, BLOOM: true; Llama, MPT: false)"),
       key("max_position", "integer >= 1", "required when position: learned", "rows of the position table"),
       key("loss", "one of hf, megatron", "hf",
           "the loss's code: hf (the 16-bit logits returned and kept, log_softmax saves an fp32 copy) or megatron "
           "(Megatron-LM's vocab-parallel cross entropy: one fp32 copy, softmax in place); docs/workload.md §4.4"),
       key("dropout", "number in [0, 1)", "0.1 with bias, 0 without",
           "dropout probability in training (attention, residuals, embedding); > 0 saves a mask per dropout"),
       key("source", "string", "\"\"", "where the shape comes from (for people)"),
       not_yet("num_experts", "integer >= 1", "1", "mixture of experts (MoE)")}};
  return s;
}

const Schema& node_schema()
{
  static const Schema peak{
      "node.gpu.peak",
      {key("bf16", "compute rate", "none", "dense bf16 tensor-core peak; needed for bf16, amp_bf16"),
       key("fp16", "compute rate", "none", "dense fp16 tensor-core peak; needed for fp16, amp_fp16"),
       key("tf32", "compute rate", "none", "dense tf32 tensor-core peak (not used for fp32 runs)"),
       key("fp32", "compute rate", "none", "fp32 peak without tensor cores; needed for fp32")}};
  static const Schema power{
      "node.gpu.power",
      {key("limit", "watts (number > 0)", "required", "the board power limit the GPUs ran at (nvidia-smi -pl)"),
       key("tdp", "watts (number > 0)", "required",
           "the board's rated power, at which peak and the MAMF figures hold")}};
  static const Schema gpu{
      "node.gpu",
      {key("model", "string", "required", "GPU model, e.g. A100-SXM4-80GB"),
       key("memory", "bytes", "required", "device memory"),
       key("memory_bandwidth", "bandwidth", "required", "HBM bandwidth"),
       key("peak", "mapping", "required", "dense peak by precision (bf16, fp16, tf32, fp32)", &peak),
       key("power", "mapping", "none (run at the rated power)",
           "a power cap below the rated power: sustained clock (limit/tdp)^exponent (docs/compute.md §1.8)", &power)}};
  static const Schema nvlink{
      "node.nvlink",
      {key("bandwidth", "bandwidth", "required", "per GPU, per direction"),
       // NCCL src/graph/tuning.cc, hwLat[NCCL_HW_NVLINK], LL protocol: 0.6 us (Tree and Ring).
       key("latency", "time", "0.6 us",
           "per message; NCCL's NVLink base latency (src/graph/tuning.cc hwLat[NVLINK], LL protocol)")}};
  static const Schema pcie{
      "node.pcie",
      {key("bandwidth", "bandwidth", "required", "per GPU link, per direction, as achieved"),
       key("gpus_per_switch", "integer >= 1", "1", "GPUs (and their NIC/NVMe) sharing one switch uplink"),
       key("switch_uplink", "bandwidth", "pcie.bandwidth", "switch to CPU root complex, per direction (one x16 link)"),
       // NCCL src/graph/tuning.cc, hwLat[NCCL_HW_PCI], LL protocol: 1.0 us.
       key("latency", "time", "1 us", "per transfer; NCCL's PCI base latency (src/graph/tuning.cc hwLat[PCI], LL)")}};
  static const Schema cpu{
      "node.cpu",
      {key("sockets", "integer >= 1", "1", "CPU sockets"),
       key("cores", "integer >= 1", "required", "physical cores, all sockets"),
       key("memory", "bytes", "required", "host memory"),
       key("memory_bandwidth", "bandwidth", "required", "achievable DRAM bandwidth, all sockets together"),
       // An assumption (docs/config.md): host memory kept for the OS, page cache and daemons.
       key("reserved", "bytes or percent of memory", "5%",
           "host memory kept for the OS and not usable by training (a stated assumption, docs/config.md)"),
       // CPU-Adam DRAM traffic per element: read p, g, m, v (16 B), write p, m, v (12 B).
       key("adam_bytes_per_param", "number > 0", "28",
           "DRAM bytes moved per CPU-Adam element update: read p, g, m, v, write p, m, v (docs/deepspeed-schedule.md "
           "§9.1)")}};
  static const Schema nvme{"node.nvme",
                           {key("devices", "integer >= 0", "0", "NVMe devices; 0 = none"),
                            key("read", "bandwidth", "required when devices > 0", "per device"),
                            key("write", "bandwidth", "required when devices > 0", "per device"),
                            key("capacity", "bytes", "required when devices > 0", "per device"),
                            // Per request, typical, QD 1: Micron 9200 NVMe SSDs datasheet (micron.com, "Latency to
                            // media performance, typical (QD = 1): READ: 92-150 us, WRITE: 21 us"; read latency
                            // varies by capacity, 92 us is the lowest). Other enterprise TLC NVMe datasheets agree
                            // within ~10 %: Intel SSD DC P4500 (Lenovo product guide, random read 85 us, random
                            // write 20 us). One charge per wave of aio requests (docs/engine.md "NVMe").
                            key("read_latency", "time", "92 us",
                                "per wave of aio read requests; Micron 9200 datasheet, typical QD1 read latency"),
                            key("write_latency", "time", "21 us",
                                "per wave of aio write requests; Micron 9200 datasheet, typical QD1 write latency")}};
  static const Schema nics{"node.nics",
                           {key("count", "integer >= 0", "0", "NICs for the inter-node fabric"),
                            key("bandwidth", "bandwidth", "required when count > 0", "per NIC, per direction"),
                            key("busbw_fraction", "number in (0, 1]", "the network prior, 0.96",
                                "NCCL's measured bus bandwidth through one NIC of this cluster / its line rate, two "
                                "nodes, large messages (docs/collectives.md \"Achieved bus bandwidth\")")}};
  static const Schema s{
      "node",
      {key("name", "string", "required", "the server's name, as printed in reports"),
       key("gpu", "mapping", "required", "the GPU kind (every GPU of a node is the same)", &gpu),
       key("gpus", "integer >= 1", "required", "GPUs in the node"),
       key("nvlink", "mapping", "absent = PCIe-only node", "NVLink/NVSwitch between the node's GPUs", &nvlink),
       key("pcie", "mapping", "required", "the PCIe tree: GPU links and switch uplinks", &pcie),
       key("cpu", "mapping", "required", "host CPUs and memory", &cpu),
       key("nvme", "mapping", "no NVMe", "local NVMe drives", &nvme),
       key("nics", "mapping", "no NICs", "network cards for the inter-node fabric", &nics),
       key("source", "string", "\"\"", "public source of the figures (for people)"),
       key("calibration", "path or none", "the shipped calibration/default.yaml",
           "a calibration profile fitted on this cluster (docs/calibration.md); a scenario's or --calibration wins")}};
  return s;
}

namespace {

const Schema& offload_optimizer_schema()
{
  static const Schema s{
      "deepspeed.zero_optimization.offload_optimizer",
      {key("device", "one of none, cpu, nvme", "none", "where optimizer states live and Adam runs (offload_config.py)"),
       key("nvme_path", "string", "\"\"",
           "NVMe mount for the states; the path is not resolved: it is taken to be one RAID-0 volume of "
           "every NVMe drive of the node (docs/engine.md \"NVMe\")",
           nullptr, N),
       key("buffer_count", "integer >= 0", "4", "swap buffers (NVMe)"),
       key("pin_memory", "bool", "0.19: true; 0.16: false",
           "page-locked host buffers (docs/deepspeed-schedule.md §14)"),
       key("pipeline_read", "bool", "false", "overlap the next sub-group's NVMe read with the step"),
       key("pipeline_write", "bool", "false", "overlap the previous sub-group's NVMe write with the step"),
       key("fast_init", "bool", "false",
           "no effect on a training step: it only changes how the fp32 master is first built from NVMe "
           "parameters (stage3.py _create_fp32_partitions)",
           nullptr, N),
       key("ratio", "number in [0, 1]", "1.0",
           "Twin-Flow: fraction of the sub-groups stepped on the CPU (stage 3 only; below 1 with stage 1/2 "
           "DeepSpeed asserts)"),
       key("super_offload", "bool", "false",
           "SuperOffload for superchips (its speculative CPU Adam during backward); scheduled as the plain offload",
           nullptr, N),
       key("cpuadam_cores_perc", "number in [0, 1]", "0.8",
           "share of the cores for SuperOffload's CPU Adam; used only with super_offload, which is not modelled",
           nullptr, N),
       unmodelled("convert_grad_on_cpu", "bool", "true", "gradient dtype conversion on the GPU instead of the CPU")}};
  return s;
}

const Schema& offload_param_schema()
{
  static const Schema s{
      "deepspeed.zero_optimization.offload_param",
      {key("device", "one of none, cpu, nvme", "none", "where stage-3 parameter partitions live"),
       key("nvme_path", "string", "\"\"",
           "NVMe mount for the parameters; the path is not resolved: it is taken to be one RAID-0 volume of "
           "every NVMe drive of the node (docs/engine.md \"NVMe\")",
           nullptr, N),
       key("buffer_count", "integer >= 0", "5", "swap buffers (NVMe)"),
       key("buffer_size", "element count", "1e8", "elements per swap buffer (NVMe)"),
       key("max_in_cpu", "element count", "1e9", "parameter elements kept in CPU memory with NVMe offload"),
       key("pin_memory", "bool", "0.19: true; 0.16: false",
           "training: no effect (named in warnings when not the default): stage 3 always pins its CPU parameter "
           "flat buffer and the NVMe swap buffers (docs/deepspeed-schedule.md §6.2, §8); inference: pins the CPU "
           "parameter partitions (docs/inference.md)")}};
  return s;
}

const Schema& zero_optimization_schema()
{
  static const Schema s{
      "deepspeed.zero_optimization",
      {key("stage", "integer 0..3", "0", "ZeRO stage"),
       key("contiguous_gradients", "bool", "true", "copy gradients into a contiguous buffer"),
       key("reduce_scatter", "bool", "true", "reduce gradients by reduce-scatter / bucket all-reduce"),
       key("reduce_bucket_size", "element count or auto", "5e8", "B_r; auto = hidden^2 (HF Trainer)"),
       key("use_multi_rank_bucket_allreduce", "bool", "true",
           "stage 1/2: all-reduce per bucket (docs/deepspeed-schedule.md §3.2)"),
       key("allgather_bucket_size", "element count", "5e8",
           "ignored by DeepSpeed with all_gather_into_tensor (docs/deepspeed-schedule.md §1.4)"),
       key("overlap_comm", "bool", "true for stage 3, else false",
           "overlap reduction with backward (overlap_comm_valid)"),
       key("sub_group_size", "element count", "1e9", "S_g: optimizer step tile"),
       key("stage3_prefetch_bucket_size", "element count or auto", "5e7", "B_p; auto = 0.9 * hidden^2 (HF Trainer)"),
       key("prefetch_bucket_size", "element count", "5e7", "alias of stage3_prefetch_bucket_size"),
       key("stage3_param_persistence_threshold", "element count or auto", "1e5", "auto = 10 * hidden (HF Trainer)"),
       key("param_persistence_threshold", "element count", "1e5", "alias of stage3_param_persistence_threshold"),
       key("stage3_model_persistence_threshold", "element count", "sys.maxsize", "cap on persistent elements"),
       key("model_persistence_threshold", "element count", "sys.maxsize", "alias"),
       key("stage3_max_live_parameters", "element count", "1e9", "resident gathered elements before release"),
       key("max_live_parameters", "element count", "1e9", "alias"),
       key("stage3_max_reuse_distance", "element count", "1e9", "keep a parameter reused within this distance"),
       key("max_reuse_distance", "element count", "1e9", "alias"),
       key("stage3_module_granularity_threshold", "element count", "0", "fetch fine-grained modules as one unit"),
       key("module_granularity_threshold", "element count", "0", "alias"),
       key("stage3_use_all_reduce_for_fetch_params", "bool", "false", "fetch parameters with all-reduce"),
       key("use_all_reduce_for_fetch_params", "bool", "false", "alias"),
       key("stage3_allgather_sequential", "bool", "false", "all-gather parameters one by one (0.19.x)"),
       key("allgather_sequential", "bool", "false", "alias"),
       key("round_robin_gradients", "bool", "false", "stage 1/2 offload gradient copy order"),
       key("offload_optimizer", "mapping", "none", "optimizer offload (ZeRO-Offload, ZeRO-Infinity)",
           &offload_optimizer_schema()),
       key("offload_param", "mapping", "none", "stage-3 parameter offload", &offload_param_schema()),
       key("cpu_offload", "bool", "false",
           "deprecated: true = offload_optimizer {device: cpu} with its default pin_memory; not with "
           "offload_optimizer"),
       key("cpu_offload_param", "bool", "false",
           "deprecated: true = offload_param {device: cpu} with its default pin_memory; not with offload_param"),
       key("cpu_offload_use_pin_memory", "bool", "none",
           "deprecated and ignored by DeepSpeed (DeepSpeedZeroConfig: set_new_param=False, a warning only): the "
           "offloads keep their own pin_memory",
           nullptr, N),
       unmodelled("zero_hpz_partition_size", "integer", "1", "ZeRO++ hierarchical partitioning"),
       unmodelled("zero_quantized_weights", "bool", "false", "ZeRO++ quantized weight all-gather"),
       unmodelled("zero_quantized_nontrainable_weights", "bool", "false", "ZeRO++ quantized frozen weights"),
       unmodelled("zero_quantized_gradients", "bool", "false", "ZeRO++ quantized gradient reduction"),
       unmodelled("zeropp_loco_param", "mapping", "none", "LoCo-ZeRO++"),
       unmodelled("mics_shard_size", "integer", "-1", "MiCS sharding"),
       unmodelled("zenflow", "mapping", "none", "ZenFlow asynchronous CPU updates"),
       ignored("mics_hierarchical_params_gather", "only with MiCS"),
       ignored("allgather_partitions", "read by no code path (docs/deepspeed-schedule.md §11)"),
       ignored("load_from_fp32_weights", "checkpoint loading"),
       ignored("elastic_checkpoint", "checkpoint format"),
       ignored("stage3_gather_16bit_weights_on_model_save", "model saving"),
       ignored("gather_16bit_weights_on_model_save", "model saving"),
       ignored("stage3_gather_fp16_weights_on_model_save", "model saving (deprecated)"),
       ignored("ignore_unused_parameters", "error checking"),
       ignored("legacy_stage1", "removed implementation"),
       ignored("memory_efficient_linear", "autograd function choice"),
       ignored("override_module_apply", "model initialisation"),
       ignored("log_trace_cache_warnings", "logging"),
       ignored("enable_sanity_checks", "debugging"),
       ignored("pipeline_loading_checkpoint", "checkpoint loading"),
       ignored("save_muon_momentum_buffer_in_memory", "Muon optimizer only"),
       ignored("leaf_module", "module hooks configuration"),
       ignored("stage3_partition_stream_chunk_size", "initialisation only")}};
  return s;
}

/// DeepSpeed's `pipeline` block (runtime/config.py get_pipeline_config, read at v0.19.5: defaults stages "auto",
/// partition "best", seed_layers false, activation_checkpoint_interval 0, pipe_partitioned and grad_partitioned true).
/// A stage count above 1 is the pipeline degree (training.pipeline_parallel, which it sets or must equal); partition
/// is the PipelineModule's partition_method unless training.pipeline.partition is given (docs/config.md "Pipeline
/// parallelism").
const Schema& pipeline_schema()
{
  static const Schema s{
      "deepspeed.pipeline",
      {key("stages", "integer >= 1 or auto", "auto",
           "pipeline stages: above 1, the pipeline degree (sets training.pipeline_parallel, or must equal it); 1 or "
           "auto: the training block's"),
       key("partition", "one of parameters, uniform, type:REGEX (or best)", "training.pipeline.partition",
           "the PipelineModule's partition_method when training.pipeline.partition is not given; best (DeepSpeed's "
           "config default, no method of PipelineModule) leaves the training block's"),
       ignored("seed_layers", "per-layer RNG seeds: no effect on time or memory"),
       key("activation_checkpoint_interval", "integer >= 0", "0",
           "overrides the PipelineModule's checkpoint interval (pipe/engine.py); with pipeline stages, a value above "
           "0 is named in warnings unless it is 1 with training.activation_checkpointing full: zerosim checkpoints "
           "as training.activation_checkpointing says (docs/pipeline-parallel.md §7)"),
       unmodelled("pipe_partitioned", "bool", "true",
                  "false sends the activations between stages whole, not split over the tensor-parallel group "
                  "(docs/pipeline-parallel.md §4: modelled split, its default)"),
       unmodelled("grad_partitioned", "bool", "true",
                  "false sends the gradients between stages whole, not split over the tensor-parallel group "
                  "(docs/pipeline-parallel.md §4: modelled split, its default)"),
       ignored("use_reentrant", "the checkpoint function's implementation: no effect on time or memory modelled")}};
  return s;
}

const Schema& aio_schema()
{
  static const Schema s{
      "deepspeed.aio",
      {key("block_size", "integer >= 1", "1048576", "bytes per aio request"),
       key("queue_depth", "integer >= 1", "8", "aio queue depth"),
       key("intra_op_parallelism", "integer >= 1", "1", "aio threads"),
       key("thread_count", "integer >= 1", "1", "docs' name of intra_op_parallelism (docs/deepspeed-schedule.md §13)"),
       key("single_submit", "bool", "false",
           "submit the aio requests one by one instead of in batches (the submission cost "
           "is not modelled)",
           nullptr, N),
       key("overlap_events", "bool", "true",
           "overlap request submission and completion in the aio handle (not modelled)", nullptr, N),
       key("use_gds", "bool", "false",
           "GPUDirect Storage: NVMe to GPU memory without the pinned host buffers (not "
           "modelled: NVMe traffic goes through host memory)",
           nullptr, N)}};
  return s;
}

const Schema& fp16_schema()
{
  static const Schema s{
      "deepspeed.fp16",
      {key("enabled", "bool or auto", "false", "fp16 mixed precision; must agree with training.precision"),
       unmodelled("auto_cast", "bool", "false", "cast inputs to fp16"),
       unmodelled("fp16_master_weights_and_grads", "bool", "false", "fp16 master weights"),
       ignored("loss_scale", "numerics only"), ignored("initial_scale_power", "numerics only"),
       ignored("loss_scale_window", "numerics only"), ignored("hysteresis", "numerics only"),
       ignored("consecutive_hysteresis", "numerics only"), ignored("min_loss_scale", "numerics only"),
       ignored("fused_mode", "legacy")}};
  return s;
}

const Schema& bf16_schema()
{
  static const Schema s{
      "deepspeed.bf16",
      {key("enabled", "bool or auto", "false", "bf16 mixed precision; must agree with training.precision"),
       unmodelled("bf16_master_weights_and_grads", "bool", "false", "bf16 master weights"),
       unmodelled("bf16_optimizer_states", "bool", "false", "bf16 optimizer states"),
       ignored("immediate_grad_update", "numerics only"), ignored("check_grad_overflow", "numerics only")}};
  return s;
}

const Schema& data_types_schema()
{
  static const Schema s{"deepspeed.data_types",
                        {key("grad_accum_dtype", DTYPE, "the model dtype (0.19, docs/deepspeed-schedule.md §1.3)",
                             "gradient accumulation dtype")}};
  return s;
}

const Schema& activation_checkpointing_schema()
{
  static const Schema s{
      "deepspeed.activation_checkpointing",
      {key("partition_activations", "bool", "false",
           "no effect with training.tensor_parallel 1: each checkpoint's partition is the whole tensor, a GPU "
           "clone; with cpu_checkpointing it selects DeepSpeed's blocking copies (modelled, docs/offload.md); the "
           "split over a tensor-parallel group is not modelled (warned, docs/tensor-parallel.md)",
           nullptr, N),
       key("cpu_checkpointing", "bool", "false",
           "checkpointed block inputs to host memory, copied back before the recompute (docs/offload.md)"),
       key("contiguous_memory_optimization", "bool", "false",
           "number_checkpoints contiguous checkpoint buffers allocated at the first block; needs "
           "partition_activations"),
       key("number_checkpoints", "integer >= 1", "none", "slots of the contiguous buffers (>= the blocks)"),
       key("synchronize_checkpoint_boundary", "bool", "false",
           "a device synchronize at the start and end of each checkpointed block's forward and backward"),
       key("profile", "bool", "false",
           "times each checkpointed forward and backward; reading the CUDA-event timer makes the host wait for it")}};
  return s;
}

} // namespace

const Schema& deepspeed_schema()
{
  static const Schema s{
      "deepspeed",
      {key("train_batch_size", "integer >= 1 or auto", "micro_batch x grad_accum x GPUs", "must agree with training"),
       key("train_micro_batch_size_per_gpu", "integer >= 1 or auto", "training.micro_batch", "must agree"),
       key("gradient_accumulation_steps", "integer >= 1 or auto", "training.grad_accum", "must agree"),
       key("zero_optimization", "mapping", "stage 0", "ZeRO (runtime/zero/config.py)", &zero_optimization_schema()),
       key("aio", "mapping", "defaults", "async I/O for NVMe offload (swap_tensor/constants.py)", &aio_schema()),
       key("fp16", "mapping", "disabled", "fp16 mixed precision", &fp16_schema()),
       key("bf16", "mapping", "disabled", "bf16 mixed precision", &bf16_schema()),
       key("bfloat16", "mapping", "disabled", "old name of bf16", &bf16_schema()),
       key("communication_data_type", DTYPE, "the model dtype (docs/deepspeed-schedule.md §1.3)",
           "dtype of gradient reduction"),
       key("data_types", "mapping", "defaults", "gradient accumulation dtype", &data_types_schema()),
       key("gradient_clipping", "number >= 0 or auto", "0.19: 1.0; 0.16: 0.0",
           "global-norm clipping (docs/deepspeed-schedule.md §14); auto = 1.0"),
       key("prescale_gradients", "bool", "false", "scale gradients before reduction"),
       key("gradient_predivide_factor", "number > 0", "1.0", "divide before reduction"),
       key("activation_checkpointing", "mapping", "defaults", "DeepSpeed's checkpointing options",
           &activation_checkpointing_schema()),
       unmodelled("sparse_attention", "mapping", "none", "sparse attention kernels"),
       key("pipeline", "mapping", "none",
           "DeepSpeed's pipeline engine: stages above 1 is the pipeline degree (docs/config.md \"Pipeline "
           "parallelism\")",
           &pipeline_schema()),
       unmodelled("compression_training", "mapping", "none", "compression (quantisation, pruning) during training"),
       unmodelled("data_efficiency", "mapping", "disabled", "data sampling and routing"),
       unmodelled("curriculum_learning", "mapping", "disabled", "curriculum learning (sequence length schedule)"),
       unmodelled("sequence_parallel_size", "integer", "1", "sequence parallelism (Ulysses)"),
       unmodelled("hybrid_engine", "mapping", "disabled", "RLHF hybrid engine"),
       unmodelled("amp", "mapping", "disabled", "Apex AMP"),
       unmodelled("torch_autocast", "mapping", "disabled", "torch.autocast inside DeepSpeed"),
       unmodelled("progressive_layer_drop", "mapping", "disabled", "progressive layer drop"),
       unmodelled("eigenvalue", "mapping", "disabled", "eigenvalue computation"),
       unmodelled("sparse_gradients", "bool", "false", "CSR sparse gradients"),
       unmodelled("weight_quantization", "mapping", "none", "weight quantisation"),
       unmodelled("quantize_training", "mapping", "none", "MoQ quantisation"),
       unmodelled("tensor_parallel", "mapping", "none", "AutoTP tensor parallelism"),
       unmodelled("compile", "mapping", "disabled", "torch.compile / DeepCompile"),
       unmodelled("graph_harvesting", "bool", "false", "CUDA graph capture"),
       ignored("optimizer", "learning rate and betas do not change time or memory; the optimizer kind is "
                            "training.optimizer"),
       ignored("scheduler", "learning-rate schedule"),
       ignored("steps_per_print", "logging"),
       ignored("wall_clock_breakdown", "logging"),
       ignored("memory_breakdown", "logging"),
       ignored("dump_state", "logging"),
       ignored("tensorboard", "monitoring"),
       ignored("wandb", "monitoring"),
       ignored("csv_monitor", "monitoring"),
       ignored("comet", "monitoring"),
       ignored("flops_profiler", "profiling"),
       ignored("comms_logger", "logging"),
       ignored("timers", "logging"),
       ignored("checkpoint", "checkpointing"),
       ignored("nebula", "checkpointing"),
       ignored("datastates_ckpt", "checkpointing"),
       ignored("autotuning", "autotuner settings"),
       ignored("elasticity", "elastic training (batch keys must still agree)"),
       ignored("zero_allow_untested_optimizer", "optimizer check"),
       ignored("zero_force_ds_cpu_optimizer", "optimizer check"),
       ignored("dataloader_drop_last", "data loading"),
       ignored("vocabulary_size", "warning only"),
       ignored("disable_allgather", "unused"),
       ignored("seq_parallel_comm_data_type", "only with sequence parallelism"),
       ignored("use_data_before_expert_parallelism", "only with MoE"),
       ignored("gradient_accumulation_dtype", "old name, unused")}};
  return s;
}

const Schema& fsdp_schema()
{
  static const Schema mp{"fsdp.mixed_precision",
                         {key("param_dtype", DTYPE, "the training precision's compute dtype", "unsharded params"),
                          key("reduce_dtype", DTYPE, "param_dtype", "gradient reduction dtype"),
                          key("buffer_dtype", DTYPE, "param_dtype", "buffers (no effect on time or memory here)")}};
  static const Schema s{
      "fsdp",
      {key("sharding_strategy", "one of FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, NO_SHARD", "FULL_SHARD",
           "PyTorch ShardingStrategy"),
       key("mixed_precision", "mapping", "none", "MixedPrecision(param_dtype, reduce_dtype)", &mp),
       key("backward_prefetch", "one of BACKWARD_PRE, BACKWARD_POST, NONE", "BACKWARD_PRE", "PyTorch default"),
       key("forward_prefetch", "bool", "false", "PyTorch default"),
       key("limit_all_gathers", "bool", "true", "rate limiter (PyTorch default since 2.0)"),
       key("reshard_after_forward", "bool", "follows sharding_strategy", "FSDP2 fully_shard option"),
       key("cpu_offload", "bool", "false", "CPUOffload(offload_params)"),
       key("wrap", "one of block, model", "block", "one unit per transformer block, or the whole model")}};
  return s;
}

const Schema& ddp_schema()
{
  static const Schema s{
      "ddp",
      {key("bucket_cap_mb", "number > 0", "25", "gradient bucket cap in MiB (PyTorch's bucket_cap_mb)"),
       key("first_bucket_cap_mb", "number > 0", "1 if bucket_cap_mb is not given, else bucket_cap_mb",
           "cap of the first bucket reduced, in MiB (dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB)"),
       key("gradient_as_bucket_view", "bool", "false", "param.grad are views into the all-reduce buckets"),
       key("no_sync", "bool", "false",
           "gradient accumulation under model.no_sync(): one all-reduce per step instead of per micro-step"),
       key("find_unused_parameters", "bool", "false",
           "no bucket rebuild, an all-reduce of the used-parameter map per backward (docs/ddp.md)"),
       key("static_graph", "bool", "false",
           "static graph: the steady state is the default one; its first iteration is not modelled", nullptr, N),
       key("broadcast_buffers", "bool", "true", "broadcast module buffers at forward (no buffers in the workload)")}};
  return s;
}

const Schema& scenario_schema()
{
  static const Schema network{
      "cluster.network",
      {key("nic_bandwidth", "bandwidth", "the node's nics.bandwidth", "per NIC, per direction"),
       key("nics_per_node", "integer >= 1", "the node's nics.count", "NICs used per node"),
       // NCCL src/graph/tuning.cc hwLat[NCCL_HW_NET], Tree/LL: 5.0 us; also the example of docs/scenario-format.md.
       key("latency", "time", "5 us",
           "one-way NIC-to-NIC; NCCL's network base latency (tuning.cc hwLat[NET], Tree LL)"),
       key("oversubscription", "number >= 1", "1", "fabric oversubscription; 1 = non-blocking fat tree"),
       not_yet("topology", "one of single_switch, fat_tree, rail_optimized", "single_switch",
               "a multi-tier fabric (fat_tree, rail_optimized)"),
       not_yet("tiers", "list of {radix, oversubscription}", "none", "a multi-tier fabric (tiers)")}};
  static const Schema cluster{
      "cluster",
      {key("node", "name, path or mapping", "required", "the server (a name under topologies/)", &node_schema()),
       key("nodes", "integer >= 1", "1", "servers"),
       key("gpus_per_node", "integer >= 1", "the node's gpus", "use the first GPUs of each node"),
       key("network", "mapping", "from the node", "fabric between nodes", &network),
       key("overrides", "mapping of dotted node keys", "none", "node-file keys to change, e.g. gpu.memory: 40 GiB",
           &node_schema())}};
  static const Schema pipeline{
      "training.pipeline",
      {key("schedule", "one of auto, gpipe, 1f1b, interleaved_1f1b, zero_bubble", "auto",
           "each stage's order of forwards and backwards; auto: the framework's own (DeepSpeed: 1f1b, its "
           "TrainSchedule); interleaved_1f1b and zero_bubble are refused with DeepSpeed "
           "(docs/pipeline-parallel.md §3)"),
       key("virtual_stages", "integer >= 1", "1",
           "model chunks per rank (interleaved schedules); above 1 is refused with DeepSpeed"),
       key("layers", "list of pipeline_parallel integers >= 1 summing to model.layers", "the partition's split",
           "transformer blocks per stage, first stage first: an explicit split instead of partition"),
       key("partition", "one of parameters, uniform, type:REGEX", "type:transformer",
           "zerosim's extension: DeepSpeed's PipelineModule partition_method (Megatron-DeepSpeed's "
           "--pp-partition-method; REGEX matched case-insensitively against layer class names; "
           "docs/pipeline-parallel.md §2)")}};
  static const Schema training{
      "training",
      {key("seq_len", "integer >= 1", "required", "tokens per sample"),
       key("micro_batch", "integer >= 1", "1 (or the DeepSpeed block's)", "samples per GPU per micro-step"),
       key("grad_accum", "integer >= 1", "1 (or the DeepSpeed block's)", "micro-steps per step; or global_batch"),
       key("global_batch", "integer >= 1", "micro_batch x grad_accum x GPUs", "samples per step; or grad_accum"),
       key("precision", "one of bf16, fp16, amp_bf16, amp_fp16, fp32", "bf16", "see docs/scenario-format.md"),
       key("activation_checkpointing", "one of none, full, selective, per_op", "none",
           "recomputation: full (every block), selective (Megatron's attention core), per_op (torchtitan's policy)"),
       key("flash_attention", "bool", "true",
           "shorthand for software.attention when that is absent: true = flash2, false = eager"),
       key("optimizer", "one of adamw, adam, sgd", "adamw", "optimizer kind"),
       key("optimizer_impl", "one of auto, single_tensor, foreach, fused", "auto",
           "torch.optim's implementation on CUDA (ddp:, fsdp:): auto = torch's default for software.torch (foreach "
           "from 2.0, single_tensor before); fused = AdamW/Adam(fused=True), torch 2.0+; docs/ddp.md"),
       key("mode", "one of train, inference", "train", "inference: forward only"),
       key("total_tokens", "number > 0", "none", "tokens to train (reports time to train)"),
       key("tensor_parallel", "integer >= 1 dividing gpus_per_node, heads, kv_heads, ffn_hidden", "1",
           "Megatron tensor parallelism degree (deepspeed only); data parallelism = GPUs / it"),
       not_yet("sequence_parallel", "bool", "false", "Megatron sequence parallelism"),
       key("pipeline_parallel", "integer >= 1 dividing GPUs / tensor_parallel, at most model.layers", "1",
           "pipeline stages p, DeepSpeed's PipelineEngine (deepspeed only); data parallelism = GPUs / (t x p); "
           "docs/config.md \"Pipeline parallelism\""),
       key("pipeline", "mapping", "none", "only with pipeline_parallel above 1: the stages' schedule and split",
           &pipeline)}};
  static const Schema inference{"inference",
                                {key("batch", "integer >= 1", "1", "sequences per GPU"),
                                 key("prompt_tokens", "integer >= 1", "required", "prompt length"),
                                 key("generate_tokens", "integer >= 0", "0", "tokens generated")}};
  static const Schema measured{
      "measured",
      {key("step_time", "time", "none", "measured step time"),
       key("tflops_per_gpu", "number > 0", "none", "measured TFLOPs per GPU"),
       key("tflops_definition", "one of model, hardware", "required with tflops_per_gpu", "which definition"),
       key("peak_memory", "bytes", "none", "measured peak GPU memory"),
       key("source", "string", "\"\"", "where the figures come from")}};
  static const Schema software{
      "software",
      {key("attention", "one of " + spec::attention_kernel_names(", "), "flash2 (or training.flash_attention's)",
           "the attention kernel that ran"),
       key("compile", "bool", "false", "torch.compile (or equivalent fused kernels) on"),
       key("model_code", "one of " + spec::model_code_names(", "), "auto",
           "the model code that ran, which fixes its element-wise kernels (auto: megatron under DeepSpeed, hf under "
           "DDP and FSDP)"),
       key("torch", "major.minor string", "\"2.6\"", "the torch generation; its nearest earlier data applies")}};
  static const Schema s{
      "scenario",
      {key("name", "string", "the file name", "the scenario's name"),
       key("model", "name, path or mapping", "required", "the model (a name under models/)", &model_schema()),
       key("cluster", "mapping", "required", "the machines", &cluster),
       key("training", "mapping", "required", "batch, precision, checkpointing", &training),
       key("inference", "mapping", "none", "only with training.mode: inference", &inference),
       key("price_per_gpu_hour", "number >= 0", "none", "in the user's currency: cost per step and to train"),
       key("deepspeed_version", "one of \"0.14\" ... \"0.19\" (a minor version)", "\"0.19\"",
           "whose keys and defaults apply: 0.19 modelled as 0.19, 0.14-0.18 as 0.16 (docs/config.md)"),
       key("deepspeed", "mapping or path to ds_config.json", "all DeepSpeed defaults when no framework is given",
           "DeepSpeed's own keys", &deepspeed_schema()),
       key("fsdp", "mapping", "none", "PyTorch FSDP instead of DeepSpeed", &fsdp_schema()),
       key("ddp", "mapping", "none", "PyTorch DDP instead of DeepSpeed", &ddp_schema()),
       not_yet("megatron", "mapping", "none", "Megatron-LM as the framework (megatron:)"),
       key("software", "mapping", "today's stack (meta.software.stated: false)", "the stack that ran", &software),
       key("calibration", "path or none", "the node file's, else the shipped calibration/default.yaml",
           "the calibration profile (docs/calibration.md); --calibration wins; none: the priors alone"),
       key("sweep", "mapping of dotted key -> list", "none",
           "values to sweep (zerosim sweep; each a value or a range A..B, A..B:+S, A..B:xF: docs/sweep.md)", nullptr, M,
           true),
       key("measured", "mapping", "none", "what a real run gave (never used in prediction)", &measured)}};
  return s;
}

namespace {

/// Every dotted path below `schema` (prefix `at`) whose last key is `key`, in table order; the node's keys once (under
/// cluster.node, not again under cluster.overrides).
void places_of(const Schema& schema, const std::string& at, const std::string& key, std::vector<std::string>& out)
{
  for (const KeyDoc& k : schema.keys) {
    const std::string here = at.empty() ? k.key : at + "." + k.key;
    if (k.key == key)
      out.push_back(here);
    if (k.child != nullptr && here != "cluster.overrides")
      places_of(*k.child, here, key, out);
  }
}

/// Whether `target` is the scenario's schema or one below it (not a calibration profile's, a kernel table's, ...).
bool below(const Schema& schema, const Schema* target)
{
  if (&schema == target)
    return true;
  for (const KeyDoc& k : schema.keys)
    if (k.child != nullptr && k.child != &schema && below(*k.child, target))
      return true;
  return false;
}

} // namespace

std::string elsewhere_hint(const Schema* schema, const std::string& path, const std::string& key)
{
  if (schema != nullptr && !below(scenario_schema(), schema))
    return ""; // another kind of file: the scenario's places would mislead
  // Misplacements under another name, as users write them (issue 29): the ZeRO stage is DeepSpeed's, the GPU the
  // node file's.
  if (key == "zero_stage" || (key == "stage" && path != "deepspeed.zero_optimization"))
    return "; the ZeRO stage belongs at deepspeed.zero_optimization.stage";
  if (key == "gpu" && path == "cluster")
    return "; the GPU is the node file's (cluster.node: a name under topologies/, its gpu.model), or change it with "
           "cluster.overrides (gpu.memory: 40 GiB, ...)";
  std::vector<std::string> places;
  places_of(scenario_schema(), "", key, places);
  const std::string here = path.empty() ? key : path + "." + key;
  places.erase(std::remove(places.begin(), places.end(), here), places.end());
  if (places.empty() || places.size() > 3)
    return "";
  std::string out = "; '" + key + "' belongs at " + places.front();
  for (std::size_t i = 1; i < places.size(); ++i)
    out += (i + 1 == places.size() ? " or " : ", ") + places[i];
  return out;
}

} // namespace zerosim::config
