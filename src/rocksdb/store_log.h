// The store's info log: what RocksDB says about a store (opens, flushes,
// column families, ingests, errors), kept for a person looking into it.
//
// RocksDB's own logger writes through a WritableFileWriter, and when an
// append fails (a full disk) the Debian build asserts and aborts the
// process. A checkpoint store must never take a trainer down for a log
// line, so the store writes its log itself:
//   - <store>/LOG, appended to with plain write(2); a line that can't be
//     written is dropped (and counted), never an error;
//   - bounded: once LOG passes max_bytes it becomes LOG.old (replacing the
//     one before) and a new LOG begins, so the log takes at most
//     2 x max_bytes; the LOG.old.<time> files of RocksDB's own logger, one
//     per open, are removed when the store opens;
//   - a read-only Store logs nothing: it never writes into the store.
//
// Thread-safe: RocksDB logs from its background threads.

#ifndef ROCKSDCP_SRC_ROCKSDB_STORE_LOG_H_
#define ROCKSDCP_SRC_ROCKSDB_STORE_LOG_H_

#include <rocksdb/env.h>

#include <cstdint>
#include <memory>
#include <string>

namespace rocksdcp {

// The info log of the store in `dir`. Never fails: with no log file to be
// had, it drops every line.
std::shared_ptr<rocksdb::Logger> OpenStoreLog(const std::string& dir,
                                              uint64_t max_bytes);

// A logger that drops every line: read-only stores.
std::shared_ptr<rocksdb::Logger> NullStoreLog();

// The bound OpenStoreLog uses for a store: 4 MiB (a read-write open logs a
// few KiB, a save a few hundred bytes).
inline constexpr uint64_t kStoreLogMaxBytes = 4ull << 20;

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_STORE_LOG_H_
