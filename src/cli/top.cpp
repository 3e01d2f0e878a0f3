// `gpuq top`: the plan and the node live in a terminal, and the actions a user takes from it.
//
// Each refresh is one look at the node, the one `status` takes (live/look.h: look_at, and
// node_status for the node view), and the engine's prediction over it (outlook_of); the screen
// is views/top.h's plain function of it, drawn here with ncurses. A refresh comes when inotify
// says the plan's folder (its state, its run's file, the plan) or the node directory changed,
// each second while a running job reports progress, and at most once a second; keys redraw
// the last look without looking again. Actions go through the commands' own code
// (control_plan, pause_plan), and their lines are shown at the bottom.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <curses.h>
#include <fcntl.h>
#include <langinfo.h>
#include <poll.h>
#include <pwd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <clocale>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "gpuq/core/local_time.h"
#include "gpuq/live/commands.h"
#include "gpuq/live/look.h"
#include "gpuq/views/top.h"

#include "cli.h"

namespace gpuq::cli {

namespace {

std::atomic<bool> g_stop{false};
void on_stop_signal(int) { g_stop = true; }

double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string user_name() {
  struct passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : fmt::format("uid {}", geteuid());
}

// One refresh's look: the plan's (with the engine's prediction over it) and, in the node view,
// the node directory's.
struct Seen {
  std::optional<Look> look;
  Outlook outlook;
  std::optional<NodeStatus> node;
  std::string problem;  // the look failed, or the plan has problems: said at the top
  bool progress = false;  // a running job reports progress: refresh each second
};

// What the library says on stderr while the screen is up goes to a file; its last line is
// shown at the bottom. Restored (and what was said printed) at the end.
class StderrAside {
 public:
  StderrAside() {
    file_ = std::tmpfile();
    saved_ = dup(STDERR_FILENO);
    if (file_ && saved_ >= 0) dup2(fileno(file_), STDERR_FILENO);
  }
  ~StderrAside() { restore(); }
  // stderr is the terminal's again.
  void restore() {
    std::fflush(stderr);
    if (saved_ >= 0) dup2(saved_, STDERR_FILENO), close(saved_), saved_ = -1;
    if (file_) std::fclose(file_), file_ = nullptr;
  }
  // The last line said since the previous call ("" when none).
  std::string last_line() {
    std::fflush(stderr);
    if (!file_) return "";
    struct stat st {};
    if (fstat(fileno(file_), &st) != 0 || st.st_size <= static_cast<off_t>(read_)) return "";
    std::string text(static_cast<size_t>(st.st_size) - read_, '\0');
    ssize_t n = pread(fileno(file_), text.data(), text.size(), static_cast<off_t>(read_));
    if (n <= 0) return "";
    read_ += static_cast<size_t>(n);
    text.resize(static_cast<size_t>(n));
    while (!text.empty() && text.back() == '\n') text.pop_back();
    size_t nl = text.rfind('\n');
    return nl == std::string::npos ? text : text.substr(nl + 1);
  }

 private:
  std::FILE* file_ = nullptr;
  int saved_ = -1;
  size_t read_ = 0;
};

// A log's text as lines for the screen: a carriage return keeps what follows it (a progress
// bar redrawn in place), escape sequences and other control characters are left out, a tab
// is spaces.
void add_log_text(std::vector<std::string>& lines, bool& open_line, const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!open_line) lines.emplace_back(), open_line = true;
    char c = text[i];
    if (c == '\n') {
      open_line = false;
    } else if (c == '\r') {
      if (i + 1 < text.size() && text[i + 1] != '\n') lines.back().clear();
    } else if (c == '\x1b') {  // CSI ... final byte, or ESC and one byte
      if (i + 1 < text.size() && text[i + 1] == '[') {
        i += 2;
        while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7e)) ++i;
      } else {
        ++i;
      }
    } else if (c == '\t') {
      lines.back() += "    ";
    } else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      lines.back() += c;
    }
  }
  constexpr size_t kKeep = 5000;
  if (lines.size() > kKeep) lines.erase(lines.begin(), lines.begin() + static_cast<long>(lines.size() - kKeep));
}

std::string text_of(const std::function<void(std::FILE*)>& print) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* m = open_memstream(&buf, &size);
  if (!m) return "";
  print(m);
  std::fclose(m);
  std::string s(buf, size);
  std::free(buf);
  return s;
}

