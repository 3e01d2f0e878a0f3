#include "gpuq/plan_cache.h"
#include "gpuq/async.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>

#include "gpuq/store.h"

namespace gpuq {

namespace {

// Bump whenever the file's layout or what parse_plan makes of a text changes.
constexpr uint32_t kVersion = 3;  // 3: text_hash in four lanes
constexpr std::string_view kMagic = "gpuq plan cache\n";

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i32(int32_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads what Writer wrote; any overrun or bad value makes it fail, and the cache is ignored.
class Reader {
 public:
  explicit Reader(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }
  uint8_t u8() { return get<uint8_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  int32_t i32() { return get<int32_t>(); }
  double f64() { return get<double>(); }
  std::string_view str() {
    uint32_t n = u32();
    if (!ok_ || static_cast<size_t>(end_ - p_) < n) return fail();
    std::string_view s(p_, n);
    p_ += n;
    return s;
  }
  /// A count of items each at least `min_bytes` long: more than the rest could hold is damage.
  size_t count(size_t min_bytes) {
    uint64_t n = u64();
    if (!ok_ || n > static_cast<uint64_t>(end_ - p_) / min_bytes) {
      fail();
      return 0;
    }
    return static_cast<size_t>(n);
  }
  const char* pos() const { return p_; }
  /// Goes on to `p`, which must lie between here and the end.
  void seek(const char* p) {
    if (p < p_ || p > end_) fail();
    else p_ = p;
  }
  std::string_view fail() {
    ok_ = false;
    p_ = end_;
    return {};
  }

 private:
  // A value as Writer laid it out (the machine's own byte order: the cache never leaves it).
  template <typename T>
  T get() {
    T v{};
    if (static_cast<size_t>(end_ - p_) < sizeof v) {
      fail();
      return v;
    }
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return v;
  }
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

// The cache keeps the files of the kCacheFiles plans written last (plans in temporary
// folders would otherwise pile up, a few MB each).
constexpr size_t kCacheFiles = 16;

void prune_cache(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("plan-", 0) != 0 || !e.is_regular_file(ec)) continue;
    files.emplace_back(e.last_write_time(ec), e.path());
  }
  if (files.size() <= kCacheFiles) return;
  std::sort(files.begin(), files.end());
  for (size_t k = 0; k + kCacheFiles < files.size(); ++k) fs::remove(files[k].second, ec);
}

void patch(Writer& w, size_t at, uint64_t v) { std::memcpy(w.out().data() + at, &v, sizeof v); }

// One job as encode_plan_cache wrote it; false when it is not one (n jobs, node_size GPUs).
bool decode_job(Reader& r, Job& j, size_t n, size_t node_size) {
  auto job_ref = [&](uint64_t k) {
    if (k >= n) r.fail();
    return static_cast<size_t>(k);
  };
  j.id = r.str();
  j.script = r.str();
  j.gpus = r.i32();
  j.priority = r.f64();
  j.est_hours = r.f64();
  j.est_given = r.u8() != 0;
  j.deps.resize(r.count(13));
  for (Dep& d : j.deps) {
    uint8_t kind = r.u8();
    if (kind > static_cast<uint8_t>(Dep::Kind::File)) r.fail();
    d.kind = static_cast<Dep::Kind>(kind);
    d.target = r.str();
    d.job = r.u64();
    if (d.kind != Dep::Kind::File) job_ref(d.job);
  }
  uint64_t producer = r.u64();
  if (producer != ~uint64_t{0}) j.produced_by = job_ref(producer);
  j.produced_at_frac = r.f64();
  bool has_first = r.u8() != 0;
  double first = r.f64();
  if (has_first) j.first_look_frac = first;
  return r.ok() && valid_job_id(j.id) && j.gpus >= 0 && j.gpus <= static_cast<int>(node_size);
}

// Jobs [from, to) of `plan`, decoded from exactly the bytes of `r`.
bool decode_jobs(Reader r, Plan& plan, size_t from, size_t to, size_t node_size) {
  for (size_t i = from; i < to; ++i)
    if (!decode_job(r, plan.jobs[i], plan.jobs.size(), node_size)) return false;
  return r.ok() && r.at_end();
}

void write_gpus(Writer& w, const std::vector<int>& gpus) {
  w.u64(gpus.size());
  for (int g : gpus) w.i32(g);
}

}  // namespace

namespace {

// text_hash a piece at a time: eight bytes at a time through a multiply-xorshift mix, in
// four independent lanes so that the multiplies overlap (about 7 GB/s, against 4 for one
// lane: status hashes the plan text and the cache file each time); the length goes in first.
class TextHasher {
 public:
  explicit TextHasher(uint64_t size) {
    uint64_t seed = size * k ^ 0x2545F4914F6CDD1Dull;
    for (int l = 0; l < 4; ++l) h_[l] = seed + static_cast<uint64_t>(l);
  }
  /// Takes the whole 32-byte blocks of data[0, n); returns how many bytes that is.
  size_t blocks(const char* data, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
      for (int l = 0; l < 4; ++l) h_[l] = mix(h_[l], word(data + i + 8 * l));
    return i;
  }
  /// Takes the last bytes (any number) and gives the hash.
  uint64_t finish(const char* data, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) h_[0] = mix(h_[0], word(data + i));
    uint64_t tail = 0;
    std::memcpy(&tail, data + i, n - i);
    uint64_t x = mix(h_[0], tail);
    for (int l = 1; l < 4; ++l) x = mix(x, h_[l]);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 31);
  }

