#include "util/strided.h"

#include <cstring>
#include <vector>

namespace rocksdcp::util {

void CopyRun(const uint8_t* src, uint64_t count, size_t elem_size, uint8_t* dst,
             int64_t dst_stride_bytes) {
  if (dst_stride_bytes == static_cast<int64_t>(elem_size)) {
    std::memcpy(dst, src, count * elem_size);
    return;
  }
  for (uint64_t k = 0; k < count; ++k) {
    std::memcpy(dst + static_cast<int64_t>(k) * dst_stride_bytes,
                src + k * elem_size, elem_size);
  }
}

void GatherElements(const TensorView& src, uint64_t first, uint64_t count,
                    uint8_t* dst) {
  if (count == 0) return;
  const size_t elem = DTypeSize(src.dtype);
  const auto* base = static_cast<const uint8_t*>(src.data);
  if (src.IsContiguous()) {
    std::memcpy(dst, base + first * elem, count * elem);
    return;
  }
  const size_t dims = src.sizes.size();
  const std::vector<int64_t> strides = src.EffectiveStrides();
  // Unravel `first` into a multi-index.
  std::vector<int64_t> idx(dims, 0);
  uint64_t rest = first;
  for (size_t d = dims; d-- > 0;) {
    const auto size = static_cast<uint64_t>(src.sizes[d]);
    idx[d] = static_cast<int64_t>(rest % size);
    rest /= size;
  }
  const int64_t inner_size = src.sizes[dims - 1];
  const int64_t inner_stride = strides[dims - 1] * static_cast<int64_t>(elem);
  while (count > 0) {
    int64_t offset = 0;
    for (size_t d = 0; d < dims; ++d) offset += idx[d] * strides[d];
    const uint64_t run = std::min<uint64_t>(
        count, static_cast<uint64_t>(inner_size - idx[dims - 1]));
    const uint8_t* from = base + offset * static_cast<int64_t>(elem);
    if (inner_stride == static_cast<int64_t>(elem)) {
      std::memcpy(dst, from, run * elem);
    } else {
      for (uint64_t k = 0; k < run; ++k) {
        std::memcpy(dst + k * elem,
                    from + static_cast<int64_t>(k) * inner_stride, elem);
      }
    }
    dst += run * elem;
    count -= run;
    // Carry into the outer dimensions.
    idx[dims - 1] = 0;
    for (size_t d = dims - 1; d-- > 0;) {
      if (++idx[d] < src.sizes[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace rocksdcp::util
