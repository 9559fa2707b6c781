#include "sweep/summary.hpp"
#include "core/bytes.hpp"

#include <algorithm>
#include <cstdio>

namespace zerosim::sweep {

namespace {

/// The names of the keys swept most, shorter than their keys (recommend's labels use the same: "mb 8 x ga 2").
const std::vector<std::pair<std::string, std::string>> AXIS_NAMES = {
    {"training.micro_batch", "mb"},
    {"training.grad_accum", "ga"},
    {"training.global_batch", "global batch"},
    {"deepspeed.zero_optimization.stage", "stage"},
};

std::string formatted(const char* format, double v)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string padded_left(const std::string& s, std::size_t width)
{
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

} // namespace

std::string axis_name(const std::string& key)
{
  for (const auto& [k, name] : AXIS_NAMES)
    if (k == key)
      return name;
  static const std::vector<std::string> containers = {
      "deepspeed", "zero_optimization", "training", "cluster", "network", "fsdp", "ddp", "inference"};
  std::string rest = key;
  for (;;) {
    const auto dot = rest.find('.');
    if (dot == std::string::npos ||
        std::find(containers.begin(), containers.end(), rest.substr(0, dot)) == containers.end())
      return rest;
    rest = rest.substr(dot + 1);
  }
}

std::string values_label(const Plan& plan, const std::vector<std::string>& values, int skip)
{
  std::string label;
  for (std::size_t k = 0; k < plan.axes.size() && k < values.size(); ++k)
    if (static_cast<int>(k) != skip)
      label += (label.empty() ? "" : ", ") + axis_name(plan.axes[k].key) + " " + values[k];
  return label;
}

bool result_fits(const Record& r)
{
  return r.result.contains("fits") && r.result["fits"].is_boolean() && r.result["fits"].get<bool>();
}

Summary::Summary(const Plan& plan, std::size_t most_fit, std::size_t most_other)
    : plan_(plan), most_fit_(most_fit), most_other_(most_other)
{
}

void Summary::order(std::vector<Row>& rows, bool by_throughput, std::size_t most)
{
  // Best first: tokens/s down (fitting), shortfall up (not fitting: nearest to fit first), then point order.
  std::stable_sort(rows.begin(), rows.end(), [by_throughput](const Row& a, const Row& b) {
    if (by_throughput && a.tokens_per_s != b.tokens_per_s)
      return a.tokens_per_s > b.tokens_per_s;
    if (!by_throughput && a.shortfall_gib != b.shortfall_gib)
      return a.shortfall_gib < b.shortfall_gib;
    return a.point < b.point;
  });
  if (rows.size() > most)
    rows.resize(most);
}

void Summary::keep(std::vector<Row>& rows, Row row, std::size_t most, bool by_throughput)
{
  rows.push_back(std::move(row));
  if (rows.size() > 2 * most) // trimmed now and then: the rows held stay below 2 x most
    order(rows, by_throughput, most);
}

void Summary::add(const Record& r)
{
  Row row;
  row.point = r.point;
  row.values = r.values;
  row.status = r.done() ? "done" : r.status + (r.message.empty() ? "" : ": " + r.message);
  if (!r.done()) {
    ++not_run_count_;
    keep(not_run_, std::move(row), most_other_, false);
    return;
  }
  row.tokens_per_s = core::number_at(r.result, {"tokens_per_s"}).value_or(0);
  row.step_time_s = core::number_at(r.result, {"step_time_s"}).value_or(0);
  row.tflops = core::number_at(r.result, {"tflops_per_gpu", "model"}).value_or(0);
  row.memory_gib = core::number_at(r.result, {"peak_memory_bytes", "gpu_device"}).value_or(0) / core::GIB;
  row.capacity_gib = core::number_at(r.result, {"capacity_bytes", "gpu"}).value_or(0) / core::GIB;
  row.shortfall_gib = core::number_at(r.result, {"shortfall_bytes"}).value_or(0) / core::GIB;
  const core::Json* tight = r.result.contains("tight") ? &r.result["tight"] : nullptr;
  row.tight = tight != nullptr && tight->is_object() && tight->value("gpu", false);
  if (result_fits(r)) {
    ++fit_count_;
    keep(fit_, std::move(row), most_fit_, true);
  } else {
    ++unfit_count_;
    keep(unfit_, std::move(row), most_other_, false);
  }
}

std::string Summary::table() const
{
  const std::uint64_t total = fit_count_ + unfit_count_ + not_run_count_;
  if (total == 0)
    return "";
  auto sorted = [](std::vector<Row> rows, bool by_throughput, std::size_t most) {
    order(rows, by_throughput, most);
    return rows;
  };
  const std::vector<Row> fit = sorted(fit_, true, most_fit_), unfit = sorted(unfit_, false, most_other_),
                         not_run = sorted(not_run_, false, most_other_);
  // A column per axis, as wide as its name or its widest value.
  std::vector<std::size_t> widths;
  for (const Axis& a : plan_.axes)
    widths.push_back(axis_name(a.key).size());
  for (const std::vector<Row>* rows : {&fit, &unfit, &not_run})
    for (const Row& r : *rows)
      for (std::size_t k = 0; k < widths.size() && k < r.values.size(); ++k)
        widths[k] = std::max(widths[k], r.values[k].size());
  auto front = [&](const std::string& rank, const std::string& point, const std::vector<std::string>& cells) {
    std::string line = "  " + padded_left(rank, 4) + "  " + padded_left(point, 5);
    for (std::size_t k = 0; k < widths.size(); ++k)
      line += "  " + padded_left(k < cells.size() ? cells[k] : "", widths[k]);
    return line;
  };
  std::vector<std::string> names;
  for (const Axis& a : plan_.axes)
    names.push_back(axis_name(a.key));
  std::string text = "sweep: " + std::to_string(total) +
                     " points ranked by tokens/s (all GPUs), best first: " + std::to_string(fit_count_) + " fit, " +
                     std::to_string(unfit_count_) + " do not fit in memory (after them, never ranked), " +
                     std::to_string(not_run_count_) + " did not run\n";
  text += front("rank", "point", names) + "      tokens/s     step time  TFLOPs/GPU  GPU memory (device)\n";
  auto figures = [](const Row& r) {
    return padded_left(formatted("%.1f", r.tokens_per_s), 14) + padded_left(formatted("%.3f s", r.step_time_s), 14) +
           padded_left(formatted("%.1f", r.tflops), 12) + "  " + formatted("%.1f", r.memory_gib) + " of " +
           formatted("%.1f GiB", r.capacity_gib);
  };
  std::size_t rank = 0;
  for (const Row& r : fit)
    text += front(std::to_string(++rank), std::to_string(r.point), r.values) + figures(r) +
            (r.tight ? "  tight: within the memory headroom (docs/recommend.md)" : "") + "\n";
  if (fit_count_ > fit.size())
    text += "  ... " + std::to_string(fit_count_ - fit.size()) + " more that fit (sweep.csv)\n";
  for (const Row& r : unfit)
    text += front("-", std::to_string(r.point), r.values) + figures(r) + "  does not fit: short by " +
            formatted("%.1f GiB", r.shortfall_gib) + "\n";
  if (unfit_count_ > unfit.size())
    text += "  ... " + std::to_string(unfit_count_ - unfit.size()) + " more that do not fit (sweep.csv)\n";
  for (const Row& r : not_run) {
    std::string why = r.status.substr(0, r.status.find('\n'));
    if (why.size() > 100)
      why = why.substr(0, 97) + "...";
    text += front("-", std::to_string(r.point), r.values) + "  not run: " + why + "\n";
  }
  if (not_run_count_ > not_run.size())
    text += "  ... " + std::to_string(not_run_count_ - not_run.size()) + " more that did not run (sweep.csv)\n";
  return text;
}

} // namespace zerosim::sweep