 private:
  static constexpr uint64_t k = 0x9E3779B97F4A7C15ull;
  static uint64_t word(const char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  static uint64_t mix(uint64_t x, uint64_t w) {
    x = (x ^ w) * k;
    return x ^ (x >> 32);
  }
  uint64_t h_[4];
};

// The TextId of the `size` bytes that `fd` reads, through a buffer that stays in cache
// (the 14 MB of a 100,000-job plan are not kept: only a stale cache needs them).
// nullopt when it cannot be read, or is not `size` bytes long by the end.
std::optional<TextId> file_text_id(int fd, uint64_t size) {
  TextHasher h(size);
  std::vector<char> buf(256 << 10);
  size_t have = 0;
  uint64_t total = 0;
  while (true) {
    ssize_t got = ::read(fd, buf.data() + have, buf.size() - have);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return std::nullopt;
    if (got == 0) break;
    have += static_cast<size_t>(got);
    total += static_cast<uint64_t>(got);
    size_t used = h.blocks(buf.data(), have);
    std::memmove(buf.data(), buf.data() + used, have - used);
    have -= used;
  }
  if (total != size) return std::nullopt;
  return TextId{size, h.finish(buf.data(), have)};
}

}  // namespace

uint64_t text_hash(std::string_view text) {
  TextHasher h(text.size());
  size_t done = h.blocks(text.data(), text.size());
  return h.finish(text.data() + done, text.size() - done);
}

std::string encode_plan_cache(const PlanLoad& load, TextId text, const std::vector<int>& gpus) {
  const Plan& plan = *load.plan;
  Writer w;
  w.raw(kMagic.data(), kMagic.size());
  w.u32(kVersion);
  w.u64(text.size);
  w.u64(text.hash);
  write_gpus(w, gpus);
  w.u64(load.warnings.size());
  for (const auto& x : load.warnings) w.str(x);
  w.u64(plan.jobs.size());
  // Where the second half of the jobs starts and where the jobs end (filled in below): the
  // reader decodes the halves on two cores.
  size_t halves_at = w.out().size();
  w.u64(0);
  w.u64(0);
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    if (i == plan.jobs.size() / 2) patch(w, halves_at, w.out().size());
    const Job& j = plan.jobs[i];
    w.str(j.id);
    w.str(j.script);
    w.i32(j.gpus);
    w.f64(j.priority);
    w.f64(j.est_hours);
    w.u8(j.est_given);
    w.u64(j.deps.size());
    for (const Dep& d : j.deps) {
      w.u8(static_cast<uint8_t>(d.kind));
      w.str(d.target);
      w.u64(d.job);
    }
    w.u64(j.produced_by ? *j.produced_by : ~uint64_t{0});
    w.f64(j.produced_at_frac);
    w.u8(j.first_look_frac.has_value());
    w.f64(j.first_look_frac.value_or(0));
  }
  if (plan.jobs.empty()) patch(w, halves_at, w.out().size());
  patch(w, halves_at + 8, w.out().size());
  w.u64(plan.reservations.size());
  for (const Reservation& r : plan.reservations) {
    w.u64(r.gpus);
    write_gpus(w, r.gpu_list);
    w.u64(r.jobs.size());
    for (size_t m : r.jobs) w.u64(m);
  }
  w.u64(plan.by_rank.size());  // the ready order, to spare the sort
  for (uint32_t j : plan.by_rank) w.u32(j);
  w.u64(text_hash(w.out()));  // the file's own checksum, over everything before it
  return std::move(w.out());
}

