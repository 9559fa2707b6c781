// Stage 3's partitioning and the parameter coordinator steps shared by the training step and ZeRO-Inference
// (docs/deepspeed-schedule.md §5.1-§5.3).
#include "schedule/stage3_fetch.hpp"

#include <algorithm>

namespace zerosim::schedule::detail {

Stage3Partition stage3_partition(const Builder& b)
{
  const spec::ZeroSpec& z = b.s.deepspeed.zero;
  const std::size_t np = b.params.size();
  Stage3Partition sp{std::vector<std::int64_t>(np, 0), std::vector<char>(np, 0)};
  std::int64_t persist_total = 0;
  for (std::size_t p = 0; p < np; ++p) {
    const std::int64_t numel = b.params[p].numel;
    sp.part[p] = ceil_div(numel, b.n);
    if (numel + persist_total > z.stage3_model_persistence_threshold)
      continue;
    if (numel <= z.stage3_param_persistence_threshold) {
      sp.persistent[p] = 1;
      persist_total += numel;
    }
  }
  return sp;
}

std::vector<LayerParts> stage3_layer_parts(const Builder& b)
{
  std::vector<LayerParts> out(b.w.layers.size());
  for (std::size_t l = 0; l < b.w.layers.size(); ++l) {
    const workload::Layer& layer = b.w.layers[l];
    const std::vector<int>& mods = b.layer_modules[l];
    if (mods.empty())
      continue;
    std::vector<int> at; // per module, the index of its own op
    std::vector<std::string> names;
    for (int m : mods) {
      const std::string& full = b.modules[static_cast<std::size_t>(m)].name; // "<layer>.<module>"
      std::string name = full.substr(std::min(full.size(), layer.name.size() + 1));
      const auto it =
          std::find_if(layer.ops.begin(), layer.ops.end(), [&](const workload::Op& op) { return op.name == name; });
      if (it == layer.ops.end() || (!at.empty() && it - layer.ops.begin() <= at.back())) {
        at.clear();
        break;
      }
      at.push_back(static_cast<int>(it - layer.ops.begin()));
      names.push_back(std::move(name));
    }
    if (at.empty())
      continue;
    LayerParts& p = out[l];
    p.split = true;
    const auto n = at.size();
    const auto n_ops = static_cast<int>(layer.ops.size());
    for (std::size_t k = 0; k < n; ++k)
      p.fwd.push_back({k == 0 ? 0 : at[k], k + 1 < n ? at[k + 1] : n_ops});
    for (std::size_t k = n; k-- > 0;) {
      p.bwd.push_back({k == 0 ? 0 : at[k - 1] + 1, k + 1 < n ? at[k] + 1 : n_ops});
      p.bwd_names.push_back(names[k]);
    }
    p.names = std::move(names);
  }
  return out;
}

void TraceEntries::add(const Builder& b, const std::vector<int>& params)
{
  const auto k = static_cast<int>(begin.size()) - 1;
  std::int64_t sum = 0;
  for (int p : params) {
    param.push_back(p);
    pos.push_back(k);
    sum += b.params[static_cast<std::size_t>(p)].numel;
  }
  begin.push_back(param.size());
  numel_before.push_back(numel_before.back() + sum);
}

void FetchCoordinator::pop_queue_to(std::size_t end, const TraceEntries& entries)
{
  for (; queue < end; ++queue) {
    const auto pu = static_cast<std::size_t>(entries.param[queue]);
    most_recent[pu] = std::max(most_recent[pu], entries.pos[queue]);
  }
}

std::vector<int> FetchCoordinator::missing(const std::vector<int>& params) const
{
  std::vector<int> now;
  for (int p : params)
    if (!available[static_cast<std::size_t>(p)] && std::find(now.begin(), now.end(), p) == now.end())
      now.push_back(p);
  return now;
}

void FetchCoordinator::wait_inflight(Builder& b, const std::vector<int>& params, const std::string& prefix, int step)
{
  for (int p : params) {
    const auto pu = static_cast<std::size_t>(p);
    if (!inflight[pu])
      continue;
    if (fetch_events.size() > MAX_ONGOING_FETCH_EVENTS) {
      const auto ev = fetch_events.front();
      fetch_events.pop_front();
      b.sync(prefix + ".fetch_backpressure." + std::to_string(syncs++), step, {ev[0], ev[1]});
    }
    inflight[pu] = 0;
    fetch_events.push_back({gathered_by[pu], last_compute});
  }
}

std::vector<int> FetchCoordinator::prefetch(const Builder& b, const TraceEntries& entries, std::int64_t cap,
                                            const std::function<bool(std::size_t)>& stop)
{
  std::int64_t prefetching = 0;
  std::vector<int> ahead;
  while (queue < entries.param.size() && prefetching < cap) {
    const int p = entries.param[queue];
    const auto pu = static_cast<std::size_t>(p);
    if (stop(pu))
      break;
    ++queue;
    most_recent[pu] = std::max(most_recent[pu], entries.pos[queue - 1]);
    if (!available[pu] && std::find(ahead.begin(), ahead.end(), p) == ahead.end()) {
      ahead.push_back(p);
      prefetching += b.params[pu].numel;
    }
  }
  return ahead;
}

} // namespace zerosim::schedule::detail
