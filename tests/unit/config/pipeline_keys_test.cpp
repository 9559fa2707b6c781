// The pipeline keys (docs/config.md "Pipeline parallelism"): training.pipeline_parallel, training.pipeline and
// deepspeed.pipeline read into the spec, and every refusal pinned to its exact message (docs/style.md §7.7), with
// DeepSpeed's reason where it is DeepSpeed's (docs/pipeline-parallel.md §3, §5).
#include "config_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace zerosim;
using namespace zerosim::config;
using namespace zerosim::config::test;

namespace {

std::string load_error(const std::string& text, const LoadOptions& o = {})
{
  return error_of([&] { load_scenario_text(text, SCEN, o); });
}

/// BLOOM-176B as it trained (docs/pipeline-parallel.md §8): 48 nodes x 8 GPUs, TP 4, PP 12, DP 8, micro-batch 2, global
/// batch 2048, bf16 with ZeRO stage 0 (DeepSpeed's BF16 optimizer), on the test node.
const std::string BLOOM = R"(name: bloom-like
model: {name: bloom, layers: 70, hidden: 14336, heads: 112, vocab: 250880, position: alibi}
cluster:
  node: test-node
  nodes: 48
deepspeed:
  zero_optimization: {stage: 0}
  bf16: {enabled: true}
training:
  seq_len: 2048
  micro_batch: 2
  global_batch: 2048
  activation_checkpointing: full
  tensor_parallel: 4
  pipeline_parallel: 12
)";

/// `text` with `from` replaced by `to` (once; `from` must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to)
{
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

/// BLOOM with `line` added to its deepspeed block.
std::string bloom_ds(const std::string& line)
{
  return replaced(BLOOM, "  bf16: {enabled: true}\n", "  bf16: {enabled: true}\n" + line + "\n");
}

const std::string ONLY_1F1B = "DeepSpeed's PipelineEngine has only TrainSchedule (1F1B); interleaved and zero-bubble "
                              "schedules are Megatron-LM's and torchtitan's: docs/pipeline-parallel.md §3";

} // namespace

