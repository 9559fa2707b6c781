// Inference requests replayed (docs/inference.md): the decode time per token against the bandwidth that streams
// the weights, the sampled decode passes against simulating every pass, and the request's figures (metrics, JSON,
// summary). Every expected value is a formula stated beside it.
#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "metrics/run_metrics.hpp"
#include "report/run_report.hpp"
#include "run/run_scenario.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

using namespace zerosim;

namespace {

const std::string SRC = ZEROSIM_SOURCE_DIR;

// BLOOM-176B's shape (models/bloom-176b.yaml).
constexpr double H = 14336, V = 250880, L = 70;

spec::Scenario bloom(std::vector<std::string> sets)
{
  config::LoadOptions o;
  o.sets = std::move(sets);
  return config::load_scenario(SRC + "/scenarios/bloom-176b-inference-1xa100-nvme.yaml", o);
}

struct Run {
  workload::Workload w;
  engine::Timeline t;
  metrics::RunMetrics m;
};

Run simulate_request(const spec::Scenario& s, int sampled = schedule::INFERENCE_SAMPLED_DECODE_PASSES)
{
  Run r;
  r.w = workload::build_workload(s.model, workload::workload_options(s));
  run::RunOptions o;
  o.step.sampled_decode_passes = sampled;
  r.t = run::simulate_step(s, r.w, o);
  r.m = metrics::compute_metrics(s, r.w, r.t);
  return r;
}

} // namespace

