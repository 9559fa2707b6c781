// A calibration profile (docs/calibration.md): multipliers on a few named, physically meaningful priors of the
// model, fitted by `zerosim calibrate` and read by the config layer. Plain data and the parameter registry; no
// YAML, no fitting.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerosim::spec {

/// What a calibrated parameter scales. Each family is one physical figure of the model, kept per GPU kind, per
/// transport or per framework (never per row or per source):
///  GEMM          the large, well-shaped GEMM's achieved fraction of a GPU kind (calibration/kernels.yaml `gemm`)
///  ATTENTION     the fused attention kernel's achieved fraction of a GPU kind (`attention`, forward and backward)
///  HBM           a streaming kernel's achieved fraction of a GPU kind's HBM bandwidth (`hbm`)
///  BUSBW         the bus-bandwidth fraction NCCL achieves on a transport (nvlink, pcie, net; docs/collectives.md)
///  HOST          a framework's host cost per op and per hook (deepspeed, fsdp, ddp; docs/compute.md §1.7)
///  INTERFERENCE  the SMs an NCCL kernel holds while it overlaps compute (`interference.nccl_ctas`)
enum class ParamFamily { GEMM, ATTENTION, HBM, BUSBW, HOST, INTERFERENCE };

/// One family's rules: the name prefix, the keys it takes after the dot (empty: any GPU kind of the kernel data;
/// a parameter of INTERFERENCE has no key), the multiplier's bounds, the prior's spread and what it means.
struct ParamFamilyInfo {
  ParamFamily family;
  std::string_view prefix;            ///< "gemm"
  std::vector<std::string_view> keys; ///< allowed keys after "prefix."; empty: a GPU kind (or none for INTERFERENCE)
  double lower = 0;                   ///< the multiplier's lower bound
  double upper = 0;                   ///< the multiplier's upper bound
  /// The prior's spread in ln(multiplier): the fit's penalty is ((ln m) / prior_sigma)^2 (docs/calibration.md gives
  /// where each spread comes from).
  double prior_sigma = 0;
  std::string_view meaning;
};

/// The registry of families, in the order docs/calibration.md lists them.
inline const std::vector<ParamFamilyInfo>& param_families()
{
  static const std::vector<ParamFamilyInfo> families{
      {ParamFamily::GEMM,
       "gemm",
       {},
       0.6,
       1.25,
       0.10,
       "achieved fraction of a large GEMM on this GPU kind, as a multiplier on calibration/kernels.yaml's gemm "
       "(the product is capped at 1)"},
      {ParamFamily::ATTENTION,
       "attention",
       {},
       0.5,
       1.6,
       0.20,
       "achieved fraction of the fused attention kernel on this GPU kind, as a multiplier on kernels.yaml's "
       "attention figures (capped at 1)"},
      {ParamFamily::HBM,
       "hbm",
       {},
       0.7,
       1.3,
       0.10,
       "achieved fraction of HBM bandwidth of a streaming kernel on this GPU kind, as a multiplier on kernels.yaml's "
       "hbm (capped at 1)"},
      {ParamFamily::BUSBW,
       "busbw",
       {"nvlink", "pcie", "net"},
       0.4,
       1.3,
       0.15,
       "bus bandwidth NCCL achieves on this transport, as a multiplier on docs/collectives.md's fraction (the "
       "product is capped at 1 of the line rate)"},
      {ParamFamily::HOST,
       "host",
       {"deepspeed", "fsdp", "ddp"},
       0.25,
       4.0,
       0.50,
       "the framework's host cost per op and per hook, as a multiplier on kernels.yaml's host figures (and, for "
       "deepspeed, ZeRO-3's coordinator hooks)"},
      {ParamFamily::INTERFERENCE,
       "interference",
       {},
       0.25,
       3.0,
       0.50,
       "SMs an NCCL kernel holds while it overlaps compute, as a multiplier on kernels.yaml's "
       "interference.nccl_ctas"},
  };
  return families;
}

/// The family of parameter `name` ("gemm.A100", "busbw.net", "interference"), or nullopt when the prefix is
/// unknown. Does not check the key (a GPU kind needs the kernel data; see valid_param_key).
inline std::optional<ParamFamilyInfo> param_family_of(std::string_view name)
{
  const std::size_t dot = name.find('.');
  const std::string_view prefix = dot == std::string_view::npos ? name : name.substr(0, dot);
  for (const ParamFamilyInfo& f : param_families())
    if (f.prefix == prefix)
      return f;
  return std::nullopt;
}

/// The key of parameter `name` after its prefix ("A100" of "gemm.A100"); empty without one.
inline std::string param_key(std::string_view name)
{
  const std::size_t dot = name.find('.');
  return dot == std::string_view::npos ? std::string() : std::string(name.substr(dot + 1));
}

/// Which predictions an accuracy band measured.
enum class AccuracyKind {
  LEAVE_ONE_SOURCE_OUT, ///< a calibration profile's fit, each source predicted with the fit made without it
  PRIORS                ///< the model's priors, nothing fitted (the validation report's "Priors only" section)
};

inline const char* to_string(AccuracyKind k)
{
  return k == AccuracyKind::PRIORS ? "priors" : "leave-one-source-out";
}

/// How far to trust a prediction of one group of runs (GPU kind x framework): the |error| over that group's
/// published runs of the predictions `kind` names (docs/calibration.md §4).
struct AccuracyBand {
  AccuracyKind kind = AccuracyKind::LEAVE_ONE_SOURCE_OUT;
  double median_abs_error_pct = 0;
  double p90_abs_error_pct = 0;
  std::optional<double> median_signed_error_pct; ///< + = predicted faster than measured; when the source gives it
  int rows = 0;
};

/// The group of every run, for a scenario whose own group has no band.
inline constexpr const char* ACCURACY_OVERALL = "overall";

/// The group a scenario's accuracy band is kept under: "<GPU kind> / <framework>" ("A100 / deepspeed").
inline std::string accuracy_group(const std::string& gpu_kind, const std::string& framework)
{
  return gpu_kind + " / " + framework;
}

/// A calibration profile as the model reads it: parameter name -> multiplier on its prior (1: the prior). A
/// parameter the profile does not name stays at its prior.
struct Calibration {
  /// Where the profile came from: its path, "none" (priors only, `--calibration none`), or "" when no profile was
  /// looked for (scenarios built in code).
  std::string path;
  std::string hash; ///< FNV-1a 64 of the profile's bytes, 16 hex digits ("" without a file)
  std::map<std::string, double> factors;
  /// Group (accuracy_group, or ACCURACY_OVERALL) -> its band: with a profile, the fit's leave-one-source-out bands;
  /// without one (path "none" or ""), the priors' bands of the validation report (priors-accuracy.yaml).
  std::map<std::string, AccuracyBand> accuracy;
  std::string accuracy_file; ///< the file the bands came from ("" when none was found)

  /// The multiplier of `name` (1 when the profile does not name it).
  double factor(const std::string& name) const
  {
    const auto it = factors.find(name);
    return it == factors.end() ? 1.0 : it->second;
  }
};

/// `value` times `factor`, never above `cap`: a calibrated fraction stays a fraction.
inline double scaled_fraction(double value, double factor, double cap = 1.0)
{
  return std::min(cap, value * factor);
}

/// FNV-1a 64 of `bytes` as 16 lowercase hex digits (the profile hash of the result's meta).
inline std::string fnv1a64_hex(std::string_view bytes)
{
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = digits[h & 0xF];
    h >>= 4;
  }
  return out;
}

} // namespace zerosim::spec
