// Compatibility header: the Store, its options, its reports and the diff
// API, which once were all here. New code includes the header it needs.

#ifndef ROCKSDCP_ROCKSDB_STORE_H_
#define ROCKSDCP_ROCKSDB_STORE_H_

#include "rocksdcp/diff.h"
#include "rocksdcp/store.h"
#include "rocksdcp/store_options.h"
#include "rocksdcp/store_reports.h"

#endif  // ROCKSDCP_ROCKSDB_STORE_H_
