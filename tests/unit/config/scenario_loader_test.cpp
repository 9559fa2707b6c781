// Scenario files: references, defaults, the DeepSpeed block with "auto", --set, warnings, resolved_yaml round
// trip, describe (docs/config.md; DeepSpeed's defaults from docs/deepspeed-schedule.md, cited as §n).
#include "config_test_util.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

using namespace zerosim;
using namespace zerosim::config;
using namespace zerosim::config::test;

namespace {

/// Every field of the spec that the loader fills, compared one by one (the structs have no operator==).
void check_same(const spec::Scenario& a, const spec::Scenario& b)
{
  CHECK(a.name == b.name);
  CHECK(a.model.name == b.model.name);
  CHECK(a.model.layers == b.model.layers);
  CHECK(a.model.hidden == b.model.hidden);
  CHECK(a.model.heads == b.model.heads);
  CHECK(a.model.kv_heads == b.model.kv_heads);
  CHECK(a.model.ffn_hidden == b.model.ffn_hidden);
  CHECK(a.model.ffn == b.model.ffn);
  CHECK(a.model.vocab == b.model.vocab);
  CHECK(a.model.tied_embeddings == b.model.tied_embeddings);
  CHECK(a.model.norm == b.model.norm);
  CHECK(a.model.position == b.model.position);
  CHECK(a.model.bias == b.model.bias);
  CHECK(a.model.max_position == b.model.max_position);
  CHECK(a.model.source == b.model.source);
  const spec::NodeSpec& n = a.cluster.node;
  const spec::NodeSpec& m = b.cluster.node;
  CHECK(n.name == m.name);
  CHECK(n.gpu.model == m.gpu.model);
  CHECK(n.gpu.memory_bytes == m.gpu.memory_bytes);
  CHECK(n.gpu.memory_bandwidth_Bps == m.gpu.memory_bandwidth_Bps);
  CHECK(n.gpu.peak_bf16_flops == m.gpu.peak_bf16_flops);
  CHECK(n.gpu.peak_fp16_flops == m.gpu.peak_fp16_flops);
  CHECK(n.gpu.peak_tf32_flops == m.gpu.peak_tf32_flops);
  CHECK(n.gpu.peak_fp32_flops == m.gpu.peak_fp32_flops);
  CHECK(n.gpu.power_limit_W == m.gpu.power_limit_W);
  CHECK(n.gpu.tdp_W == m.gpu.tdp_W);
  CHECK(n.gpus == m.gpus);
  CHECK(n.nvlink.present == m.nvlink.present);
  CHECK(n.nvlink.bandwidth_Bps == m.nvlink.bandwidth_Bps);
  CHECK(n.nvlink.latency_s == m.nvlink.latency_s);
  CHECK(n.pcie.bandwidth_Bps == m.pcie.bandwidth_Bps);
  CHECK(n.pcie.gpus_per_switch == m.pcie.gpus_per_switch);
  CHECK(n.pcie.switch_uplink_Bps == m.pcie.switch_uplink_Bps);
  CHECK(n.pcie.latency_s == m.pcie.latency_s);
  CHECK(n.cpu.sockets == m.cpu.sockets);
  CHECK(n.cpu.cores == m.cpu.cores);
  CHECK(n.cpu.memory_bytes == m.cpu.memory_bytes);
  CHECK(n.cpu.memory_bandwidth_Bps == m.cpu.memory_bandwidth_Bps);
  CHECK(n.cpu.reserved_bytes == m.cpu.reserved_bytes);
  CHECK(n.cpu.adam_bytes_per_param == m.cpu.adam_bytes_per_param);
  CHECK(n.nvme.devices == m.nvme.devices);
  CHECK(n.nvme.read_Bps == m.nvme.read_Bps);
  CHECK(n.nvme.write_Bps == m.nvme.write_Bps);
  CHECK(n.nvme.capacity_bytes == m.nvme.capacity_bytes);
  CHECK(n.nics.count == m.nics.count);
  CHECK(n.nics.bandwidth_Bps == m.nics.bandwidth_Bps);
  CHECK(n.source == m.source);
  CHECK(a.cluster.nodes == b.cluster.nodes);
  CHECK(a.cluster.gpus_per_node == b.cluster.gpus_per_node);
  CHECK(a.cluster.network.nic_bandwidth_Bps == b.cluster.network.nic_bandwidth_Bps);
  CHECK(a.cluster.network.nics_per_node == b.cluster.network.nics_per_node);
  CHECK(a.cluster.network.latency_s == b.cluster.network.latency_s);
  CHECK(a.cluster.network.oversubscription == b.cluster.network.oversubscription);
  const spec::TrainingSpec& t = a.training;
  const spec::TrainingSpec& u = b.training;
  CHECK(t.seq_len == u.seq_len);
  CHECK(t.micro_batch == u.micro_batch);
  CHECK(t.grad_accum == u.grad_accum);
  CHECK(t.global_batch == u.global_batch);
  CHECK(t.global_batch_given == u.global_batch_given);
  CHECK(t.precision == u.precision);
  CHECK(t.activation_checkpointing == u.activation_checkpointing);
  CHECK(t.flash_attention == u.flash_attention);
  CHECK(t.optimizer == u.optimizer);
  CHECK(t.mode == u.mode);
  CHECK(t.total_tokens == u.total_tokens);
  CHECK(t.tensor_parallel == u.tensor_parallel);
  CHECK(t.pipeline_parallel == u.pipeline_parallel);
  CHECK(t.pipeline.schedule == u.pipeline.schedule);
  CHECK(t.pipeline.virtual_stages == u.pipeline.virtual_stages);
  CHECK(t.pipeline.layers == u.pipeline.layers);
  CHECK(t.pipeline.partition == u.pipeline.partition);
  CHECK(a.software.attention == b.software.attention);
  CHECK(a.software.compile == b.software.compile);
  CHECK(a.software.torch == b.software.torch);
  CHECK(a.software.stated == b.software.stated);
  CHECK(a.price_per_gpu_hour == b.price_per_gpu_hour);
  CHECK(a.deepspeed_version == b.deepspeed_version);
  CHECK(a.framework == b.framework);
  const spec::ZeroSpec& z = a.deepspeed.zero;
  const spec::ZeroSpec& y = b.deepspeed.zero;
  CHECK(z.stage == y.stage);
  CHECK(z.contiguous_gradients == y.contiguous_gradients);
  CHECK(z.reduce_scatter == y.reduce_scatter);
  CHECK(z.reduce_bucket_size == y.reduce_bucket_size);
  CHECK(z.use_multi_rank_bucket_allreduce == y.use_multi_rank_bucket_allreduce);
  CHECK(z.allgather_bucket_size == y.allgather_bucket_size);
  CHECK(z.overlap_comm == y.overlap_comm);
  CHECK(z.overlap_comm_given == y.overlap_comm_given);
  CHECK(z.sub_group_size == y.sub_group_size);
  CHECK(z.stage3_prefetch_bucket_size == y.stage3_prefetch_bucket_size);
  CHECK(z.stage3_param_persistence_threshold == y.stage3_param_persistence_threshold);
  CHECK(z.stage3_model_persistence_threshold == y.stage3_model_persistence_threshold);
  CHECK(z.stage3_max_live_parameters == y.stage3_max_live_parameters);
  CHECK(z.stage3_max_reuse_distance == y.stage3_max_reuse_distance);
  CHECK(z.stage3_module_granularity_threshold == y.stage3_module_granularity_threshold);
  CHECK(z.stage3_use_all_reduce_for_fetch_params == y.stage3_use_all_reduce_for_fetch_params);
  CHECK(z.stage3_allgather_sequential == y.stage3_allgather_sequential);
  CHECK(z.round_robin_gradients == y.round_robin_gradients);
  CHECK(z.offload_optimizer.device == y.offload_optimizer.device);
  CHECK(z.offload_optimizer.pin_memory == y.offload_optimizer.pin_memory);
  CHECK(z.offload_optimizer.ratio == y.offload_optimizer.ratio);
  CHECK(z.offload_optimizer.super_offload == y.offload_optimizer.super_offload);
  CHECK(z.offload_optimizer.cpuadam_cores_perc == y.offload_optimizer.cpuadam_cores_perc);
  CHECK(z.offload_optimizer.buffer_count == y.offload_optimizer.buffer_count);
  CHECK(z.offload_param.device == y.offload_param.device);
  CHECK(z.offload_param.pin_memory == y.offload_param.pin_memory);
  CHECK(z.offload_param.buffer_size == y.offload_param.buffer_size);
  CHECK(z.offload_param.max_in_cpu == y.offload_param.max_in_cpu);
  CHECK(a.deepspeed.aio.block_size == b.deepspeed.aio.block_size);
  CHECK(a.deepspeed.aio.queue_depth == b.deepspeed.aio.queue_depth);
  CHECK(a.deepspeed.communication_data_type == b.deepspeed.communication_data_type);
  CHECK(a.deepspeed.grad_accum_dtype == b.deepspeed.grad_accum_dtype);
  CHECK(a.deepspeed.gradient_clipping == b.deepspeed.gradient_clipping);
  CHECK(a.deepspeed.activation_checkpointing.partition_activations ==
        b.deepspeed.activation_checkpointing.partition_activations);
  CHECK(a.framework == b.framework);
  CHECK(a.ddp.bucket_cap_mb == b.ddp.bucket_cap_mb);
  CHECK(a.ddp.first_bucket_cap_mb == b.ddp.first_bucket_cap_mb);
  CHECK(a.ddp.gradient_as_bucket_view == b.ddp.gradient_as_bucket_view);
  CHECK(a.ddp.no_sync == b.ddp.no_sync);
  CHECK(a.ddp.find_unused_parameters == b.ddp.find_unused_parameters);
  CHECK(a.ddp.static_graph == b.ddp.static_graph);
  CHECK(a.ddp.broadcast_buffers == b.ddp.broadcast_buffers);
  CHECK(a.sweep == b.sweep);
  CHECK(a.measured.step_time_s == b.measured.step_time_s);
  CHECK(a.measured.tflops_per_gpu == b.measured.tflops_per_gpu);
  CHECK(a.measured.tflops_definition == b.measured.tflops_definition);
  CHECK(a.measured.peak_memory_bytes == b.measured.peak_memory_bytes);
  // The resolved file leaves out the keys that change nothing (the optimizer's learning rate, logging), so the one
  // warning naming them may be the original's alone.
  const auto named = [](std::vector<std::string> w) {
    std::erase_if(w,
                  [](const std::string& text) { return text.rfind("accepted, no effect on time or memory", 0) == 0; });
    return w;
  };
  CHECK(named(a.warnings) == named(b.warnings));
}

} // namespace

