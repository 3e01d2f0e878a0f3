// `gpuq completion bash|zsh|fish` and the hidden `gpuq __complete`: shell completion made
// from the CLI11 definition itself, so that a new subcommand or flag is completed without
// editing a script; job ids come from the plan named by --plan on the same line.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "gpuq/core/job_choices.h"
#include "gpuq/core/plan.h"
#include "gpuq/live/commands.h"

#include "cli.h"

namespace gpuq::cli {

namespace {

const std::vector<std::string> kShells = {"bash", "zsh", "fish"};

/// What a flag's value completes to, from its CLI11 type name (kPlanType, kFileType, kCommandType).
enum class Value { None, Text, Plan, File, Command };

struct FlagSpec {
  std::vector<std::string> names;  ///< "--lines", "-n"
  std::string help;
  Value value = Value::None;
};

struct CommandSpec {
  std::string name, help;
  std::vector<FlagSpec> flags;
  bool takes_jobs = false;                ///< a positional "job": ids from the plan
  std::vector<std::string> word_choices;  ///< a positional with fixed words (completion's shell)
};

/// The visible subcommands and their documented flags, as CLI11 holds them.
std::vector<CommandSpec> commands_of(CLI::App& app) {
  std::vector<CommandSpec> out;
  for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); })) {
    CommandSpec c{sub->get_name(), sub->get_description(), {}, false, {}};
    for (const CLI::Option* o : sub->get_options()) {
      if (o->get_group().empty()) continue;  // the original's flags a command accepts and ignores
      if (!o->nonpositional()) {
        if (o->get_name(true) == "job") c.takes_jobs = true;
        if (o->get_name(true) == "shell") c.word_choices = kShells;
        continue;
      }
      FlagSpec f;
      for (const auto& l : o->get_lnames()) f.names.push_back("--" + l);
      for (const auto& s : o->get_snames()) f.names.push_back("-" + s);
      f.help = o->get_description();
      std::string type = o->get_type_name();
      f.value = o->get_expected_max() == 0 ? Value::None
                : type == kPlanType    ? Value::Plan
                : type == kFileType    ? Value::File
                : type == kCommandType ? Value::Command
                                       : Value::Text;
      c.flags.push_back(std::move(f));
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string joined(const std::vector<std::string>& words, const std::string& sep = " ") {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

/// `s` inside single quotes for any POSIX-like shell (fish too: it has no '\'' but takes \').
std::string single_quoted(const std::string& s, bool fish = false) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? (fish ? "\\'" : "'\\''") : (fish && c == '\\') ? "\\\\" : std::string(1, c);
  return out + "'";
}

std::string bash_script(const std::vector<CommandSpec>& cmds) {
  std::vector<std::string> names = {"--help", "--version"};
  for (const auto& c : cmds) names.push_back(c.name);
  std::string cases;
  for (const auto& c : cmds) {
    std::vector<std::string> all, plan, file, command, text;
    for (const auto& f : c.flags) {
      for (const auto& n : f.names) {
        all.push_back(n);
        if (f.value == Value::Plan) plan.push_back(n);
        if (f.value == Value::File) file.push_back(n);
        if (f.value == Value::Command) command.push_back(n);
        if (f.value == Value::Text) text.push_back(n);
      }
    }
    cases += fmt::format("    {})\n      case $prev in\n", c.name);
    if (!plan.empty()) cases += fmt::format("        {}) _gpuq_files json; return ;;\n", joined(plan, "|"));
    if (!file.empty()) cases += fmt::format("        {}) _gpuq_files; return ;;\n", joined(file, "|"));
    if (!command.empty())
      cases += fmt::format("        {}) COMPREPLY=($(compgen -c -- \"$cur\")); return ;;\n", joined(command, "|"));
    if (!text.empty()) cases += fmt::format("        {}) return ;;\n", joined(text, "|"));
    cases += "      esac\n";
    cases += fmt::format("      flags={}\n", single_quoted(joined(all)));
    if (c.takes_jobs) cases += fmt::format("      [[ $cur == -* || -z $plan ]] || {{ _gpuq_jobs {}; return; }}\n", c.name);
    if (!c.word_choices.empty())
      cases += fmt::format("      [[ $cur == -* ]] || {{ COMPREPLY=($(compgen -W {} -- \"$cur\")); return; }}\n",
                           single_quoted(joined(c.word_choices)));
    cases += "      ;;\n";
  }
  return fmt::format(R"SH(# bash completion for gpuq. Made by `gpuq completion bash` from gpuq's own definition
# of its commands and flags; job ids come from `gpuq __complete`, which reads the plan
# given by --plan on the same line.
_gpuq_files() {{
  local IFS=$'\n'
  compopt -o filenames 2>/dev/null
  if [[ $1 == json ]]; then  # plans: folders and .json files, not the states beside them
    COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.json' -- "$cur" | grep -v '\.state\.json$'))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
_gpuq_jobs() {{
  local line p=$plan
  [[ $p == "~/"* ]] && p=$HOME/${{p#"~/"}}
  COMPREPLY=()
  while IFS= read -r line; do COMPREPLY+=("${{line%%$'\t'*}}"); done < <(gpuq __complete "$1" "$p" "$cur" 2>/dev/null)
  compopt -o nosort 2>/dev/null  # gpuq's order: the jobs the command can act on first
}}
_gpuq() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
  local cmd="" plan="" flags="" i w
  [[ $prev == = && $COMP_CWORD -ge 2 ]] && prev=${{COMP_WORDS[COMP_CWORD-2]}}
  [[ $cur == = ]] && cur=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${{COMP_WORDS[i]}}
    if [[ $w == --plan ]]; then
      plan=${{COMP_WORDS[i+1]}}
      [[ $plan == = ]] && plan=${{COMP_WORDS[i+2]}}
    elif [[ $w == --plan=* ]]; then
      plan=${{w#--plan=}}
    elif [[ -z $cmd && $w != -* ]]; then
      cmd=$w
    fi
  done
  if [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W {} -- "$cur"))
    return
  fi
  case $cmd in
{}    *) return ;;
  esac
  COMPREPLY=($(compgen -W "$flags" -- "$cur"))
}}
complete -F _gpuq gpuq
)SH",
                     single_quoted(joined(names)), cases);
}

/// `s` for a zsh _arguments description (inside [...]) or _describe entry, before quoting.
std::string zsh_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string zsh_script(const std::vector<CommandSpec>& cmds) {
  std::string described, cases;
  for (const auto& c : cmds) {
    described += "    " + single_quoted(zsh_text(c.name) + ":" + zsh_text(c.help)) + "\n";
    cases += fmt::format("    {})\n      _arguments -s -S \\\n", c.name);
    for (const auto& f : c.flags) {
      std::string excl = f.names.size() > 1 ? "(" + joined(f.names) + ")" : "";
      std::string names = f.names.size() > 1 ? "{" + joined(f.names, ",") + "}" : f.names[0];
      std::string action = f.value == Value::None      ? ""
                           : f.value == Value::Plan    ? ":plan file:_files -g \"*.json(-.)\""
                           : f.value == Value::File    ? ":file:_files"
                           : f.value == Value::Command ? ":command:_command_names -e"
                                                       : ":value: ";
      if (f.names.size() > 1) {
        cases += fmt::format("        {}{}{} \\\n", single_quoted(excl), names,
                             single_quoted("[" + zsh_text(f.help) + "]" + action));
      } else {
        // A long flag with a value may be given as --plan=FILE too.
        std::string eq = f.value == Value::None || f.names[0].rfind("--", 0) != 0 ? "" : "=";
        cases += fmt::format("        {} \\\n", single_quoted(names + eq + "[" + zsh_text(f.help) + "]" + action));
      }
    }
    if (c.takes_jobs) cases += fmt::format("        '*:job id:_gpuq_jobs {}' \\\n", c.name);
    if (!c.word_choices.empty()) cases += fmt::format("        ':shell:({})' \\\n", joined(c.word_choices));
    cases += "        && return\n      ;;\n";
  }
  return fmt::format(R"SH(#compdef gpuq
# zsh completion for gpuq. Made by `gpuq completion zsh` from gpuq's own definition of its
# commands and flags; job ids come from `gpuq __complete`, which reads the plan given by
# --plan on the same line.
_gpuq_jobs() {{
  local plan="" i line
  local -a ids descs
  for ((i = 1; i < CURRENT; i++)); do
    case ${{words[i]}} in
      --plan) plan=${{words[i+1]}} ;;
      --plan=*) plan=${{words[i]#--plan=}} ;;
    esac
  done
  [[ -n $plan ]] || return 1
  [[ $plan == "~/"* ]] && plan=$HOME/${{plan#"~/"}}
  # _arguments puts compadd options before the command's name: it is the last argument.
  for line in ${{(f)"$(gpuq __complete ${{argv[-1]}} $plan "$PREFIX" 2>/dev/null)"}}; do
    ids+=("${{line%%$'\t'*}}")
    descs+=("${{line%%$'\t'*}} -- ${{line#*$'\t'}}")
  done
  # -V: gpuq's order (the jobs the command can act on first), not sorted.
  compadd -V gpuq-jobs -l -d descs -a ids
}}
_gpuq() {{
  local curcontext=$curcontext state line
  local -a commands
  commands=(
{}  )
  _arguments -C '(- *)--help[print help]' '(- *)--version[print the version]' \
    '1:command:->command' '*::argument:->argument' && return
  case $state in
    command) _describe -t commands 'gpuq command' commands ;;
    argument)
      curcontext=${{curcontext%:*:*}}:gpuq-$line[1]:
      case $line[1] in
{}      esac
      ;;
  esac
}}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _gpuq "$@"
else
  compdef _gpuq gpuq
fi
)SH",
                     described, cases);
}

std::string fish_script(const std::vector<CommandSpec>& cmds) {
  std::string out = R"SH(# fish completion for gpuq. Made by `gpuq completion fish` from gpuq's own definition of
# its commands and flags; job ids come from `gpuq __complete`, which reads the plan given by
# --plan on the same line.
function __gpuq_jobs
    set -l tokens (commandline -opc)
    set -l plan
    for i in (seq 2 (count $tokens))
        if test "$tokens[$i]" = --plan; and test $i -lt (count $tokens)
            set plan $tokens[(math $i + 1)]
        else if string match -q -- '--plan=*' $tokens[$i]
            set plan (string replace -- --plan= '' $tokens[$i])
        end
    end
    test -n "$plan"; or return
    set plan (string replace -r '^~/' "$HOME/" -- $plan)
    gpuq __complete $argv[1] $plan (commandline -ct) 2>/dev/null
end
complete -c gpuq -f
complete -c gpuq -n __fish_use_subcommand -l help -s h -d 'print help'
complete -c gpuq -n __fish_use_subcommand -l version -d 'print the version'
)SH";
  for (const auto& c : cmds)
    out += fmt::format("complete -c gpuq -n __fish_use_subcommand -a {} -d {}\n", c.name, single_quoted(c.help, true));
  for (const auto& c : cmds) {
    std::string when = "-n " + single_quoted("__fish_seen_subcommand_from " + c.name, true);
    for (const auto& f : c.flags) {
      std::string names;
      for (const auto& n : f.names) names += (n.rfind("--", 0) == 0 ? " -l " + n.substr(2) : " -s " + n.substr(1));
      std::string value = f.value == Value::None      ? ""
                          : f.value == Value::Plan    ? " -r -F"
                          : f.value == Value::File    ? " -r -F"
                          : f.value == Value::Command ? " -x -a '(__fish_complete_command)'"
                                                      : " -x";
      out += fmt::format("complete -c gpuq {}{}{} -d {}\n", when, names, value, single_quoted(f.help, true));
    }
    // -k: gpuq's order (the jobs the command can act on first), not sorted.
    if (c.takes_jobs) out += fmt::format("complete -c gpuq {} -k -a '(__gpuq_jobs {})'\n", when, c.name);
    if (!c.word_choices.empty()) out += fmt::format("complete -c gpuq {} -a {}\n", when, single_quoted(joined(c.word_choices), true));
  }
  return out;
}

/// `gpuq __complete COMMAND PLAN [PREFIX]`: the plan's ids for COMMAND, one per line with a
/// tab and its status. Prints nothing (exit 0) for a plan it cannot load: a completion is silent.
int cmd_complete_ids(const std::string& command, const std::string& plan_file, const std::string& prefix) {
  try {
    PlanLoad load = load_plan(plan_file, {0, 1, 2, 3, 4, 5, 6, 7});
    if (!load.plan) return 0;
    Flags g;  // the state folder: $GPUQ_STATE_DIR, else the plan's "settings"
    g.plan = plan_file;
    take_flags_and_env(g);
    take_settings(g, load.plan->settings);
    State state;
    try {
      state = plan_state(g);
    } catch (const std::exception&) {
      // A damaged state: offer the ids all the same, in plan order.
    }
    for (const JobChoice& c : job_choices(*load.plan, state, command, prefix))
      fmt::print("{}\t{}\n", c.id, status_name(c.status));
  } catch (const std::exception&) {
  }
  return 0;
}

}  // namespace

