// The compute model (docs/compute.md, cited as §n): GPU roofline with a shape-aware efficiency per GPU kind, and
// host CPU work for CPU Adam. Every constant below is data and carries its source.
#include "compute/compute_model.hpp"

#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <string>
#include <utility>

namespace zerosim::compute {

namespace {

// ---- GPU efficiency data (docs/compute.md §1.4) ------------------------------------------------

/// Per kernel launched: the gap between back-to-back kernels of a stream plus ramp-up and tail.
/// A stated assumption of 2 µs, bracketed by the device-side floor of about 0.9 µs per kernel when
/// launched from a CUDA graph (CUDA.jl docs "Graphs": 80 broadcast kernels in 70 µs) and the "order
/// of microseconds" per launch from a stream (Modal GPU Glossary, "CUDA Graph").
constexpr double KERNEL_OVERHEAD_S = 2e-6;

/// The efficiency figures per GPU kind, kernel family and torch generation are data: calibration/kernels.yaml
/// (read by the config layer into spec::KernelTable; docs/compute.md §1.4 gives each figure's source).

// ---- GEMM shape model (docs/compute.md §1.2) ----------------------------------------------------

/// Output tiles cuBLAS/CUTLASS choose between on Ampere/Hopper (NVIDIA "Matrix Multiplication
/// Background User's Guide", section 2.3 "Typical Tile Dimensions in cuBLAS and Performance": 256x128 and
/// 128x256 are the most efficient, smaller tiles trade efficiency for parallelism).
struct Tile {
  int m, n;
};
constexpr std::array<Tile, 6> TILES{{{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}}};

/// Operand reuse of a tile (FLOPs per element loaded ∝ Tm·Tn / (Tm + Tn)).
double reuse(Tile t)
{
  return double(t.m) * t.n / (t.m + t.n);
}

/// A tile's rate relative to 256x128: sqrt of its reuse ratio (1, 0.87, 0.71, 0.61 for 256x128,
/// 128x128, 128x64, 64x64). The guide says larger tiles are more efficient but gives no factor:
/// the square root is a stated assumption (docs/compute.md §1.2 compares it with measurements).
double tile_rate(Tile t)
{
  return std::sqrt(reuse(t) / reuse(TILES[0]));
}

/// Elements of k a tile spends outside its main loop, in units of k: filling the 3-stage cp.async
/// pipeline of 32-deep k-slices (CUTLASS's SM80 "256x128_32x3" GEMM) plus about one iteration of
/// epilogue. A stated assumption: 128.
constexpr double K_OVERHEAD = 128;

/// A GEMM operand's row is 16-byte aligned when its length is a multiple of 8 16-bit elements: cuBLAS's
/// tensor-core kernels load operands 16 bytes at a time (NVIDIA, Matrix Multiplication Background User's Guide,
/// DU-09799-001, section 2.2 "Tensor Core Requirements").
constexpr std::int64_t MISALIGNED_ELEMENTS = 8;

/// FlashAttention-2 thread blocks cover 128 query rows (flash-attention csrc/flash_attn/src/
/// flash_fwd_launch_template.h, run_mha_fwd_hdim128: kBlockM = 128 on sm80).
constexpr double FLASH_BLOCK_ROWS = 128;

/// Every decoder-only model here is causal: a kernel that skips fully masked tiles (`causal_skip` in the data)
/// computes half the square (Dao-AILab/flash-attention#573: "we only need to compute approximately half the
/// number of entries").
constexpr double CAUSAL_SHARE = 0.5;
/// FlashAttention-2's backward runs 5 products against the forward's 2 (it recomputes QKᵀ): 2.5x the
/// forward (benchmark_flash_attention.py; tridao in Dao-AILab/flash-attention#1525). The workload's
/// backward counts 4 products (2x the forward), so the kernel does 5/4 of it.
constexpr double FLASH_BWD_WORK = 5.0 / 4.0;
/// The head dim the attention figures of calibration/kernels.yaml are at (FA2, FA3 and cuDNN benchmarks, head dim 128).
constexpr double HEAD_DIM_OF_FIGURES = 128;
/// ... and the key length they are at (the same benchmarks' 4k points).
constexpr double SEQ_OF_FIGURES = 4096;
/// Kernels of FlashAttention-2's backward: dO·O preprocessing, the main dQ/dK/dV kernel, dQ conversion
/// (flash-attention csrc/flash_attn/src/flash_bwd_launch_template.h).
constexpr int FLASH_BWD_KERNELS = 3;
/// Under grouped-query attention a fused backward writes dK and dV per query head and reduces them over each group:
/// two more kernels (flash-attention csrc/flash_attn/flash_api.cpp mha_bwd, `at::sum_out` of dk_expanded and
/// dv_expanded; cuDNN's two `fmha_reduce_head` in the project's H100 profile). workload::Op::gqa_reductions.
constexpr int GQA_REDUCTION_KERNELS = 2;

/// Useful share of the SM slots when `blocks` equal thread blocks run in waves over `sms` SMs.
double wave_share(double blocks, int sms)
{
  const double waves = std::ceil(blocks / sms);
  return blocks / (waves * sms);
}

double wave_fraction(std::int64_t m, std::int64_t n, int sms)
{
  double best = 0;
  for (const Tile& t : TILES) {
    const double tiles = std::ceil(double(m) / t.m) * std::ceil(double(n) / t.n);
    const double waves = std::ceil(tiles / sms);
    const double useful = double(m) * double(n) / (waves * sms * t.m * t.n);
    best = std::max(best, useful * tile_rate(t));
  }
  return best;
}

double hbm_bandwidth(const spec::GpuSpec& gpu, const GpuEfficiency& e)
{
  if (gpu.memory_bandwidth_Bps <= 0)
    throw core::InputError("GPU " + gpu.model + ": memory bandwidth must be positive to time memory traffic");
  return gpu.memory_bandwidth_Bps * e.hbm;
}

/// Non-tensor-core FLOP/s (optimizer arithmetic, elementwise math): the fp32 peak, else the dtype's.
double vector_peak(const spec::GpuSpec& gpu, spec::Precision p)
{
  return gpu.peak_fp32_flops > 0 ? gpu.peak_fp32_flops : peak_flops(gpu, p);
}

double gemm_seconds(double flops, std::int64_t m, std::int64_t n, std::int64_t k, double peak, const GpuEfficiency& e)
{
  return flops / (peak * gemm_efficiency(m, n, k, e));
}

// ---- CPU (docs/compute.md §3) --------------------------------------------------------------------

/// Per-core rate of DeepSpeedCPUAdam, FLOPs as schedule::detail::ADAM_FLOPS_PER_ELEM (14) counts them.
/// Fitted once, offline, to the ZeRO-Offload paper's Table 4 (Ren et al., ATC'21, arXiv 2101.06840:
/// CPU-Adam 0.22 / 0.51 / 1.03 / 2.41 s for 1 / 2 / 4 / 8 B parameters on a DGX-2 host, 2 x Xeon
/// Platinum 8168 = 48 cores, one process using all of them): minimise Σ ((14·N/(48·r) − t)/t)² over
/// 1/r (closed form 1/r = Σu / Σu², u = 14·N/(48·t)). Every point is then compute-bound (0.252 s per
/// B params against 28 B / 200 GB/s = 0.14 s). Per-point errors: +14.6 %, −1.1 %, −2.1 %, −16.3 %.
/// tests/unit/compute/compute_test.cpp recomputes the fit with Eigen and pins this value to it.
constexpr double CPU_ADAM_CORE_FLOPS = 1156623156.1571739;

} // namespace

GpuEfficiency gpu_efficiency(const spec::GpuSpec& gpu, const spec::SoftwareSpec& software,
                             const spec::KernelTable& table, bool* known)
{
  if (table.empty())
    throw core::InternalError("compute: no kernel efficiency data (calibration/kernels.yaml) for GPU " + gpu.model);
  const spec::GpuKindData& kind = table.kind_of(gpu.model, known);
  const spec::GemmGeneration& gemm = spec::gemm_generation(kind, software.torch);
  GpuEfficiency e;
  e.kind = kind.kind;
  e.gemm_max = gemm.max.value;
  e.hbm = kind.hbm.value;
  e.hbm_nonvectorized = kind.hbm_nonvectorized.value > 0 ? kind.hbm_nonvectorized.value : 1.0;
  spec::AttentionKernel used = software.attention;
  const spec::AttentionFigure* fig = spec::attention_figure(kind, software.attention, &used);
  if (!fig)
    throw core::InternalError("compute: GPU kind " + kind.kind + " lists no fused attention kernel");
  e.attention_kernel = used;
  e.attention_fwd = fig->fwd.value;
  e.attention_bwd = fig->bwd.value;
  e.attention_fwd_softmax_share = fig->fwd_softmax_share;
  e.attention_bwd_softmax_share = fig->bwd_softmax_share;
  e.attention_seq_half = fig->seq_half;
  e.causal_skip = fig->causal_skip;
  e.sms = kind.sms;
  e.kernel_overhead_s = KERNEL_OVERHEAD_S;
  e.clock = sustained_clock(gpu, table); // a power cap's sustained SM clock (docs/compute.md §1.8)
  if (!kind.misaligned_gemm.empty()) {
    const spec::MisalignedGemmGeneration& m = spec::nearest_generation(kind.misaligned_gemm, software.torch);
    e.misaligned_fp16 = m.fp16;
    e.misaligned_bf16 = m.bf16;
  }
  return e;
}

GpuEfficiency gpu_efficiency(const spec::Scenario& s)
{
  // `--without stack`: today's stack (spec::SoftwareSpec's defaults: flash2, torch 2.6) prices every kernel.
  GpuEfficiency e = gpu_efficiency(s.cluster.node.gpu, s.priced_software(), s.kernels);
  if (!s.mechanisms.sustained_clock)
    e.clock = 1.0;
  if (!s.mechanisms.alignment)
    e.misaligned_fp16 = e.misaligned_bf16 = 1.0;
  // The calibration profile's multipliers on the kind's figures (docs/calibration.md), each kept a fraction.
  e.gemm_max = spec::scaled_fraction(e.gemm_max, s.calibration.factor("gemm." + e.kind));
  e.hbm = spec::scaled_fraction(e.hbm, s.calibration.factor("hbm." + e.kind));
  const double attention = s.calibration.factor("attention." + e.kind);
  e.attention_fwd = spec::scaled_fraction(e.attention_fwd, attention);
  e.attention_bwd = spec::scaled_fraction(e.attention_bwd, attention);
  return e;
}

ScenarioPricing::ScenarioPricing(const spec::Scenario& s) : gpu(gpu_efficiency(s))
{
  const spec::SoftwareSpec software = s.priced_software();
  if (!s.kernels.host.empty())
    host = &spec::host_generation(s.kernels.host, software.torch);
  compiled = software.compile;
  host_factor = s.calibration.factor(std::string("host.") + spec::to_string(s.framework));
}

double peak_flops(const spec::GpuSpec& gpu, spec::Precision p)
{
  double peak = 0;
  const char* dtype = "";
  switch (p) {
  case spec::Precision::BF16:
  case spec::Precision::AMP_BF16:
    // No bf16 peak (V100, Turing): the fp16 tensor-core peak (docs/compute.md §2: optimistic).
    peak = gpu.peak_bf16_flops > 0 ? gpu.peak_bf16_flops : gpu.peak_fp16_flops;
    dtype = "bf16 (or fp16)";
    break;
  case spec::Precision::FP16:
  case spec::Precision::AMP_FP16:
    peak = gpu.peak_fp16_flops;
    dtype = "fp16";
    break;
  case spec::Precision::FP32:
    peak = gpu.peak_tf32_flops > 0 ? gpu.peak_tf32_flops : gpu.peak_fp32_flops;
    dtype = "tf32 (or fp32)";
    break;
  }
  if (peak <= 0)
    throw core::InputError("GPU " + gpu.model + ": no " + dtype + " peak FLOP/s given (gpu.peak)");
  return peak;
}

double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, const GpuEfficiency& e)
{
  if (m <= 0 || n <= 0 || k <= 0)
    throw core::InternalError("compute: GEMM shape " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                              std::to_string(k) + " is not positive");
  if (e.sms <= 0)
    throw core::InternalError("compute: GPU kind " + e.kind + " has no SM count");
  const double depth = double(k) / (double(k) + K_OVERHEAD);
  return e.gemm_max * wave_fraction(m, n, e.sms) * depth;
}

