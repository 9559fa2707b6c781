#include "compare/training_logs.hpp"

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>
#include <sstream>

namespace zerosim::compare {

namespace {

using core::trim;

/// The text without ANSI colour sequences (torchtitan colours its step lines).
std::string strip_ansi(const std::string& s)
{
  static const std::regex ansi("\x1b\\[[0-9;]*m");
  return std::regex_replace(s, ansi, "");
}

double number(const std::string& text)
{
  std::string t;
  for (char c : text)
    if (c != ',')
      t += c;
  return std::stod(t);
}

LogStep& step_entry(TrainingLog& log, long step)
{
  for (LogStep& s : log.steps)
    if (s.step == step)
      return s;
  log.steps.push_back(LogStep{step, {}});
  return log.steps.back();
}

/// A Megatron field's key, normalised: lower case, '_' as ' ', no parentheses ("elapsed_time_per_iteration_ms" and
/// "elapsed time per iteration (ms)" are both "elapsed time per iteration ms").
std::string megatron_key(const std::string& raw)
{
  std::string k;
  for (char c : trim(raw)) {
    if (c == '(' || c == ')')
      continue;
    k += c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return trim(k);
}

/// Megatron-LM / Megatron-DeepSpeed iteration lines, "iteration   10/  500 | key: value | ..." (elapsed time in ms
/// or, in BigScience's fork, s), or the ALCF fork's "iteration=  10/  500 | key=value | ..."; and the memory report
/// "(after 10 iterations) memory (MB) | allocated: ... | max allocated: ... | reserved: ... | max reserved: ...".
void parse_megatron(const std::string& text, TrainingLog& log)
{
  static const std::regex iteration(R"(iteration=?\s+(\d+)\s*/\s*\d+\s*\|)");
  static const std::regex memory(R"(\(after (\d+) iterations\) memory \(MB\)(.*))");
  std::istringstream in(text);
  std::string line;
  bool tflops_note = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, iteration)) {
      LogStep& s = step_entry(log, std::stol(m[1]));
      std::stringstream fields(line.substr(static_cast<std::size_t>(m.position(0) + m.length(0))));
      std::string field;
      while (std::getline(fields, field, '|')) {
        const auto sep = field.find_first_of(":=");
        if (sep == std::string::npos)
          continue;
        // The key is what precedes the last separator ("throughput per GPU (TFLOP/s/GPU): 400"): keys have no '=',
        // and a ':' only before the value.
        const auto last = field.find_last_of(":=");
        const std::string key = megatron_key(field.substr(0, last));
        const std::string value = trim(field.substr(last + 1));
        try {
          if (key == "elapsed time per iteration ms")
            s.figures.emplace_back(LogFigure::STEP_TIME_S, number(value) / 1000.0);
          else if (key == "elapsed time per iteration s")
            s.figures.emplace_back(LogFigure::STEP_TIME_S, number(value));
          else if (key == "samples per second")
            s.figures.emplace_back(LogFigure::SAMPLES_PER_S, number(value));
          else if (key == "tflops") {
            // Megatron-DeepSpeed's throughput_calculator counts 4 forward-equivalents under checkpointing, 3 without:
            // the hardware count, which equals the model count without checkpointing.
            s.figures.emplace_back(LogFigure::TFLOPS_HARDWARE, number(value));
            tflops_note = true;
          } else if (key == "throughput per gpu tflop/s/gpu")
            s.figures.emplace_back(LogFigure::TFLOPS_MODEL, number(value));
          else if (key == "tokens per gpu per second tgs" || key == "tgs")
            s.figures.emplace_back(LogFigure::TOKENS_PER_S_PER_GPU, number(value));
          else if (key == "global batch size")
            log.global_batch = static_cast<long>(number(value));
          else if (key == "actual seqlen")
            log.seq_len = static_cast<long>(number(value));
        } catch (const std::exception&) {
          // A field whose value is no number ("nan") is left out.
        }
      }
    } else if (std::regex_search(line, m, memory)) {
      LogStep& s = step_entry(log, std::stol(m[1]));
      static const std::regex max_alloc(R"(max allocated:\s*([0-9.]+))");
      static const std::regex max_res(R"(max reserved:\s*([0-9.]+))");
      const std::string rest = m[2];
      std::smatch v;
      if (std::regex_search(rest, v, max_alloc))
        s.figures.emplace_back(LogFigure::PEAK_ALLOCATED_BYTES, number(v[1]) * core::MIB);
      if (std::regex_search(rest, v, max_res))
        s.figures.emplace_back(LogFigure::PEAK_RESERVED_BYTES, number(v[1]) * core::MIB);
    }
  }
  log.notes.push_back("elapsed time per iteration: the optimizer step's wall time");
  if (tflops_note)
    log.notes.push_back("TFLOPs: Megatron-DeepSpeed's count, the recomputed forward included under checkpointing "
                        "(hardware TFLOPs)");
  log.notes.push_back("memory (MB): torch's max allocated and max reserved, MiB");
}

