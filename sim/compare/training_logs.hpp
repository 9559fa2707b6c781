// The measured figures in the logs of real training runs, in the formats as the frameworks print them
// (docs/compare.md): Megatron-LM / Megatron-DeepSpeed iteration lines, DeepSpeed's throughput-timer lines, the
// Hugging Face Trainer's trainer_state.json and train metrics, torchtitan's step lines. Pure text parsing: no
// simulation, no files but the one read.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace zerosim::compare {

enum class LogFormat { MEGATRON, DEEPSPEED_TIMER, HF_TRAINER, TORCHTITAN };

const char* to_string(LogFormat f);

/// One figure a log gives, per step where it gives one per step.
enum class LogFigure {
  STEP_TIME_S,          ///< seconds per optimizer step
  SAMPLES_PER_S,        ///< sequences per second, all GPUs
  TOKENS_PER_S_PER_GPU, ///< tokens per second per GPU
  TFLOPS_MODEL,         ///< per GPU, without the recomputed forward
  TFLOPS_HARDWARE,      ///< per GPU, the recomputed forward counted
  MFU,                  ///< a fraction
  PEAK_ALLOCATED_BYTES, ///< torch.cuda.max_memory_allocated
  PEAK_RESERVED_BYTES   ///< torch.cuda.max_memory_reserved
};

const char* to_string(LogFigure f);

/// One step's (or the run's) figures as the log gives them.
struct LogStep {
  long step = 0; ///< the iteration / step number the log prints (0 when the log gives run totals only)
  std::vector<std::pair<LogFigure, double>> figures;
};

struct TrainingLog {
  std::string file;
  LogFormat format = LogFormat::MEGATRON;
  std::vector<LogStep> steps;       ///< in log order
  std::optional<long> global_batch; ///< sequences per step, when the log says
  std::optional<long> seq_len;      ///< tokens per sequence, when the log says
  std::vector<std::string> notes;   ///< how a figure was read (its definition)
};

/// Reads `file`, recognises its format from its content and parses it. Throws core::InputError naming the file for
/// one that cannot be read, whose format is none of the four, or that has no step lines.
TrainingLog read_training_log(const std::string& file);

/// The same on text already read (`file` names it in errors).
TrainingLog parse_training_log(const std::string& text, const std::string& file);

/// A figure's value over the steps after the first `skip` that give it (warm-up): the median, or nothing when no step
/// is left. A peak of memory is the largest the log printed (no step skipped); a log of run totals only
/// (trainer_state.json's summary) gives its one value whatever `skip`. `used`: how many values it took.
std::optional<double> steady_value(const TrainingLog& log, LogFigure f, int skip, int* used = nullptr);

} // namespace zerosim::compare
