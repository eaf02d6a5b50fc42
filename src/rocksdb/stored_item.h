// A saved item as a checkpoint's metadata describes it, and the checks a
// load makes on it and on its pieces.

#ifndef ROCKSDCP_SRC_ROCKSDB_STORED_ITEM_H_
#define ROCKSDCP_SRC_ROCKSDB_STORED_ITEM_H_

#include <rocksdb/status.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "format/catalog_codec.h"
#include "format/piece_codec.h"
#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"
#include "rocksdcp/tensor.h"

namespace rocksdcp {

// A saved item, as a checkpoint's metadata describes it.
struct StoredItem {
  format::StorageInfo info;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> chunk_sizes;
};

// The checks a load makes, shared with Store::Verify. Their errors are
// Corruption without context: the caller prefixes where (checkpoint, item,
// piece).
//
// Finds `index` in `metadata` and checks its storage info: its kind (a
// tensor chunk if `tensor`, else bytes) and, for a tensor, that the
// metadata has the chunk and that the info's length and piece size fit
// the chunk's elements.
Result<StoredItem> LookupStoredItem(const Metadata& metadata,
                                    const MetadataIndex& index, bool tensor);
// Verifies what a Get or MultiGet of piece `p` of `item` (at `key`)
// returned: that it is there, DecodePiece's checks (the FlatBuffers
// verifier, identifier, version and XXH3), and the piece's header against
// the metadata. `out` points into `value`.
Status VerifyPieceValue(const rocksdb::Status& s, std::string_view value,
                        std::string_view key, const MetadataIndex& index,
                        const StoredItem& item, uint32_t p,
                        format::DecodedPiece* out);

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_STORED_ITEM_H_
