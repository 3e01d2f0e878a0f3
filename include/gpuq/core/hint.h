// Command hints: the `gpuq ...` a message suggests, written so that pasted into the shell it
// acts on the same plan (issue 25, point 12). Every hint gpuq prints is made here.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace gpuq {

/// The flags a pasted hint needs to find this command's plan ("--plan comp.json", and
/// "--state-dir DIR" when one was given as a flag): "" when the plan is the one gpuq takes
/// without --plan. Set once by the CLI, after the command line is read (before any thread).
void set_hint_flags(std::string flags);
const std::string& hint_flags();

/// `word` as one shell word: as it is when the shell leaves it so, else in single quotes.
std::string shell_word(std::string_view word);

/// "`gpuq kill --plan comp.json train_beta`": `command` (a subcommand, or a subcommand and its
/// flags), the plan's flags (hint_flags), then each of `args` as a shell word.
std::string hint(std::string_view command, std::initializer_list<std::string_view> args = {});
std::string hint(std::string_view command, const std::vector<std::string>& args);

}  // namespace gpuq
