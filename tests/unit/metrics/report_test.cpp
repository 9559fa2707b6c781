// report/run_report: the result JSON against the contract of docs/scenario-format.md "Results" (every key, in
// order), the summary for people, and the Chrome trace (valid JSON, one thread per stream and per track).
#include "report/run_report.hpp"
#include "run/run_scenario.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "fixtures/scenarios.hpp"
#include "fixtures/timelines.hpp"
#include "schedule/step_graph.hpp"

#include <doctest/doctest.h>

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
using test::GiB;
using test::sequential_timeline;
using test::span;

// ---- What we write, read back with nlohmann's parser ----

using core::Json;

/// An object's keys in document order.
std::vector<std::string> keys(const Json& j)
{
  std::vector<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it)
    k.push_back(it.key());
  return k;
}

// ---- A hand-built run ----

/// test::two_gpus() (1 node x 2 GPUs, micro-batch 2 x seq 1024, grad_accum 4: global batch 16, A100 bf16 peak 312
/// TFLOPS), with a name that needs JSON escapes, a model name and one warning.
spec::Scenario two_gpus()
{
  spec::Scenario s = test::two_gpus();
  s.name = "hand-built \"quoted\"";
  s.model.name = "toy";
  s.warnings = {"deepspeed.zero_optimization.zenflow: not modelled"};
  return s;
}

/// test::flops_only with 123456 parameters (the JSON's "params").
workload::Workload flops_only()
{
  return test::flops_only(123456);
}

/// Two ranks; three resource tracks on node0 (PCIe H2D, NIC0 tx, CPU): the NIC's two flows overlap.
engine::Timeline timeline()
{
  engine::Timeline t;
  t.ranks.push_back(test::three_stream_rank_timeline(0));
  t.ranks.push_back(test::three_stream_rank_timeline(1));
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
                                                "parallelism",
                                                "pipeline",
                                                "time_to_train_s",
                                                "cost",
                                                "warnings",
                                                "meta"};

