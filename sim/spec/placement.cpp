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

int group_instance(CommGroup g, Gpu gpu, int gpus_per_node, int tensor_parallel)
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
    return gpu.local % tensor_parallel;
  }
  throw core::InternalError("placement: unknown communicator kind");
}

} // namespace zerosim::spec
