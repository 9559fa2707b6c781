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

} // namespace zerosim::spec
