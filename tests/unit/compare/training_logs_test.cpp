// The training-log readers of `zerosim compare` (compare/training_logs.hpp, docs/compare.md) on published logs
// copied into tests/data/logs/ (its README gives each file's source). Every expected value is read off the fixture's
// own lines, named in the comment beside it.
#include "compare/training_logs.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace zerosim;
using namespace zerosim::compare;

namespace {

const std::string LOGS = std::string(ZEROSIM_SOURCE_DIR) + "/tests/data/logs/";
constexpr double MIB = 1024.0 * 1024.0;
constexpr double GIB = 1024.0 * MIB;

double value(const TrainingLog& log, LogFigure f, int skip = 2)
{
  const auto v = steady_value(log, f, skip);
  REQUIRE(v.has_value());
  return *v;
}

} // namespace

TEST_SUITE("compare")
{
  TEST_CASE("logs: Megatron iteration lines, the classic form with the time in seconds (jubench, 13B on 32 A100)")
  {
    const TrainingLog log = read_training_log(LOGS + "megatron-deepspeed-gpt13b-jubench-juwels-a100x32.log");
    CHECK(log.format == LogFormat::MEGATRON);
    REQUIRE(log.steps.size() == 4); // iterations 10, 20, 30, 40
    CHECK(log.steps.front().step == 10);
    CHECK(log.global_batch == 1024); // "global batch size:  1024"
    // Iterations 10 and 20 skipped; 30 and 40: "elapsed time per iteration (s): 34.8709" and "35.3346".
    CHECK(value(log, LogFigure::STEP_TIME_S) == doctest::Approx((34.8709 + 35.3346) / 2));
    CHECK(value(log, LogFigure::SAMPLES_PER_S) == doctest::Approx((29.365 + 28.980) / 2));
    CHECK(value(log, LogFigure::TFLOPS_HARDWARE) == doctest::Approx((204.71 + 202.02) / 2));
    // Nothing skipped: iteration 10's 35.8651 s is the largest of four, the median is (34.9991 + 35.3346) / 2.
    CHECK(value(log, LogFigure::STEP_TIME_S, 0) == doctest::Approx((34.9991 + 35.3346) / 2));
  }

  TEST_CASE("logs: Megatron iteration lines in ALCF's key=value form, with the memory report (8 A100)")
  {
    const TrainingLog log = read_training_log(LOGS + "megatron-deepspeed-ds-timer-alcf-keyed-polaris-a100x8.log");
    CHECK(log.format == LogFormat::MEGATRON);
    CHECK(log.global_batch == 256); // "global_batch_size=  256"
    CHECK(log.seq_len == 4096);     // "actual_seqlen= 4096"
    // samples_per_second of iterations 3-9: 15.929 15.931 15.947 15.908 15.894 15.824 15.823, median 15.908.
    CHECK(value(log, LogFigure::SAMPLES_PER_S) == doctest::Approx(15.908));
    // Iteration 1: "elapsed_time_per_iteration_ms=17711.7".
    CHECK(log.steps.front().step == 1);
    bool found = false;
    for (const auto& [f, v] : log.steps.front().figures)
      if (f == LogFigure::STEP_TIME_S) {
        CHECK(v == doctest::Approx(17.7117));
        found = true;
      }
    CHECK(found);
    // "(after 1 iterations) memory (MB) | ... | max allocated: 14024.81396484375 | ... | max reserved: 17240.0".
    CHECK(value(log, LogFigure::PEAK_ALLOCATED_BYTES) == doctest::Approx(14024.81396484375 * MIB));
    CHECK(value(log, LogFigure::PEAK_RESERVED_BYTES) == doctest::Approx(17240.0 * MIB));
  }

  TEST_CASE("logs: Megatron lines with only two iterations leave nothing after the default warm-up of two")
  {
    const TrainingLog log = read_training_log(LOGS + "megatron-deepspeed-ds-timer-alcf-polaris.log");
    CHECK(log.format == LogFormat::MEGATRON);
    CHECK(log.global_batch == 768);
    CHECK_FALSE(steady_value(log, LogFigure::STEP_TIME_S, 2).has_value());
    // With --skip 0: iterations 199 and 200, "elapsed time per iteration (ms): 14287.5" and "14541.4".
    CHECK(value(log, LogFigure::STEP_TIME_S, 0) == doctest::Approx((14.2875 + 14.5414) / 2));
  }

  TEST_CASE("logs: DeepSpeed's throughput timer in its 2022 form (0/20, RunningAvgSamplesPerSec=...)")
  {
    const TrainingLog log = read_training_log(LOGS + "deepspeed-timer-bert-base-squad-piz-daint.log");
    CHECK(log.format == LogFormat::DEEPSPEED_TIMER);
    REQUIRE(log.steps.size() == 3); // 0/20, 0/30, 0/40
    // After two skipped: 0/40's "CurrSamplesPerSec=227.7217889790298".
    CHECK(value(log, LogFigure::SAMPLES_PER_S) == doctest::Approx(227.7217889790298));
    // "MaxMemAllocated=15.06GB", DeepSpeed's GB of 2^30 bytes.
    CHECK(value(log, LogFigure::PEAK_ALLOCATED_BYTES) == doctest::Approx(15.06 * GIB));
  }

  TEST_CASE("logs: Hugging Face Trainer metrics, as trainer_state.json, train_results.json and the printed block")
  {
    const TrainingLog state = read_training_log(LOGS + "hf-trainer-state-qwen3-14b-lora-7gpu.json");
    CHECK(state.format == LogFormat::HF_TRAINER);
    // "train_samples_per_second": 14.427, "train_steps_per_second": 0.128 (run averages: nothing skipped).
    CHECK(value(state, LogFigure::SAMPLES_PER_S) == doctest::Approx(14.427));
    CHECK(value(state, LogFigure::STEP_TIME_S) == doctest::Approx(1.0 / 0.128));
    const TrainingLog results = read_training_log(LOGS + "hf-train-results-esm2-8m-ddp-eks-4gpu.json");
    CHECK(value(results, LogFigure::SAMPLES_PER_S) == doctest::Approx(359.439)); // top-level keys
    CHECK(value(results, LogFigure::STEP_TIME_S) == doctest::Approx(1.0 / 11.232));
    const TrainingLog printed = read_training_log(LOGS + "hf-train-metrics-esm2-8m-fsdp-eks-2gpu.log");
    CHECK(printed.format == LogFormat::HF_TRAINER);
    CHECK(steady_value(printed, LogFigure::SAMPLES_PER_S, 2).has_value());
    const TrainingLog history = read_training_log(LOGS + "hf-trainer-state-qwen2.5-0.5b-sft-rtx4090.json");
    CHECK(steady_value(history, LogFigure::SAMPLES_PER_S, 2).has_value());
  }

  TEST_CASE("logs: torchtitan step lines: tokens/s per GPU, model TFLOPs, MFU, reserved memory (8 H100)")
  {
    const TrainingLog log = read_training_log(LOGS + "torchtitan-llama3-8b-bf16-h100x8-torchao-docs.log");
    CHECK(log.format == LogFormat::TORCHTITAN);
    REQUIRE(log.steps.size() == 5); // steps 1, 10, 20, 30, 40
    // Steps 20, 30, 40 after two skipped: "tps: 6,321", "6,300", "6,291"; "mfu: 37.01%", "36.89%", "36.84%".
    CHECK(value(log, LogFigure::TOKENS_PER_S_PER_GPU) == doctest::Approx(6300));
    CHECK(value(log, LogFigure::MFU) == doctest::Approx(0.3689));
    // The largest "memory:" of the five, 30.89 GiB (step 1 printed 27.22).
    CHECK(value(log, LogFigure::PEAK_RESERVED_BYTES) == doctest::Approx(30.89 * GIB));
    const TrainingLog moe = read_training_log(LOGS + "torchtitan-qwen3-vl-30b-a3b-c4-h200x8.log");
    CHECK(moe.steps.size() == 18);
  }

  TEST_CASE("logs: a file in no known format, or with no step lines, is bad input naming the file")
  {
    CHECK_THROWS_WITH_AS(parse_training_log("hello\nworld\n", "x.log"), doctest::Contains("x.log: not a training log"),
                         core::InputError);
    CHECK_THROWS_WITH_AS(parse_training_log("elapsed time per iteration (ms) appears in a sentence\n", "y.log"),
                         "y.log: a Megatron iteration lines log with no step lines", core::InputError);
    CHECK_THROWS_WITH_AS(read_training_log(LOGS + "no-such.log"), doctest::Contains("cannot read the log"),
                         core::InputError);
  }
}