TEST_SUITE("config")
{

  TEST_CASE("scenario_loader: names resolve under models/ and topologies/, ds_config.json with auto")
  {
    spec::Scenario s = load_scenario(DATA + "/scenarios/by-name.yaml");
    CHECK(s.name == "by name");
    CHECK(s.file == DATA + "/scenarios/by-name.yaml");
    CHECK(s.model.name == "test-gpt");
    CHECK(s.cluster.node.name == "test node");
    CHECK(s.cluster.nodes == 2);
    CHECK(s.cluster.gpus_per_node == 8); // default: the node's gpus
    CHECK(s.dp() == 16);
    CHECK(s.training.global_batch == 2 * 4 * 16); // micro_batch x grad_accum x GPUs
    CHECK(s.cluster.network.nics_per_node == 8);  // default: the node's nics
    CHECK(s.cluster.network.nic_bandwidth_Bps == 25e9);
    CHECK(s.cluster.network.latency_s == doctest::Approx(5e-6)); // default (NCCL hwLat NET Tree LL)
    CHECK(s.framework == spec::Framework::DEEPSPEED);
    const spec::ZeroSpec& z = s.deepspeed.zero;
    CHECK(z.stage == 3);
    CHECK(z.offload_optimizer.device == spec::OffloadDevice::CPU);
    CHECK(z.offload_param.device == spec::OffloadDevice::NONE);
    CHECK(z.sub_group_size == 1'000'000'000);                        // 1e9 as written
    CHECK(z.reduce_bucket_size == 1024 * 1024);                      // auto = h^2, h = 1024
    CHECK(z.stage3_prefetch_bucket_size == 943718);                  // auto = int(0.9 h^2) = int(943718.4)
    CHECK(z.stage3_param_persistence_threshold == 10 * 1024);        // auto = 10 h
    CHECK(s.deepspeed.gradient_clipping == 1.0);                     // auto = HF max_grad_norm default
    CHECK(s.deepspeed.communication_data_type == spec::Dtype::BF16); // model dtype (§1.3)
    // optimizer, scheduler, steps_per_print, ... are accepted and named once, as changing nothing.
    REQUIRE(s.warnings.size() == 1);
    CHECK(s.warnings[0].rfind("accepted, no effect on time or memory (learning rate, logging, checkpoint format, ...): "
                              "deepspeed.optimizer, deepspeed.scheduler, ",
                              0) == 0);
  }

  TEST_CASE("scenario_loader: no framework block = DeepSpeed with 0.19 code defaults")
  {
    spec::Scenario s = load_scenario_text(BASE, SCEN);
    CHECK(s.framework == spec::Framework::DEEPSPEED);
    CHECK(s.deepspeed_version == "0.19");
    CHECK(s.deepspeed.zero.stage == 0);
    CHECK_FALSE(s.deepspeed.zero.overlap_comm); // None -> False below stage 3
    CHECK_FALSE(s.deepspeed.zero.overlap_comm_given);
    CHECK(s.deepspeed.zero.reduce_bucket_size == 500'000'000);         // 5e8 (§11)
    CHECK(s.deepspeed.zero.stage3_prefetch_bucket_size == 50'000'000); // 5e7 (§11, code not docs)
    CHECK(s.deepspeed.zero.offload_optimizer.pin_memory);              // 0.19: True (§14)
    CHECK(s.deepspeed.gradient_clipping == 1.0);                       // 0.19: 1.0 (§14)
    CHECK(s.training.precision == spec::Precision::BF16);
    CHECK(s.training.grad_accum == 16);
    CHECK(s.training.global_batch == 128); // 1 x 16 x 8
    CHECK_FALSE(s.training.global_batch_given);
  }

  TEST_CASE("scenario_loader: deepspeed_version 0.16 changes pin_memory and gradient_clipping defaults")
  {
    spec::Scenario s = load_scenario_text(BASE + "deepspeed_version: \"0.16\"\ndeepspeed:\n  zero_optimization:\n"
                                                 "    stage: 3\n    offload_optimizer: {device: cpu}\n",
                                          SCEN);
    CHECK_FALSE(s.deepspeed.zero.offload_optimizer.pin_memory); // 0.16.5: False (§14)
    CHECK_FALSE(s.deepspeed.zero.offload_param.pin_memory);
    CHECK(s.deepspeed.gradient_clipping == 0.0); // 0.16.5: 0.0 (§14)
    CHECK(s.deepspeed.zero.overlap_comm);        // None -> True for stage 3
  }

  TEST_CASE("scenario_loader: global_batch, overrides, network, inference, fsdp, ddp, measured, price")
  {
    spec::Scenario s = load_scenario_text(R"(model: test-gpt
cluster:
  node: test-node
  nodes: 4
  gpus_per_node: 4
  network: {nic_bandwidth: 100 Gbps, nics_per_node: 1, latency: 3 us, oversubscription: 2}
  overrides:
    gpu.memory: 40 GiB
    cpu: {memory: 1 TiB}
training:
  seq_len: 2048
  micro_batch: 2
  global_batch: 256
  precision: fp16
  activation_checkpointing: selective
  flash_attention: false
  optimizer: sgd
  total_tokens: 300e9
price_per_gpu_hour: 2.5
fsdp:
  sharding_strategy: HYBRID_SHARD
  mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}
  backward_prefetch: BACKWARD_POST
  reshard_after_forward: false
measured: {step_time: 12.3 s, tflops_per_gpu: 145, tflops_definition: hardware, peak_memory: 61 GiB, source: paper}
)",
                                          SCEN);
    CHECK(s.name == "inline"); // the file's stem
    CHECK(s.cluster.node.gpu.memory_bytes == 40LL << 30);
    CHECK(s.cluster.node.cpu.memory_bytes == 1LL << 40); // merged into cpu:, other cpu keys kept
    CHECK(s.cluster.node.cpu.cores == 128);
    CHECK(s.dp() == 16);
    CHECK(s.training.grad_accum == 8); // 256 / (2 x 16)
    CHECK(s.training.global_batch_given);
    CHECK(s.cluster.network.nic_bandwidth_Bps == 12.5e9); // 100 Gbps / 8
    CHECK(s.cluster.network.nics_per_node == 1);
    CHECK(s.cluster.network.latency_s == doctest::Approx(3e-6));
    CHECK(s.cluster.network.oversubscription == 2);
    CHECK(s.training.precision == spec::Precision::FP16);
    CHECK(s.training.activation_checkpointing == spec::Checkpointing::SELECTIVE);
    CHECK_FALSE(s.training.flash_attention);
    CHECK(s.training.optimizer == spec::Optimizer::SGD);
    CHECK(*s.training.total_tokens == 300e9);
    CHECK(*s.price_per_gpu_hour == 2.5);
    CHECK(s.framework == spec::Framework::FSDP);
    CHECK(s.fsdp.sharding_strategy == spec::FsdpSharding::HYBRID_SHARD);
    CHECK(*s.fsdp.param_dtype == spec::Dtype::BF16);
    CHECK(*s.fsdp.reduce_dtype == spec::Dtype::FP32);
    CHECK(s.fsdp.backward_prefetch == spec::BackwardPrefetch::BACKWARD_POST);
    CHECK(*s.fsdp.reshard_after_forward == false);
    CHECK(s.fsdp.limit_all_gathers); // PyTorch default
    CHECK(s.fsdp.wrap == "block");
    CHECK(*s.measured.step_time_s == doctest::Approx(12.3));
    CHECK(*s.measured.tflops_per_gpu == 145);
    CHECK(s.measured.tflops_definition == "hardware");
    CHECK(*s.measured.peak_memory_bytes == 61LL << 30);

    spec::Scenario d = load_scenario_text(BASE + "ddp: {}\n", SCEN);
    CHECK(d.framework == spec::Framework::DDP);
    CHECK(d.ddp.bucket_cap_mb == 25);      // PyTorch: bucket_cap_mb=None -> 25 MiB
    CHECK(d.ddp.first_bucket_cap_mb == 1); // and then dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB
    CHECK_FALSE(d.ddp.gradient_as_bucket_view);
    CHECK_FALSE(d.ddp.no_sync);
    CHECK_FALSE(d.ddp.find_unused_parameters);
    CHECK_FALSE(d.ddp.static_graph);
    CHECK(d.ddp.broadcast_buffers);
    CHECK(d.warnings.empty());

    spec::Scenario inf =
        load_scenario_text(BASE + "  mode: inference\ninference: {prompt_tokens: 2048, generate_tokens: "
                                  "128}\n",
                           SCEN);
    CHECK(inf.training.mode == spec::Mode::INFERENCE);
    CHECK(inf.inference.batch == 1);
    CHECK(inf.inference.prompt_tokens == 2048);
    CHECK(inf.inference.generate_tokens == 128);
  }

  TEST_CASE("scenario_loader: training.optimizer_impl, its refusals and its round trip")
  {
    // docs/ddp.md "Optimizer": torch.optim's implementation, for ddp: and fsdp: only.
    CHECK(load_scenario_text(BASE + "ddp: {}\n", SCEN).training.optimizer_impl == spec::OptimizerImpl::AUTO);
    const spec::Scenario f = load_scenario_text(BASE + "  optimizer_impl: fused\nddp: {}\n", SCEN);
    CHECK(f.training.optimizer_impl == spec::OptimizerImpl::FUSED);
    CHECK(load_scenario_text(resolved_yaml(f), SCEN).training.optimizer_impl == spec::OptimizerImpl::FUSED);
    CHECK(error_of([&] { load_scenario_text(BASE + "  optimizer_impl: fused\n", SCEN); }) ==
          SCEN +
              ":9:19: training.optimizer_impl: chooses torch.optim's implementation (a ddp: or fsdp: run); DeepSpeed "
              "steps with its own optimizer (FusedAdam, or DeepSpeedCPUAdam when offloaded): leave it at auto");
    CHECK(error_of([&] { load_scenario_text(BASE + "  optimizer: sgd\n  optimizer_impl: fused\nddp: {}\n", SCEN); }) ==
          SCEN + ":10:19: training.optimizer_impl: fused is modelled for adam and adamw (torch.optim.AdamW/Adam "
                 "fused=True), found training.optimizer sgd");
    CHECK(error_of([&] {
            load_scenario_text(BASE + "  optimizer_impl: fused\nsoftware: {torch: \"1.13\"}\nddp: {}\n", SCEN);
          }) == SCEN + ":9:19: training.optimizer_impl: fused needs software.torch 2.0 or later (AdamW's fused=True "
                       "came with torch 2.0), found software.torch 1.13");
    CHECK(error_of([&] {
            load_scenario_text(BASE + "  optimizer_impl: fast\nddp: {}\n", SCEN);
          }).find("training.optimizer_impl: expected one of auto, single_tensor, foreach, fused") != std::string::npos);
  }

  TEST_CASE("scenario_loader: the ddp block, its first-bucket rule, warnings and round trip")
  {
    // A given bucket_cap_mb is also the first bucket's cap (distributed.py passes _DEFAULT_FIRST_BUCKET_BYTES
    // only for bucket_cap_mb=None).
    spec::Scenario a = load_scenario_text(BASE + "ddp: {bucket_cap_mb: 50}\n", SCEN);
    CHECK(a.ddp.bucket_cap_mb == 50);
    CHECK(a.ddp.first_bucket_cap_mb == 50);
    spec::Scenario b = load_scenario_text(BASE + "ddp: {bucket_cap_mb: 50, first_bucket_cap_mb: 0.5}\n", SCEN);
    CHECK(b.ddp.first_bucket_cap_mb == 0.5);
    spec::Scenario c = load_scenario_text(BASE + R"(ddp:
  first_bucket_cap_mb: 2
  gradient_as_bucket_view: true
  no_sync: true
  find_unused_parameters: true
  static_graph: true
  broadcast_buffers: false
)",
                                          SCEN);
    CHECK(c.ddp.bucket_cap_mb == 25);
    CHECK(c.ddp.first_bucket_cap_mb == 2);
    CHECK(c.ddp.gradient_as_bucket_view);
    CHECK(c.ddp.no_sync);
    CHECK(c.ddp.find_unused_parameters);
    CHECK(c.ddp.static_graph);
    CHECK_FALSE(c.ddp.broadcast_buffers);
    CHECK(c.warnings == std::vector<std::string>{
                            "ddp.find_unused_parameters: not modelled (the autograd-graph traversal on the CPU at "
                            "every forward; its buckets and used-map all-reduce are modelled)",
                            "ddp.static_graph: not modelled (static graph: the steady state is the default one; its "
                            "first iteration is not modelled)"});
    // resolved_yaml writes every ddp key; reading it back gives the same scenario (and the same warnings).
    check_same(c, load_scenario_text(resolved_yaml(c), SCEN));
    check_same(a, load_scenario_text(resolved_yaml(a), SCEN));
    spec::Scenario e = load_scenario_text(BASE + "ddp: {}\n", SCEN);
    check_same(e, load_scenario_text(resolved_yaml(e), SCEN));
    // --set reaches the ddp keys.
    LoadOptions o;
    o.sets = {"ddp.no_sync=true", "ddp.bucket_cap_mb=10"};
    spec::Scenario f = load_scenario_text(BASE + "ddp: {}\n", SCEN, o);
    CHECK(f.ddp.no_sync);
    CHECK(f.ddp.bucket_cap_mb == 10);
    CHECK(f.ddp.first_bucket_cap_mb == 10);
  }

  TEST_CASE("scenario_loader: keys not modelled are accepted and named in warnings")
  {
    spec::Scenario s = load_scenario_text(BASE + R"(deepspeed:
  zero_optimization:
    stage: 3
    zero_quantized_weights: true
    zero_quantized_gradients: false
    zero_hpz_partition_size: 8
    offload_optimizer: {device: cpu, ratio: 0.4}
  activation_checkpointing: {partition_activations: true}
  sparse_attention: {mode: fixed}
  tensorboard: {enabled: true}
  data_efficiency: {enabled: false}
)",
                                          SCEN);
    CHECK(s.warnings ==
          std::vector<std::string>{
              "deepspeed.zero_optimization.zero_quantized_weights: not modelled (ZeRO++ quantized weight "
              "all-gather)",
              "deepspeed.zero_optimization.zero_hpz_partition_size: not modelled (ZeRO++ hierarchical "
              "partitioning)",
              "deepspeed.activation_checkpointing.partition_activations: not modelled (no effect with "
              "training.tensor_parallel 1: each checkpoint's partition is the whole tensor, a GPU clone; "
              "with cpu_checkpointing it selects DeepSpeed's blocking copies (modelled, docs/offload.md); "
              "the split over a tensor-parallel group is not modelled (warned, "
              "docs/tensor-parallel.md))",
              "deepspeed.sparse_attention: not modelled (sparse attention kernels)",
              "accepted, no effect on time or memory (learning rate, logging, checkpoint format, ...): "
              "deepspeed.tensorboard (zerosim describe deepspeed)"});
    CHECK(s.deepspeed.zero.offload_optimizer.ratio == 0.4);
    CHECK(s.deepspeed.activation_checkpointing.partition_activations);
  }

  TEST_CASE("scenario_loader: --set overrides scenario, deepspeed, cluster and referenced files")
  {
    LoadOptions o;
    o.sets = {"training.micro_batch=2", "deepspeed.zero_optimization.stage=2", "cluster.nodes=4",
              "cluster.overrides.gpu.memory=40 GiB", "model.layers=12"};
    spec::Scenario s = load_scenario(DATA + "/scenarios/by-name.yaml", o);
    CHECK(s.training.micro_batch == 2);
    CHECK(s.deepspeed.zero.stage == 2);
    CHECK(s.deepspeed.zero.overlap_comm); // given as true in ds_config.json, so not the stage-2 default (false)
    CHECK(s.cluster.nodes == 4);
    CHECK(s.cluster.node.gpu.memory_bytes == 40LL << 30);
    CHECK(s.model.layers == 12);
    CHECK(s.training.global_batch == 2 * 4 * 32); // micro 2 x grad_accum 4 x 32 GPUs
  }

  TEST_CASE("scenario_loader: sweep keys are checked paths, values kept as written")
  {
    spec::Scenario s = load_scenario_text(BASE + "sweep:\n  training.micro_batch: [1, 2, 4, 8]\n"
                                                 "  deepspeed.zero_optimization.stage: [2, 3]\n",
                                          SCEN);
    REQUIRE(s.sweep.size() == 2);
    CHECK(s.sweep[0].first == "training.micro_batch");
    CHECK(s.sweep[0].second == std::vector<std::string>{"1", "2", "4", "8"});
    CHECK(s.sweep[1].first == "deepspeed.zero_optimization.stage");
  }

  TEST_CASE("scenario_loader: software: today's stack unstated, the shorthand, a stated stack, per_op")
  {
    // No software block: today's stack (flash2, torch 2.6, no compile), stated false (docs/scenario-format.md).
    const spec::Scenario d = load_scenario_text(BASE, SCEN);
    CHECK(d.software.attention == spec::AttentionKernel::FLASH2);
    CHECK(d.software.torch == "2.6");
    CHECK_FALSE(d.software.compile);
    CHECK_FALSE(d.software.stated);
    CHECK(d.training.flash_attention);
    CHECK_FALSE(d.kernels.empty()); // calibration/kernels.yaml of the source tree
    // training.flash_attention: false is the shorthand for eager.
    const spec::Scenario e = load_scenario_text(BASE + "  flash_attention: false\n", SCEN);
    CHECK(e.software.attention == spec::AttentionKernel::EAGER);
    CHECK_FALSE(e.software.stated);
    // A stated stack; flash_attention: true agrees with any fused kernel.
    const spec::Scenario t = load_scenario_text(
        BASE + "  flash_attention: true\n  activation_checkpointing: per_op\nsoftware:\n  attention: triton_flash\n"
               "  torch: \"1.13\"\n  compile: false\n",
        SCEN);
    CHECK(t.software.attention == spec::AttentionKernel::TRITON_FLASH);
    CHECK(t.software.torch == "1.13");
    CHECK_FALSE(t.software.compile);
    CHECK(t.software.stated);
    CHECK(t.training.flash_attention);
    CHECK(t.training.activation_checkpointing == spec::Checkpointing::PER_OP);
    // torch.compile from torch 2.0 on (the first generation that has it).
    const spec::Scenario c = load_scenario_text(BASE + "software: {torch: \"2.0\", compile: true}\n", SCEN);
    CHECK(c.software.torch == "2.0");
    CHECK(c.software.compile);
    CHECK(c.software.stated);
    // An unfused kernel turns the workload's flash attention off.
    const spec::Scenario m = load_scenario_text(BASE + "software: {attention: sdpa_math}\n", SCEN);
    CHECK_FALSE(m.training.flash_attention);
    CHECK(m.software.stated);
  }

  TEST_CASE("resolved_writer: resolved_yaml loads back to the same scenario")
  {
    LoadOptions o;
    o.sets = {"deepspeed.zero_optimization.zero_quantized_weights=true"};
    spec::Scenario a = load_scenario(DATA + "/scenarios/by-name.yaml", o);
    a.measured.step_time_s = 12.3;
    a.measured.tflops_per_gpu = 145;
    a.measured.tflops_definition = "model";
    a.sweep = {{"training.micro_batch", {"1", "2"}}};
    spec::Scenario b = load_scenario_text(resolved_yaml(a), DATA + "/scenarios/by-name.yaml");
    b.file = a.file;
    check_same(a, b);
    CHECK(b.warnings.size() == 1); // zero_quantized_weights, written back as given
    // Writing twice gives the same text (deterministic output).
    CHECK(resolved_yaml(b) == resolved_yaml(a));

    spec::Scenario f = load_scenario_text(BASE + "fsdp: {sharding_strategy: NO_SHARD, cpu_offload: true}\n"
                                                 "  \nprice_per_gpu_hour: 1.75\n",
                                          SCEN);
    check_same(f, load_scenario_text(resolved_yaml(f), SCEN));

    // The software stack round-trips with its `stated` flag (meta.software.stated): an absent block stays
    // absent (flash_attention: false for eager), a stated one is written out; a power cap keeps limit and tdp.
    for (const std::string& tail :
         {std::string(), std::string("  flash_attention: false\n"),
          std::string("software: {attention: cudnn, torch: \"2.4\", compile: true}\n"),
          std::string("software: {attention: flash2}\n"), std::string("software: {attention: eager}\n")}) {
      CAPTURE(tail);
      const spec::Scenario sw = load_scenario_text(BASE + tail, SCEN);
      const std::string text = resolved_yaml(sw);
      CHECK((text.find("software:") != std::string::npos) == sw.software.stated);
      check_same(sw, load_scenario_text(text, SCEN));
    }
    LoadOptions capped;
    capped.sets = {"cluster.overrides.gpu.power={limit: 300, tdp: 400}"};
    const spec::Scenario p = load_scenario_text(BASE, SCEN, capped);
    CHECK(p.cluster.node.gpu.power_limit_W == 300); // as set above
    CHECK(p.cluster.node.gpu.tdp_W == 400);
    check_same(p, load_scenario_text(resolved_yaml(p), SCEN));
  }

  TEST_CASE("kernel table: match names normalised like gpu.model, attention kernels kept in file order")
  {
    const spec::KernelTable k = load_kernel_table_text(R"(kinds:
  h100-pcie:
    match: [h100]
    match_also: [pci-e]
    sms: 114
    hbm: {value: 0.9, status: stated, source: s}
    gemm: [{torch: "1.0", value: 0.8, status: stated, source: s}]
    attention:
      flash2: {value: 0.5, status: stated, source: s}
      mem_efficient: {value: 0.2, status: stated, source: s}
  generic:
    sms: 108
    hbm: {value: 0.8, status: stated, source: s}
    gemm: [{torch: "1.0", value: 0.8, status: stated, source: s}]
    attention: {flash1: {value: 0.3, status: stated, source: s}}
)",
                                                       "k.yaml");
    // Stored as spec::gpu_match_name writes them, so lower case and '-' match as kind_of compares gpu.model.
    CHECK(k.kinds[0].match == std::vector<std::string>{"H100"});
    CHECK(k.kinds[0].match_also == std::vector<std::string>{"PCIE"});
    bool known = false;
    CHECK(k.kind_of("H100 PCIe 80GB", &known).kind == "h100-pcie");
    CHECK(known);
    CHECK(k.kind_of("H100-SXM5-80GB", &known).kind == "generic"); // no PCIE: the fallback, the last kind
    CHECK_FALSE(known);
    // A kernel the kind does not list is priced as its first listed one (file order: flash2), not the lowest
    // enum value among them (mem_efficient).
    const spec::GpuKindData& pcie = k.kinds[0];
    REQUIRE(pcie.attention.size() == 2);
    CHECK(pcie.attention[0].first == spec::AttentionKernel::FLASH2);
    spec::AttentionKernel used = spec::AttentionKernel::FLASH3;
    const spec::AttentionFigure* fig = spec::attention_figure(pcie, spec::AttentionKernel::FLASH3, &used);
    REQUIRE(fig != nullptr);
    CHECK(used == spec::AttentionKernel::FLASH2);
    CHECK(fig->fwd.value == 0.5); // flash2's value above
    CHECK(spec::attention_figure(pcie, spec::AttentionKernel::MEM_EFFICIENT, &used)->fwd.value == 0.2);
    CHECK(used == spec::AttentionKernel::MEM_EFFICIENT);
    CHECK(spec::attention_figure(spec::GpuKindData{}, spec::AttentionKernel::FLASH2) == nullptr);
  }

  TEST_CASE("describe: prints every key of the schema with its default")
  {
    std::string m = describe("model");
    CHECK(m.find("kv_heads: integer >= 1; default: heads") != std::string::npos);
    std::string n = describe("node");
    CHECK(n.find("latency: time; default: 0.6 us") != std::string::npos);
    CHECK(n.find("adam_bytes_per_param: number > 0; default: 28") != std::string::npos);
    std::string s = describe("scenario");
    CHECK(s.find("micro_batch: integer >= 1") != std::string::npos);
    CHECK(s.find("stage3_prefetch_bucket_size: element count or auto; default: 5e7") != std::string::npos);
    CHECK(error_of([] { describe("modle"); }) ==
          "describe modle: expected one of model, node, scenario, deepspeed, fsdp, ddp");
  }

  // config::load_deepspeed_text, the DeepSpeed reader's text entry (fuzz/ds_config_fuzzer.cpp drives it): the
  // shipped ds_config.json given as text reads as the scenario naming the file reads it, and its errors name the
  // text's file.
  TEST_CASE("config: load_deepspeed_text reads a ds_config.json text as the file the scenario names")
  {
    const std::string scen_file = ZEROSIM_SOURCE_DIR "/scenarios/llama2-13b-hf-ds-config.yaml";
    const std::string ds_file = ZEROSIM_SOURCE_DIR "/scenarios/ds_configs/zero3_offload.json";
    const auto text_of = [](const std::string& path) {
      std::ifstream in(path, std::ios::binary);
      REQUIRE(in);
      std::ostringstream ss;
      ss << in.rdbuf();
      return ss.str();
    };
    const spec::Scenario by_file = load_scenario(scen_file);
    const spec::Scenario by_text = load_deepspeed_text(text_of(ds_file), ds_file, text_of(scen_file), scen_file);
    check_same(by_text, by_file);
    CHECK(resolved_yaml(by_text) == resolved_yaml(by_file));
    CHECK(by_text.deepspeed.zero.stage == 3);
    CHECK(error_of([&] {
            load_deepspeed_text("{\"zero_optimization\": {\"stage\": 4}}", "in.json", text_of(scen_file), scen_file);
          }) == "in.json:1:33: deepspeed.zero_optimization.stage: expected an integer from 0 to 3, found \"4\"");
    CHECK(error_of([&] { load_deepspeed_text("[1]", "in.json", text_of(scen_file), scen_file); }) ==
          "in.json:1:1: expected a mapping of keys at the top of the file, found a list");
  }

} // TEST_SUITE
