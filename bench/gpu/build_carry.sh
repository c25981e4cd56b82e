#!/usr/bin/env bash
# Build, on this CPU machine, what the GPU harness carries to the H200 (all ignored by git):
#   .carry-site/site.tar.xz   a cp312 site folder: sglang 0.5.12, sglang-kernel (Hopper parts only:
#                             FlashAttention-3, sm100 and FlashMLA dropped; the harness serves with
#                             --attention-backend triton), and the packages the GPU image lacks
#   .carry-fi/fidata.tar.xz   flashinfer's JIT sources and headers (its norm kernels build on first use)
#   .carry-lib/libnuma.so.1   Debian's libnuma1 (sgl_kernel links it; the image may not have it)
# Usage (from the repository root): bash bench/gpu/build_carry.sh      (skips what is already built)
# The JIT caches of a finished run come back as $OUT/jitcache.tgz; copy it to .carry-jit/ to skip
# the ~60 s of kernel compilation on the next machine.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-/tmp/patchkit-gpu-carry}
cd "$ROOT"
if [ -s .carry-site/site.tar.xz ] && [ -s .carry-fi/fidata.tar.xz ] && [ -z "${FORCE:-}" ]; then
  echo "carry set already built (FORCE=1 rebuilds):"; ls -la .carry-site .carry-fi .carry-lib 2>/dev/null; exit 0
fi
rm -rf "$WORK"; mkdir -p "$WORK/wheels" "$WORK/site"
# sglang 0.5.12's own pins where it has them; the rest are what the image (KINDS.md's list) lacks.
PACKAGES=(
  sglang==0.5.12 sglang-kernel==0.4.2.post2 flashinfer_python==0.6.11.post1 apache-tvm-ffi==0.1.9
  transformers==5.6.0 tokenizers==0.22.2 fastapi==0.136.1 starlette==1.10.0 pydantic==2.13.4
  pydantic_core==2.46.4 annotated-types==0.8.0 typing-inspection==0.4.5 uvicorn==0.47.0
  orjson==3.13.0 pyzmq==27.3.0 setproctitle==1.3.8 pybase64==1.5.1 msgspec==0.23.0
  partial-json-parser==0.2.1.1.post7 openai==2.6.1 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
  dill==0.4.1 gguf==0.19.0 compressed-tensors==0.20.1 loguru==0.7.3 ipython==9.18.1
  decorator==5.3.1 jedi==0.20.1 parso==0.8.7 matplotlib-inline==0.2.2 pexpect==4.9.0
  ptyprocess==0.7.0 prompt-toolkit==3.0.53 wcwidth==0.9.4 stack-data==0.6.3 asttokens==3.0.2
  executing==2.3.0 pure-eval==0.2.4 traitlets==5.16.1 ipython-pygments-lexers==1.1.1
  soundfile==0.13.1 cffi==2.1.1 pycparser==3.12 python-multipart==0.0.34 interegular==0.3.3
  datasets==5.2.0 multiprocess==0.70.19
  # patchkit itself (the checkout travels; these are its dependencies)
  invoke==3.0.3 unidiff==1.0.1 GitPython==3.2.1 gitdb==4.0.12 smmap==5.0.3
)
PLATFORMS=()
for p in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 \
         manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do PLATFORMS+=(--platform "${p}_x86_64"); done
PIPX=(--only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}")
python3 -m pip download -q --no-deps "${PIPX[@]}" -d "$WORK/wheels" "${PACKAGES[@]}"
python3 -m pip install -q --no-deps --no-compile --no-index "${PIPX[@]}" --target "$WORK/site" "$WORK"/wheels/*.whl
cd "$WORK/site"
rm -rf sgl_kernel/flash_ops.abi3.so sgl_kernel/sm100 sgl_kernel/flashmla_ops.abi3.so \
       lib lib64 include share bin jedi/third_party/typeshed _mscclpp*.so
mkdir -p "$ROOT/.carry-site" "$ROOT/.carry-fi" "$ROOT/.carry-lib"
FI=(cccl csrc cutlass include spdlog)
tar -C flashinfer/data -cf - "${FI[@]}" | xz -T0 -6 > "$ROOT/.carry-fi/fidata.tar.xz"
for d in "${FI[@]}"; do rm -rf "flashinfer/data/$d"; done
find . -name __pycache__ -type d -prune -exec rm -rf {} +
tar -cf - . | xz -T0 -6 > "$ROOT/.carry-site/site.tar.xz"
cd "$WORK"
if apt-get download libnuma1 >/dev/null 2>&1; then
  dpkg -x libnuma1_*.deb numa && cp -L numa/usr/lib/x86_64-linux-gnu/libnuma.so.1 "$ROOT/.carry-lib/"
else echo "note: libnuma1 not downloaded (only needed where the GPU image lacks libnuma.so.1)"; fi
cd "$ROOT"; du -sh .carry-site .carry-fi .carry-lib
