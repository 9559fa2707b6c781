// The ds_config.json zerosim writes (deepspeed_json, what `zerosim recommend` writes) against the keys each DeepSpeed
// version accepts: data/deepspeed_config_keys.csv, read from DeepSpeed's source at each minor version's last patch
// tag by tools/deepspeed_config_keys.py (its own test: tests/tools/deepspeed_config_keys_test.py). And
// deepspeed_version's minor versions, and strict JSON for a .json ds_config.
#include "config/deepspeed_keys.hpp"
#include "config_test_util.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace zerosim;
using namespace zerosim::config;
using namespace zerosim::config::test;

namespace {

const std::vector<std::string> VERSIONS = {"0.14", "0.15", "0.16", "0.17", "0.18", "0.19"};

/// Every key path of a JSON object, dotted ("zero_optimization.offload_optimizer.device").
void key_paths(const nlohmann::json& j, const std::string& prefix, std::vector<std::string>& out)
{
  for (const auto& [k, v] : j.items()) {
    const std::string p = prefix.empty() ? k : prefix + "." + k;
    out.push_back(p);
    if (v.is_object())
      key_paths(v, p, out);
  }
}

std::vector<std::string> key_paths(const std::string& json_text)
{
  std::vector<std::string> out;
  key_paths(nlohmann::json::parse(json_text), "", out);
  return out;
}

/// A stage-3 run with both offloads on NVMe, the HF "auto" values resolved, bf16: the recommend winners' kinds.
std::string offload_scenario(const std::string& version)
{
  return BASE + "  precision: bf16\ndeepspeed_version: \"" + version +
         "\"\ndeepspeed:\n  zero_optimization:\n    stage: 3\n"
         "    offload_optimizer: {device: nvme, nvme_path: /local_nvme}\n"
         "    offload_param: {device: nvme, nvme_path: /local_nvme}\n    reduce_bucket_size: auto\n";
}

/// BASE naming its model and node by path, with `deepspeed: ds.json`: a scenario for a folder of its own.
std::string base_in_folder()
{
  std::string s = BASE;
  s.replace(s.find("model: test-gpt"), 15, "model: " + DATA + "/models/test-gpt.yaml");
  s.replace(s.find("node: test-node"), 15, "node: " + DATA + "/topologies/test-node.yaml");
  return s + "deepspeed: ds.json\n";
}

} // namespace

TEST_CASE("deepspeed keys: the shipped table has 0.14 to 0.19, each at its last patch tag")
{
  const DeepSpeedKeyTable& t = deepspeed_key_table();
  // Tags: `git tag -l 'v0.1*'` of github.com/deepspeedai/DeepSpeed (the script's VERSIONS).
  const std::map<std::string, std::string> tags = {{"0.14", "v0.14.5"}, {"0.15", "v0.15.4"}, {"0.16", "v0.16.9"},
                                                   {"0.17", "v0.17.6"}, {"0.18", "v0.18.9"}, {"0.19", "v0.19.5"}};
  REQUIRE(t.versions.size() == tags.size());
  for (const auto& [v, tag] : tags) {
    CHECK(t.at(v).tag == tag);
    CHECK(t.at(v).commit.size() == 40);
  }
  CHECK(t.script_sha256.size() == 64);
  // zero/config.py at v0.16.9, line 105: `reduce_bucket_size: int = Field(pp_int(5e8), ge=0)`.
  CHECK(t.at("0.16").keys.at("zero_optimization.reduce_bucket_size").default_text == "500000000");
  // offload_config.py: pin_memory False up to 0.18.9, True at 0.19 (docs/deepspeed-schedule.md §14).
  CHECK(t.at("0.18").keys.at("zero_optimization.offload_optimizer.pin_memory").default_text == "false");
  CHECK(t.at("0.19").keys.at("zero_optimization.offload_optimizer.pin_memory").default_text == "true");
}

TEST_CASE("deepspeed keys: a malformed table is refused with its file and line")
{
  const std::string file = std::string(ZEROSIM_BINARY_DIR) + "/tests-tmp-bad-deepspeed-keys.csv";
  std::ofstream(file) << "# comment\nversion,tag,commit,key,default,note,source\n0.16,v0.16.9,abc,stage,0,\n";
  CHECK(error_of([&] { read_deepspeed_key_table(file); }) ==
        file + ":3: expected 7 comma-separated fields (version,tag,commit,key,default,note,source), found "
               "\"0.16,v0.16.9,abc,stage,0,\"");
  std::filesystem::remove(file);
}

