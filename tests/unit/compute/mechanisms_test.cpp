// Physics tests of the compute model's mechanisms (docs/compute.md §1.6-§1.8): host dispatch, sustained clocks
// under a power cap, autocast copies. Each is checked against a published figure or a derivation independent of
// the code (a parameter count from the model's shape), and each ablation switch restores the old time exactly.
// Checks that only restate calibration/kernels.yaml or a node file are labelled "data check".
#include "compute_test_util.hpp"

#include "compute/compute_model.hpp"
#include "config/scenario_loader.hpp"
#include "core/error.hpp"
#include "schedule/schedule_builder.hpp"
#include "schedule/step_graph.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

using namespace zerosim;
using workload::Op;
using workload::OpKind;

namespace {

const std::string SRC = ZEROSIM_SOURCE_DIR;

/// compute::test::gemm with its 16-bit operands' HBM bytes (A, B and C once forward, twice backward).
Op gemm(std::int64_t m, std::int64_t n, std::int64_t k)
{
  Op op = compute::test::gemm(m, n, k);
  op.fwd_bytes = 2.0 * double(m * k + k * n + m * n);
  op.bwd_bytes = 2.0 * op.fwd_bytes;
  return op;
}

/// A workload of one layer holding `ops` (no parameters: no framework hooks).
workload::Workload one_layer(std::vector<Op> ops)
{
  workload::Workload w;
  workload::Layer l;
  l.name = "probe";
  l.ops = std::move(ops);
  w.layers.push_back(l);
  return w;
}

spec::Task layer_task(spec::Phase ph)
{
  spec::Task t;
  t.kind = spec::TaskKind::COMPUTE;
  t.phase = ph;
  t.layer = 0;
  t.name = "probe";
  return t;
}

/// The first COMPUTE task of `phase` for layer `name` in rank 0's step graph.
const spec::Task& find_task(const spec::TaskGraph& g, const workload::Workload& w, spec::Phase phase,
                            const std::string& name)
{
  for (const spec::Task& t : g.tasks)
    if (t.kind == spec::TaskKind::COMPUTE && t.phase == phase && t.layer >= 0 &&
        w.layers[static_cast<std::size_t>(t.layer)].name == name)
      return t;
  FAIL("no task for layer " << name);
  return g.tasks.front();
}

} // namespace

TEST_CASE("host dispatch: a small GEMM from eager PyTorch takes the published host-bound loop time")
{
  // pytorch/pytorch#161822: torch.matmul of 512x512 bf16 CUDA tensors in a loop, 8.25-8.56 us per call, no
  // autograd; recording the autograd node adds 6.8 - 5.0 = 1.8 us (pytorch/pytorch#41383). The GEMM itself is
  // 2.7e8 FLOPs, a fraction of a microsecond on an H100: the host bounds it.
  spec::Scenario s = config::load_scenario(SRC + "/scenarios/llama3-8b-fsdp-8xh100.yaml");
  s.software.compile = false;
  const workload::Workload w = one_layer({gemm(512, 512, 512)});
  const double measured = 8.4e-6 + 1.8e-6;
  const double t = compute::compute_task_time(layer_task(spec::Phase::FORWARD), w, s);
  CHECK(t == doctest::Approx(measured).epsilon(0.05).scale(0));
  // Without the host the GEMM is priced as the GPU runs it: several times faster than any eager loop.
  s.mechanisms.host_dispatch = false;
  const double gpu_only = compute::compute_task_time(layer_task(spec::Phase::FORWARD), w, s);
  CHECK(gpu_only < measured / 2);
}