TEST_SUITE("config")
{
  TEST_CASE("pipeline keys: BLOOM as trained reads with its degrees, batch and pipeline block")
  {
    const spec::Scenario s = load_scenario_text(BLOOM, SCEN);
    CHECK(s.world() == 384);
    CHECK(s.tp() == 4);
    CHECK(s.pp() == 12);
    CHECK(s.dp() == 8);
    CHECK(s.training.micro_batch == 2);
    CHECK(s.training.grad_accum == 128); // 2048 / (2 x 8): DeepSpeed's micro-batches per step
    CHECK(s.training.global_batch == 2048);
    // No block: DeepSpeed's TrainSchedule, one chunk a rank, Megatron-DeepSpeed's default partition.
    CHECK(s.training.pipeline.schedule == spec::PipelineSchedule::ONE_F_ONE_B);
    CHECK(s.training.pipeline.virtual_stages == 1);
    CHECK(s.training.pipeline.layers.empty());
    CHECK(s.training.pipeline.partition == "type:transformer");
    CHECK(s.warnings.empty());

    // The block as BLOOM's launch gave it (--pp-partition-method 'type:transformer|embedding'), and an explicit split.
    const spec::Scenario b =
        load_scenario_text(BLOOM + "  pipeline: {schedule: 1f1b, partition: \"Type:Transformer|Embedding\"}\n", SCEN);
    CHECK(b.training.pipeline.partition == "type:transformer|embedding"); // lowercased, as DeepSpeed does
    const spec::Scenario e = load_scenario_text(
        BLOOM + "  pipeline: {schedule: gpipe, layers: [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]}\n", SCEN);
    CHECK(e.training.pipeline.schedule == spec::PipelineSchedule::GPIPE);
    CHECK(e.training.pipeline.layers == std::vector<int>{5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5});

    // The resolved file writes the keys and reads back the same.
    for (const spec::Scenario* x : {&s, &b, &e}) {
      const spec::Scenario back = load_scenario_text(resolved_yaml(*x), SCEN);
      CHECK(back.training.pipeline_parallel == 12);
      CHECK(back.training.tensor_parallel == 4);
      CHECK(back.training.grad_accum == 128);
      CHECK(back.training.pipeline.schedule == x->training.pipeline.schedule);
      CHECK(back.training.pipeline.virtual_stages == 1);
      CHECK(back.training.pipeline.layers == x->training.pipeline.layers);
      CHECK(back.training.pipeline.partition == x->training.pipeline.partition);
      CHECK(resolved_yaml(back) == resolved_yaml(*x));
    }
    CHECK(resolved_yaml(e).find("layers: [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]") != std::string::npos);
  }

  TEST_CASE("pipeline keys: deepspeed.pipeline.stages gives the degree, and its partition the method")
  {
    const std::string ds =
        replaced(bloom_ds("  pipeline: {stages: 12, partition: uniform}"), "  pipeline_parallel: 12\n", "");
    const spec::Scenario s = load_scenario_text(ds, SCEN);
    CHECK(s.pp() == 12);
    CHECK(s.dp() == 8);
    CHECK(s.training.grad_accum == 128);
    CHECK(s.training.pipeline.partition == "uniform");
    // The same degree in both places, and 1 or auto, are accepted; best (DeepSpeed's config default) is no method.
    for (const std::string stages : {"12", "1", "auto"}) {
      const spec::Scenario t =
          load_scenario_text(bloom_ds("  pipeline: {stages: " + stages + ", partition: best}"), SCEN);
      CHECK(t.pp() == 12);
      CHECK(t.training.pipeline.partition == "type:transformer");
    }
    // The same method in both places is no conflict.
    CHECK(load_scenario_text(bloom_ds("  pipeline: {partition: Uniform}") + "  pipeline: {partition: uniform}\n", SCEN)
              .training.pipeline.partition == "uniform");
  }

  TEST_CASE("pipeline keys: sweeps and --set reach the keys")
  {
    LoadOptions o;
    o.sets = {"training.pipeline_parallel=6", "training.pipeline.schedule=gpipe"};
    const spec::Scenario s = load_scenario_text(BLOOM, SCEN, o);
    CHECK(s.pp() == 6);
    CHECK(s.dp() == 16);
    CHECK(s.training.grad_accum == 64); // global_batch given: grad_accum follows
    CHECK(s.training.pipeline.schedule == spec::PipelineSchedule::GPIPE);
    const spec::Scenario w = load_scenario_text(
        BLOOM + "sweep:\n  training.pipeline_parallel: [4, 12]\n  training.pipeline.schedule: [1f1b, gpipe]\n", SCEN);
    CHECK(w.sweep.size() == 2);
  }

  // Each refusal names its key with file, line and column, what was expected and what was found (exit 2 in the CLI).
  TEST_CASE("pipeline keys: a degree the cluster or the model cannot hold is refused")
  {
    CHECK(load_error(replaced(BLOOM, "pipeline_parallel: 12", "pipeline_parallel: 5")) ==
          SCEN + ":15:22: training.pipeline_parallel: expected a divisor of 96: 384 GPUs (cluster.nodes 48 x "
                 "gpus_per_node 8) / training.tensor_parallel 4, as the data-parallel degree is GPUs / "
                 "(tensor_parallel x pipeline_parallel), found \"5\"");
    CHECK(load_error(replaced(BASE, "model: test-gpt",
                              "model: {name: m, layers: 2, hidden: 64, heads: 8, vocab: 100, position: rope}") +
                     "  pipeline_parallel: 4\n") ==
          SCEN + ":9:22: training.pipeline_parallel: expected at most the model's transformer blocks (model.layers 2): "
                 "every stage holds at least one, found \"4\"");
    CHECK(load_error(replaced(BASE, "  node: test-node\n", "  node: test-node\n  nodes: 3\n") +
                     "  pipeline_parallel: 2\n") ==
          SCEN + ":10:22: training.pipeline_parallel: expected a degree whose stages fill whole nodes or share one: a "
                 "stage's 12 ranks (data-parallel x tensor-parallel: 24 GPUs (cluster.nodes 3 x gpus_per_node 8) / 2 "
                 "stages) must be a multiple or a divisor of cluster.gpus_per_node 8 (a layout limit of zerosim's "
                 "engine), found \"2\"");
  }

  TEST_CASE("pipeline keys: training.pipeline is checked against the degree and the model")
  {
    CHECK(load_error(BASE + "  pipeline: {schedule: 1f1b}\n") ==
          SCEN + ":9:13: training.pipeline: only with pipeline_parallel > 1 (training.pipeline_parallel is 1): the "
                 "block sets how pipeline stages are scheduled and split");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {layers: [12]}\n") ==
          SCEN + ":10:22: training.pipeline.layers: expected 2 entries, one per stage (training.pipeline_parallel 2), "
                 "found 1");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {layers: [12, 11]}\n") ==
          SCEN + ":10:22: training.pipeline.layers: expected entries summing to the model's transformer blocks "
                 "(model.layers 24), found a sum of 23");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {layers: [24, 0]}\n") ==
          SCEN + ":10:22: training.pipeline.layers: expected a positive integer at entry 1 (every stage holds a "
                 "transformer block), found \"0\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {layers: 12}\n") ==
          SCEN + ":10:22: training.pipeline.layers: expected a list of transformer block counts, one per stage, found "
                 "\"12\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {layers: [12, 12], partition: uniform}\n") ==
          SCEN + ":10:43: training.pipeline.partition: give layers (an explicit split, " + SCEN +
              ":10:22) or partition (DeepSpeed's partition method), not both");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {partition: \"type:\"}\n") ==
          SCEN + ":10:25: training.pipeline.partition: expected parameters, uniform or type:REGEX (a non-empty regular "
                 "expression matched against the layers' class names, as DeepSpeed's PipelineModule partition_method), "
                 "found \"type:\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {partition: profile}\n") ==
          SCEN + ":10:25: training.pipeline.partition: expected parameters, uniform or type:REGEX (a non-empty regular "
                 "expression matched against the layers' class names, as DeepSpeed's PipelineModule partition_method), "
                 "found \"profile\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {schedule: 1F1B}\n") ==
          SCEN + ":10:24: training.pipeline.schedule: expected one of auto, gpipe, 1f1b, interleaved_1f1b, "
                 "zero_bubble, found \"1F1B\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {virtual_stages: 0}\n") ==
          SCEN + ":10:30: training.pipeline.virtual_stages: expected a positive integer, found \"0\"");
  }

  TEST_CASE("pipeline keys: schedules and virtual stages DeepSpeed's engine does not have are refused")
  {
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {virtual_stages: 2}\n") ==
          SCEN + ":10:30: training.pipeline.virtual_stages: expected 1 (DeepSpeed's PipelineEngine has only "
                 "TrainSchedule (1F1B); interleaved and zero-bubble schedules are Megatron-LM's and torchtitan's: "
                 "docs/pipeline-parallel.md §3), found \"2\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {schedule: interleaved_1f1b}\n") ==
          SCEN + ":10:24: training.pipeline.schedule: expected auto, 1f1b or gpipe (DeepSpeed's PipelineEngine has "
                 "only TrainSchedule (1F1B); interleaved and zero-bubble schedules are Megatron-LM's and torchtitan's: "
                 "docs/pipeline-parallel.md §3), found \"interleaved_1f1b\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  pipeline: {schedule: zero_bubble}\n") ==
          SCEN + ":10:24: training.pipeline.schedule: expected auto, 1f1b or gpipe (DeepSpeed's PipelineEngine has "
                 "only TrainSchedule (1F1B); interleaved and zero-bubble schedules are Megatron-LM's and torchtitan's: "
                 "docs/pipeline-parallel.md §3), found \"zero_bubble\"");
  }

  TEST_CASE("pipeline keys: DeepSpeed's ZeRO-2 and ZeRO-3 are refused with its assert")
  {
    CHECK(load_error(replaced(BLOOM, "{stage: 0}", "{stage: 3}")) ==
          SCEN + ":7:30: deepspeed.zero_optimization.stage: expected 0 or 1 with 12 pipeline stages "
                 "(DeepSpeed's PipelineEngine asserts \"ZeRO-2 and ZeRO-3 are incompatible with pipeline "
                 "parallelism\": deepspeed/runtime/pipe/engine.py; docs/pipeline-parallel.md §5), found \"3\"");
    CHECK(load_error(replaced(BLOOM, "{stage: 0}", "{stage: 2}")) ==
          SCEN + ":7:30: deepspeed.zero_optimization.stage: expected 0 or 1 with 12 pipeline stages "
                 "(DeepSpeed's PipelineEngine asserts \"ZeRO-2 and ZeRO-3 are incompatible with pipeline "
                 "parallelism\": deepspeed/runtime/pipe/engine.py; docs/pipeline-parallel.md §5), found \"2\"");
  }

  // docs/pipeline-parallel.md §5's table at the versions zerosim models (0.16, 0.19): every bf16 and fp16 combination
  // of ZeRO stage 0 or 1 with or without optimizer offload is one DeepSpeed's source runs.
  TEST_CASE("pipeline keys: ZeRO-0 and ZeRO-1, with or without optimizer offload, are accepted")
  {
    for (const std::string version : {"\"0.16\"", "\"0.19\""})
      for (const std::string zero : {"{stage: 0}", "{stage: 1}", "{stage: 1, offload_optimizer: {device: cpu}}"})
        for (const std::string dtype : {"", "  data_types: {grad_accum_dtype: fp32}\n"}) {
          CAPTURE(version);
          CAPTURE(zero);
          CAPTURE(dtype);
          const std::string text =
              "deepspeed_version: " + version + "\n" +
              replaced(replaced(BLOOM, "{stage: 0}", zero), "deepspeed:\n", "deepspeed:\n" + dtype);
          CHECK(load_scenario_text(text, SCEN).pp() == 12);
        }
  }

  // docs/pipeline-parallel.md §5: up to v0.9.1 PipelineEngine._exec_reduce_grads asserts "only bf16 + z1 are
  // supported" and raises NotImplementedError for bf16 at ZeRO stage 1; a minor version is read at its last patch, so
  // 0.8 (v0.8.3) and older refuse, 0.9 (v0.9.5) does not. zerosim models 0.14-0.19: an older version is refused either
  // way, with DeepSpeed's reason where DeepSpeed refuses the run.
  TEST_CASE("pipeline keys: bf16 with ZeRO-1 at a DeepSpeed before 0.9 is refused with its assert")
  {
    const std::string bf16_zero1 = replaced(BLOOM, "{stage: 0}", "{stage: 1}");
    const std::string quote =
        "'s PipelineEngine refuses training.precision bf16 with deepspeed.zero_optimization.stage 1 and 12 pipeline "
        "stages: ReduceGrads asserts \"only bf16 + z1 are supported\" and raises NotImplementedError "
        "(deepspeed/runtime/pipe/engine.py _exec_reduce_grads, up to 0.9.1; docs/pipeline-parallel.md §5); use ZeRO "
        "stage 0 (BF16_Optimizer, as BLOOM ran) or a deepspeed_version from 0.14 to 0.19 (zerosim models those)";
    CHECK(load_error(bf16_zero1 + "deepspeed_version: \"0.7\"\n") ==
          SCEN + ":16:20: deepspeed_version: DeepSpeed 0.7" + quote);
    CHECK(load_error(bf16_zero1 + "deepspeed_version: \"0.8\"\n") ==
          SCEN + ":16:20: deepspeed_version: DeepSpeed 0.8" + quote);
    // 0.9 runs it, and fp16 at 0.7 too: refused only as versions zerosim does not model.
    CHECK(load_error(bf16_zero1 + "deepspeed_version: \"0.9\"\n") ==
          SCEN + ":16:20: deepspeed_version: expected one of 0.19, 0.18, 0.17, 0.16, 0.15, 0.14, found \"0.9\"");
    const std::string fp16_zero1 = replaced(replaced(bf16_zero1, "bf16: {enabled: true}", "fp16: {enabled: true}"),
                                            "  seq_len: 2048\n", "  seq_len: 2048\n  precision: fp16\n");
    CHECK(load_error(fp16_zero1 + "deepspeed_version: \"0.7\"\n") ==
          SCEN + ":17:20: deepspeed_version: expected one of 0.19, 0.18, 0.17, 0.16, 0.15, 0.14, found \"0.7\"");
    CHECK(load_error(BLOOM + "deepspeed_version: \"0.7\"\n") ==
          SCEN + ":16:20: deepspeed_version: expected one of 0.19, 0.18, 0.17, 0.16, 0.15, 0.14, found \"0.7\"");
  }

  // engine.py _configure_zero_optimizer turns overlap_comm off for a PipelineModule with a warning (docs/pipeline-parallel.md §5); BF16_Optimizer
  // (bf16, ZeRO-1, fp32 grad_accum_dtype) is not the ZeRO optimizer and says nothing.
  TEST_CASE("pipeline keys: overlap_comm under the pipeline's ZeRO-1 is turned off with DeepSpeed's warning")
  {
    const auto warned = [](const spec::Scenario& s) {
      return std::any_of(s.warnings.begin(), s.warnings.end(), [](const std::string& w) {
        return w == "deepspeed.zero_optimization.overlap_comm: true has no effect with pipeline stages: DeepSpeed's "
                    "engine warns \"Pipeline parallelism does not support overlapped communication, will be "
                    "disabled.\" and reduces after the pipeline on the compute stream (docs/pipeline-parallel.md §5)";
      });
    };
    const std::string zero1 = replaced(BLOOM, "{stage: 0}", "{stage: 1, overlap_comm: true}");
    CHECK(warned(load_scenario_text(zero1, SCEN)));
    CHECK_FALSE(warned(load_scenario_text(replaced(BLOOM, "{stage: 0}", "{stage: 1}"), SCEN)));
    CHECK_FALSE(warned(load_scenario_text(
        replaced(zero1, "deepspeed:\n", "deepspeed:\n  data_types: {grad_accum_dtype: fp32}\n"), SCEN)));
  }

  TEST_CASE("pipeline keys: other frameworks and inference have no pipeline")
  {
    CHECK(load_error(BASE + "  pipeline_parallel: 2\nddp: {}\n") ==
          SCEN + ":9:22: training.pipeline_parallel: expected 1 with ddp (pipeline parallelism is modelled for "
                 "DeepSpeed's PipelineEngine; PyTorch DDP/FSDP have none), found \"2\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\nfsdp: {}\n") ==
          SCEN + ":9:22: training.pipeline_parallel: expected 1 with fsdp (pipeline parallelism is modelled for "
                 "DeepSpeed's PipelineEngine; PyTorch DDP/FSDP have none), found \"2\"");
    CHECK(load_error(BASE + "  pipeline_parallel: 2\n  mode: inference\ninference: {prompt_tokens: 128}\n") ==
          SCEN + ":9:22: training.pipeline_parallel: expected 1 with training.mode inference (pipeline parallelism is "
                 "modelled for training, as DeepSpeed's PipelineEngine runs its TrainSchedule; docs/config.md "
                 "\"Pipeline parallelism\"), found \"2\"");
  }

  TEST_CASE("pipeline keys: deepspeed.pipeline against the training block")
  {
    CHECK(load_error(bloom_ds("  pipeline: {stages: 6}")) ==
          SCEN + ":9:22: deepspeed.pipeline.stages: expected auto, 1 or 12, training.pipeline_parallel's (" + SCEN +
              ":16:22): both keys give the pipeline degree, found \"6\"");
    CHECK(load_error(bloom_ds("  pipeline: {partition: uniform}") + "  pipeline: {partition: parameters}\n") ==
          SCEN + ":9:25: deepspeed.pipeline.partition: contradicts training.pipeline.partition: parameters (" + SCEN +
              ":17:25); give one of the two keys");
    CHECK(load_error(bloom_ds("  pipeline: {partition: uniform}") +
                     "  pipeline: {layers: [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]}\n") ==
          SCEN + ":9:25: deepspeed.pipeline.partition: give training.pipeline.layers (an explicit split, " + SCEN +
              ":17:22) or a partition method, not both");
    CHECK(load_error(bloom_ds("  pipeline: {partition: profile}")) ==
          SCEN + ":9:25: deepspeed.pipeline.partition: expected parameters, uniform or type:REGEX (a non-empty regular "
                 "expression matched against the layers' class names, as DeepSpeed's PipelineModule partition_method), "
                 "or best (DeepSpeed's config default), found \"profile\"");
    CHECK(load_error(bloom_ds("  pipeline: 12")) ==
          SCEN + ":9:13: deepspeed.pipeline: expected a mapping, found \"12\"");
    // A degree only DeepSpeed's key gives is checked, and named, there.
    const std::string only_ds = replaced(BLOOM, "  pipeline_parallel: 12\n", "");
    CHECK(load_error(
              replaced(only_ds, "  bf16: {enabled: true}\n", "  bf16: {enabled: true}\n  pipeline: {stages: 5}\n")) ==
          SCEN + ":9:22: deepspeed.pipeline.stages: expected a divisor of 96: 384 GPUs (cluster.nodes 48 x "
                 "gpus_per_node 8) / "
                 "training.tensor_parallel 4, as the data-parallel degree is GPUs / (tensor_parallel x "
                 "pipeline_parallel), found \"5\"");
    CHECK(load_error(replaced(replaced(only_ds, "{stage: 0}", "{stage: 3}"), "  bf16: {enabled: true}\n",
                              "  bf16: {enabled: true}\n  pipeline: {stages: 12}\n")) ==
          SCEN + ":7:30: deepspeed.zero_optimization.stage: expected 0 or 1 with 12 pipeline stages (DeepSpeed's "
                 "PipelineEngine asserts \"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\": "
                 "deepspeed/runtime/pipe/engine.py; docs/pipeline-parallel.md §5), found \"3\"");
    // The checkpoint interval DeepSpeed's config would impose: named in the warnings unless it is full's.
    CHECK(load_scenario_text(bloom_ds("  pipeline: {activation_checkpoint_interval: 1}"), SCEN).warnings.empty());
    CHECK(load_scenario_text(bloom_ds("  pipeline: {activation_checkpoint_interval: 2}"), SCEN).warnings ==
          std::vector<std::string>{
              "deepspeed.pipeline.activation_checkpoint_interval: not modelled (DeepSpeed's PipelineEngine would "
              "checkpoint the PipelineModule's layers in chunks of 2; zerosim checkpoints as "
              "training.activation_checkpointing: full says, each transformer block its own checkpoint, interval 1; "
              "docs/pipeline-parallel.md §7)"});
    // Written back as given: the resolved file reads with the same warning.
    const spec::Scenario w = load_scenario_text(bloom_ds("  pipeline: {activation_checkpoint_interval: 2}"), SCEN);
    CHECK(load_scenario_text(resolved_yaml(w), SCEN).warnings == w.warnings);
  }
}
