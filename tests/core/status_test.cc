#include "rocksdcp/status.h"

#include <memory>
#include <string>

#include "test_util.h"

namespace rocksdcp {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_THAT(s.message(), IsEmpty());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s, Status::OK());
}

TEST(StatusTest, FactoriesSetCodeAndPredicate) {
  struct Case {
    Status status;
    StatusCode code;
    bool (Status::*is)() const;
    const char* name;
  };
  const Case cases[] = {
      {Status::NotFound("m"), StatusCode::kNotFound, &Status::IsNotFound,
       "NotFound"},
      {Status::Corruption("m"), StatusCode::kCorruption, &Status::IsCorruption,
       "Corruption"},
      {Status::InvalidArgument("m"), StatusCode::kInvalidArgument,
       &Status::IsInvalidArgument, "InvalidArgument"},
      {Status::IOError("m"), StatusCode::kIOError, &Status::IsIOError,
       "IOError"},
      {Status::AlreadyExists("m"), StatusCode::kAlreadyExists,
       &Status::IsAlreadyExists, "AlreadyExists"},
      {Status::Busy("m"), StatusCode::kBusy, &Status::IsBusy, "Busy"},
      {Status::FailedPrecondition("m"), StatusCode::kFailedPrecondition,
       &Status::IsFailedPrecondition, "FailedPrecondition"},
      {Status::NotSupported("m"), StatusCode::kNotSupported,
       &Status::IsNotSupported, "NotSupported"},
      {Status::Aborted("m"), StatusCode::kAborted, &Status::IsAborted,
       "Aborted"},
      {Status::ResourceExhausted("m"), StatusCode::kResourceExhausted,
       &Status::IsResourceExhausted, "ResourceExhausted"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_TRUE((c.status.*c.is)());
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_EQ(StatusCodeName(c.code), c.name);
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
    // Exactly one predicate holds.
    int holds = 0;
    for (const Case& other : cases) holds += (c.status.*other.is)() ? 1 : 0;
    EXPECT_EQ(holds, 1);
  }
  EXPECT_EQ(Status::Internal("m").code(), StatusCode::kInternal);
  EXPECT_EQ(StatusCodeName(StatusCode::kInternal), "Internal");
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
}

TEST(StatusTest, OkCodeDropsMessage) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_THAT(s.message(), IsEmpty());
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(Status::NotFound("a"), Status::NotFound("a"));
  EXPECT_FALSE(Status::NotFound("a") == Status::NotFound("b"));
  EXPECT_FALSE(Status::NotFound("a") == Status::IOError("a"));
}

TEST(StatusTest, WithContextPrefixesMessageAndKeepsCode) {
  Status s = Status::IOError("disk full").WithContext("writing 'w'");
  EXPECT_THAT(s, StatusIs(StatusCode::kIOError, Eq("writing 'w': disk full")));
  Status twice = s.WithContext("save");
  EXPECT_EQ(twice.message(), "save: writing 'w': disk full");
}

TEST(StatusTest, WithContextOnOkStaysOk) {
  Status s = Status::OK().WithContext("anything");
  EXPECT_TRUE(s.ok());
  EXPECT_THAT(s.message(), IsEmpty());
}

TEST(ResultTest, HoldsValue) {
  Result<int> r(7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(r.value(), 7);
  EXPECT_TRUE(r.status().ok());
}

TEST(ResultTest, HoldsError) {
  Result<int> r(Status::NotFound("gone"));
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r, StatusIs(StatusCode::kNotFound, Eq("gone")));
}

TEST(ResultTest, OkStatusWithoutValueBecomesInternal) {
  Result<int> r(Status::OK());
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r, StatusIs(StatusCode::kInternal, HasSubstr("OK Status")));
}

TEST(ResultTest, MovesOutMoveOnlyValue) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(**r, 3);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 3);
}

TEST(ResultTest, ArrowReachesMembers) {
  Result<std::string> r(std::string("abc"));
  EXPECT_EQ(r->size(), 3u);
}

// Helpers for the macro tests: each records how far it got.
Status Step(bool fail, int* reached, int mark) {
  *reached = mark;
  return fail ? Status::IOError("step " + std::to_string(mark)) : Status::OK();
}

Status TwoSteps(bool fail_first, int* reached) {
  ROCKSDCP_RETURN_IF_ERROR(Step(fail_first, reached, 1));
  ROCKSDCP_RETURN_IF_ERROR(Step(false, reached, 2));
  return Status::OK();
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  ROCKSDCP_ASSIGN_OR_RETURN(int half, Half(x));
  ROCKSDCP_ASSIGN_OR_RETURN(half, Half(half));  // Assigns to an lvalue too.
  return half;
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtFirstError) {
  int reached = 0;
  EXPECT_THAT(TwoSteps(true, &reached),
              StatusIs(StatusCode::kIOError, Eq("step 1")));
  EXPECT_EQ(reached, 1);
  reached = 0;
  EXPECT_OK(TwoSteps(false, &reached));
  EXPECT_EQ(reached, 2);
}

TEST(StatusMacrosTest, AssignOrReturnAssignsOrPropagates) {
  ASSERT_OK_AND_ASSIGN(int q, Quarter(12));
  EXPECT_EQ(q, 3);
  EXPECT_THAT(Quarter(6),
              StatusIs(StatusCode::kInvalidArgument, Eq("3 is odd")));
  EXPECT_THAT(Quarter(5),
              StatusIs(StatusCode::kInvalidArgument, Eq("5 is odd")));
}

}  // namespace
}  // namespace rocksdcp
