// The fsdp_settings.py `zerosim recommend` writes (sweep::fsdp_snippet) against the FSDP names each torch release
// accepts: data/torch_fsdp_arguments.csv, read from torch's own files of each release (Debian's python3-torch
// 1.13.1+dfsg-4, 2.6.0+dfsg-7, 2.14.1+dfsg-1) by tools/torch_fsdp_arguments.py (its own test:
// tests/tools/torch_fsdp_arguments_test.py). Where each expected value comes from is said beside it.
#include "config/scenario_loader.hpp"
#include "config/torch_fsdp_arguments.hpp"
#include "core/error.hpp"
#include "sweep/recommend.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>

using namespace zerosim;
using namespace zerosim::config;

namespace {

namespace fs = std::filesystem;

const std::string FSDP2 = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama3-8b-fsdp-8xh100.yaml";

std::string error_of(const std::function<void()>& f)
{
  try {
    f();
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

/// The FSDP2 scenario less its reshard_after_forward line: an FSDP1 scenario (in models/'s and topologies/'s tree,
/// so that its model and node names resolve as the original's).
std::string fsdp1_scenario()
{
  const fs::path file = fs::path(ZEROSIM_SOURCE_DIR) / "scenarios" / "llama3-8b-fsdp-8xh100.yaml";
  std::ifstream in(file);
  std::ostringstream kept;
  for (std::string line; std::getline(in, line);)
    if (!line.starts_with("  reshard_after_forward:"))
      kept << line << "\n";
  const fs::path dir = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "fsdp-arguments" / "scenarios";
  fs::create_directories(dir);
  const fs::path out = dir / "llama3-8b-fsdp1.yaml";
  std::ofstream(out) << kept.str();
  return out.string();
}

spec::Scenario load(const std::string& file, const std::vector<std::string>& sets)
{
  LoadOptions lo;
  lo.sets = sets;
  lo.data_dir = ZEROSIM_SOURCE_DIR;
  return load_scenario(file, lo);
}

/// The names a written fsdp_settings.py uses, read back from its text: the names of its `from torch.distributed.fsdp
/// import` line, the keywords of `fsdp_kwargs = dict(...)` (of fully_shard under "# FSDP2", else of
/// FullyShardedDataParallel), `ShardingStrategy.MEMBER` and `CPUOffload(FIELD=`.
std::vector<TorchFsdpName> names_in(const std::string& py)
{
  std::vector<TorchFsdpName> out;
  const std::string callable = py.find("# FSDP2") != std::string::npos ? "fully_shard" : "FullyShardedDataParallel";
  std::istringstream in(py);
  bool in_kwargs = false;
  const std::regex import_line(R"(^from (torch\.distributed\.fsdp) import (.*)$)");
  const std::regex kwarg(R"(^    (\w+)=)");
  const std::regex member(R"(ShardingStrategy\.(\w+))");
  const std::regex field(R"(CPUOffload\((\w+)=)");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, import_line)) {
      std::istringstream names(m[2].str());
      for (std::string n; std::getline(names, n, ',');)
        out.emplace_back(m[1].str(), n.substr(n.find_first_not_of(' ')));
    }
    if (line == "fsdp_kwargs = dict(")
      in_kwargs = true;
    else if (line == ")")
      in_kwargs = false;
    else if (in_kwargs && std::regex_search(line, m, kwarg))
      out.emplace_back(callable, m[1].str());
    if (std::regex_search(line, m, member))
      out.emplace_back("ShardingStrategy", m[1].str());
    if (std::regex_search(line, m, field))
      out.emplace_back("CPUOffload", m[1].str());
  }
  return out;
}

sweep::Candidate winner()
{
  sweep::Candidate c;
  c.gpus = 8;
  c.sharding = "FSDP FULL_SHARD";
  c.offload = "none";
  c.micro_batch = 1;
  c.grad_accum = 2;
  return c;
}

} // namespace

