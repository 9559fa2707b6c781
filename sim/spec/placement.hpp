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

/// A rank's coordinates in DeepSpeed's PipeModelDataParallelTopology, which Megatron-DeepSpeed and Megatron-LM share
/// (docs/pipeline-parallel.md §1): rank = stage x D x T + data x T + model. Without pipeline parallelism stage is 0.
struct RankCoords {
  int stage = 0; ///< pipeline stage, 0..p-1
  int data = 0;  ///< data-parallel index, 0..D-1
  int model = 0; ///< tensor-parallel index, 0..T-1
  bool operator==(const RankCoords&) const = default;
};

/// The coordinates of global rank `rank` at tensor-parallel degree `tp` and data-parallel degree `dp`. Throws
/// core::InternalError for a negative rank or a degree below 1.
RankCoords coords_of(int rank, int tp, int dp);
/// The global rank of `c` (the inverse of coords_of).
int rank_of(RankCoords c, int tp, int dp);

/// The instance of communicator kind `g` GPU `gpu` belongs to, numbered within the kind: with the kind, it names
/// one communicator (docs/engine.md "How collectives are matched"). WORLD: 0. INTRA_NODE: the node. INTER_NODE: the
/// local index. TENSOR: the tensor-parallel group, global rank / t (t consecutive GPUs of a node). DATA_PARALLEL: the
/// stage and tensor-parallel index, stage x t + local % t (without tensor parallelism and pipeline: 0, the world).
/// EMBEDDING: the tied-embedding pair of the first and last stages that share a data and model index, data x t +
/// model. `ranks_per_stage` is D x t, the ranks of one pipeline stage (0: no pipeline, one stage). Throws
/// core::InternalError for a GPU outside its node or a degree t that does not divide gpus_per_node.
int group_instance(CommGroup g, Gpu gpu, int gpus_per_node, int tensor_parallel, int ranks_per_stage = 0);

} // namespace zerosim::spec
