// Tensors whose values are distributed like a trained transformer's, drawn
// from a seed: random bytes don't compress, real weights do, so the codec's
// tests and benchmarks use these.

#ifndef ROCKSDCP_TESTS_WEIGHTS_H_
#define ROCKSDCP_TESTS_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "rocksdcp/tensor.h"

namespace rocksdcp::testing {

enum class WeightKind {
  kWeight,        // A linear layer's weights: normal(0, 0.02).
  kNorm,          // A norm's scale: 1 + normal(0, 0.05).
  kAdamExpAvg,    // Adam's first moment: normal(0, 1e-4).
  kAdamExpAvgSq,  // Adam's second moment: small, positive (~1e-8).
};

// Fills `n` elements of `dtype` (kFloat32, kBFloat16 or kFloat16) at `out`
// with values of `kind` drawn from `seed`. fp32 values keep all 23 mantissa
// bits (drawn in double and rounded once); bf16 and fp16 values are the fp32
// ones rounded to nearest even.
void FillWeights(WeightKind kind, DType dtype, uint64_t seed, void* out,
                 size_t n);

// As FillWeights, returned as bytes.
std::string WeightBytes(WeightKind kind, DType dtype, uint64_t seed, size_t n);

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_WEIGHTS_H_
