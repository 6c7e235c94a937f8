# Sourced by scripts/test and scripts/demo: create or refresh the project's virtual environment
# (.venv) with ctxwatch installed editable and the extras the caller names (CTXWATCH_EXTRAS).
#
# The pip step runs only when something it depends on changed: a stamp per set of extras
# (.venv/ctxwatch-installed/<extras>) holds the hash of pyproject.toml it was installed from. A new
# .venv, another set of extras, or any change to pyproject.toml (a dependency added, a version bumped)
# reinstalls; source changes need nothing (the install is editable). The stamp is removed before pip
# starts and written only after it succeeds, so a failed or interrupted install is retried next time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=".venv/ctxwatch-installed/${CTXWATCH_EXTRAS//[^A-Za-z0-9_-]/_}"
wanted="$(python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' pyproject.toml)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  rm -f "$stamp"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${CTXWATCH_EXTRAS}]"
  mkdir -p "$(dirname "$stamp")"
  echo "$wanted" > "$stamp"
fi