TEST_CASE("host dispatch: an op range outside the layer is an error for the GPU and the host time alike")
{
  const spec::Scenario s = config::load_scenario(SRC + "/scenarios/llama3-8b-fsdp-8xh100.yaml");
  const workload::Workload w = one_layer({gemm(512, 512, 512), gemm(512, 512, 512)});
  spec::Task t = layer_task(spec::Phase::FORWARD);
  for (const auto& [begin, end] : {std::pair{0, 3}, std::pair{2, 1}, std::pair{-1, 1}}) {
    CAPTURE(begin);
    CAPTURE(end);
    t.op_begin = begin;
    t.op_end = end;
    CHECK_THROWS_AS(compute::compute_task_time(t, w, s), core::InternalError);
    CHECK_THROWS_AS(compute::host_task_time(t, w, s), core::InternalError);
  }
  // A part of the layer is host work without the layer's hooks; [0, every op) is the whole layer, as op_end -1.
  t.op_begin = 0;
  t.op_end = 2;
  const double explicit_end = compute::host_task_time(t, w, s);
  t.op_end = -1;
  CHECK(compute::host_task_time(t, w, s) == explicit_end);
}

TEST_CASE("host dispatch: a compute-bound block is unchanged, the switch restores the GPU time exactly")
{
  // Llama-2-7B, micro-batch 4 at 4096 tokens on an A100: a block forward of ~30 ms against a few hundred us of
  // dispatch (docs/compute.md §4).
  spec::Scenario s = config::load_scenario(SRC + "/scenarios/llama2-7b-dgx-a100-80gb-zero2.yaml");
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const spec::TaskGraph g = schedule::build_step_graph(s, w);
  for (const spec::Phase ph : {spec::Phase::FORWARD, spec::Phase::BACKWARD}) {
    const spec::Task& t = find_task(g, w, ph, "block.0");
    const double on = compute::compute_task_time(t, w, s);
    CHECK(compute::host_task_time(t, w, s) < on / 20);
    s.mechanisms.host_dispatch = false;
    CHECK(compute::compute_task_time(t, w, s) == on);
    s.mechanisms.host_dispatch = true;
  }
}

TEST_CASE("host dispatch: with few tokens the block is host-bound, and torch.compile lowers the bound")
{
  // GPT-2 XL at micro-batch 1 and 32 tokens: every GEMM reads its weights (61 MB a block) in tens of microseconds
  // on an A100, against some twenty launches of ~10 us. (Llama-2-7B's 404 MB of block weights keep its GPU time
  // above the host's even at 32 tokens.)
  config::LoadOptions lo;
  lo.sets = {"training.seq_len=32", "training.micro_batch=1"};
  spec::Scenario s = config::load_scenario(SRC + "/scenarios/gpt2-xl-ddp-dgx-a100-80gb.yaml", lo);
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const spec::TaskGraph g = schedule::build_step_graph(s, w);
  const spec::Task& fwd = find_task(g, w, spec::Phase::FORWARD, "block.0");
  s.software.compile = false;
  s.mechanisms.copies = false; // autocast's casts (another 184 MB a block) are GPU work the host hides
  const double eager = compute::host_task_time(fwd, w, s);
  s.mechanisms.host_dispatch = false;
  const double gpu = compute::compute_task_time(fwd, w, s);
  s.mechanisms.host_dispatch = true;
  CHECK(eager > gpu);
  CHECK(compute::compute_task_time(fwd, w, s) == eager);
  // torch.compile on 2.4+: elementwise runs fuse and each launch is Inductor's 9 us (tritonbench#1017), so the
  // host bound falls; on torch 2.2 the Triton launcher was 2.2x slower (triton-lang/triton#3638).
  s.software.compile = true;
  s.software.torch = "2.4";
  const double compiled = compute::host_task_time(fwd, w, s);
  CHECK(compiled < eager);
  // Data check, not physics: kernels.yaml's compiled launch is 20 us on torch 2.2 and 9 us on 2.4 (the two
  // published figures above), and a compiled block's host time is its launches times that figure.
  s.software.torch = "2.2";
  CHECK(compute::host_task_time(fwd, w, s) == doctest::Approx(compiled * 20.0 / 9.0).epsilon(1e-9));
}

