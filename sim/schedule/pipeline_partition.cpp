// DeepSpeed's layer partitioning for a pipeline (docs/pipeline-parallel.md §2), in zerosim's words.
#include "schedule/pipeline_partition.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <regex>
#include <utility>

namespace zerosim::schedule {

namespace {

/// The first index in [lo, hi) of the non-decreasing `prefix` whose value is >= `target` (hi when none).
int first_at_least(const std::vector<double>& prefix, double target, int lo, int hi)
{
  return static_cast<int>(std::lower_bound(prefix.begin() + lo, prefix.begin() + hi, target) - prefix.begin());
}

/// DeepSpeed's _lprobe: the boundaries that a heaviest part of `bottleneck` gives, and whether they cover every
/// entry within it.
std::pair<std::vector<int>, bool> probe(const std::vector<double>& prefix, int parts, double bottleneck)
{
  const int n = static_cast<int>(prefix.size());
  std::vector<int> b(static_cast<std::size_t>(parts) + 1, n);
  b[0] = 0;
  double target = bottleneck;
  const int chunk = n / parts;
  int step = chunk;
  for (int p = 1; p < parts; ++p) {
    while (step < n && prefix[static_cast<std::size_t>(step)] < target)
      step += chunk;
    b[static_cast<std::size_t>(p)] = first_at_least(prefix, target, step - chunk, std::min(step, n));
    if (b[static_cast<std::size_t>(p)] == n) {
      const double last = prefix.back() - prefix[static_cast<std::size_t>(b[static_cast<std::size_t>(p) - 1])];
      return {b, last < bottleneck};
    }
    target = prefix[static_cast<std::size_t>(b[static_cast<std::size_t>(p)] - 1)] + bottleneck;
  }
  return {b, target >= prefix.back()};
}

/// One entry of Megatron-DeepSpeed's GPTModelPipe layer list: its class (or function) name, the workload layer it
/// stands for (-1: a callable without parameters) and its parameters.
struct Entry {
  std::string name;
  int layer = -1;
  double params = 0;
};

std::vector<Entry> gpt_model_pipe_entries(const workload::Workload& w)
{
  std::vector<Entry> e;
  e.push_back({"_to_float16", -1, 0});
  double embedding = 0;
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const workload::Layer& layer = w.layers[l];
    double params = 0; // Layer::param_count's sum, here: the schedule links no workload code
    for (const workload::ParamTensor& t : layer.params)
      params += static_cast<double>(t.numel);
    switch (layer.kind) {
    case workload::LayerKind::EMBEDDING:
      embedding = params;
      e.push_back({"EmbeddingPipe", static_cast<int>(l), params});
      e.push_back({"<lambda>", -1, 0}); // transpose to [s, b, h]
      break;
    case workload::LayerKind::BLOCK:
      e.push_back({"ParallelTransformerLayerPipe", static_cast<int>(l), params});
      break;
    case workload::LayerKind::FINAL_NORM:
      e.push_back({"<lambda>", -1, 0}); // transpose back
      e.push_back({"MixedFusedLayerNorm", static_cast<int>(l), params});
      break;
    case workload::LayerKind::LM_HEAD: // the tied EmbeddingPipe: its own copy of the embedding on the last stage
      e.push_back({"EmbeddingPipe", static_cast<int>(l), params > 0 ? params : embedding});
      break;
    }
  }
  e.push_back({"float16_to_fp32", -1, 0});
  return e;
}

std::vector<double> entry_weights(const std::vector<Entry>& entries, const std::string& method,
                                  const std::string& where)
{
  std::vector<double> weights;
  if (method == "parameters") {
    for (const Entry& x : entries)
      weights.push_back(x.params);
    return weights;
  }
  const std::string pattern = method.substr(5);
  const std::regex re(pattern, std::regex::icase);
  bool any = false;
  for (const Entry& x : entries) {
    const bool match = std::regex_search(x.name, re);
    any = any || match;
    weights.push_back(match ? 1.0 : 0.0);
  }
  if (!any)
    throw core::InputError(where + ": training.pipeline.partition: \"" + method +
                           "\" matches no layer of the model (DeepSpeed raises the same; its layers are "
                           "EmbeddingPipe, ParallelTransformerLayerPipe, MixedFusedLayerNorm and callables)");
  return weights;
}

} // namespace

