#include "report/run_report.hpp"

#include "config/scenario_loader.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "metrics/run_metrics.hpp"
#include "report/memory_report.hpp"
#include "spec/names.hpp"
#include "spec/placement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace zerosim::report {

namespace {

/// The accuracy band a run shows: its group's, else (priors only) the overall one; none when the scenario's
/// calibration has neither.
struct AccuracyChoice {
  std::string group;      ///< the scenario's (spec::accuracy_group)
  std::string band_group; ///< the group whose band is shown ("" without one)
  const spec::AccuracyBand* band = nullptr;
};

AccuracyChoice accuracy_of(const spec::Scenario& s)
{
  AccuracyChoice c;
  c.group = spec::accuracy_group(s);
  const auto& bands = s.calibration.accuracy;
  auto it = bands.find(c.group);
  // A profile's band speaks for its group only; the priors' overall band stands in for a group with no rows.
  if (it == bands.end()) {
    it = bands.find(spec::ACCURACY_OVERALL);
    if (it != bands.end() && it->second.kind != spec::AccuracyKind::PRIORS)
      it = bands.end();
  }
  if (it != bands.end()) {
    c.band_group = it->first;
    c.band = &it->second;
  }
  return c;
}

/// A percentage as a fraction, to 1e-6: the bands are read with four significant digits, and 19.47 / 100 would
/// print as 0.19469999999999998.
double fraction_of_pct(double pct)
{
  return std::round(pct * 1e4) / 1e6;
}

constexpr metrics::BreakdownKey BREAKDOWN_ORDER[metrics::BREAKDOWN_KEY_COUNT] = {
    metrics::BreakdownKey::COMPUTE,      metrics::BreakdownKey::OPTIMIZER,    metrics::BreakdownKey::EXPOSED_COMM,
    metrics::BreakdownKey::EXPOSED_PCIE, metrics::BreakdownKey::EXPOSED_NVME, metrics::BreakdownKey::PIPELINE_BUBBLE,
    metrics::BreakdownKey::IDLE};

/// A member of an object the memory report built (the keys and their spelling stay in one place).
core::Json member(const core::Json& j, const char* key)
{
  if (!j.contains(key))
    throw core::InternalError(std::string("run report: the memory report has no '") + key + "'");
  return j.at(key);
}

core::Json optional_number(const std::optional<double>& v)
{
  return v ? core::Json(*v) : core::Json();
}

/// Seconds for people: "12.345 s", "4.567 ms", "89.012 us".
std::string format_seconds(double v)
{
  char buf[64];
  if (v >= 1 || v == 0)
    std::snprintf(buf, sizeof buf, "%.3f s", v);
  else if (v >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", v * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3f us", v * 1e6);
  return buf;
}

/// The contract's `parallelism`: the degrees and the pipeline's schedule (null without one).
core::Json parallelism_json(const spec::Scenario& s)
{
  core::Json schedule;
  if (s.pp() > 1)
    schedule = s.training.pipeline.schedule == spec::PipelineSchedule::GPIPE ? "gpipe" : "1f1b";
  return core::Json::object({{"tp", s.tp()},
                             {"pp", s.pp()},
                             {"dp", s.dp()},
                             {"virtual_stages", s.pp() > 1 ? s.training.pipeline.virtual_stages : 1},
                             {"schedule", schedule},
                             {"sequence_parallel", false}});
}

/// The contract's `pipeline`: null without one; else the bubble fraction and each stage's figures.
core::Json pipeline_json(const metrics::RunMetrics& m)
{
  if (!m.pipeline)
    return nullptr;
  core::Json stages = core::Json::array();
  for (const metrics::StageMetrics& st : m.pipeline->stages)
    stages.push_back(core::Json::object(
        {{"stage", st.stage},
         {"layers", st.first_block < 0 ? core::Json() : core::Json::array({st.first_block, st.last_block})},
         {"busy_s", st.busy_s},
         {"pipeline_bubble_s", st.pipeline_bubble_s},
         {"peak_memory_bytes", core::Json::object({{"gpu", st.peak_memory_bytes}})},
         {"p2p_bytes", st.p2p_bytes}}));
  return core::Json::object(
      {{"bubble_fraction", m.pipeline->bubble_fraction}, {"peak_stage", m.pipeline->peak_stage}, {"stages", stages}});
}

} // namespace

