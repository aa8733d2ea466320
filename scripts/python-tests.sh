#!/usr/bin/env bash
# The Python package's tests: builds the abi3 wheel of bindings/python
# with maturin (one release build of the cdylib, in the workspace's target
# directory, into target/wheels), installs it into a virtualenv under
# target/python-venv (made here, with the pinned maturin, pytest and
# hypothesis of bindings/python/requirements-test.txt from PyPI when they
# are missing), checks that the wheel is tagged abi3, and runs pytest on
# bindings/python/tests.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/python-venv
requirements=bindings/python/requirements-test.txt
# The requirements installed last, to reinstall when the pins change.
stamp=$venv/requirements-test.txt
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$requirements" "$stamp"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$stamp"
fi

rm -f target/wheels/cleave-*.whl
"$venv/bin/maturin" build --release --quiet \
  --manifest-path bindings/python/Cargo.toml \
  --interpreter "$venv/bin/python" \
  --out target/wheels
wheels=(target/wheels/cleave-*.whl)
if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
  echo "python-tests: expected one wheel in target/wheels, found: ${wheels[*]}" >&2
  exit 1
fi
wheel=${wheels[0]}
# An abi3 wheel's name ends in -cp39-abi3-<platform>.whl: one wheel for
# every CPython from 3.9 on.
case "$(basename "$wheel")" in
  *-abi3-*.whl) echo "python-tests: built $(basename "$wheel")" ;;
  *)
    echo "python-tests: $(basename "$wheel") is not an abi3 wheel" >&2
    exit 1
    ;;
esac
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel"
"$venv/bin/python" -m pytest -q -p no:cacheprovider bindings/python/tests
