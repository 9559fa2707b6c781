// The audit of docs/offload.md: every offload, aio and activation-checkpointing key of DeepSpeed's config, set
// to a value other than its default, is either modelled (its resolved spec field holds the value; the schedule
// tests assert the effect) or named in Scenario::warnings. Plus the cross-key rules DeepSpeed enforces.
#include "config/schema.hpp"
#include "config_test_util.hpp"

#include <doctest/doctest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

using namespace zerosim;
using namespace zerosim::config;
using namespace zerosim::config::test;

namespace {

/// One key of the audit: a modelled key comes with the check of its spec field; a warned one has none.
struct Audited {
  std::string path; ///< dotted, under deepspeed.
  std::function<bool(const spec::Scenario&)> modelled;
};

int warnings_naming(const spec::Scenario& s, const std::string& path)
{
  int n = 0;
  for (const std::string& w : s.warnings)
    n += w.rfind(path + ": ", 0) == 0;
  return n;
}

/// Every key of DeepSpeed's offload_optimizer, offload_param, aio and activation_checkpointing tables set away
/// from its default (stage 3, both offloads on NVMe, full checkpointing so the activation block is in effect).
const std::string ALL_KEYS = BASE + R"(  activation_checkpointing: full
deepspeed:
  zero_optimization:
    stage: 3
    cpu_offload_use_pin_memory: true
    offload_optimizer: {device: nvme, nvme_path: /local_nvme, buffer_count: 8, pin_memory: false,
                        pipeline_read: true, pipeline_write: true, fast_init: true, ratio: 0.5,
                        super_offload: true, cpuadam_cores_perc: 0.5, convert_grad_on_cpu: false}
    offload_param: {device: nvme, nvme_path: /local_nvme, buffer_count: 6, buffer_size: 2.0e8,
                    max_in_cpu: 5.0e8, pin_memory: false}
  aio: {block_size: 2097152, queue_depth: 16, intra_op_parallelism: 2, single_submit: true,
        overlap_events: false, use_gds: true}
  activation_checkpointing: {partition_activations: true, cpu_checkpointing: true,
                             contiguous_memory_optimization: true, number_checkpoints: 32,
                             synchronize_checkpoint_boundary: true, profile: true}
)";

const std::vector<Audited>& audit()
{
  using S = const spec::Scenario&;
  static const std::vector<Audited> keys = {
      // offload_optimizer (docs/deepspeed-schedule.md §3.6, §6.1, §7; schedule/offload.cpp)
      {"zero_optimization.offload_optimizer.device",
       [](S s) { return s.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::NVME; }},
      {"zero_optimization.offload_optimizer.nvme_path", nullptr},
      {"zero_optimization.offload_optimizer.buffer_count",
       [](S s) { return s.deepspeed.zero.offload_optimizer.buffer_count == 8; }},
      {"zero_optimization.offload_optimizer.pin_memory",
       [](S s) { return !s.deepspeed.zero.offload_optimizer.pin_memory; }},
      {"zero_optimization.offload_optimizer.pipeline_read",
       [](S s) { return s.deepspeed.zero.offload_optimizer.pipeline_read; }},
      {"zero_optimization.offload_optimizer.pipeline_write",
       [](S s) { return s.deepspeed.zero.offload_optimizer.pipeline_write; }},
      {"zero_optimization.offload_optimizer.fast_init", nullptr},
      {"zero_optimization.offload_optimizer.ratio",
       [](S s) { return s.deepspeed.zero.offload_optimizer.ratio == 0.5; }},
      {"zero_optimization.offload_optimizer.super_offload", nullptr},
      {"zero_optimization.offload_optimizer.cpuadam_cores_perc", nullptr},
      {"zero_optimization.offload_optimizer.convert_grad_on_cpu", nullptr},
      // offload_param (§6.2, §8)
      {"zero_optimization.offload_param.device",
       [](S s) { return s.deepspeed.zero.offload_param.device == spec::OffloadDevice::NVME; }},
      {"zero_optimization.offload_param.nvme_path", nullptr},
      {"zero_optimization.offload_param.buffer_count",
       [](S s) { return s.deepspeed.zero.offload_param.buffer_count == 6; }},
      {"zero_optimization.offload_param.buffer_size",
       [](S s) { return s.deepspeed.zero.offload_param.buffer_size == 200'000'000; }},
      {"zero_optimization.offload_param.max_in_cpu",
       [](S s) { return s.deepspeed.zero.offload_param.max_in_cpu == 500'000'000; }},
      {"zero_optimization.offload_param.pin_memory", nullptr},
      // the deprecated zero_optimization keys (cpu_offload and cpu_offload_param: the second scenario below)
      {"zero_optimization.cpu_offload_use_pin_memory", nullptr},
      // aio (§7; block_size, queue_depth and intra_op_parallelism: the engine's per-request NVMe model)
      {"aio.block_size", [](S s) { return s.deepspeed.aio.block_size == 2'097'152; }},
      {"aio.queue_depth", [](S s) { return s.deepspeed.aio.queue_depth == 16; }},
      {"aio.intra_op_parallelism", [](S s) { return s.deepspeed.aio.intra_op_parallelism == 2; }},
      {"aio.single_submit", nullptr},
      {"aio.overlap_events", nullptr},
      {"aio.use_gds", nullptr},
      // activation_checkpointing (schedule_builder.cpp; tests/unit/schedule/activation_offload_test.cpp)
      {"activation_checkpointing.partition_activations", nullptr},
      {"activation_checkpointing.cpu_checkpointing",
       [](S s) { return s.deepspeed.activation_checkpointing.cpu_checkpointing; }},
      {"activation_checkpointing.contiguous_memory_optimization",
       [](S s) { return s.deepspeed.activation_checkpointing.contiguous_memory_optimization; }},
      {"activation_checkpointing.number_checkpoints",
       [](S s) { return s.deepspeed.activation_checkpointing.number_checkpoints == 32; }},
      {"activation_checkpointing.synchronize_checkpoint_boundary",
       [](S s) { return s.deepspeed.activation_checkpointing.synchronize_checkpoint_boundary; }},
      {"activation_checkpointing.profile", [](S s) { return s.deepspeed.activation_checkpointing.profile; }},
  };
  return keys;
}

} // namespace