class Top {
 public:
  Top(Flags& f, TopUi ui) : f_(f), ui_(std::move(ui)) {
    me_ = user_name();
    std::error_code ec;
    plan_path_ = std::filesystem::absolute(f_.plan, ec).lexically_normal().string();
    struct stat st {};
    mine_ = ::stat(f_.plan.c_str(), &st) != 0 || st.st_uid == geteuid() || geteuid() == 0;
  }

  // One look at the plan (and, in the node view, at the node directory).
  void look() {
    Seen s;
    try {
      Flags g = f_;
      LookAsk ask;
      ask.plan_when_broken = last_good_ ? &*last_good_ : nullptr;
      ask.plan_cache = &plan_cache_;
      const std::string cached = plan_cache_.key;
      Look l = look_at(g, ask);
      phase("look");
      if (l.plan) {
        if (l.report.errors.empty()) {
          // The last version that loaded, for an edit with errors (copied only when it was read again).
          if (!last_good_ || plan_cache_.key.empty() || plan_cache_.key != cached) last_good_ = *l.plan;
        } else {
          s.problem = fmt::format("{}: {} problem{}, first: {}; showing {}", f_.plan, l.report.errors.size(),
                                  l.report.errors.size() == 1 ? "" : "s", l.report.errors[0],
                                  l.kept_note.empty() ? "the plan as it was before the edit" : "the running run's version");
        }
        s.outlook = outlook_of(l, ask);
        phase("outlook");
        for (const JobView& v : s.outlook.jobs) s.progress = s.progress || (v.status == "running" && v.progress);
      } else {
        const PlanReport& r = l.report;
        s.problem = !r.not_a_plan.empty() ? fmt::format("{}: {}", f_.plan, r.not_a_plan)
                    : !r.bad_gpus.empty() ? fmt::format("{}: {}", f_.plan, r.bad_gpus)
                    : r.errors.empty()    ? fmt::format("{}: the plan does not load", f_.plan)
                                          : fmt::format("{}: {} problem{}, first: {}", f_.plan, r.errors.size(),
                                                        r.errors.size() == 1 ? "" : "s", r.errors[0]);
      }
      s.look = std::move(l);
    } catch (const BadLook&) {
      throw;
    } catch (const std::exception& e) {  // a state being replaced, a folder gone: said, and looked at again
      s.problem = e.what();
    }
    if (ui_.screen == TopScreenKind::node || node_wanted_) {
      Flags g = f_;
      s.node = node_status(g);
      phase("node");
    }
    seen_ = std::move(s);
    watch_folders();
  }

  TopInput input() const {
    TopInput in;
    in.plan_arg = f_.plan;
    in.problem = seen_.problem;
    in.me = me_;
    in.plan_path = plan_path_;
    in.mine = mine_;
    in.now = unix_now();
    if (seen_.look && seen_.look->plan) {
      const Look& l = *seen_.look;
      in.plan = &*l.plan;
      in.state = &l.state;
      in.outlook = &seen_.outlook;
      in.run = &l.run;
      in.gpus = l.gpus;
      in.reading = l.reading ? &*l.reading : nullptr;
      in.others = &l.others;
      in.kept_note = l.kept_note;
    }
    if (seen_.node) {
      in.node_users = &seen_.node->users;
      in.node_dir = seen_.node->dir;
      in.node_problem = seen_.node->problem;
      if (in.gpus.empty())
        for (int g = 0; g < 64; ++g)
          if (seen_.node->node >> g & 1) in.gpus.push_back(g);
    }
    return in;
  }

  TopScreen screen(int rows, int cols) {
    ui_.rows = rows, ui_.cols = cols;
    TopInput in = input();
    TopScreen sc = top_screen(in, ui_);
    phase("screen");
    return sc;
  }

  int run();
  bool has_plan() const { return seen_.look && seen_.look->plan; }

 private:
  void watch_folders();
  void draw();
  bool key(int ch);  // false: quit
  void move_by(long n);
  void ask_or_act(const std::string& action, bool stops_work);
  void act(const std::string& action);
  void open_log();
  void read_log();
  void say(const std::string& text, Tone tone) { ui_.message = text, ui_.message_tone = tone; }

