// `zerosim recommend` on a DeepSpeed pipeline scenario (docs/recommend.md "Pipeline scenarios"): the tensor-parallel
// and pipeline degrees x ZeRO stage x checkpointing x micro-batch, the global batch kept; every candidate judged by
// the memory analysis before any is simulated; the winner's Megatron-DeepSpeed arguments.
#include "config/scenario_loader.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "run/memory_analysis.hpp"
#include "sweep/recommend.hpp"

#include <algorithm>
#include <sstream>

namespace zerosim::sweep {

using core::Json;

std::vector<int> pipeline_tensor_degrees(const spec::Scenario& s)
{
  // The rules of config's check_tensor_parallel (docs/tensor-parallel.md): a tensor-parallel group is GPUs of one
  // node, and Megatron's column and row-parallel layers split heads, key/value heads and the FFN width evenly.
  const spec::ModelSpec& m = s.model;
  const std::int64_t kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const std::int64_t ffn = m.ffn_hidden > 0 ? m.ffn_hidden : 4LL * m.hidden;
  const auto divides = [&](int t) {
    return s.cluster.gpus_per_node % t == 0 && m.heads % t == 0 && kv % t == 0 && ffn % t == 0;
  };
  std::vector<int> out;
  for (int t = 1; t <= s.cluster.gpus_per_node; t *= 2)
    if (divides(t))
      out.push_back(t);
  if (std::find(out.begin(), out.end(), s.tp()) == out.end()) // the scenario's own degree (not a power of two)
    out.insert(std::upper_bound(out.begin(), out.end(), s.tp()), s.tp());
  return out;
}

std::vector<int> pipeline_degrees(const spec::Scenario& s, int gpus, int t)
{
  const int gpn = s.cluster.gpus_per_node;
  const auto keeps = [&](int p) {
    if ((gpus / t) % p != 0 || p > s.model.layers)
      return false;
    const int per_stage = gpus / p; // a stage's data-parallel x tensor-parallel ranks: whole nodes or a share of one
    const int dp = gpus / (t * p);
    return (per_stage % gpn == 0 || gpn % per_stage == 0) && s.training.global_batch % dp == 0;
  };
  std::vector<int> out;
  if (!s.training.pipeline.layers.empty()) { // an explicit split names every stage: its degree only
    if (gpus % t == 0 && keeps(s.pp()))
      out.push_back(s.pp());
    return out;
  }
  if (gpus % t != 0)
    return out;
  for (int p = 2; p <= gpus / t; ++p)
    if (keeps(p))
      out.push_back(p);
  return out;
}

std::vector<Candidate> pipeline_candidates(const spec::Scenario& s, int gpus)
{
  // What DeepSpeed's PipelineEngine accepts (docs/pipeline-parallel.md §5): ZeRO stage 0 or 1 (2 and 3 fail its
  // assert), stage 1 with the optimizer on the CPU too; parameters stay on the GPU.
  struct Zero {
    int stage;
    const char* offload;
    const char* device;
  };
  static const Zero ZERO[] = {{0, "none", "none"}, {1, "none", "none"}, {1, "optimizer cpu", "cpu"}};
  const std::int64_t global = s.training.global_batch;
  std::vector<Candidate> out;
  for (int t : pipeline_tensor_degrees(s))
    for (int p : pipeline_degrees(s, gpus, t)) {
      const int dp = gpus / (t * p);
      const std::int64_t per_rank = global / dp;
      for (const Zero& z : ZERO)
        for (const char* ckpt : {"none", "full"}) // Megatron-DeepSpeed's --checkpoint-activations: every block
          for (std::int64_t mb = 1; mb <= per_rank; mb *= 2) {
            if (per_rank % mb != 0)
              continue;
            Candidate c;
            c.gpus = gpus;
            c.stage = z.stage;
            c.offload = z.offload;
            c.checkpointing = ckpt;
            c.micro_batch = static_cast<int>(mb);
            c.grad_accum = static_cast<int>(per_rank / mb);
            c.tensor_parallel = t;
            c.pipeline_parallel = p;
            c.sets = {
                "cluster.nodes=" + std::to_string(gpus / s.cluster.gpus_per_node),
                "training.tensor_parallel=" + std::to_string(t), "training.pipeline_parallel=" + std::to_string(p),
                // DeepSpeed's own key, which a scenario may give the degree by: the same, never a contradiction
                "deepspeed.pipeline.stages=" + std::to_string(p),
                "training.activation_checkpointing=" + std::string(ckpt), "training.micro_batch=" + std::to_string(mb),
                s.training.global_batch_given ? "training.global_batch=" + std::to_string(global)
                                              : "training.grad_accum=" + std::to_string(per_rank / mb),
                "deepspeed.zero_optimization.stage=" + std::to_string(z.stage),
                "deepspeed.zero_optimization.offload_optimizer.device=" + std::string(z.device),
                "deepspeed.zero_optimization.offload_param.device=none"};
            out.push_back(std::move(c));
          }
    }
  return out;
}

std::vector<std::string> memory_sets(const Candidate& c, const spec::Scenario& s)
{
  std::vector<std::string> sets = c.sets;
  const int m = std::min(c.grad_accum, c.pipeline_parallel);
  const std::int64_t dp = c.gpus / (c.tensor_parallel * c.pipeline_parallel);
  sets.push_back(s.training.global_batch_given
                     ? "training.global_batch=" + std::to_string(static_cast<std::int64_t>(c.micro_batch) * m * dp)
                     : "training.grad_accum=" + std::to_string(m));
  return sets;
}

void prune_by_memory(const RecommendOptions& o, std::vector<Candidate>& all, std::ostream& err)
{
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].pipeline_parallel > 0 && all[i].status.empty())
      todo.push_back(i);
  if (todo.empty())
    return;
  config::LoadOptions base;
  base.sets = o.sets;
  base.calibration = o.calibration;
  const spec::Scenario s = config::load_scenario(o.scenario, base);
  err << "recommend: " << todo.size() << " candidates, their memory analysed first, " << o.jobs << " at once\n";
  std::size_t pruned = 0;
  run_candidates(
      o, all, todo,
      [&](const Candidate& c) {
        config::LoadOptions lo = base;
        const std::vector<std::string> own = memory_sets(c, s);
        lo.sets.insert(lo.sets.end(), own.begin(), own.end());
        const memory::MemoryReport r = run::analyze_memory(config::load_scenario(o.scenario, lo));
        return core::dump_json(Json{{"fits", r.fits},
                                    {"gpu_device", r.gpu_device},
                                    {"gpu_capacity", r.gpu_capacity},
                                    {"shortfall", r.shortfall_bytes}},
                               -1);
      },
      [&](Candidate& c, const Json& r) {
        const bool fits = r.at("fits").get<bool>();
        const double device = r.at("gpu_device").get<double>(), capacity = r.at("gpu_capacity").get<double>();
        const bool tight = fits && memory::is_tight(device, capacity, o.headroom);
        if (fits && !tight)
          return;                    // left to simulate
        c.status = PRUNED_BY_MEMORY; // never ranked: not simulated
        c.fits = fits;
        c.tight = tight;
        c.gpu_device_bytes = device;
        c.capacity_bytes = capacity;
        c.shortfall_bytes = r.at("shortfall").get<double>();
        ++pruned;
      },
      [&](std::size_t finished) {
        if (finished % 50 == 0 || finished == todo.size())
          err << "recommend: " << finished << "/" << todo.size() << " analysed, " << pruned << " pruned\n";
      });
}

