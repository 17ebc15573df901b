#!/usr/bin/env bash
# Assembles the portable runtime kit (`make portable`): KITDIR/bin (the
# given binaries, stripped), KITDIR/lib (every shared library they need
# that is not glibc's, resolved by ldd on this machine), KITDIR/run (the
# launcher, run.sh), KITDIR/check (tests/gpu/, the hardware check) and
# KITDIR/kit.json: the highest GLIBC_x.y any of them needs (objdump -T),
# the x86-64 level, the compiler flags, each file's size. Built in a
# temporary sibling and moved into place, kit.json last, so a failed run
# leaves the previous kit or none. Usage: kit.sh KITDIR CFLAGS BIN...
set -euo pipefail
kit=$1 cflags=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../../.." && pwd)
mkdir -p "$kit"
tmp=$(mktemp -d "$kit/.kit.tmp.XXXXXX")
trap 'rm -rf "$tmp" "$kit/.kit.json.part.$$"' EXIT
mkdir -p "$tmp/bin" "$tmp/lib" "$tmp/check"
for b in "$@"; do
	strip -o "$tmp/bin/$(basename "$b")" "$b"
done
# glibc's own libraries are the target machine's; everything else ships
glibc_re='^(libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|ld-linux-x86-64|linux-vdso)\.so'
while read -r name path; do
	[[ $name =~ $glibc_re ]] && continue
	cp -L "$path" "$tmp/lib/$name"
	chmod 0644 "$tmp/lib/$name"
done < <(ldd "$tmp"/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u)
if ldd "$tmp"/bin/* | grep -q 'not found'; then
	echo "kit.sh: a library the binaries need is not installed:" >&2
	ldd "$tmp"/bin/* | grep 'not found' >&2
	exit 1
fi
install -m 0755 "$here/run.sh" "$tmp/run"
# the hardware check (tests/gpu/): the launcher's --check runs check/run.sh
cp -R "$src/tests/gpu/." "$tmp/check/"
floor=$(objdump -T "$tmp"/bin/* "$tmp"/lib/* | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' |
	sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1)
level=v1
case " $cflags " in
*" -march=x86-64-v4 "*) level=v4 ;;
*" -march=x86-64-v3 "*) level=v3 ;;
*" -march=x86-64-v2 "*) level=v2 ;;
*" -march="*) echo "kit.sh: CFLAGS '$cflags': expected -march=x86-64-v1..v4, not a CPU model" >&2; exit 1 ;;
esac
{
	printf '{\n  "format": 1,\n  "glibc_floor": "%s",\n  "x86_64_level": "%s",\n' "$floor" "$level"
	printf '  "cflags": "%s",\n  "built_on": "%s",\n  "files": [\n' "$cflags" \
		"$(ldd --version | head -n 1 | sed 's/"//g')"
	first=1
	total=0
	while read -r f; do
		sz=$(stat -c %s "$tmp/$f")
		total=$((total + sz))
		[ $first = 1 ] || printf ',\n'
		first=0
		printf '    {"path": "%s", "bytes": %d}' "$f" "$sz"
	done < <(cd "$tmp" && find . -type f | sed 's|^\./||' | sort)
	printf '\n  ],\n  "bytes": %d\n}\n' "$total"
} > "$kit/.kit.json.part.$$"
for d in bin lib check run; do
	rm -rf "${kit:?}/$d"
	mv "$tmp/$d" "$kit/$d"
done
mv "$kit/.kit.json.part.$$" "$kit/kit.json"
echo "portable kit: $kit: glibc >= $floor, x86-64-$level, $(du -sh --exclude=obj "$kit" | cut -f1) ($(ls "$kit/lib" | tr '\n' ' '))" >&2