std::vector<int> partition_uniform(int items, int parts)
{
  std::vector<int> b(static_cast<std::size_t>(parts) + 1, 0);
  if (items <= parts) {
    for (int p = 0; p <= parts; ++p)
      b[static_cast<std::size_t>(p)] = std::min(p, items);
    return b;
  }
  const int chunk = items / parts;
  for (int p = 0; p < parts; ++p)
    b[static_cast<std::size_t>(p)] = chunk * p;
  b[static_cast<std::size_t>(parts)] = items;
  return b;
}

std::vector<int> partition_balanced(const std::vector<double>& weights, int parts)
{
  const int n = static_cast<int>(weights.size());
  if (n <= parts)
    return partition_uniform(n, parts);
  std::vector<double> prefix(weights.size());
  double sum = 0;
  for (std::size_t i = 0; i < weights.size(); ++i)
    prefix[i] = sum += weights[i];
  constexpr double EPS = 1e-3;
  double lower = prefix.back() / parts, upper = prefix.back();
  while (upper > lower + EPS) {
    const double mid = lower + (upper - lower) / 2;
    if (probe(prefix, parts, mid).second)
      upper = mid;
    else
      lower = mid + EPS;
  }
  return probe(prefix, parts, upper).first;
}

std::vector<StageLayers> stage_layers(const spec::Scenario& s, const workload::Workload& w)
{
  const int P = s.pp();
  const int n = static_cast<int>(w.layers.size());
  if (P == 1)
    return {StageLayers{0, n}};
  const std::string where = s.file.empty() ? std::string("scenario") : s.file;
  const std::vector<int>& given = s.training.pipeline.layers;
  std::vector<StageLayers> out;
  if (!given.empty()) {
    // Blocks per stage; the embedding before the first block, the final norm and the head after the last.
    std::vector<int> block_layer; // the workload layer of each block, in order
    for (int l = 0; l < n; ++l)
      if (w.layers[static_cast<std::size_t>(l)].kind == workload::LayerKind::BLOCK)
        block_layer.push_back(l);
    int first_block = 0;
    for (int st = 0; st < P; ++st) {
      const int next_block = first_block + given[static_cast<std::size_t>(st)];
      const int first = st == 0 ? 0 : block_layer.at(static_cast<std::size_t>(first_block));
      const int end = st == P - 1 ? n : block_layer.at(static_cast<std::size_t>(next_block));
      out.push_back(StageLayers{first, end});
      first_block = next_block;
    }
  } else {
    const std::string& method = s.training.pipeline.partition;
    const std::vector<Entry> entries = gpt_model_pipe_entries(w);
    const std::vector<int> bounds = method == "uniform" ? partition_uniform(static_cast<int>(entries.size()), P)
                                                        : partition_balanced(entry_weights(entries, method, where), P);
    for (int st = 0; st < P; ++st) {
      StageLayers sl{-1, -1};
      for (int e = bounds[static_cast<std::size_t>(st)]; e < bounds[static_cast<std::size_t>(st) + 1]; ++e) {
        const int l = entries[static_cast<std::size_t>(e)].layer;
        if (l < 0)
          continue;
        if (sl.first < 0)
          sl.first = l;
        sl.end = l + 1;
      }
      if (sl.first < 0) // a stage of callables only: empty, placed after the previous stage's layers
        sl.first = sl.end = out.empty() ? 0 : out.back().end;
      out.push_back(sl);
    }
  }
  // A stage may hold no transformer block (Megatron-DeepSpeed only warns, gpt_model.py:309-310; BigScience's 80-block,
  // 10-stage runs under type:transformer|embedding put the head alone on the last stage), but it holds a layer.
  for (int st = 0; st < P; ++st)
    if (out[static_cast<std::size_t>(st)].first >= out[static_cast<std::size_t>(st)].end)
      throw core::InputError(where + ": training.pipeline: stage " + std::to_string(st) + " of " + std::to_string(P) +
                             " holds no layer under partition \"" +
                             (given.empty() ? s.training.pipeline.partition : std::string("layers")) +
                             "\"; give training.pipeline.layers or fewer stages");
  return out;
}

} // namespace zerosim::schedule
