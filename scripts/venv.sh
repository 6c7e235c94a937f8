# Sourced by scripts/test and scripts/demo: create or refresh the project's virtual environment
# (.venv) with ctxwatch installed editable and the extras the caller names.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${CTXWATCH_EXTRAS}]"
