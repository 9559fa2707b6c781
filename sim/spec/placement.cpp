#include "spec/placement.hpp"

#include "core/error.hpp"

#include <cstdint>
#include <string>

namespace zerosim::spec {

int nic_of(int local, int gpus_per_node, int nics_per_node)
{
  if (gpus_per_node < 1 || local < 0 || local >= gpus_per_node)
    throw core::InternalError("placement: GPU " + std::to_string(local) + " outside a node of " +
                              std::to_string(gpus_per_node));
  if (nics_per_node < 1)
    return -1;
  return static_cast<int>(static_cast<std::int64_t>(local) * nics_per_node / gpus_per_node);
}

RankCoords coords_of(int rank, int tp, int dp)
{
  if (rank < 0 || tp < 1 || dp < 1)
    throw core::InternalError("placement: rank " + std::to_string(rank) + " at tensor-parallel degree " +
                              std::to_string(tp) + " and data-parallel degree " + std::to_string(dp));
  return RankCoords{rank / (dp * tp), (rank / tp) % dp, rank % tp};
}

int rank_of(RankCoords c, int tp, int dp)
{
  return c.stage * dp * tp + c.data * tp + c.model;
}

int group_instance(CommGroup g, Gpu gpu, int gpus_per_node, int tensor_parallel, int ranks_per_stage)
{
  if (gpus_per_node < 1 || gpu.node < 0 || gpu.local < 0 || gpu.local >= gpus_per_node)
    throw core::InternalError("placement: GPU " + std::to_string(gpu.local) + " of node " + std::to_string(gpu.node) +
                              " outside a node of " + std::to_string(gpus_per_node));
  if (tensor_parallel < 1 || gpus_per_node % tensor_parallel != 0)
    throw core::InternalError("placement: tensor-parallel degree " + std::to_string(tensor_parallel) +
                              " does not divide the " + std::to_string(gpus_per_node) + " GPUs of a node");
  switch (g) {
  case CommGroup::WORLD:
    return 0;
  case CommGroup::INTRA_NODE:
    return gpu.node;
  case CommGroup::INTER_NODE:
    return gpu.local;
  case CommGroup::TENSOR:
    return static_cast<int>((static_cast<std::int64_t>(gpu.node) * gpus_per_node + gpu.local) / tensor_parallel);
  case CommGroup::DATA_PARALLEL:
  case CommGroup::EMBEDDING: {
    const std::int64_t rank = static_cast<std::int64_t>(gpu.node) * gpus_per_node + gpu.local;
    if (ranks_per_stage < 1)
      return g == CommGroup::DATA_PARALLEL ? gpu.local % tensor_parallel : static_cast<int>(rank);
    const auto stage = static_cast<int>(rank / ranks_per_stage);
    if (g == CommGroup::DATA_PARALLEL)
      return stage * tensor_parallel + gpu.local % tensor_parallel;
    return static_cast<int>(rank % ranks_per_stage); // data x t + model
  }
  }
  throw core::InternalError("placement: unknown communicator kind");
}

} // namespace zerosim::spec
