// report/run_report: the result JSON against the contract of scenario-format.md "Results" (every key, in
// order), the summary for people, and the Chrome trace (valid JSON, one thread per stream and per track).
#include "report/run_report.hpp"
#include "run/run_scenario.hpp"

#include "core/error.hpp"
#include "schedule/step_graph.hpp"
#include "timeline_fixture.hpp"

#include <doctest/doctest.h>

#include <cctype>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace zerosim;
using spec::MemCategory;
using spec::Phase;
using spec::Stream;
using spec::TaskKind;

namespace {

using test::add;
using test::buffer;
using test::sequential_timeline;
using test::span;

constexpr std::int64_t GiB = 1024LL * 1024 * 1024;

// ---- A small strict JSON reader (RFC 8259 grammar), to check that what we write parses and to read it back ----

struct Value {
  enum class Type { NUL, BOOL, NUMBER, STRING, ARRAY, OBJECT } type = Type::NUL;
  bool b = false;
  double number = 0;
  std::string text;
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> members; ///< in document order

  const Value& operator[](const std::string& key) const
  {
    for (const auto& [k, v] : members)
      if (k == key)
        return v;
    throw std::runtime_error("no key '" + key + "'");
  }
  std::vector<std::string> keys() const
  {
    std::vector<std::string> k;
    for (const auto& m : members)
      k.push_back(m.first);
    return k;
  }
};

class Reader {
public:
  explicit Reader(const std::string& s) : s_(s) {}

  Value document()
  {
    Value v = value();
    space();
    if (i_ != s_.size())
      fail("trailing characters");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& what) const
  {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(i_));
  }
  void space()
  {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  void expect(char c)
  {
    space();
    if (i_ >= s_.size() || s_[i_] != c)
      fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool literal(const char* word)
  {
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) == 0) {
      i_ += w.size();
      return true;
    }
    return false;
  }
  std::string string()
  {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size())
        fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"')
        return out;
      if (static_cast<unsigned char>(c) < 0x20)
        fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size())
        fail("unterminated escape");
      const char e = s_[i_++];
      if (e == 'u') {
        for (int k = 0; k < 4; ++k)
          if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_++])))
            fail("bad \\u escape");
        out += '?';
      } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
        out += e;
      } else {
        fail("bad escape");
      }
    }
  }
  double number()
  {
    const size_t start = i_;
    if (s_[i_] == '-')
      ++i_;
    auto digits = [&] {
      const size_t d = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])))
        ++i_;
      if (i_ == d)
        fail("digits expected");
    };
    if (i_ < s_.size() && s_[i_] == '0')
      ++i_;
    else
      digits();
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-'))
        ++i_;
      digits();
    }
    return std::stod(s_.substr(start, i_ - start));
  }
  Value value()
  {
    space();
    if (i_ >= s_.size())
      fail("value expected");
    Value v;
    const char c = s_[i_];
    if (c == '{') {
      v.type = Value::Type::OBJECT;
      ++i_;
      space();
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return v;
      }
      while (true) {
        space();
        std::string k = string();
        expect(':');
        v.members.emplace_back(std::move(k), value());
        space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = Value::Type::ARRAY;
      ++i_;
      space();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return v;
      }
      while (true) {
        v.items.push_back(value());
        space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type = Value::Type::STRING;
      v.text = string();
      return v;
    }
    if (literal("true")) {
      v.type = Value::Type::BOOL;
      v.b = true;
      return v;
    }
    if (literal("false")) {
      v.type = Value::Type::BOOL;
      return v;
    }
    if (literal("null"))
      return v;
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      v.type = Value::Type::NUMBER;
      v.number = number();
      return v;
    }
    fail("unexpected character");
  }

  const std::string& s_;
  size_t i_ = 0;
};

Value parse(const std::string& text)
{
  return Reader(text).document();
}

// ---- A hand-built run ----

