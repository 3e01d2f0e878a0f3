// Command hints (issue 25, point 12): every `gpuq ...` that gpuq suggests names the plan it was
// printed for, so that pasted into the shell it acts on that plan and not on ./plan.json.
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "gpuq/core/hint.h"
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
