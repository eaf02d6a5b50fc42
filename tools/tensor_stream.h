// Reads tensors of a checkpoint in C order through one fixed-size buffer,
// for the CLI's writers of whole tensors (.npy, safetensors): memory holds
// the budget, never a whole tensor or checkpoint.
//
// Every rocksdcp::Load re-reads and decodes the checkpoint's whole
// metadata, so the stream makes as few Loads as the budget allows:
//   - consecutive tensors that fit in the budget together are read by one
//     Load (one state dict of views into the buffer);
//   - a tensor larger than the budget is read in slabs: the outermost
//     dimension k one of whose rows (the dims after k) fits is cut into
//     runs of as many rows as fit, for each index of dims 0..k-1; each slab
//     is one Load of a one-shard ShardedTensor, and the reader reshards the
//     saved chunks into it. Slabs follow each other in C order.
// So a stream takes about total_bytes / budget Loads plus one per slab of
// each large tensor, never one per small tensor.
//
// Thread safety: StreamTensors uses `reader` from the calling thread only
// (the reader may add I/O threads of its own); one stream per reader at a
// time. `sink` is called from the calling thread.

#ifndef ROCKSDCP_TOOLS_TENSOR_STREAM_H_
#define ROCKSDCP_TOOLS_TENSOR_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace rocksdcp::tools {

// One tensor to stream, as the checkpoint's metadata describes it. An empty
// `size` is a 0-d tensor (one element).
struct StreamItem {
  std::string fqn;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> size;
};

// Receives the bytes of items[item] in C order, in consecutive pieces of at
// most the budget each; the pieces of one item concatenate to exactly its
// numel * DTypeSize(dtype) bytes, and items come in order. A tensor of zero
// bytes (a zero dim) gets no call at all. `bytes` points into the stream's
// buffer: it is valid only during the call. A non-OK return stops the
// stream, and StreamTensors returns it.
using StreamSink = std::function<Status(size_t item, std::string_view bytes)>;

// Reads tensors `items` of checkpoint `id` through `reader`, in order, and
// hands each one's bytes, C order, to `sink` in consecutive pieces, through
// one buffer of at most `budget_bytes` (allocated on first use, no larger
// than the items need, and not zero-filled).
//
// Every item is checked against the checkpoint's metadata by the first Load
// (so the check costs no metadata read of its own), before any bytes reach
// `sink`: an fqn the checkpoint lacks, or a byte item, is NotFound, and a
// dtype or size that differs from the metadata's is InvalidArgument, each
// naming the checkpoint and the fqn. If every item has zero bytes, one Load
// of nothing still runs, for that check.
//
// Errors: InvalidArgument if budget_bytes < 16 (the largest element, so
// that any slab holds at least one element); Corruption naming the
// checkpoint and fqn for a negative size or one whose bytes overflow
// (sizes come from checkpoint metadata, which is untrusted); errors of
// rocksdcp::Load unchanged (they name the checkpoint and the fqn).
//
// Loads use LoadOptions{checkpoint_id = id, allow_partial_load = true}: a
// state dict holds only the items of one Load.
// REQUIRES: `reader` is a reader of the store holding `id`.
Status StreamTensors(StorageReader& reader, const std::string& id,
                     const std::vector<StreamItem>& items, size_t budget_bytes,
                     const StreamSink& sink);

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_TENSOR_STREAM_H_