  Flags& f_;
  TopUi ui_;
  Seen seen_;
  std::optional<Plan> last_good_;
  PlanCache plan_cache_;  // the plan taken again while its file is unchanged (look.h)
  std::string me_, plan_path_;
  bool mine_ = true;
  bool node_wanted_ = false;
  TopScreen sc_;
  std::string pending_;  // the action the prompt asks about
  TopScreenKind back_ = TopScreenKind::plan;
  // inotify: the plan's folder and the node directory (a refresh), the log followed.
  int ino_ = -1;
  std::map<std::string, int> watched_;
  int log_watch_ = -1;
  std::string log_path_;
  LogCursor log_cursor_;
  bool log_open_line_ = false;
  bool colors_ = false;

 public:
  StderrAside* aside_ = nullptr;  // what the library says on stderr meanwhile
  void set_colors(bool on) { colors_ = on; }
};

void Top::watch_folders() {
  if (ino_ < 0) return;
  std::vector<std::string> dirs;
  if (seen_.look) {
    std::filesystem::path p(seen_.look->paths.state);
    dirs.push_back(p.parent_path().empty() ? "." : p.parent_path().string());
    std::filesystem::path plan(f_.plan);
    dirs.push_back(plan.parent_path().empty() ? "." : plan.parent_path().string());
    if (!seen_.look->node.dir.empty()) dirs.push_back(seen_.look->node.dir);
  }
  if (seen_.node && !seen_.node->dir.empty()) dirs.push_back(seen_.node->dir);
  for (const std::string& d : dirs) {
    if (watched_.count(d)) continue;
    int w = inotify_add_watch(ino_, d.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB);
    watched_[d] = w;  // -1 (a folder not there yet): tried again at the next look, by the safety net
    if (w < 0) watched_.erase(d);
  }
}

void Top::move_by(long n) {
  if (sc_.rows.empty()) return;
  long i = std::clamp(static_cast<long>(sc_.selected) + n, 0L, static_cast<long>(sc_.rows.size()) - 1);
  ui_.selected = sc_.rows[static_cast<size_t>(i)].id;
  ui_.selected_user = sc_.rows[static_cast<size_t>(i)].user;
}

void Top::ask_or_act(const std::string& action, bool stops_work) {
  if (ui_.screen != TopScreenKind::plan && ui_.screen != TopScreenKind::node) return;
  if (sc_.selected >= sc_.rows.size()) return say("no job is selected", Tone::warn);
  const TopRow& r = sc_.rows[sc_.selected];
  if (!r.own) {
    if (ui_.screen == TopScreenKind::node)
      return say(fmt::format("{} is {}'s job, of {}: top acts on the jobs of your own plan ({}) only", r.id,
                             r.user == me_ ? "your" : r.user, r.plan, f_.plan),
                 Tone::bad);
    return say(fmt::format("{} is not your plan: top acts on the jobs of your own plans only", f_.plan), Tone::bad);
  }
  if (stops_work && r.running) {  // not running: the command says why it does nothing, with no question first
    pending_ = action;
    ui_.prompt = fmt::format("{} {}? It stops the job's work.  y: yes, any other key: no", action, r.id);
    return;
  }
  act(action);
}

void Top::act(const std::string& action) {
  const std::string id = sc_.selected < sc_.rows.size() ? sc_.rows[sc_.selected].id : "";
  std::vector<std::string> lines;
  bool failed = false;
  SayLine out = [&](const std::string& l) { lines.push_back(l); };
  SayLine err = [&](const std::string& l) { lines.push_back(l), failed = true; };
  int rc = kExitFailure;
  try {
    Flags g = f_;
    std::optional<Plan> loaded;
    if (seen_.look && seen_.look->plan && seen_.look->report.errors.empty()) loaded = *seen_.look->plan;
    rc = control_plan(g, std::move(loaded), ControlAsk{action, {id}, false}, out, err);
  } catch (const std::exception& e) {
    lines.push_back(e.what());
  }
  std::string text;
  for (const std::string& l : lines) text += (text.empty() ? "" : "; ") + l;
  say(text.empty() ? fmt::format("{} {}: done", action, id) : text, rc == 0 && !failed ? Tone::good : Tone::bad);
}