TEST_CASE("deepspeed keys: every key of the written ds_config.json exists in its version, for every version")
{
  const DeepSpeedKeyTable& t = deepspeed_key_table();
  for (const std::string& v : VERSIONS)
    for (const std::string& text : {BASE + "deepspeed_version: \"" + v + "\"\n", offload_scenario(v)}) {
      CAPTURE(v);
      const spec::Scenario s = load_scenario_text(text, SCEN);
      const std::string json = deepspeed_json(s);
      for (const std::string& path : key_paths(json)) {
        CAPTURE(path);
        const std::string top = path.substr(0, path.find('.'));
        // The top-level keys, zero_optimization's whole tree (extra="forbid") and the blocks the table lists.
        if (path == top || top == "zero_optimization" || t.at(v).describes_children(top))
          CHECK(t.at(v).has(path));
      }
    }
}

TEST_CASE("deepspeed keys: the default ds_config.json holds only what the user must see")
{
  // Every other key at zerosim's default, which is DeepSpeed's default of that version (the table): so nothing else
  // is written. Batch: micro 1 x grad_accum 16 x 8 GPUs (test-node, gpus: 8) = 128.
  const std::string want = R"({
  "train_batch_size": 128,
  "train_micro_batch_size_per_gpu": 1,
  "gradient_accumulation_steps": 16,
  "zero_optimization": {
    "stage": 0,
    "offload_optimizer": {
      "device": "none"
    },
    "offload_param": {
      "device": "none"
    }
  },
  "fp16": {
    "enabled": false
  },
  "bf16": {
    "enabled": true
  }
}
)";
  for (const std::string& v : VERSIONS) {
    CAPTURE(v);
    CHECK(deepspeed_json(load_scenario_text(BASE + "deepspeed_version: \"" + v + "\"\n", SCEN)) == want);
  }
}

TEST_CASE("deepspeed keys: super_offload, a key of 0.19 that 0.16 lacks, is absent from a 0.16 config")
{
  const DeepSpeedKeyTable& t = deepspeed_key_table();
  const std::string key = "zero_optimization.offload_optimizer.super_offload";
  REQUIRE(t.at("0.19").has(key));  // offload_config.py at v0.19.5
  REQUIRE(!t.at("0.16").has(key)); // not at v0.16.9: DeepSpeed 0.16 refuses it (extra="forbid", issue 29)
  const std::string v016 = deepspeed_json(load_scenario_text(offload_scenario("0.16"), SCEN));
  CHECK(v016.find("super_offload") == std::string::npos);
  CHECK(v016.find("cpuadam_cores_perc") == std::string::npos);
  CHECK(v016.find("allgather_sequential") == std::string::npos);
  // Set away from its default, 0.19 writes it; with 0.16 the writer refuses rather than write a key 0.16 refuses.
  const std::string set = "    offload_optimizer: {device: cpu, super_offload: true}\n";
  auto with = [&](const std::string& v) {
    return BASE + "deepspeed_version: \"" + v + "\"\ndeepspeed:\n  zero_optimization:\n    stage: 3\n" + set;
  };
  CHECK(deepspeed_json(load_scenario_text(with("0.19"), SCEN)).find("\"super_offload\": true") != std::string::npos);
  CHECK(error_of([&] { deepspeed_json(load_scenario_text(with("0.16"), SCEN)); }) ==
        "ds_config.json: zero_optimization.offload_optimizer.super_offload is not a key of DeepSpeed 0.16 (v0.16.9, " +
            t.file + "); deepspeed_version 0.16 refuses it: drop it or choose a version that has it");
}

TEST_CASE("deepspeed keys: values away from the default are written, in the version's names")
{
  const std::string json = deepspeed_json(load_scenario_text(offload_scenario("0.19"), SCEN));
  // reduce_bucket_size auto = hidden^2 (transformers' trainer_config_finalize); test-gpt's hidden is 1024.
  CHECK(json.find("\"reduce_bucket_size\": 1048576") != std::string::npos);
  CHECK(json.find("\"nvme_path\": \"/local_nvme\"") != std::string::npos);
  // aio.intra_op_parallelism is thread_count in 0.14 and 0.15 (swap_tensor/constants.py at v0.14.5, v0.15.4).
  const std::string aio = "deepspeed:\n  aio: {intra_op_parallelism: 4}\n";
  CHECK(deepspeed_json(load_scenario_text(BASE + "deepspeed_version: \"0.14\"\n" + aio, SCEN))
            .find("\"thread_count\": 4") != std::string::npos);
  CHECK(deepspeed_json(load_scenario_text(BASE + "deepspeed_version: \"0.16\"\n" + aio, SCEN))
            .find("\"intra_op_parallelism\": 4") != std::string::npos);
}