core::Json run_json(const spec::Scenario& s, const run::RunResult& result)
{
  const workload::Workload& w = result.workload;
  const metrics::RunMetrics& m = result.metrics;
  const engine::Timeline& t = result.timeline;
  // The memory keys come from the memory report, so `zerosim memory` and `zerosim run` spell them alike.
  const core::Json mem = memory_json(s, w.params, m.memory, result.ladder);
  const core::Json mem_device = memory_json(s, w.params, m.memory_device_time, {});

  core::Json breakdown = core::Json::object();
  for (auto k : BREAKDOWN_ORDER)
    breakdown[metrics::to_string(k)] = m.breakdown.at(k);
  core::Json meta = meta_json(s, t.network_model);
  meta["replay"] = t.replay;

  // The contract (docs/scenario-format.md "Results"), in its order.
  core::Json j = core::Json::object(
      {{"scenario", s.name},
       {"gpus", s.cluster.total_gpus()},
       {"dp", s.dp()}, // with tensor parallelism gpus / dp is its degree
       {"params", w.params},
       {"step_time_s", m.step_time_s},
       {"micro_steps", m.micro_steps},
       {"tokens_per_s", m.tokens_per_s},
       {"samples_per_s", m.samples_per_s},
       {"tflops_per_gpu", core::Json::object({{"model", m.tflops_model}, {"hardware", m.tflops_hardware}})},
       {"mfu", m.mfu},
       {"hfu", m.hfu},
       {"peak_memory_bytes", member(mem, "peak_memory_bytes")},
       {"memory_breakdown_bytes", member(mem, "memory_breakdown_bytes")},
       {"fits", member(mem, "fits")},
       {"fit_by_tier", member(mem, "fit_by_tier")},
       {"shortfall_bytes", member(mem, "shortfall_bytes")},
       {"time_breakdown_s", breakdown},
       {"parallelism", parallelism_json(s)},
       {"pipeline", pipeline_json(m)},
       {"time_to_train_s", optional_number(m.time_to_train_s)},
       {"cost", core::Json::object(
                    {{"per_step", optional_number(m.cost_per_step)}, {"to_train", optional_number(m.cost_to_train)}})},
       {"warnings", m.warnings},
       {"meta", meta}});
  // How far to trust it: the band of the scenario's group (docs/calibration.md §4): the calibration's
  // leave-one-source-out band, or without a profile the priors' band of the validation report.
  const AccuracyChoice acc = accuracy_of(s);
  if (acc.band == nullptr)
    j["accuracy"] = core::Json::object({{"group", acc.group},
                                        {"kind", "none"},
                                        {"median_abs_error", nullptr},
                                        {"p90_abs_error", nullptr},
                                        {"median_signed_error", nullptr},
                                        {"rows", 0},
                                        {"band_group", nullptr},
                                        {"from", nullptr}});
  else
    j["accuracy"] = core::Json::object(
        {{"group", acc.group},
         {"kind", spec::to_string(acc.band->kind)},
         {"median_abs_error", fraction_of_pct(acc.band->median_abs_error_pct)},
         {"p90_abs_error", fraction_of_pct(acc.band->p90_abs_error_pct)},
         {"median_signed_error", acc.band->median_signed_error_pct
                                     ? core::Json(fraction_of_pct(*acc.band->median_signed_error_pct))
                                     : core::Json(nullptr)},
         {"rows", acc.band->rows},
         {"band_group", acc.band_group},
         {"from", s.calibration.accuracy_file}});
  // zerosim's own keys, after the contract's.
  j["rank"] = m.rank;
  j["peak_task"] = m.memory.peak_task;
  j["peak_time_s"] = m.peak_time_s;
  j["peak_memory_device_time_bytes"] = member(mem_device, "peak_memory_bytes");
  j["peak_task_device_time"] = m.memory_device_time.peak_task;
  j["capacity_bytes"] = member(mem, "capacity_bytes");
  j["tight"] = member(mem, "tight");
  j["memory_model_bytes"] = member(mem, "memory_model_bytes");
  j["peak_flops_per_gpu"] = m.peak_flops;
  if (mem.contains("to_fit"))
    j["to_fit"] = mem.at("to_fit");
  j["simulation"] =
      core::Json::object({{"simulated_ranks", static_cast<std::int64_t>(t.ranks.size())},
                          {"flows", static_cast<std::int64_t>(t.flows)},
                          {"activities", static_cast<std::int64_t>(t.activities)},
                          {"micro_steps_simulated", static_cast<std::int64_t>(t.reuse.simulated_micro_steps)},
                          {"micro_step_period_s", t.reuse.period_s},
                          {"breakdown_rank", static_cast<std::int64_t>(m.timeline_rank)}});
  if (m.inference) {
    // docs/inference.md: the request's figures; step_time_s above is the whole request.
    const metrics::InferenceMetrics& im = *m.inference;
    j["inference"] = core::Json::object(
        {{"batch_per_gpu", s.inference.batch},
         {"prompt_tokens", s.inference.prompt_tokens},
         {"generate_tokens", s.inference.generate_tokens},
         {"forward_passes", im.passes},
         {"simulated_passes", im.simulated_passes},
         {"prefill_time_s", im.prefill_time_s},
         {"decode_time_s", im.decode_time_s},
         {"time_per_output_token_s", optional_number(im.time_per_output_token_s)},
         {"tokens_per_s", im.tokens_per_s},
         {"prompt_tokens_per_s", im.prompt_tokens_per_s},
         {"kv_cache_bytes", im.kv_cache_bytes},
         {"weights_per_pass_bytes", core::Json::object({{"nvme_read", im.nvme_read_bytes_per_pass},
                                                        {"h2d", im.h2d_bytes_per_pass},
                                                        {"all_gather", im.gather_bytes_per_pass}})}});
  }
  return j;
}

