// Where a rank's GPU sits in the cluster, and which NIC it sends through: the vocabulary the collective planner,
// the platform and the engine share (docs/architecture.md).
#pragma once

#include <compare>

namespace zerosim::spec {

/// A GPU of the cluster.
struct Gpu {
  int node = 0;
  int local = 0; ///< index inside the node, 0..gpus_per_node-1
  bool operator==(const Gpu&) const = default;
  auto operator<=>(const Gpu&) const = default;
};

/// The NIC GPU `local` uses: NICs hang off the PCIe switches in order, GPU g uses NIC g * nics / gpus
/// (integer division); -1 when the node has no NIC.
int nic_of(int local, int gpus_per_node, int nics_per_node);

} // namespace zerosim::spec
