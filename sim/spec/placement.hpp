// Where a rank's GPU sits in the cluster, and which NIC it sends through: the vocabulary the collective planner,
// the platform and the engine share (docs/architecture.md).
#pragma once

#include "spec/task_graph.hpp"

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

/// The instance of communicator kind `g` GPU `gpu` belongs to, numbered within the kind: with the kind, it names
/// one communicator (docs/engine.md "How collectives are matched"). WORLD: 0. INTRA_NODE: the node. INTER_NODE: the
/// local index. TENSOR: the tensor-parallel group, global rank / t (t consecutive GPUs of a node). DATA_PARALLEL: the
/// tensor-parallel index, local % t (0 without tensor parallelism: the world). Throws core::InternalError for a GPU
/// outside its node or a degree t that does not divide gpus_per_node.
int group_instance(CommGroup g, Gpu gpu, int gpus_per_node, int tensor_parallel);

} // namespace zerosim::spec
