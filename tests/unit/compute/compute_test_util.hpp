// Helpers shared by the compute tests.
#pragma once

#include "workload/transformer.hpp"

#include <cstdint>

namespace zerosim::compute::test {

/// A GEMM op C[m x n] = A[m x k] B[k x n]: 2mnk forward FLOPs, twice that backward (dX and dW), no HBM bytes
/// unless the caller sets them (so only the compute roof counts).
inline workload::Op gemm(std::int64_t m, std::int64_t n, std::int64_t k)
{
  workload::Op op;
  op.name = "gemm";
  op.kind = workload::OpKind::GEMM;
  op.m = m;
  op.n = n;
  op.k = k;
  op.fwd_flops = 2.0 * double(m) * double(n) * double(k);
  op.bwd_flops = 2.0 * op.fwd_flops;
  return op;
}

} // namespace zerosim::compute::test
