#include "util/chunk_check.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>

#include "util/text.h"

namespace rocksdcp::util {

namespace {

using Chunk = ChunkStorageMetadata;

// Corner lists past this many entries (of up to 2^k coordinates each) fall
// back to the pairwise search: only tensors with many split dimensions get
// there, and no sharding layout produces those.
constexpr size_t kMaxCorners = size_t{1} << 24;

// Product of `sizes`.
// REQUIRES: the sizes lie within a box whose CheckedVolume succeeded.
int64_t Volume(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool ChunkWithin(const Chunk& chunk, const std::vector<int64_t>& size) {
  if (chunk.offsets.size() != size.size() ||
      chunk.sizes.size() != size.size()) {
    return false;
  }
  for (size_t d = 0; d < size.size(); ++d) {
    if (chunk.offsets[d] < 0 || chunk.sizes[d] < 0 ||
        chunk.offsets[d] > size[d] - chunk.sizes[d]) {
      return false;
    }
  }
  return true;
}

// DCP's _check_box_overlap. Boxes with a zero extent overlap nothing; two
// 0-d boxes are the same single element.
bool ChunksOverlap(const Chunk& a, const Chunk& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.offsets[d] >= b.offsets[d] + b.sizes[d]) return false;
    if (b.offsets[d] >= a.offsets[d] + a.sizes[d]) return false;
  }
  return true;
}

struct Overlap {
  size_t a;
  size_t b;
};

// Looks for two overlapping chunks among chunks[nonempty[i]] by sorting
// them along the dimension where their offsets differ most and comparing
// each with the ones that start before it ends there. Gives up (nullopt)
// after comparing `budget` pairs: layouts split along several dimensions
// can take O(n^2) comparisons.
std::optional<Overlap> FindOverlap(const std::vector<Chunk>& chunks,
                                   std::vector<size_t> nonempty,
                                   uint64_t budget) {
  if (nonempty.size() < 2) return std::nullopt;
  const size_t dims = chunks[nonempty[0]].offsets.size();
  if (dims == 0) return Overlap{nonempty[0], nonempty[1]};
  size_t axis = 0;
  size_t most_distinct = 0;
  std::vector<int64_t> offsets(nonempty.size());
  for (size_t d = 0; d < dims; ++d) {
    for (size_t i = 0; i < nonempty.size(); ++i) {
      offsets[i] = chunks[nonempty[i]].offsets[d];
    }
    std::sort(offsets.begin(), offsets.end());
    const size_t distinct = static_cast<size_t>(
        std::unique(offsets.begin(), offsets.end()) - offsets.begin());
    if (distinct > most_distinct) {
      axis = d;
      most_distinct = distinct;
    }
  }
  std::sort(nonempty.begin(), nonempty.end(), [&](size_t a, size_t b) {
    return chunks[a].offsets[axis] < chunks[b].offsets[axis];
  });
  for (size_t i = 0; i < nonempty.size(); ++i) {
    const Chunk& a = chunks[nonempty[i]];
    for (size_t j = i + 1; j < nonempty.size(); ++j) {
      const Chunk& b = chunks[nonempty[j]];
      if (b.offsets[axis] >= a.offsets[axis] + a.sizes[axis]) break;
      if (budget-- == 0) return std::nullopt;
      if (ChunksOverlap(a, b)) {
        return Overlap{std::min(nonempty[i], nonempty[j]),
                       std::max(nonempty[i], nonempty[j])};
      }
    }
  }
  return std::nullopt;
}

// Whether every element of the tensor lies in exactly one of
// chunks[nonempty[i]], by counting corners; nullopt if the chunks have too
// many corners to count.
//
// Let f(x) count the chunks holding element x, and D be the mixed
// difference operator, D f(x) = sum over e in {0,1}^k of
// (-1)^|e| f(x - e). For a box [lo, hi), D 1_box is +1 or -1 at each of its
// 2^k corners (sign (-1)^(number of hi coordinates)) and 0 elsewhere, so
// D f is the signed sum of the chunks' corners. D is invertible on
// functions of finite support (f is the prefix sum of D f), so f equals 1
// on the tensor and 0 elsewhere exactly when the chunks' signed corners
// cancel the tensor's own. Dimensions that every chunk spans whole factor
// out of f and are skipped.
// REQUIRES: the chunks are nonempty and lie within `size`.
std::optional<bool> TilesByCorners(const std::vector<int64_t>& size,
                                   const std::vector<Chunk>& chunks,
                                   const std::vector<size_t>& nonempty) {
  std::vector<size_t> split;
  for (size_t d = 0; d < size.size(); ++d) {
    for (size_t c : nonempty) {
      if (chunks[c].offsets[d] != 0 || chunks[c].sizes[d] != size[d]) {
        split.push_back(d);
        break;
      }
    }
  }
  const size_t k = split.size();
  const size_t boxes = nonempty.size() + 1;  // The chunks and the tensor.
  // Up to 8 corners per chunk always fit: the list grows linearly.
  if (k > 3 && (k >= 32 || boxes > (kMaxCorners >> k))) return std::nullopt;
  const size_t per_box = size_t{1} << k;
  const size_t n = boxes * per_box;
  std::vector<int64_t> coords(n * k);
  std::vector<int8_t> signs(n);
  const std::vector<int64_t> origin(size.size(), 0);
  for (size_t b = 0; b < boxes; ++b) {
    const bool tensor = b == nonempty.size();
    const std::vector<int64_t>& lo =
        tensor ? origin : chunks[nonempty[b]].offsets;
    const std::vector<int64_t>& extent =
        tensor ? size : chunks[nonempty[b]].sizes;
    for (size_t mask = 0; mask < per_box; ++mask) {
      const size_t at = b * per_box + mask;
      for (size_t i = 0; i < k; ++i) {
        const size_t d = split[i];
        coords[at * k + i] = lo[d] + ((mask >> i) & 1 ? extent[d] : 0);
      }
      const bool odd = std::popcount(mask) % 2 == 1;
      signs[at] = (odd != tensor) ? -1 : 1;  // The tensor's corners negated.
    }
  }
  auto corner = [&](size_t i) { return coords.begin() + i * k; };
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::lexicographical_compare(corner(a), corner(a) + k, corner(b),
                                        corner(b) + k);
  });
  for (size_t i = 0; i < n;) {
    int64_t sum = 0;
    size_t j = i;
    for (; j < n &&
           std::equal(corner(order[i]), corner(order[i]) + k, corner(order[j]));
         ++j) {
      sum += signs[order[j]];
    }
    if (sum != 0) return false;
    i = j;
  }
  return true;
}

}  // namespace

