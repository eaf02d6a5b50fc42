// StateDict: what a trainer saves and loads, keyed by fully qualified name.
//
// A value is one of:
//   - a dense tensor (TensorView), the whole tensor held by this rank;
//   - a sharded tensor (ShardedTensor): the global size plus the boxes
//     (shards) of it that this rank holds;
//   - opaque bytes (std::string): optimizer step, RNG state, data-loader
//     position, anything already serialised.
//
// The state dict holds views, not tensor data: saving reads through them,
// loading writes through them. Byte values are owned by the dict; loading
// replaces them.
//
// Thread safety: not synchronised. Don't change a dict while a save or load
// that uses it runs.

#ifndef ROCKSDCP_STATE_DICT_H_
#define ROCKSDCP_STATE_DICT_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "rocksdcp/tensor.h"

namespace rocksdcp {

// One box of a sharded tensor held by this rank.
struct Shard {
  // Global offsets of the shard's origin, one per dimension.
  std::vector<int64_t> offsets;
  // The shard's data; tensor.sizes is the box's extent.
  TensorView tensor;
};

struct ShardedTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> global_size;
  // This rank's shards; may be empty (a rank holding none of the tensor).
  std::vector<Shard> local_shards;
};

using StateValue = std::variant<TensorView, ShardedTensor, std::string>;
using StateDict = std::map<std::string, StateValue>;

}  // namespace rocksdcp

#endif  // ROCKSDCP_STATE_DICT_H_