void Top::open_log() {
  if (sc_.selected >= sc_.rows.size()) return say("no job is selected", Tone::warn);
  const TopRow& r = sc_.rows[sc_.selected];
  if (ui_.screen == TopScreenKind::node && !(r.user == me_ && r.plan == plan_path_))
    return say(fmt::format("{} is a job of {} ({}): `gpuq logs --plan {} {}` shows its log where you may read it", r.id,
                           r.plan, r.user, r.plan, r.id),
               Tone::warn);
  if (!seen_.look) return;
  back_ = ui_.screen;
  ui_.screen = TopScreenKind::log;
  log_path_ = seen_.look->paths.log(r.id);
  ui_.log_title = fmt::format("{}: {}", r.id, log_path_);
  ui_.log.clear();
  log_open_line_ = false;
  log_cursor_ = {};
  try {
    std::optional<LogCursor> c;
    std::string text = text_of([&](std::FILE* m) { c = print_tail(log_path_, std::max(ui_.rows, 10), m); });
    if (!c) ui_.log.push_back(fmt::format("{} has no log yet ({} does not exist): it has not started", r.id, log_path_));
    else log_cursor_ = *c, add_log_text(ui_.log, log_open_line_, text);
  } catch (const std::exception& e) {
    ui_.log.push_back(e.what());
  }
  if (ino_ >= 0) log_watch_ = inotify_add_watch(ino_, seen_.look->paths.logs.c_str(), IN_MODIFY | IN_CREATE | IN_MOVED_TO);
}

void Top::read_log() {
  try {
    bool had = log_cursor_.ino != 0;
    std::string text = text_of([&](std::FILE* m) { print_appended(log_path_, log_cursor_, m); });
    if (!had && log_cursor_.ino != 0) ui_.log.clear(), log_open_line_ = false;  // the log appeared
    add_log_text(ui_.log, log_open_line_, text);
  } catch (const std::exception& e) {
    say(e.what(), Tone::bad);
  }
}

void Top::draw() {
  int rows = 0, cols = 0;
  getmaxyx(stdscr, rows, cols);
  sc_ = screen(rows, cols);
  werase(stdscr);
  for (size_t i = 0; i < sc_.lines.size() && static_cast<int>(i) < rows; ++i) {
    wmove(stdscr, static_cast<int>(i), 0);
    for (const Span& s : sc_.lines[i]) {
      attr_t a = A_NORMAL;
      short pair = 0;
      switch (s.tone) {
        case Tone::plain: break;
        case Tone::dim: a = A_DIM; break;
        case Tone::head: a = A_BOLD; break;
        case Tone::good: pair = 1; break;
        case Tone::bad: pair = 2, a = A_BOLD; break;
        case Tone::warn: pair = 3; break;
        case Tone::accent: pair = 4; break;
        case Tone::chosen: a = A_REVERSE; break;
        case Tone::bar_now: pair = 1, a = A_REVERSE; break;
        case Tone::bar_a: pair = 4, a = A_REVERSE; break;
        case Tone::bar_b: pair = 5, a = A_REVERSE | (colors_ ? 0 : A_DIM); break;
      }
      wattrset(stdscr, a | (colors_ ? COLOR_PAIR(pair) : 0));
      waddstr(stdscr, s.text.c_str());
    }
  }
  wattrset(stdscr, A_NORMAL);
  wrefresh(stdscr);
  phase("draw");
}

