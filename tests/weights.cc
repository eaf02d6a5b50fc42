#include "weights.h"

#include <cmath>
#include <cstring>
#include <random>

namespace rocksdcp::testing {

namespace {

uint32_t FloatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}

uint16_t ToBFloat16(float f) {
  const uint32_t x = FloatBits(f);
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

uint16_t ToFloat16(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t biased = static_cast<int32_t>((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffff;
  if (biased == 0xff) return static_cast<uint16_t>(sign | 0x7c00);
  const int32_t exp = biased - 127 + 15;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  uint32_t half;
  uint32_t rem;
  uint32_t mid;
  if (exp <= 0) {  // A subnormal half, or zero.
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const int shift = 14 - exp;
    half = mant >> shift;
    rem = mant & ((1u << shift) - 1);
    mid = 1u << (shift - 1);
  } else {
    half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    rem = mant & 0x1fff;
    mid = 0x1000;
  }
  if (rem > mid || (rem == mid && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

}  // namespace

void FillWeights(WeightKind kind, DType dtype, uint64_t seed, void* out,
                 size_t n) {
  std::mt19937_64 rng(seed);
  double mean = 0, stddev = 0.02;
  switch (kind) {
    case WeightKind::kWeight:
      break;
    case WeightKind::kNorm:
      mean = 1;
      stddev = 0.05;
      break;
    case WeightKind::kAdamExpAvg:
    case WeightKind::kAdamExpAvgSq:
      stddev = 1e-4;
      break;
  }
  std::normal_distribution<double> normal(mean, stddev);
  auto* bytes = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < n; ++i) {
    double v = normal(rng);
    if (kind == WeightKind::kAdamExpAvgSq) v = v * v;
    const auto f = static_cast<float>(v);
    switch (dtype) {
      case DType::kBFloat16: {
        const uint16_t h = ToBFloat16(f);
        std::memcpy(bytes + 2 * i, &h, 2);
        break;
      }
      case DType::kFloat16: {
        const uint16_t h = ToFloat16(f);
        std::memcpy(bytes + 2 * i, &h, 2);
        break;
      }
      default:
        std::memcpy(bytes + 4 * i, &f, 4);
    }
  }
}

std::string WeightBytes(WeightKind kind, DType dtype, uint64_t seed, size_t n) {
  std::string out(n * (dtype == DType::kFloat32 ? 4 : 2), '\0');
  FillWeights(kind, dtype, seed, out.data(), n);
  return out;
}

}  // namespace rocksdcp::testing