TEST_SUITE("sweep")
{
  TEST_CASE("torch fsdp arguments: the shipped table has 1.13, 2.6 and 2.14, each from its release's files")
  {
    const TorchFsdpTable& t = torch_fsdp_table();
    // The script's VERSIONS: the torch releases Debian ships as python3-torch (bookworm, trixie, sid).
    REQUIRE(t.listed() == "1.13, 2.6, 2.14");
    CHECK(t.versions.at("1.13").release == "v1.13.1");
    CHECK(t.versions.at("2.6").release == "v2.6.0");
    CHECK(t.versions.at("2.14").release == "v2.14.1");
    CHECK(t.versions.at("2.6").origin.starts_with("Debian python3-torch 2.6.0+dfsg-7 amd64 sha256 "));
    CHECK(t.script_sha256.size() == 64);
    // fully_sharded_data_parallel.py: `limit_all_gathers: bool = False` at v1.13.1 (line 987), `= True` at v2.6.0
    // (line 427): the default changed between them.
    CHECK(t.versions.at("1.13").arguments.at({"FullyShardedDataParallel", "limit_all_gathers"}).default_text ==
          "False");
    CHECK(t.versions.at("2.6").arguments.at({"FullyShardedDataParallel", "limit_all_gathers"}).default_text == "True");
    // ShardingStrategy at v1.13.1 (fully_sharded_data_parallel.py:158-160): FULL_SHARD, SHARD_GRAD_OP, NO_SHARD only;
    // HYBRID_SHARD is in v2.6.0's api.py:68.
    CHECK(!t.versions.at("1.13").has({"ShardingStrategy", "HYBRID_SHARD"}));
    CHECK(t.versions.at("2.6").has({"ShardingStrategy", "HYBRID_SHARD"}));
    // fully_shard: none at v1.13.1; reshard_after_forward defaults to True at v2.6.0 (_fully_shard.py:55), None at
    // v2.14.1 (_fully_shard.py:102, the definition after two @overload stubs).
    CHECK(!t.versions.at("1.13").has({"torch.distributed.fsdp", "fully_shard"}));
    CHECK(t.versions.at("2.6").arguments.at({"fully_shard", "reshard_after_forward"}).default_text == "True");
    CHECK(t.versions.at("2.14").arguments.at({"fully_shard", "reshard_after_forward"}).default_text == "None");
  }

  TEST_CASE("torch fsdp arguments: software.torch is checked as the nearest release read at or below it")
  {
    const TorchFsdpTable& t = torch_fsdp_table();
    CHECK(t.for_torch("1.12") == nullptr);
    const std::map<std::string, std::string> as = {{"1.13", "1.13"}, {"2.0", "1.13"}, {"2.5", "1.13"},
                                                   {"2.6", "2.6"},   {"2.7", "2.6"},  {"2.13", "2.6"},
                                                   {"2.14", "2.14"}, {"3.0", "2.14"}};
    for (const auto& [torch, version] : as) {
      CAPTURE(torch);
      REQUIRE(t.for_torch(torch) != nullptr);
      CHECK(t.for_torch(torch)->version == version);
    }
  }

  TEST_CASE("torch fsdp arguments: a malformed table is refused with its file and line")
  {
    const std::string file = std::string(ZEROSIM_BINARY_DIR) + "/tests-tmp-bad-torch-fsdp.csv";
    std::ofstream(file) << "# comment\nversion,release,origin,callable,argument,default,source\n"
                           "2.6,v2.6.0,x,CPUOffload,offload_params,False,a.py:1\n"
                           "2.6,v2.6.1,x,CPUOffload,other,False,a.py:2\n";
    CHECK(error_of([&] { read_torch_fsdp_table(file); }) ==
          file + ":4: version 2.6 is read from v2.6.0 (x) on an earlier line, found v2.6.1 (x)");
    std::ofstream(file) << "version,release,origin,callable,argument,default,source\n2.x,v,x,a,b,,s\n";
    CHECK(error_of([&] { read_torch_fsdp_table(file); }) ==
          file + ":2: expected a torch version major.minor (\"2.6\"), found \"2.x\"");
    fs::remove(file);
  }

  TEST_CASE("torch fsdp arguments: every name of the written fsdp_settings.py exists in its torch, for every version")
  {
    const TorchFsdpTable& t = torch_fsdp_table();
    const std::string fsdp1 = fsdp1_scenario();
    int checked = 0;
    for (const auto& [version, entry] : t.versions)
      for (const std::string offload : {"false", "true"}) {
        std::vector<std::pair<std::string, std::vector<std::string>>> runs;
        for (const std::string strategy : {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD"})
          if (entry.has({"ShardingStrategy", strategy}))
            runs.push_back({fsdp1, {"fsdp.sharding_strategy=" + strategy}});
        if (entry.has({"torch.distributed.fsdp", "fully_shard"}))
          for (const std::string reshard : {"true", "false"})
            runs.push_back({FSDP2, {"fsdp.reshard_after_forward=" + reshard}});
        for (auto& [file, sets] : runs) {
          sets.push_back("software.torch=" + version);
          sets.push_back("fsdp.cpu_offload=" + offload);
          CAPTURE(version);
          CAPTURE(sets.front());
          const std::string py = sweep::fsdp_snippet(winner(), load(file, sets));
          const std::vector<TorchFsdpName> names = names_in(py);
          // FSDP1: 3 imports + 3 keywords + the member + the field; FSDP2: 3 imports + 2 keywords.
          CHECK(names.size() == (file == FSDP2 ? 5u : 8u));
          for (const TorchFsdpName& n : names) {
            CAPTURE(n.first);
            CAPTURE(n.second);
            CHECK(entry.has(n));
            ++checked;
          }
        }
      }
    // 1.13: 3 strategies x 2 offloads x 8 names; 2.6 and 2.14: (4 x 8 + 2 x 5) x 2 offloads each.
    CHECK(checked == 3 * 2 * 8 + 2 * (4 * 8 + 2 * 5) * 2);
  }

  TEST_CASE("torch fsdp arguments: what torch 1.13 lacks (HYBRID_SHARD, fully_shard) is not searched or refused")
  {
    const TorchFsdpTable& t = torch_fsdp_table();
    const std::string fsdp1 = fsdp1_scenario();
    // The writer refuses a name the release lacks rather than write a file torch 1.13 fails on.
    CHECK(error_of([&] {
            sweep::fsdp_snippet(winner(), load(fsdp1, {"software.torch=2.5", "fsdp.sharding_strategy=HYBRID_SHARD"}));
          }) == "fsdp_settings.py for " + fsdp1 +
                    ": ShardingStrategy.HYBRID_SHARD does not exist in torch v1.13.1, the release read for "
                    "software.torch 2.5 (the nearest at or below it of 1.13, 2.6, 2.14; " +
                    t.file + "): choose a software.torch that has it");
    // The search leaves HYBRID_SHARD out for torch 1.13 (and for 2.0-2.5, checked as 1.13), on 2 nodes.
    auto shardings = [&](const std::string& torch) {
      sweep::RecommendOptions o;
      o.scenario = fsdp1;
      o.sets = {"software.torch=" + torch, "cluster.nodes=2", "training.micro_batch=1"}; // 16 sequences, 16 GPUs
      std::vector<std::string> out;
      for (const sweep::Candidate& c : sweep::candidates(o))
        if (std::find(out.begin(), out.end(), c.sharding) == out.end())
          out.push_back(c.sharding);
      return out;
    };
    CHECK(shardings("1.13") == std::vector<std::string>{"FSDP FULL_SHARD", "FSDP SHARD_GRAD_OP", "FSDP NO_SHARD"});
    CHECK(shardings("2.6") ==
          std::vector<std::string>{"FSDP FULL_SHARD", "FSDP SHARD_GRAD_OP", "FSDP HYBRID_SHARD", "FSDP NO_SHARD"});
    // An FSDP2 scenario on a torch whose release read has no fully_shard is refused before any simulation.
    sweep::RecommendOptions o;
    o.scenario = FSDP2;
    o.sets = {"software.torch=2.5"};
    CHECK(error_of([&] { sweep::candidates(o); }) ==
          "recommend: fsdp_settings.py for " + FSDP2 +
              ": torch.distributed.fsdp.fully_shard does not exist in torch v1.13.1, the release read for "
              "software.torch 2.5 (the nearest at or below it of 1.13, 2.6, 2.14; " +
              t.file + "): choose a software.torch that has it");
    o.sets = {"software.torch=1.12"};
    CHECK(error_of([&] { sweep::candidates(o); }) ==
          "recommend: fsdp_settings.py for " + FSDP2 +
              ": software.torch 1.12 is older than every torch release whose FSDP arguments were read (1.13, 2.6, "
              "2.14; " +
              t.file + "): expected software.torch 1.13 or later");
  }
}