namespace {

/// The step's (or request's) figures: time, throughput, TFLOPs, MFU.
void write_figures(std::ostream& out, const spec::Scenario& s, const metrics::RunMetrics& m)
{
  char line[512];
  if (m.inference) {
    const metrics::InferenceMetrics& im = *m.inference;
    std::snprintf(line, sizeof line, "  %-22s %s  (%d forward passes: the prompt's and %d decode)\n", "request time",
                  format_seconds(m.step_time_s).c_str(), im.passes, im.passes - 1);
    out << line;
    std::snprintf(line, sizeof line, "  %-22s %s  (time to first token; %.1f prompt tokens/s)\n", "prefill",
                  format_seconds(im.prefill_time_s).c_str(), im.prompt_tokens_per_s);
    out << line;
    if (im.time_per_output_token_s) {
      std::snprintf(line, sizeof line, "  %-22s %s  (decode: %s over %d tokens)\n", "time per output token",
                    format_seconds(*im.time_per_output_token_s).c_str(), format_seconds(im.decode_time_s).c_str(),
                    im.passes - 1);
      out << line;
    }
    std::snprintf(line, sizeof line, "  %-22s %.4g generated tokens/s, %.4g sequences/s  (all %d GPUs)\n", "throughput",
                  m.tokens_per_s, m.samples_per_s, s.dp());
    out << line;
    std::snprintf(line, sizeof line, "  %-22s %.4g GB from NVMe, %.4g GB host to GPU, %.4g GB all-gathered\n",
                  "weights per pass", static_cast<double>(im.nvme_read_bytes_per_pass) / 1e9,
                  static_cast<double>(im.h2d_bytes_per_pass) / 1e9,
                  static_cast<double>(im.gather_bytes_per_pass) / 1e9);
    out << line;
    std::snprintf(line, sizeof line, "  %-22s %.2f forward  (forward FLOPs of every pass over the request time)\n",
                  "TFLOPs per GPU", m.tflops_model);
    out << line;
    std::snprintf(line, sizeof line, "  %-22s %.2f %%  of the dense %s peak, %.1f TFLOPS (forward FLOPs)\n", "MFU",
                  100 * m.mfu, spec::to_string(s.training.precision), m.peak_flops / 1e12);
    out << line;
  } else {
    std::snprintf(line, sizeof line, "  %-22s %s  (%d micro-step%s)\n", "step time",
                  format_seconds(m.step_time_s).c_str(), m.micro_steps, m.micro_steps == 1 ? "" : "s");
    out << line;
    std::snprintf(line, sizeof line, "  %-22s %.1f tokens/s, %.3f samples/s\n", "throughput", m.tokens_per_s,
                  m.samples_per_s);
    out << line;
    std::snprintf(line, sizeof line,
                  "  %-22s model %.1f, hardware %.1f  (Megatron-LM counting; hardware adds the "
                  "recomputed forward)\n",
                  "TFLOPs per GPU", m.tflops_model, m.tflops_hardware);
    out << line;
    std::snprintf(line, sizeof line, "  %-22s %.1f %% / %.1f %%  of the dense %s peak, %.1f TFLOPS\n", "MFU / HFU",
                  100 * m.mfu, 100 * m.hfu, spec::to_string(s.training.precision), m.peak_flops / 1e12);
    out << line;
  }
}

/// The accuracy band of the scenario's group (docs/calibration.md §4), or why there is none.
void write_accuracy(std::ostream& out, const spec::Scenario& s)
{
  const AccuracyChoice acc = accuracy_of(s);
  const bool priors = s.calibration.path.empty() || s.calibration.path == "none";
  std::string line = "  accuracy               ";
  if (acc.band == nullptr) {
    if (priors)
      line += "priors only (no calibration profile): no error band (" + std::string(config::SHIPPED_PRIORS_ACCURACY) +
              " not found)";
    else if (s.calibration.accuracy.empty())
      line += "the calibration " + s.calibration.path +
              " has no leave-one-source-out bands (fitted with --no-loso): no error band";
    else
      line += "no measured runs of " + acc.group + " in the calibration " + s.calibration.path + ": no error band";
    out << line << "\n";
    return;
  }
  const spec::AccuracyBand& b = *acc.band;
  const std::string runs = std::to_string(b.rows) + (b.rows == 1 ? " published run" : " published runs");
  if (b.kind == spec::AccuracyKind::PRIORS) {
    const std::string whose = acc.band_group == acc.group ? "runs like this (" + acc.group + ")"
                                                          : "no published run of " + acc.group + "; all runs";
    line += "priors only (no calibration profile): " + whose + " were predicted within " +
            core::format_fixed(b.median_abs_error_pct, 0) + " % (median) / " +
            core::format_fixed(b.p90_abs_error_pct, 0) + " % (p90) of measured";
    if (b.median_signed_error_pct)
      line += ", median signed " + core::format_signed_pct(*b.median_signed_error_pct, 0);
    line += " (" + runs + "; " + s.calibration.accuracy_file + ")";
  } else {
    line += "runs like this (" + acc.group + ") were predicted within " +
            core::format_fixed(b.median_abs_error_pct, 0) + " % (median) / " +
            core::format_fixed(b.p90_abs_error_pct, 0) + " % (p90) of measured, each source left out of the fit (" +
            std::to_string(b.rows) + " runs)";
  }
  out << line << "\n";
}

/// Time to train and cost, when the scenario gives their inputs.
void write_time_and_cost(std::ostream& out, const spec::Scenario& s, const metrics::RunMetrics& m)
{
  char line[512];
  if (m.time_to_train_s) {
    std::snprintf(line, sizeof line, "  %-22s %s (%.4g s) for %.4g tokens\n", "time to train",
                  core::format_duration(*m.time_to_train_s).c_str(), *m.time_to_train_s, *s.training.total_tokens);
    out << line;
  }
  if (m.cost_per_step) {
    std::snprintf(line, sizeof line, "  %-22s %.4g per step", "cost", *m.cost_per_step);
    out << line;
    if (m.cost_to_train) {
      std::snprintf(line, sizeof line, ", %.4g to train", *m.cost_to_train);
      out << line;
    }
    std::snprintf(line, sizeof line, " (at %.4g per GPU-hour)\n", *s.price_per_gpu_hour);
    out << line;
  }
}

/// Peak memory: the reported rank's tiers, and the device-time view beside them.
void write_memory(std::ostream& out, const metrics::RunMetrics& m)
{
  const memory::MemoryReport& r = m.memory;
  char line[512];
  if (m.rank == m.timeline_rank)
    std::snprintf(line, sizeof line, "\nPeak memory (rank %d; torch's count, host order: at '%s', issued at %s)\n",
                  m.rank, r.peak_task.c_str(), format_seconds(m.peak_time_s).c_str());
  else
    std::snprintf(line, sizeof line,
                  "\nPeak memory (rank %d, not simulated, replayed from its schedule; torch's count, host order: at "
                  "'%s')\n",
                  m.rank, r.peak_task.c_str());
  out << line;
  out << memory_tier_rows(r);
  const memory::MemoryReport& q = m.memory_device_time;
  const std::string held = m.rank == m.timeline_rank ? std::string("GPU, held at once at device times")
                                                     : "GPU at device times, rank " + std::to_string(m.timeline_rank);
  std::snprintf(line, sizeof line, "  %-34s %12s  ('%s'%s)\n", held.c_str(), core::format_gib(q.gpu).c_str(),
                q.peak_task.c_str(),
                m.rank != m.timeline_rank ? ""
                : q.gpu == r.gpu          ? ", the same peak"
                                          : "; streams overlap");
  out << line;
}

/// The time breakdown and the replay's shape.
void write_breakdown_and_replay(std::ostream& out, const metrics::RunMetrics& m, const engine::Timeline& t)
{
  char line[512];
  std::snprintf(line, sizeof line,
                "\nTime breakdown (rank %d; each instant to one key: compute > optimizer > exposed_comm > "
                "exposed_pcie > exposed_nvme > pipeline_bubble > idle)\n",
                m.timeline_rank);
  out << line;
  for (auto k : BREAKDOWN_ORDER) {
    const double v = m.breakdown.at(k);
    std::snprintf(line, sizeof line, "  %-22s %12.4f s  %5.1f %%\n", metrics::to_string(k), v, 100 * v / m.step_time_s);
    out << line;
  }

  if (m.pipeline) {
    std::snprintf(line, sizeof line,
                  "\nPipeline (%zu stages; bubble fraction %.1f %%, the mean over stages of pipeline_bubble / step)\n",
                  m.pipeline->stages.size(), 100 * m.pipeline->bubble_fraction);
    out << line;
    for (const metrics::StageMetrics& st : m.pipeline->stages) {
      char blocks[32] = "none   "; // a stage of the head alone (Megatron-DeepSpeed allows it)
      if (st.first_block >= 0)
        std::snprintf(blocks, sizeof blocks, "%3d-%-3d", st.first_block, st.last_block);
      std::snprintf(line, sizeof line, "  stage %2d  blocks %s  busy %10.3f s  bubble %10.3f s  peak %s%s\n", st.stage,
                    blocks, st.busy_s, st.pipeline_bubble_s, core::format_gib(st.peak_memory_bytes).c_str(),
                    st.stage == m.pipeline->peak_stage ? "  (the largest)" : "");
      out << line;
    }
  }

  out << "\nReplay: " << t.replay << ", " << t.ranks.size() << " simulated rank" << (t.ranks.size() == 1 ? "" : "s")
      << ", " << t.flows << " flows";
  if (t.reuse.repeated() > 0)
    out << ", " << t.reuse.simulated_micro_steps << " of " << t.reuse.micro_steps
        << " micro-steps simulated (the others at the measured period, " << core::format_fixed(t.reuse.period_s, 4)
        << " s)";
  if (m.inference && m.inference->simulated_passes < m.inference->passes)
    out << ", " << m.inference->simulated_passes << " of " << m.inference->passes
        << " forward passes simulated (the decode passes between them interpolated linearly)";
  out << "; network model: " << t.network_model << "\n";
}

} // namespace

