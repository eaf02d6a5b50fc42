// Copies between a strided tensor view and the contiguous (row-major)
// projection that rocksdcp stores, a range of elements at a time, so that a
// piece can be filled straight from the caller's tensor without staging the
// whole tensor.

#ifndef ROCKSDCP_SRC_UTIL_STRIDED_H_
#define ROCKSDCP_SRC_UTIL_STRIDED_H_

#include <cstdint>

#include "rocksdcp/tensor.h"

namespace rocksdcp::util {

// Copies elements [first, first + count) of `src`, counted in row-major
// order, to `dst` (densely packed).
// REQUIRES: src.Validate().ok(); first + count <= src.numel().
void GatherElements(const TensorView& src, uint64_t first, uint64_t count,
                    uint8_t* dst);

// Copies `count` elements from `src` (densely packed) to `dst`, an
// element-strided run: element k goes to dst + k * dst_stride_bytes.
void CopyRun(const uint8_t* src, uint64_t count, size_t elem_size, uint8_t* dst,
             int64_t dst_stride_bytes);

}  // namespace rocksdcp::util

#endif  // ROCKSDCP_SRC_UTIL_STRIDED_H_
