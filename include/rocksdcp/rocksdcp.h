// The whole public API of rocksdcp in one include.

#ifndef ROCKSDCP_ROCKSDCP_H_
#define ROCKSDCP_ROCKSDCP_H_

#include "rocksdcp/async_checkpoint.h"
#include "rocksdcp/checkpoint.h"
#include "rocksdcp/collective.h"
#include "rocksdcp/device_profile.h"
#include "rocksdcp/diff.h"
#include "rocksdcp/metadata.h"
#include "rocksdcp/planner.h"
#include "rocksdcp/state_dict.h"
#include "rocksdcp/status.h"
#include "rocksdcp/storage.h"
#include "rocksdcp/store.h"
#include "rocksdcp/store_options.h"
#include "rocksdcp/store_reports.h"
#include "rocksdcp/tensor.h"

#endif  // ROCKSDCP_ROCKSDCP_H_