/// DeepSpeed's ThroughputTimer: "epoch=0/micro_step=20/global_step=20, RunningAvgSamplesPerSec=...,
/// CurrSamplesPerSec=..., MemAllocated=...GB, MaxMemAllocated=...GB".
void parse_deepspeed_timer(const std::string& text, TrainingLog& log)
{
  // "epoch=0/micro_step=20/global_step=20, ..." (DeepSpeed 0.9 on) or "0/20, ..." (older: epoch/step).
  static const std::regex line_re(R"((?:global_step=|\s\d+/)(\d+),.*CurrSamplesPerSec=([0-9.eE+-]+))");
  static const std::regex max_mem(R"(MaxMemAllocated=([0-9.]+)GB)");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, line_re))
      continue;
    LogStep& s = step_entry(log, std::stol(m[1]));
    s.figures.emplace_back(LogFigure::SAMPLES_PER_S, number(m[2]));
    std::smatch v;
    if (std::regex_search(line, v, max_mem))
      s.figures.emplace_back(LogFigure::PEAK_ALLOCATED_BYTES, number(v[1]) * core::GIB);
  }
  log.notes.push_back("CurrSamplesPerSec: the train batch (all GPUs) over the step's time, per step");
  log.notes.push_back("MaxMemAllocated: torch's max allocated, in DeepSpeed's GB of 2^30 bytes");
}

/// The Hugging Face Trainer: trainer_state.json's log_history, or the printed train metrics
/// ("'train_samples_per_second': 5.6" or "train_samples_per_second = 5.6").
void parse_hf(const std::string& text, TrainingLog& log)
{
  std::optional<double> samples, steps;
  try {
    const core::Json j = core::Json::parse(text);
    // trainer_state.json: the last log_history entry that has them; train_results.json / all_results.json: at the top.
    auto take = [&](const core::Json& e) {
      if (e.contains("train_samples_per_second") && e["train_samples_per_second"].is_number())
        samples = e["train_samples_per_second"].get<double>();
      if (e.contains("train_steps_per_second") && e["train_steps_per_second"].is_number())
        steps = e["train_steps_per_second"].get<double>();
    };
    if (j.is_object())
      take(j);
    if (j.is_object() && j.contains("log_history") && j["log_history"].is_array())
      for (const auto& e : j["log_history"])
        if (e.is_object())
          take(e);
  } catch (const core::Json::exception&) {
    static const std::regex s_re(R"(['"]?train_samples_per_second['"]?\s*[:=]\s*([0-9.]+))");
    static const std::regex t_re(R"(['"]?train_steps_per_second['"]?\s*[:=]\s*([0-9.]+))");
    std::smatch m;
    if (std::regex_search(text, m, s_re))
      samples = number(m[1]);
    if (std::regex_search(text, m, t_re))
      steps = number(m[1]);
  }
  LogStep s{0, {}};
  if (samples)
    s.figures.emplace_back(LogFigure::SAMPLES_PER_S, *samples);
  if (steps && *steps > 0)
    s.figures.emplace_back(LogFigure::STEP_TIME_S, 1.0 / *steps);
  if (!s.figures.empty())
    log.steps.push_back(s);
  log.notes.push_back("train_samples_per_second / train_steps_per_second: averages over the whole run, its first "
                      "steps and evaluation pauses included (no warm-up to skip)");
}

/// torchtitan: "step: 10  loss:  7.81  memory: 32.15GiB(40.62%)  tps: 4,123  tflops: 200.5  mfu: 20.30%" (older
/// versions print wps for tps).
void parse_torchtitan(const std::string& text, TrainingLog& log)
{
  static const std::regex step_re(R"(step:\s*(\d+)\s+loss:)");
  static const std::regex mem_re(R"(memory:\s*([0-9.]+)GiB)");
  static const std::regex tps_re(R"((?:tps|wps):\s*([0-9,]+))");
  static const std::regex tflops_re(R"(tflops:\s*([0-9.,]+))");
  static const std::regex mfu_re(R"(mfu:\s*([0-9.]+)%)");
  std::istringstream in(strip_ansi(text));
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, step_re))
      continue;
    LogStep& s = step_entry(log, std::stol(m[1]));
    std::smatch v;
    if (std::regex_search(line, v, mem_re))
      s.figures.emplace_back(LogFigure::PEAK_RESERVED_BYTES, number(v[1]) * core::GIB);
    if (std::regex_search(line, v, tps_re))
      s.figures.emplace_back(LogFigure::TOKENS_PER_S_PER_GPU, number(v[1]));
    if (std::regex_search(line, v, tflops_re))
      s.figures.emplace_back(LogFigure::TFLOPS_MODEL, number(v[1]));
    if (std::regex_search(line, v, mfu_re))
      s.figures.emplace_back(LogFigure::MFU, number(v[1]) / 100.0);
  }
  log.notes.push_back("tps: tokens per second per GPU; tflops, mfu: torchtitan's count without the recomputed "
                      "forward (model TFLOPs); memory: torch's max reserved, GiB");
}

} // namespace

