// Hundreds of control commands and status calls while `run` works: no lost update, no torn read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;

TEST(Concurrency, ControlCommandsDuringRunLoseNoUpdate) {
  TempDir d;
  std::map<std::string, std::string> env = fake_nvidia_smi(d, idle_gpus(1));
  d.write("quick.sh", "sleep 0.0$((${GPUQ_JOB_ID//[!0-9]/} % 5))\n");  // 0 to 40 ms, by the job's number
  const int held = 150, churn = 60;
  json plan = json::array();
  for (int i = 0; i < churn; ++i)  // keep run busy: short jobs ending all the time
    plan.push_back({{"id", "churn" + std::to_string(i)}, {"script", "quick.sh"}, {"gpus", 0}});
  for (int i = 0; i < held; ++i)  // waiting on a gate file, so that a hold always finds them pending
    plan.push_back({{"id", "job" + std::to_string(i)}, {"script", "quick.sh"}, {"gpus", 0}, {"deps", {"file:gate"}}});
  d.write("plan.json", plan.dump());
  auto run = start_gpuq({"run", "--plan", "plan.json", "--poll", "1"}, d.path(), env);

  int status_calls = 0;
  for (int i = 0; i < held; i += 6) {
    std::vector<std::unique_ptr<Background>> batch;
    for (int k = i; k < std::min(held, i + 6); ++k) {
      batch.push_back(start_gpuq({"hold", "--plan", "plan.json", "job" + std::to_string(k)}, d.path(), env));
      batch.push_back(start_gpuq({"status", "--plan", "plan.json"}, d.path(), env));
    }
    for (size_t b = 0; b < batch.size(); ++b) {
      auto r = batch[b]->wait(kPatience);
      ASSERT_EQ(r.status, 0) << r.out << r.err;  // a torn state file would be a parse error, status 1
      if (b % 2 == 0) {
        EXPECT_THAT(r.out, HasSubstr("held job"));
      } else {
        // The counts line, e.g. {'done': 12, 'pending': 140, 'held': 58}, covers every job: a torn
        // or half-updated read would lose some. (Which statuses appear depends on timing: once
        // the churn is done and a batch's holds land first, nothing is pending.)
        auto open = r.out.find("{'"), close = r.out.find("}\n", open);
        ASSERT_NE(open, std::string::npos) << r.out;
        std::string counts = r.out.substr(open, close - open);
        int total = 0;
        for (size_t k = counts.find(": "); k != std::string::npos; k = counts.find(": ", k + 1))
          total += std::stoi(counts.substr(k + 2));
        EXPECT_EQ(total, held + churn) << counts;
        ++status_calls;
      }
    }
  }
  EXPECT_EQ(status_calls, held);
  ASSERT_TRUE(eventually([&] {
    json s = json::parse(d.read("plan.state.json"));
    for (int i = 0; i < churn; ++i)
      if (s.value("churn" + std::to_string(i), json::object()).value("status", "") != "done") return false;
    return true;
  }, kPatience));
  json s = json::parse(d.read("plan.state.json"));
  for (int i = 0; i < held; ++i) EXPECT_EQ(s["job" + std::to_string(i)]["status"], "held") << i;

  // Release them all in one command, open the gate: every job runs once and run ends.
  std::vector<std::string> retry{"retry", "--plan", "plan.json"};
  for (int i = 0; i < held; ++i) retry.push_back("job" + std::to_string(i));
  EXPECT_EQ(run_gpuq(retry, d.path(), env).status, 0);
  d.write("gate", "");
  auto r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
  s = json::parse(d.read("plan.state.json"));
  for (int i = 0; i < held; ++i) EXPECT_EQ(s["job" + std::to_string(i)]["status"], "done") << i;
}