std::optional<int64_t> CheckedVolume(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0 || __builtin_mul_overflow(n, s, &n)) return std::nullopt;
  }
  return n;
}

std::string ChunkTilingProblem(const std::vector<int64_t>& size,
                               const std::vector<Chunk>& chunks) {
  const std::optional<int64_t> volume = CheckedVolume(size);
  if (!volume) {
    return "size " + util::ShapeString(size) +
           " is negative or has more than 2^63 elements";
  }
  std::vector<size_t> nonempty;
  // Each chunk holds at most `volume` < 2^63 elements and the sum stops
  // growing once past it, so it can't wrap.
  uint64_t covered = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& chunk = chunks[i];
    if (!ChunkWithin(chunk, size)) {
      return "chunk " + std::to_string(i) + " at " +
             util::ShapeString(chunk.offsets) + " of size " +
             util::ShapeString(chunk.sizes) + " lies outside the size " +
             util::ShapeString(size);
    }
    const int64_t v = Volume(chunk.sizes);
    if (v == 0) continue;
    nonempty.push_back(i);
    if (covered <= static_cast<uint64_t>(*volume)) {
      covered += static_cast<uint64_t>(v);
    }
  }
  if (covered < static_cast<uint64_t>(*volume)) {
    return "chunks cover " + std::to_string(covered) + " of " +
           std::to_string(*volume) + " elements";
  }
  // Chunks within an empty tensor are empty too.
  if (*volume == 0) return "";
  // One chunk within the size that covers its volume is the whole tensor:
  // most tensors of a single rank's save.
  if (nonempty.size() == 1 && covered == static_cast<uint64_t>(*volume)) {
    return "";
  }
  std::optional<Overlap> pair;
  if (covered == static_cast<uint64_t>(*volume)) {
    const std::optional<bool> exact = TilesByCorners(size, chunks, nonempty);
    if (exact == true) return "";
    if (!exact) {
      pair =
          FindOverlap(chunks, nonempty, std::numeric_limits<uint64_t>::max());
      if (!pair) return "";
    }
  }
  // Some element lies in two chunks. Name two when a short search finds
  // them; a forged layout must not make the error quadratic either.
  if (!pair) {
    pair = FindOverlap(chunks, nonempty, 64 * uint64_t{nonempty.size()} + 4096);
  }
  if (!pair) {
    return covered > static_cast<uint64_t>(*volume)
               ? "chunks overlap: their sizes add up to more than the " +
                     std::to_string(*volume) + " elements"
               : "chunks overlap, and leave as many elements uncovered";
  }
  const Chunk& a = chunks[pair->a];
  const Chunk& b = chunks[pair->b];
  return "chunks " + std::to_string(pair->a) + " at " +
         util::ShapeString(a.offsets) + " and " + std::to_string(pair->b) +
         " at " + util::ShapeString(b.offsets) + " overlap";
}

}  // namespace rocksdcp::util
