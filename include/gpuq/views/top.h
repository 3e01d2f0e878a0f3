// `gpuq top`'s screen as data: what one look at the node (live/look.h) shows on a terminal of a
// given size, as lines of toned text. A plain function of plain data: the CLI draws the lines
// with ncurses and turns keys into a TopUi; the tests read the lines without a terminal.
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/node.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// How a piece of text is drawn: the terminal's colors decide what each looks like. Under
/// NO_COLOR only the attributes are left: `head` bold, `dim` dim, `chosen` and the bars reverse.
/// The bars are the prediction's: a job running now, and the next ones in turn.
enum class Tone : uint8_t { plain, dim, head, good, bad, warn, accent, chosen, bar_now, bar_a, bar_b };

struct Span {
  std::string text;
  Tone tone = Tone::plain;
};
using ScreenLine = std::vector<Span>;

/// One job of the list, in the order shown.
struct TopRow {
  std::string id;
  std::string user;   ///< whose run it is ("": this plan's)
  std::string plan;   ///< its plan's path (the node view)
  bool own = true;    ///< a job of the plan `top` looks at: the actions may take it
  bool running = false;
  bool pending = false;
};

/// What one look found, for the screen (pointers into the look: nothing is copied).
struct TopInput {
  std::string plan_arg;                  ///< the plan as the user named it
  const Plan* plan = nullptr;            ///< null: no plan to show (`problem` says why)
  const State* state = nullptr;
  const Outlook* outlook = nullptr;      ///< the engine's prediction over the look
  const RunSeen* run = nullptr;
  double now = 0;
  std::vector<int> gpus;                 ///< the node's GPUs
  const GpuReading* reading = nullptr;   ///< null: not read
  const std::map<int, std::string>* others = nullptr;  ///< why each GPU someone else holds is busy
  std::string problem;                   ///< the plan (or the look) has a problem: shown, not fatal
  std::string kept_note;                 ///< the plan shown is the running run's version: why
  // The node view (`n`):
  const std::vector<NodeUser>* node_users = nullptr;
  std::string node_dir, node_problem;
  std::string me;                        ///< the user looking
  std::string plan_path;                 ///< the plan's absolute path (its runs in the node directory)
  bool mine = true;                      ///< the plan is the user's: its jobs take actions
};

enum class TopScreenKind : uint8_t { plan, node, help, log };

/// What the user did to the view: the size, the selection, the screen shown.
struct TopUi {
  int rows = 24, cols = 80;
  bool unicode = true;          ///< block and arrow characters (a UTF-8 terminal), else ASCII
  TopScreenKind screen = TopScreenKind::plan;
  std::string selected;         ///< the selected job's id ("": the first row)
  std::string selected_user;    ///< ... and its user, in the node view
  long scroll = 0;              ///< the list's first row shown
  std::string filter;           ///< `/`: only ids containing it
  bool typing_filter = false;
  std::string message;          ///< the last action's words, at the bottom
  Tone message_tone = Tone::plain;
  std::string prompt;           ///< a question waiting for y/n ("": none)
  // The log view:
  std::string log_title;
  std::vector<std::string> log;  ///< its last lines
};

/// The screen: its lines (at most ui.rows, each at most ui.cols cells), the list's rows in order,
/// and where the selection is (rows.size() when the list is empty).
struct TopScreen {
  std::vector<ScreenLine> lines;
  std::vector<TopRow> rows;
  size_t selected = 0;
  int list_height = 0;  ///< rows of the list shown at once (for PgUp/PgDn)
};

/// Lays out one screen. Moves `ui.scroll` so that the selection is shown, and sets `ui.selected`
/// to the selected row's id (the first row's when it names none that is shown).
TopScreen top_screen(const TopInput& in, TopUi& ui);

/// The rows of the list, in order (running first, then waiting by predicted start, then the
/// latest ends), filtered by `ui.filter`.
std::vector<TopRow> top_rows(const TopInput& in, const TopUi& ui);

/// The help screen's keys, one "key  what" line each (doc/top.md lists the same).
const std::vector<std::pair<std::string, std::string>>& top_keys();

/// The width of `s` on a terminal: its code points (gpuq's own characters are one cell each).
size_t cells(const std::string& s);

}  // namespace gpuq
