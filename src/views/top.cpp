// `gpuq top`'s screen from one look (views/top.h): the run, the GPUs, the jobs and the
// prediction ahead, laid out for the terminal's size.
#include "gpuq/views/top.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpuq/core/local_time.h"
#include "gpuq/views/reasons.h"

namespace gpuq {

size_t cells(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

// The first `w` cells of `s`, ending in an ellipsis when cut.
std::string fit(const std::string& s, size_t w, bool unicode) {
  if (cells(s) <= w) return s;
  if (w == 0) return "";
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80 && ++n == w) break;
    out += s[i];
  }
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0xC0) out.pop_back();  // a cut lead byte
  return out + (unicode ? "…" : "~");
}

std::string pad(const std::string& s, size_t w, bool unicode) {
  std::string t = fit(s, w, unicode);
  return t + std::string(w - std::min(w, cells(t)), ' ');
}

// A line being built, and its width so far.
struct Builder {
  ScreenLine line;
  size_t width = 0;
  Builder& add(const std::string& text, Tone tone = Tone::plain) {
    if (text.empty()) return *this;
    line.push_back({text, tone});
    width += cells(text);
    return *this;
  }
  Builder& to(size_t col) {
    if (width < col) add(std::string(col - width, ' '));
    return *this;
  }
};

// The line cut to `cols` cells.
ScreenLine clip(ScreenLine l, size_t cols, bool unicode) {
  ScreenLine out;
  size_t w = 0;
  for (Span& s : l) {
    if (w >= cols) break;
    size_t n = cells(s.text);
    if (w + n > cols) s.text = fit(s.text, cols - w, unicode), n = cells(s.text);
    w += n;
    out.push_back(std::move(s));
  }
  return out;
}

std::string bar(double frac, size_t w, bool unicode) {
  frac = std::clamp(frac, 0.0, 1.0);
  size_t full = static_cast<size_t>(std::lround(frac * static_cast<double>(w)));
  std::string s;
  for (size_t i = 0; i < w; ++i) s += i < full ? (unicode ? "█" : "#") : (unicode ? "░" : ".");
  return s;
}

std::string gpu_list(const std::vector<int>& g) {
  return fmt::format("[{}]", fmt::join(g, ","));
}