std::optional<PlanLoad> decode_plan_cache(std::string_view blob, TextId text, const std::vector<int>& gpus) {
  if (blob.size() < kMagic.size() + 8 || blob.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  std::string_view body = blob.substr(0, blob.size() - 8);
  uint64_t sum;
  std::memcpy(&sum, blob.data() + body.size(), 8);
  if (sum != text_hash(body)) return std::nullopt;
  Reader r(body.substr(kMagic.size()));
  if (r.u32() != kVersion || r.u64() != text.size || r.u64() != text.hash) return std::nullopt;
  size_t ngpus = r.count(4);
  if (ngpus != gpus.size()) return std::nullopt;
  for (int g : gpus)
    if (r.i32() != g) return std::nullopt;
  PlanLoad out;
  out.warnings.resize(r.count(4));
  for (auto& x : out.warnings) x = r.str();
  Plan plan;
  size_t n = r.count(40);
  uint64_t mid = r.u64(), end = r.u64();
  const char* jobs_at = r.pos();
  if (!r.ok() || mid < static_cast<uint64_t>(jobs_at - blob.data()) || mid > end || end > body.size()) return std::nullopt;
  plan.jobs.resize(n);
  // The second half on another core; each half must fill its bytes exactly.
  const size_t half = n / 2;
  auto second = on_another_core([&plan, r2 = Reader(body.substr(mid, end - mid)), half, n, size = gpus.size()] {
    return decode_jobs(r2, plan, half, n, size);
  });
  bool first_ok = decode_jobs(Reader(std::string_view(jobs_at, blob.data() + mid - jobs_at)), plan, 0, half, gpus.size());
  auto id_of = [&](size_t k) -> const std::string& { return plan.jobs[k].id; };
  plan.index.reserve(n);
  for (size_t i = 0; i < half && first_ok; ++i)
    if (plan.index.find_or_insert(plan.jobs[i].id, i, id_of) != IdIndex::npos) first_ok = false;
  if (!second.get() || !first_ok) return std::nullopt;
  for (size_t i = half; i < n; ++i)
    if (plan.index.find_or_insert(plan.jobs[i].id, i, id_of) != IdIndex::npos) return std::nullopt;
  r.seek(blob.data() + end);
  auto job_ref = [&](uint64_t k) {
    if (k >= n) r.fail();
    return static_cast<size_t>(k);
  };
  plan.reservations.resize(r.count(24));
  plan.reservations_of.assign(n, {});
  for (size_t k = 0; k < plan.reservations.size() && r.ok(); ++k) {
    Reservation& res = plan.reservations[k];
    res.gpus = r.u64();
    res.gpu_list.resize(r.count(4));
    for (int& g : res.gpu_list) g = r.i32();
    res.jobs.resize(r.count(8));
    for (size_t& m : res.jobs) {
      m = job_ref(r.u64());
      if (r.ok()) plan.reservations_of[m].push_back(k);
    }
  }
  if (r.count(4) != n) return std::nullopt;
  plan.by_rank.resize(n);
  plan.rank_of.assign(n, UINT32_MAX);
  for (size_t k = 0; k < n && r.ok(); ++k) {
    uint32_t j = r.u32();
    if (j >= n || plan.rank_of[j] != UINT32_MAX) return std::nullopt;  // not a permutation
    plan.by_rank[k] = j;
    plan.rank_of[j] = static_cast<uint32_t>(k);
  }
  if (!r.ok() || !r.at_end()) return std::nullopt;
  out.plan = std::move(plan);
  return out;
}

std::string plan_cache_path(const std::string& plan_path) {
  std::string dir;
  if (const char* d = std::getenv("GPUQ_CACHE_DIR")) {
    if (!*d) return "";  // set and empty: no cache
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') {
    dir = std::string(x) + "/gpuq";
  } else if (const char* h = std::getenv("HOME"); h && *h == '/') {
    dir = std::string(h) + "/.cache/gpuq";
  } else {
    return "";
  }
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(plan_path, ec);
  if (ec) return "";
  std::string name = abs.lexically_normal().string();
  return fmt::format("{}/plan-{:016x}.bin", dir, text_hash(name));
}

PlanLoad load_plan_cached(const std::string& path, const std::vector<int>& node_gpus) {
  // A long plan is first hashed as it is read, without keeping it: a valid cache spares
  // both the parse and the 14 MB buffer of a 100,000-job plan.
  std::string cache;
  std::optional<TextId> id;
  if (int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) >= kPlanCacheBytes) {
      cache = plan_cache_path(path);
      if (!cache.empty()) id = file_text_id(fd, static_cast<uint64_t>(st.st_size));
    }
    ::close(fd);
  }
  if (id) {
    try {
      if (auto blob = read_file(cache, true))
        if (auto hit = decode_plan_cache(*blob, *id, node_gpus)) return std::move(*hit);
    } catch (const std::exception&) {
      // unreadable, a symbolic link, or no thread to decode it with: parse the plan instead
    }
  }
  std::optional<std::string> text;
  try {
    text = read_file(path);
  } catch (const StoreError&) {
    return load_plan(path, node_gpus);  // it words the error
  }
  if (!text) return load_plan(path, node_gpus);
  cache = text->size() >= kPlanCacheBytes ? plan_cache_path(path) : "";
  PlanLoad load = parse_plan(*text, path, node_gpus);
  if (!cache.empty() && load.plan) {
    // Written beside, then renamed over: a reader sees the old file or the new, never half.
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(cache).parent_path(), ec);
    std::string tmp = fmt::format("{}.tmp.{}", cache, ::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      bool ok = true;
      try {
        write_all(fd, encode_plan_cache(load, text_id(*text), node_gpus), tmp);  // the text parsed
      } catch (const StoreError&) {
        ok = false;  // a full disk, say: no cache this time
      }
      ok = ::close(fd) == 0 && ok;
      if (!ok || ::rename(tmp.c_str(), cache.c_str()) != 0) ::unlink(tmp.c_str());
      prune_cache(std::filesystem::path(cache).parent_path());
    }
  }
  return load;
}

}  // namespace gpuq
