// What changed between two checkpoints of a Store, item by item, from the
// hashes their pieces were saved with: DiffCheckpoints reads both
// checkpoints' metadata, no tensor data.

#ifndef ROCKSDCP_DIFF_H_
#define ROCKSDCP_DIFF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/status.h"
#include "rocksdcp/store.h"

namespace rocksdcp {

// How an item of one checkpoint differs from the item of the same fqn in
// another (DiffCheckpoints).
enum class ItemChange : uint8_t {
  kUnchanged,     // Every piece's payload hashes as before.
  kChanged,       // Same dtype and shape (or a byte item either way); some
                  // pieces differ: changed_pieces of pieces.
  kAdded,         // Only in the newer checkpoint.
  kRemoved,       // Only in the older one.
  kReshaped,      // Another dtype or shape, or a tensor that became bytes or
                  // the other way round.
  kIncomparable,  // Saved in other chunks or pieces, or by a rocksdcp
                  // that did not hash pieces: load both to compare.
};
std::string_view ItemChangeName(ItemChange change);  // "unchanged", ...

struct ItemDiff {
  std::string fqn;
  ItemChange change = ItemChange::kUnchanged;
  // In the newer checkpoint (the older one's for kRemoved): its pieces and
  // payload bytes, and how many of them differ from the older one's
  // (all of them for kAdded and kReshaped; 0 for kRemoved and
  // kIncomparable).
  uint64_t pieces = 0;
  uint64_t changed_pieces = 0;
  uint64_t bytes = 0;
  uint64_t changed_bytes = 0;
};

struct CheckpointDiff {
  std::string from;
  std::string to;
  std::vector<ItemDiff> items;  // Every fqn of either, in fqn order.
};

// What changed from checkpoint `from` to checkpoint `to` of `store`, item
// by item, decided from the XXH3-128 each piece's storage info records
// when it is saved: reads both metadata values, no tensor data. The
// hashes are what the writer recorded; Verify checks them against the
// pieces. NotFound if either is not committed; Corruption if either's
// metadata is damaged.
Result<CheckpointDiff> DiffCheckpoints(Store& store, std::string_view from,
                                       std::string_view to);

}  // namespace rocksdcp

#endif  // ROCKSDCP_DIFF_H_
