# What `cmake --install` and the Debian package hold: the binary, the man page gpuq(1), the
# completion scripts for bash, zsh and fish, the README and doc/*.md, the examples, the copyright and the
# changelog. The man page and the scripts are made at build time from the built gpuq itself,
# so that they cannot drift from its commands and flags.
include(GNUInstallDirs)

# The package's maintainer (the .deb and its changelog): a reserved example domain unless
# the builder names a real one.
set(GPUQ_MAINTAINER "The gpuq authors <gpuq@example.org>" CACHE STRING "the .deb's Maintainer field")

# The man page: help2man (GNU, packaged by Debian) turns `gpuq --help-man` into troff and
# adds the hand-written sections of doc/gpuq.h2m (description, files, environment, exit
# status, examples). Chosen over scdoc or pandoc because then every subcommand and flag is
# written once, in the CLI11 definition, and a new flag is in the man page without an edit.
find_program(HELP2MAN help2man)
find_program(GZIP gzip)
if(NOT HELP2MAN OR NOT GZIP)
  message(FATAL_ERROR "help2man and gzip make the man page: install them (bash tools/deps.sh)")
endif()
# The changelog's date, as seconds since 1970.
set(GPUQ_RELEASE_EPOCH 1796119200)
set(GPUQ_DOC_DIR ${CMAKE_BINARY_DIR}/doc)
file(MAKE_DIRECTORY ${GPUQ_DOC_DIR} ${CMAKE_BINARY_DIR}/completions)
add_custom_command(
  OUTPUT ${GPUQ_DOC_DIR}/gpuq.1 ${GPUQ_DOC_DIR}/gpuq.1.gz
  # A fixed date (the changelog's) keeps the page, and the package, the same from build to build.
  COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=${GPUQ_RELEASE_EPOCH}
          ${HELP2MAN} --no-info --section=1 --help-option=--help-man
          --version-string=${PROJECT_VERSION}
          "--name=a dependency and priority GPU job queue for one multi-GPU node"
          --include=${PROJECT_SOURCE_DIR}/doc/gpuq.h2m --output=${GPUQ_DOC_DIR}/gpuq.1 $<TARGET_FILE:gpuq>
  COMMAND ${GZIP} -9nf -k ${GPUQ_DOC_DIR}/gpuq.1
  DEPENDS gpuq ${PROJECT_SOURCE_DIR}/doc/gpuq.h2m
  COMMENT "Making the man page gpuq(1) with help2man"
  VERBATIM)

# The completion scripts, from `gpuq completion SHELL`.
set(GPUQ_COMPLETIONS
    ${CMAKE_BINARY_DIR}/completions/gpuq ${CMAKE_BINARY_DIR}/completions/_gpuq
    ${CMAKE_BINARY_DIR}/completions/gpuq.fish)
add_custom_command(
  OUTPUT ${GPUQ_COMPLETIONS}
  COMMAND sh -c "$<TARGET_FILE:gpuq> completion bash > completions/gpuq"
  COMMAND sh -c "$<TARGET_FILE:gpuq> completion zsh > completions/_gpuq"
  COMMAND sh -c "$<TARGET_FILE:gpuq> completion fish > completions/gpuq.fish"
  DEPENDS gpuq
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMENT "Making the bash, zsh and fish completion scripts"
  VERBATIM)

# Debian wants a changelog beside the copyright, compressed.
# The changelog names the package's maintainer.
configure_file(${PROJECT_SOURCE_DIR}/packaging/changelog.in ${GPUQ_DOC_DIR}/changelog @ONLY)
add_custom_command(
  OUTPUT ${GPUQ_DOC_DIR}/changelog.gz
  COMMAND ${GZIP} -9nf -k ${GPUQ_DOC_DIR}/changelog
  DEPENDS ${GPUQ_DOC_DIR}/changelog
  VERBATIM)

# Not part of a sanitized build (GPUQ_SANITIZE), which makes only what its tests run.
if(GPUQ_SANITIZE)
  set(GPUQ_DOCS_IN_ALL "")
else()
  set(GPUQ_DOCS_IN_ALL ALL)
endif()
add_custom_target(gpuq_docs ${GPUQ_DOCS_IN_ALL} DEPENDS ${GPUQ_DOC_DIR}/gpuq.1.gz ${GPUQ_COMPLETIONS} ${GPUQ_DOC_DIR}/changelog.gz)

install(TARGETS gpuq RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${GPUQ_DOC_DIR}/gpuq.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_BINARY_DIR}/completions/gpuq DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${CMAKE_BINARY_DIR}/completions/_gpuq DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
install(FILES ${CMAKE_BINARY_DIR}/completions/gpuq.fish DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d)
install(FILES README.md ${GPUQ_DOC_DIR}/changelog.gz DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The README links to doc/*.md (the reference): installed beside it, so that its links resolve.
install(DIRECTORY doc/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/doc FILES_MATCHING PATTERN "*.md")
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright)
# The examples as the repository has them, without what running them leaves behind (the files
# .gitignore names: the README's first command runs the demo in examples/demo; tools/package.sh
# checks the package against `git ls-files examples`).
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples USE_SOURCE_PERMISSIONS
        PATTERN logs EXCLUDE PATTERN out EXCLUDE PATTERN "*.state.json*" EXCLUDE PATTERN "*.lock" EXCLUDE
        PATTERN "*.events.jsonl*" EXCLUDE PATTERN "*.predictions.jsonl" EXCLUDE PATTERN "*.run.json" EXCLUDE
        PATTERN "*.run.plan.json" EXCLUDE PATTERN "*.hooks.json" EXCLUDE PATTERN "*.snapshots" EXCLUDE)

# `cpack -G DEB` (tools/package.sh): gpuq_VERSION_ARCH.deb, its dependencies from dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuq)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${GPUQ_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GPUQ_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "dependency and priority GPU job queue for one multi-GPU node")
# The long description (CPack puts the summary before it and indents each line).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "gpuq runs a research plan, a JSON list of jobs each with a bash script, a GPU
count, a priority, dependencies and an estimated duration, on the GPUs of one
node: it starts the highest-priority job that is ready and fits on free GPUs,
backfills short jobs while a wide job waits, puts 2-GPU jobs on NVLink pairs,
and predicts the whole timeline before you commit to it.")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# The node directory /var/lib/gpuq for group gpuq (packaging/postinst), removed on purge.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/postinst ${PROJECT_SOURCE_DIR}/packaging/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")

include(CPack)
