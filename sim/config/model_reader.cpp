// models/NAME.yaml (scenario-format.md "Model file", docs/config.md).
#include "config/readers.hpp"

namespace zerosim::config {

spec::ModelSpec read_model(FieldReader& r)
{
  const std::string POS = "a positive integer";
  spec::ModelSpec m;
  m.name = r.req_string("name");
  m.layers = static_cast<int>(r.req_int("layers", 1, POS));
  m.hidden = static_cast<int>(r.req_int("hidden", 1, POS));
  m.heads = static_cast<int>(r.req_int("heads", 1, POS));
  if (m.hidden % m.heads != 0)
    r.fail_expected("heads", "a divisor of hidden (" + std::to_string(m.hidden) + ")");
  m.kv_heads = static_cast<int>(r.get_int("kv_heads", m.heads, 1, POS));
  if (m.heads % m.kv_heads != 0)
    r.fail_expected("kv_heads", "a divisor of heads (" + std::to_string(m.heads) + ")");
  m.ffn_hidden = static_cast<int>(r.get_int("ffn_hidden", 4LL * m.hidden, 1, POS));
  m.ffn = r.opt_enum<spec::FfnKind>("ffn", {{"gelu", spec::FfnKind::GELU}, {"swiglu", spec::FfnKind::SWIGLU}})
              .value_or(spec::FfnKind::GELU);
  m.vocab = static_cast<int>(r.req_int("vocab", 1, POS));
  m.tied_embeddings = r.get_bool("tied_embeddings", false);
  m.norm = r.opt_enum<spec::NormKind>("norm",
                                      {{"layernorm", spec::NormKind::LAYERNORM}, {"rmsnorm", spec::NormKind::RMSNORM}})
               .value_or(spec::NormKind::LAYERNORM);
  m.position = r.opt_enum<spec::PositionKind>("position", {{"learned", spec::PositionKind::LEARNED},
                                                           {"rope", spec::PositionKind::ROPE},
                                                           {"alibi", spec::PositionKind::ALIBI}})
                   .value_or(spec::PositionKind::LEARNED);
  m.bias = r.get_bool("bias", true);
  m.loss = r.opt_enum<spec::LossKind>("loss", {{"hf", spec::LossKind::HF}, {"megatron", spec::LossKind::MEGATRON}})
               .value_or(spec::LossKind::HF);
  m.dropout = r.opt_number("dropout", 0.0, 0.999999, "a probability, 0 <= p < 1");
  std::optional<std::int64_t> max_position = r.opt_int("max_position", 1, POS);
  if (m.position == spec::PositionKind::LEARNED) {
    if (!max_position)
      r.fail_missing("max_position", "position: learned needs it");
    m.max_position = static_cast<int>(*max_position);
  } else if (max_position) {
    r.fail("max_position", "only with position: learned (the model has no position table)");
  }
  m.source = r.opt_string("source").value_or("");
  return m;
}

} // namespace zerosim::config