TEST_CASE("deepspeed keys: the written ds_config.json and scenario load back to the same scenario")
{
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "ds-config-round-trip";
  fs::create_directories(dir);
  for (const std::string& v : VERSIONS) {
    CAPTURE(v);
    spec::Scenario s = load_scenario_text(offload_scenario(v), SCEN);
    std::ofstream(dir / "ds_config.json") << deepspeed_json(s);
    std::ofstream(dir / "scenario.yaml") << resolved_yaml(s, "ds_config.json");
    const spec::Scenario back = load_scenario((dir / "scenario.yaml").string());
    // resolved_yaml writes every resolved value: equal texts are equal scenarios (and equal simulated results).
    CHECK(resolved_yaml(back) == resolved_yaml(s));
    CHECK(back.deepspeed_version_requested == v);
  }
  fs::remove_all(dir);
}

TEST_CASE("deepspeed keys: 0.14 and 0.15 default every key zerosim models as 0.16 does")
{
  // The ground of modelling them as 0.16 (docs/config.md "deepspeed_version"): every key of 0.16.9's table that the
  // 0.14/0.15 table also has carries the same default there, for the blocks zerosim reads.
  const DeepSpeedKeyTable& t = deepspeed_key_table();
  for (const std::string old : {"0.14", "0.15"})
    for (const auto& [path, key] : t.at("0.16").keys) {
      const bool modelled = path.starts_with("zero_optimization.") || path.starts_with("aio.") ||
                            path.starts_with("activation_checkpointing.") || path == "gradient_clipping" ||
                            path == "prescale_gradients" || path == "gradient_predivide_factor";
      if (!modelled || !t.at(old).has(path))
        continue;
      CAPTURE(old);
      CAPTURE(path);
      CHECK(t.at(old).keys.at(path).default_text == key.default_text);
    }
}

TEST_CASE("deepspeed_version: 0.14 to 0.19, modelled as the nearest modelled version at or below")
{
  const std::map<std::string, std::string> modelled = {{"0.14", "0.16"}, {"0.15", "0.16"}, {"0.16", "0.16"},
                                                       {"0.17", "0.16"}, {"0.18", "0.16"}, {"0.19", "0.19"}};
  for (const auto& [requested, as] : modelled) {
    const spec::Scenario s = load_scenario_text(BASE + "deepspeed_version: \"" + requested + "\"\n", SCEN);
    CHECK(s.deepspeed_version_requested == requested);
    CHECK(s.deepspeed_version == as);
    const bool warned = std::any_of(s.warnings.begin(), s.warnings.end(),
                                    [](const std::string& w) { return w.starts_with("deepspeed_version: "); });
    CHECK(warned == (requested == "0.14" || requested == "0.15"));
  }
  CHECK(load_scenario_text(BASE, SCEN).deepspeed_version_requested == "0.19");
}

TEST_CASE("deepspeed_version: a patch version or one outside 0.14-0.19 is refused")
{
  CHECK(error_of([] { load_scenario_text(BASE + "deepspeed_version: \"0.18.9\"\n", SCEN); }) ==
        SCEN + ":9:20: deepspeed_version: give the minor version \"0.18\", not a patch version (found \"0.18.9\"): "
               "each minor version is read at its last patch tag (docs/config.md)");
  CHECK(error_of([] { load_scenario_text(BASE + "deepspeed_version: \"0.13\"\n", SCEN); }) ==
        SCEN + ":9:20: deepspeed_version: expected one of 0.19, 0.18, 0.17, 0.16, 0.15, 0.14, found \"0.13\"");
}

TEST_CASE("deepspeed keys: a .json ds_config is strict JSON, a trailing comma refused at its line and column")
{
  const std::string ds = "{\n  \"zero_optimization\": {\"stage\": 2},\n}\n";
  CHECK(error_of([&] { load_deepspeed_text(ds, DATA + "/scenarios/trailing.json", BASE + "deepspeed: x\n", SCEN); }) ==
        DATA + "/scenarios/trailing.json:3:1: not strict JSON (RFC 8259; a .json file is read as JSON, as json.load "
               "reads it): syntax error while parsing object key - unexpected '}'; expected string literal");
  // The same text in a file the scenario names.
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "ds-config-strict";
  fs::create_directories(dir);
  std::ofstream(dir / "ds.json") << ds;
  std::ofstream(dir / "s.yaml") << base_in_folder();
  CHECK(error_of([&] { load_scenario((dir / "s.yaml").string()); }) ==
        (dir / "ds.json").string() + ":3:1: not strict JSON (RFC 8259; a .json file is read as JSON, as json.load "
                                     "reads it): syntax error while parsing object key - unexpected '}'; expected "
                                     "string literal");
  fs::remove_all(dir);
}

