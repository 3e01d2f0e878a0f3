// LD_PRELOAD'ed into gpuq by no_inotify_test.cpp: inotify cannot be had, as on a machine whose
// user has used up fs.inotify.max_user_instances (EMFILE). Nothing else changes.
#include <cerrno>

extern "C" {

int inotify_init1(int flags) {
  (void)flags;
  errno = EMFILE;
  return -1;
}

int inotify_init() {
  errno = EMFILE;
  return -1;
}

}  // extern "C"