/// 1 node x 2 GPUs, micro-batch 2 x seq 1024, grad_accum 4 (global batch 16), A100 bf16 peak 312 TFLOPS
/// (NVIDIA A100 datasheet).
spec::Scenario two_gpus()
{
  spec::Scenario s;
  s.name = "hand-built \"quoted\"";
  s.model.name = "toy";
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = 2;
  s.cluster.node.gpus = 2;
  s.cluster.node.gpu.model = "A100-SXM4-80GB";
  s.cluster.node.gpu.memory_bytes = 80 * GiB;
  s.cluster.node.gpu.peak_bf16_flops = 312e12;
  s.cluster.node.cpu.memory_bytes = 1024 * GiB;
  s.training.seq_len = 1024;
  s.training.micro_batch = 2;
  s.training.grad_accum = 4;
  s.training.global_batch = 16;
  s.warnings = {"deepspeed.zero_optimization.zenflow: not modelled"};
  return s;
}

workload::Workload flops_only()
{
  workload::Workload w;
  w.params = 123456;
  w.model_flops = 1e12;
  w.hardware_flops = 1.25e12;
  return w;
}

/// Rank `rank` uses three streams: compute (fwd, bwd), reduction (ar) and host (adam).
engine::RankTimeline rank_timeline(int rank)
{
  engine::RankTimeline r;
  r.rank = rank;
  r.local = rank;
  spec::Buffer p;
  p.name = "params";
  p.category = MemCategory::PARAMS;
  p.bytes = 1000;
  r.graph.resident = {r.graph.add_buffer(p)};
  add(r, "fwd", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0.0, 0.5);
  add(r, "bwd", TaskKind::COMPUTE, Phase::BACKWARD, Stream::COMPUTE, 0.5, 1.5);
  add(r, "ar", TaskKind::COLLECTIVE, Phase::GRAD_REDUCE, Stream::REDUCTION, 1.0, 1.75);
  add(r, "adam", TaskKind::CPU_COMPUTE, Phase::OPTIMIZER, Stream::HOST, 1.75, 2.0);
  return r;
}

/// Two ranks; three resource tracks on node0 (PCIe H2D, NIC0 tx, CPU): the NIC's two flows overlap.
engine::Timeline timeline()
{
  engine::Timeline t;
  t.ranks.push_back(rank_timeline(0));
  t.ranks.push_back(rank_timeline(1));
  t.step_time_s = 2.0;
  t.replay = "full";
  t.network_model = "SimGrid LV08, TCP corrections off";
  t.flows = 7;
  t.activities = 11;
  t.tracks = {{"node0", "PCIe gpu0 H2D"}, {"node0", "NIC0 tx"}, {"node0", "CPU"}};
  t.intervals = {{0, 1.0, 1.25, "ar"}, {1, 1.0, 1.5, "ar"}, {1, 1.25, 1.75, "ar (rank 1)"}, {2, 1.75, 2.0, "adam"}};
  return t;
}

/// The rest of the summary's line "  KEY   rest", without the padding between them ("" if there is none).
std::string line_of(const std::string& text, const std::string& key)
{
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("  " + key + " ", 0) == 0) {
      const size_t rest = line.find_first_not_of(' ', key.size() + 2);
      return rest == std::string::npos ? "" : line.substr(rest);
    }
  return "";
}

const std::vector<std::string> CONTRACT_KEYS = {"scenario",
                                                "gpus",
                                                "dp",
                                                "params",
                                                "step_time_s",
                                                "micro_steps",
                                                "tokens_per_s",
                                                "samples_per_s",
                                                "tflops_per_gpu",
                                                "mfu",
                                                "hfu",
                                                "peak_memory_bytes",
                                                "memory_breakdown_bytes",
                                                "fits",
                                                "fit_by_tier",
                                                "shortfall_bytes",
                                                "time_breakdown_s",
                                                "time_to_train_s",
                                                "cost",
                                                "warnings",
                                                "meta"};

