// `run --slurm`: what gpuq asks of Slurm's commands (sbatch's arguments, a job's name,
// time and nice) and what they answer (squeue, sacct), and the plans it refuses.
#include "gpuq/live/slurm.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "gpuq/live/proc.h"

extern char** environ;

namespace gpuq {

namespace {

// An integer that squeue/sacct JSON gives plain or as {"set": true, "number": N} (23.02+).
std::optional<long long> json_int(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_object() && v.contains("number") && v["number"].is_number_integer() && v.value("set", true))
    return v["number"].get<long long>();
  return std::nullopt;
}

// A state that squeue gives as a string (22.05) or a list of strings (23.02+).
std::string json_state(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && !v.empty() && v[0].is_string()) return v[0].get<std::string>();
  return "";
}

// The "jobs" list of `command --json`: for each job with an id, its id and name, and the
// rest read by `more`.
std::vector<QueueJob> read_jobs(const std::string& text, const char* command,
                                const std::function<void(const nlohmann::json&, QueueJob&)>& more) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("jobs") || !j["jobs"].is_array())
    throw std::runtime_error(fmt::format("{} --json: not a JSON object with a \"jobs\" list", command));
  std::vector<QueueJob> out;
  for (const auto& job : j["jobs"]) {
    QueueJob s;
    auto id = job.contains("job_id") ? json_int(job["job_id"]) : std::nullopt;
    if (!id) continue;
    s.id = *id;
    s.name = job.value("name", "");
    more(job, s);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<QueueJob> parse_squeue_json(const std::string& text) {
  return read_jobs(text, "squeue", [](const nlohmann::json& job, QueueJob& s) {
    s.state = job.contains("job_state") ? json_state(job["job_state"]) : "";
    s.reason = job.value("state_reason", "");
    auto start = job.contains("start_time") ? json_int(job["start_time"]) : std::nullopt;
    if (start && *start > 0 && s.state != "PENDING") s.start = static_cast<double>(*start);
  });
}

std::vector<QueueJob> parse_sacct_json(const std::string& text) {
  return read_jobs(text, "sacct", [](const nlohmann::json& job, QueueJob& s) {
    if (job.contains("state") && job["state"].is_object() && job["state"].contains("current"))
      s.state = json_state(job["state"]["current"]);
    if (job.contains("exit_code") && job["exit_code"].is_object() && job["exit_code"].contains("return_code"))
      s.exit = json_int(job["exit_code"]["return_code"]);
  });
}

std::vector<QueueJob> parse_squeue_lines(const std::string& text) {
  std::vector<QueueJob> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    // ID|NAME|STATE|REASON: the name may hold '|', so the id is cut from the front, state and reason from the back.
    size_t a = line.find('|'), c = line.rfind('|');
    size_t b = c == std::string::npos || c == 0 ? std::string::npos : line.rfind('|', c - 1);
    if (a == std::string::npos || b == std::string::npos || b <= a) continue;
    QueueJob s;
    try {
      s.id = std::stoll(line.substr(0, a));
    } catch (const std::exception&) {
      continue;
    }
    s.name = line.substr(a + 1, b - a - 1);
    s.state = line.substr(b + 1, c - b - 1);
    s.reason = line.substr(c + 1);
    out.push_back(std::move(s));
  }
  return out;
}

std::string slurm_job_name(const std::string& tag, const std::string& id, long long attempt) {
  return fmt::format("gpuq-{}-{}-{}", tag, id, attempt);
}

std::string plan_tag(const std::string& plan_path) {
  std::string name = std::filesystem::path(plan_path).filename().string();
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) name.resize(name.size() - 5);
  return name;
}

long long slurm_minutes(const Job& job, double margin) {
  // With a time limit, a minute more than it: gpuq's own limit (its warning signal, its
  // "timeout" outcome) comes first, Slurm's is the backstop.
  double minutes = job.time_limit_hours ? *job.time_limit_hours * 60 + 1 : job.est_hours * margin * 60;
  return std::max(1LL, static_cast<long long>(std::ceil(minutes - 1e-9)));
}

std::vector<long long> slurm_nice(const Plan& plan) {
  std::vector<double> values;
  for (const Job& j : plan.jobs) values.push_back(j.priority);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::vector<long long> out;
  for (const Job& j : plan.jobs)
    out.push_back(std::lower_bound(values.begin(), values.end(), j.priority) - values.begin());
  return out;
}

