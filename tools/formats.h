// The file formats the rocksdcp CLI reads and writes: NumPy .npy for one
// tensor, safetensors for a whole checkpoint. Each streams one item at a
// time: memory holds the largest tensor, never the whole checkpoint.

#ifndef ROCKSDCP_TOOLS_FORMATS_H_
#define ROCKSDCP_TOOLS_FORMATS_H_

#include <cstdint>
#include <string>

#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::tools {

// Writes tensor `fqn` of checkpoint `id`, reassembled from its chunks, to
// `out_path` as a NumPy .npy file (format 1.0, little-endian, C order).
// NotFound naming the checkpoint or fqn; InvalidArgument for a byte item or
// a dtype NumPy has no type for (bfloat16, the float8s), saying so.
Status DumpNpy(Store& store, const std::string& id, const std::string& fqn,
               const std::string& out_path);

struct TransferStats {
  uint64_t tensors = 0;
  uint64_t byte_items = 0;
  uint64_t bytes = 0;  // Tensor payload.
};

// Writes checkpoint `id` as a safetensors file: an 8-byte little-endian
// header length, a JSON header ({"fqn": {"dtype", "shape", "data_offsets"}}
// plus "__metadata__" holding the byte items as strings), then the raw
// tensor bytes, tensors in name order with contiguous offsets. The header is
// written first (sizes come from the metadata), then one tensor at a time.
// A byte item whose value is valid UTF-8 is stored as that JSON string;
// any other value, or one that itself starts with "base64:", is stored as
// "base64:" + base64(value) (RFC 4648, padded), which ImportSafetensors
// undoes. InvalidArgument for a dtype safetensors lacks (complex, the FNUZ
// float8s, float8_e8m0fnu) or a header past safetensors' 100 MB limit.
// progress reports bytes and items written.
Result<TransferStats> ExportSafetensors(Store& store, const std::string& id,
                                        const std::string& out_path,
                                        const ProgressCallback& progress = {});

// Saves the safetensors file `in_path` (e.g. a Hugging Face model) into
// `store` as checkpoint `id`; "__metadata__" entries become byte items.
// Verifies the header before using it: offsets within the file, in order,
// not overlapping, sizes matching dtype and shape; Corruption naming the
// file and tensor otherwise. As safetensors' own reader, the tensors must
// tile the data exactly (no gaps), and the JSON must be strict (no duplicate
// keys, no unknown fields, UTF-8). The file is mapped read-only and saved in
// one Save through views into the mapping, so memory holds pages the kernel
// can drop, not a copy. AlreadyExists if `id` exists and !overwrite.
Result<TransferStats> ImportSafetensors(const std::string& in_path,
                                        Store& store, const std::string& id,
                                        bool overwrite = false,
                                        const ProgressCallback& progress = {});

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_FORMATS_H_
