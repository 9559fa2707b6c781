// docs/pipeline-parallel.md is cited as §n. DeepSpeed's pipeline engine as the schedule composes it
// (docs/pipeline-parallel.md §2, §3): the layer partition against DeepSpeed 0.7.0's own output, and the TrainSchedule's
// instruction order against the worked example that running DeepSpeed's TrainSchedule printed (P = 4, m = 8).
#include "schedule/pipeline_partition.hpp"
#include "schedule/step_units.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace zerosim;

namespace {

/// Records the units a policy issues, as DeepSpeed's instruction names.
class Recorder : public schedule::StepUnits {
public:
  std::vector<std::string> all;     ///< every instruction, in order
  std::vector<std::string> compute; ///< F<i> and B<i> only

  void prologue() override {}
  void epilogue() override { all.push_back("Step"); }
  void forward(int mb, int /*chunk*/) override { note(label("F", mb), true); }
  void backward(int mb, int /*chunk*/) override { note(label("B", mb), true); }
  void recv_activation(int mb) override { note(label("RecvAct", mb), false); }
  void send_activation(int mb) override { note(label("SendAct", mb), false); }
  void recv_grad(int mb) override { note(label("RecvGrad", mb), false); }
  void send_grad(int mb) override { note(label("SendGrad", mb), false); }

private:
  /// WHAT followed by the micro-batch (appended, not `"..." + std::string`: g++ 12's -Wrestrict false positive).
  static std::string label(const char* what, int mb)
  {
    std::string s = what;
    s += std::to_string(mb);
    return s;
  }
  void note(const std::string& what, bool is_compute)
  {
    all.push_back(what);
    if (is_compute)
      compute.push_back(what);
  }
};

std::vector<std::string> split(const std::string& s)
{
  std::vector<std::string> out;
  std::string word;
  for (char c : s) {
    if (c == ' ') {
      out.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  out.push_back(word);
  return out;
}

Recorder run(const char* policy, int stage, int stages, int m)
{
  Recorder r;
  schedule::compose_step(r, schedule::StepShape{m, 1, stage, stages}, policy);
  return r;
}

/// The most micro-batches whose forward has run and whose backward has not, over the order.
int most_in_flight(const std::vector<std::string>& compute)
{
  int in_flight = 0, most = 0;
  for (const std::string& u : compute) {
    in_flight += u[0] == 'F' ? 1 : -1;
    most = std::max(most, in_flight);
  }
  return most;
}

} // namespace

TEST_CASE("partition: DeepSpeed 0.7.0's partition_balanced gives BLOOM's split (docs/pipeline-parallel.md §2)")
{
  // Megatron-DeepSpeed's GPTModelPipe list for 70 blocks: cast, EmbeddingPipe, transpose, 70 blocks, transpose,
  // LayerNorm, tied EmbeddingPipe, cast (77 entries). Boundaries computed by running DeepSpeed 0.7.0's code (§2).
  std::vector<double> transformer_or_embedding{0, 1, 0};
  std::vector<double> transformer{0, 0, 0};
  for (int b = 0; b < 70; ++b) {
    transformer_or_embedding.push_back(1);
    transformer.push_back(1);
  }
  for (double w : {0.0, 0.0, 1.0, 0.0})
    transformer_or_embedding.push_back(w);
  for (int i = 0; i < 4; ++i)
    transformer.push_back(0);
  CHECK(schedule::partition_balanced(transformer_or_embedding, 12) ==
        std::vector<int>{0, 8, 14, 20, 26, 32, 38, 44, 50, 56, 62, 68, 77});
  CHECK(schedule::partition_balanced(transformer, 12) ==
        std::vector<int>{0, 9, 15, 21, 27, 33, 39, 45, 51, 57, 63, 69, 77});
  // partition_uniform: floor(77 / 12) = 6 entries a stage, the remainder (5) on the last.
  CHECK(schedule::partition_uniform(77, 12) == std::vector<int>{0, 6, 12, 18, 24, 30, 36, 42, 48, 54, 60, 66, 77});
  CHECK(schedule::partition_uniform(3, 4) == std::vector<int>{0, 1, 2, 3, 3});
}

TEST_CASE("1f1b: each stage's compute order is DeepSpeed's TrainSchedule's, P = 4, m = 8 (§3's worked example)")
{
  CHECK(run(schedule::ONE_F_ONE_B_POLICY, 0, 4, 8).compute == split("F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"));
  CHECK(run(schedule::ONE_F_ONE_B_POLICY, 1, 4, 8).compute == split("F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7"));
  CHECK(run(schedule::ONE_F_ONE_B_POLICY, 2, 4, 8).compute == split("F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7"));
  CHECK(run(schedule::ONE_F_ONE_B_POLICY, 3, 4, 8).compute == split("F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"));
}

TEST_CASE("1f1b: the point-to-point instructions sit where DeepSpeed 0.7.0 issues them (§3's table, stages 0 and 3)")
{
  // Stage 0, steps 0-21 of the table: each SendAct in the backward slot after its forward, RecvGrad before B.
  CHECK(run(schedule::ONE_F_ONE_B_POLICY, 0, 4, 8).all ==
        split("F0 SendAct0 F1 SendAct1 F2 SendAct2 F3 SendAct3 RecvGrad0 B0 F4 SendAct4 RecvGrad1 B1 F5 SendAct5 "
              "RecvGrad2 B2 F6 SendAct6 RecvGrad3 B3 F7 SendAct7 RecvGrad4 B4 RecvGrad5 B5 RecvGrad6 B6 RecvGrad7 B7 "
              "Step"));
  // Stage 3: RecvAct(i) before SendGrad(i - 1) in each forward slot, the last SendGrad alone at step 19.
  CHECK(run(schedule::ONE_F_ONE_B_POLICY, 3, 4, 8).all ==
        split("RecvAct0 F0 B0 RecvAct1 SendGrad0 F1 B1 RecvAct2 SendGrad1 F2 B2 RecvAct3 SendGrad2 F3 B3 RecvAct4 "
              "SendGrad3 F4 B4 RecvAct5 SendGrad4 F5 B5 RecvAct6 SendGrad5 F6 B6 RecvAct7 SendGrad6 F7 B7 SendGrad7 "
              "Step"));
}

TEST_CASE("in flight: stage s holds min(P - s, m) micro-batches under 1F1B and m under GPipe (§7)")
{
  for (int P : {2, 4, 12})
    for (int m : {1, 3, 8, 128})
      for (int s = 0; s < P; ++s) {
        CAPTURE(P);
        CAPTURE(m);
        CAPTURE(s);
        CHECK(most_in_flight(run(schedule::ONE_F_ONE_B_POLICY, s, P, m).compute) == std::min(P - s, m));
        CHECK(most_in_flight(run(schedule::GPIPE_POLICY, s, P, m).compute) == m);
      }
}

TEST_CASE("every policy issues each stage's units once: m forwards, m backwards, one step, and 2m p2p on a middle "
          "stage")
{
  for (const char* policy : {schedule::ONE_F_ONE_B_POLICY, schedule::GPIPE_POLICY}) {
    const Recorder r = run(policy, 1, 3, 5);
    CHECK(r.compute.size() == 10);
    CHECK(r.all.size() == 10 + 4 * 5 + 1); // RecvAct, SendAct, RecvGrad, SendGrad per micro-batch, then the step
    CHECK(r.all.back() == "Step");
  }
}
