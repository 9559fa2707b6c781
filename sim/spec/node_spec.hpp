// Plain description of one server and of a cluster of them. Units are in the names
// (bytes, B/s, FLOP/s, s). Filled by the config layer, read by schedule, memory and platform.
#pragma once

#include <cstdint>
#include <string>

namespace zerosim::spec {

struct GpuSpec {
  std::string model;
  std::int64_t memory_bytes = 0;
  double memory_bandwidth_Bps = 0;
  double peak_bf16_flops = 0; ///< dense, per second
  double peak_fp16_flops = 0;
  double peak_tf32_flops = 0;
  double peak_fp32_flops = 0;
  double power_limit_W = 0; ///< gpu.power.limit: the board power cap the GPUs ran at; 0 = the rated power
  double tdp_W = 0;         ///< gpu.power.tdp: the board's rated power (peak and MAMF figures hold there)
};

struct NvlinkSpec {
  bool present = false;     ///< false for PCIe-only nodes
  double bandwidth_Bps = 0; ///< per GPU, per direction
  double latency_s = 0;
};

struct PcieSpec {
  double bandwidth_Bps = 0;     ///< per GPU link, per direction, as achieved
  int gpus_per_switch = 1;      ///< GPUs (and their NIC/NVMe) sharing one switch uplink
  double switch_uplink_Bps = 0; ///< switch to CPU root complex, per direction
  double latency_s = 0;
};

struct CpuSpec {
  int sockets = 1;
  int cores = 1;
  std::int64_t memory_bytes = 0;
  double memory_bandwidth_Bps = 0; ///< achievable, all sockets together
  std::int64_t reserved_bytes = 0; ///< host memory kept for the OS and the framework, not usable
  /// DRAM traffic of one CPU-Adam element update (node files' `cpu.adam_bytes_per_param`, whose default the schema
  /// states); 0: DeepSpeedCPUAdam's own, schedule::ADAM_BYTES_PER_ELEM (docs/deepspeed-schedule.md §9.1).
  double adam_bytes_per_param = 0;
};

/// The node's NVMe drives, striped as one RAID-0 volume (DeepSpeed's nvme_path; docs/engine.md).
struct NvmeSpec {
  int devices = 0;                 ///< 0 = no NVMe
  double read_Bps = 0;             ///< per device
  double write_Bps = 0;            ///< per device
  std::int64_t capacity_bytes = 0; ///< per device
  double read_latency_s = 0;       ///< per aio request wave (docs/engine.md); the node reader's default: datasheet
  double write_latency_s = 0;      ///< per aio request wave; the node reader's default: datasheet
};

struct NicSpec {
  int count = 0;
  double bandwidth_Bps = 0; ///< per NIC, per direction
  /// NCCL's measured bus bandwidth through one NIC of this cluster / bandwidth_Bps (two nodes, large messages);
  /// 0: not measured, collectives::NET_BUSBW_FRACTION (docs/collectives.md "Achieved bus bandwidth").
  double busbw_fraction = 0;
};

struct NodeSpec {
  std::string name;
  GpuSpec gpu;
  int gpus = 0;
  NvlinkSpec nvlink;
  PcieSpec pcie;
  CpuSpec cpu;
  NvmeSpec nvme;
  NicSpec nics;
  std::string source; ///< public source of the figures (for people)
  /// The node file's `calibration:` profile: a path resolved against the node file's folder, "none", or "" when
  /// not given (docs/calibration.md "Precedence").
  std::string calibration;
};

struct NetworkSpec {
  double nic_bandwidth_Bps = 0; ///< per NIC, per direction (resolved: node's nics unless overridden)
  int nics_per_node = 0;
  double latency_s = 0;        ///< one-way NIC-to-NIC
  double oversubscription = 1; ///< 1 = non-blocking
  /// The fabric kind (the table of platform/fabric.hpp). Scenario files do not choose it yet: the one switch.
  std::string fabric = "single_switch";
};

struct ClusterSpec {
  NodeSpec node; ///< after `overrides` were applied
  int nodes = 1;
  int gpus_per_node = 0; ///< <= node.gpus; the first GPUs in the node's order
  NetworkSpec network;

  int total_gpus() const { return nodes * gpus_per_node; }
};

} // namespace zerosim::spec
