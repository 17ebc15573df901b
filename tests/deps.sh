#!/usr/bin/env bash
# Installs what building and testing need, only when missing: Debian packages
# (CMocka, OpenBLAS, a text corpus) and a Python venv with the independent
# reference tokenizer. Idempotent; quiet when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
have libcmocka-dev || need+=(libcmocka-dev)
have libopenblas-dev || need+=(libopenblas-dev)
have libmicrohttpd-dev || need+=(libmicrohttpd-dev)  # specwright serve
{ command -v nginx || [ -x /usr/sbin/nginx ]; } >/dev/null || need+=(nginx-light)  # serve scale-out test (upstreams on loopback)
command -v curl >/dev/null || need+=(curl)
command -v clang >/dev/null || need+=(clang)
command -v bible >/dev/null || need+=(bible-kjv)  # tokenizer test corpus (KJV text, >4 MB)
# Debian's PyTorch, for the transformers/PyTorch cross-checks (test_qwen,
# test_eagle3, the GPU check's dry run): without it those parts would skip
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
if [ ${#need[@]} -gt 0 ]; then
	echo "deps: installing ${need[*]}"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Python side: only independent reference implementations live here (HF
# tokenizers for the tokenizer check). Kept in build/venv, git-ignored.
VENV=build/venv
PY_PKGS="numpy gguf tokenizers==0.22.1 sentencepiece protobuf openai==3.54.0"
if [ ! -f $VENV/.ok ] || [ "$(cat $VENV/.ok)" != "$PY_PKGS" ]; then
	echo "deps: creating $VENV ($PY_PKGS)"
	python3 -m venv $VENV
	$VENV/bin/pip install -q --disable-pip-version-check $PY_PKGS
	echo "$PY_PKGS" > $VENV/.ok
fi

# The transformers cross-check of Qwen2/Qwen3 (tests/test_qwen.c runs
# tests/tools/hf_tiny.py): transformers 4.51 (the first with Qwen3) on
# Debian's python3-torch, in build/venv-hf (git-ignored) made with
# /usr/bin/python3 --system-site-packages so it sees that torch (the venv
# above has none). About 15 s and 170 MB when made; skipped, and the test
# with it, only where python3-torch could not be installed above.
HFVENV=build/venv-hf
HF_PKGS="transformers==4.51.3 safetensors==0.8.0 gguf==0.19.0"
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 &&
   { [ ! -f $HFVENV/.ok ] || [ "$(cat $HFVENV/.ok)" != "$HF_PKGS" ]; }; then
	echo "deps: creating $HFVENV ($HF_PKGS over Debian's torch)"
	/usr/bin/python3 -m venv --system-site-packages $HFVENV
	$HFVENV/bin/pip install -q --disable-pip-version-check $HF_PKGS
	echo "$HF_PKGS" > $HFVENV/.ok
fi