TEST_SUITE("config")
{
  TEST_CASE("offload keys: every key is modelled (its spec field holds the value) or named in warnings")
  {
    const spec::Scenario s = load_scenario_text(ALL_KEYS, SCEN);
    for (const Audited& k : audit()) {
      const std::string path = "deepspeed." + k.path;
      CAPTURE(path);
      if (k.modelled) {
        CHECK(k.modelled(s));
        CHECK(warnings_naming(s, path) == 0);
      } else {
        CHECK(warnings_naming(s, path) == 1);
      }
    }
    // Nothing else is warned about: the warnings are exactly the audited not-modelled keys.
    std::size_t warned = 0;
    for (const Audited& k : audit())
      warned += k.modelled ? 0 : 1;
    CHECK(s.warnings.size() == warned);
  }

  TEST_CASE("offload keys: the audit covers every key of the offload, aio and activation_checkpointing tables")
  {
    // A key added to the schema without an entry here fails this test.
    std::set<std::string> audited;
    for (const Audited& k : audit())
      audited.insert(k.path);
    audited.insert("zero_optimization.cpu_offload");       // the deprecated-keys scenario below
    audited.insert("zero_optimization.cpu_offload_param"); // idem
    audited.insert("aio.thread_count");                    // alias of intra_op_parallelism, below
    const Schema& ds = deepspeed_schema();
    const Schema& zero = sub_schema(ds, "zero_optimization");
    for (const auto& [schema, prefix] : std::vector<std::pair<const Schema*, std::string>>{
             {&sub_schema(zero, "offload_optimizer"), "zero_optimization.offload_optimizer."},
             {&sub_schema(zero, "offload_param"), "zero_optimization.offload_param."},
             {&sub_schema(ds, "aio"), "aio."},
             {&sub_schema(ds, "activation_checkpointing"), "activation_checkpointing."}})
      for (const std::string& key : schema->names()) {
        CAPTURE(prefix + key);
        CHECK(audited.count(prefix + key) == 1);
      }
    for (const char* key : {"cpu_offload", "cpu_offload_param", "cpu_offload_use_pin_memory"}) {
      CAPTURE(key);
      CHECK(zero.find(key) != nullptr);
      CHECK(audited.count(std::string("zero_optimization.") + key) == 1);
    }
  }

  TEST_CASE("offload keys: the deprecated cpu_offload keys map as DeepSpeed maps them")
  {
    // DeepSpeedZeroConfig: cpu_offload -> DeepSpeedZeroOffloadOptimizerConfig(device=cpu), cpu_offload_param ->
    // DeepSpeedZeroOffloadParamConfig(device=cpu), both with their own pin_memory default (0.19: True; 0.16:
    // False, docs/deepspeed-schedule.md §14); cpu_offload_use_pin_memory sets nothing (set_new_param=False).
    for (const char* version : {"0.19", "0.16"}) {
      CAPTURE(version);
      const std::string v = version;
      const spec::Scenario s = load_scenario_text(
          BASE + "deepspeed_version: \"" + v + "\"\n" +
              "deepspeed:\n  zero_optimization: {stage: 3, cpu_offload: true, cpu_offload_param: true, "
              "cpu_offload_use_pin_memory: true}\n",
          SCEN);
      CHECK(s.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::CPU);
      CHECK(s.deepspeed.zero.offload_param.device == spec::OffloadDevice::CPU);
      CHECK(s.deepspeed.zero.offload_optimizer.pin_memory == (v == "0.19"));
      CHECK(s.deepspeed.zero.offload_param.pin_memory == (v == "0.19"));
      CHECK(warnings_naming(s, "deepspeed.zero_optimization.cpu_offload") == 0);
      CHECK(warnings_naming(s, "deepspeed.zero_optimization.cpu_offload_param") == 0);
      CHECK(warnings_naming(s, "deepspeed.zero_optimization.cpu_offload_use_pin_memory") == 1);
    }
    // A deprecated key with its replacement fails, whatever its value (DeepSpeedConfigModel asserts).
    CHECK(error_of([] {
            load_scenario_text(BASE + "deepspeed:\n  zero_optimization: {stage: 2, cpu_offload: false, "
                                      "offload_optimizer: {device: cpu}}\n",
                               SCEN);
          }).find("not both") != std::string::npos);
    CHECK(error_of([] {
            load_scenario_text(BASE + "deepspeed:\n  zero_optimization: {stage: 3, cpu_offload_param: true, "
                                      "offload_param: {device: cpu}}\n",
                               SCEN);
          }).find("not both") != std::string::npos);
    // aio.thread_count, DeepSpeed's documented name, is intra_op_parallelism.
    const spec::Scenario t = load_scenario_text(BASE + "deepspeed:\n  aio: {thread_count: 4}\n", SCEN);
    CHECK(t.deepspeed.aio.intra_op_parallelism == 4);
    CHECK(t.warnings.empty());
  }

  TEST_CASE("offload keys: activation_checkpointing keys without effect are named, broken combinations fail")
  {
    // The block acts on blocks checkpointed with deepspeed.checkpointing.checkpoint: full checkpointing only.
    const spec::Scenario none = load_scenario_text(
        BASE + "deepspeed:\n  activation_checkpointing: {cpu_checkpointing: true, profile: true}\n", SCEN);
    CHECK(none.warnings ==
          std::vector<std::string>{
              "deepspeed.activation_checkpointing.cpu_checkpointing: no effect (training.activation_checkpointing is "
              "none: the block acts on the transformer blocks run through deepspeed.checkpointing.checkpoint, which "
              "zerosim models with activation_checkpointing: full only)",
              "deepspeed.activation_checkpointing.profile: no effect (training.activation_checkpointing is none: the "
              "block acts on the transformer blocks run through deepspeed.checkpointing.checkpoint, which zerosim "
              "models with activation_checkpointing: full only)"});
    // The reason names the policy as written (spec::to_string): per_op, not the former hand mapping's "selective".
    const spec::Scenario per_op =
        load_scenario_text(BASE + "  activation_checkpointing: per_op\n" +
                               "deepspeed:\n  activation_checkpointing: {cpu_checkpointing: true}\n",
                           SCEN);
    CHECK(per_op.warnings ==
          std::vector<std::string>{
              "deepspeed.activation_checkpointing.cpu_checkpointing: no effect (training.activation_checkpointing is "
              "per_op: the block acts on the transformer blocks run through deepspeed.checkpointing.checkpoint, which "
              "zerosim models with activation_checkpointing: full only)"});
    // number_checkpoints only sizes the contiguous buffers.
    const spec::Scenario n =
        load_scenario_text(BASE + "  activation_checkpointing: full\n" +
                               "deepspeed:\n  activation_checkpointing: {number_checkpoints: 24}\n",
                           SCEN);
    CHECK(warnings_naming(n, "deepspeed.activation_checkpointing.number_checkpoints") == 1);
    // checkpointing.py configure(): contiguous needs partition_activations and number_checkpoints.
    CHECK(error_of([] {
            load_scenario_text(BASE + "  activation_checkpointing: full\n" +
                                   "deepspeed:\n  activation_checkpointing: {contiguous_memory_optimization: true, "
                                   "number_checkpoints: 24}\n",
                               SCEN);
          }).find("needs partition_activations") != std::string::npos);
    CHECK(error_of([] {
            load_scenario_text(BASE + "  activation_checkpointing: full\n" +
                                   "deepspeed:\n  activation_checkpointing: {contiguous_memory_optimization: true, "
                                   "partition_activations: true}\n",
                               SCEN);
          }).find("needs number_checkpoints") != std::string::npos);
    // Twin-Flow below 1 is stage 3 only (DeepSpeedZeroConfig.offload_ratio_check).
    CHECK(error_of([] {
            load_scenario_text(BASE + "deepspeed:\n  zero_optimization: {stage: 2, offload_optimizer: {device: cpu, "
                                      "ratio: 0.5}}\n",
                               SCEN);
          }).find("needs ZeRO stage 3") != std::string::npos);
  }
}