std::vector<std::string> slurm_host_args(const Job& job, double mem_gib) {
  std::vector<std::string> a;
  if (job.cpus) a.push_back(fmt::format("--cpus-per-task={}", job.cpus));
  if (mem_gib <= 0) mem_gib = job.mem_gib;
  if (mem_gib > 0) a.push_back(fmt::format("--mem={}M", static_cast<long long>(std::ceil(mem_gib * 1024.0 - 1e-6))));
  return a;
}

std::vector<std::string> sbatch_args(const SlurmOptions& o, const std::string& name, long long gpus, long long minutes,
                                     long long nice, const std::string& log, const std::string& reservation,
                                     const std::string& wrap, long long shards) {
  std::vector<std::string> a{"--parsable", "--hold", "-J", name};
  if (shards > 0)  // a packed job: its GiB in shards of one GPU, which others share
    a.push_back(fmt::format("--gres=shard:{}", shards));
  else if (gpus > 0)
    a.push_back(fmt::format("--gres=gpu:{}", gpus));
  a.push_back(fmt::format("--time={}", minutes));
  a.push_back(fmt::format("--nice={}", nice));
  a.insert(a.end(), {"-o", log, "--open-mode=append", "--chdir", o.chdir});
  if (!o.partition.empty()) a.push_back("--partition=" + o.partition);
  if (!o.account.empty()) a.push_back("--account=" + o.account);
  if (!o.qos.empty()) a.push_back("--qos=" + o.qos);
  if (!reservation.empty()) a.push_back("--reservation=" + reservation);
  a.insert(a.end(), o.sbatch_args.begin(), o.sbatch_args.end());
  a.push_back("--wrap=" + wrap);
  return a;
}

CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& extra_env) {
  CommandResult r;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    r.err = std::strerror(errno);
    return r;
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    r.err = std::strerror(errno);
    ::close(out[0]), ::close(out[1]);
    return r;
  }
  std::vector<std::string> env_text;
  std::set<std::string> replaced;
  for (const auto& [k, v] : extra_env) env_text.push_back(k + "=" + v), replaced.insert(k);
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!replaced.count(kv.substr(0, kv.find('=')))) env_text.push_back(kv);
  }
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = 0;
  int rc = spawn_process(&pid, argv[0].c_str(), true, {devnull, out[1], err[1]}, 0, argv, &env_text);
  ::close(out[1]), ::close(err[1]);
  if (devnull >= 0) ::close(devnull);
  if (rc == 0) {
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[65536];
    while (open_fds > 0) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (int k = 0; k < 2; ++k) {
        if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          fds[k].fd = -1;
          --open_fds;
        } else {
          (k == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
        }
      }
    }
    int wst = 0;
    while (::waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
    }
    r.status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
  } else {
    r.err = fmt::format("cannot run {}: {}", argv[0], std::strerror(rc));
  }
  ::close(out[0]), ::close(err[0]);
  return r;
}

