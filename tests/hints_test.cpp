// Command hints (issue 25, point 12): every `gpuq ...` that gpuq suggests names the plan it was
// printed for, so that pasted into the shell it acts on that plan and not on ./plan.json.
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "gpuq/core/hint.h"
#include "gpuq/core/job_words.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

// Sets the hint flags for one test, and puts back what was there.
struct HintFlags {
  std::string was = hint_flags();
  explicit HintFlags(std::string flags) { set_hint_flags(std::move(flags)); }
  ~HintFlags() { set_hint_flags(was); }
};

// The first `gpuq ...` hint in `text` (without its backquotes), or "".
std::string first_hint(const std::string& text) {
  std::smatch m;
  static const std::regex kHint("`(gpuq [^`]*)`");
  return std::regex_search(text, m, kHint) ? m[1].str() : "";
}

// Runs `command` as a user who pasted it would: bash, in `cwd`, with gpuq on the PATH.
Output paste(const std::string& command, const TempDir& bin, const std::string& cwd,
             std::map<std::string, std::string> env) {
  fs::path link = fs::path(bin.path()) / "gpuq";
  if (!fs::exists(link)) fs::create_symlink(fs::absolute(gpuq_binary()), link);
  env["PATH"] = bin.path() + ":" + std::getenv("PATH");
  return run({"bash", "-c", command}, cwd, env);
}

constexpr const char* kPlan = R"([{"id": "train_beta", "script": "job.sh", "gpus": 1},
  {"id": "eval", "script": "job.sh", "gpus": 1, "deps": ["train_beta"]}])";

}  // namespace

TEST(Hints, AWordTheShellWouldSplitOrExpandIsQuoted) {
  EXPECT_EQ(shell_word("train_lr=1e-4_seed=0"), "train_lr=1e-4_seed=0");
  EXPECT_EQ(shell_word("runs/comp.json"), "runs/comp.json");
  EXPECT_EQ(shell_word("my plan.json"), "'my plan.json'");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_word("$HOME"), "'$HOME'");
  EXPECT_EQ(shell_word(""), "''");
}

TEST(Hints, AHintCarriesThePlansFlagsBeforeItsWords) {
  {
    HintFlags none("");
    EXPECT_EQ(hint("kill", {"train_beta"}), "`gpuq kill train_beta`");
    EXPECT_EQ(hint("resume"), "`gpuq resume`");
  }
  HintFlags comp("--plan comp.json");
  EXPECT_EQ(hint("kill", {"train_beta"}), "`gpuq kill --plan comp.json train_beta`");
  EXPECT_EQ(hint("retry", std::vector<std::string>{"a", "b c"}), "`gpuq retry --plan comp.json a 'b c'`");
  EXPECT_EQ(hint("status --all"), "`gpuq status --all --plan comp.json`");
}

// Two plans in one folder with the same job ids: a hint printed for comp.json, pasted, acts on
// comp.json's state and leaves plan.json's alone. Before, `gpuq retry train_beta` acted on plan.json.
TEST(Hints, AHintPastedIntoTheShellActsOnThePlanItWasPrintedFor) {
  PlanFolder f(2);
  TempDir bin;
  f.d.write("job.sh", "sleep 1\n");
  f.d.write("plan.json", kPlan);
  for (std::string comp : {"comp.json", "my comp.json"}) {
    SCOPED_TRACE(comp);
    f.d.write(comp, kPlan);
    std::string state = fs::path(comp).stem().string() + ".state.json";
    Output hold = f.gpuq({"hold", "train_beta"}, comp);
    ASSERT_EQ(hold.status, 0) << hold.err;
    ASSERT_EQ(f.state(state)["train_beta"]["status"], "held");
    Output st = f.gpuq({"status", "--gpus", "0,1"}, comp);
    size_t row = st.out.find("held by hand");
    ASSERT_NE(row, std::string::npos) << st.out;
    std::string h = first_hint(st.out.substr(row));
    EXPECT_THAT(h, HasSubstr("retry")) << st.out;
    EXPECT_EQ(h, first_hint(hold.out));
    Output pasted = paste(h, bin, f.d.path(), f.env);
    EXPECT_EQ(pasted.status, 0) << h << "\n" << pasted.out << pasted.err;
    EXPECT_EQ(f.state(state)["train_beta"]["status"], "pending") << h;
    EXPECT_FALSE(fs::exists(f.d.path() + "/plan.state.json")) << h << " acted on plan.json";
  }
  // The default plan needs no --plan: the hint stays short.
  Output hold = f.gpuq({"hold", "eval"}, "plan.json");
  EXPECT_EQ(first_hint(hold.out), "gpuq retry eval");
  Output given = f.gpuq({"hold", "eval"}, "./plan.json");
  EXPECT_THAT(given.out, Not(HasSubstr("--plan")));
}