std::string completion_script(CLI::App& app, const std::string& shell) {
  std::vector<CommandSpec> cmds = commands_of(app);
  if (shell == "bash") return bash_script(cmds);
  if (shell == "zsh") return zsh_script(cmds);
  return fish_script(cmds);
}

void add_completion_commands(CLI::App& app, Action& action) {
  auto* completion = app.add_subcommand(
      "completion", "print the shell completion script for bash, zsh or fish (see doc/install.md)");
  static std::string shell;
  completion->add_option("shell", shell, "bash, zsh or fish")->required()->check(CLI::IsMember(kShells));
  completion->callback([&] {
    action = [&] {
      std::string out = completion_script(app, shell);
      std::fwrite(out.data(), 1, out.size(), stdout);
      return 0;
    };
  });

  // Hidden (no group): the scripts call it for job ids.
  auto* complete = app.add_subcommand("__complete", "")->group("");
  static std::string command, plan, prefix;
  complete->add_option("command", command)->required();
  complete->add_option("plan", plan)->required();
  complete->add_option("prefix", prefix);
  complete->callback([&] { action = [&] { return cmd_complete_ids(command, plan, prefix); }; });
}

void add_version_command(CLI::App& app, Action& action) {
  app.set_version_flag("--version", version_line(), "print the version (and the git commit it was built from)");
  auto* version = app.add_subcommand("version", "print the version (and the git commit it was built from)");
  version->callback([&] {
    action = [] {
      fmt::print("{}\n", version_line());
      return 0;
    };
  });
}

}  // namespace gpuq::cli