TEST_CASE("sustained clock: a GEMM under a 400 W cap on an H100 slows as the H100 NVL's datasheet peak")
{
  // NVIDIA H100 datasheet: SXM 989 dense BF16 TFLOPS at 700 W, NVL 835 at 400 W (the same GH100 die).
  // The model's (400/700)^(1/3) clock must give the published ratio 989/835 = 1.184 within 3 %.
  // gpu_efficiency() itself applies the GPU's power cap (the scenario's Grand Teton H100s run capped at 500 W, so
  // the uncapped SXM is that GPU without a cap).
  const spec::Scenario s = config::load_scenario(SRC + "/scenarios/llama3-8b-fsdp-8xh100.yaml");
  spec::GpuSpec gpu = s.cluster.node.gpu;
  gpu.power_limit_W = 0; // no cap: the SXM at its 700 W
  gpu.tdp_W = 700;
  compute::GpuEfficiency e = compute::gpu_efficiency(gpu, s.software, s.kernels);
  REQUIRE(e.clock == 1.0);
  const Op big = gemm(16384, 16384, 16384);
  const double full = compute::op_time(big, false, gpu, spec::Precision::BF16, e);
  gpu.power_limit_W = 400;
  e = compute::gpu_efficiency(gpu, s.software, s.kernels);
  CHECK(e.clock == compute::sustained_clock(gpu, s.kernels));
  const double capped = compute::op_time(big, false, gpu, spec::Precision::BF16, e);
  CHECK(capped / full == doctest::Approx(989.0 / 835.0).epsilon(0.03).scale(0));
  // HBM is not clocked by the SMs: a memory-bound op keeps its time.
  Op copy;
  copy.kind = OpKind::ELEMENTWISE;
  copy.fwd_bytes = 1e9;
  e.clock = 1.0;
  const double mem_full = compute::op_time(copy, false, gpu, spec::Precision::BF16, e);
  e.clock = compute::sustained_clock(gpu, s.kernels);
  CHECK(compute::op_time(copy, false, gpu, spec::Precision::BF16, e) == mem_full);
}

TEST_CASE("sustained clock, data check: torchtitan's 500 W Grand Teton H100s, and no cap means the full clock")
{
  // Not a physics test (the H100 NVL datasheet test above is): the node file's power figures and the code's
  // formula (limit / tdp)^exponent restated with the shipped exponent 1/3 (kernels.yaml power.clock_exponent), so
  // that a changed node file or exponent is noticed.
  const spec::NodeSpec gt = config::load_node(SRC + "/topologies/grand-teton-h100-96gb.yaml");
  CHECK(gt.gpu.power_limit_W == 500);
  CHECK(gt.gpu.tdp_W == 700);
  const spec::KernelTable& k = config::shipped_kernel_table();
  CHECK(compute::sustained_clock(gt.gpu, k) == doctest::Approx(std::pow(500.0 / 700.0, 0.3333)).epsilon(1e-12));
  CHECK(compute::sustained_clock(config::load_node(SRC + "/topologies/dgx-h100.yaml").gpu, k) == 1.0);
  // gpu_efficiency() carries the clock for every caller; a scenario prices with it unless `clock` is off.
  CHECK(compute::gpu_efficiency(gt.gpu, {}, k).clock == compute::sustained_clock(gt.gpu, k));
  spec::Scenario s = config::load_scenario(SRC + "/scenarios/llama3-8b-fsdp-8xh100.yaml");
  CHECK(compute::gpu_efficiency(s).clock == compute::sustained_clock(gt.gpu, k));
  s.mechanisms.sustained_clock = false;
  CHECK(compute::gpu_efficiency(s).clock == 1.0);
}

