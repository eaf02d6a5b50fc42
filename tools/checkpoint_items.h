// What the CLI's commands share to read a checkpoint's items: its metadata
// through one reader, tensor sizes checked for overflow, and error context.

#ifndef ROCKSDCP_TOOLS_CHECKPOINT_ITEMS_H_
#define ROCKSDCP_TOOLS_CHECKPOINT_ITEMS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::tools {

// The memory the CLI reads tensors through (tools/tensor_stream.h):
// enough for RocksDB's reads to stay efficient, small beside a checkpoint.
inline constexpr size_t kDefaultBufferBytes = size_t{64} << 20;

// 's' in single quotes, as error messages name paths, ids and fqns.
std::string Quoted(std::string_view s);

// "[2, 3]": a shape as the CLI prints it and errors name it.
std::string ShapeText(const std::vector<int64_t>& size);

// "store '<path>', checkpoint '<id>'": the context of an error.
std::string Where(const Store& store, std::string_view id);

// numel * element size; nullopt for a negative size or an overflow
// (sizes come from checkpoint metadata or files, untrusted).
std::optional<uint64_t> TensorBytes(DType dtype,
                                    const std::vector<int64_t>& size);

// A committed checkpoint opened for reading, with its metadata read once.
struct OpenCheckpoint {
  std::unique_ptr<RocksDBStorageReader> reader;
  Metadata metadata;
};

// Opens checkpoint `id` of `store` for reading and reads its metadata.
// NotFound for an unknown id; errors name the store and the checkpoint.
Result<OpenCheckpoint> OpenForRead(Store& store, const std::string& id);

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_CHECKPOINT_ITEMS_H_