double alignment_share(const workload::Op& op, spec::Precision p, const GpuEfficiency& e)
{
  // Row-major C[m×n] = A[m×k]·B[k×n]: the operands' rows are k and n elements long, in the forward and in both
  // backward products (dY's rows are n long, X's and W's k); m only counts rows. 16 bytes = 8 16-bit elements.
  const bool aligned = op.n % MISALIGNED_ELEMENTS == 0 && op.k % MISALIGNED_ELEMENTS == 0;
  if (aligned)
    return 1.0;
  switch (p) {
  case spec::Precision::FP16:
  case spec::Precision::AMP_FP16:
    return e.misaligned_fp16;
  case spec::Precision::BF16:
  case spec::Precision::AMP_BF16:
    return e.misaligned_bf16;
  case spec::Precision::FP32:
    break;
  }
  return 1.0; // tf32 / fp32: no figure
}

namespace {

/// op_time's seconds and the SM-bound part of them (TaskTime::sm_seconds).
TaskTime op_times(const workload::Op& op, bool backward, const spec::GpuSpec& gpu, spec::Precision p,
                  const GpuEfficiency& e);

} // namespace

double op_time(const workload::Op& op, bool backward, const spec::GpuSpec& gpu, spec::Precision p,
               const GpuEfficiency& e)
{
  return op_times(op, backward, gpu, p, e).seconds;
}

