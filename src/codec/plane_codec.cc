#include "codec/plane_codec.h"

// For ZSTD_estimateCCtxSize_usingCParams, which Debian's libzstd exports.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <cmath>
#include <cstring>
#include <string>

namespace rocksdcp::codec {

namespace {

// Plane k of n `Elem`-byte elements at planes + k * n. A constant element
// size lets the compiler unroll the inner loop.
template <size_t Elem>
void SplitFixed(const uint8_t* data, size_t n, uint8_t* planes) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < Elem; ++k) planes[k * n + i] = data[i * Elem + k];
  }
}

template <size_t Elem>
void MergeFixed(const uint8_t* const* planes, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < Elem; ++k) out[i * Elem + k] = planes[k][i];
  }
}

void Split(const uint8_t* data, size_t n, size_t elem, uint8_t* planes) {
  switch (elem) {
    case 2:
      return SplitFixed<2>(data, n, planes);
    case 4:
      return SplitFixed<4>(data, n, planes);
    case 8:
      return SplitFixed<8>(data, n, planes);
    default:
      for (size_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < elem; ++k) {
          planes[k * n + i] = data[i * elem + k];
        }
      }
  }
}

void Merge(const uint8_t* const* planes, size_t n, size_t elem, uint8_t* out) {
  switch (elem) {
    case 2:
      return MergeFixed<2>(planes, n, out);
    case 4:
      return MergeFixed<4>(planes, n, out);
    case 8:
      return MergeFixed<8>(planes, n, out);
    default:
      for (size_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < elem; ++k) out[i * elem + k] = planes[k][i];
      }
  }
}

// A plane whose bytes' order-0 entropy says zstd could save less than
// this share of it is stored as it is, without trying: zstd finds no
// matches in a float's mantissa bytes, and its entropy coder saves at
// best what the entropy says, so trying costs time for nothing (half of
// a bf16 payload's planes, two of an fp32's four).
constexpr double kMinEstimatedSaving = 0.03;

// zstd's shortest match, at its most (its default at level 1 is 6). A
// plane of exponents has few long repeats and many short ones, each
// costlier to encode than the literals it saves: on bf16 weights, 7
// compressed to 0.680 at 450 MB/s against 0.691 at 350 MB/s with 6
// (BM_Codec, 2026-12-02).
constexpr int kMinMatch = 7;

// The bytes `n` bytes at `p` would take at their order-0 entropy.
double EntropyBytes(const uint8_t* p, size_t n) {
  // Four tables, so that runs of one byte value don't serialize on one
  // counter.
  uint32_t counts[4][256] = {};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    ++counts[0][p[i]];
    ++counts[1][p[i + 1]];
    ++counts[2][p[i + 2]];
    ++counts[3][p[i + 3]];
  }
  for (; i < n; ++i) ++counts[0][p[i]];
  double bits = 0;
  for (int v = 0; v < 256; ++v) {
    const uint32_t c =
        counts[0][v] + counts[1][v] + counts[2][v] + counts[3][v];
    if (c != 0) bits -= c * std::log2(static_cast<double>(c) / n);
  }
  return bits / 8;
}

Status Bad(std::string why) {
  return Status::Corruption("compressed planes: " + std::move(why));
}

}  // namespace

struct PlaneEncoder::Rep {
  int level = 1;
  ZSTD_CCtx* cctx = nullptr;
  std::vector<uint8_t> planes;  // The split planes, when elem > 1.
  std::vector<uint8_t> stored;  // Their stored form; stored_size used.
  size_t stored_size = 0;
  ~Rep() { ZSTD_freeCCtx(cctx); }
};

PlaneEncoder::PlaneEncoder(int level) : rep_(std::make_unique<Rep>()) {
  rep_->level = level;
}
PlaneEncoder::~PlaneEncoder() = default;

uint64_t PlaneEncoder::ContextBytes(int level, uint64_t plane_bytes) {
  return ZSTD_estimateCCtxSize_usingCParams(
      ZSTD_getCParams(level, plane_bytes, 0));
}

std::string_view PlaneEncoder::stored() const {
  return std::string_view(reinterpret_cast<const char*>(rep_->stored.data()),
                          rep_->stored_size);
}

