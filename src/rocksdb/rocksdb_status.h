// Converts rocksdb::Status to rocksdcp::Status at the boundary, adding the
// context a user needs (which store, which checkpoint, which item).

#ifndef ROCKSDCP_SRC_ROCKSDB_ROCKSDB_STATUS_H_
#define ROCKSDCP_SRC_ROCKSDB_ROCKSDB_STATUS_H_

#include <rocksdb/status.h>

#include <string_view>

#include "rocksdcp/status.h"

namespace rocksdcp {

// OK stays OK. Otherwise the code maps (NotFound, Corruption,
// InvalidArgument, NotSupported, Busy/TryAgain -> Busy, the rest -> IOError)
// and the message is "<context>: <rocksdb's message>".
Status FromRocksDB(const rocksdb::Status& s, std::string_view context);

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_ROCKSDB_STATUS_H_
