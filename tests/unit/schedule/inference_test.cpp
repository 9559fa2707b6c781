// The inference request as a task graph (docs/inference.md; docs/deepspeed-schedule.md is cited as §n): passes, weight
// traffic per pass, KV cache, residency, memory and the refused configurations. Every expected value is a formula from
// the model's shape (stated beside it) or from Hugging Face generate's and DeepSpeed's semantics (cited).
#include "config/scenario_loader.hpp"
#include "core/error.hpp"
#include "memory/memory_model.hpp"
#include "run/memory_analysis.hpp"
#include "schedule_test_util.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

namespace {

const std::string SRC = ZEROSIM_SOURCE_DIR;
const std::string BLOOM_SCENARIO = SRC + "/scenarios/bloom-176b-inference-1xa100-nvme.yaml";

// BLOOM-176B's shape (models/bloom-176b.yaml: bigscience/bloom config.json).
constexpr std::int64_t H = 14336, V = 250880, L = 70;

spec::Scenario bloom(std::vector<std::string> sets = {})
{
  config::LoadOptions o;
  o.sets = std::move(sets);
  return config::load_scenario(BLOOM_SCENARIO, o);
}

workload::Workload workload_of(const spec::Scenario& s)
{
  return workload::build_workload(s.model, workload::workload_options(s));
}

/// Σ bytes of the tasks of `kind` in pass `pass` (H2D copies only for COPY; parameter gathers for COLLECTIVE).
std::int64_t pass_bytes(const TaskGraph& g, TaskKind kind, int pass)
{
  std::int64_t b = 0;
  for (const Task& t : g.tasks)
    if (t.kind == kind && t.micro_step == pass && (kind != TaskKind::COPY || t.direction == CopyDirection::H2D) &&
        (kind != TaskKind::COLLECTIVE || t.phase == Phase::PARAM_GATHER))
      b += t.bytes;
  return b;
}

int count(const TaskGraph& g, TaskKind kind)
{
  int n = 0;
  for (const Task& t : g.tasks)
    n += t.kind == kind;
  return n;
}

std::int64_t buffer_bytes(const TaskGraph& g, const std::string& name)
{
  for (const Buffer& b : g.buffers)
    if (b.name == name)
      return b.bytes;
  return -1;
}

std::string message_of(const std::function<void()>& f)
{
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_SUITE("schedule")
{
  TEST_CASE("inference: one prompt pass and generate_tokens - 1 decode passes, as Hugging Face generate runs them")
  {
    // generate(max_new_tokens = G): the prompt's forward yields the first token, then G - 1 forwards of one token
    // each (DeepSpeedExamples zero_inference/run_model.py times decode as batch x (gen_len - 1) tokens).
    spec::Scenario s = bloom();
    const workload::Workload w = workload_of(s);
    CHECK(inference_passes(s) == 32);
    CHECK(w.decode_passes == 31);
    StepOptions every;
    every.sampled_decode_passes = 0;
    const TaskGraph g = build_step_graph(s, w, 0, every);
    CHECK(g.micro_steps == 32);
    std::set<int> passes;
    for (const Task& t : g.tasks)
      passes.insert(t.micro_step);
    CHECK(passes.size() == 32);
    CHECK(*passes.begin() == 0);
    CHECK(*passes.rbegin() == 31);
    // Every pass runs every model layer once: l + 3 forwards (embedding, blocks, final norm, LM head) + the argmax.
    int fwd = 0;
    for (const Task& t : g.tasks)
      fwd += t.kind == TaskKind::COMPUTE && t.phase == Phase::FORWARD;
    CHECK(fwd == 32 * (L + 3));
    // G = 1: the prompt's pass alone; G = 0: the prompt's pass, no cache.
    s.inference.generate_tokens = 1;
    CHECK(inference_passes(s) == 1);
    s.inference.generate_tokens = 0;
    CHECK(inference_passes(s) == 1);
    CHECK(workload_of(s).kv_cache_bytes == 0);
  }

  TEST_CASE("inference: decode layers take one token per sequence and read the growing KV cache")
  {
    // Llama-2-7B (h 4096, 32 layers, 32 heads = kv heads, V 32000, untied), flash attention, batch b = 4,
    // prompt p = 100, G = 6: decode pass t runs 2·b·(matmul weights) FLOPs in its linears (LM head included) and
    // 4·b·(p + t)·h per layer in its attention (QKᵀ and AV over p + t keys, docs/inference.md §2).
    spec::Scenario s;
    s.model = config::load_model(SRC + "/models/llama2-7b.yaml");
    s.training.mode = spec::Mode::INFERENCE;
    s.training.precision = spec::Precision::BF16;
    s.inference = spec::InferenceSpec{4, 100, 6};
    const workload::Workload w = workload_of(s);
    const double h = 4096, l = 32, b = 4, p = 100;
    const double matmul = static_cast<double>(w.params) - 32000.0 * h - (2 * l + 1) * h; // less embedding, norms
    REQUIRE(w.decode_passes == 5);
    CHECK(w.model_layers == 32 + 3);
    CHECK(w.layers.size() == 35 + 3 + 5); // + decode embedding, final norm, LM head and one block per pass
    double expected = 0;
    for (int t = 1; t <= 5; ++t)
      expected += 2 * b * matmul + 4 * b * (p + t) * h * l;
    CHECK(w.decode_flops == doctest::Approx(expected).epsilon(1e-12));
    // The decode layers own no parameters; Ψ is the model's.
    for (std::size_t i = 35; i < w.layers.size(); ++i)
      CHECK(w.layers[i].params.empty());
    CHECK(w.params == workload::count_params(s.model));
    // One more cached position of k and v per pass: 2 · b · kv_heads · d · 2 B more HBM bytes in the attention.
    auto bytes = [&](int t) {
      double sum = 0;
      for (const workload::Op& op : w.layers[static_cast<std::size_t>(w.pass_layer(t, 5))].ops)
        sum += op.fwd_bytes;
      return sum;
    };
    CHECK(bytes(3) - bytes(2) == doctest::Approx(2 * b * h * 2).epsilon(1e-12));
    CHECK(w.pass_layer(0, 5) == 5);
    CHECK(w.pass_layer(2, 0) == w.decode_embed);
    CHECK(w.pass_layer(2, 34) == w.decode_lm_head);
    CHECK_THROWS_AS(w.pass_layer(6, 5), core::InternalError);
    // Nothing is kept for a backward; the cache is the schedule's, not a layer's working set: a decode block's
    // working set does not grow with the cache (flash attention: no L-sized transient).
    const workload::Layer& d1 = w.layers[static_cast<std::size_t>(w.pass_layer(1, 5))];
    const workload::Layer& d5 = w.layers[static_cast<std::size_t>(w.pass_layer(5, 5))];
    CHECK(d1.activation_bytes_kept == 0);
    CHECK(d5.activation_bytes_forward_working == d1.activation_bytes_forward_working);
  }

  TEST_CASE("inference: sampled decode passes are evenly spaced from the first to the last")
  {
    spec::Scenario s = bloom();
    // D = 31 decode passes, K = 16: 1 + round(i·30/15) = 1, 3, ..., 31 (schedule/step_graph.hpp).
    const std::vector<int> p = inference_graph_passes(s, 16);
    REQUIRE(p.size() == 17);
    CHECK(p.front() == 0);
    for (int i = 0; i < 16; ++i)
      CHECK(p[static_cast<std::size_t>(i) + 1] == 1 + 2 * i);
    // D <= K or K = 0: every pass.
    CHECK(inference_graph_passes(s, 0).size() == 32);
    CHECK(inference_graph_passes(s, 31).size() == 32);
    // K = 7 of D = 31: 1 + round(i·30/6) = 1, 6, 11, 16, 21, 26, 31.
    CHECK(inference_graph_passes(s, 7) == std::vector<int>{0, 1, 6, 11, 16, 21, 26, 31});
    CHECK_THROWS_AS(inference_graph_passes(s, 1), core::InternalError);
    const TaskGraph g = build_step_graph(s, workload_of(s)); // the default: INFERENCE_SAMPLED_DECODE_PASSES = 16
    std::set<int> in_graph;
    for (const Task& t : g.tasks)
      in_graph.insert(t.micro_step);
    CHECK(std::vector<int>(in_graph.begin(), in_graph.end()) == p);
    CHECK(g.micro_steps == 32);
  }

  TEST_CASE("inference: ZeRO-Inference streams every non-persistent weight from NVMe in every pass")
  {
    // run_model.py's settings (the scenario): persistence threshold h, so every norm and the h-sized biases
    // (attention dense, dense_4h_to_h) stay on the GPU. A partition goes to NVMe iff it has >= 1 MiB
    // (max(MIN_AIO_BYTES, aio.block_size), §8): qkv 3h², dense h², h_to_4h 4h², 4h_to_h 4h² and the embedding V·h do;
    // the qkv bias (3h x 2 B = 84 KiB) and the h_to_4h bias (4h x 2 B = 112 KiB) stay on the CPU.
    // The tied LM head fetches the embedding again (its Parameter is the embedding's; the reuse distance of 1e9
    // elements ends inside block 0), so per pass:
    //   NVMe read = (l·12h² + 2·V·h) · 2 B,  H2D = (l·(12h² + 7h) + 2·V·h) · 2 B.
    spec::Scenario s = bloom();
    const workload::Workload w = workload_of(s);
    StepOptions every;
    every.sampled_decode_passes = 0;
    const TaskGraph g = build_step_graph(s, w, 0, every);
    const std::int64_t nvme = (L * 12 * H * H + 2 * V * H) * 2;
    const std::int64_t h2d = (L * (12 * H * H + 7 * H) + 2 * V * H) * 2;
    for (int pass : {0, 1, 17, 31}) {
      CAPTURE(pass);
      CHECK(pass_bytes(g, TaskKind::NVME_READ, pass) == nvme);
      CHECK(pass_bytes(g, TaskKind::COPY, pass) == h2d);
      CHECK(pass_bytes(g, TaskKind::COLLECTIVE, pass) == 0); // one rank: _no_gather_coalesced, no collective
    }
    CHECK(count(g, TaskKind::NVME_WRITE) == 0); // release returns the swap buffer, no write-back (§8)
    // Part of the reads are the async NVMe prefetch (__prefetch_nvme_param_partitions).
    int prefetches = 0;
    for (const Task& t : g.tasks)
      prefetches += t.name.find(".nvme_prefetch.") != std::string::npos;
    CHECK(prefetches > 0);
    check_invariants(g, "BLOOM nvme");
    // Residency: the NVMe partitions, the CPU biases (pageable: pin_memory false), the pinned swap pool of
    // buffer_count x io_aligned(buffer_size) elements (9·2^30 is a multiple of the 512-element alignment).
    CHECK(resident_bytes(g, Device::NVME) == (L * 12 * H * H + V * H) * 2);
    CHECK(resident_bytes(g, Device::HOST) == L * 7 * H * 2 + 5LL * 9 * (1LL << 30) * 2);
    // On the GPU: the persistent params (4 norms' 4h + 2 biases' 2h per block, the final norm's 2h).
    CHECK(resident_bytes(g, Device::GPU) == (L * 6 * H + 2 * H) * 2);
  }

  TEST_CASE("inference: CPU offload copies every non-persistent weight, all-gathers split it over the ranks")
  {
    // offload_param cpu, one rank: H2D per pass = Σ non-persistent numel x 2 B, with the tied embedding twice:
    // (l·(12h² + 7h) + 2·V·h) · 2 B; pin_memory true: pinned copies only.
    spec::Scenario s = bloom(
        {"deepspeed.zero_optimization.offload_param={device: cpu, pin_memory: true}", "inference.generate_tokens=3"});
    StepOptions every;
    every.sampled_decode_passes = 0;
    TaskGraph g = build_step_graph(s, workload_of(s), 0, every);
    for (int pass = 0; pass < 3; ++pass) {
      CHECK(pass_bytes(g, TaskKind::COPY, pass) == (L * (12 * H * H + 7 * H) + 2 * V * H) * 2);
      CHECK(pass_bytes(g, TaskKind::NVME_READ, pass) == 0);
    }
    for (const Task& t : g.tasks)
      if (t.kind == TaskKind::COPY)
        CHECK(t.pinned);
    CHECK(resident_bytes(g, Device::HOST) == (L * (12 * H * H + 7 * H) + V * H) * 2);
    check_invariants(g, "BLOOM cpu");

    // ZeRO-3 without offload on 4 GPUs: each pass all-gathers N·⌈n/N⌉ elements of every non-persistent tensor
    // (h and V·h are multiples of 4: no padding), the embedding twice, and copies nothing.
    s = bloom({"deepspeed.zero_optimization.offload_param.device=none", "cluster.gpus_per_node=4",
               "inference.generate_tokens=3"});
    g = build_step_graph(s, workload_of(s), 3, every);
    for (int pass = 0; pass < 3; ++pass) {
      CHECK(pass_bytes(g, TaskKind::COLLECTIVE, pass) == (L * (12 * H * H + 7 * H) + 2 * V * H) * 2);
      CHECK(pass_bytes(g, TaskKind::COPY, pass) == 0);
    }
    // The partition: (Ψ / 4) · 2 B on the GPU plus the gathered persistent params (l·6h + 2h) · 2 B.
    const std::int64_t psi = workload_of(s).params;
    CHECK(resident_bytes(g, Device::GPU) == psi / 4 * 2 + (L * 6 * H + 2 * H) * 2);
    check_invariants(g, "BLOOM 4 GPUs");
  }

  TEST_CASE("inference: stages 0-2 keep a replica and fetch nothing")
  {
    // No optimizer, no gradients: the model's 16-bit weights on every GPU (Ψ · b_lp), no copy, read or collective.
    for (int stage : {0, 1, 2}) {
      spec::Scenario s = bloom({"deepspeed.zero_optimization.offload_param.device=none", "cluster.gpus_per_node=2",
                                "inference.generate_tokens=4"});
      s.deepspeed.zero.stage = stage;
      const workload::Workload w = workload_of(s);
      const TaskGraph g = build_step_graph(s, w, 1);
      CHECK(resident_bytes(g, Device::GPU) == w.params * 2);
      CHECK(count(g, TaskKind::COPY) == 0);
      CHECK(count(g, TaskKind::NVME_READ) == 0);
      CHECK(count(g, TaskKind::COLLECTIVE) == 0);
      check_invariants(g, "replica stage " + std::to_string(stage));
      CHECK(memory_ranks(s, w) ==
            std::vector<int>{0, 1}); // every rank holds the same: the first and last stand for all
    }
  }

  TEST_CASE("inference: the KV cache of prompt + generated positions is live for the whole request")
  {
    // 2 (k, v) · l · kv_heads · head_dim · (prompt + G) · batch · 2 B (a static cache of max_length positions).
    spec::Scenario s = bloom();
    const workload::Workload w = workload_of(s);
    const std::int64_t kv = 2 * L * H * (512 + 32) * 8 * 2;
    CHECK(w.kv_cache_bytes == kv);
    const TaskGraph g = build_step_graph(s, w);
    CHECK(buffer_bytes(g, "kv_cache") == kv);
    // Allocated by the request's first forward, freed by its last task.
    CHECK(g.tasks.front().kind != TaskKind::SYNC);
    bool first_alloc = false;
    for (const Task& t : g.tasks)
      for (BufferId b : t.allocs)
        if (g.buffers[static_cast<std::size_t>(b)].name == "kv_cache")
          first_alloc = t.name == "pass0.fwd.embed";
    CHECK(first_alloc);
    bool last_frees = false;
    for (BufferId b : g.tasks.back().frees)
      last_frees = last_frees || g.buffers[static_cast<std::size_t>(b)].name == "kv_cache";
    CHECK(last_frees);

    // Grouped-query attention counts kv_heads, not heads: Llama-2-70B (80 layers, 8 kv heads of 128), batch 4,
    // prompt 1000 + 24 generated: 2 · 80 · 8 · 128 · 1024 · 4 · 2 B.
    spec::Scenario l = s;
    l.model = config::load_model(SRC + "/models/llama2-70b.yaml");
    l.inference = spec::InferenceSpec{4, 1000, 24};
    CHECK(workload_of(l).kv_cache_bytes == 2LL * 80 * 8 * 128 * 1024 * 4 * 2);
  }

  TEST_CASE("inference: memory holds the KV cache, the gathered weights and one layer's activations")
  {
    // zerosim memory on the shipped scenario. Host: the swap pool (pinned) and the CPU biases (pageable), one rank
    // per node. NVMe: the NVMe-resident partitions, (l·12h² + V·h) · 2 B. GPU at its peak (the tied LM head's
    // forward of the prompt's pass): the KV cache and the embedding gathered again (V·h · 2 B) at least.
    const spec::Scenario s = bloom();
    const memory::MemoryReport r = run::analyze_memory(s);
    CHECK(r.cpu_per_node == L * 7 * H * 2 + 5LL * 9 * (1LL << 30) * 2);
    CHECK(r.cpu_pinned_per_node == 5LL * 9 * (1LL << 30) * 2);
    CHECK(r.nvme_per_node == (L * 12 * H * H + V * H) * 2);
    CHECK(r.peak_task == "pass0.fwd.lm_head");
    const auto at = [&](MemCategory c) { return r.breakdown[static_cast<std::size_t>(c)]; };
    CHECK(at(MemCategory::PARAMS) == (L * 6 * H + 2 * H) * 2 + V * H * 2); // persistent + the gathered embedding
    CHECK(at(MemCategory::ACTIVATIONS) >= 2 * L * H * 544 * 8 * 2);        // the KV cache and more
    CHECK(at(MemCategory::GRADS) == 0);
    CHECK(at(MemCategory::OPTIMIZER) == 0);
    CHECK(r.fits);
  }

  TEST_CASE("inference: the first request records the trace, a steady one prefetches")
  {
    // §5.2: the run's first forward RECORDs the trace (no prefetch); later ones find it COMPLETE.
    spec::Scenario s = bloom(
        {"deepspeed.zero_optimization.offload_param={device: cpu, pin_memory: true}", "inference.generate_tokens=2"});
    const workload::Workload w = workload_of(s);
    StepOptions first;
    first.first_step = true;
    auto prefetches = [](const TaskGraph& g, int pass) {
      int n = 0;
      for (const Task& t : g.tasks)
        n += t.micro_step == pass && t.name.find(".prefetch") != std::string::npos;
      return n;
    };
    const TaskGraph g1 = build_step_graph(s, w, 0, first);
    CHECK(prefetches(g1, 0) == 0);
    CHECK(prefetches(g1, 1) > 0);
    check_invariants(g1, "first request");
    const TaskGraph g2 = build_step_graph(s, w);
    CHECK(prefetches(g2, 0) > 0);
    // The bytes do not change: every weight is fetched once per pass either way (the tied embedding twice).
    CHECK(pass_bytes(g1, TaskKind::COPY, 0) == pass_bytes(g2, TaskKind::COPY, 0));
  }

  TEST_CASE("inference: configurations DeepSpeed inference cannot run are refused, naming the key")
  {
    const spec::Scenario base = bloom({"inference.generate_tokens=2"});
    const workload::Workload w = workload_of(base);
    spec::Scenario s = base;
    s.framework = spec::Framework::DDP;
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    CHECK(message_of([&] { build_step_graph(s, w); }).find("training.mode inference with ddp") != std::string::npos);
    s.framework = spec::Framework::FSDP;
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    s = base;
    s.deepspeed.zero.stage = 2; // offload_param nvme below stage 3
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    CHECK(message_of([&] { build_step_graph(s, w); }).find("deepspeed.zero_optimization.offload_param.device nvme") !=
          std::string::npos);
    s.deepspeed.zero.stage = 0;
    s.deepspeed.zero.offload_param.device = spec::OffloadDevice::CPU;
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    s = base;
    s.training.grad_accum = 2;
    CHECK_THROWS_AS(build_step_graph(s, w), core::InputError);
    CHECK(message_of([&] { build_step_graph(s, w); }).find("training.grad_accum") != std::string::npos);
    s = base;
    s.training.precision = spec::Precision::AMP_FP16;
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    // DeepSpeed's default buffer_size (1e8 elements) cannot hold the embedding's partition, V·h = 3.6e9 (§8).
    s = base;
    s.deepspeed.zero.offload_param.buffer_size = 100'000'000;
    CHECK_THROWS_AS(build_step_graph(s, w), core::InputError);
    CHECK(message_of([&] { build_step_graph(s, w); }).find("offload_param.buffer_size") != std::string::npos);
    // A workload built for another request length is a programming error.
    s = base;
    s.inference.generate_tokens = 5;
    CHECK_THROWS_AS(build_step_graph(s, w), core::InternalError);
  }
}