long long parse_shards_per_gpu(std::string_view text) {
  long long best = 0;
  size_t at = 0;
  while ((at = text.find("Gres=", at)) != std::string_view::npos) {
    if (at > 0 && !std::isspace(static_cast<unsigned char>(text[at - 1]))) {  // not GresDrain= etc.
      at += 5;
      continue;
    }
    at += 5;
    size_t end = text.find_first_of(" \t\n", at);
    std::string_view gres = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    // "gpu:a100:8(S:0-1),shard:a100:64": each item is NAME[:TYPE]:COUNT[(...)]
    long long gpus = 0, shards = 0;
    size_t from = 0;
    while (from <= gres.size()) {
      size_t comma = from, depth = 0;
      for (; comma < gres.size(); ++comma) {  // a comma inside "(S:0,1)" is not a separator
        if (gres[comma] == '(') ++depth;
        else if (gres[comma] == ')' && depth) --depth;
        else if (gres[comma] == ',' && !depth) break;
      }
      std::string_view item = gres.substr(from, comma - from);
      item = item.substr(0, item.find('('));
      size_t colon = item.find(':'), last = item.rfind(':');
      if (colon != std::string_view::npos) {
        std::string_view name = item.substr(0, colon), count = item.substr(last + 1);
        long long n = 0;
        auto [p, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
        if (ec == std::errc() && p == count.data() + count.size()) {
          if (name == "gpu") gpus += n;
          if (name == "shard") shards += n;
        }
      }
      from = comma + 1;
    }
    if (gpus > 0 && shards > 0) {
      long long per = shards / gpus;
      if (per > 0 && (best == 0 || per < best)) best = per;
    }
  }
  return best;
}

long long slurm_shards_per_gpu() {
  CommandResult r = run_command({"scontrol", "show", "node", "-o"});
  return r.status == 0 ? parse_shards_per_gpu(r.out) : 0;
}

long long shards_for(double gib, const SlurmShards& s) {
  if (s.per_gpu <= 0) return 0;
  double one = s.gpu_gib * (1 - s.headroom / 100) / static_cast<double>(s.per_gpu);
  return std::max(1LL, static_cast<long long>(std::ceil(gib / one - 1e-9)));
}

std::string slurm_plan_problem(const Plan& plan, const std::optional<SlurmShards>& shards) {
  size_t packed = 0;
  const Job* first = nullptr;
  for (const Job& j : plan.jobs)
    if (j.gpu_mem_gib && j.gpus > 0 && packed++ == 0) first = &j;
  if (first && shards && shards->per_gpu <= 0)
    return fmt::format("{} job{} ({}{}) give{} gpu_mem_gib, to share GPUs by memory, and this cluster has no GPU "
                       "shards (no \"shard\" in the Gres of `scontrol show node`; its admin sets them up in gres.conf): "
                       "leave gpu_mem_gib out of the plan you hand to Slurm, and each job takes its GPUs whole",
                       packed, packed == 1 ? "" : "s", first->id, packed == 1 ? "" : ", ...", packed == 1 ? "s" : "");
  if (first && shards)
    for (const Job& j : plan.jobs) {
      if (!j.gpu_mem_gib || j.gpus <= 0) continue;
      if (j.gpus > 1)
        return fmt::format("job {} gives gpu_mem_gib {:g} on each of {} GPUs, and Slurm gives a job its GPU shards on "
                           "one GPU: leave gpu_mem_gib out of it (it takes its {} GPUs whole), or make it a 1-GPU job",
                           j.id, *j.gpu_mem_gib, j.gpus, j.gpus);
      if (long long n = shards_for(*j.gpu_mem_gib, *shards); n > shards->per_gpu)
        return fmt::format("job {} gives gpu_mem_gib {:g}, {} shards of a GPU that has {} ({:g} GiB less "
                           "--gpu-mem-headroom {:g}%, {:.1f} GiB a shard): it would wait in Slurm for ever; leave "
                           "gpu_mem_gib out of it (it takes its GPU whole), or give the GPUs' memory as --gpu-mem-gib",
                           j.id, *j.gpu_mem_gib, n, shards->per_gpu, shards->gpu_gib, shards->headroom,
                           shards->gpu_gib * (1 - shards->headroom / 100) / static_cast<double>(shards->per_gpu));
    }
  for (size_t r = 0; r < plan.reservations.size(); ++r) {
    const Reservation& res = plan.reservations[r];
    if (!res.queue_reservation.empty()) continue;
    std::string gpus;
    for (int g : res.gpu_list) gpus += (gpus.empty() ? "" : ", ") + std::to_string(g);
    return fmt::format("reservation #{} closes GPUs [{}] of one node, and a GPU id means nothing across a cluster's "
                       "nodes: give it \"slurm_reservation\": \"NAME\" (a reservation made in Slurm with scontrol "
                       "create reservation) or leave it out for the cluster",
                       r + 1, gpus);
  }
  return "";
}

Plan slurm_copy(const Plan& plan) {
  Plan copy = plan;
  copy.reservations.clear();
  for (auto& of : copy.reservations_of) of.clear();
  return copy;
}

std::map<std::string, std::string> slurm_reservations(const Plan& plan) {
  std::map<std::string, std::string> out;
  for (const Reservation& res : plan.reservations)
    for (size_t k : res.jobs) out[plan.jobs[k].id] = res.queue_reservation;
  return out;
}

}  // namespace gpuq
