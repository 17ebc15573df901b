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
