// The memory report for people (a table) and for programs (the JSON keys of docs/scenario-format.md).
#pragma once

#include "core/json.hpp"
#include "memory/memory_model.hpp"
#include "run/memory_analysis.hpp"
#include "spec/scenario_spec.hpp"

#include <string>
#include <vector>

namespace zerosim::report {

/// The key of memory_breakdown_bytes for spec::MemCategory `c`: "params", "grads", "optimizer", "activations",
/// "buffers", "other".
const char* memory_category_key(int c);

/// Result metadata (`meta` of docs/scenario-format.md). `network_model` names the model used, or says none was.
core::Json meta_json(const spec::Scenario& s, const std::string& network_model);

/// One JSON object: scenario, gpus, dp, params, peak_memory_bytes, memory_breakdown_bytes, fits,
/// fit_by_tier, shortfall_bytes, the memory model's stated terms, the ladder's answer when it does
/// not fit, warnings and meta.
core::Json memory_json(const spec::Scenario& s, std::int64_t params, const memory::MemoryReport& r,
                       const std::vector<run::LadderStep>& ladder);

/// The same for people: the verdict first, then per-tier peaks and capacities, the breakdown at the
/// peak, the stated terms, and the ladder's answer.
/// What was modelled, for the head of every report (run and memory): the scenario's name, then one line each for
/// the model, the hardware (GPU model and memory, nodes, the node file's name, the NICs), the framework with its
/// strategy and version (DeepSpeed's version and ZeRO stage with offload; FSDP1 or FSDP2 with its sharding; DDP), the
/// batch and precision, and the software stack (stated or assumed). `params`: the model's parameter count.
std::string scenario_header(const spec::Scenario& s, std::int64_t params);
/// The "Warnings:" block (with a blank line before it), or "" when there are none. Printed under the header, before
/// any figure, so that a reader meets them first.
std::string warnings_block(const std::vector<std::string>& warnings);
/// The tiers that overflow, "GPU host NVMe" order; empty when everything fits.
std::string unfit_tiers(const memory::MemoryReport& r);
/// The ladder's rungs, one "  + change  GPU ..  host ..  fits" line each, then the answer line.
std::string ladder_lines(const std::vector<run::LadderStep>& ladder);

/// One "  what   bytes  of capacity  ok|tight|OVER" line of the memory tables (capacity 0: no verdict; tight: fits
/// within the headroom, memory::is_tight).
std::string memory_tier_row(const std::string& what, std::int64_t bytes, std::int64_t capacity, bool fit,
                            bool tight = false);
/// The "  tight: ..." line when the GPU fits within memory::DEFAULT_HEADROOM, else "".
std::string tight_line(const memory::MemoryReport& r);
/// The tier lines (GPU allocated, reserved, device; host and pinned per node; NVMe per node) of `r`, then the tight
/// line.
std::string memory_tier_rows(const memory::MemoryReport& r);

std::string memory_table(const spec::Scenario& s, std::int64_t params, const memory::MemoryReport& r,
                         const std::vector<run::LadderStep>& ladder);

} // namespace zerosim::report
