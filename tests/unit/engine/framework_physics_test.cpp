// Physics of the PyTorch frameworks: the bytes each GPU puts on the wire in one step,
// from the schedule's collectives planned as NCCL rings, against the closed forms of docs/ddp.md and
// docs/fsdp.md. Ψ is the model's parameter count; N the data-parallel degree.
#include "collectives/nccl.hpp"
#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "memory/memory_model.hpp"
#include "run/memory_analysis.hpp"
#include "run/run_scenario.hpp"
#include "schedule/step_graph.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace zerosim;
using spec::CollectiveKind;

namespace {

spec::Scenario job(int nodes, int grad_accum, const std::string& precision, const std::string& framework)
{
  const std::string text =
      "name: framework-physics\nmodel: gpt2-xl\ncluster:\n  node: dgx-a100-80gb\n  nodes: " + std::to_string(nodes) +
      "\ntraining: {seq_len: 1024, micro_batch: 1, grad_accum: " + std::to_string(grad_accum) +
      ", precision: " + precision + "}\n" + framework;
  return config::load_scenario_text(text, std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/framework-physics.yaml");
}

/// Bytes per step, per kind of collective, that GPU 0 of node 0 sends, every collective of rank 0's graph
/// planned as NCCL rings over the scenario's cluster (figures of the links do not matter for bytes).
struct Wire {
  double all_reduce = 0, all_gather = 0, reduce_scatter = 0;
  int all_gathers = 0, reduce_scatters = 0, all_reduces = 0;
};

Wire wire_bytes(const spec::Scenario& s)
{
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const spec::TaskGraph g = schedule::build_step_graph(s, w, 0);
  collectives::Fabric f;
  f.nodes = s.cluster.nodes;
  f.gpus_per_node = s.cluster.gpus_per_node;
  f.nics_per_node = s.cluster.network.nics_per_node;
  f.intra_Bps = 300e9;
  f.inter_Bps = 25e9;
  f.intra_latency_s = 1e-6;
  f.inter_latency_s = 5e-6;
  collectives::Options ring;
  ring.all_reduce = collectives::Algorithm::RING;
  Wire out;
  for (const spec::Task& t : g.tasks) {
    if (t.kind != spec::TaskKind::COLLECTIVE)
      continue;
    double sent = 0;
    for (const auto& ph : collectives::plan(t.collective, t.bytes, f, ring, t.group).phases)
      for (const auto& fl : ph.flows)
        if (fl.src == spec::Gpu{0, 0})
          sent += fl.bytes;
    switch (t.collective) {
    case CollectiveKind::ALL_REDUCE:
      out.all_reduce += sent;
      ++out.all_reduces;
      break;
    case CollectiveKind::ALL_GATHER:
      out.all_gather += sent;
      ++out.all_gathers;
      break;
    case CollectiveKind::REDUCE_SCATTER:
      out.reduce_scatter += sent;
      ++out.reduce_scatters;
      break;
    }
  }
  return out;
}

double psi(const spec::Scenario& s)
{
  return static_cast<double>(workload::build_workload(s.model, workload::workload_options(s)).params);
}

} // namespace

TEST_CASE("DDP: each GPU sends 2(N-1)/N x Psi x bytes per gradient element per all-reduced backward")
{
  // A ring all-reduce of S bytes sends 2(N-1)/N S from every rank (reduce-scatter then all-gather); DDP
  // all-reduces every gradient once per synchronised backward (docs/ddp.md): amp keeps fp32 gradients (4 B),
  // bf16 16-bit ones (2 B). No other collective (the model has no buffers to broadcast).
  for (const auto& [precision, bytes] : {std::pair<std::string, double>{"amp_bf16", 4}, {"bf16", 2}}) {
    for (int nodes : {1, 2}) {
      CAPTURE(precision);
      CAPTURE(nodes);
      const spec::Scenario s = job(nodes, 1, precision, "ddp: {}\n");
      const double n = s.dp();
      const Wire w = wire_bytes(s);
      CHECK(w.all_reduce == doctest::Approx(2 * (n - 1) / n * psi(s) * bytes).epsilon(1e-9));
      CHECK(w.all_gather == 0);
      CHECK(w.reduce_scatter == 0);
    }
  }
  // g micro-steps: every backward all-reduces (g x), unless they run under no_sync (1 x).
  const spec::Scenario plain = job(1, 4, "amp_bf16", "ddp: {}\n");
  const spec::Scenario no_sync = job(1, 4, "amp_bf16", "ddp: {no_sync: true}\n");
  const double one = 2.0 * 7 / 8 * psi(plain) * 4;
  CHECK(wire_bytes(plain).all_reduce == doctest::Approx(4 * one).epsilon(1e-9));
  CHECK(wire_bytes(no_sync).all_reduce == doctest::Approx(one).epsilon(1e-9));
}

TEST_CASE("FSDP FULL_SHARD: every block gathered twice per micro-step, once without reshard_after_forward")
{
  // A ring all-gather or reduce-scatter of S bytes sends (N-1)/N S from every rank. FULL_SHARD gathers each
  // block's unit in forward and again in backward; the root unit (embedding, final norm, LM head) stays
  // gathered from forward to backward (docs/fsdp.md §3): all-gather bytes = (N-1)/N b_p (2 Ψ_blocks + Ψ_root)
  // per micro-step; SHARD_GRAD_OP (and FSDP2 reshard_after_forward: false) gathers each unit once:
  // (N-1)/N b_p Ψ. Every unit reduce-scatters once per micro-step: (N-1)/N b_r Ψ. Padding of the flat
  // parameters to a multiple of N adds at most N-1 elements per unit (tolerance 1e-6).
  const spec::Scenario s = job(1, 2, "bf16", "fsdp: {sharding_strategy: FULL_SHARD}\n");
  const workload::Workload wl = workload::build_workload(s.model, workload::workload_options(s));
  double blocks = 0;
  for (const auto& l : wl.layers)
    if (l.block >= 0)
      for (const auto& p : l.params)
        blocks += static_cast<double>(p.numel);
  const double root = static_cast<double>(wl.params) - blocks;
  const double n = s.dp(), g = 2, b = 2;
  const Wire full = wire_bytes(s);
  CHECK(full.all_gather == doctest::Approx(g * (n - 1) / n * b * (2 * blocks + root)).epsilon(1e-6));
  CHECK(full.reduce_scatter == doctest::Approx(g * (n - 1) / n * b * (blocks + root)).epsilon(1e-6));
  for (const char* once : {"fsdp: {sharding_strategy: SHARD_GRAD_OP}\n", "fsdp: {reshard_after_forward: false}\n"}) {
    CAPTURE(once);
    const Wire w = wire_bytes(job(1, 2, "bf16", once));
    CHECK(w.all_gather == doctest::Approx(g * (n - 1) / n * b * (blocks + root)).epsilon(1e-6));
    CHECK(w.reduce_scatter == doctest::Approx(full.reduce_scatter).epsilon(1e-6));
  }
  CHECK(full.all_reduce < 1e-3 * full.reduce_scatter); // nothing but scalars is all-reduced
}

TEST_CASE("FSDP: an fp32 reduce_dtype doubles the reduce-scatter bytes")
{
  // mixed_precision.reduce_dtype sets the gradient's dtype on the wire (docs/fsdp.md §6): fp32 4 B against
  // bf16 2 B; the all-gathers stay in param_dtype (bf16).
  const Wire bf16 = wire_bytes(job(2, 1, "bf16", "fsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: bf16}}\n"));
  const Wire fp32 = wire_bytes(job(2, 1, "bf16", "fsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}\n"));
  CHECK(fp32.reduce_scatter == doctest::Approx(2 * bf16.reduce_scatter).epsilon(1e-12));
  CHECK(fp32.all_gather == doctest::Approx(bf16.all_gather).epsilon(1e-12));
  CHECK(fp32.reduce_scatters == bf16.reduce_scatters);
}

TEST_CASE("optimizer_impl: AdamW's step moves 80 B/elem foreach, 88 single_tensor, 28 fused, as measured on an H100")
{
  // docs/ddp.md "Optimizer". The optimizer task of the single-GPU Llama-3.2-1B step measured on an H100
  // (results/measurements/h100-2026-11-27/training-step: foreach 37.0 ms, AdamW(fused=True) 13.0 ms): the fused step
  // moves 28 of foreach's 80 bytes per element, so its time is within 15 % of the measured 13.0 ms, and the ratio
  // of the two is the bytes' ratio.
  const std::string file = std::string(ZEROSIM_SOURCE_DIR) +
                           "/results/measurements/h100-2026-11-27/training-step/l1b_s4096_b2_none_amp.yaml";
  std::map<std::string, double> ms;
  for (const char* impl : {"foreach", "single_tensor", "fused"}) {
    config::LoadOptions o;
    o.sets = {std::string("training.optimizer_impl=") + impl};
    const spec::Scenario s = config::load_scenario(file, o);
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    const engine::Timeline tl = run::simulate_step(s, w);
    const auto& rk = tl.ranks.at(0);
    for (std::size_t t = 0; t < rk.graph.tasks.size(); ++t)
      if (rk.graph.tasks[t].name == "step.optimizer") {
        ms[impl] = 1e3 * (rk.times[t].end - rk.times[t].start);
        const double elements = static_cast<double>(rk.graph.tasks[t].elements);
        const double per_elem = std::string(impl) == "fused" ? 28 : std::string(impl) == "foreach" ? 80 : 88;
        CHECK(rk.graph.tasks[t].mem_bytes == doctest::Approx(per_elem * elements));
      }
  }
  REQUIRE(ms.size() == 3);
  CHECK(ms["fused"] == doctest::Approx(13.0).epsilon(0.15).scale(0));
  CHECK(ms["foreach"] == doctest::Approx(37.0).epsilon(0.15).scale(0));
  CHECK(ms["foreach"] / ms["fused"] == doctest::Approx(80.0 / 28.0).epsilon(0.02).scale(0));
  CHECK(ms["single_tensor"] > ms["foreach"]);
}

TEST_CASE("the H100 steps' peak memory: allocated within 2 %, reserved within 10 % of the measured steady state")
{
  // A data check (issue 27): the five single-GPU Llama steps measured on an H100
  // (results/measurements/h100-2026-11-27/training-step, raw/results.jsonl `steady_max_allocated` and
  // `steady_max_reserved`, bytes / 2^30 below), predicted in issue order. Allocated rests on what HF's Llama saves
  // under autocast (docs/workload.md §4.1); reserved on the caching allocator replayed over the steps with the
  // forward op by op and foreach AdamW's sqrt as one tensor per parameter (docs/memory.md §2.1).
  struct Measured {
    const char* file;
    double allocated_gib, reserved_gib;
  };
  const Measured steps[] = {{"l1b_s4096_b2_none_amp", 45.7998, 48.3867},
                            {"l1b_s4096_b2_full_amp", 29.2217, 34.8418},
                            {"tl_s2048_b4_none_amp", 35.9284, 38.3770},
                            {"l1b_s2048_b1_none_amp", 23.5821, 26.0332},
                            {"l1b_s4096_b2_none_bf16", 43.2677, 45.9922}};
  constexpr double GIB = 1024.0 * 1024.0 * 1024.0;
  for (const Measured& m : steps) {
    CAPTURE(m.file);
    const spec::Scenario s = config::load_scenario(
        std::string(ZEROSIM_SOURCE_DIR) + "/results/measurements/h100-2026-11-27/training-step/" + m.file + ".yaml");
    const memory::MemoryReport r = run::analyze_memory(s);
    CHECK(static_cast<double>(r.gpu) / GIB == doctest::Approx(m.allocated_gib).epsilon(0.02).scale(0));
    CHECK(static_cast<double>(r.gpu_reserved) / GIB == doctest::Approx(m.reserved_gib).epsilon(0.10).scale(0));
  }
}