namespace {

TaskTime op_times(const workload::Op& op, bool backward, const spec::GpuSpec& gpu, spec::Precision p,
                  const GpuEfficiency& e)
{
  const double flops = backward ? op.bwd_flops : op.fwd_flops;
  const double bytes = backward ? op.bwd_bytes : op.fwd_bytes;
  const int kernels = op_kernels(op, backward);
  if (kernels == 0)
    return {}; // nothing runs (the backward of an inference workload)
  // Non-vectorized TensorIterator kernels move their bytes at a share of the streaming rate (docs/compute.md §1.5).
  const double nonvec = std::min(bytes, backward ? op.bwd_nonvec_bytes : op.fwd_nonvec_bytes);
  const double memory = bytes > 0 ? (bytes - nonvec + nonvec / e.hbm_nonvectorized) / hbm_bandwidth(gpu, e) : 0;
  double compute = 0;
  switch (op.kind) {
  case workload::OpKind::ELEMENTWISE:
    if (flops > 0)
      compute = flops / vector_peak(gpu, p);
    break;
  case workload::OpKind::GEMM:
  case workload::OpKind::ATTENTION:
    if (flops > 0) {
      const double peak = peak_flops(gpu, p);
      if (op.kind == workload::OpKind::ATTENTION && workload::is_fused_attention(op)) {
        const double work = flops * (e.causal_skip ? CAUSAL_SHARE : 1.0) * (backward ? FLASH_BWD_WORK : 1.0);
        const double blocks = std::ceil(double(op.m) / FLASH_BLOCK_ROWS);
        // The figures are at head dim 128; the softmax's share of the time scales as 128 / d (op.k = d).
        const double share = backward ? e.attention_bwd_softmax_share : e.attention_fwd_softmax_share;
        const double head_dim = (1 - share) + share * HEAD_DIM_OF_FIGURES / static_cast<double>(op.k);
        // ... and at a key length of 4096; the rate rises as 1 / (1 + s0 / s) with the key length s = op.n.
        const double s0 = e.attention_seq_half;
        const double seq = (1 + s0 / SEQ_OF_FIGURES) / (1 + s0 / static_cast<double>(op.n));
        compute =
            work * head_dim / (peak * (backward ? e.attention_bwd : e.attention_fwd) * seq * wave_share(blocks, e.sms));
      } else if (!backward) {
        compute = gemm_seconds(flops, op.m, op.n, op.k, peak, e) / alignment_share(op, p, e);
      } else {
        // dX[m×k] = dY[m×n]·W[n×k] and dW[n×k] = dYᵀ[n×m]·X[m×k]: two GEMMs of half the FLOPs each. Unfused
        // attention's products (cuBLAS strided-batched GEMMs, docs/compute.md §1.3) are priced as GEMMs: both
        // operands are activations, and the two gradient products have the shapes of dX and dW.
        compute =
            gemm_seconds(flops / 2, op.m, op.k, op.n, peak, e) + gemm_seconds(flops / 2, op.n, op.k, op.m, peak, e);
        compute /= alignment_share(op, p, e);
      }
    }
    break;
  }
  // A power cap lowers the sustained SM clock: every compute roof runs slower, HBM does not (§1.8).
  if (e.clock != 1.0)
    compute /= e.clock;
  return {std::max(compute, memory) + kernels * e.kernel_overhead_s, compute >= memory ? compute : 0.0};
}

} // namespace

