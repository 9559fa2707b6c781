// The schema (sim/config/schema.cpp) against its users: a key's default as the table states it is what the readers
// apply and what the resolved writer writes, and docs/config.md's key reference is what `zerosim describe` prints.
#include "config/scenario_loader.hpp"
#include "config/schema.hpp"
#include "config_test_util.hpp"

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>

using namespace zerosim;
using namespace zerosim::config;
using namespace zerosim::config::test;

namespace {

/// Each key of the scenario file and the files and blocks below it, by dotted path (a table reached twice, such
/// as bfloat16's or cluster.overrides', once).
void for_each_key(const Schema& s, const std::string& prefix, std::set<const Schema*>& seen,
                  const std::function<void(const std::string&, const KeyDoc&)>& f)
{
  for (const KeyDoc& k : s.keys) {
    const std::string path = prefix.empty() ? k.key : prefix + "." + k.key;
    if (!k.child)
      f(path, k);
    else if (seen.insert(k.child).second)
      for_each_key(*k.child, path, seen, f);
  }
}

/// What a key needs around it to be read, absent and at its default: its block's required keys, a precision under
/// which it may be absent (gpu.peak.bf16) or false (bf16.enabled), or the key that follows whether it was given
/// (ddp.first_bucket_cap_mb is 1 MiB unless bucket_cap_mb is given, as in PyTorch).
std::vector<std::string> context_of(const std::string& path)
{
  const auto under = [&](const std::string& block) { return path.rfind(block + ".", 0) == 0; };
  if (under("inference"))
    return {"training.mode=inference", "inference.prompt_tokens=128"};
  if (under("cluster.node.gpu.power"))
    return {"cluster.node.gpu.power.limit=300", "cluster.node.gpu.power.tdp=400"};
  if (under("deepspeed.bf16") || path == "cluster.node.gpu.peak.bf16")
    return {"training.precision=fp32"};
  if (path == "ddp.bucket_cap_mb")
    return {"ddp.first_bucket_cap_mb=1"};
  if (under("training.pipeline")) // the block is read with pipeline stages only
    return {"training.pipeline_parallel=2"};
  return {};
}

struct Read {
  std::string resolved; ///< resolved_yaml, or the error
  std::vector<std::string> warnings;
  bool ok = false;
};

Read load_with(const std::string& path, const std::string& value)
{
  LoadOptions o;
  o.sets = context_of(path);
  o.sets.push_back(path + "=" + value);
  Read r;
  try {
    const spec::Scenario s = load_scenario_text(BASE, SCEN, o);
    r.resolved = resolved_yaml(s);
    r.warnings = s.warnings;
    r.ok = true;
  } catch (const core::InputError& e) {
    r.resolved = e.what();
  }
  return r;
}

/// The value at dotted `path` of a YAML text, or an undefined node.
YAML::Node at(const std::string& yaml, const std::string& path)
{
  YAML::Node n = YAML::Load(yaml);
  std::stringstream segs(path);
  for (std::string seg; std::getline(segs, seg, '.');) {
    if (!n.IsDefined() || !n.IsMap())
      return YAML::Node(YAML::NodeType::Undefined);
    YAML::Node next = n[seg];
    n.reset(next);
  }
  return n;
}

/// "a, b, c": a set as doctest can print it.
std::string joined(const std::set<std::string>& keys)
{
  std::string out;
  for (const std::string& k : keys)
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::string text_of(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST_SUITE("config")
{
  // For every key of every table: the scenario with the key set to its default_text (through --set, so read as YAML,
  // as the readers read it) and the scenario without the key (set to null) resolve to the same file with the same
  // warnings. A reader that applies another default than the table's fails here, whichever of the two changed, and
  // so does a resolved writer that writes the default otherwise than the value. A key that the scenario cannot lack
  // must say "required". A default_text that does not read as a value of its key is a derived default ("heads",
  // "the node's gpus"), listed here, so that a default that stops or starts being a value is a change seen in review.
  TEST_CASE("schema: every key at its stated default reads as the key absent, in the readers and the resolved file")
  {
    const std::set<std::string> derived = {
        "name",
        "model.kv_heads",
        "model.ffn_hidden",
        "model.dropout",
        "cluster.node.gpu.peak.bf16",
        "cluster.node.gpu.peak.fp16",
        "cluster.node.gpu.peak.tf32",
        "cluster.node.gpu.peak.fp32",
        "cluster.node.pcie.switch_uplink",
        "cluster.node.nics.busbw_fraction", // absent: the collectives' prior (0.96), kept as "not measured" (0)
        "cluster.node.calibration",
        "cluster.gpus_per_node",
        "cluster.network.nic_bandwidth",
        "cluster.network.nics_per_node",
        "training.micro_batch",
        "training.grad_accum",
        "training.global_batch",
        "training.total_tokens",
        "training.pipeline.layers",
        "price_per_gpu_hour",
        "deepspeed.train_batch_size",
        "deepspeed.train_micro_batch_size_per_gpu",
        "deepspeed.gradient_accumulation_steps",
        "deepspeed.zero_optimization.overlap_comm",
        "deepspeed.zero_optimization.stage3_model_persistence_threshold",
        "deepspeed.zero_optimization.model_persistence_threshold",
        "deepspeed.zero_optimization.offload_optimizer.pin_memory",
        "deepspeed.zero_optimization.offload_param.pin_memory",
        "deepspeed.zero_optimization.cpu_offload_use_pin_memory",
        "deepspeed.communication_data_type",
        "deepspeed.data_types.grad_accum_dtype",
        "deepspeed.gradient_clipping",
        "deepspeed.activation_checkpointing.number_checkpoints",
        "deepspeed.pipeline.partition",
        "fsdp.mixed_precision.param_dtype",
        "fsdp.mixed_precision.reduce_dtype",
        "fsdp.mixed_precision.buffer_dtype",
        "fsdp.reshard_after_forward",
        "ddp.first_bucket_cap_mb",
        "software.attention",
        "calibration",
        "measured.step_time",
        "measured.tflops_per_gpu",
        "measured.tflops_definition",
        "measured.peak_memory",
    };
    // Keys the resolved file leaves out at their default: aliases and deprecated spellings (it writes the key they
    // stand for), and keys it writes only away from their default.
    const std::set<std::string> unwritten = {
        "training.flash_attention",
        "training.tensor_parallel",
        "training.pipeline_parallel",
        "deepspeed.zero_optimization.prefetch_bucket_size",
        "deepspeed.zero_optimization.param_persistence_threshold",
        "deepspeed.zero_optimization.max_live_parameters",
        "deepspeed.zero_optimization.max_reuse_distance",
        "deepspeed.zero_optimization.module_granularity_threshold",
        "deepspeed.zero_optimization.use_all_reduce_for_fetch_params",
        "deepspeed.zero_optimization.allgather_sequential",
        "deepspeed.zero_optimization.cpu_offload",
        "deepspeed.zero_optimization.cpu_offload_param",
        "deepspeed.aio.thread_count",
        "deepspeed.pipeline.stages",                         // auto: the training block's degree
        "deepspeed.pipeline.activation_checkpoint_interval", // 0: the module's, nothing to write
        "measured.source",
        "software.model_code", // auto: the framework's usual code, which the absent key gives too
    };
    std::set<std::string> found_derived, found_unwritten;
    int values = 0;
    std::set<const Schema*> seen{&scenario_schema()};
    for_each_key(scenario_schema(), "", seen, [&](const std::string& path, const KeyDoc& k) {
      if (k.use == KeyUse::IGNORED || path == "sweep")
        return;
      if (k.use == KeyUse::NOT_YET && k.default_text == "none")
        return; // a block of a feature not built yet: refused whenever given (errors_test.cpp "not modelled yet")
      CAPTURE(path);
      CAPTURE(k.default_text);
      const Read absent = load_with(path, "null");
      if (!absent.ok) {
        CHECK(k.default_text.rfind("required", 0) == 0);
        return;
      }
      const Read given = load_with(path, k.default_text);
      if (!given.ok || path == "name") { // "the file name" is a valid name, but not the default's value
        found_derived.insert(path);
        return;
      }
      ++values;
      CHECK(given.resolved == absent.resolved);
      CHECK(given.warnings == absent.warnings);
      if (!k.opaque && !at(absent.resolved, path).IsDefined()) // read into the spec, so written
        found_unwritten.insert(path);
    });
    CHECK(joined(found_derived) == joined(derived));
    CHECK(joined(found_unwritten) == joined(unwritten));
    CHECK(values > 100); // the walk reached the tables
  }

  // A default is not checked against other keys as a given value is: cpu.reserved's 5% of a memory that rounds to
  // 0 bytes is 0 bytes, where a given reserved must be below cpu.memory.
  TEST_CASE("schema: a default is read without the checks a given value gets against other keys")
  {
    LoadOptions o;
    o.sets = {"cluster.node.cpu.memory=0.4 B"};
    CHECK(load_scenario_text(BASE, SCEN, o).cluster.node.cpu.reserved_bytes == 0);
    o.sets.push_back("cluster.node.cpu.reserved=0 B");
    CHECK(error_of([&] { load_scenario_text(BASE, SCEN, o); }).find("reserved: expected less than cpu.memory") !=
          std::string::npos);
  }

  // The spec's member initialisers are the defaults of scenarios built in code: a scenario whose blocks are reset to
  // them resolves as the file that leaves those keys out, so they cannot drift from the tables either.
  TEST_CASE("schema: the spec's member defaults are the tables' defaults")
  {
    const auto same_as_coded = [](const std::string& text, const std::function<void(spec::Scenario&)>& reset) {
      const spec::Scenario loaded = load_scenario_text(text, SCEN);
      spec::Scenario coded = loaded;
      reset(coded);
      CHECK(resolved_yaml(coded) == resolved_yaml(loaded));
    };
    // BASE gives the training block's batch keys and no framework block: DeepSpeed with every default.
    same_as_coded(BASE, [](spec::Scenario& s) {
      spec::TrainingSpec t;
      t.seq_len = s.training.seq_len;
      t.micro_batch = s.training.micro_batch;
      t.grad_accum = s.training.grad_accum;
      t.global_batch = s.training.global_batch;
      s.training = t;
      s.deepspeed = spec::DeepSpeedSpec{};
      s.software = spec::SoftwareSpec{};
      s.cluster.network.oversubscription = spec::NetworkSpec{}.oversubscription;
      // test-gpt gives tied_embeddings, position and max_position, and leaves out ffn, norm, bias and loss.
      spec::ModelSpec m = s.model;
      m.ffn = spec::ModelSpec{}.ffn;
      m.norm = spec::ModelSpec{}.norm;
      m.bias = spec::ModelSpec{}.bias;
      m.loss = spec::ModelSpec{}.loss;
      s.model = m;
    });
    same_as_coded(BASE + "fsdp: {}\n", [](spec::Scenario& s) { s.fsdp = spec::FsdpSpec{}; });
    same_as_coded(BASE + "ddp: {}\n", [](spec::Scenario& s) { s.ddp = spec::DdpSpec{}; });
    const std::string inference = "name: base\nmodel: test-gpt\ncluster: {node: test-node}\n"
                                  "training: {seq_len: 1024, mode: inference}\ninference: {prompt_tokens: 128}\n";
    same_as_coded(inference, [](spec::Scenario& s) {
      spec::InferenceSpec i;
      i.prompt_tokens = s.inference.prompt_tokens;
      s.inference = i;
    });
  }

  // docs/config.md's key reference is `zerosim describe model`, `node` and `scenario` verbatim, so the page cannot
  // drift from the tables; tools/update-config-reference.sh rewrites it from a build.
  TEST_CASE("schema: docs/config.md's key reference is what describe prints")
  {
    const std::string doc = text_of(ZEROSIM_SOURCE_DIR "/docs/config.md");
    const std::size_t section = doc.find("\n## Key reference (`zerosim describe`)\n");
    REQUIRE(section != std::string::npos);
    std::vector<std::string> blocks; // the section's fenced blocks, in order
    bool inside = false;
    std::istringstream lines(doc.substr(section));
    for (std::string line; std::getline(lines, line);) {
      if (line == "```") {
        if (!inside)
          blocks.emplace_back();
        inside = !inside;
      } else if (inside) {
        blocks.back() += line + "\n";
      }
    }
    CHECK_FALSE(inside);
    REQUIRE(blocks.size() == 3);
    CHECK(blocks[0] == describe("model"));
    CHECK(blocks[1] == describe("node"));
    CHECK(blocks[2] == describe("scenario"));
  }
}