bool Top::key(int ch) {
  if (!ui_.prompt.empty()) {  // y acts; any other key does nothing
    ui_.prompt.clear();
    if (ch == 'y' || ch == 'Y') act(pending_);
    else say(fmt::format("{}: nothing done", pending_), Tone::dim);
    pending_.clear();
    return true;
  }
  if (ui_.typing_filter) {
    if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) ui_.typing_filter = false;
    else if (ch == 27) ui_.typing_filter = false, ui_.filter.clear();
    else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && !ui_.filter.empty()) ui_.filter.pop_back();
    else if (ch >= 0x20 && ch < 0x7f) ui_.filter += static_cast<char>(ch);
    ui_.scroll = 0;
    return true;
  }
  if (ui_.screen == TopScreenKind::help) {
    ui_.screen = back_;
    return true;
  }
  if (ui_.screen == TopScreenKind::log) {
    if (ch == 'q' || ch == 27 || ch == KEY_LEFT) {
      ui_.screen = back_;
      if (log_watch_ >= 0) inotify_rm_watch(ino_, log_watch_), log_watch_ = -1;
    }
    return true;
  }
  ui_.message.clear();
  const long page = std::max(1, sc_.list_height - 1);
  switch (ch) {
    case 'q': return false;
    case '?': back_ = ui_.screen, ui_.screen = TopScreenKind::help; break;
    case KEY_DOWN: case 'j': move_by(1); break;
    case KEY_UP: move_by(-1); break;
    case KEY_NPAGE: case ' ': move_by(page); break;
    case KEY_PPAGE: move_by(-page); break;
    case 'g': case KEY_HOME: move_by(-1000000000L); break;
    case 'G': case KEY_END: move_by(1000000000L); break;
    case '/': ui_.typing_filter = true; break;
    case '\n': case '\r': case KEY_ENTER: case 'l': open_log(); break;
    case 'k': ask_or_act("kill", true); break;
    case 'p': ask_or_act("preempt", true); break;
    case 'R': ask_or_act("requeue", true); break;
    case 'h': ask_or_act("hold", false); break;
    case 'r': ask_or_act("retry", false); break;
    case 'P': {
      if (!mine_) {
        say(fmt::format("{} is not your plan: top pauses your own plans only", f_.plan), Tone::bad);
        break;
      }
      const bool paused = seen_.look && seen_.look->run.paused_since;
      try {
        say(pause_plan(f_, !paused), Tone::good);
      } catch (const std::exception& e) {
        say(e.what(), Tone::bad);
      }
      break;
    }
    case 'n':
      ui_.screen = ui_.screen == TopScreenKind::node ? TopScreenKind::plan : TopScreenKind::node;
      node_wanted_ = ui_.screen == TopScreenKind::node;
      ui_.scroll = 0;
      look();
      break;
    case KEY_MOUSE: {
      MEVENT e;
      if (getmouse(&e) == OK) {
        if (e.bstate & BUTTON4_PRESSED) move_by(-3);
#ifdef BUTTON5_PRESSED
        else if (e.bstate & BUTTON5_PRESSED) move_by(3);
#endif
      }
      break;
    }
    case KEY_RESIZE: break;
    default: break;
  }
  return true;
}

int Top::run() {
  ino_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  look();  // a plan with problems and no run going on is shown with them, and looked at again when it changes
  double last_look = steady_s();
  bool dirty = false;
  while (!g_stop) {
    draw();
    // When to look again: a change seen (no sooner than a second after the last look), each
    // second while a job reports progress or a log is followed, else a minute's safety net (the
    // GPUs' memory and processes change with no file changing).
    double since = steady_s() - last_look;
    double wait = dirty ? 1.0 - since : seen_.progress || ui_.screen == TopScreenKind::log ? 1.0 - since : 60.0 - since;
    int timeout_ms = static_cast<int>(std::max(0.0, wait) * 1000);
    struct pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {ino_, POLLIN, 0}};
    int n = ::poll(fds, ino_ >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (n > 0 && (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL))) break;  // the terminal is gone (its pane closed)
    if (n > 0 && ino_ >= 0 && (fds[1].revents & POLLIN)) {
      alignas(inotify_event) char buf[4096];
      while (read(ino_, buf, sizeof buf) > 0) {
      }
      dirty = true;
      if (ui_.screen == TopScreenKind::log) read_log();
    }
    int ch;
    bool quit = false;
    while (!quit && (ch = getch()) != ERR) {
      quit = !key(ch);
      if (!quit) draw();  // the next key acts on what this one shows
    }
    if (quit) break;
    since = steady_s() - last_look;
    const bool timer = seen_.progress || ui_.screen == TopScreenKind::log ? since >= 1.0 : since >= 60.0;
    if ((dirty && since >= 1.0) || timer) {
      if (ui_.screen == TopScreenKind::log) read_log();
      look();
      last_look = steady_s();
      dirty = false;
      if (std::string l = aside_ ? aside_->last_line() : ""; !l.empty()) say(l, Tone::warn);
    }
  }
  if (ino_ >= 0) close(ino_);
  return 0;
}