namespace {

/// Bytes a layer task carries beyond its ops' own traffic: the schedule's copies attached to it (DDP's and
/// FSDP's autocast weight casts, docs/ddp.md "Autocast"). Summed in the order Builder::layer_compute sums them,
/// so a task without copies gives exactly 0.
double extra_task_bytes(const spec::Task& t, const workload::Layer& layer)
{
  double base = 0;
  if (t.phase != spec::Phase::RECOMPUTE)
    for (const workload::Op& op : layer.ops)
      base += t.phase == spec::Phase::FORWARD ? op.fwd_bytes : op.bwd_bytes;
  return t.mem_bytes > base ? t.mem_bytes - base : 0;
}

bool is_layer_phase(spec::Phase ph)
{
  return ph == spec::Phase::FORWARD || ph == spec::Phase::BACKWARD || ph == spec::Phase::RECOMPUTE;
}

/// The layer a layer task names. Throws core::InternalError (prefixed with `who`) for an index outside the workload.
const workload::Layer& task_layer(const spec::Task& t, const workload::Workload& w, const char* who)
{
  if (t.layer < 0 || t.layer >= static_cast<int>(w.layers.size()))
    throw core::InternalError(std::string(who) + ": task " + t.name + " names layer " + std::to_string(t.layer) +
                              " of a workload with " + std::to_string(w.layers.size()) + " layers");
  return w.layers[static_cast<std::size_t>(t.layer)];
}

/// The ops [begin, end) of `layer` a task covers: the whole layer, or a part of it (ZeRO-3's per-module compute,
/// spec::Task::op_begin / op_end; op_end -1: to the layer's end).
struct OpRange {
  std::size_t begin = 0, end = 0;
  bool whole_layer = false; ///< [0, every op of the layer)
};

/// Throws core::InternalError (prefixed with `who`) for a range outside the layer or reversed.
OpRange task_ops(const spec::Task& t, const workload::Layer& layer, const char* who)
{
  const auto n_ops = static_cast<int>(layer.ops.size());
  const int op_end = t.op_end < 0 ? n_ops : t.op_end;
  if (t.op_begin < 0 || op_end > n_ops || t.op_begin > op_end)
    throw core::InternalError(std::string(who) + ": task " + t.name + " names ops [" + std::to_string(t.op_begin) +
                              ", " + std::to_string(op_end) + ") of a layer with " + std::to_string(n_ops));
  return OpRange{static_cast<std::size_t>(t.op_begin), static_cast<std::size_t>(op_end),
                 t.op_begin == 0 && op_end == n_ops};
}

} // namespace