/// A 2-block GPT (h 512, 8 heads, ffn 2048, vocab 5000, learned positions 256) on 1 node x 2 GPUs, bf16 AdamW,
/// sequence 256, micro-batch 8, stage 0 (as tests/unit/memory/analyze_test.cpp), with `gpu_memory` per GPU.
spec::Scenario small_gpt(std::int64_t gpu_memory)
{
  spec::Scenario s = two_gpus();
  s.name = "small-gpt";
  auto& m = s.model;
  m.name = "gpt-small";
  m.layers = 2;
  m.hidden = 512;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 2048;
  m.vocab = 5000;
  m.max_position = 256;
  s.cluster.node.gpu.memory_bytes = gpu_memory;
  s.training.seq_len = 256;
  s.training.micro_batch = 8;
  s.training.grad_accum = 1;
  s.training.global_batch = 16;
  s.warnings.clear();
  return s;
}

/// What run::run_scenario returns, for a hand-made timeline: its metrics and, when it does not fit, the ladder.
run::RunResult assemble(const spec::Scenario& s, const workload::Workload& w, const engine::Timeline& t)
{
  run::RunResult r{w, t, metrics::compute_metrics(s, w, t), {}};
  r.ladder = run::ladder_if_unfit(s, r.metrics);
  return r;
}

} // namespace