const char* to_string(LogFormat f)
{
  switch (f) {
  case LogFormat::MEGATRON:
    return "Megatron iteration lines";
  case LogFormat::DEEPSPEED_TIMER:
    return "DeepSpeed throughput timer";
  case LogFormat::HF_TRAINER:
    return "Hugging Face Trainer metrics";
  case LogFormat::TORCHTITAN:
    return "torchtitan step lines";
  }
  return "?";
}

const char* to_string(LogFigure f)
{
  switch (f) {
  case LogFigure::STEP_TIME_S:
    return "step time (s)";
  case LogFigure::SAMPLES_PER_S:
    return "samples/s";
  case LogFigure::TOKENS_PER_S_PER_GPU:
    return "tokens/s per GPU";
  case LogFigure::TFLOPS_MODEL:
    return "TFLOPs per GPU (model)";
  case LogFigure::TFLOPS_HARDWARE:
    return "TFLOPs per GPU (hardware)";
  case LogFigure::MFU:
    return "MFU";
  case LogFigure::PEAK_ALLOCATED_BYTES:
    return "peak GPU memory, allocated";
  case LogFigure::PEAK_RESERVED_BYTES:
    return "peak GPU memory, reserved";
  }
  return "?";
}

TrainingLog parse_training_log(const std::string& raw, const std::string& file)
{
  TrainingLog log;
  log.file = file;
  const std::string text = strip_ansi(raw);
  if (text.find("elapsed time per iteration (") != std::string::npos ||
      text.find("elapsed_time_per_iteration_ms") != std::string::npos) {
    log.format = LogFormat::MEGATRON;
    parse_megatron(text, log);
  } else if (text.find("CurrSamplesPerSec=") != std::string::npos) {
    log.format = LogFormat::DEEPSPEED_TIMER;
    parse_deepspeed_timer(text, log);
  } else if (text.find("train_samples_per_second") != std::string::npos ||
             text.find("train_steps_per_second") != std::string::npos) {
    log.format = LogFormat::HF_TRAINER;
    parse_hf(text, log);
  } else if (std::regex_search(text, std::regex(R"(step:\s*\d+\s+loss:)"))) {
    log.format = LogFormat::TORCHTITAN;
    parse_torchtitan(text, log);
  } else {
    throw core::InputError(file + ": not a training log zerosim reads (expected Megatron iteration lines, DeepSpeed's "
                                  "throughput-timer lines, a Hugging Face trainer_state.json or train metrics, or "
                                  "torchtitan step lines; docs/compare.md)");
  }
  const bool any = std::any_of(log.steps.begin(), log.steps.end(), [](const LogStep& s) { return !s.figures.empty(); });
  if (!any)
    throw core::InputError(file + ": a " + std::string(to_string(log.format)) + " log with no step lines");
  return log;
}

TrainingLog read_training_log(const std::string& file)
{
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw core::InputError(file + ": cannot read the log");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_training_log(ss.str(), file);
}

std::optional<double> steady_value(const TrainingLog& log, LogFigure f, int skip, int* used)
{
  std::vector<double> values;
  for (const LogStep& s : log.steps)
    for (const auto& [k, v] : s.figures)
      if (k == f)
        values.push_back(v);
  // Run totals have no warm-up to skip, and a peak is the largest of the run whenever it was printed.
  const bool totals = log.steps.size() == 1 && log.steps.front().step == 0;
  const bool peak = f == LogFigure::PEAK_ALLOCATED_BYTES || f == LogFigure::PEAK_RESERVED_BYTES;
  if (!totals && !peak) {
    if (static_cast<int>(values.size()) > skip)
      values.erase(values.begin(), values.begin() + skip);
    else
      values.clear();
  }
  if (used)
    *used = static_cast<int>(values.size());
  if (values.empty())
    return std::nullopt;
  // Peaks are the largest seen; rates and times the median (a step's hiccup moves neither).
  if (f == LogFigure::PEAK_ALLOCATED_BYTES || f == LogFigure::PEAK_RESERVED_BYTES)
    return *std::max_element(values.begin(), values.end());
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

} // namespace zerosim::compare