// One screen as text (--print COLSxROWS): for scripts and tests, no terminal needed.
int print_top(Flags& f, const std::string& print_size) {
  TopUi ui;
  int w = 0, h = 0;
  char x = 0;
  if (std::sscanf(print_size.c_str(), "%d%c%d", &w, &x, &h) != 3 || x != 'x' || w < 20 || h < 5 || w > 1000 || h > 1000) {
    fmt::print(stderr, "gpuq top: --print: want COLSxROWS (at least 20x5), such as 80x24, not \"{}\"\n", print_size);
    return kExitBadInput;
  }
  std::setlocale(LC_ALL, "");
  ui.unicode = std::string_view(nl_langinfo(CODESET)) == "UTF-8";
  Top top(f, ui);
  top.look();
  TopScreen sc = top.screen(h, w);
  std::string out;
  for (const ScreenLine& l : sc.lines) {
    for (const Span& s : l) out += s.text;
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return top.has_plan() ? 0 : kExitBadInput;  // as `status` exits on a plan that does not load
}

// ncurses' modes, keys and colors for top, and its stop signals; true where it shows colors
// (the terminal has them and NO_COLOR is unset).
bool set_up_terminal() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  nodelay(stdscr, TRUE);
  set_escdelay(25);
  curs_set(0);
  mousemask(BUTTON4_PRESSED
#ifdef BUTTON5_PRESSED
                | BUTTON5_PRESSED
#endif
            ,
            nullptr);
  const char* no_color = std::getenv("NO_COLOR");
  const bool colors = has_colors() && !(no_color && *no_color);
  if (colors) {
    start_color();
    use_default_colors();
    init_pair(1, COLOR_GREEN, -1);
    init_pair(2, COLOR_RED, -1);
    init_pair(3, COLOR_YELLOW, -1);
    init_pair(4, COLOR_CYAN, -1);
    init_pair(5, COLOR_MAGENTA, -1);
  }
  return colors;
}

int cmd_top(Flags& f, const std::string& print_size) try {
  TopUi ui;
  if (!print_size.empty()) return print_top(f, print_size);  // for scripts and tests: no terminal needed
  if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
    fmt::print(stderr,
               "gpuq top: {} is not a terminal: top is a full-screen view for a terminal; "
               "`gpuq status --watch` prints the status every few seconds into a pipe or a file\n",
               isatty(STDOUT_FILENO) ? "stdin" : "stdout");
    return kExitBadInput;
  }
  std::setlocale(LC_ALL, "");
  ui.unicode = std::string_view(nl_langinfo(CODESET)) == "UTF-8";
  StderrAside aside;
  SCREEN* scr = newterm(nullptr, stdout, stdin);
  if (!scr) {
    aside.restore();
    const char* term = std::getenv("TERM");
    fmt::print(stderr, "gpuq top: the terminal TERM={} is not one ncurses knows: set TERM (xterm-256color, tmux-256color)\n",
               term ? term : "(unset)");
    return kExitFailure;
  }
  // A terminal that cannot place the cursor (TERM=dumb, an editor's shell) would show the
  // screen as a stream of lines: said, as an unknown TERM is.
  if (const char* cup = tigetstr("cup"); !cup || cup == reinterpret_cast<const char*>(-1)) {
    endwin();
    delscreen(scr);
    aside.restore();
    const char* term = std::getenv("TERM");
    fmt::print(stderr,
               "gpuq top: the terminal TERM={} cannot place the cursor, which a full-screen view needs: run it in a "
               "terminal (tmux, xterm); `gpuq status --watch` prints the status instead\n",
               term ? term : "(unset)");
    return kExitFailure;
  }
  bool colors = set_up_terminal();
  int rc = 0;
  std::string error;
  try {
    Top top(f, ui);
    top.aside_ = &aside;
    top.set_colors(colors);
    rc = top.run();
  } catch (const BadLook& e) {
    error = e.what(), rc = kExitBadInput;
  } catch (const std::exception& e) {
    error = e.what(), rc = kExitFailure;
  }
  endwin();
  delscreen(scr);
  aside.restore();
  if (!error.empty()) {
    fmt::print(stderr, "gpuq top: {}\n", error);
  }
  return rc;
} catch (const BadLook& e) {
  fmt::print(stderr, "gpuq top: {}\n", e.what());
  return kExitBadInput;
}

}  // namespace

void add_top_command(CLI::App& app, Flags& f, Action& action) {
  auto* top = app.add_subcommand("top", "the plan and the node live in a terminal: GPUs, jobs, the prediction; kill, "
                                        "hold, retry, logs from it (keys: ?)");
  add_flags(top, f, SettingCommand::kStatus);
  top->add_option("--node-dir", f.node_dir, "the node directory (default: the run's, $GPUQ_NODE_DIR, /var/lib/gpuq, else your own)")
      ->type_name("DIR");
  static std::string print_size;
  top->add_option("--print", print_size,
                  "print one screen as text, COLS x ROWS (80x24), and exit (2 when the plan does not load): no terminal needed")
      ->type_name("COLSxROWS");
  top->callback([&] {
    f.reads_run_settings = true;
    action = [&] { return cmd_top(f, print_size); };
  });
}

}  // namespace gpuq::cli
