#include "row_fixtures.hpp"
#include "validation/published_rows.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace zerosim;
using namespace zerosim::validation;

using zerosim::validation::test::row_318;

namespace {

constexpr double GIB = 1073741824.0;

/// The shared stand-ins for the node files (row_fixtures.hpp fake_node); records the names asked for.
struct FakeNodes {
  std::vector<std::string> asked;
  NodeLoader loader()
  {
    return [this](const std::string& name) {
      asked.push_back(name);
      return zerosim::validation::test::fake_node(name);
    };
  }
};

/// published.csv row 82 (ZeRO-Offload paper, Figure 7): the columns the mapping reads, as written there.
PublishedRow row_82()
{
  return {{"row_id", "82"},
          {"source_id", "S03"},
          {"source", "Ren et al., ZeRO-Offload (USENIX ATC21, arXiv 2101.06840)"},
          {"locator", "Figure 7 (largest trainable model)"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed ZeRO-Offload (ZeRO-2 + CPU optimizer offload, CPU-Adam)"},
          {"model", "GPT-2-like"},
          {"seq_len", "not stated (GPT-2-like)"},
          {"gpu", "V100 SXM3 (DGX-2)"},
          {"gpu_mem_GB", "32"},
          {"gpus_per_node", "16"},
          {"nodes", "1"},
          {"total_gpus", "1"},
          {"cpu_mem_per_node_GB", "1536"},
          {"zero_stage", "2"},
          {"offload_optimizer", "cpu"},
          {"precision", "fp16 mixed (Adam)"},
          {"activation_checkpointing", "yes (paper: 'We use activation checkpointing')"},
          {"max_model_fit", "ZeRO-Offload 13B"}};
}

/// published.csv row 119 (DeepSpeed issue #2159: ZeRO-Infinity 10B with optimizer and parameters on NVMe, 2 nodes of
/// one A100 PCIe 40 GB, nvidia-smi read-out).
PublishedRow row_119()
{
  return {{"row_id", "119"},
          {"source_id", "S05"},
          {"locator", "Issue #2159 (also DeepSpeedExamples #192)"},
          {"evidence_type", "issue text"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed ZeRO-Infinity (Megatron-LM-v1.1.5-ZeRO3 example)"},
          {"model", "GPT-like 10B"},
          {"params_B", "10"},
          {"layers", "50"},
          {"hidden", "4096"},
          {"heads", "16"},
          {"seq_len", "1024 (example default, not restated)"},
          {"gpu", "A100 PCIe"},
          {"gpu_mem_GB", "40"},
          {"gpus_per_node", "1"},
          {"nodes", "2"},
          {"total_gpus", "2"},
          {"cpu_mem_per_node_GB", "126 (60 usable)"},
          {"nvme", "Samsung 980 1TB (80GB swap files)"},
          {"zero_stage", "3"},
          {"offload_optimizer", "nvme"},
          {"offload_param", "nvme (ZeRO-Infinity)"},
          {"micro_batch", "8"},
          {"precision", "fp16 mixed"},
          {"activation_checkpointing", "yes (example)"},
          {"tflops_per_gpu", "1.5"},
          {"peak_mem_GB", "13.1"},
          {"mem_metric", "nvidia-smi used (13395/40537 MiB)"},
          {"completeness", "B"}};
}

/// published.csv row 213 (DeepSpeed ZeRO-Offload tutorial, 10B GPT-2 on one V100, nvidia-smi read-out).
PublishedRow row_213()
{
  return {{"row_id", "213"},
          {"source_id", "S09"},
          {"locator", "docs/_tutorials/zero-offload.md + zero_offload_dp1_10B_log.png / _smi.png"},
          {"evidence_type", "log screenshot (image read)"},
          {"provenance", "measured"},
          {"framework", "DeepSpeed (Megatron-DeepSpeed GPT-2)"},
          {"model", "GPT-2 10B"},
          {"params_B", "10"},
          {"layers", "50"},
          {"hidden", "4096"},
          {"heads", "32"},
          {"seq_len", "not stated (Megatron example default 1024?)"},
          {"gpu", "V100-SXM3"},
          {"gpu_mem_GB", "32"},
          {"gpus_per_node", "16"},
          {"nodes", "1"},
          {"total_gpus", "1"},
          {"zero_stage", "2"},
          {"offload_optimizer", "cpu"},
          {"tp", "1"},
          {"dp", "1"},
          {"global_batch", "10"},
          {"micro_batch", "10"},
          {"precision", "fp16 mixed"},
          {"activation_checkpointing", "yes (--checkpoint-activations)"},
          {"peak_mem_GB", "31.5"},
          {"mem_metric", "nvidia-smi used 32290/32480 MiB (caching allocator; upper bound)"}};
}

/// published.csv row 622 (HF blog "Accelerate Large Model Training using PyTorch FSDP", Table 1: GPT-2 Large, FSDP
/// FULL_SHARD with CPU offload, largest batch 20 on 2 TITAN RTX).
PublishedRow row_622()
{
  return {{"row_id", "622"},
          {"source_id", "S18"},
          {"locator", "Table 1 (GPT-2 Large)"},
          {"evidence_type", "table (text)"},
          {"provenance", "measured"},
          {"framework", "Accelerate + PyTorch FSDP"},
          {"model", "gpt2-large"},
          {"params_B", "0.774"},
          {"layers", "36"},
          {"hidden", "1280"},
          {"heads", "20"},
          {"seq_len", "12"},
          {"gpu", "Titan RTX"},
          {"gpu_mem_GB", "24"},
          {"gpus_per_node", "2"},
          {"total_gpus", "2"},
          {"zero_stage", "3-equivalent"},
          {"fsdp_sharding", "FULL_SHARD"},
          {"offload_param", "cpu (params+grads)"},
          {"dp", "2"},
          {"micro_batch", "20"},
          {"precision", "fp32"},
          {"step_time_s", "~23 min for 1 epoch wikitext-2"},
          {"max_model_fit", "max BS 20"},
          {"completeness", "B"}};
}

/// published.csv row 624 (same blog, Table 2: GPT-2 XL with DDP on one TITAN RTX: "OOM Error" at batch 1).
PublishedRow row_624()
{
  return {{"row_id", "624"},
          {"source_id", "S18"},
          {"locator", "Table 2 (GPT-2 XL)"},
          {"evidence_type", "table (text)"},
          {"provenance", "measured"},
          {"framework", "Accelerate + PyTorch FSDP"},
          {"model", "gpt2-xl"},
          {"params_B", "1.56"},
          {"layers", "48"},
          {"hidden", "1600"},
          {"heads", "25"},
          {"seq_len", "12"},
          {"gpu", "Titan RTX"},
          {"gpu_mem_GB", "24"},
          {"total_gpus", "1"},
          {"zero_stage", "0"},
          {"fsdp_sharding", "none"},
          {"offload_param", "none"},
          {"dp", "1"},
          {"micro_batch", "1"},
          {"precision", "fp32"},
          {"max_model_fit", "OOM at BS 1"},
          {"completeness", "B"}};
}

} // namespace

TEST_SUITE("validation")
{
  TEST_CASE("mapping: ZeRO-Offload max-model row 82 becomes the 13B run and its 26B double")
  {
    FakeNodes nodes;
    RowMapping m;
    map_row(row_82(), nodes.loader(), m);
    REQUIRE(m.fits.size() == 1);
    CHECK(m.memory.empty());
    CHECK(m.not_covered.empty());
    const FitCase& f = m.fits[0];
    // ZeRO-Offload Table 3 (published.csv row 59): 13B = 65 layers x 4096, micro-batch 4 on one GPU.
    CHECK(f.ran.model.layers == 65);
    CHECK(f.ran.model.hidden == 4096);
    CHECK(f.ran.model.vocab == 50304); // GPT-2 BPE 50,257 padded to a multiple of 128 by Megatron-LM
    CHECK(f.ran.model.tied_embeddings);
    CHECK(f.ran.training.micro_batch == 4);
    CHECK(f.ran.training.seq_len == 1024); // Megatron-LM GPT-2 example default (not stated by the row)
    CHECK(f.ran.training.activation_checkpointing == spec::Checkpointing::FULL);
    CHECK(f.ran.training.precision == spec::Precision::FP16);
    CHECK(f.ran.deepspeed.zero.stage == 2);
    CHECK(f.ran.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::CPU);
    CHECK_FALSE(f.ran.deepspeed.zero.overlap_comm); // DeepSpeed default: stage 3 only (docs/deepspeed-schedule.md §11)
    CHECK(f.ran.deepspeed.communication_data_type == spec::Dtype::FP16); // model dtype (§1.3)
    CHECK(f.ran.cluster.total_gpus() == 1);
    CHECK(nodes.asked == std::vector<std::string>{"dgx-2"});
    REQUIRE(f.doubled.has_value());
    CHECK(f.doubled->model.layers == 130); // twice the layers
    CHECK(f.doubled->model.hidden == 4096);
  }

  TEST_CASE("mapping: ZeRO-Offload row 82's largest-model search grows layers of 4096 from the 13B claim")
  {
    FakeNodes nodes;
    RowMapping m;
    map_row(row_82(), nodes.loader(), m);
    REQUIRE(m.fits.size() == 1);
    CHECK(m.fits[0].claimed_params == doctest::Approx(13e9)); // "ZeRO-Offload 13B"
    CHECK(m.fits[0].family.find("layers at hidden 4096") == 0);
    // A max-batch statement (row 622, "max BS 20") and an out-of-memory statement (row 624) name no size: no search.
    RowMapping other;
    map_row(row_622(), nodes.loader(), other);
    map_row(row_624(), nodes.loader(), other);
    REQUIRE(other.fits.size() == 2);
    CHECK(other.fits[0].claimed_params == 0);
    CHECK(other.fits[1].claimed_params == 0);
  }

  TEST_CASE("mapping: ZeRO-Infinity row 119 is an nvidia-smi bound with the example's NVMe config")
  {
    FakeNodes nodes;
    RowMapping m;
    map_row(row_119(), nodes.loader(), m);
    CHECK(m.not_covered.empty());
    REQUIRE(m.memory.size() == 1);
    const MemoryCase& c = m.memory[0];
    CHECK(c.metric == MemMetric::DEVICE_USED);
    CHECK(c.measured_bytes == doctest::Approx(13.1 * GIB)); // nvidia-smi MiB read-out: GiB (README trap 7)
    const spec::Scenario& s = *c.scenario;
    CHECK(s.deepspeed.zero.stage == 3);
    CHECK(s.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::NVME);
    CHECK(s.deepspeed.zero.offload_param.device == spec::OffloadDevice::NVME);
    // Megatron-LM-v1.1.5-ZeRO3/examples/ds_zero_stage_infinity_config.json: reduce bucket 9e7, sub-groups 1e8,
    // max_in_cpu 1; buffer_size not set there. DeepSpeed's default 1e8 elements refuses the embedding partition
    // 50304 x 4096 / 2 = 103,022,592 elements, so 1e9 (the ZeRO-Infinity authors' own) is assumed.
    CHECK(s.deepspeed.zero.reduce_bucket_size == 90'000'000);
    CHECK(s.deepspeed.zero.sub_group_size == 100'000'000);
    CHECK(s.deepspeed.zero.offload_param.max_in_cpu == 1);
    CHECK(s.deepspeed.zero.offload_param.buffer_size == 1'000'000'000);
    CHECK(s.deepspeed.zero.offload_param.buffer_size > 50304LL * 4096 / 2);
    CHECK(s.deepspeed.activation_checkpointing.cpu_checkpointing); // the example's PA_CPU=true
    CHECK(s.cluster.total_gpus() == 2);
    CHECK(c.info.offload == "opt nvme + param nvme");
    CHECK(c.info.assumptions.find("buffer_size 1e9 assumed") != std::string::npos);
  }

  TEST_CASE("mapping: a max-model size whose fp16 shard exceeds one GPU at stage 2 needs its model-parallel degree")
  {
    // published.csv row 84: 70B with ZeRO-Offload on 16 GPUs; 2 bytes x 70e9 = 130 GiB > 32 GiB without model
    // parallelism. ZeRO-Offload Table 3 gives the 70B model's shape and MP setting (69 x 9216, MP 8): the row is
    // searched at tensor parallelism 8.
    PublishedRow r = row_82();
    r["row_id"] = "84";
    r["total_gpus"] = "16";
    r["max_model_fit"] = "ZeRO-Offload 70B";
    FakeNodes nodes;
    RowMapping m;
    map_row(r, nodes.loader(), m);
    REQUIRE(m.fits.size() == 1);
    CHECK(m.fits[0].ran.tp() == 8);
    CHECK(m.fits[0].ran.dp() == 2);
    CHECK(m.fits[0].ran.model.hidden == 9216);
    // A size with no published shape or degree: 2 bytes x 50e9 = 93 GiB > 32 GiB at tensor parallelism 1.
    r["max_model_fit"] = "ZeRO-Offload 50B";
    RowMapping none;
    map_row(r, nodes.loader(), none);
    CHECK(none.fits.empty());
    REQUIRE(none.not_covered.size() == 1);
    CHECK(none.not_covered[0].kind == "max-model");
    CHECK(none.not_covered[0].reason.find("no model-parallel degree") != std::string::npos);
  }

  TEST_CASE("mapping: tutorial row 213 is an nvidia-smi bound with the tutorial's ds_config")
  {
    FakeNodes nodes;
    RowMapping m;
    map_row(row_213(), nodes.loader(), m);
    REQUIRE(m.memory.size() == 1);
    const MemoryCase& c = m.memory[0];
    CHECK(c.metric == MemMetric::DEVICE_USED);
    CHECK(c.measured_bytes == doctest::Approx(31.5 * GIB)); // 32290 MiB read as 31.5 GiB (README trap 7)
    REQUIRE(c.scenario.has_value());
    const spec::Scenario& s = *c.scenario;
    CHECK(s.model.layers == 50);
    CHECK(s.model.hidden == 4096);
    CHECK(s.model.heads == 32);
    CHECK(s.training.micro_batch == 10);
    CHECK(s.training.seq_len == 1024);
    CHECK(s.deepspeed.zero.stage == 2);
    // docs/_tutorials/zero-offload.md: {"stage": 2, "cpu_offload": true, "contiguous_gradients": true, "overlap_comm":
    // true}
    CHECK(s.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::CPU);
    CHECK(s.deepspeed.zero.overlap_comm);
    CHECK(c.info.stage == 2);
    CHECK(c.info.offload == "opt cpu + param none");
  }

  TEST_CASE("mapping: an allocated figure with a reserved figure in its metric gives two comparisons")
  {
    PublishedRow r = row_213();
    r["row_id"] = "211";
    r["locator"] = "docs/_tutorials/zeropp.md + docs/assets/images/zeropp/ZeRO-baseline.png (iteration 40)";
    r["total_gpus"] = "64";
    r["zero_stage"] = "3";
    r["offload_optimizer"] = "";
    r["peak_mem_GB"] = "8.28";
    r["mem_metric"] = "torch max allocated (rank 0); max reserved 18.84 GB";
    FakeNodes nodes;
    RowMapping m;
    map_row(r, nodes.loader(), m);
    REQUIRE(m.memory.size() == 2);
    CHECK(m.memory[0].metric == MemMetric::ALLOCATED);
    CHECK(m.memory[0].measured_bytes == doctest::Approx(8.28 * GIB)); // DeepSpeed log: bytes / 2^30
    CHECK(m.memory[1].metric == MemMetric::RESERVED);
    CHECK(m.memory[1].measured_bytes == doctest::Approx(18.84 * GIB));
    CHECK(m.memory[0].scenario->cluster.nodes == 4);                              // 64 GPUs on 16-GPU nodes
    CHECK(m.memory[0].scenario->deepspeed.zero.reduce_bucket_size == 10'000'000); // zeropp.md ds_config
  }

  TEST_CASE("mapping: estimator row of t5-3b goes to DeepSpeed's stage-2 estimator")
  {
    // published.csv row 232: estimate_zero2_model_states_mem_needs_all_live(t5-3b, 8 GPUs x 1 node), offload cpu:
    // per GPU 2 x 2.851e9 B = 5.31 GiB (memory.rst).
    PublishedRow r = {{"row_id", "232"},
                      {"source_id", "S11"},
                      {"provenance", "estimator"},
                      {"model", "t5-3b"},
                      {"params_B", "2.851"},
                      {"gpus_per_node", "8"},
                      {"nodes", "1"},
                      {"total_gpus", "8"},
                      {"zero_stage", "2"},
                      {"offload_optimizer", "cpu"},
                      {"peak_mem_GB", "5.31"},
                      {"mem_metric", "estimator per-GPU model states; per-CPU 127.48 GB"}};
    FakeNodes nodes;
    RowMapping m;
    map_row(r, nodes.loader(), m);
    REQUIRE(m.memory.size() == 1);
    const MemoryCase& c = m.memory[0];
    CHECK(c.metric == MemMetric::ESTIMATOR);
    REQUIRE(c.estimator.has_value());
    CHECK(c.estimator->total_params == 2'851'000'000);
    CHECK(c.estimator->stage == 2);
    CHECK(c.estimator->gpus_per_node == 8);
    CHECK(c.estimator->offload_optimizer);
    CHECK(c.measured_bytes == doctest::Approx(5.31 * GIB));
    CHECK(nodes.asked.empty()); // no node needed
  }

  TEST_CASE("mapping: tensor-parallel, strategy-less FSDP and T5 rows are listed as not covered with the reason")
  {
    PublishedRow tp = row_213();
    tp["tp"] = "8";
    tp["pp"] = "10";
    // An FSDP run whose sharding strategy neither fsdp_sharding nor zero_stage states.
    PublishedRow fsdp = row_213();
    fsdp["framework"] = "PyTorch FSDP";
    fsdp["zero_stage"] = "";
    PublishedRow t5 = row_318();
    t5["model"] = "HF T5-11B";
    PublishedRow timing = row_213();
    timing["peak_mem_GB"] = "";
    FakeNodes nodes;
    RowMapping m = map_rows({tp, fsdp, t5, timing}, nodes.loader());
    CHECK(m.memory.empty());
    CHECK(m.other_rows == 1); // no memory figure and no fit statement: a time-only row
    REQUIRE(m.not_covered.size() == 3);
    CHECK(m.not_covered[0].reason.find("pipeline parallelism") != std::string::npos);
    CHECK(m.not_covered[0].framework == "DeepSpeed");
    CHECK(m.not_covered[1].reason.find("FSDP sharding strategy not stated") != std::string::npos);
    CHECK(m.not_covered[1].framework == "FSDP");
    CHECK(m.not_covered[2].reason.find("encoder-decoder") != std::string::npos);
    CHECK(m.not_covered[2].framework == "FSDP");
    for (const auto& n : m.not_covered)
      CHECK(n.reason.find("issue 4") == std::string::npos);
  }

  TEST_CASE("mapping: the FSDP paper's minGPT row 318 gives an allocated and a reserved comparison")
  {
    FakeNodes nodes;
    RowMapping m;
    map_row(row_318(), nodes.loader(), m);
    CHECK(m.not_covered.empty());
    REQUIRE(m.memory.size() == 2);
    // "peak allocated 47 / active 63 / reserved 78 GB", read off a chart printed in GB: 10^9 bytes (README trap 7).
    CHECK(m.memory[0].metric == MemMetric::ALLOCATED);
    CHECK(m.memory[0].measured_bytes == doctest::Approx(47e9));
    CHECK(m.memory[0].unit == "GB");
    CHECK(m.memory[1].metric == MemMetric::RESERVED);
    CHECK(m.memory[1].measured_bytes == doctest::Approx(78e9));
    CHECK(m.memory[0].info.assumptions.find("'active 63' not compared") != std::string::npos);
    REQUIRE(m.memory[0].scenario.has_value());
    const spec::Scenario& s = *m.memory[0].scenario;
    CHECK(s.framework == spec::Framework::FSDP);
    CHECK(s.fsdp.sharding_strategy == spec::FsdpSharding::FULL_SHARD);       // fsdp_sharding "FULL_SHARD + ..."
    CHECK(s.fsdp.backward_prefetch == spec::BackwardPrefetch::BACKWARD_PRE); // "backward prefetch": PyTorch's default
    CHECK(s.fsdp.limit_all_gathers);                                         // "rate limiter"
    CHECK(s.model.layers == 96);                                             // "96 (assumed)"
    CHECK(s.model.hidden == 12288);
    CHECK(s.model.heads == 96);
    CHECK(s.model.vocab == 50000);
    CHECK_FALSE(s.model.tied_embeddings); // minGPT: head = nn.Linear(n_embd, vocab_size, bias=False)
    CHECK(s.model.max_position == 2048);  // minGPT's position table has block_size = seq_len rows
    CHECK(s.training.seq_len == 2048);
    CHECK(s.training.micro_batch == 1);
    CHECK(s.training.grad_accum == 1); // global batch 128 / (micro-batch 1 x 128 GPUs)
    CHECK(s.training.global_batch == 128);
    CHECK(s.training.precision == spec::Precision::BF16);                    // "bf16 mixed"
    CHECK(s.training.activation_checkpointing == spec::Checkpointing::FULL); // "yes (...)"
    CHECK(s.training.optimizer == spec::Optimizer::ADAMW);                   // minGPT's configure_optimizers
    CHECK(s.cluster.node.name == "dgx-a100-80gb");
    CHECK(s.cluster.nodes == 16); // 128 GPUs on 8-GPU nodes
    CHECK(m.memory[0].info.framework == "FSDP");
    CHECK(m.memory[0].info.strategy == "FSDP FULL_SHARD");
  }

  TEST_CASE("mapping: the memory and throughput mappings build one scenario from a row")
  {
    FakeNodes nodes;
    RowMapping mem;
    map_row(row_318(), nodes.loader(), mem);
    ThroughputMapping run;
    map_throughput_row(row_318(), {row_318()}, nodes.loader(), run);
    REQUIRE(mem.memory.size() == 2);
    REQUIRE(run.cases.size() == 1);
    const spec::Scenario& a = *mem.memory[0].scenario;
    const spec::Scenario& b = run.cases[0].scenario;
    CHECK(a.model.layers == b.model.layers);
    CHECK(a.model.hidden == b.model.hidden);
    CHECK(a.model.vocab == b.model.vocab);
    CHECK(a.model.dropout == b.model.dropout);
    CHECK(a.model.max_position == b.model.max_position);
    CHECK(a.training.micro_batch == b.training.micro_batch);
    CHECK(a.training.grad_accum == b.training.grad_accum);
    CHECK(a.training.global_batch == b.training.global_batch);
    CHECK(a.training.precision == b.training.precision);
    CHECK(a.training.flash_attention == b.training.flash_attention);
    CHECK(a.fsdp.sharding_strategy == b.fsdp.sharding_strategy);
    CHECK(a.fsdp.param_dtype == b.fsdp.param_dtype);
    CHECK(a.fsdp.reduce_dtype == b.fsdp.reduce_dtype);
    CHECK(a.cluster.nodes == b.cluster.nodes);
    CHECK(a.cluster.network.nic_bandwidth_Bps == doctest::Approx(b.cluster.network.nic_bandwidth_Bps));
    // The description and the assumptions differ only by what each mapping adds about its figures.
    CHECK(mem.memory[0].info.config == run.cases[0].info.config);
  }

  TEST_CASE("mapping: Accelerate's FSDP max-batch row 622 and DDP out-of-memory row 624 are fit cases")
  {
    FakeNodes nodes;
    RowMapping m = map_rows({row_622(), row_624()}, nodes.loader());
    CHECK(m.memory.empty());
    CHECK(m.not_covered.empty());
    REQUIRE(m.fits.size() == 2);
    // Row 622: "max BS 20" with FULL_SHARD and offload_param "cpu (params+grads)" = CPUOffload(offload_params=True).
    const FitCase& f = m.fits[0];
    CHECK(f.expect_fit);
    CHECK(f.ran.framework == spec::Framework::FSDP);
    CHECK(f.ran.fsdp.sharding_strategy == spec::FsdpSharding::FULL_SHARD);
    CHECK(f.ran.fsdp.cpu_offload);
    CHECK(f.ran.training.micro_batch == 20);
    CHECK(f.ran.training.seq_len == 12); // block_size 12, as the blog's command prints it
    CHECK(f.ran.training.precision == spec::Precision::FP32);
    CHECK(f.ran.cluster.total_gpus() == 2);
    CHECK(f.ran.model.vocab == 50257); // Hugging Face GPT-2
    REQUIRE(f.doubled.has_value());
    CHECK(f.doubled->training.micro_batch == 40); // twice the largest batch
    // Row 624: "OOM at BS 1", DDP (fsdp_sharding "none") on one GPU: as written it must not fit; nothing to double.
    const FitCase& g = m.fits[1];
    CHECK_FALSE(g.expect_fit);
    CHECK_FALSE(g.doubled.has_value());
    CHECK(g.ran.framework == spec::Framework::DDP);
    CHECK(g.ran.training.micro_batch == 1);
    CHECK(g.ran.cluster.total_gpus() == 1);
    CHECK(g.ran.model.layers == 48);
    CHECK(g.ran.model.hidden == 1600);
    CHECK(g.info.framework == "DDP");
  }

  TEST_CASE("mapping: GPU columns select the shipped node files")
  {
    CHECK(node_name_for("V100 SXM3 (DGX-2)", "32") == "dgx-2");
    CHECK(node_name_for("A100 PCIe", "40") == "workstation-a100-pcie-40gb");
    CHECK(node_name_for("Titan RTX", "24") == "workstation-2x-titan-rtx");
    CHECK(node_name_for("A100 SXM", "80") == "dgx-a100-80gb");
    CHECK(node_name_for("H100 (Grand Teton, HBM2e, 500W cap)", "96") == "grand-teton-h100-96gb");
    CHECK(node_name_for("TPU v4", "32") == "");
    CHECK(leading_number("1024 (example default, not restated)") == doctest::Approx(1024));
    CHECK_FALSE(leading_number("not stated").has_value());
  }
}
