// The staging directories under <store>/staging, where writers put their
// SST files until the coordinator commits them.

#ifndef ROCKSDCP_SRC_ROCKSDB_STORE_STAGING_H_
#define ROCKSDCP_SRC_ROCKSDB_STORE_STAGING_H_

#include <rocksdb/file_system.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/status.h"

namespace rocksdcp {

// The staging directory of one save, under <store>/staging: the escaped id
// (so a person can tell whose files they are) and the writer's save id.
std::string StagingDirName(std::string_view id, std::string_view save_id);

// The lock file a writer holds while it uses `staging_dir`: GC, in any
// process, removes only staging directories whose lock it can take.
std::string StagingLockPath(const std::string& staging_dir);

// Appends the paths of the regular files under `path` (itself, if it is
// one; nothing if it does not exist) to *files and their sizes to *bytes.
Status ListFilesUnder(rocksdb::FileSystem& fs, const std::string& path,
                      std::vector<std::string>* files, uint64_t* bytes);

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_STORE_STAGING_H_