std::string run_json_line(const std::string& path, const std::vector<std::string>& sets, const std::string& calibration)
{
  config::LoadOptions opts;
  opts.sets = sets;
  opts.calibration = calibration;
  const spec::Scenario s = config::load_scenario(path, opts);
  return core::dump_json(run_json(s, run::run_scenario(s)), -1);
}

void write_run_summary(std::ostream& out, const spec::Scenario& s, const run::RunResult& result)
{
  const workload::Workload& w = result.workload;
  const metrics::RunMetrics& m = result.metrics;
  const engine::Timeline& t = result.timeline;
  const memory::MemoryReport& r = m.memory;

  if (!r.fits)
    out << "DOES NOT FIT (" << unfit_tiers(r) << "): short by " << core::format_gib(r.shortfall_bytes) << " (rank "
        << m.rank << ").\n\n";

  out << scenario_header(s, w.params) << warnings_block(m.warnings) << "\n";

  if (!r.fits) {
    out << "To make it fit (the ladder, applied in order):\n" << ladder_lines(result.ladder) << "\n";
  }

  write_figures(out, s, m);
  write_accuracy(out, s);
  write_time_and_cost(out, s, m);

  write_memory(out, m);
  write_breakdown_and_replay(out, m, t);
}

const char* stream_name(spec::Stream st)
{
  switch (st) {
  case spec::Stream::COMPUTE:
    return "compute stream";
  case spec::Stream::REDUCTION:
    return "reduction_stream";
  case spec::Stream::ALLGATHER:
    return "allgather stream";
  case spec::Stream::REDUCE_PARTITION:
    return "reduce_and_partition_stream";
  case spec::Stream::HOST:
    return "host (Python thread)";
  case spec::Stream::NVME:
    return "aio (NVMe)";
  case spec::Stream::ACTIVATION_OFFLOAD:
    return "activation offload stream";
  }
  return "?";
}

