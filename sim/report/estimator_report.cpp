#include "report/estimator_report.hpp"

namespace zerosim::report {

core::Json estimator_json(const memory::EstimatorQuery& q, const std::vector<memory::EstimatorRow>& rows)
{
  core::Json list = core::Json::array();
  for (const auto& r : rows) {
    core::Json row = core::Json::object();
    row.set("stage", r.stage).set("offload_optimizer", r.offload_optimizer).set("offload_param", r.offload_param);
    if (r.stage == 3)
      row.set("zero_init", r.zero_init);
    row.set("cpu_bytes", r.cpu_bytes).set("gpu_bytes", r.gpu_bytes).set("cpu_gib", r.cpu_gib).set("gpu_gib", r.gpu_gib);
    list.push(row);
  }
  core::Json query = core::Json::object()
                         .set("total_params", q.total_params)
                         .set("gpus_per_node", q.gpus_per_node)
                         .set("nodes", q.nodes)
                         .set("stage", q.stage)
                         .set("additional_buffer_factor", q.additional_buffer_factor);
  if (q.stage == 3)
    query.set("largest_layer_params", q.largest_layer_params);
  return core::Json::object()
      .set("estimator",
           q.stage == 2 ? "estimate_zero2_model_states_mem_needs" : "estimate_zero3_model_states_mem_needs")
      .set("note", "DeepSpeed's estimator: model states only (no activations, buffers or allocator overhead)")
      .set("query", query)
      .set("rows", list);
}

std::string estimator_table(const memory::EstimatorQuery& q, const std::vector<memory::EstimatorRow>& rows)
{
  std::string table = memory::format_estimator_table(q, rows);
  if (!table.empty() && table.back() != '\n')
    table += '\n'; // DeepSpeed prints line by line; the terminal wants the last line ended too
  return table;
}

} // namespace zerosim::report