/// test::small_gpt(gpu_memory): the 2-block GPT on 1 node x 2 GPUs, micro-batch 8, grad_accum 1 (global batch 16),
/// stage 0, without the NVMe drive.
spec::Scenario small_gpt(std::int64_t gpu_memory)
{
  spec::Scenario s = test::small_gpt(gpu_memory);
  s.cluster.node.nvme = {};
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
  TEST_CASE("run JSON: every contract key of docs/scenario-format.md, in its order, then zerosim's own")
  {
    const auto s = two_gpus();
    const auto t = timeline();
    const auto m = metrics::compute_metrics(s, flops_only(), t);
    const Json j = Json::parse(core::dump_json(report::run_json(s, assemble(s, flops_only(), t)), 2));
    const auto all = keys(j);
    REQUIRE(all.size() > CONTRACT_KEYS.size());
    CHECK(std::vector<std::string>(all.begin(), all.begin() + static_cast<long>(CONTRACT_KEYS.size())) ==
          CONTRACT_KEYS);
    CHECK(std::vector<std::string>(all.begin() + static_cast<long>(CONTRACT_KEYS.size()), all.end()) ==
          std::vector<std::string>{"accuracy", "rank", "peak_task", "peak_time_s", "peak_memory_device_time_bytes",
                                   "peak_task_device_time", "capacity_bytes", "tight", "memory_model_bytes",
                                   "peak_flops_per_gpu", "simulation"});
    CHECK(keys(j.at("tflops_per_gpu")) == std::vector<std::string>{"model", "hardware"});
    // accuracy: the band of the scenario's group, the calibration's leave-one-source-out one or the priors'
    // (docs/calibration.md §4); kind "none" with nulls when there is none.
    CHECK(keys(j.at("accuracy")) == std::vector<std::string>{"group", "kind", "median_abs_error", "p90_abs_error",
                                                             "median_signed_error", "rows", "band_group", "from"});
    CHECK(keys(j.at("peak_memory_bytes")) == std::vector<std::string>{"gpu", "gpu_reserved", "gpu_device",
                                                                      "cpu_per_node", "cpu_pinned_per_node",
                                                                      "nvme_per_node"});
    CHECK(keys(j.at("memory_breakdown_bytes")) ==
          std::vector<std::string>{"params", "grads", "optimizer", "activations", "buffers", "other"});
    CHECK(keys(j.at("fit_by_tier")) == std::vector<std::string>{"gpu", "cpu", "nvme"});
    CHECK(keys(j.at("time_breakdown_s")) == std::vector<std::string>{"compute", "optimizer", "exposed_comm",
                                                                     "exposed_pcie", "exposed_nvme", "pipeline_bubble",
                                                                     "idle"});
    CHECK(keys(j.at("cost")) == std::vector<std::string>{"per_step", "to_train"});
    CHECK(keys(j.at("meta")) == std::vector<std::string>{"zerosim_version", "schema_version", "simgrid_version",
                                                         "network_model", "deepspeed_version",
                                                         "deepspeed_version_requested", "software", "kernel_data",
                                                         "calibration", "replay"});
    // meta.calibration: the profile's path ("none" for the priors alone), its hash and how many parameters it sets.
    CHECK(keys(j.at("meta").at("calibration")) == std::vector<std::string>{"path", "hash", "parameters"});
  }

  TEST_CASE("run JSON: the values are the metrics' (and null where nothing was asked)")
  {
    const auto s = two_gpus();
    const auto t = timeline();
    const auto m = metrics::compute_metrics(s, flops_only(), t);
    const Json j = Json::parse(core::dump_json(report::run_json(s, assemble(s, flops_only(), t)), 2));
    CHECK(j.at("scenario").get<std::string>() == "hand-built \"quoted\"");
    CHECK(j.at("gpus").get<double>() == 2);
    CHECK(j.at("dp").get<double>() == 2);
    CHECK(j.at("params").get<double>() == 123456);
    CHECK(j.at("step_time_s").get<double>() == 2.0);
    CHECK(j.at("micro_steps").get<double>() == 4);
    // 16 x 1024 / 2 tokens/s, 16 / 2 samples/s; 1e12 x 4 / 2 / 1e12 = 2 model TFLOPs, 2.5 hardware
    CHECK(j.at("tokens_per_s").get<double>() == doctest::Approx(8192));
    CHECK(j.at("samples_per_s").get<double>() == doctest::Approx(8));
    CHECK(j.at("tflops_per_gpu").at("model").get<double>() == doctest::Approx(2));
    CHECK(j.at("tflops_per_gpu").at("hardware").get<double>() == doctest::Approx(2.5));
    CHECK(j.at("mfu").get<double>() == doctest::Approx(2e12 / 312e12));
    CHECK(j.at("hfu").get<double>() == doctest::Approx(2.5e12 / 312e12));
    // memory: the resident 1000 B only
    CHECK(j.at("peak_memory_bytes").at("gpu").get<double>() == 1000);
    CHECK(j.at("memory_breakdown_bytes").at("params").get<double>() == 1000);
    CHECK(j.at("fits").get<bool>());
    CHECK(j.at("shortfall_bytes").get<double>() == 0);
    // breakdown: compute [0, 1.5], exposed comm [1.5, 1.75], optimizer [1.75, 2.0]; sums to the step
    const auto& b = j.at("time_breakdown_s");
    CHECK(b.at("compute").get<double>() == 1.5);
    CHECK(b.at("exposed_comm").get<double>() == 0.25);
    CHECK(b.at("optimizer").get<double>() == 0.25);
    CHECK(b.at("idle").get<double>() == 0);
    CHECK(j.at("time_to_train_s").is_null());
    CHECK(j.at("cost").at("per_step").is_null());
    CHECK(j.at("cost").at("to_train").is_null());
    REQUIRE(j.at("warnings").size() == 1);
    CHECK(j.at("warnings").at(0).get<std::string>() == s.warnings[0]);
    CHECK(j.at("meta").at("network_model").get<std::string>() == t.network_model);
    CHECK(j.at("meta").at("schema_version").get<double>() == 1);
    CHECK(j.at("meta").at("replay").get<std::string>() == "full");
    CHECK(j.at("simulation").at("flows").get<double>() == 7);
    CHECK(j.at("peak_flops_per_gpu").get<double>() == 312e12);
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
    // time to train 3600 s, below 2 h: in minutes; cost 2 x 2 x 2 / 3600 per step, 4 to train
    CHECK(text.find("60 min (3600 s) for") != std::string::npos);
    CHECK(text.find("0.002222 per step, 4 to train") != std::string::npos);
    CHECK(text.find("Replay: full, 2 simulated ranks") != std::string::npos);
    // Warnings come under the header, before any figure (issue 29: a reader meets them first).
    CHECK(text.find(s.warnings[0]) != std::string::npos);
    CHECK(text.find(s.warnings[0]) < text.find("step time"));
  }

  TEST_CASE("summary and JSON: when it does not fit, the verdict comes first and the ladder's answer is given")
  {
    // One byte less than what cannot be released (rounded live blocks + CUDA context + NCCL buffers): the
    // verdict is "short by 1 B" (as tests/unit/run/memory_analysis_test.cpp); rung 1, micro-batch 1, fits.
    // The old reserved rule (allocator mechanism off), whose floor is exact: this tests the report, not the allocator.
    auto with_rule = [](spec::Scenario x) {
      x.mechanisms.allocator = false;
      return x;
    };
    const auto roomy = run::analyze_memory(with_rule(small_gpt(80 * GiB)));
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
    const Json j = Json::parse(core::dump_json(report::run_json(s, assemble(s, w, t)), 2));
    CHECK_FALSE(j.at("fits").get<bool>());
    CHECK_FALSE(j.at("fit_by_tier").at("gpu").get<bool>());
    CHECK(j.at("shortfall_bytes").get<double>() == 1);
    CHECK(j.at("to_fit").at("answer").get<std::string>().rfind("training.micro_batch: 1", 0) == 0);
  }

  TEST_CASE("trace: valid JSON, a thread per stream used and per track, an event per task and interval")
  {
    const auto s = two_gpus();
    const auto t = timeline();
    std::ostringstream out;
    report::write_trace(out, s, t);
    const Json j = Json::parse(out.str());
    CHECK(keys(j) == std::vector<std::string>{"traceEvents", "displayTimeUnit", "otherData"});
    CHECK(j.at("displayTimeUnit").get<std::string>() == "ms");

    std::map<int, std::string> processes;               // pid -> name
    std::map<int, std::pair<int, std::string>> threads; // tid -> (pid, name)
    int complete = 0;
    const Json* fwd1 = nullptr;
    for (const auto& e : j.at("traceEvents")) {
      const std::string ph = e.at("ph").get<std::string>();
      if (ph == "M" && e.at("name").get<std::string>() == "process_name")
        processes[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
      if (ph == "M" && e.at("name").get<std::string>() == "thread_name") {
        const int tid = e.at("tid").get<int>();
        CHECK(threads.count(tid) == 0); // thread ids are unique over the trace
        threads[tid] = {e.at("pid").get<int>(), e.at("args").at("name").get<std::string>()};
      }
      if (ph == "X") {
        ++complete;
        CHECK(threads.count(e.at("tid").get<int>()) == 1); // named before use
        if (e.at("name").get<std::string>() == "fwd" && processes[e.at("pid").get<int>()].rfind("rank 1", 0) == 0)
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
    CHECK(fwd1->at("ts").get<double>() == 0);
    CHECK(fwd1->at("dur").get<double>() == 500000);
    CHECK(fwd1->at("args").at("kind").get<std::string>() == "compute");
  }

  TEST_CASE("trace: an instant sits inside the slice it starts with, overlapping slices take another thread")
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
    const Json j = Json::parse(out.str());
    std::vector<std::string> names;
    std::map<std::string, int> tid_of_event;
    for (const auto& e : j.at("traceEvents")) {
      if (e.at("ph").get<std::string>() == "M" && e.at("name").get<std::string>() == "thread_name")
        names.push_back(e.at("args").at("name").get<std::string>());
      if (e.at("ph").get<std::string>() == "X")
        tid_of_event[e.at("name").get<std::string>()] = e.at("tid").get<int>();
    }
    CHECK(names == std::vector<std::string>{"compute stream", "compute stream #2", "reduction_stream"});
    CHECK(tid_of_event["allreduce"] == tid_of_event["d2h"]);
    CHECK(tid_of_event["k0"] != tid_of_event["k1"]);
  }

  TEST_CASE("trace: the micro-steps accumulation reuse did not simulate are marked, and what follows them is moved")
  {
    // g = 5 micro-steps, 0, 1 and 4 simulated (docs/engine.md "Accumulation reuse"): micro-step 1 starts at 1.0 s,
    // micro-step 4 at 2.0 s, so the period is 1.0 s and micro-steps 2 and 3 go at 2.0 s, 2 x 1.0 s long. Derivation:
    // a task of micro-step 4 (or after it) moves 2.0 s later; a task of micro-step 1 that runs on past 2.0 s does not
    // (it started in micro-step 1 and overlaps micro-step 2 in the real step); the step is 3.5 + 2 = 5.5 s.
    const auto s = two_gpus();
    engine::Timeline t;
    engine::RankTimeline r;
    const auto micro = [&](spec::TaskId id, int m) { r.graph.tasks[static_cast<size_t>(id)].micro_step = m; };
    micro(add(r, "fwd0", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0.0, 1.0), 0);
    micro(add(r, "fwd1", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 1.0, 2.0), 1);
    micro(add(r, "rs1", TaskKind::COLLECTIVE, Phase::GRAD_REDUCE, Stream::REDUCTION, 1.5, 2.3), 1);
    micro(add(r, "fwd4", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 2.0, 3.0), 4);
    add(r, "adam", TaskKind::COMPUTE, Phase::OPTIMIZER, Stream::COMPUTE, 3.0, 3.5);
    t.ranks.push_back(r);
    t.reuse = engine::AccumulationReuse{5, 3, 1.0, 1.0, 3.5};
    t.step_time_s = 3.5 + 2 * 1.0;
    std::ostringstream out;
    report::write_trace(out, s, t);
    const Json j = Json::parse(out.str());
    std::map<std::string, std::pair<double, double>> at; // name -> (ts, dur) in µs
    std::string marker_thread;
    for (const auto& e : j.at("traceEvents")) {
      if (e.at("ph").get<std::string>() == "X")
        at[e.at("name").get<std::string>()] = {e.at("ts").get<double>(), e.at("dur").get<double>()};
      if (e.at("ph").get<std::string>() == "M" && e.at("name").get<std::string>() == "thread_name")
        marker_thread = e.at("args").at("name").get<std::string>(); // the last thread: the marks'
    }
    CHECK(marker_thread == "micro-steps not simulated");
    const std::string mark = "micro-steps 2-3 not simulated: 2 x 1.000 s period";
    REQUIRE(at.count(mark) == 1);
    CHECK(at[mark] == std::pair<double, double>{2.0e6, 2.0e6});
    CHECK(at["fwd1"] == std::pair<double, double>{1.0e6, 1.0e6});
    CHECK(at["rs1"] == std::pair<double, double>{1.5e6, 0.8e6});
    CHECK(at["fwd4"] == std::pair<double, double>{4.0e6, 1.0e6});
    CHECK(at["adam"] == std::pair<double, double>{5.0e6, 0.5e6});
    CHECK(j.at("otherData").at("step_time_s").get<double>() == 5.5);
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
    CHECK(core::dump_json(report::run_json(s, assemble(s, flops_only(), t)), 2) ==
          core::dump_json(report::run_json(s, assemble(s, flops_only(), t)), 2));
  }
}
