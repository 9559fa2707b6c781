// Tests of sim/workload/op_graph.hpp on a three-op graph small enough to work out by hand
// (docs/workload.md §4-§5 give the rules used for each expectation).
#include "workload/op_graph.hpp"

#include <doctest/doctest.h>

using namespace zerosim::workload;
using namespace zerosim::workload::detail;

namespace {

// x (20 B, layer input) -A-> y (20 B) -B-> z (40 B) ; C(z, x) -> w (20 B, layer output).
// A saves x, B (the recomputable "core") saves z, C saves nothing. A is a GEMM with a 100-byte weight.
OpGraph tiny()
{
  OpGraph g;
  const int x = g.add_tensor("x", 10, 2);
  const int y = g.add_tensor("y", 10, 2);
  const int z = g.add_tensor("z", 20, 2);
  const int w = g.add_tensor("w", 10, 2);
  OpDef a;
  a.op.name = "A";
  a.rule = BytesRule::GEMM;
  a.inputs = {x};
  a.outputs = {y};
  a.saved = {x};
  a.weight_read_fwd = 100;
  g.add_op(a);
  OpDef b;
  b.op.name = "B";
  b.op.selective_recompute = true;
  b.inputs = {y};
  b.outputs = {z};
  b.saved = {z};
  g.add_op(b);
  OpDef c;
  c.op.name = "C";
  c.inputs = {z, x};
  c.outputs = {w};
  g.add_op(c);
  g.set_boundary(x, w);
  return g;
}

} // namespace

TEST_SUITE("workload")
{
  TEST_CASE("op_graph: kept bytes per checkpointing mode")
  {
    const OpGraph g = tiny();
    CHECK(g.analyse(GraphMode::TRAIN).kept_bytes == 60);      // x + z, everything saved
    CHECK(g.analyse(GraphMode::TRAIN_FULL).kept_bytes == 20); // the layer input x only
    // Selective: non-core saves (x) + the core's input from outside it (y); z is recomputed.
    const GraphResult sel = g.analyse(GraphMode::TRAIN_SELECTIVE);
    CHECK(sel.kept_bytes == 40);
    CHECK(sel.recomputed_bytes == 40);
    CHECK(g.analyse(GraphMode::INFERENCE).kept_bytes == 0);
  }

  TEST_CASE("op_graph: backward working = recomputed + largest gradient pair")
  {
    const OpGraph g = tiny();
    // Gradient pairs: A: dx + dy = 40, B: dy + dz = 60, C: dz + dx + dw = 80.
    CHECK(g.analyse(GraphMode::TRAIN).backward_working_bytes == 80);
    CHECK(g.analyse(GraphMode::TRAIN_FULL).backward_working_bytes == 40 + 80); // z rebuilt (x is kept)
    CHECK(g.analyse(GraphMode::INFERENCE).backward_working_bytes == 0);
  }

  TEST_CASE("op_graph: forward working follows liveness of the tensors not kept")
  {
    const OpGraph g = tiny();
    // TRAIN: y alive during A and B (20); w at C (20).
    CHECK(g.analyse(GraphMode::TRAIN).forward_working_bytes == 20);
    // FULL: x kept; during B y and z (60), during C z and w (60).
    CHECK(g.analyse(GraphMode::TRAIN_FULL).forward_working_bytes == 60);
    // INFERENCE: during B x, y, z (80); during C x, z, w (80).
    CHECK(g.analyse(GraphMode::INFERENCE).forward_working_bytes == 80);
  }

  TEST_CASE("op_graph: the tensors behind each sum, as the caching allocator is asked for them")
  {
    const OpGraph g = tiny();
    using V = std::vector<std::int64_t>;
    const GraphResult train = g.analyse(GraphMode::TRAIN);
    CHECK(train.kept_tensors == V{20, 40});                 // x, z
    CHECK(train.forward_working_tensors == V{20});          // y during A (the first op reaching the peak of 20)
    CHECK(train.backward_working_tensors == V{20, 40, 20}); // nothing rebuilt; C's pair: dx, dz, dw
    const GraphResult full = g.analyse(GraphMode::TRAIN_FULL);
    CHECK(full.kept_tensors == V{20});                         // x
    CHECK(full.forward_working_tensors == V{20, 40});          // y and z during B
    CHECK(full.backward_working_tensors == V{40, 20, 40, 20}); // z rebuilt, then C's pair
  }

  TEST_CASE("op_graph: the forward's allocations in op order, transients freed after their last reader")
  {
    // docs/memory.md §2.1 "alloc_order". Steps: k >= 0 allocates trace tensor k, -k - 1 frees it.
    const OpGraph g = tiny();
    using V = std::vector<std::int64_t>;
    using S = std::vector<int>;
    // TRAIN (x and z kept): x (kept input) first; A writes y; B writes z, and y (last read by B) dies; C writes w,
    // the layer's output, freed at the end (the next layer allocates its own input).
    const GraphResult train = g.analyse(GraphMode::TRAIN);
    CHECK(train.forward_trace_bytes == V{20, 20, 40, 20}); // x, y, z, w
    CHECK(train.forward_trace == S{0, 1, 2, -2, 3, -4});
    // FULL (x kept): z is transient too, dying after C.
    const GraphResult full = g.analyse(GraphMode::TRAIN_FULL);
    CHECK(full.forward_trace == S{0, 1, 2, -2, 3, -3, -4});
    // The kept tensors are the ones the trace never frees: they sum to kept_bytes.
    std::int64_t never_freed = 0;
    for (std::size_t k = 0; k < full.forward_trace_bytes.size(); ++k) {
      bool freed = false;
      for (int step : full.forward_trace)
        freed = freed || step == -static_cast<int>(k) - 1;
      if (!freed)
        never_freed += full.forward_trace_bytes[k];
    }
    CHECK(never_freed == full.kept_bytes);
    // Inference keeps nothing and has no trace (its forward is one pass the working set stands for).
    CHECK(g.analyse(GraphMode::INFERENCE).forward_trace.empty());
  }

  TEST_CASE("op_graph: bytes of GEMM and streaming ops")
  {
    const GraphResult r = tiny().analyse(GraphMode::TRAIN);
    REQUIRE(r.ops.size() == 3);
    CHECK(r.ops[0].fwd_bytes == 20 + 100 + 20);       // X + W + Y
    CHECK(r.ops[0].bwd_bytes == 2 * (20 + 100 + 20)); // dX = dY·Wᵀ and dW = Xᵀ·dY
    CHECK(r.ops[1].fwd_bytes == 20 + 40);             // read y, write z
    CHECK(r.ops[1].bwd_bytes == 40 + 40 + 20);        // read dz, read saved z, write dy
    CHECK(r.ops[2].bwd_bytes == 20 + 0 + 40 + 20);    // read dw, nothing saved, write dz and dx
    const GraphResult inf = tiny().analyse(GraphMode::INFERENCE);
    CHECK(inf.ops[0].bwd_bytes == 0);
  }
}