const char* kind_name(spec::TaskKind k)
{
  switch (k) {
  case spec::TaskKind::COMPUTE:
    return "compute";
  case spec::TaskKind::COLLECTIVE:
    return "collective";
  case spec::TaskKind::COPY:
    return "copy";
  case spec::TaskKind::NVME_READ:
    return "nvme_read";
  case spec::TaskKind::NVME_WRITE:
    return "nvme_write";
  case spec::TaskKind::CPU_COMPUTE:
    return "cpu_compute";
  case spec::TaskKind::SYNC:
    return "sync";
  case spec::TaskKind::SEND:
    return "send";
  case spec::TaskKind::RECV:
    return "recv";
  }
  return "?";
}

namespace {

const char* phase_name(spec::Phase p)
{
  switch (p) {
  case spec::Phase::FORWARD:
    return "forward";
  case spec::Phase::BACKWARD:
    return "backward";
  case spec::Phase::RECOMPUTE:
    return "recompute";
  case spec::Phase::GRAD_REDUCE:
    return "grad_reduce";
  case spec::Phase::OPTIMIZER:
    return "optimizer";
  case spec::Phase::PARAM_GATHER:
    return "param_gather";
  case spec::Phase::OTHER:
    return "other";
  }
  return "?";
}

/// One complete event of the trace, before it is written. Times are whole nanoseconds: Perfetto reads "ts" and
/// "dur" in microseconds and rounds each to a nanosecond (json_utils.cc CoerceToTs, llround(ts * 1000)), so
/// events written on a nanosecond grid keep their order and nesting exactly after import.
struct Slice {
  std::int64_t start = 0; ///< ns
  std::int64_t end = 0;   ///< ns
  size_t order = 0;       ///< input order (ties)
  core::Json event;       ///< name, cat, args: pid, tid, ts, dur are added when written
};

/// The trace under construction: threads get globally unique ids in the order they are made.
class TraceWriter {
public:
  explicit TraceWriter(std::ostream& out) : out_(out) { out_ << "{\"traceEvents\":[\n"; }

