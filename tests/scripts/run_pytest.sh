#!/bin/sh
# run_pytest.sh — runs the Python package's pytest suite for ctest
# (tests/scripts/CMakeLists.txt sets ZPPD_BIN, ZPP_LIB and PYTHONPATH).
#
# Exit status: pytest's, except 77 (ctest: skipped) when python3, pytest or
# numpy is missing on a developer machine. Under CI (CI=true) a missing
# module is a failure: `make deps` must have installed them.
# Usage: run_pytest.sh SOURCE_DIR [pytest args...]
set -u
src=${1:?usage: run_pytest.sh SOURCE_DIR [pytest args...]}
shift
py=${PYTHON:-python3}

missing=""
if ! command -v "$py" >/dev/null 2>&1; then
    missing="$py"
else
    for m in pytest numpy; do
        "$py" -c "import $m" >/dev/null 2>&1 || missing="$missing $m"
    done
fi
if [ -n "$missing" ]; then
    if [ "${CI:-}" = "true" ]; then
        echo "run_pytest.sh: missing:$missing (CI=true: make deps must install them)" >&2
        exit 1
    fi
    echo "run_pytest.sh: skipped, missing:$missing (pip install pytest numpy)" >&2
    exit 77
fi

cd "$src" || exit 1
export PYTHONDONTWRITEBYTECODE=1
# -p no:cacheprovider: the source tree stays clean. pytest exits 5 when it
# collects nothing: that is a failure here too (a broken collection).
exec "$py" -m pytest -q -p no:cacheprovider client/python/tests "$@"