namespace {

/// Megatron-DeepSpeed's position embedding type for the model's (megatron/enums.py PositionEmbeddingType).
const char* position_type(spec::PositionKind p)
{
  return p == spec::PositionKind::ALIBI ? "alibi" : p == spec::PositionKind::ROPE ? "rotary" : "absolute";
}

/// `text` as one bash word in single quotes (a quote inside closed, escaped and reopened).
std::string single_quoted(const std::string& text)
{
  std::string out = "'";
  for (char ch : text)
    out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

} // namespace

std::string megatron_deepspeed_args(const Candidate& c, const spec::Scenario& s)
{
  const spec::ModelSpec& m = s.model;
  const int nodes = s.cluster.nodes;
  std::ostringstream sh;
  sh << "# The configuration zerosim recommend chose (" << c.label() << ").\n"
     << "# bigscience-workshop/Megatron-DeepSpeed pretrain_gpt.py arguments, as BigScience's\n"
     << "# train/tr11-176B-ml/tr11-176B-ml.slurm passes them (docs/recommend.md \"Pipeline scenarios\"); the "
        "DeepSpeed\n"
     << "# config is ds_config.json beside this file.\n"
     << "# " << s.world() << " GPUs (" << nodes << (nodes == 1 ? " node of " : " nodes of ") << s.cluster.gpus_per_node
     << "): tensor parallel " << s.tp() << " x pipeline parallel " << s.pp() << " x data parallel " << s.dp() << ", "
     << s.training.grad_accum << " micro-batches a step.\n"
     << "# Add your data, tokenizer, optimizer and schedule arguments, and the model's own (BLOOM's "
        "--embed-layernorm,\n"
     << "# --pad-vocab-size-to, ...). Launch with torch.distributed.run, " << s.cluster.gpus_per_node
     << " processes a node:\n"
     << "#   python -m torch.distributed.run --nproc_per_node " << s.cluster.gpus_per_node << " --nnodes " << nodes
     << " ... pretrain_gpt.py \"${ZEROSIM_ARGS[@]}\" ...\n"
     << "ZEROSIM_ARGS=(\n"
     << "    --tensor-model-parallel-size " << s.tp() << "\n"
     << "    --pipeline-model-parallel-size " << s.pp() << "\n";
  if (s.training.pipeline.layers.empty())
    sh << "    --pp-partition-method " << single_quoted(s.training.pipeline.partition) << "\n";
  sh << "    --num-layers " << m.layers << "\n"
     << "    --hidden-size " << m.hidden << "\n"
     << "    --num-attention-heads " << m.heads << "\n";
  if (m.ffn_hidden > 0 && m.ffn_hidden != 4 * m.hidden)
    sh << "    --ffn-hidden-size " << m.ffn_hidden << "\n";
  sh << "    --seq-length " << s.training.seq_len << "\n"
     << "    --position-embedding-type " << position_type(m.position) << "\n";
  if (m.position != spec::PositionKind::ROPE) // arguments.py asserts it for absolute and alibi, and none for rotary
    sh << "    --max-position-embeddings "
       << (m.position == spec::PositionKind::LEARNED && m.max_position > 0 ? m.max_position : s.training.seq_len)
       << "\n";
  sh << "    --micro-batch-size " << s.training.micro_batch << "\n"
     << "    --global-batch-size " << s.training.global_batch << "\n";
  if (s.training.precision == spec::Precision::BF16)
    sh << "    --bf16\n";
  else if (s.training.precision == spec::Precision::FP16)
    sh << "    --fp16\n";
  if (s.training.activation_checkpointing == spec::Checkpointing::FULL)
    sh << "    --checkpoint-activations\n";
  sh << "    --deepspeed\n"
     << "    --deepspeed_config ds_config.json\n"
     << "    --zero-stage " << s.deepspeed.zero.stage << "\n";
  if (s.training.activation_checkpointing == spec::Checkpointing::FULL)
    sh << "    --deepspeed-activation-checkpointing\n";
  sh << ")\n";
  if (!s.training.pipeline.layers.empty())
    sh << "# The split of training.pipeline.layers has no Megatron-DeepSpeed argument: build the PipelineModule's\n"
       << "# stages from it in the model code.\n";
  if (m.kv_heads > 0 && m.kv_heads != m.heads)
    sh << "# Grouped-query attention (" << m.kv_heads
       << " key/value heads) is not an argument of bigscience-workshop/Megatron-DeepSpeed.\n";
  return sh.str();
}

} // namespace zerosim::sweep