TEST_SUITE("report")
{
  TEST_CASE("run JSON: every contract key of scenario-format.md, in its order, then zerosim's own")
  {
    const auto s = two_gpus();
    const auto t = timeline();
    const auto m = metrics::compute_metrics(s, flops_only(), t);
    const Value j = parse(report::run_json(s, assemble(s, flops_only(), t)).dump());
    const auto keys = j.keys();
    REQUIRE(keys.size() > CONTRACT_KEYS.size());
    CHECK(std::vector<std::string>(keys.begin(), keys.begin() + static_cast<long>(CONTRACT_KEYS.size())) ==
          CONTRACT_KEYS);
    CHECK(std::vector<std::string>(keys.begin() + static_cast<long>(CONTRACT_KEYS.size()), keys.end()) ==
          std::vector<std::string>{"accuracy", "rank", "peak_task", "peak_time_s", "peak_memory_device_time_bytes",
                                   "peak_task_device_time", "capacity_bytes", "memory_model_bytes",
                                   "peak_flops_per_gpu", "simulation"});
    CHECK(j["tflops_per_gpu"].keys() == std::vector<std::string>{"model", "hardware"});
    // accuracy: the calibration's leave-one-source-out band of the scenario's group (docs/calibration.md §4).
    CHECK(j["accuracy"].keys() ==
          std::vector<std::string>{"group", "loso_median_abs_error", "loso_p90_abs_error", "rows"});
    CHECK(j["peak_memory_bytes"].keys() == std::vector<std::string>{"gpu", "gpu_reserved", "gpu_device", "cpu_per_node",
                                                                    "cpu_pinned_per_node", "nvme_per_node"});
    CHECK(j["memory_breakdown_bytes"].keys() ==
          std::vector<std::string>{"params", "grads", "optimizer", "activations", "buffers", "other"});
    CHECK(j["fit_by_tier"].keys() == std::vector<std::string>{"gpu", "cpu", "nvme"});
    CHECK(j["time_breakdown_s"].keys() ==
          std::vector<std::string>{"compute", "optimizer", "exposed_comm", "exposed_pcie", "exposed_nvme", "idle"});
    CHECK(j["cost"].keys() == std::vector<std::string>{"per_step", "to_train"});
    CHECK(j["meta"].keys() == std::vector<std::string>{"zerosim_version", "schema_version", "simgrid_version",
                                                       "network_model", "deepspeed_version", "software", "kernel_data",
                                                       "calibration", "replay"});
    // meta.calibration: the profile's path ("none" for the priors alone), its hash and how many parameters it sets.
    CHECK(j["meta"]["calibration"].keys() == std::vector<std::string>{"path", "hash", "parameters"});
  }

  TEST_CASE("run JSON: the values are the metrics' (and null where nothing was asked)")
  {
    const auto s = two_gpus();
    const auto t = timeline();
    const auto m = metrics::compute_metrics(s, flops_only(), t);
    const Value j = parse(report::run_json(s, assemble(s, flops_only(), t)).dump());
    CHECK(j["scenario"].text == "hand-built \"quoted\"");
    CHECK(j["gpus"].number == 2);
    CHECK(j["dp"].number == 2);
    CHECK(j["params"].number == 123456);
    CHECK(j["step_time_s"].number == 2.0);
    CHECK(j["micro_steps"].number == 4);
    // 16 x 1024 / 2 tokens/s, 16 / 2 samples/s; 1e12 x 4 / 2 / 1e12 = 2 model TFLOPs, 2.5 hardware
    CHECK(j["tokens_per_s"].number == doctest::Approx(8192));
    CHECK(j["samples_per_s"].number == doctest::Approx(8));
    CHECK(j["tflops_per_gpu"]["model"].number == doctest::Approx(2));
    CHECK(j["tflops_per_gpu"]["hardware"].number == doctest::Approx(2.5));
    CHECK(j["mfu"].number == doctest::Approx(2e12 / 312e12));
    CHECK(j["hfu"].number == doctest::Approx(2.5e12 / 312e12));
    // memory: the resident 1000 B only
    CHECK(j["peak_memory_bytes"]["gpu"].number == 1000);
    CHECK(j["memory_breakdown_bytes"]["params"].number == 1000);
    CHECK(j["fits"].b);
    CHECK(j["shortfall_bytes"].number == 0);
    // breakdown: compute [0, 1.5], exposed comm [1.5, 1.75], optimizer [1.75, 2.0]; sums to the step
    const auto& b = j["time_breakdown_s"];
    CHECK(b["compute"].number == 1.5);
    CHECK(b["exposed_comm"].number == 0.25);
    CHECK(b["optimizer"].number == 0.25);
    CHECK(b["idle"].number == 0);
    CHECK(j["time_to_train_s"].type == Value::Type::NUL);
    CHECK(j["cost"]["per_step"].type == Value::Type::NUL);
    CHECK(j["cost"]["to_train"].type == Value::Type::NUL);
    REQUIRE(j["warnings"].items.size() == 1);
    CHECK(j["warnings"].items[0].text == s.warnings[0]);
    CHECK(j["meta"]["network_model"].text == t.network_model);
    CHECK(j["meta"]["schema_version"].number == 1);
    CHECK(j["meta"]["replay"].text == "full");
    CHECK(j["simulation"]["flows"].number == 7);
    CHECK(j["peak_flops_per_gpu"].number == 312e12);
  }

  TEST_CASE("summary: the figures, the breakdown with percentages, the replay and the warnings")
  {
    auto s = two_gpus();
    s.price_per_gpu_hour = 2.0;
    s.training.total_tokens = 8192.0 * 3600;
    const auto t = timeline();
    const auto m = metrics::compute_metrics(s, flops_only(), t);
    std::ostringstream out;
    report::write_run_summary(out, s, assemble(s, flops_only(), t));
    const std::string text = out.str();
    CAPTURE(text);
    CHECK(text.rfind(s.name, 0) == 0); // it fits: the name comes first
    CHECK(text.find("DOES NOT FIT") == std::string::npos);
    CHECK(text.find("2.000 s  (4 micro-steps)") != std::string::npos);
    CHECK(text.find("8192.0 tokens/s, 8.000 samples/s") != std::string::npos);
    CHECK(text.find("model 2.0, hardware 2.5") != std::string::npos);
    // MFU 2 / 312 = 0.64 %, HFU 2.5 / 312 = 0.80 %
    CHECK(text.find("0.6 % / 0.8 %") != std::string::npos);
    // compute 1.5 s of 2 = 75 %, exposed_comm and optimizer 0.25 s = 12.5 % each, nothing else
    CHECK(line_of(text, "compute") == "1.5000 s   75.0 %");
    CHECK(line_of(text, "optimizer") == "0.2500 s   12.5 %");
    CHECK(line_of(text, "exposed_comm") == "0.2500 s   12.5 %");
    CHECK(line_of(text, "idle") == "0.0000 s    0.0 %");
    // time to train 3600 s = 0.04 days; cost 2 x 2 x 2 / 3600 per step, 4 to train
    CHECK(text.find("3600 s (0.04 days)") != std::string::npos);
    CHECK(text.find("0.002222 per step, 4 to train") != std::string::npos);
    CHECK(text.find("Replay: full, 2 simulated ranks") != std::string::npos);
    CHECK(text.find(s.warnings[0]) != std::string::npos);
  }

  TEST_CASE("summary and JSON: when it does not fit, the verdict comes first and the ladder's answer is given")
  {
    // One byte less than what cannot be released (rounded live blocks + CUDA context + NCCL buffers): the
    // verdict is "short by 1 B" (as tests/unit/memory/analyze_test.cpp); rung 1, micro-batch 1, fits.
    // The old reserved rule (allocator mechanism off), whose floor is exact: this tests the report, not the allocator.
    auto with_rule = [](spec::Scenario x) {
      x.mechanisms.allocator = false;
      return x;
    };
    const auto roomy = memory::analyze_memory(with_rule(small_gpt(80 * GiB)));
    const auto s = with_rule(small_gpt(roomy.gpu_rounded + roomy.cuda_context_bytes + roomy.nccl_bytes - 1));
    const auto w = workload::build_workload(s.model, workload::workload_options(s));
    const auto t = sequential_timeline(s, w);
    const auto m = metrics::compute_metrics(s, w, t);
    REQUIRE_FALSE(m.memory.fits);
    std::ostringstream out;
    report::write_run_summary(out, s, assemble(s, w, t));
    const std::string text = out.str();
    CAPTURE(text);
    CHECK(text.rfind("DOES NOT FIT (GPU): short by 1 B", 0) == 0);
    CHECK(text.find("+ training.micro_batch: 1") != std::string::npos);
    CHECK(text.find("Answer: training.micro_batch: 1") != std::string::npos);
    const Value j = parse(report::run_json(s, assemble(s, w, t)).dump());
    CHECK_FALSE(j["fits"].b);
    CHECK_FALSE(j["fit_by_tier"]["gpu"].b);
    CHECK(j["shortfall_bytes"].number == 1);
    CHECK(j["to_fit"]["answer"].text.rfind("training.micro_batch: 1", 0) == 0);
  }

  TEST_CASE("trace: valid JSON, a thread per stream used and per track, an event per task and interval")
  {
    const auto s = two_gpus();
    const auto t = timeline();
    std::ostringstream out;
    report::write_trace(out, s, t);
    const Value j = parse(out.str());
    CHECK(j.keys() == std::vector<std::string>{"traceEvents", "displayTimeUnit", "otherData"});
    CHECK(j["displayTimeUnit"].text == "ms");

    std::map<int, std::string> processes;               // pid -> name
    std::map<int, std::pair<int, std::string>> threads; // tid -> (pid, name)
    int complete = 0;
    const Value* fwd1 = nullptr;
    for (const auto& e : j["traceEvents"].items) {
      const std::string ph = e["ph"].text;
      if (ph == "M" && e["name"].text == "process_name")
        processes[static_cast<int>(e["pid"].number)] = e["args"]["name"].text;
      if (ph == "M" && e["name"].text == "thread_name") {
        const int tid = static_cast<int>(e["tid"].number);
        CHECK(threads.count(tid) == 0); // thread ids are unique over the trace
        threads[tid] = {static_cast<int>(e["pid"].number), e["args"]["name"].text};
      }
      if (ph == "X") {
        ++complete;
        CHECK(threads.count(static_cast<int>(e["tid"].number)) == 1); // named before use
        if (e["name"].text == "fwd" && processes[static_cast<int>(e["pid"].number)].rfind("rank 1", 0) == 0)
          fwd1 = &e;
      }
    }
    // processes: rank 0, rank 1, node0
    CHECK(processes.size() == 3);
    // rank 0 and rank 1: compute, reduction and host streams (3 each); node0: 3 tracks + 1 extra lane for the
    // NIC's overlapping flows = 10 threads
    CHECK(threads.size() == 3 + 3 + 3 + 1);
    std::multiset<std::string> names;
    for (const auto& [tid, th] : threads)
      names.insert(th.second);
    CHECK(names.count("compute stream") == 2);
    CHECK(names.count("reduction_stream") == 2);
    CHECK(names.count("host (Python thread)") == 2);
    CHECK(names.count("allgather stream") == 0); // not used
    CHECK(names.count("PCIe gpu0 H2D") == 1);
    CHECK(names.count("NIC0 tx") == 1);
    CHECK(names.count("NIC0 tx #2") == 1);
    CHECK(names.count("CPU") == 1);
    // every task of both ranks (4 each) and every interval (4)
    CHECK(complete == 4 + 4 + 4);
    // microseconds: fwd of rank 1 on [0, 0.5] s -> ts 0, dur 500000
    REQUIRE(fwd1 != nullptr);
    CHECK((*fwd1)["ts"].number == 0);
    CHECK((*fwd1)["dur"].number == 500000);
    CHECK((*fwd1)["args"]["kind"].text == "compute");
  }

  TEST_CASE("trace: an instant sits inside the slice it starts with; overlapping slices take another thread")
  {
    const auto s = two_gpus();
    engine::Timeline t;
    engine::RankTimeline r;
    // on the reduction stream: a zero-length all-reduce (dp 1) at the start of the copy issued after it
    add(r, "allreduce", TaskKind::COLLECTIVE, Phase::GRAD_REDUCE, Stream::REDUCTION, 1.0, 1.0);
    add(r, "d2h", TaskKind::COPY, Phase::GRAD_REDUCE, Stream::REDUCTION, 1.0, 1.5);
    // on the compute stream: two kernels that overlap (not nested): the second needs a thread of its own
    add(r, "k0", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0.0, 1.0);
    add(r, "k1", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0.5, 1.5);
    t.ranks.push_back(r);
    t.step_time_s = 1.5;
    std::ostringstream out;
    report::write_trace(out, s, t);
    const Value j = parse(out.str());
    std::vector<std::string> names;
    std::map<std::string, int> tid_of_event;
    for (const auto& e : j["traceEvents"].items) {
      if (e["ph"].text == "M" && e["name"].text == "thread_name")
        names.push_back(e["args"]["name"].text);
      if (e["ph"].text == "X")
        tid_of_event[e["name"].text] = static_cast<int>(e["tid"].number);
    }
    CHECK(names == std::vector<std::string>{"compute stream", "compute stream #2", "reduction_stream"});
    CHECK(tid_of_event["allreduce"] == tid_of_event["d2h"]);
    CHECK(tid_of_event["k0"] != tid_of_event["k1"]);
  }

  TEST_CASE("trace and JSON: the same input gives the same bytes")
  {
    const auto s = two_gpus();
    const auto t = timeline();
    std::ostringstream a, b;
    report::write_trace(a, s, t);
    report::write_trace(b, s, t);
    CHECK(a.str() == b.str());
    const auto m = metrics::compute_metrics(s, flops_only(), t);
    CHECK(report::run_json(s, assemble(s, flops_only(), t)).dump() ==
          report::run_json(s, assemble(s, flops_only(), t)).dump());
  }

  TEST_CASE("the JSON reader of these tests refuses what is not JSON")
  {
    CHECK_THROWS(parse("{\"a\":1,}"));
    CHECK_THROWS(parse("[1 2]"));
    CHECK_THROWS(parse("{\"a\":01}"));
    CHECK_THROWS(parse("{\"a\":1}}"));
    CHECK_THROWS(parse("\"tab\there\""));
    CHECK(parse("{\"a\":[1.5e3,-0.25,true,null,\"x\\\"y\"]}")["a"].items[0].number == 1500);
  }
}