TEST_SUITE("engine")
{
  TEST_CASE("inference: BLOOM-176B's decode time per token is the weights over the bandwidth that streams them")
  {
    // Per decode pass the weights cross NVMe -> host -> GPU (docs/inference.md): NVMe reads
    // (l·12h² + 2·V·h)·2 B and host-to-GPU copies (l·(12h² + 7h) + 2·V·h)·2 B (inference_test.cpp derives both).
    // The time per output token is at least the larger of bytes / bandwidth over the two paths.
    const double nvme_bytes = (L * 12 * H * H + 2 * V * H) * 2;
    const double h2d_bytes = (L * (12 * H * H + 7 * H) + 2 * V * H) * 2;

    SUBCASE("the shipped scenario: NVMe striped over the DGX A100's 8 drives (8 x 7 GB/s), PCIe-bound at 25 GB/s")
    {
      // 25 GB/s host-to-GPU (dgx-a100-80gb.yaml pcie.bandwidth) is below 8 x 7.0 GB/s of the drives: PCIe bounds.
      // Upper bound 1.05 x: the last layer's forward and the first fetch of a pass are not overlapped (the per-pass
      // host sync of generate), a few tenths of a second of a 14 s pass.
      const Run r = simulate_request(bloom({"inference.generate_tokens=3"}));
      const double bound = std::max(h2d_bytes / 25e9, nvme_bytes / (8 * 7.0e9));
      REQUIRE(r.m.inference);
      const double tpot = r.m.inference->time_per_output_token_s.value();
      CHECK(tpot >= bound);
      CHECK(tpot <= 1.05 * bound);
      CHECK(static_cast<double>(r.m.inference->nvme_read_bytes_per_pass) == nvme_bytes);
      CHECK(static_cast<double>(r.m.inference->h2d_bytes_per_pass) == h2d_bytes);
    }

    SUBCASE("one NVMe drive (7 GB/s): NVMe-bound")
    {
      // nvme_bytes / 7 GB/s = 51 s per token; upper bound 1.15 x: the aio request latency (92 us per 8 MiB wave of
      // block_size x queue_depth, docs/engine.md: 92e-6 / (8 MiB / 7 GB/s) = 7.7 %) and the unoverlapped ends.
      const Run r = simulate_request(bloom({"inference.generate_tokens=3", "cluster.overrides.nvme.devices=1"}));
      const double bound = std::max(nvme_bytes / 7.0e9, h2d_bytes / 25e9);
      const double tpot = r.m.inference->time_per_output_token_s.value();
      CHECK(tpot >= bound);
      CHECK(tpot <= 1.15 * bound);
    }

    SUBCASE("offload_param cpu (pinned): PCIe-bound")
    {
      const Run r =
          simulate_request(bloom({"inference.generate_tokens=3",
                                  "deepspeed.zero_optimization.offload_param={device: cpu, pin_memory: true}"}));
      const double bound = h2d_bytes / 25e9;
      const double tpot = r.m.inference->time_per_output_token_s.value();
      CHECK(tpot >= bound);
      CHECK(tpot <= 1.05 * bound);
      CHECK(r.m.inference->nvme_read_bytes_per_pass == 0);
    }
  }

  TEST_CASE("inference: the sampled decode passes give the request time of every pass within 1e-3")
  {
    // A case with a kink: Llama-2-7B shapes (8 layers), CPU offload, batch 1024, prompt 700, 300 decode passes.
    // A decode pass is bound by the host-to-GPU weight copies until the attention over the growing KV cache
    // (2·8·4096·L·1024·2 B per pass) outlasts them, near L = 856: its time is affine in L on either side but not
    // across, so the linear interpolation between the sampled passes is not exact there.
    const std::string text =
        "name: kink\nmodel: " + SRC +
        "/models/llama2-7b.yaml\n"
        "cluster: {node: " +
        SRC +
        "/topologies/dgx-a100-80gb.yaml, nodes: 1, gpus_per_node: 1}\n"
        "training: {seq_len: 1024, precision: bf16, mode: inference}\n"
        "inference: {batch: 1024, prompt_tokens: 700, generate_tokens: 301}\n"
        "deepspeed: {zero_optimization: {stage: 3, offload_param: {device: cpu, pin_memory: true}}}\n";
    config::LoadOptions lo;
    lo.sets = {"model.layers=8"};
    const spec::Scenario s = config::load_scenario_text(text, "kink.yaml", lo);
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    auto request = [&](int sampled, metrics::InferenceMetrics* out) {
      run::RunOptions o;
      o.step.sampled_decode_passes = sampled;
      const metrics::InferenceMetrics im = metrics::inference_metrics(s, run::simulate_step(s, w, o));
      if (out != nullptr)
        *out = im;
      return im.request_time_s;
    };
    metrics::InferenceMetrics every;
    const double exact = request(0, &every);
    REQUIRE(every.simulated_passes == 301);
    // The kink is there: the last passes grow faster than the first ones (by the attention's share).
    const auto& d = every.pass_time_s;
    CHECK((d[300] - d[299]) > 1.1 * (d[2] - d[1]));
    for (int k : {schedule::INFERENCE_SAMPLED_DECODE_PASSES, 8}) {
      CAPTURE(k);
      metrics::InferenceMetrics sampled;
      const double approx = request(k, &sampled);
      CHECK(sampled.simulated_passes == k + 1);
      CHECK(std::abs(approx - exact) <= 1e-3 * exact);
      CHECK(sampled.prefill_time_s == doctest::Approx(every.prefill_time_s).epsilon(1e-12)); // simulated, not guessed
    }
  }

  TEST_CASE("inference: the request's figures add up and are reported")
  {
    // CPU offload keeps the replay small; 6 passes (the prompt's and 5 decode), 4 of them simulated (K = 3).
    const spec::Scenario s = bloom(
        {"inference.generate_tokens=6", "deepspeed.zero_optimization.offload_param={device: cpu, pin_memory: true}"});
    const Run r = simulate_request(s, 3);
    REQUIRE(r.m.inference);
    const metrics::InferenceMetrics& im = *r.m.inference;
    CHECK(im.passes == 6);
    CHECK(im.simulated_passes == 4); // 0 and 1 + round(i·4/2): 1, 3, 5
    double sum = 0;
    for (double p : im.pass_time_s)
      sum += p;
    CHECK(sum == doctest::Approx(im.request_time_s).epsilon(1e-15));
    // Passes 2 and 4 are the means of their neighbours (linear interpolation at the midpoint).
    CHECK(im.pass_time_s[2] == doctest::Approx((im.pass_time_s[1] + im.pass_time_s[3]) / 2).epsilon(1e-12));
    CHECK(im.pass_time_s[4] == doctest::Approx((im.pass_time_s[3] + im.pass_time_s[5]) / 2).epsilon(1e-12));
    CHECK(r.m.step_time_s == im.request_time_s);
    CHECK(im.prefill_time_s + im.decode_time_s == doctest::Approx(im.request_time_s).epsilon(1e-15));
    CHECK(im.time_per_output_token_s.value() == doctest::Approx(im.decode_time_s / 5).epsilon(1e-15));
    // Generated tokens of every GPU per second: dp · batch · G / request; prompt tokens over the prefill.
    CHECK(r.m.tokens_per_s == doctest::Approx(1.0 * 8 * 6 / im.request_time_s).epsilon(1e-15));
    CHECK(im.prompt_tokens_per_s == doctest::Approx(1.0 * 8 * 512 / im.prefill_time_s).epsilon(1e-15));
    CHECK(r.m.samples_per_s == doctest::Approx(8.0 / im.request_time_s).epsilon(1e-15));
    CHECK(r.m.micro_steps == 6);
    // Forward FLOPs of every pass over the request: TFLOPs = (prompt's + decode) / request / 1e12.
    CHECK(r.m.tflops_model ==
          doctest::Approx((r.w.model_flops + r.w.decode_flops) / im.request_time_s / 1e12).epsilon(1e-12));
    CHECK(r.m.tflops_hardware == r.m.tflops_model);
    // The breakdown covers the whole request (interpolated passes included), exactly.
    CHECK(r.m.breakdown.sum() == r.m.step_time_s);
    CHECK(r.m.breakdown.exposed_pcie > 0);
    CHECK(!r.m.time_to_train_s);
    CHECK(im.kv_cache_bytes == static_cast<std::int64_t>(2 * L * H * (512 + 6) * 8 * 2));

    const core::Json j = report::run_json(s, zerosim::run::RunResult{r.w, r.t, r.m, {}});
    REQUIRE(j.contains("inference"));
    const core::Json& inf = j.at("inference");
    CHECK(inf.contains("prefill_time_s"));
    CHECK(inf.contains("time_per_output_token_s"));
    CHECK(inf.contains("tokens_per_s"));
    CHECK(inf.contains("prompt_tokens_per_s"));
    std::ostringstream out;
    report::write_run_summary(out, s, zerosim::run::RunResult{r.w, r.t, r.m, {}});
    CHECK(out.str().find("time per output token") != std::string::npos);
    CHECK(out.str().find("4 of 6 forward passes simulated") != std::string::npos);
  }
}
