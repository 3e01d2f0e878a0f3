// The job ids completion offers: a command's actionable jobs first, then the rest, in plan order.
#include <gtest/gtest.h>

#include "gpuq/core/job_choices.h"
#include "gpuq/live/state_codec.h"
#include "test_util.h"

using namespace gpuq;

namespace {

const char* kPlan = R"([
  {"id": "a_done", "script": "s.sh", "gpus": 1, "est_hours": 1},
  {"id": "b_running", "script": "s.sh", "gpus": 1, "est_hours": 1},
  {"id": "c_failed", "script": "s.sh", "gpus": 1, "est_hours": 1},
  {"id": "d_blocked", "script": "s.sh", "gpus": 1, "est_hours": 1, "deps": ["c_failed"]},
  {"id": "e_held", "script": "s.sh", "gpus": 1, "est_hours": 1},
  {"id": "f_pending", "script": "s.sh", "gpus": 1, "est_hours": 1}
])";

const char* kState = R"({"a_done": {"status": "done", "exit": 0, "start": 1, "end": 2},
  "b_running": {"status": "running", "gpus": [0], "pid": 123, "start": 1},
  "c_failed": {"status": "failed", "exit": 1, "start": 1, "end": 2},
  "d_blocked": {"status": "blocked"}, "e_held": {"status": "held"}})";

std::vector<std::string> ids(const std::vector<JobChoice>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(c.id);
  return out;
}

}  // namespace

TEST(JobChoices, ActionableJobsFirstThenTheRestInPlanOrder) {
  Plan plan = test::plan_of(kPlan);
  State state = *parse_state(kState, "s").state;
  using V = std::vector<std::string>;
  EXPECT_EQ(ids(job_choices(plan, state, "kill", "")),
            (V{"b_running", "a_done", "c_failed", "d_blocked", "e_held", "f_pending"}));
  EXPECT_EQ(ids(job_choices(plan, state, "retry", "")),
            (V{"c_failed", "d_blocked", "e_held", "a_done", "b_running", "f_pending"}));
  EXPECT_EQ(ids(job_choices(plan, state, "hold", "")),
            (V{"c_failed", "d_blocked", "f_pending", "a_done", "b_running", "e_held"}));
  EXPECT_EQ(ids(job_choices(plan, state, "logs", "")),
            (V{"a_done", "b_running", "c_failed", "d_blocked", "e_held", "f_pending"}));
}

TEST(JobChoices, OnlyIdsThatStartWithThePrefixWithTheirStatus) {
  Plan plan = test::plan_of(kPlan);
  State state = *parse_state(kState, "s").state;
  auto cs = job_choices(plan, state, "retry", "e");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].id, "e_held");
  EXPECT_EQ(cs[0].status, Status::Held);
  EXPECT_TRUE(job_choices(plan, state, "kill", "zz").empty());
  EXPECT_TRUE(job_choices(plan, state, "kill", "a_done_and_more").empty());
}

TEST(JobChoices, AJobWithoutAnEntryIsPending) {
  Plan plan = test::plan_of(kPlan);
  State empty;
  auto cs = job_choices(plan, empty, "hold", "");
  ASSERT_EQ(cs.size(), 6u);
  for (const auto& c : cs) EXPECT_EQ(c.status, Status::Pending) << c.id;
  // Every job may be held: plan order.
  EXPECT_EQ(ids(cs), (std::vector<std::string>{"a_done", "b_running", "c_failed", "d_blocked", "e_held", "f_pending"}));
  // None may be killed (nothing runs): plan order too.
  EXPECT_EQ(ids(job_choices(plan, empty, "kill", "")),
            (std::vector<std::string>{"a_done", "b_running", "c_failed", "d_blocked", "e_held", "f_pending"}));
}
