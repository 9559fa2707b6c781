// topologies/NAME.yaml (docs/scenario-format.md "Node file", docs/config.md for the defaults and their sources).
#include "config/readers.hpp"
#include "spec/names.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <cmath>
#include <filesystem>

namespace zerosim::config {
namespace {

const char* peak_key(spec::Precision p)
{
  switch (p) {
  case spec::Precision::BF16:
  case spec::Precision::AMP_BF16:
    return "bf16";
  case spec::Precision::FP16:
  case spec::Precision::AMP_FP16:
    return "fp16";
  case spec::Precision::FP32:
    break;
  }
  return "fp32";
}

std::int64_t to_bytes(double b)
{
  return static_cast<std::int64_t>(std::llround(b));
}

/// cpu.reserved in bytes: bytes, or a percentage of cpu.memory ("5%"). nullopt when absent.
std::optional<double> read_reserved(FieldReader& cpu, double memory)
{
  const YAML::Node v = cpu.take("reserved");
  if (!v.IsDefined() || v.IsNull())
    return std::nullopt;
  const std::string what = "a size with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB) or a percentage of "
                           "cpu.memory (\"5%\")";
  std::string text = v.IsScalar() ? v.Scalar() : "";
  double bytes = -1;
  if (!text.empty() && text.back() == '%') {
    std::optional<double> pct = parse_number(text.substr(0, text.size() - 1));
    if (pct && *pct >= 0 && *pct < 100)
      bytes = memory * *pct / 100;
  } else if (std::optional<double> q = parse_quantity(text, UnitKind::BYTES); q && *q >= 0) {
    bytes = *q;
  }
  if (bytes < 0)
    cpu.fail_expected("reserved", what);
  return bytes;
}

} // namespace

spec::NodeSpec read_node(FieldReader& r, std::optional<spec::Precision> precision)
{
  const std::string POS = "a positive integer";
  const std::string NONNEG = "a non-negative integer";
  spec::NodeSpec n;
  n.name = r.req_string("name");

  FieldReader gpu = r.req_map("gpu");
  n.gpu.model = gpu.req_string("model");
  n.gpu.memory_bytes = to_bytes(gpu.req_quantity("memory", UnitKind::BYTES));
  n.gpu.memory_bandwidth_Bps = gpu.req_quantity("memory_bandwidth", UnitKind::BANDWIDTH);
  FieldReader peak = gpu.req_map("peak");
  n.gpu.peak_bf16_flops = peak.opt_quantity("bf16", UnitKind::COMPUTE).value_or(0);
  n.gpu.peak_fp16_flops = peak.opt_quantity("fp16", UnitKind::COMPUTE).value_or(0);
  n.gpu.peak_tf32_flops = peak.opt_quantity("tf32", UnitKind::COMPUTE).value_or(0);
  n.gpu.peak_fp32_flops = peak.opt_quantity("fp32", UnitKind::COMPUTE).value_or(0);
  if (std::optional<FieldReader> power = gpu.opt_map("power")) {
    const double limit = power->req_number("limit", 1, 100000, "a power in watts");
    const double tdp = power->req_number("tdp", 1, 100000, "a power in watts");
    if (limit > tdp)
      power->fail("limit", "a power limit above the board's rated power (tdp " + core::format_number(tdp) +
                               " W) does not raise the sustained clock; give at most the tdp");
    n.gpu.power_limit_W = limit;
    n.gpu.tdp_W = tdp;
  }
  if (precision) {
    const char* k = peak_key(*precision);
    if (!peak.has(k))
      peak.fail_missing(k, std::string("training.precision ") + spec::to_string(*precision) + " needs it");
  }

  n.gpus = static_cast<int>(r.req_int("gpus", 1, POS));

  if (std::optional<FieldReader> nv = r.opt_map("nvlink")) {
    n.nvlink.present = true;
    n.nvlink.bandwidth_Bps = nv->req_quantity("bandwidth", UnitKind::BANDWIDTH);
    n.nvlink.latency_s = nv->get_quantity("latency", UnitKind::TIME, false);
  }

  FieldReader pcie = r.req_map("pcie");
  n.pcie.bandwidth_Bps = pcie.req_quantity("bandwidth", UnitKind::BANDWIDTH);
  n.pcie.gpus_per_switch = static_cast<int>(pcie.get_int("gpus_per_switch", 1, POS));
  n.pcie.switch_uplink_Bps = pcie.opt_quantity("switch_uplink", UnitKind::BANDWIDTH).value_or(n.pcie.bandwidth_Bps);
  n.pcie.latency_s = pcie.get_quantity("latency", UnitKind::TIME, false);

  FieldReader cpu = r.req_map("cpu");
  n.cpu.sockets = static_cast<int>(cpu.get_int("sockets", 1, POS));
  n.cpu.cores = static_cast<int>(cpu.req_int("cores", 1, POS));
  n.cpu.memory_bytes = to_bytes(cpu.req_quantity("memory", UnitKind::BYTES));
  n.cpu.memory_bandwidth_Bps = cpu.req_quantity("memory_bandwidth", UnitKind::BANDWIDTH);
  const double memory = static_cast<double>(n.cpu.memory_bytes);
  const double reserved = cpu.get<double>("reserved", [&](FieldReader& c) { return read_reserved(c, memory); });
  if (cpu.has("reserved") && reserved >= memory)
    cpu.fail_expected("reserved", "less than cpu.memory (" + format_quantity(memory, UnitKind::BYTES) + ")");
  n.cpu.reserved_bytes = to_bytes(reserved);
  n.cpu.adam_bytes_per_param = cpu.get_number("adam_bytes_per_param", 1e-300, 1e300, "a positive number");

  FieldReader nvme = r.map_or_empty("nvme");
  n.nvme.devices = static_cast<int>(nvme.get_int("devices", 0, NONNEG));
  if (n.nvme.devices > 0) {
    n.nvme.read_Bps = nvme.req_quantity("read", UnitKind::BANDWIDTH);
    n.nvme.write_Bps = nvme.req_quantity("write", UnitKind::BANDWIDTH);
    n.nvme.capacity_bytes = to_bytes(nvme.req_quantity("capacity", UnitKind::BYTES));
  } else {
    n.nvme.read_Bps = nvme.opt_quantity("read", UnitKind::BANDWIDTH).value_or(0);
    n.nvme.write_Bps = nvme.opt_quantity("write", UnitKind::BANDWIDTH).value_or(0);
    n.nvme.capacity_bytes = to_bytes(nvme.opt_quantity("capacity", UnitKind::BYTES).value_or(0));
  }
  n.nvme.read_latency_s = nvme.get_quantity("read_latency", UnitKind::TIME, false);
  n.nvme.write_latency_s = nvme.get_quantity("write_latency", UnitKind::TIME, false);

  FieldReader nics = r.map_or_empty("nics");
  n.nics.count = static_cast<int>(nics.get_int("count", 0, NONNEG));
  if (n.nics.count > 0)
    n.nics.bandwidth_Bps = nics.req_quantity("bandwidth", UnitKind::BANDWIDTH);
  else
    n.nics.bandwidth_Bps = nics.opt_quantity("bandwidth", UnitKind::BANDWIDTH).value_or(0);
  n.nics.busbw_fraction = nics.opt_number("busbw_fraction", 1e-3, 1.0, "a number in (0, 1]").value_or(0);

  n.source = r.get_string("source");
  if (std::optional<std::string> c = r.opt_string("calibration")) {
    if (c->empty())
      r.fail_expected("calibration", "the path of a calibration profile, or none");
    n.calibration =
        *c == "none" ? *c : (std::filesystem::path(r.file()).parent_path() / *c).lexically_normal().string();
  }
  return n;
}

} // namespace zerosim::config
