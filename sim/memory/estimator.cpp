#include "memory/estimator.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstdio>

namespace zerosim::memory {

namespace {

/// Python's int() of a float: truncation toward zero.
std::int64_t py_int(double x)
{
  return static_cast<std::int64_t>(x);
}

/// Python's true division of two ints, then int(): int(a / b).
std::int64_t py_int_div(std::int64_t a, std::int64_t b)
{
  return py_int(static_cast<double>(a) / static_cast<double>(b));
}

/// f'{OffloadDeviceEnum.cpu:4}' pads "cpu" to 4 characters (DeepSpeed's format_options).
const char* device_word(bool offloaded)
{
  return offloaded ? "cpu " : "none";
}

EstimatorRow make_row(int stage, bool offload_optimizer, bool offload_param, bool zero_init,
                      const ModelStatesEstimate& e)
{
  EstimatorRow r;
  r.stage = stage;
  r.offload_optimizer = offload_optimizer;
  r.offload_param = offload_param;
  r.zero_init = zero_init;
  r.cpu_bytes = e.cpu_bytes;
  r.gpu_bytes = e.gpu_bytes;
  r.cpu_gib = static_cast<double>(e.cpu_bytes) / BYTES_PER_GIB;
  r.gpu_gib = static_cast<double>(e.gpu_bytes) / BYTES_PER_GIB;
  if (stage == 2) {
    r.options = std::string("offload_optimizer=") + device_word(offload_optimizer);
  } else {
    r.options = std::string("offload_param=") + device_word(offload_param) +
                ", offload_optimizer=" + device_word(offload_optimizer) + ", zero_init=" + (zero_init ? "1" : "0");
  }
  return r;
}

void check_query(const EstimatorQuery& q)
{
  if (q.stage != 2 && q.stage != 3)
    throw core::InputError("estimator: stage must be 2 or 3 (DeepSpeed has estimators for these two), found " +
                           std::to_string(q.stage));
  if (q.total_params <= 0)
    throw core::InputError("estimator: total_params must be positive, found " + std::to_string(q.total_params));
  if (q.gpus_per_node <= 0 || q.nodes <= 0)
    throw core::InputError("estimator: gpus_per_node and nodes must be positive, found " +
                           std::to_string(q.gpus_per_node) + " and " + std::to_string(q.nodes));
  if (q.stage == 3 && q.largest_layer_params <= 0)
    throw core::InputError("estimator: stage 3 needs largest_layer_params > 0 (DeepSpeed's largest_layer_params)");
  if (q.offload_param && q.stage == 2)
    throw core::InputError("estimator: ZeRO-2 has no parameter offload");
  if (q.offload_param && !q.offload_optimizer)
    throw core::InputError(
        "estimator: DeepSpeed's ZeRO-3 estimator has parameter offload only together with optimizer offload");
}

} // namespace

ModelStatesEstimate estimate_zero2_model_states_mem_needs(std::int64_t total_params, int num_gpus_per_node,
                                                          int num_nodes, bool cpu_offload,
                                                          double additional_buffer_factor)
{
  const std::int64_t total_gpus = static_cast<std::int64_t>(num_nodes) * num_gpus_per_node;
  double cpu_mem = 0;
  std::int64_t gpu_mem = 0;
  if (cpu_offload) {
    gpu_mem = 2 * total_params;
    cpu_mem = static_cast<double>(total_params * std::max<std::int64_t>(4 * total_gpus, 16)) * additional_buffer_factor;
  } else {
    // 2 = params_16bit, 18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit
    gpu_mem = 2 * total_params + py_int_div(18 * total_params, total_gpus);
    cpu_mem = static_cast<double>(total_params * 4 * num_gpus_per_node) * additional_buffer_factor;
  }
  ModelStatesEstimate e;
  e.cpu_bytes = py_int(cpu_mem);
  e.gpu_bytes = gpu_mem;
  return e;
}

ModelStatesEstimate estimate_zero2_model_states_mem_needs_older(std::int64_t total_params, int num_gpus_per_node,
                                                                int num_nodes, double additional_buffer_factor)
{
  const std::int64_t total_gpus = static_cast<std::int64_t>(num_nodes) * num_gpus_per_node;
  ModelStatesEstimate e;
  // memory.rst: 4 = 2 (16-bit params) + 2 (16-bit grads), replicated on every GPU;
  // 16 = 4 (fp32 params) + 4 (fp32 grads) + 8 (Adam momentum and variance), partitioned over total_gpus.
  e.gpu_bytes = 4 * total_params + py_int_div(16 * total_params, total_gpus);
  e.cpu_bytes = py_int(static_cast<double>(total_params * 4 * num_gpus_per_node) * additional_buffer_factor);
  return e;
}

ModelStatesEstimate estimate_zero3_model_states_mem_needs(std::int64_t total_params, std::int64_t largest_layer_params,
                                                          int num_gpus_per_node, int num_nodes, bool cpu_offload,
                                                          bool cpu_offload_params, bool zero_init,
                                                          double additional_buffer_factor)
{
  const std::int64_t total_gpus = static_cast<std::int64_t>(num_nodes) * num_gpus_per_node;
  const double gpus_factor = 1.0 / num_nodes;
  const std::int64_t largest_layer_memory = 4 * largest_layer_params;
  const double abf = additional_buffer_factor;
  const auto tp = static_cast<double>(total_params);

  double cpu_mem = 0;
  std::int64_t gpu_mem = 0;
  if (cpu_offload) {
    if (cpu_offload_params) {
      gpu_mem = largest_layer_memory;
      if (zero_init)
        cpu_mem = static_cast<double>(total_params * 18) * gpus_factor * abf;
      else
        cpu_mem = tp * std::max(4.0 * num_gpus_per_node, 18 * gpus_factor) * abf;
    } else {
      gpu_mem = largest_layer_memory + py_int_div(2 * total_params, total_gpus);
      if (zero_init)
        cpu_mem = static_cast<double>(total_params * 16) * gpus_factor * abf;
      else
        cpu_mem = tp * std::max(4.0 * num_gpus_per_node, 16 * gpus_factor) * abf;
    }
  } else {
    gpu_mem = largest_layer_memory + py_int_div(18 * total_params, total_gpus);
    if (zero_init)
      cpu_mem = static_cast<double>(largest_layer_params * 4 * num_gpus_per_node) * abf;
    else
      cpu_mem = static_cast<double>(total_params * 4 * num_gpus_per_node) * abf;
  }
  ModelStatesEstimate e;
  e.cpu_bytes = py_int(cpu_mem);
  e.gpu_bytes = gpu_mem;
  e.largest_layer_memory = largest_layer_memory;
  return e;
}

std::vector<EstimatorRow> estimate_all_cold(const EstimatorQuery& q)
{
  EstimatorQuery all = q;
  all.offload_optimizer = false;
  all.offload_param = false;
  check_query(all);
  std::vector<EstimatorRow> rows;
  if (q.stage == 2) {
    for (bool cpu_offload : {true, false}) {
      auto e = estimate_zero2_model_states_mem_needs(q.total_params, q.gpus_per_node, q.nodes, cpu_offload,
                                                     q.additional_buffer_factor);
      rows.push_back(make_row(2, cpu_offload, false, true, e));
    }
    return rows;
  }
  // stage3.py:estimate_zero3_model_states_mem_needs_all_cold loop order
  for (bool cpu_offload : {true, false})
    for (bool cpu_offload_params : {true, false}) {
      if (!cpu_offload && cpu_offload_params)
        continue;
      for (bool zero_init : {true, false}) {
        auto e = estimate_zero3_model_states_mem_needs(q.total_params, q.largest_layer_params, q.gpus_per_node, q.nodes,
                                                       cpu_offload, cpu_offload_params, zero_init,
                                                       q.additional_buffer_factor);
        rows.push_back(make_row(3, cpu_offload, cpu_offload_params, zero_init, e));
      }
    }
  return rows;
}

std::vector<EstimatorRow> estimate_rows(const EstimatorQuery& q)
{
  check_query(q);
  std::vector<EstimatorRow> rows;
  for (auto& r : estimate_all_cold(q))
    if (r.offload_optimizer == q.offload_optimizer && r.offload_param == q.offload_param)
      rows.push_back(std::move(r));
  return rows;
}

std::string format_estimator_table(const EstimatorQuery& q, const std::vector<EstimatorRow>& rows)
{
  std::string out = "Estimated memory needed for params, optim states and gradients for a:\n";
  out += "HW: Setup with " + std::to_string(q.nodes) + (q.nodes > 1 ? " nodes, " : " node, ") +
         std::to_string(q.gpus_per_node) + (q.gpus_per_node > 1 ? " GPUs" : " GPU") + " per node.\n";
  // f"{int(total_params/1e6)}M": Python true division then truncation
  out += "SW: Model with " + std::to_string(py_int(static_cast<double>(q.total_params) / 1e6)) + "M total params";
  if (q.stage == 3)
    out += ", " + std::to_string(py_int(static_cast<double>(q.largest_layer_params) / 1e6)) + "M largest layer params";
  out += ".\n";
  out += "  per CPU  |  per GPU |   Options\n";
  char line[160];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, " %7.2fGB | %6.2fGB | %s\n", r.cpu_gib, r.gpu_gib, r.options.c_str());
    out += line;
  }
  return out;
}

} // namespace zerosim::memory