std::string short_plan(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// ---- the header ----------------------------------------------------------------------------

void header(const TopInput& in, const TopUi& ui, std::vector<ScreenLine>& out) {
  Builder b;
  b.add("gpuq top", Tone::head).add("  ").add(in.plan_arg, Tone::accent).add("   ");
  const RunSeen* r = in.run;
  if (r && r->running) {
    b.add("run ", Tone::good).add(r->pid ? fmt::format("pid {}", *r->pid) : "running");
    if (r->last_tick) b.add(fmt::format(", last tick {} ago", duration_text(std::max(0.0, in.now - *r->last_tick))));
  } else {
    b.add("no gpuq run is running on this plan: nothing starts until one does", Tone::warn);
  }
  if (r && r->paused_since) b.add("   ").add(fmt::format("paused since {} (P resumes)", local_time(*r->paused_since, in.now)), Tone::warn);
  out.push_back(std::move(b.line));

  Builder c;
  if (in.plan && in.state) {
    size_t n[6] = {};
    for (size_t j = 0; j < in.plan->jobs.size(); ++j) {
      const JobState* s = in.state->of(*in.plan, j);
      ++n[static_cast<int>(s ? s->status : Status::Pending)];
    }
    const char* names[6] = {"pending", "running", "done", "failed", "blocked", "held"};
    const Tone tones[6] = {Tone::plain, Tone::good, Tone::plain, Tone::bad, Tone::warn, Tone::warn};
    bool first = true;
    for (int k : {1, 0, 2, 3, 4, 5}) {
      if (!n[k] && k > 2) continue;
      if (!first) c.add(" · ", Tone::dim);
      first = false;
      c.add(fmt::format("{} {}", n[k], names[k]), n[k] ? tones[k] : Tone::dim);
    }
    if (in.outlook && in.outlook->finish)
      c.add("   finish ~" + local_time(*in.outlook->finish, in.now), Tone::accent);
    else if (in.outlook && !in.outlook->never.empty())
      c.add(fmt::format("   {} job(s) never start", in.outlook->never.size()), Tone::bad);
  }
  std::string clock = clock_stamp(in.now);
  if (static_cast<size_t>(ui.cols) > c.width + cells(clock) + 2) c.to(static_cast<size_t>(ui.cols) - cells(clock)).add(clock, Tone::dim);
  out.push_back(std::move(c.line));
  if (!in.problem.empty()) out.push_back({{in.problem, Tone::bad}});
  if (!in.kept_note.empty()) out.push_back({{in.kept_note, Tone::warn}});
}

// ---- the GPUs ------------------------------------------------------------------------------

std::vector<ScreenLine> gpu_lines(const TopInput& in, const TopUi& ui, size_t width) {
  std::vector<ScreenLine> out;
  std::map<int, std::vector<std::string>> mine;  // this plan's running jobs on each GPU
  if (in.state)
    for (const auto& [id, s] : in.state->entries())
      if (s.status == Status::Running && s.gpus)
        for (int g : *s.gpus) mine[g].push_back(id);
  const bool wide = width >= 70;
  for (int g : in.gpus) {
    Builder b;
    b.add(fmt::format("{:>2} ", g), Tone::head);
    std::optional<long long> used, total;
    std::optional<int> util;
    if (in.reading) {
      if (in.reading->used_mib) {
        auto it = in.reading->used_mib->find(g);
        if (it != in.reading->used_mib->end()) used = it->second;
      }
      if (auto it = in.reading->total_mib.find(g); it != in.reading->total_mib.end()) total = it->second;
      if (auto it = in.reading->util_pct.find(g); it != in.reading->util_pct.end()) util = it->second;
    }
    const size_t bw = wide ? 10 : 6;
    if (used && total && *total > 0) {
      double f = static_cast<double>(*used) / static_cast<double>(*total);
      b.add(bar(f, bw, ui.unicode), f > 0.9 ? Tone::warn : Tone::accent)
          .add(fmt::format(" {:>5.1f}/{:.0f}G", static_cast<double>(*used) / 1024, static_cast<double>(*total) / 1024));
    } else if (used) {
      b.add(pad(fmt::format("{:.1f} GiB", static_cast<double>(*used) / 1024), bw + 11, ui.unicode));
    } else {
      b.add(pad("no reading", bw + 11, ui.unicode), Tone::dim);
    }
    b.add(util ? fmt::format(" {:>3}%", *util) : "    -", util && *util > 0 ? Tone::plain : Tone::dim).add("  ");
    if (in.reading)
      if (auto it = in.reading->lost.find(g); it != in.reading->lost.end()) {
        b.add(it->second, Tone::bad);
        out.push_back(std::move(b.line));
        continue;
      }
    auto m = mine.find(g);
    auto o = in.others ? in.others->find(g) : std::map<int, std::string>::const_iterator{};
    if (m != mine.end()) b.add(fmt::format("{}", fmt::join(m->second, ", ")), Tone::good);
    else if (in.others && o != in.others->end()) {
      // "GPU 3 busy: 30000 MiB in use by ..." says the GPU again: the row names it.
      std::string why = o->second, lead = fmt::format("GPU {} busy: ", g), drained = fmt::format("GPU {} drained", g);
      if (why.rfind(drained, 0) == 0) b.add(why.substr(drained.size() - 7), Tone::bad);  // "drained (fan failing)"
      else b.add(why.rfind(lead, 0) == 0 ? why.substr(lead.size()) : why, Tone::warn);
    }
    else b.add("free", Tone::dim);
    out.push_back(std::move(b.line));
  }
  return out;
}

// ---- the list ------------------------------------------------------------------------------

struct Listed {
  TopRow row;
  int group = 0;       // 0 running, 1 waiting, 2 ended
  double key = 0;      // the order inside the group
  size_t order = 0;    // plan order, for ties
  const JobView* view = nullptr;
  const NodeHold* hold = nullptr;
  const NodeWant* want = nullptr;
};

std::vector<Listed> plan_list(const TopInput& in, const TopUi& ui) {
  std::vector<Listed> out;
  if (!in.plan || !in.outlook || !in.state) return out;
  out.reserve(in.outlook->jobs.size());
  for (const JobView& v : in.outlook->jobs) {
    const Job& j = in.plan->jobs[v.job];
    if (!ui.filter.empty() && j.id.find(ui.filter) == std::string::npos) continue;
    Listed l;
    l.row.id = j.id;
    l.row.own = in.mine;
    l.view = &v;
    l.order = v.job;
    const JobState* s = in.state->of(*in.plan, v.job);
    Status st = s ? s->status : Status::Pending;
    if (st == Status::Running) {
      l.group = 0, l.key = v.start.value_or(0), l.row.running = true;
    } else if (st == Status::Done || st == Status::Failed) {
      l.group = 2, l.key = -(s && s->end ? *s->end : 0);
    } else {
      l.group = 1, l.key = v.predicted_start.value_or(HUGE_VAL), l.row.pending = st == Status::Pending;
    }
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<Listed> node_list(const TopInput& in, const TopUi& ui) {
  std::vector<Listed> out;
  if (!in.node_users) return out;
  size_t order = 0;
  for (const NodeUser& u : *in.node_users)
    for (const NodeRun& r : u.runs) {
      if (r.gone) continue;
      const bool own = u.name == in.me && r.plan == in.plan_path;
      for (const NodeHold& h : r.holds) {
        if (!ui.filter.empty() && h.id.find(ui.filter) == std::string::npos) continue;
        Listed l{{h.id, u.name, r.plan, own, true, false}, 0, h.start, order++};
        l.hold = &h;
        out.push_back(std::move(l));
      }
      for (const NodeWant& w : r.wants) {
        if (!ui.filter.empty() && w.id.find(ui.filter) == std::string::npos) continue;
        Listed l{{w.id, u.name, r.plan, own, false, true}, 1, -w.priority, order++};
        l.want = &w;
        out.push_back(std::move(l));
      }
    }
  return out;
}

std::vector<Listed> listed(const TopInput& in, const TopUi& ui) {
  std::vector<Listed> l = ui.screen == TopScreenKind::node ? node_list(in, ui) : plan_list(in, ui);
  // Sorted by index, then moved once (a Listed carries three strings).
  std::vector<uint32_t> at(l.size());
  for (uint32_t i = 0; i < at.size(); ++i) at[i] = i;
  std::sort(at.begin(), at.end(), [&](uint32_t x, uint32_t y) {
    const Listed& a = l[x];
    const Listed& b = l[y];
    if (a.group != b.group) return a.group < b.group;
    if (a.key != b.key) return a.key < b.key;
    if (a.order != b.order) return a.order < b.order;
    return x < y;
  });
  std::vector<Listed> out;
  out.reserve(l.size());
  for (uint32_t i : at) out.push_back(std::move(l[i]));
  return out;
}

std::string job_cores(const Job& j) {
  std::string s;
  if (j.cpus) s += fmt::format("{}c", j.cpus);
  if (j.mem_gib > 0) s += fmt::format("{}{:g}G", s.empty() ? "" : " ", j.mem_gib);
  return s;
}

// One job of the plan: marker, id, status, then what it is doing or why it waits.
ScreenLine plan_row(const TopInput& in, const TopUi& ui, const Listed& l, size_t idw, bool chosen) {
  const JobView& v = *l.view;
  const Job& j = in.plan->jobs[v.job];
  const JobState* s = in.state->of(*in.plan, v.job);
  Status st = s ? s->status : Status::Pending;
  const bool u = ui.unicode;
  const size_t cols = static_cast<size_t>(ui.cols);
  Builder b;
  const char* mark = st == Status::Running ? (u ? "▶" : ">") : st == Status::Done ? (u ? "✓" : "+")
                     : st == Status::Failed ? (u ? "✗" : "x") : (u ? "·" : "-");
  Tone tone = st == Status::Running ? Tone::good : st == Status::Failed ? Tone::bad
              : st == Status::Done ? Tone::dim : st == Status::Pending ? Tone::plain : Tone::warn;
  b.add(std::string(mark) + " ", tone).add(pad(j.id, idw, u), chosen ? Tone::chosen : Tone::plain).add(" ");
  b.add(pad(status_name(st), 8, u), tone);
  if (st == Status::Running) {
    b.add(pad(v.gpus.empty() ? "-" : gpu_list(v.gpus), 10, u));
    const double elapsed = v.elapsed;
    std::optional<double> frac = v.progress;
    bool estimated = !frac;
    if (!frac && j.est_hours > 0) frac = elapsed / (j.est_hours * 3600);
    size_t bw = cols >= 120 ? 20 : 10;
    b.add(bar(frac.value_or(0), bw, u), estimated ? Tone::dim : Tone::accent)
        .add(fmt::format(" {}{:>3.0f}%", estimated ? "~" : " ", std::min(frac.value_or(0), 9.99) * 100))
        .add("  " + pad(duration_text(elapsed), 7, u));
    if (v.predicted_finish) b.add(" ETA " + local_time(*v.predicted_finish, in.now), v.overdue ? Tone::warn : Tone::plain);
    if (v.overdue) b.add(" overdue", Tone::warn);
    if (v.hung) b.add(" hung?", Tone::bad);
    if (v.idle_for) b.add(fmt::format(" idle {:.0f}m", std::floor(*v.idle_for / 60)), Tone::warn);
    if (cols >= 120) {
      std::string c = job_cores(j);
      if (!c.empty()) b.add("  " + c, Tone::dim);
    }
  } else if (st == Status::Done || st == Status::Failed) {
    std::string what;
    if (s && s->end) what = "at " + local_time(*s->end, in.now);
    if (s && s->start && s->end) what += ", ran " + duration_text(std::max(0.0, *s->end - *s->start));
    if (st == Status::Failed) {
      if (v.exit) what += fmt::format(", exit {}", *v.exit);
      if (v.outcome) what += fmt::format(" ({})", *v.outcome);
    }
    b.add(what, st == Status::Failed ? Tone::bad : Tone::dim);
  } else {
    b.add(pad(fmt::format("{} GPU{}", j.gpus, j.gpus == 1 ? "" : "s"), 10, u));
    if (v.predicted_start) b.add(pad("start ~" + local_time(*v.predicted_start, in.now), 17, u), Tone::accent);
    else if (v.fate_at >= 0) b.add(pad("never starts", 17, u), Tone::bad);
    else b.add(pad("", 17, u));
    if (b.width + 4 < cols) b.add(" " + why_text(*in.plan, *in.state, *in.outlook, v), Tone::dim);
  }
  return b.line;
}

ScreenLine node_row(const TopInput& in, const TopUi& ui, const Listed& l, size_t idw, bool chosen) {
  const bool u = ui.unicode;
  Builder b;
  b.add(std::string(l.row.running ? (u ? "▶" : ">") : (u ? "·" : "-")) + " ", l.row.running ? Tone::good : Tone::plain);
  b.add(pad(l.row.user, 10, u), l.row.user == in.me ? Tone::accent : Tone::plain);
  b.add(pad(l.row.id, idw, u), chosen ? Tone::chosen : Tone::plain).add(" ");
  b.add(pad(short_plan(l.row.plan), 14, u), Tone::dim);
  if (l.hold) {
    const NodeHold& h = *l.hold;
    b.add(pad(gpu_list(h.gpus), 10, u)).add(pad(duration_text(std::max(0.0, in.now - h.start)), 8, u));
    if (h.est_hours > 0) b.add(" ends ~" + local_time(h.start + h.est_hours * 3600, in.now));
    if (h.preemptible) b.add(" preemptible", Tone::dim);
    if (h.preempting) b.add(" being preempted", Tone::warn);
  } else if (l.want) {
    const NodeWant& w = *l.want;
    b.add(pad(fmt::format("{} GPU{}", w.gpus, w.gpus == 1 ? "" : "s"), 10, u))
        .add(fmt::format("waiting, priority {:g}, est {}", w.priority, duration_text(w.est_hours * 3600)), Tone::dim);
  }
  if (!l.row.own) b.add("  (not yours)", Tone::dim);
  return b.line;
}

// ---- ahead: the prediction, one row per GPU ------------------------------------------------

std::vector<ScreenLine> ahead_lines(const TopInput& in, const TopUi& ui, size_t width) {
  std::vector<ScreenLine> out;
  if (!in.plan || !in.outlook) return out;
  const Simulation& sim = in.outlook->sim;
  double last = 0;
  for (const SimRow& r : sim.rows) last = std::max(last, r.end);
  double hours = 1;
  for (double h : {0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 12.0, 24.0, 48.0})
    if ((hours = h) >= last) break;
  const size_t label = 4;
  const size_t w = width > label + 10 ? width - label : 10;
  const double per = hours / static_cast<double>(w);
  const bool u = ui.unicode;
  out.push_back(Builder{}.add(fmt::format("Ahead: the next {}, as predicted now", hours < 1 ? fmt::format("{:g} min", hours * 60) : fmt::format("{:g} h", hours)), Tone::head).line);
  // Each GPU's columns: which row runs there at the column's middle. One pass over the rows
  // that start within the window (a 10,000-job plan has thousands after it).
  std::map<int, std::vector<int>> at;
  for (int g : in.gpus) at[g].assign(w, -1);
  for (size_t k = 0; k < sim.rows.size(); ++k) {
    const SimRow& r = sim.rows[k];
    if (r.start >= hours || r.end <= 0) continue;
    // Columns c with (c + 0.5) * per in [start, end).
    const double lo = std::ceil(r.start / per - 0.5), hi = std::ceil(r.end / per - 0.5);
    const size_t c0 = static_cast<size_t>(std::max(0.0, lo)), c1 = static_cast<size_t>(std::clamp(hi, 0.0, static_cast<double>(w)));
    for (int g : r.gpus)
      if (auto it = at.find(g); it != at.end())
        for (size_t c = c0; c < c1; ++c) it->second[c] = static_cast<int>(k);
  }
  for (int g : in.gpus) {
    Builder b;
    b.add(fmt::format("{:>2} ", g), Tone::head).add(u ? "│" : "|", Tone::dim);
    const std::vector<int>& cols = at[g];
    size_t c = 0;
    int shade = 0;
    while (c < w) {
      size_t e = c;
      while (e < w && cols[e] == cols[c]) ++e;
      const size_t n = e - c;
      if (cols[c] < 0) {
        std::string gap;
        for (size_t i = c; i < e; ++i) gap += (i * 4) % w < 4 ? (u ? "·" : ".") : " ";
        b.add(gap, Tone::dim);
      } else {
        const SimRow& r = sim.rows[static_cast<size_t>(cols[c])];
        const std::string& id = in.plan->jobs[r.job].id;
        b.add(pad(n > 1 ? id : "", n, u), r.start <= 1e-9 ? Tone::bar_now : (shade++ % 2 ? Tone::bar_b : Tone::bar_a));
      }
      c = e;
    }
    out.push_back(std::move(b.line));
  }
  // The axis: now, then a clock time every quarter.
  Builder a;
  a.add(std::string(label - 1, ' ')).add(u ? "└" : "+", Tone::dim).add("now", Tone::accent);
  for (int q = 1; q < 4; ++q) {
    size_t col = label + static_cast<size_t>(q) * w / 4;
    std::string t = local_time(in.now + hours * 3600 * q / 4, in.now);
    if (a.width + 1 < col) a.to(col).add(t, Tone::dim);
  }
  out.push_back(std::move(a.line));
  return out;
}

std::vector<ScreenLine> help_lines(const TopUi& ui) {
  std::vector<ScreenLine> out;
  out.push_back({{"gpuq top: keys", Tone::head}});
  out.push_back({});
  for (const auto& [k, what] : top_keys()) out.push_back({{pad(k, 14, ui.unicode), Tone::accent}, {what}});
  out.push_back({});
  out.push_back({{"Any key goes back.", Tone::dim}});
  return out;
}

std::vector<ScreenLine> log_lines(const TopUi& ui) {
  std::vector<ScreenLine> out;
  out.push_back({{ui.log_title, Tone::head}, {"   (following; q or Esc goes back)", Tone::dim}});
  const size_t room = ui.rows > 2 ? static_cast<size_t>(ui.rows) - 2 : 0;
  size_t first = ui.log.size() > room ? ui.log.size() - room : 0;
  for (size_t i = first; i < ui.log.size(); ++i) out.push_back({{ui.log[i]}});
  return out;
}

ScreenLine footer(const TopUi& ui) {
  if (!ui.prompt.empty()) return {{ui.prompt, Tone::warn}};
  if (ui.typing_filter) return {{"filter: ", Tone::accent}, {ui.filter + "_"}, {"   (Enter keeps it, Esc clears it)", Tone::dim}};
  if (!ui.message.empty()) return {{ui.message, ui.message_tone}};
  return {{ui.screen == TopScreenKind::node ? "q quit  ? help  n plan  / filter  arrows move  (actions: your plan's jobs)"
                                            : "q quit  ? help  k kill  h hold  r retry  p preempt  R requeue  l log  "
                                              "P pause  n node  / filter",
           Tone::dim}};
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& top_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"Up/Down j", "move the selection (j down; `k` kills, after asking, as in htop)"},
      {"PgUp/PgDn", "a page up or down"},
      {"g / G", "the first / the last job"},
      {"mouse wheel", "scroll, where the terminal sends it"},
      {"/", "filter the jobs by id (Enter keeps the filter, Esc clears it)"},
      {"Enter or l", "the selected job's log, followed as `gpuq logs -f` does (q or Esc back)"},
      {"k", "kill the selected running job (asks y/n)"},
      {"h", "hold the selected pending, failed or blocked job"},
      {"r", "retry the selected failed, blocked, held or done job"},
      {"p", "preempt the selected running job (asks y/n)"},
      {"R", "requeue the selected running job (asks y/n)"},
      {"P", "pause the plan, or resume it"},
      {"n", "the whole node: every user's jobs (again: back to the plan)"},
      {"?", "this help"},
      {"q", "quit (Ctrl-C too)"},
  };
  return keys;
}

std::vector<TopRow> top_rows(const TopInput& in, const TopUi& ui) {
  std::vector<TopRow> out;
  for (Listed& l : listed(in, ui)) out.push_back(std::move(l.row));
  return out;
}

// The panels above the list: the GPUs, and (where there is room) the prediction ahead, beside
// them on a wide screen, under them on a tall one.
static void add_panels(const TopInput& in, const TopUi& ui, TopScreen& sc, size_t rows, size_t cols) {
  const size_t fixed = sc.lines.size() + 2;  // + the list's title and the footer
  std::vector<ScreenLine> gpus = gpu_lines(in, ui, cols >= 140 ? 70 : cols);
  Builder gpu_title;
  gpu_title.add("GPUs", Tone::head).add("   memory, utilization, who holds it", Tone::dim);
  if (in.reading && !in.reading->problem.empty()) gpu_title.add("   no reading: " + in.reading->problem, Tone::warn);
  gpus.insert(gpus.begin(), std::move(gpu_title.line));
  std::vector<ScreenLine> ahead;
  const bool side = cols >= 140;
  if (ui.screen == TopScreenKind::plan) ahead = ahead_lines(in, ui, side ? cols - 72 : cols);
  const size_t min_list = 6;
  size_t gpu_room = rows > fixed + min_list ? rows - fixed - min_list : 1;
  if (gpus.size() > gpu_room) gpus.resize(std::max<size_t>(gpu_room, 1));
  if (side) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      Builder b;
      b.line = clip(gpus[i], 70, ui.unicode);
      for (const Span& s : b.line) b.width += cells(s.text);
      if (i < ahead.size()) {
        b.to(72);
        for (const Span& s : ahead[i]) b.add(s.text, s.tone);
      }
      sc.lines.push_back(std::move(b.line));
    }
    for (size_t i = gpus.size(); i < ahead.size() && sc.lines.size() + 1 + min_list < rows; ++i) {
      Builder b;
      b.to(72);
      for (const Span& s : ahead[i]) b.add(s.text, s.tone);
      sc.lines.push_back(std::move(b.line));
    }
  } else {
    for (ScreenLine& l : gpus) sc.lines.push_back(std::move(l));
    if (!ahead.empty() && sc.lines.size() + ahead.size() + 2 + min_list <= rows)
      for (ScreenLine& l : ahead) sc.lines.push_back(std::move(l));
  }
}