  void metadata(const char* what, int pid, int tid, core::Json args)
  {
    core::Json e = core::Json::object({{"name", what}, {"ph", "M"}, {"pid", pid}});
    if (tid >= 0)
      e["tid"] = tid;
    e["args"] = std::move(args);
    emit(e);
  }

  int new_process(const std::string& name)
  {
    const int pid = next_pid_++;
    metadata("process_name", pid, -1, core::Json::object({{"name", name}}));
    metadata("process_sort_index", pid, -1, core::Json::object({{"sort_index", pid}}));
    return pid;
  }

  /// A thread (or, when its slices overlap, several: "name", "name #2", ...) holding `slices`.
  void thread(int pid, const std::string& name, std::vector<Slice> slices)
  {
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      if (a.start != b.start)
        return a.start < b.start;
      if (a.end != b.end)
        return a.end > b.end; // longer first, so an enclosing slice opens before what it encloses
      return a.order < b.order;
    });
    // Greedy lanes: a slice goes to the first lane whose last slice has ended by its start. An instant (zero
    // duration) stays on the first lane: it cannot straddle a slice there, only sit inside one or after it.
    std::vector<std::int64_t> lane_end;
    std::vector<int> lane_of(slices.size(), 0);
    for (size_t i = 0; i < slices.size(); ++i) {
      size_t lane = 0;
      if (slices[i].end == slices[i].start) {
        if (lane_end.empty())
          lane_end.push_back(slices[i].end);
        lane_end[0] = std::max(lane_end[0], slices[i].end);
        continue;
      }
      while (lane < lane_end.size() && lane_end[lane] > slices[i].start)
        ++lane;
      if (lane == lane_end.size())
        lane_end.push_back(slices[i].end);
      else
        lane_end[lane] = slices[i].end;
      lane_of[i] = static_cast<int>(lane);
    }
    const size_t lanes = std::max<size_t>(1, lane_end.size());
    std::vector<int> tids;
    for (size_t lane = 0; lane < lanes; ++lane) {
      const int tid = next_tid_++;
      tids.push_back(tid);
      const std::string label = lane == 0 ? name : name + " #" + std::to_string(lane + 1);
      metadata("thread_name", pid, tid, core::Json::object({{"name", label}}));
      metadata("thread_sort_index", pid, tid, core::Json::object({{"sort_index", tid}}));
    }
    for (size_t i = 0; i < slices.size(); ++i) {
      core::Json e = std::move(slices[i].event);
      e["ph"] = "X";
      e["pid"] = pid;
      e["tid"] = tids[static_cast<size_t>(lane_of[i])];
      e["ts"] = static_cast<double>(slices[i].start) / 1e3;
      e["dur"] = static_cast<double>(slices[i].end - slices[i].start) / 1e3;
      emit(e);
    }
  }

  void finish(core::Json other)
  {
    out_ << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" << core::dump_json(other, -1) << "}\n";
  }