double compute_task_time(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s)
{
  if (t.kind != spec::TaskKind::COMPUTE)
    throw core::InternalError("compute_task_time: task " + t.name + " is not a COMPUTE task");
  return compute_task_time(t, w, s, ScenarioPricing(s));
}

double compute_task_time(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s,
                         const ScenarioPricing& pricing)
{
  return compute_task_times(t, w, s, pricing).seconds;
}

TaskTime compute_task_times(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s,
                            const ScenarioPricing& pricing)
{
  if (t.kind != spec::TaskKind::COMPUTE)
    throw core::InternalError("compute_task_time: task " + t.name + " is not a COMPUTE task");
  const spec::GpuSpec& gpu = s.cluster.node.gpu;
  const spec::Precision p = s.training.precision;
  const GpuEfficiency& e = pricing.gpu;
  if (!is_layer_phase(t.phase)) {
    // Optimizer step, gradient accumulation, casts: one fused kernel over mem_bytes (docs/compute.md §1.5).
    if (t.flops <= 0 && t.mem_bytes <= 0)
      return {};
    double compute = t.flops > 0 ? t.flops / vector_peak(gpu, p) : 0;
    if (e.clock != 1.0)
      compute /= e.clock;
    const double memory = t.mem_bytes > 0 ? t.mem_bytes / hbm_bandwidth(gpu, e) : 0;
    return {std::max(compute, memory) + std::max(1, t.kernels) * e.kernel_overhead_s,
            compute >= memory ? compute : 0.0};
  }
  const workload::Layer& layer = task_layer(t, w, "compute_task_time");
  const OpRange range = task_ops(t, layer, "compute_task_time");
  const auto ops = std::span<const workload::Op>(layer.ops).subspan(range.begin, range.end - range.begin);
  double seconds = 0, sm = 0;
  const auto add = [&](const workload::Op& op, bool backward) {
    const TaskTime o = op_times(op, backward, gpu, p, e);
    seconds += o.seconds;
    sm += o.sm_seconds;
  };
  switch (t.phase) {
  case spec::Phase::FORWARD:
    for (const workload::Op& op : ops)
      add(op, false);
    break;
  case spec::Phase::BACKWARD:
    for (const workload::Op& op : ops)
      add(op, true);
    break;
  case spec::Phase::RECOMPUTE: {
    const spec::Checkpointing c = s.training.activation_checkpointing;
    if (c == spec::Checkpointing::NONE)
      throw core::InternalError("compute_task_time: recompute task " + t.name + " without activation checkpointing");
    for (const workload::Op& op : ops)
      if (op.recomputed)
        add(op, false);
    break;
  }
  default:
    break;
  }
  if (s.mechanisms.copies) {
    // Copies the schedule attached to the layer (autocast's weight casts): memory-bound kernels, one per
    // GEMM weight (docs/compute.md §1.6).
    const double extra = range.whole_layer ? extra_task_bytes(t, layer) : 0;
    if (extra > 0) {
      int casts = 0;
      for (const workload::Op& op : layer.ops)
        casts += op.kind == workload::OpKind::GEMM ? 1 : 0;
      // Backward they are ToCopyBackward's 16-bit -> fp32 casts, TensorIterator's non-vectorized casting path.
      const double rate = t.phase == spec::Phase::BACKWARD ? e.hbm_nonvectorized : 1.0;
      seconds += extra / (hbm_bandwidth(gpu, e) * rate) + std::max(1, casts) * e.kernel_overhead_s;
    }
  }
  if (s.mechanisms.host_dispatch) {
    const double host = host_task_time(t, w, s, pricing);
    if (host > seconds)
      return {host, 0.0}; // the host bounds the layer (§1.7): its kernels wait on the host, not on SMs
  }
  return {seconds, sm};
}

