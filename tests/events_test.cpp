// run wakes on events, not on its timer: each test runs with --poll 3600, so anything
// that happens within seconds happened because of an event.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gpuq::test;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

struct Slow {
  TempDir d;
  std::map<std::string, std::string> env = fake_nvidia_smi(d, idle_gpus(1));
  Slow() {
    // With GATE set, a job goes on only once the test has made that file.
    d.write("job.sh", "echo \"$GPUQ_JOB_ID\" >> started\n"
                      "if [ -n \"$GATE\" ]; then while [ ! -e \"$GATE\" ]; do sleep 0.01; done; else sleep 0.3; fi\n");
  }
  std::unique_ptr<Background> run() const {
    return start_gpuq({"run", "--plan", "plan.json", "--poll", "3600"}, d.path(), env);
  }
  // With `run` going and `id` pending for want of the file `path` alone (in a folder that
  // exists), creating the file must start the job at once, and the plan then ends. Whenever
  // the file comes (before run watches the folder or after), run must see it.
  void file_appears_and_starts(Background& run, const std::string& id, const std::string& path) const {
    EXPECT_EQ(status_of(id), "pending");
    d.write(path, "");
    auto r = run.wait(kPatience);
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(status_of(id), "done");
  }
  std::string status_of(const std::string& id) const {
    std::string text = d.read("plan.state.json");
    if (text.empty()) return "none";
    json s = json::parse(text);
    return s.contains(id) ? s[id]["status"].get<std::string>() : "pending";
  }
};

}  // namespace

TEST(Events, AJobThatExitsWakesRunAtOnce) {
  Slow q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1},
                             {"id": "b", "script": "job.sh", "gpus": 1, "deps": ["a"]}])");
  auto run = q.run();
  auto r = run->wait(kPatience);  // with only the timer, b would start an hour after a ends
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
  EXPECT_EQ(lines_of(q.d.path() + "/started"), (std::vector<std::string>{"a", "b"}));
}

TEST(Events, AnAdoptedJobThatExitsWakesRunAtOnce) {
  Slow q;
  q.env["GATE"] = "gate";
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1},
                             {"id": "b", "script": "job.sh", "gpus": 1, "deps": ["a"]}])");
  auto first = q.run();
  ASSERT_TRUE(eventually([&] { return q.status_of("a") == "running"; }));
  first->signal(SIGTERM);  // a keeps running; the next run adopts it (it is not that run's child)
  EXPECT_EQ(first->wait(kPatience).status, 0);
  auto state_inode = [&] {
    struct stat st;
    return ::stat((q.d.path() + "/plan.state.json").c_str(), &st) == 0 ? st.st_ino : 0;
  };
  const ino_t before = state_inode();
  auto second = q.run();
  // Once the second run has saved its first tick it has adopted a; then a ends.
  ASSERT_TRUE(eventually([&] { return state_inode() != before; }));
  q.d.write("gate", "");
  auto r = second->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("done a"));
  EXPECT_THAT(r.out, HasSubstr("all jobs finished"));
}

TEST(Events, ARetryFromAnotherShellIsActedOnAtOnce) {
  Slow q;
  q.d.write("plan.json", R"([{"id": "a", "script": "job.sh", "gpus": 1}, {"id": "b", "script": "job.sh", "gpus": 1}])");
  ASSERT_EQ(run_gpuq({"hold", "--plan", "plan.json", "b"}, q.d.path(), q.env).status, 0);
  auto run = q.run();
  ASSERT_TRUE(eventually([&] { return q.status_of("a") == "done"; }));
  EXPECT_EQ(q.status_of("b"), "held");
  ASSERT_EQ(run_gpuq({"retry", "--plan", "plan.json", "b"}, q.d.path(), q.env).status, 0);
  auto r = run->wait(kPatience);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(q.status_of("b"), "done");
}

TEST(Events, AFileDepCreatedInAnExistingFolderStartsItsJobAtOnce) {
  Slow q;
  q.d.write("ckpt/.keep", "");
  q.d.write("plan.json", R"([{"id": "eval", "script": "job.sh", "gpus": 1, "deps": ["file:ckpt/READY"]}])");
  auto run = q.run();
  ASSERT_TRUE(eventually([&] { return q.status_of("eval") == "pending"; }));  // run has made its first tick
  q.file_appears_and_starts(*run, "eval", "ckpt/READY");
}

TEST(Events, AFileDepOfAJobWhoseOtherDepJustFinishedStartsItAtOnce) {
  // run watches folders only for jobs that wait for files alone; once `train` is done,
  // `eval` is one of them, and the file's arrival must still wake run.
  Slow q;
  q.d.write("ckpt/.keep", "");
  q.d.write("plan.json", R"([{"id": "train", "script": "job.sh", "gpus": 1},
    {"id": "eval", "script": "job.sh", "gpus": 1, "deps": ["train", "file:ckpt/READY"]}])");
  auto run = q.run();
  ASSERT_TRUE(eventually([&] { return q.status_of("train") == "done"; }));
  q.file_appears_and_starts(*run, "eval", "ckpt/READY");
}
