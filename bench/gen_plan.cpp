// Writes a large, realistic plan to stdout: usage gen_plan JOBS [SEED] [--state FILE].
// With --state, also writes FILE: a state in which the first 40% of the jobs
// are done, the next 8 running (pids that do not exist) and the rest pending.
// Groups of about 20 jobs: a CPU prep job, two training arms on NVLink pairs
// with mid and final evaluations waiting on their checkpoint files, a wide
// job, a sweep of short 1-GPU jobs, and a report after everything; each
// group's prep waits on the previous group's prep, and the first group's
// evaluations have GPU 7 reserved.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gen_plan JOBS [SEED]\n");
    return 2;
  }
  long n = std::atol(argv[1]);
  std::mt19937 rng(argc > 2 ? std::atoi(argv[2]) : 1);
  auto pick = [&](std::initializer_list<double> xs) { return *(xs.begin() + rng() % xs.size()); };
  std::printf("{\"jobs\": [\n");
  long made = 0;
  bool first = true;
  std::vector<std::string> ids;
  auto job = [&](const std::string& body) {
    ids.push_back(body.substr(7, body.find('"', 7) - 7));
    std::printf("%s {%s}", first ? "" : ",\n", body.c_str());
    first = false;
    ++made;
  };
  for (long g = 0; made < n; ++g) {
    std::string G = std::to_string(g);
    std::string prep = "prep_" + G;
    job("\"id\": \"" + prep + "\", \"script\": \"jobs/prep.sh\", \"gpus\": 0, \"priority\": 10, \"est_hours\": 0.5" +
        (g ? ", \"deps\": [\"prep_" + std::to_string(g - 1) + "\"]" : ""));
    std::string evals;
    for (int a = 0; a < 2 && made < n; ++a) {
      std::string arm = "train_" + G + "_" + std::to_string(a);
      char est[32];
      std::snprintf(est, sizeof est, "%g", pick({4, 6, 8, 10, 12}));
      job("\"id\": \"" + arm + "\", \"script\": \"jobs/train.sh\", \"gpus\": 2, \"priority\": 20, \"est_hours\": " + est +
          ", \"deps\": [\"" + prep + "\"], \"first_look_frac\": 0.1");
      for (const char* stage : {"mid", "final"}) {
        if (made >= n) break;
        std::string id = "eval_" + G + "_" + std::to_string(a) + "_" + stage;
        evals += (evals.empty() ? "\"after:" : ", \"after:") + id + "\"";
        job("\"id\": \"" + id + "\", \"script\": \"jobs/eval.sh\", \"gpus\": 1, \"priority\": 5, \"est_hours\": 0.5" +
            ", \"deps\": [\"file:ckpt/" + arm + "/" + stage + "/READY\"], \"produced_by\": \"" + arm + "\"" +
            (std::string(stage) == "mid" ? ", \"produced_at_frac\": 0.5" : ""));
      }
    }
    if (made < n)
      job("\"id\": \"wide_" + G + "\", \"script\": \"jobs/wide.sh\", \"gpus\": " + std::to_string(rng() % 2 ? 4 : 8) +
          ", \"priority\": 30, \"est_hours\": 4, \"deps\": [\"" + prep + "\"]");
    for (int s = 0; s < 12 && made < n; ++s) {
      char est[32];
      std::snprintf(est, sizeof est, "%g", pick({0.1, 0.25, 0.4, 0.5, 1, 2}));
      job("\"id\": \"sweep_" + G + "_" + std::to_string(s) + "\", \"script\": \"jobs/sweep.sh\", \"gpus\": 1, \"priority\": " +
          std::to_string(40 + rng() % 3 * 5) + ", \"est_hours\": " + est + ", \"deps\": [\"" + prep + "\"]");
    }
    if (made < n && !evals.empty())
      job("\"id\": \"report_" + G + "\", \"script\": \"jobs/report.sh\", \"gpus\": 0, \"priority\": 50, "
          "\"est_hours\": 0.1, \"deps\": [" + evals + "]");
  }
  std::printf("\n],\n \"reservations\": [{\"gpus\": [7], \"jobs\": [\"eval_0_0_mid\", \"eval_0_0_final\"]}]}\n");
  if (argc > 4 && std::string(argv[3]) == "--state") {
    FILE* f = std::fopen(argv[4], "w");
    if (!f) return 1;
    std::fprintf(f, "{\n");
    long done = n * 4 / 10;
    for (long i = 0; i < done + 8 && i < n; ++i)
      std::fprintf(f, "%s \"%s\": {\"status\": \"%s\", \"gpus\": [], \"pid\": %ld, \"start\": 1.0%s, \"attempts\": 0}",
                   i ? ",\n" : "", ids[i].c_str(), i < done ? "done" : "running", 4000000 + i,
                   i < done ? ", \"end\": 3601.0, \"exit\": 0" : "");
    std::fprintf(f, "\n}\n");
    std::fclose(f);
  }
  return 0;
}
