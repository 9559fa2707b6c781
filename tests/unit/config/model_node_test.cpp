// Model and node files: every field read, every default applied (docs/config.md).
#include "config_test_util.hpp"

#include <doctest/doctest.h>

using namespace zerosim;
using namespace zerosim::config;
using namespace zerosim::config::test;

TEST_SUITE("config")
{

  TEST_CASE("model_reader: Llama-2-70B shape with every key given")
  {
    // Shape from the Llama 2 paper (Touvron et al. 2023, Table 1) and the HF config.json of Llama-2-70b-hf.
    spec::ModelSpec m = load_model_text(R"(name: Llama-2-70B
layers: 80
hidden: 8192
heads: 64
kv_heads: 8
ffn_hidden: 28672
ffn: swiglu
vocab: 32000
tied_embeddings: false
norm: rmsnorm
position: rope
bias: false
source: "HF config.json"
)",
                                        "llama.yaml");
    CHECK(m.name == "Llama-2-70B");
    CHECK(m.layers == 80);
    CHECK(m.hidden == 8192);
    CHECK(m.heads == 64);
    CHECK(m.kv_heads == 8);
    CHECK(m.ffn_hidden == 28672);
    CHECK(m.ffn == spec::FfnKind::SWIGLU);
    CHECK(m.vocab == 32000);
    CHECK_FALSE(m.tied_embeddings);
    CHECK(m.norm == spec::NormKind::RMSNORM);
    CHECK(m.position == spec::PositionKind::ROPE);
    CHECK_FALSE(m.bias);
    CHECK(m.max_position == 0);
    CHECK(m.source == "HF config.json");
    CHECK(m.head_dim() == 128); // 8192 / 64
  }

  TEST_CASE("model_reader: defaults of docs/scenario-format.md (kv_heads = heads, ffn_hidden = 4h, gelu, layernorm)")
  {
    spec::ModelSpec m = load_model(DATA + "/models/test-gpt.yaml");
    CHECK(m.kv_heads == 16);         // = heads
    CHECK(m.ffn_hidden == 4 * 1024); // 4 * hidden
    CHECK(m.ffn == spec::FfnKind::GELU);
    CHECK(m.norm == spec::NormKind::LAYERNORM);
    CHECK(m.position == spec::PositionKind::LEARNED);
    CHECK(m.max_position == 1024);
    CHECK(m.bias); // default true
    CHECK(m.tied_embeddings);
  }

  TEST_CASE("node_reader: every key of the fixture, in SI units")
  {
    spec::NodeSpec n = load_node(DATA + "/topologies/test-node.yaml");
    CHECK(n.name == "test node");
    CHECK(n.gpu.model == "A100-SXM4-80GB");
    CHECK(n.gpu.memory_bytes == 80LL << 30);     // 80 GiB
    CHECK(n.gpu.memory_bandwidth_Bps == 2039e9); // 2039 GB/s
    CHECK(n.gpu.peak_bf16_flops == 312e12);
    CHECK(n.gpu.peak_fp16_flops == 312e12);
    CHECK(n.gpu.peak_tf32_flops == 156e12);
    CHECK(n.gpu.peak_fp32_flops == doctest::Approx(19.5e12));
    CHECK(n.gpus == 8);
    CHECK(n.nvlink.present);
    CHECK(n.nvlink.bandwidth_Bps == 300e9);
    CHECK(n.nvlink.latency_s == doctest::Approx(0.6e-6)); // default: NCCL tuning.cc hwLat NVLink LL
    CHECK(n.pcie.bandwidth_Bps == 25e9);
    CHECK(n.pcie.gpus_per_switch == 2);
    CHECK(n.pcie.switch_uplink_Bps == 25e9);
    CHECK(n.pcie.latency_s == doctest::Approx(1.0e-6)); // default: NCCL tuning.cc hwLat PCI LL
    CHECK(n.cpu.sockets == 2);
    CHECK(n.cpu.cores == 128);
    CHECK(n.cpu.memory_bytes == 2LL << 40); // 2 TiB
    CHECK(n.cpu.memory_bandwidth_Bps == 300e9);
    CHECK(n.cpu.reserved_bytes == 109951162778); // default 5 % of 2 TiB = 0.05 * 2^41, rounded
    CHECK(n.cpu.adam_bytes_per_param == 28);     // docs/deepspeed-schedule.md §9.1
    CHECK(n.nvme.devices == 4);
    CHECK(n.nvme.read_Bps == doctest::Approx(6.8e9));
    CHECK(n.nvme.write_Bps == 3.5e9);
    CHECK(n.nvme.capacity_bytes == 3'840'000'000'000); // 3.84 TB
    CHECK(n.nics.count == 8);
    CHECK(n.nics.bandwidth_Bps == 25e9); // 200 Gbps / 8
    CHECK(n.source.empty());
  }

  TEST_CASE("node_reader: PCIe-only workstation, optional blocks absent, reserved as bytes or percent")
  {
    const std::string ws = R"(name: workstation
gpu: {model: RTX, memory: 24 GiB, memory_bandwidth: 1008 GB/s, peak: {bf16: 165 TFLOPS}}
gpus: 1
pcie: {bandwidth: 25 GB/s, latency: 2 us}
cpu: {cores: 16, memory: 128 GiB, memory_bandwidth: 80 GB/s, reserved: 8 GiB, adam_bytes_per_param: 32}
)";
    spec::NodeSpec n = load_node_text(ws, "ws.yaml");
    CHECK_FALSE(n.nvlink.present);
    CHECK(n.pcie.switch_uplink_Bps == 25e9); // default: pcie.bandwidth
    CHECK(n.pcie.gpus_per_switch == 1);
    CHECK(n.pcie.latency_s == doctest::Approx(2e-6));
    CHECK(n.cpu.sockets == 1);
    CHECK(n.cpu.reserved_bytes == 8LL << 30);
    CHECK(n.cpu.adam_bytes_per_param == 32);
    CHECK(n.nvme.devices == 0);
    CHECK(n.nics.count == 0);
    CHECK(n.gpu.peak_fp32_flops == 0); // not given: refused only for a precision that needs it

    std::string pct = ws;
    pct.replace(pct.find("reserved: 8 GiB"), 15, "reserved: 10%");
    CHECK(load_node_text(pct, "ws.yaml").cpu.reserved_bytes == (128LL << 30) / 10); // 10 % of 128 GiB
  }

} // TEST_SUITE