private:
  void emit(const core::Json& e)
  {
    if (!first_)
      out_ << ",\n";
    first_ = false;
    out_ << core::dump_json(e, -1);
  }

  std::ostream& out_;
  bool first_ = true;
  int next_pid_ = 1;
  int next_tid_ = 1;
};

/// Seconds to whole nanoseconds.
std::int64_t to_ns(double seconds)
{
  return std::llround(seconds * 1e9);
}

/// The slice of an interval [start, end) of the simulated timeline moved `shift` later (metrics::StepTimeMap).
Slice slice(double start, double end, double shift, size_t order, core::Json event)
{
  const std::int64_t from = to_ns(start + shift);
  return Slice{from, std::max(from, to_ns(end + shift)), order, std::move(event)};
}

} // namespace

void write_trace(std::ostream& out, const spec::Scenario& s, const engine::Timeline& t)
{
  TraceWriter trace(out);
  // Every event where it lies in the real step: later than the micro-steps or passes not simulated before it.
  const metrics::StepTimeMap map = metrics::step_time_map(t);

  // A process per simulated rank, a thread per stream it uses, its tasks in issue order.
  constexpr int STREAMS = spec::STREAM_COUNT;
  for (const auto& r : t.ranks) {
    if (r.times.size() != r.graph.tasks.size())
      throw core::InternalError("trace: rank " + std::to_string(r.rank) + " has " + std::to_string(r.times.size()) +
                                " task times for " + std::to_string(r.graph.tasks.size()) + " tasks");
    std::vector<std::vector<Slice>> by_stream(STREAMS);
    for (size_t i = 0; i < r.graph.tasks.size(); ++i) {
      const auto& task = r.graph.tasks[i];
      core::Json args = core::Json::object({{"kind", kind_name(task.kind)}, {"phase", phase_name(task.phase)}});
      if (task.micro_step >= 0)
        args["micro_step"] = task.micro_step;
      if (task.kind == spec::TaskKind::COLLECTIVE) {
        args["bytes"] = task.bytes;
        args["group"] = spec::to_string(task.group);
        args["group_size"] = task.group_size;
      } else if (task.kind == spec::TaskKind::SEND || task.kind == spec::TaskKind::RECV) {
        args["bytes"] = task.bytes;
        args["peer"] = task.peer;
      } else if (task.bytes > 0) {
        args["bytes"] = task.bytes;
      }
      if (task.flops > 0)
        args["flops"] = task.flops;
      core::Json e =
          core::Json::object({{"name", task.name}, {"cat", kind_name(task.kind)}, {"args", std::move(args)}});
      // Under a pipeline a micro-batch's tasks spread over the step (its forward early, its backward late, on every
      // stage): the cut of accumulation reuse is an instant, so a task moves by when it starts, not by its micro-step
      // (docs/engine.md "Accumulation reuse under a pipeline").
      const double moved = map.shift(r.times[i].start, s.pp() > 1 ? -1 : task.micro_step);
      by_stream[static_cast<size_t>(task.stream)].push_back(
          slice(r.times[i].start, r.times[i].end, moved, i, std::move(e)));
    }
    // Under a pipeline each rank names its stage; the ranks come stage by stage (rank = stage x D x T + ...).
    const std::string stage =
        s.pp() > 1 ? "stage " + std::to_string(spec::coords_of(r.rank, s.tp(), s.dp()).stage) + ", " : "";
    const int pid = trace.new_process("rank " + std::to_string(r.rank) + " (" + stage + "node " +
                                      std::to_string(r.node) + ", GPU " + std::to_string(r.local) + ")");
    for (int st = 0; st < STREAMS; ++st)
      if (!by_stream[static_cast<size_t>(st)].empty())
        trace.thread(pid, stream_name(static_cast<spec::Stream>(st)), std::move(by_stream[static_cast<size_t>(st)]));
  }

  // A process per Track::process (in order of first appearance), a thread per track, its intervals.
  std::vector<std::vector<Slice>> by_track(t.tracks.size());
  for (size_t i = 0; i < t.intervals.size(); ++i) {
    const auto& iv = t.intervals[i];
    if (iv.track < 0 || static_cast<size_t>(iv.track) >= t.tracks.size())
      throw core::InternalError("trace: interval '" + iv.name + "' names track " + std::to_string(iv.track) + " of " +
                                std::to_string(t.tracks.size()));
    core::Json e = core::Json::object({{"name", iv.name}, {"cat", "resource"}});
    by_track[static_cast<size_t>(iv.track)].push_back(
        slice(iv.start, iv.end, map.shift(iv.start, -1), i, std::move(e)));
  }
  std::vector<std::string> processes;
  for (const auto& tr : t.tracks)
    if (std::find(processes.begin(), processes.end(), tr.process) == processes.end())
      processes.push_back(tr.process);
  for (const auto& p : processes) {
    const int pid = trace.new_process(p);
    for (size_t k = 0; k < t.tracks.size(); ++k)
      if (t.tracks[k].process == p)
        trace.thread(pid, t.tracks[k].name, std::move(by_track[k]));
  }

  // The micro-steps (decode passes) not simulated, each range a complete event where it belongs, on a track of its own.
  if (!map.spans.empty()) {
    std::vector<Slice> marks;
    for (size_t i = 0; i < map.spans.size(); ++i) {
      const metrics::UnsimulatedSpan& span = map.spans[i];
      const double at = span.at_s + map.shift(span.at_s, span.first); // later than the spans before it
      core::Json args = core::Json::object({{"first", span.first},
                                            {"last", span.last},
                                            {"count", span.last - span.first + 1},
                                            {"duration_s", span.duration_s}});
      marks.push_back(
          slice(at, at + span.duration_s, 0, i,
                core::Json::object({{"name", span.label}, {"cat", "not_simulated"}, {"args", std::move(args)}})));
    }
    const bool passes = t.request_passes > 0;
    const int pid = trace.new_process("not simulated");
    trace.thread(pid, passes ? "decode passes not simulated" : "micro-steps not simulated", std::move(marks));
  }

  trace.finish(core::Json::object({{"scenario", s.name},
                                   {"replay", t.replay},
                                   {"step_time_s", map.step_time_s},
                                   {"network_model", t.network_model}}));
}

} // namespace zerosim::report
