// models/NAME.yaml (docs/scenario-format.md "Model file", docs/config.md).
#include "config/readers.hpp"
#include "core/text.hpp"

namespace zerosim::config {

namespace {

/// model.layers above this is refused (a resource bound, see read_model).
constexpr std::int64_t MAX_MODEL_LAYERS = 4096;
/// A model above this many parameters is refused (a resource bound, see read_model).
constexpr double MAX_MODEL_PARAMS = 1e15;

} // namespace

spec::ModelSpec read_model(FieldReader& r)
{
  const std::string POS = "a positive integer";
  spec::ModelSpec m;
  m.name = r.req_string("name");
  m.layers = static_cast<int>(r.req_int("layers", 1, POS));
  // A resource bound, not a physical one: the schedule issues tasks per layer, and a step's memory replay and ladder
  // grow faster than linearly with them (measured on the default scenario's `zerosim memory`: 1,000 layers 3 s,
  // 4,096 layers 29 s and 0.5 GiB, 10,000 layers over 2 minutes). The deepest models shipped have 212 layers.
  if (m.layers > MAX_MODEL_LAYERS)
    r.fail("layers", "expected at most " + std::to_string(MAX_MODEL_LAYERS) +
                         " layers (the schedule issues tasks per layer; deeper graphs take minutes to replay), found " +
                         std::to_string(m.layers));
  m.hidden = static_cast<int>(r.req_int("hidden", 1, POS));
  m.heads = static_cast<int>(r.req_int("heads", 1, POS));
  if (m.hidden % m.heads != 0)
    r.fail_expected("heads", "a divisor of hidden (" + std::to_string(m.hidden) + ")");
  m.kv_heads = static_cast<int>(r.opt_int("kv_heads", 1, POS).value_or(m.heads));
  if (m.heads % m.kv_heads != 0)
    r.fail_expected("kv_heads", "a divisor of heads (" + std::to_string(m.heads) + ")");
  m.ffn_hidden = static_cast<int>(r.opt_int("ffn_hidden", 1, POS).value_or(4LL * m.hidden));
  m.ffn = r.get_enum<spec::FfnKind>("ffn", {{"gelu", spec::FfnKind::GELU}, {"swiglu", spec::FfnKind::SWIGLU}});
  m.vocab = static_cast<int>(r.req_int("vocab", 1, POS));
  // A resource bound: parameter and byte counts are int64 (9.2e18). Attention and the FFN's projections, and the
  // embeddings, counted in double, must stay below 1e15 parameters (the largest model shipped has 20T).
  const double h = m.hidden, per_layer = 4.0 * h * h + 3.0 * h * m.ffn_hidden;
  if (m.layers * per_layer + 2.0 * m.vocab * h > MAX_MODEL_PARAMS)
    r.fail("hidden", "expected a model of at most 1e15 parameters (zerosim counts them and their bytes in 64 bits), "
                     "found about " +
                         core::format_number(m.layers * per_layer + 2.0 * m.vocab * h) + " (layers " +
                         std::to_string(m.layers) + ", hidden " + std::to_string(m.hidden) + ", ffn_hidden " +
                         std::to_string(m.ffn_hidden) + ", vocab " + std::to_string(m.vocab) + ")");
  m.tied_embeddings = r.get_bool("tied_embeddings");
  m.norm = r.get_enum<spec::NormKind>("norm",
                                      {{"layernorm", spec::NormKind::LAYERNORM}, {"rmsnorm", spec::NormKind::RMSNORM}});
  m.position = r.get_enum<spec::PositionKind>("position", {{"learned", spec::PositionKind::LEARNED},
                                                           {"rope", spec::PositionKind::ROPE},
                                                           {"alibi", spec::PositionKind::ALIBI}});
  m.bias = r.get_bool("bias");
  m.loss = r.get_enum<spec::LossKind>("loss", {{"hf", spec::LossKind::HF}, {"megatron", spec::LossKind::MEGATRON}});
  m.dropout = r.opt_number("dropout", 0.0, 0.999999, "a probability, 0 <= p < 1");
  std::optional<std::int64_t> max_position = r.opt_int("max_position", 1, POS);
  if (m.position == spec::PositionKind::LEARNED) {
    if (!max_position)
      r.fail_missing("max_position", "position: learned needs it");
    m.max_position = static_cast<int>(*max_position);
  } else if (max_position) {
    r.fail("max_position", "only with position: learned (the model has no position table)");
  }
  m.source = r.get_string("source");
  return m;
}

} // namespace zerosim::config
