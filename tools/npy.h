// `rocksdcp dump --npy`: one tensor of a checkpoint as a NumPy .npy file.

#ifndef ROCKSDCP_TOOLS_NPY_H_
#define ROCKSDCP_TOOLS_NPY_H_

#include <cstddef>
#include <string>

#include "checkpoint_items.h"
#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::tools {

// NumPy 1.x reads at most 32 dimensions (NPY_MAXDIMS).
inline constexpr size_t kMaxNpyDims = 32;

// Writes tensor `fqn` of checkpoint `id`, reassembled from its chunks, to
// `out_path` as a NumPy .npy file (format 1.0, little-endian, C order).
// Reads through `buffer_bytes` of memory, whatever the tensor's size. The
// file appears whole or not at all (OutFile). NotFound naming the
// checkpoint or fqn; InvalidArgument for a byte item, a dtype NumPy has no
// type for (bfloat16, the float8s) or more than kMaxNpyDims dimensions,
// saying so.
Status DumpNpy(Store& store, const std::string& id, const std::string& fqn,
               const std::string& out_path,
               size_t buffer_bytes = kDefaultBufferBytes);

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_NPY_H_
