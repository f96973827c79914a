#!/bin/sh
# Make the virtual environment tools/xla/*.py run in: .venv-xla/ at the repository root, with
# pinned jax/jaxlib (CPU) and numpy. Does nothing when the environment is already complete.
# Only the developer's XLA instruments need it: shardlens, meson test and the README's commands
# never do.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/.venv-xla"
JAX_VERSION=0.10.2
if [ -x "$venv/bin/python" ] &&
	"$venv/bin/python" -c "import jax, jaxlib, numpy, sys; sys.exit(jax.__version__ != '$JAX_VERSION' or jaxlib.__version__ != '$JAX_VERSION')" 2>/dev/null; then
	exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet "jax==$JAX_VERSION" "jaxlib==$JAX_VERSION" numpy
"$venv/bin/python" -c "import jax; print('jax', jax.__version__, 'in $venv')"
