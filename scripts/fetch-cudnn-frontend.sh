#!/usr/bin/env bash
# Fetches the headers of NVIDIA's cuDNN frontend (header-only C++, MIT licence) into
# third_party/cudnn-frontend/include, where CMake looks for them: with them, and cudnn.h from the
# CUDA toolkit, the CUDA backend runs flash_attn through cuDNN's fused attention (docs/gpu.md).
# Without them the backend builds as before and attention runs as GEMMs.
#
#   scripts/fetch-cudnn-frontend.sh        # idempotent: does nothing when the pinned version is there
#
# Debian packages no cuDNN frontend; PyPI's wheel carries the headers. The wheel is pinned by
# version and checksum, and only its include/ directory is kept. Exits 0 without fetching where
# no CUDA toolkit is (nothing would use the headers), and 1 where the download fails.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.32.0
wheel=nvidia_cudnn_frontend-$version-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
dest=third_party/cudnn-frontend

case "${1:-}" in
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "fetch-cudnn-frontend: unexpected argument '$1' (see --help)" >&2; exit 2 ;;
esac
if [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$version" ] && [ -f "$dest/include/cudnn_frontend.h" ]; then
  exit 0
fi
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ ! -x "$nvcc" ]; then
  echo "fetch-cudnn-frontend: no CUDA toolkit here; the cuDNN frontend is not needed"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-cudnn-frontend: downloading nvidia-cudnn-frontend $version from PyPI"
python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
  --python-version 3.11 -d "$tmp" "nvidia-cudnn-frontend==$version"
python3 - "$tmp/$wheel" "$sha256" "$tmp/unpacked" <<'PY'
import hashlib, sys, zipfile
path, want, out = sys.argv[1:4]
got = hashlib.sha256(open(path, "rb").read()).hexdigest()
if got != want:
    sys.exit(f"fetch-cudnn-frontend: {path}: sha256 {got}, expected {want}")
with zipfile.ZipFile(path) as z:
    members = [m for m in z.namelist() if m.startswith("include/") or "/licenses/" in m]
    z.extractall(out, members)
PY
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/unpacked/include" "$dest/include"
cp "$tmp"/unpacked/nvidia_cudnn_frontend-*/licenses/* "$dest/"
echo "$version" >"$dest/VERSION"
echo "fetch-cudnn-frontend: headers in $dest/include"