Status PlaneEncoder::Encode(const uint8_t* data, size_t size, size_t elem) {
  if (elem == 0 || elem > kMaxPlanes || size % elem != 0 ||
      size / elem > UINT32_MAX) {
    return Status::InvalidArgument(
        "plane encoder: " + std::to_string(size) + " bytes are not whole " +
        std::to_string(elem) + "-byte elements of at most 4 GiB per plane");
  }
  Rep& r = *rep_;
  if (r.cctx == nullptr) {
    r.cctx = ZSTD_createCCtx();
    if (r.cctx == nullptr) {
      return Status::ResourceExhausted("plane encoder: no zstd context");
    }
    ZSTD_CCtx_setParameter(r.cctx, ZSTD_c_compressionLevel, r.level);
    ZSTD_CCtx_setParameter(r.cctx, ZSTD_c_minMatch, kMinMatch);
  }
  const size_t n = size / elem;
  const uint8_t* planes = data;
  if (elem > 1) {
    if (r.planes.size() < size) r.planes.resize(size);
    Split(data, n, elem, r.planes.data());
    planes = r.planes.data();
  }
  // Every plane is stored in at most its n bytes, so `size` bytes hold
  // them all.
  if (r.stored.size() < size) r.stored.resize(size);
  plane_sizes_.assign(elem, 0);
  size_t at = 0;
  for (size_t k = 0; k < elem; ++k) {
    const uint8_t* plane = planes + k * n;
    size_t got = n;
    if (n > 1 && EntropyBytes(plane, n) < (1 - kMinEstimatedSaving) * n) {
      // Room for one byte less than the plane: a frame that does not fit
      // would not be smaller, and the plane is stored as it is.
      got = ZSTD_compress2(r.cctx, r.stored.data() + at, n - 1, plane, n);
      if (ZSTD_isError(got)) got = n;
    }
    if (got == n && n > 0) std::memcpy(r.stored.data() + at, plane, n);
    plane_sizes_[k] = static_cast<uint32_t>(got);
    at += got;
  }
  r.stored_size = at;
  return Status::OK();
}

struct PlaneDecoder::Rep {
  ZSTD_DCtx* dctx = nullptr;
  std::vector<uint8_t> planes;  // Decoded compressed planes, when elem > 1.
  ~Rep() { ZSTD_freeDCtx(dctx); }
};

PlaneDecoder::PlaneDecoder() : rep_(std::make_unique<Rep>()) {}
PlaneDecoder::~PlaneDecoder() = default;

Status PlaneDecoder::Decode(std::string_view stored,
                            const uint32_t* plane_sizes, size_t planes,
                            uint8_t* out, size_t size) {
  if (planes == 0 || planes > kMaxPlanes || size % planes != 0) {
    return Bad(std::to_string(planes) + " planes for " + std::to_string(size) +
               " bytes");
  }
  const size_t n = size / planes;
  uint64_t total = 0;
  for (size_t k = 0; k < planes; ++k) {
    if (plane_sizes[k] > n) {
      return Bad("plane " + std::to_string(k) + " stores " +
                 std::to_string(plane_sizes[k]) + " bytes, more than its " +
                 std::to_string(n));
    }
    total += plane_sizes[k];
  }
  if (total != stored.size()) {
    return Bad("the planes' sizes add up to " + std::to_string(total) +
               " bytes but " + std::to_string(stored.size()) + " are stored");
  }
  Rep& r = *rep_;
  if (r.dctx == nullptr) {
    r.dctx = ZSTD_createDCtx();
    if (r.dctx == nullptr) {
      return Status::ResourceExhausted("plane decoder: no zstd context");
    }
  }
  if (planes > 1 && r.planes.size() < size) r.planes.resize(size);
  const uint8_t* sources[kMaxPlanes];
  const auto* at = reinterpret_cast<const uint8_t*>(stored.data());
  for (size_t k = 0; k < planes; ++k) {
    const size_t len = plane_sizes[k];
    if (len == n) {
      sources[k] = at;  // Stored as it is.
    } else {
      const std::string plane = "plane " + std::to_string(k);
      const unsigned long long declared = ZSTD_getFrameContentSize(at, len);
      if (declared != n) {
        return Bad(plane + " is not a zstd frame of " + std::to_string(n) +
                   " bytes");
      }
      if (ZSTD_findFrameCompressedSize(at, len) != len) {
        return Bad(plane + " holds more than one zstd frame");
      }
      uint8_t* dst = planes == 1 ? out : r.planes.data() + k * n;
      const size_t got = ZSTD_decompressDCtx(r.dctx, dst, n, at, len);
      if (ZSTD_isError(got) || got != n) {
        return Bad(
            plane + " does not decode to its " + std::to_string(n) + " bytes" +
            (ZSTD_isError(got) ? std::string(": ") + ZSTD_getErrorName(got)
                               : std::string()));
      }
      sources[k] = dst;
    }
    at += len;
  }
  if (planes == 1) {
    if (sources[0] != out && n > 0) std::memcpy(out, sources[0], n);
    return Status::OK();
  }
  Merge(sources, n, planes, out);
  return Status::OK();
}

}  // namespace rocksdcp::codec
