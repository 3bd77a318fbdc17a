#!/bin/sh
# The core's shape, counted: files on a prompt's path (callgrind over examples/core_path),
# session-keyed collections, the largest structs, impls spread over files. See the script.
# Needs valgrind (apt: valgrind) and python3.
set -eu
exec python3 "$(dirname "$0")/core-measures.py" "$@"
