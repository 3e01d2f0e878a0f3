// The job words of a command line (`gpuq hold ablate`, `gpuq logs train_lr=1e-3_seed=0`) as the
// plan's jobs: a job's id, a sweep's id (every point of it, as a dep on it means), or a sweep
// point with a number spelled another way than the sweep writes it (issue 25, point 9).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/plan.h"

namespace gpuq {

/// A number as a sweep writes it in its points' ids: the shortest text that reads back as it
/// (1e-3 -> 0.001, 1e-4 -> 1e-4, 3.0 -> 3).
std::string number_text(double v);

/// `id` with each value after a '=' (up to the next '_') that is a number written as number_text
/// writes it: "train_lr=1e-3_seed=0" -> "train_lr=0.001_seed=0". Other text is kept.
std::string with_sweep_numbers(std::string_view id);

/// The words as the plan's job ids, in order, each once; a word that names no job and no
/// sweep is kept as it is (a job the plan no longer has may still be in the state). `notes`
/// says what a word stood for when it was not a job's id.
struct JobWords {
  std::vector<std::string> ids;
  std::vector<std::string> notes;
};
JobWords resolve_job_words(const Plan& plan, const std::vector<std::string>& words);

/// "a, b, c, d, e and 3 more": the first `shown` of `n` items (item(k) words the k-th), then how
/// many more there are.
std::string few_of(size_t n, size_t shown, const std::function<std::string(size_t)>& item);
/// The same of `items`.
std::string few_of(const std::vector<std::string>& items, size_t shown);

/// `; did you mean "X"?` for a word that names no job: the nearest job or sweep id, or "".
std::string job_suggestion(const Plan& plan, std::string_view word);

}  // namespace gpuq
