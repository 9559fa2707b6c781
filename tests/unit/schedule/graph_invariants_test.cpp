// Structural invariants of every graph the schedule builds: issue order, dependencies and the
// balance of the memory events (docs/schedule.md "Invariants"; docs/deepspeed-schedule.md is cited as §n).
#include "core/error.hpp"
#include "schedule_test_util.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

TEST_SUITE("schedule")
{
  TEST_CASE("schedule: every stage and offload placement gives a balanced, ordered graph")
  {
    // Uneven tensors (N does not divide them) exercise the padding and boundary-straddling paths.
    const auto w = synthetic(
        6, {{"attn.qkv.weight", 30001}, {"attn.qkv.bias", 91}, {"mlp.fc.weight", 47003}, {"ln.weight", 97}}, 5000, 3e8);
    using OD = spec::OffloadDevice;
    for (int stage = 0; stage <= 3; ++stage)
      for (int g : {1, 3})
        for (bool overlap : {false, true})
          for (OD opt : {OD::NONE, OD::CPU, OD::NVME})
            for (OD par : {OD::NONE, OD::CPU, OD::NVME}) {
              if ((stage == 0 && opt != OD::NONE) || (stage < 3 && par != OD::NONE))
                continue;
              for (std::string ver : {"0.19", "0.16"}) {
                spec::Scenario s = scenario(stage, 4, g);
                if (stage == 0 && ver == "0.16")
                  s.training.precision = spec::Precision::FP16; // bf16 runs BF16_Optimizer there (§14)
                s.deepspeed_version = ver;
                s.deepspeed.zero.overlap_comm = overlap;
                s.deepspeed.zero.reduce_bucket_size = 60000;
                s.deepspeed.zero.stage3_prefetch_bucket_size = 50000;
                s.deepspeed.zero.stage3_max_reuse_distance = 200000;
                s.deepspeed.zero.sub_group_size = 150000; // several sub-groups
                s.deepspeed.zero.offload_optimizer.device = opt;
                s.deepspeed.zero.offload_optimizer.ratio = 0.5; // Twin-Flow: GPU and CPU sub-groups
                s.deepspeed.zero.offload_param.device = par;
                s.deepspeed.zero.offload_param.max_in_cpu = 100000; // part of the params on NVMe
                s.deepspeed.aio.block_size = 4096;
                s.deepspeed.communication_data_type = spec::Dtype::FP32; // cast copies
                s.training.activation_checkpointing = spec::Checkpointing::FULL;
                const TaskGraph gr = build_step_graph(s, w, 1);
                check_invariants(gr, "stage " + std::to_string(stage) + " g " + std::to_string(g) + " overlap " +
                                         std::to_string(overlap) + " opt " + std::to_string(static_cast<int>(opt)) +
                                         " param " + std::to_string(static_cast<int>(par)) + " " + ver);
                CHECK(gr.micro_steps == g);
                CHECK(gr.dp == 4);
              }
            }
  }

  TEST_CASE("schedule: compute tasks follow the layers, with recompute before backward under checkpointing")
  {
    const int layers = 5, g = 2;
    const auto w = synthetic(layers, {{"mlp.fc.weight", 4000}}, 1000, 7e8);
    spec::Scenario s = scenario(2, 2, g);
    s.training.activation_checkpointing = spec::Checkpointing::FULL;
    const TaskGraph gr = build_step_graph(s, w);
    int fwd = 0, bwd = 0, rec = 0;
    for (const Task& t : gr.tasks) {
      if (t.kind != TaskKind::COMPUTE)
        continue;
      fwd += t.phase == Phase::FORWARD;
      bwd += t.phase == Phase::BACKWARD;
      rec += t.phase == Phase::RECOMPUTE;
      if (t.phase == Phase::RECOMPUTE)
        CHECK(t.flops == doctest::Approx(7e8));
    }
    // one forward, one backward and one recompute per layer and micro-step: layers x g each
    CHECK(fwd == layers * g);
    CHECK(bwd == layers * g);
    CHECK(rec == layers * g);
    const int r = find_task(gr, "mb1.recompute.block.3");
    const int b = find_task(gr, "mb1.bwd.block.3");
    REQUIRE(r >= 0);
    CHECK(b == r + 1); // recompute is issued right before the block's backward
    // Activations: the kept bytes of every layer are live at the end of forward: layers x 1000.
    CHECK(transient_peak(gr, MemCategory::ACTIVATIONS) >= layers * 1000);
  }

  TEST_CASE("schedule: configurations not modelled yet are refused with UnsupportedError")
  {
    const auto w = synthetic(2, {{"mlp.fc.weight", 100}});
    spec::Scenario s = scenario(2, 2, 1);
    s.training.mode = spec::Mode::INFERENCE; // inference is DeepSpeed's ZeRO-Inference only (docs/inference.md)
    s.framework = spec::Framework::DDP;
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    s = scenario(2, 2, 1);
    s.training.precision = spec::Precision::AMP_BF16;
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    s = scenario(1, 2, 1);
    s.deepspeed.zero.offload_param.device = spec::OffloadDevice::CPU;
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    s = scenario(0, 2, 1);
    s.deepspeed_version = "0.16"; // bf16 stage 0 on 0.16: BF16_Optimizer (§14)
    CHECK_THROWS_AS(build_step_graph(s, w), core::UnsupportedError);
    s = scenario(3, 2, 1);
    CHECK_THROWS_AS(build_step_graph(s, w, 2), core::InputError); // rank 2 of a 2-GPU job
  }

  TEST_CASE("schedule: a 70B-class ZeRO-3 step with g=16 builds quickly")
  {
    // Llama-2-70B shapes (h 8192, GQA kv 1024, ffn 28672, vocab 32000): 80 blocks + embedding,
    // final norm and LM head = 83 layers.
    workload::Workload w = synthetic(80, {{"attn.q.weight", 8192LL * 8192},
                                          {"attn.k.weight", 8192LL * 1024},
                                          {"attn.v.weight", 8192LL * 1024},
                                          {"attn.o.weight", 8192LL * 8192},
                                          {"mlp.gate.weight", 8192LL * 28672},
                                          {"mlp.up.weight", 8192LL * 28672},
                                          {"mlp.down.weight", 8192LL * 28672},
                                          {"ln1.weight", 8192},
                                          {"ln2.weight", 8192}});
    workload::Layer emb;
    emb.name = "embed";
    emb.params = {{"weight", 32000LL * 8192, "embed"}};
    w.layers.insert(w.layers.begin(), emb);
    workload::Layer fn;
    fn.name = "final_norm";
    fn.params = {{"weight", 8192, "final_norm"}};
    w.layers.push_back(fn);
    workload::Layer head;
    head.name = "lm_head";
    head.params = {{"weight", 32000LL * 8192, "lm_head"}};
    w.layers.push_back(head);
    REQUIRE(w.layers.size() == 83);
    spec::Scenario s = scenario(3, 64, 16);
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    const TaskGraph gr = build_step_graph(s, w);
    check_invariants(gr, "70B");
    // Its build time is measured by bench/ (BM_schedule_build), not here.
  }

  TEST_CASE("schedule: accumulation reuse builds the first micro-steps and the last, under its real label")
  {
    // simulated_micro_steps = 3 of g = 9: micro-steps 0 and 1 as built, then 8 (the shifted 2); the graph is
    // exactly the full graph's tasks of those micro-steps and of the step (-1), in the same order.
    const auto w = synthetic(3, {{"attn.qkv.weight", 3000}, {"mlp.fc.weight", 5000}});
    for (int stage : {0, 1, 2, 3}) {
      CAPTURE(stage);
      const spec::Scenario s = scenario(stage, 4, 9);
      const TaskGraph full = build_step_graph(s, w);
      StepOptions o;
      o.simulated_micro_steps = 3;
      const TaskGraph part = build_step_graph(s, w, 0, o);
      check_invariants(part, "reused");
      CHECK(part.micro_steps == 9);
      std::vector<std::string> want;
      for (const Task& t : full.tasks)
        if (t.micro_step <= 1 || t.micro_step == 8)
          want.push_back(t.name);
      std::vector<std::string> have;
      for (const Task& t : part.tasks) {
        have.push_back(t.name);
        CHECK((t.micro_step <= 1 || t.micro_step == 8));
      }
      CHECK(have == want);
      // Buffer names follow: no "mb2." is left.
      for (const Buffer& b : part.buffers)
        CHECK(b.name.rfind("mb2.", 0) != 0);
      // g at most 3: the whole graph.
      const TaskGraph whole = build_step_graph(scenario(stage, 4, 3), w, 0, o);
      CHECK(whole.micro_steps == 3);
    }
  }
}