int op_kernels(const workload::Op& op, bool backward)
{
  const double flops = backward ? op.bwd_flops : op.fwd_flops;
  const double bytes = backward ? op.bwd_bytes : op.fwd_bytes;
  if (flops <= 0 && bytes <= 0)
    return 0;
  if (const int explicit_count = backward ? op.bwd_kernels : op.fwd_kernels; explicit_count >= 0)
    return explicit_count; // as the model code launches the op (workload::Op, docs/workload.md §5.2)
  if (!backward || flops <= 0)
    return 1;
  if (op.kind == workload::OpKind::GEMM)
    return 2; // dX and dW
  if (op.kind == workload::OpKind::ATTENTION)
    return workload::is_fused_attention(op) ? FLASH_BWD_KERNELS + (op.gqa_reductions ? GQA_REDUCTION_KERNELS : 0) : 2;
  return 1;
}

double sustained_clock(const spec::GpuSpec& gpu, const spec::KernelTable& table)
{
  if (!(gpu.power_limit_W > 0) || !(gpu.tdp_W > 0) || gpu.power_limit_W >= gpu.tdp_W ||
      !(table.clock_power_exponent.value > 0))
    return 1.0;
  return std::pow(gpu.power_limit_W / gpu.tdp_W, table.clock_power_exponent.value);
}

