// What a long-running command (run's pane) has told the user, keyed by what each line is about.
// One mechanism for "said once": a notice is said when it is new, said again only when its
// condition has gone and come back or its text has changed, and its end can be told once.
// Pure: no clock, no output; the caller says the line when `fresh` says so.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuq {

class Notices {
 public:
  /// `text` about `key` (keys of one kind share a prefix: "busy GPU 3", "too big:train"): true,
  /// and remembered, unless it is what was last said about `key` and that has not gone since.
  bool fresh(const std::string& key, const std::string& text = {}) {
    auto [it, added] = said_.try_emplace(key, text);
    if (added) return true;
    if (it->second == text) return false;
    it->second = text;
    return true;
  }
  /// The condition `key` was about has gone: the text last said about it (to say that it is
  /// over), or none when nothing was said. The next `fresh` about it is said.
  std::optional<std::string> gone(const std::string& key) {
    auto it = said_.find(key);
    if (it == said_.end()) return std::nullopt;
    std::string text = std::move(it->second);
    said_.erase(it);
    return text;
  }
  /// Something is said about `key` and has not gone.
  bool active(const std::string& key) const { return said_.count(key) > 0; }
  /// The keys said under `prefix`, each without it (to find those whose condition has gone).
  std::vector<std::string> under(std::string_view prefix) const {
    std::vector<std::string> out;
    for (auto it = said_.lower_bound(prefix); it != said_.end() && it->first.starts_with(prefix); ++it)
      out.push_back(it->first.substr(prefix.size()));
    return out;
  }
  /// Every notice under `prefix` gone at once (the lines said while the state could not be saved,
  /// once a save succeeds).
  void forget(std::string_view prefix) {
    auto it = said_.lower_bound(prefix);
    while (it != said_.end() && it->first.starts_with(prefix)) it = said_.erase(it);
  }

 private:
  std::map<std::string, std::string, std::less<>> said_;
};

}  // namespace gpuq
