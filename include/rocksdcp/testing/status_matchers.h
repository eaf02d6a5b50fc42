// GoogleTest support for rocksdcp's Status and Result<T>: matchers, the
// ASSERT_OK family, and printers, so that a failed expectation prints
// "NotFound: checkpoint 'x' ..." rather than the object's bytes.
//
//   EXPECT_OK(writer->Reset("step-100"));
//   EXPECT_THAT(reader->ReadMetadata(),
//               StatusIs(StatusCode::kNotFound, HasSubstr("step-100")));
//   ASSERT_OK_AND_ASSIGN(Metadata md, Save(sd, *writer, {...}));
//
// Part of rocksdcp::testing (find_package(rocksdcp COMPONENTS testing)),
// which links GoogleTest and GoogleMock.

#ifndef ROCKSDCP_TESTING_STATUS_MATCHERS_H_
#define ROCKSDCP_TESTING_STATUS_MATCHERS_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "rocksdcp/status.h"

namespace rocksdcp {
// Found by argument-dependent lookup: gtest prints a Status as its code and
// message, and a Result as its status or "OK (with a value)".
inline void PrintTo(const Status& s, std::ostream* os) { *os << s.ToString(); }
template <typename T>
void PrintTo(const Result<T>& r, std::ostream* os) {
  *os << (r.ok() ? std::string("OK (with a value)") : r.status().ToString());
}
}  // namespace rocksdcp

namespace rocksdcp::testing {

// The Status of a Status or of a Result<T>.
inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
Status GetStatus(const Result<T>& r) {
  return r.status();
}

// Matches a Status or Result whose code is `code` and whose message matches
// `message_matcher`, e.g. StatusIs(StatusCode::kNotFound, HasSubstr("x")).
MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + std::string(StatusCodeName(code))) {
  Status s = ::rocksdcp::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code && ::testing::ExplainMatchResult(
                                 message_matcher, s.message(), result_listener);
}

// Matches an OK Status, or a Result holding a value.
MATCHER(IsOk, "is OK") {
  Status s = ::rocksdcp::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.ok();
}

}  // namespace rocksdcp::testing

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::rocksdcp::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::rocksdcp::testing::IsOk())

// Evaluates a Result<T>, asserts it is OK, and moves its value into lhs,
// which may declare a variable: ASSERT_OK_AND_ASSIGN(auto x, F()).
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                    \
  ASSERT_OK_AND_ASSIGN_IMPL_(ROCKSDCP_CONCAT_(test_result_, __LINE__), lhs, \
                             rexpr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(result, lhs, rexpr) \
  auto result = (rexpr);                               \
  ASSERT_OK(result);                                   \
  lhs = std::move(result).value()

#endif  // ROCKSDCP_TESTING_STATUS_MATCHERS_H_