// The list of jobs, the chosen one marked and kept in view (ui.selected, ui.scroll).
static void add_list(const TopInput& in, TopUi& ui, TopScreen& sc, size_t rows, size_t cols) {
  std::vector<Listed> list = listed(in, ui);
  size_t idw = 4;
  for (const Listed& l : list) idw = std::max(idw, cells(l.row.id));
  idw = std::min<size_t>(idw, cols >= 120 ? 32 : 18);
  Builder title;
  title.add(ui.screen == TopScreenKind::node ? "Every user's jobs" : "Jobs", Tone::head)
      .add(fmt::format("   {} shown", list.size()), Tone::dim);
  if (!ui.filter.empty()) title.add(fmt::format("   filter \"{}\"", ui.filter), Tone::accent);
  sc.lines.push_back(std::move(title.line));
  const size_t room = rows > sc.lines.size() + 1 ? rows - sc.lines.size() - 1 : 0;
  sc.list_height = static_cast<int>(room);
  sc.selected = list.size();
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].row.id == ui.selected && (ui.screen != TopScreenKind::node || list[i].row.user == ui.selected_user)) sc.selected = i;
  if (sc.selected == list.size() && !list.empty()) sc.selected = 0;
  if (!list.empty()) {
    ui.selected = list[sc.selected].row.id;
    ui.selected_user = list[sc.selected].row.user;
    long sel = static_cast<long>(sc.selected);
    if (sel < ui.scroll) ui.scroll = sel;
    if (room > 0 && sel >= ui.scroll + static_cast<long>(room)) ui.scroll = sel - static_cast<long>(room) + 1;
    ui.scroll = std::clamp(ui.scroll, 0L, std::max(0L, static_cast<long>(list.size()) - static_cast<long>(room)));
  } else {
    ui.scroll = 0;
    if (room > 0)
      sc.lines.push_back({{in.plan || ui.screen == TopScreenKind::node
                               ? (ui.filter.empty() ? "no jobs" : "no job's id contains \"" + ui.filter + "\"")
                               : "no plan to show",
                           Tone::dim}});
  }
  for (size_t i = static_cast<size_t>(ui.scroll); i < list.size() && i < static_cast<size_t>(ui.scroll) + room; ++i) {
    const bool chosen = i == sc.selected;
    ScreenLine l = ui.screen == TopScreenKind::node ? node_row(in, ui, list[i], idw, chosen) : plan_row(in, ui, list[i], idw, chosen);
    if (chosen) {  // the whole row, to the screen's edge, as htop marks it
      size_t w = 0;
      for (Span& s : l) s.tone = Tone::chosen, w += cells(s.text);
      if (w < cols) l.push_back({std::string(cols - w, ' '), Tone::chosen});
    }
    sc.lines.push_back(std::move(l));
  }
  for (Listed& l : list) sc.rows.push_back(std::move(l.row));
}

