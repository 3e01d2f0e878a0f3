// Library benchmarks (Google Benchmark): simulate, one scheduling tick, the state codec and
// status rows, on plans from gen_plan's shape. Run: build/bench_core
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "gpuq/core/outlook.h"
#include "gpuq/core/queue_state.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/plan_diff.h"
#include "gpuq/core/plan_text.h"
#include "gpuq/live/plan_watch.h"
#include "gpuq/live/queue.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "gpuq/live/state_codec.h"
#include "gpuq/views/text.h"

namespace {

using namespace gpuq;

std::string run_capture(const std::string& cmd) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  char buf[1 << 16];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  return out;
}

struct Fixture {
  Plan plan;
  State state;
  std::string state_text;
  std::string plan_text;
};

// A plan of n jobs and a state with 40% done and 8 running, made by gen_plan.
const Fixture& fixture(long n) {
  static std::map<long, std::unique_ptr<Fixture>> cache;
  auto& f = cache[n];
  if (!f) {
    f = std::make_unique<Fixture>();
    std::string state_path = "/tmp/gpuq-bench-state-" + std::to_string(n) + ".json";
    std::string text = run_capture(std::string(GEN_PLAN) + " " + std::to_string(n) + " 1 --state " + state_path);
    f->plan = std::move(*parse_plan(text, "bench.json", {0, 1, 2, 3, 4, 5, 6, 7}).plan);
    f->plan_text = std::move(text);
    f->state_text = run_capture("cat " + state_path);
    f->state = std::move(*parse_state(f->state_text, "bench.state.json").state);
  }
  return *f;
}

void BM_Simulate(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(simulate(f.plan, {}));
}
BENCHMARK(BM_Simulate)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// A tick of `run` on a state read afresh: the engine loaded from the state, then its tick.
void BM_DecideTick(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  RunOptions opt;
  const FileTable files([](const std::string&) { return true; });
  for (auto _ : st) {
    QueueState q(f.plan, opt, f.state, 1e9, "run");
    ev::Tick t;
    t.now = 1e9;
    t.files = &files;
    benchmark::DoNotOptimize(q.apply(t, 1e9).launches.size());
  }
}
BENCHMARK(BM_DecideTick)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// The parts of `gpuq status`, each alone.
void BM_PlanParse(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(parse_plan(f.plan_text, "p", {0, 1, 2, 3, 4, 5, 6, 7}));
}
BENCHMARK(BM_PlanParse)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_StateDecode(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(parse_state(f.state_text, "s"));
}
BENCHMARK(BM_StateDecode)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_StateEncode(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(dump_state(f.state));
}
BENCHMARK(BM_StateEncode)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_Outlook(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  RunOptions opt;
  for (auto _ : st)
    benchmark::DoNotOptimize(make_outlook(f.plan, f.state, opt, 1e9, 0xff, FileTable([](const std::string&) { return false; })));
}
BENCHMARK(BM_Outlook)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_LiveSimulate(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  RunOptions opt;
  LiveStart start = live_start(f.plan, f.state, opt, 1e9, 0xff, FileTable([](const std::string&) { return false; }));
  for (auto _ : st) benchmark::DoNotOptimize(simulate(f.plan, {}, &start));
}
BENCHMARK(BM_LiveSimulate)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_StateDecodeEncode(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(dump_state(*parse_state(f.state_text, "s").state));
}
BENCHMARK(BM_StateDecodeEncode)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_StatusRows(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(format_status(f.plan, f.state, 1e9, true));
}
BENCHMARK(BM_StatusRows)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace

// What `run` does when the plan file of n jobs changes: the look at the file (stat, read,
// parse and check: PlanFile::look) and the diff against the plan in use.
void BM_Reload(benchmark::State& st) {
  const Fixture& f = fixture(st.range(0));
  std::string path = "/tmp/gpuq-bench-reload-" + std::to_string(st.range(0)) + ".json";
  std::string edited = *append_job_text(f.plan_text, R"({"id": "added_by_the_edit", "script": "x.sh"})", nullptr);
  double now = 1e9;
  for (auto _ : st) {
    st.PauseTiming();
    PlanFile file(path, {0, 1, 2, 3, 4, 5, 6, 7}, f.plan_text);
    if (FILE* out = std::fopen(path.c_str(), "w")) {
      std::fwrite(edited.data(), 1, edited.size(), out);
      std::fclose(out);
    }
    st.ResumeTiming();
    PlanLook l = file.look(now += 10);
    if (!l.plan) st.SkipWithError("the edit did not load");
    else benchmark::DoNotOptimize(diff_plans(f.plan, *l.plan));
  }
  std::remove(path.c_str());
}
BENCHMARK(BM_Reload)->Arg(10000)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
