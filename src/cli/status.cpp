// `gpuq status`: one look at the node (live/look.h), the engine's outlook over it, the views.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>

#include "gpuq/core/local_time.h"
#include "gpuq/live/look.h"
#include "gpuq/views/gpus_text.h"
#include "gpuq/views/json.h"
#include "gpuq/views/node_text.h"
#include "gpuq/views/svg.h"
#include "gpuq/views/text.h"

#include "cli.h"

namespace gpuq::cli {

namespace {

LookAsk status_ask(const Flags& f) {
  LookAsk ask;
  ask.rows = !f.json && !f.all;  // text without --all shows the first rows only: only they need their reasons
  return ask;
}

// What one look shows: the original's rows, the run, the node, the outlook, the backend's queue.
int print_status(const Flags& f, const Look& l, const LookAsk& ask) {
  const Plan* plan = &*l.plan;
  std::optional<Plan> learned;  // --learned-estimates: a copy with the estimates learned
  if (f.learned_estimates) plan = &learned.emplace(learn_into(f, *l.plan, l.state));
  Outlook o = outlook_of(l, ask, learned ? &*learned : nullptr);
  phase("outlook");
  if (!f.svg.empty() &&
      !write_output(f.svg, gantt_svg(*plan, live_bars(*plan, l.state, o), l.gpus, 0.0, "gpuq status: " + f.plan)))
    return kExitFailure;
  std::string notes = memory_over_text(l.over) + l.stale_text;
  for (const std::string& line : l.settings_notes) notes += line + "\n";
  std::string out = f.json ? outlook_json(*plan, l.state, f.plan, o, l.run, settings_sources_json(f))
                           : format_status(*plan, l.state, l.now, f.all) + format_stale(*plan, l.state, f.plan) + "\n" +
                                 run_text(l.run, f.plan, l.now) + l.node.line + notes +
                                 format_outlook(*plan, l.state, o, f.all) + l.queue.text;
  phase("format");
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  keep_until_exit(std::move(o));
  return 0;
}

// status --node: every user's running and waiting jobs on the shared node.
int status_node(const Flags& f) {
  NodeStatus n = node_status(f);
  if (!n.problem.empty()) {
    fmt::print(stderr, "gpuq status --node: {}\n", n.problem);
    return n.bad_input ? kExitBadInput : kExitFailure;
  }
  if (f.json) {
    fmt::print("{}", node_json(n.dir, n.users, n.notes, n.node, n.now, n.config, n.backfill_max_hours, n.room, n.host));
    return 0;
  }
  fmt::print("{}", node_text(n.dir, n.users, n.notes, n.node, n.now, n.config, n.backfill_max_hours, n.room, n.host));
  for (const auto& [g, d] : node_drained(n.users))
    fmt::print("drained: {}; no job starts on it (gpuq undrain {})\n", drain_text(d, local_time(d.at, n.now)), g);
  // GPUs hoarded by processes of no gpuq job, as the node's runs saw them (reported, never stopped).
  std::vector<std::vector<IdleHolder>> seen;
  for (const NodeUser& u : n.users)
    for (const NodeRun& r : u.runs)
      if (!r.gone) seen.push_back(r.idle_holders);
  fmt::print("{}", idle_holders_text(merge_idle_holders(seen), n.now, f.idle_minutes * 60, f.idle_util_percent));
  // Readable but not usable by this user: their runs would start nothing; say so here too.
  if (!n.unusable.empty()) fmt::print("you: your runs cannot share this node: {}\n", n.unusable);
  return 0;
}

// Redraws until Ctrl-C, for a tmux pane: a look each time, with the settings taken again (a
// `gpuq run` may have started or stopped since) and the plan read again. An edit of the plan
// with errors keeps the last good version, and says so. Into a pipe or a file (not a terminal)
// each redraw is appended as plain text, without the codes that clear a screen.
int watch_status(const Flags& given) {
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  std::optional<Plan> last_good;
  while (true) {
    Flags f = given;
    LookAsk ask = status_ask(given);
    ask.plan_when_broken = last_good ? &*last_good : nullptr;
    Look l;
    try {
      l = look_at(f, ask);
    } catch (const BadLook&) {
      throw;
    } catch (const std::exception& e) {  // a state being replaced, a folder gone: said, and looked at again
      fmt::print("gpuq: {}\n", e.what());
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(given.watch * 1000)));
      continue;
    }
    if (!l.plan) {  // the first look, at a plan with errors and no run going on
      say_load(f, l.report);
      return kExitBadInput;
    }
    std::string note;
    if (l.report.errors.empty()) last_good = *l.plan;
    else
      note = fmt::format("the plan {} was edited and is not valid ({} problem{}, first: {}); showing it as it was "
                         "before the edit\n\n",
                         f.plan, l.report.errors.size(), l.report.errors.size() == 1 ? "" : "s", l.report.errors[0]);
    if (terminal) std::fputs("\x1b[H\x1b[2J", stdout);
    if (f.json) {  // one JSON object a redraw, nothing else (a stream a program reads); the note on stderr
      if (!note.empty()) fmt::print(stderr, "gpuq: {}", note);
    } else {
      fmt::print("gpuq status --plan {}   (every {:g} s; Ctrl-C to stop)   {}\n\n", f.plan, f.watch,
                 clock_stamp(l.now));
      std::fputs(note.c_str(), stdout);
    }
    print_status(f, l, ask);
    if (!terminal && !f.json) std::fputs("\n", stdout);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(given.watch * 1000)));
  }
}

}  // namespace

int cmd_status(Flags& f) try {
  if (f.status_node) return status_node(f);
  if (f.watch > 0) return watch_status(f);
  huge_page_heap();
  LookAsk ask = status_ask(f);
  Look l = look_at(f, ask);
  say_load(f, l.report);  // an edit with errors: said, and the run's own version shown
  if (!l.plan) return kExitBadInput;
  for (const std::string& w : l.warnings) fmt::print(stderr, "gpuq: {}\n", w);
  int rc = print_status(f, l, ask);
  keep_until_exit(std::move(l));
  return rc;
} catch (const BadLook& e) {
  fmt::print(stderr, "gpuq status: {}\n", e.what());
  return kExitBadInput;
}

void add_status_command(CLI::App& app, Flags& f, Action& action) {
  auto* status = app.add_subcommand(
      "status", "show each job's status, why jobs wait, and when each job and the plan are predicted to finish");
  add_flags(status, f, SettingCommand::kStatus);
  status->add_flag("--node", f.status_node, "every user's running and waiting jobs on the shared node (--node-dir)");
  status->add_option("--node-dir", f.node_dir, "the node directory (default: the run's, $GPUQ_NODE_DIR, /var/lib/gpuq, else your own)")
      ->type_name("DIR");
  status->add_flag("--json", f.json, "print one JSON object (schema in doc/commands.md) instead of text");
  status->add_option("--svg", f.svg, "also write a Gantt chart of what ran and what is predicted to FILE")
      ->type_name(kFileType);
  status->add_option("--watch", f.watch, "redraw every S seconds until Ctrl-C (for a tmux pane; with --json, one object a redraw)")
      ->expected(0, 1)
      ->default_str("5")
      ->check(CLI::Validator(
          [](std::string& v) {
            char* end = nullptr;
            double x = std::strtod(v.c_str(), &end);
            return end != v.c_str() && !*end && x > 0 ? std::string() : "must be seconds above 0, not " + v;
          },
          ""))
      ->type_name("S");
  add_learned_estimates(status, f);
  status->callback([&] {
    f.reads_run_settings = true;
    action = [&] { return cmd_status(f); };
  });
}

}  // namespace gpuq::cli