TopScreen top_screen(const TopInput& in, TopUi& ui) {
  TopScreen sc;
  const size_t cols = static_cast<size_t>(std::max(ui.cols, 1));
  const size_t rows = static_cast<size_t>(std::max(ui.rows, 1));
  auto finish = [&] {
    if (sc.lines.size() >= rows) sc.lines.resize(rows - 1);
    while (sc.lines.size() + 1 < rows) sc.lines.emplace_back();
    sc.lines.push_back(footer(ui));
    for (ScreenLine& l : sc.lines) l = clip(std::move(l), cols, ui.unicode);
    if (sc.lines.size() > rows) sc.lines.erase(sc.lines.begin(), sc.lines.begin() + static_cast<long>(sc.lines.size() - rows));
  };
  if (ui.screen == TopScreenKind::help) {
    sc.lines = help_lines(ui);
    finish();
    return sc;
  }
  if (ui.screen == TopScreenKind::log) {
    sc.lines = log_lines(ui);
    finish();
    return sc;
  }
  header(in, ui, sc.lines);
  if (ui.screen == TopScreenKind::node) {
    Builder b;
    b.add("The node", Tone::head).add(in.node_dir.empty() ? "" : "  " + in.node_dir, Tone::dim);
    sc.lines.push_back(std::move(b.line));
    if (!in.node_problem.empty()) sc.lines.push_back({{in.node_problem, Tone::warn}});
  }
  add_panels(in, ui, sc, rows, cols);
  add_list(in, ui, sc, rows, cols);
  finish();
  return sc;
}

}  // namespace gpuq
