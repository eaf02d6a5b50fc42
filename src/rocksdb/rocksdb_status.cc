#include "rocksdb/rocksdb_status.h"

#include <string>

namespace rocksdcp {

Status FromRocksDB(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return Status::OK();
  std::string msg(context);
  msg += ": ";
  msg += s.ToString();
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return Status::NotFound(std::move(msg));
    case rocksdb::Status::kCorruption:
      return Status::Corruption(std::move(msg));
    case rocksdb::Status::kInvalidArgument:
      return Status::InvalidArgument(std::move(msg));
    case rocksdb::Status::kNotSupported:
      return Status::NotSupported(std::move(msg));
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTryAgain:
      return Status::Busy(std::move(msg));
    default:
      return Status::IOError(std::move(msg));
  }
}

}  // namespace rocksdcp