TEST_CASE("copies: DDP's autocast casts a GPT-2 XL block's linear weights every forward, at HBM speed")
{
  // GPT-2 XL (h = 1600, bias): a block's linear weights are 12 h^2 and its biases 9 h (qkv 3h, proj h, fc 4h,
  // proj h). autocast reads each in fp32 and writes it in bf16: 6 B per element, four GEMM weights = four casts.
  spec::Scenario s = config::load_scenario(SRC + "/scenarios/gpt2-xl-ddp-dgx-a100-80gb.yaml");
  REQUIRE(s.training.precision == spec::Precision::AMP_BF16);
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const spec::TaskGraph g = schedule::build_step_graph(s, w);
  const spec::Task& fwd = find_task(g, w, spec::Phase::FORWARD, "block.0");
  s.mechanisms.host_dispatch = false;
  const double with = compute::compute_task_time(fwd, w, s);
  s.mechanisms.copies = false;
  const double without = compute::compute_task_time(fwd, w, s);
  const double h = 1600;
  const double elements = 12 * h * h + 9 * h;
  const compute::GpuEfficiency e = compute::gpu_efficiency(s.cluster.node.gpu, s.software, s.kernels);
  const double expected = 6 * elements / (s.cluster.node.gpu.memory_bandwidth_Bps * e.hbm) + 4 * 2e-6;
  CHECK(with - without == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE(
    "kernels.yaml host: section, data check: every figure is read with its source, a bad one names file, line and key")
{
  // Not physics: the shipped figures as kernels.yaml writes them (their sources are the published measurements
  // the host-dispatch tests above check against), and the reader's errors.
  const spec::KernelTable& k = config::shipped_kernel_table();
  REQUIRE(k.host.size() >= 2);
  CHECK(spec::host_generation(k.host, "1.13").eager_op.value == doctest::Approx(10e-6));
  CHECK(spec::host_generation(k.host, "2.7").compiled_op.value == doctest::Approx(9e-6));
  CHECK(spec::host_generation(k.host, "2.2").compiled_op.value == doctest::Approx(20e-6));
  CHECK_FALSE(spec::host_generation(k.host, "2.4").hook_param.source.empty());
  CHECK(k.nccl_ctas.value == 24);
  CHECK(k.clock_power_exponent.value == doctest::Approx(1.0 / 3).epsilon(1e-3));
  // A kind's own one-node CTA count (V100: NCCL's search, 6 channels over 6 NVLinks, doubled) wins over the
  // table's; a kind without one takes the table's.
  CHECK(k.one_node_ctas(k.kind_of("Tesla V100-SXM2-32GB")) == 12);
  CHECK(k.one_node_ctas(k.kind_of("A100-SXM4-80GB")) == 24);
  CHECK_FALSE(k.kind_of("Tesla V100-SXM2-32GB").nccl_ctas.source.empty());

  // A host figure out of range: the reader's error names the file, the line and the dotted key.
  const std::string text = R"(kinds:
  generic:
    sms: 108
    hbm: {value: 0.8, status: stated, source: "s"}
    gemm: [{torch: "1.0", value: 0.8, status: stated, source: "s"}]
    attention: {flash2: {value: 0.5, status: stated, source: "s"}}
host:
  - torch: "1.0"
    eager_op: {value: 5000, status: stated, source: "s"}
    backward_op: {value: 7, status: stated, source: "s"}
    compiled_op: {value: 9, status: stated, source: "s"}
    hook_param: {value: 20, status: stated, source: "s"}
)";
  const std::filesystem::path p = std::filesystem::temp_directory_path() / "zerosim_kernels_host_test.yaml";
  {
    std::ofstream f(p);
    f << text;
  }
  try {
    (void)config::load_kernel_table(p.string());
    FAIL("expected an input error");
  } catch (const core::InputError& e) {
    const std::string m = e.what();
    CHECK(m.find(p.string() + ":9:") != std::string::npos);
    CHECK(m.find("host[0].eager_op.value") != std::string::npos);
  }
  std::filesystem::remove(p);

  // A kind's nccl_ctas below 1: the error names the file, the line and the dotted key.
  const std::string bad_ctas = R"(kinds:
  generic:
    sms: 108
    nccl_ctas: {value: 0, status: stated, source: "s"}
    hbm: {value: 0.8, status: stated, source: "s"}
    gemm: [{torch: "1.0", value: 0.8, status: stated, source: "s"}]
    attention: {flash2: {value: 0.5, status: stated, source: "s"}}
)";
  try {
    (void)config::load_kernel_table_text(bad_ctas, "bad_ctas.yaml");
    FAIL("expected an input error");
  } catch (const core::InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("bad_ctas.yaml:4:") != std::string::npos);
    CHECK(m.find("kinds.generic.nccl_ctas.value") != std::string::npos);
  }
}