// Issue 32: a pipeline winner's ds_config.json (zerosim recommend) carries DeepSpeed's pipeline block: `stages` the
// degree and `partition` the method (runtime/config.py get_pipeline_config; docs/recommend.md "Pipeline scenarios"),
// beside the batch keys of the pipeline (train_batch_size = micro-batch x micro-batches x dp, DeepSpeed's
// PipelineEngine assert, docs/pipeline-parallel.md §5). Every key exists in each version, and the file with the
// scenario naming it loads back to the same scenario.
TEST_CASE("deepspeed keys: a pipeline's ds_config.json has its stages and partition and loads back, every version")
{
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "ds-config-pipeline";
  fs::create_directories(dir);
  // BLOOM-176B's degrees and batch (docs/pipeline-parallel.md §8) on the test node: 384 GPUs, t 4, p 12, dp 8,
  // micro-batch 2, global batch 2048: 2048 / (2 x 8) = 128 micro-batches a step.
  const std::string bloom = "name: bloom-like\nmodel: {name: bloom, layers: 70, hidden: 14336, heads: 112, vocab: "
                            "250880, position: alibi}\ncluster: {node: test-node, nodes: 48}\ntraining:\n"
                            "  seq_len: 2048\n  micro_batch: 2\n  global_batch: 2048\n  precision: bf16\n"
                            "  activation_checkpointing: full\n  tensor_parallel: 4\n  pipeline_parallel: 12\n"
                            "  pipeline: {partition: \"type:transformer|embedding\"}\n";
  for (const std::string& v : VERSIONS) {
    CAPTURE(v);
    const spec::Scenario s = load_scenario_text(
        bloom + "deepspeed_version: \"" + v + "\"\ndeepspeed: {zero_optimization: {stage: 0}}\n", SCEN);
    const std::string json = deepspeed_json(s);
    const nlohmann::json j = nlohmann::json::parse(json);
    CHECK(j["pipeline"]["stages"] == 12);
    CHECK(j["pipeline"]["partition"] == "type:transformer|embedding");
    CHECK(j["train_batch_size"] == 2048);
    CHECK(j["train_micro_batch_size_per_gpu"] == 2);
    CHECK(j["gradient_accumulation_steps"] == 128);
    CHECK(j["zero_optimization"]["stage"] == 0);
    CHECK(j["bf16"]["enabled"] == true);
    const DeepSpeedVersionKeys& keys = deepspeed_key_table().at(v);
    for (const std::string& k : key_paths(json))
      if (!k.starts_with("pipeline.")) // DeepSpeed reads the block as a dict it updates: no key of it is refused
        CHECK_MESSAGE(keys.has(k), k);
    std::ofstream(dir / "ds_config.json") << json;
    std::ofstream(dir / "scenario.yaml") << resolved_yaml(s, "ds_config.json");
    const spec::Scenario back = load_scenario((dir / "scenario.yaml").string());
    CHECK(back.pp() == 12);
    CHECK(back.tp() == 4);
    CHECK(back.training.grad_accum == 128);
    CHECK(back.training.pipeline.partition == "type:transformer|embedding");
    CHECK(resolved_yaml(back) == resolved_yaml(s));
  }
  // An explicit split has no partition method: the block has the stages only (a partition beside layers is refused).
  const spec::Scenario split =
      load_scenario_text(bloom.substr(0, bloom.find("  pipeline: {")) +
                             "  pipeline: {layers: [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]}\ndeepspeed_version: \"0.16\"\n"
                             "deepspeed: {zero_optimization: {stage: 0}}\n",
                         SCEN);
  const nlohmann::json j = nlohmann::json::parse(deepspeed_json(split));
  CHECK(j["pipeline"] == nlohmann::json{{"stages", 12}});
  // Without a pipeline, no block.
  CHECK_FALSE(
      nlohmann::json::parse(deepspeed_json(load_scenario_text(offload_scenario("0.16"), SCEN))).contains("pipeline"));
  fs::remove_all(dir);
}