double host_task_time(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s)
{
  if (t.kind != spec::TaskKind::COMPUTE || !is_layer_phase(t.phase) || s.kernels.host.empty())
    return 0;
  return host_task_time(t, w, s, ScenarioPricing(s));
}

double host_task_time(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s,
                      const ScenarioPricing& pricing)
{
  using spec::Phase;
  if (t.kind != spec::TaskKind::COMPUTE || !is_layer_phase(t.phase) || pricing.host == nullptr)
    return 0;
  const workload::Layer& layer = task_layer(t, w, "host_task_time");
  const OpRange range = task_ops(t, layer, "host_task_time");
  const spec::HostGeneration& h = *pricing.host;
  const bool backward = t.phase == Phase::BACKWARD;
  const bool compiled = pricing.compiled;
  // Kernels launched. Eager: one dispatch per kernel. torch.compile: a run of elementwise ops is one fused
  // (Triton) kernel; GEMMs and attention stay library calls.
  double kernels = 0;
  bool in_run = false;
  for (std::size_t i = range.begin; i < range.end; ++i) {
    const workload::Op& op = layer.ops[i];
    if (t.phase == Phase::RECOMPUTE && !op.recomputed)
      continue;
    const int k = op_kernels(op, backward);
    if (k == 0)
      continue;
    const bool counted = (backward ? op.bwd_kernels : op.fwd_kernels) >= 0; // the model code's count, fusion included
    if (compiled && op.kind == workload::OpKind::ELEMENTWISE && !counted) {
      if (!in_run)
        kernels += 1;
      in_run = true;
    } else {
      kernels += k;
      in_run = false;
    }
  }
  const double per_kernel = compiled ? h.compiled_op.value : backward ? h.backward_op.value : h.eager_op.value;
  double seconds = kernels * per_kernel;
  // Framework hooks per parameter of the layer. ZeRO-3's coordinator is priced by the stage-3 schedule
  // (per-module fetches), not here; a recompute runs inside the unit's backward hooks.
  const auto params = static_cast<double>(layer.params.size());
  if (t.phase != Phase::RECOMPUTE && range.whole_layer) {
    switch (s.framework) {
    case spec::Framework::FSDP: // pre-/post-forward and pre-/post-backward: unshard and reshard the unit's views
      seconds += params * h.hook_param.value;
      break;
    case spec::Framework::DEEPSPEED: // stage 1/2: a Python gradient hook per parameter in backward
      if (backward && s.deepspeed.zero.stage >= 1 && s.deepspeed.zero.stage <= 2)
        seconds += params * h.hook_param.value;
      break;
    case spec::Framework::DDP: // the C++ reducer's hook per parameter: mark ready, copy into the bucket
      if (backward)
        seconds += params * h.backward_op.value;
      break;
    }
  }
  return seconds * pricing.host_factor;
}

double cpu_core_flops(const spec::CpuSpec& /*cpu*/)
{
  return CPU_ADAM_CORE_FLOPS;
}

CpuWork cpu_task_work(const spec::Task& t, const spec::CpuSpec& cpu, int ranks_per_node)
{
  if (t.kind != spec::TaskKind::CPU_COMPUTE)
    throw core::InternalError("cpu_task_work: task " + t.name + " is not a CPU_COMPUTE task");
  if (ranks_per_node <= 0)
    throw core::InternalError("cpu_task_work: " + std::to_string(ranks_per_node) + " ranks per node");
  CpuWork w;
  w.flops = t.flops;
  w.threads = std::max(1, cpu.cores / ranks_per_node);
  w.dram_bytes = t.mem_bytes;
  return w;
}

double cpu_task_time_alone(const CpuWork& work, const spec::CpuSpec& cpu)
{
  if (work.threads <= 0)
    throw core::InternalError("cpu_task_time_alone: " + std::to_string(work.threads) + " threads");
  const double compute = work.flops > 0 ? work.flops / (work.threads * cpu_core_flops(cpu)) : 0;
  double memory = 0;
  if (work.dram_bytes > 0) {
    if (cpu.memory_bandwidth_Bps <= 0)
      throw core::InputError("cpu.memory_bandwidth must be positive to time host memory traffic");
    memory = work.dram_bytes / cpu.memory_bandwidth_Bps;
  }
  return std::max(compute, memory);
}

} // namespace zerosim::compute