// Issue 25, point 9: a sweep's id, a mistyped id, and a number spelled another way than the
// sweep writes it in its points' ids.
TEST(JobWords, NumbersInASweepPointsIdAreWrittenOneWay) {
  EXPECT_EQ(number_text(1e-3), "0.001");
  EXPECT_EQ(number_text(1e-4), "1e-4");
  EXPECT_EQ(number_text(3.0), "3");
  EXPECT_EQ(with_sweep_numbers("train_lr=1e-3_seed=0"), "train_lr=0.001_seed=0");
  EXPECT_EQ(with_sweep_numbers("train_lr=0.0001_seed=00"), "train_lr=1e-4_seed=0");
  EXPECT_EQ(with_sweep_numbers("train_opt=adam_lr=1E-3"), "train_opt=adam_lr=0.001");
  EXPECT_EQ(with_sweep_numbers("plain_id"), "plain_id");
  EXPECT_EQ(with_sweep_numbers("x=1e_y=-"), "x=1e_y=-");
}

TEST(JobWords, ASweepsIdIsEveryPointAndAnotherSpellingIsThePoint) {
  Plan plan = plan_of(R"([{"id": "prep", "script": "s"},
    {"id": "train", "script": "s", "matrix": {"lr": [1e-3, 1e-4], "seed": [0, 1]}}])");
  ASSERT_EQ(plan.jobs.size(), 5u);
  EXPECT_EQ(plan.jobs[1].id, "train_lr=0.001_seed=0");
  JobWords w = resolve_job_words(plan, {"prep", "train", "train_lr=0.001_seed=1"});
  EXPECT_EQ(w.ids, (std::vector<std::string>{"prep", "train_lr=0.001_seed=0", "train_lr=0.001_seed=1",
                                             "train_lr=1e-4_seed=0", "train_lr=1e-4_seed=1"}));
  ASSERT_EQ(w.notes.size(), 1u);
  EXPECT_THAT(w.notes[0], HasSubstr("train is a sweep: acting on its 4 points: train_lr=0.001_seed=0, "));
  w = resolve_job_words(plan, {"train_lr=1e-3_seed=0", "train_lr=0.0001_seed=1", "ghost"});
  EXPECT_EQ(w.ids, (std::vector<std::string>{"train_lr=0.001_seed=0", "train_lr=1e-4_seed=1", "ghost"}));
  ASSERT_EQ(w.notes.size(), 2u);
  EXPECT_THAT(w.notes[0], HasSubstr("train_lr=1e-3_seed=0 is train_lr=0.001_seed=0"));
  EXPECT_EQ(job_suggestion(plan, "prap"), "; did you mean \"prep\"?");
  EXPECT_EQ(job_suggestion(plan, "trian"), "; did you mean \"train\"?");
  EXPECT_EQ(job_suggestion(plan, "zzzzzzzz"), "");
}

TEST(JobWords, CommandsTakeASweepsIdAndSuggestForAMistypedOne) {
  PlanFolder f(2);
  f.d.write("job.sh", "echo hello from $GPUQ_JOB_ID\n");
  f.d.write("plan.json", R"([{"id": "prep", "script": "job.sh"},
    {"id": "ablate", "script": "job.sh", "matrix": {"lr": [1e-3, 1e-4]}}])");
  Output hold = f.gpuq({"hold", "ablate"});
  EXPECT_EQ(hold.status, 0) << hold.err;
  EXPECT_THAT(hold.out, HasSubstr("ablate is a sweep: acting on its 2 points: ablate_lr=0.001, ablate_lr=1e-4"));
  EXPECT_EQ(f.state()["ablate_lr=0.001"]["status"], "held");
  EXPECT_EQ(f.state()["ablate_lr=1e-4"]["status"], "held");
  Output typo = f.gpuq({"retry", "ablaet"});
  EXPECT_EQ(typo.status, 2);
  EXPECT_THAT(typo.err, HasSubstr("no job ablaet in plan.json; did you mean \"ablate\"?; nothing was changed"));
  Output spelled = f.gpuq({"retry", "ablate_lr=1e-3"});
  EXPECT_EQ(spelled.status, 0) << spelled.err;
  EXPECT_THAT(spelled.out, HasSubstr("ablate_lr=1e-3 is ablate_lr=0.001"));
  EXPECT_EQ(f.state()["ablate_lr=0.001"]["status"], "pending");
  Output logs = f.gpuq({"logs", "ablate"});
  EXPECT_EQ(logs.status, 2);
  EXPECT_THAT(logs.err, HasSubstr("ablate is a sweep: acting on its 2 points"));
  EXPECT_THAT(logs.err, HasSubstr("give one"));
  Output missing = f.gpuq({"logs", "prap"});
  EXPECT_THAT(missing.err, HasSubstr("no job prap in plan.json; did you mean \"prep\"?"));
}
