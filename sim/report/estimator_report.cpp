#include "report/estimator_report.hpp"

namespace zerosim::report {

core::Json estimator_json(const memory::EstimatorQuery& q, const std::vector<memory::EstimatorRow>& rows)
{
  core::Json list = core::Json::array();
  for (const auto& r : rows) {
    core::Json row = core::Json::object(
        {{"stage", r.stage}, {"offload_optimizer", r.offload_optimizer}, {"offload_param", r.offload_param}});
    if (r.stage == 3)
      row["zero_init"] = r.zero_init;
    row["cpu_bytes"] = r.cpu_bytes;
    row["gpu_bytes"] = r.gpu_bytes;
    row["cpu_gib"] = r.cpu_gib;
    row["gpu_gib"] = r.gpu_gib;
    list.push_back(row);
  }
  core::Json query = core::Json::object({{"total_params", q.total_params},
                                         {"gpus_per_node", q.gpus_per_node},
                                         {"nodes", q.nodes},
                                         {"stage", q.stage},
                                         {"additional_buffer_factor", q.additional_buffer_factor}});
  if (q.stage == 3)
    query["largest_layer_params"] = q.largest_layer_params;
  return core::Json::object(
      {{"estimator", q.stage == 2 ? "estimate_zero2_model_states_mem_needs" : "estimate_zero3_model_states_mem_needs"},
       {"note", "DeepSpeed's estimator: model states only (no activations, buffers or allocator overhead)"},
       {"query", query},
       {"rows", list}});
}

std::string estimator_table(const memory::EstimatorQuery& q, const std::vector<memory::EstimatorRow>& rows)
{
  std::string table = memory::format_estimator_table(q, rows);
  if (!table.empty() && table.back() != '\n')
    table += '\n'; // DeepSpeed prints line by line; the terminal wants the last line ended too
  return table;
}

} // namespace zerosim::report
