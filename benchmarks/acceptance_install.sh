# Sourced by gpu_acceptance.sh: installing stbench on a machine without network or package
# index, and checking that what is installed is this tree (a stale wheel would measure old code).

missing_modules() {  # the modules of REQUIRED that do not import here, as distribution names
  "$PY" - "${REQUIRED[@]}" <<'EOF'
import importlib.util, sys
for name in sys.argv[1:]:
    if importlib.util.find_spec(name) is None:
        print(name)
EOF
}

install() {
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    say "stbench needs Python 3.10 or newer; $PY is $("$PY" -V 2>&1)"; exit 2
  fi
  local missing=() m
  for m in $(missing_modules); do missing+=("${DIST[$m]:-$m}"); done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ -z "$WHEELS" ] || ! "$PY" -m pip install -q --no-index --no-deps --find-links "$WHEELS" "${missing[@]}" >>"$LOG" 2>&1; then
      say "missing here: ${missing[*]}; where pip works: python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d WHEELS ${missing[*]}; then --wheels WHEELS"
      exit 2
    fi
  fi
  local wheel
  wheel=$(ls "${WHEELS:-/nonexistent}"/stbench-*.whl 2>/dev/null | head -1)
  if [ -z "$wheel" ]; then
    say "no stbench wheel in ${WHEELS:-(no --wheels)}: where pip works, run 'python3 -m pip wheel --no-deps -w WHEELS .' and pass --wheels WHEELS"
    exit 2
  fi
  echo "installing $(basename "$wheel") (no index, no dependencies)"
  "$PY" -m pip install -q --no-index --no-deps --force-reinstall "$wheel" >>"$LOG" 2>&1 \
    || { say "installing $wheel failed (see $LOG)"; exit 2; }
}

verify_install() {  # every .py of the tree is the installed one, byte for byte
  local differ
  differ=$(cd /tmp && "$PY" - "$ROOT" <<'EOF'
import pathlib, sys
try:
    import stbench, stbench.workloads
except ImportError as e:
    print(f"stbench does not import: {e}"); sys.exit()
root, installed = pathlib.Path(sys.argv[1]), pathlib.Path(stbench.__file__).parent
pairs = []
for tree, package in (("stbench_cli", stbench), ("workloads", stbench.workloads)):
    where = pathlib.Path(package.__file__).parent  # an editable install maps the two apart
    pairs += [(p, where / p.relative_to(root / tree)) for p in (root / tree).rglob("*.py")]
bad = [str(a.relative_to(root)) for a, b in pairs if not b.is_file() or a.read_bytes() != b.read_bytes()]
if bad:
    print(f"the installed stbench ({installed}) differs from this tree in {len(bad)} file(s), e.g. {bad[0]}")
EOF
)
  if [ -n "$differ" ]; then say "$differ: rebuild the wheel from this tree"; exit 2; fi
}

machine_line() {
  local smi
  smi=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | tr '\n' ';')
  echo "${smi:-no nvidia-smi} $(nproc) cores, $(uname -m), Python $("$PY" -c 'import platform; print(platform.python_version())')"
}
