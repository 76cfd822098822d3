#!/usr/bin/env bash
# check-repo.sh refuses what must never be committed (scripts/test.sh runs it
# as the "repo-hygiene" step):
#   * a tracked executable: a binary (ELF, Mach-O, PE, or a file the shell
#     cannot read as text) anywhere, or a file with the executable bit that is
#     not a script starting with "#!";
#   * a tracked file over 1 MiB (MAX_BYTES) outside a testdata/ directory.
# Build output (*.test, binaries, jars) belongs in .cache/ or the Go build
# cache, downloads in ~/.m2 and the module cache.
#
# Usage: scripts/check-repo.sh [git-dir-root]     exit 1 lists every offender
set -uo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
MAX_BYTES=${MAX_BYTES:-1048576}
cd "$root" || exit 2

bad=0
while IFS= read -r -d '' entry; do
	mode=${entry%% *}
	path=${entry#*$'\t'}
	[ -f "$path" ] || continue # deleted in the work tree, or a submodule
	magic=$(head -c 4 "$path" | od -An -tx1 | tr -d ' \n')
	case $magic in
	7f454c46 | feedface | feedfacf | cefaedfe | cffaedfe | cafebabe | 4d5a*)
		echo "tracked executable (binary): $path"
		bad=1
		continue
		;;
	esac
	if [ "$mode" = 100755 ] && [ "$(head -c 2 "$path")" != '#!' ]; then
		echo "tracked executable (exec bit, not a #! script): $path"
		bad=1
	fi
	case /$path in
	*/testdata/*) continue ;;
	esac
	size=$(stat -c %s "$path")
	if [ "$size" -gt "$MAX_BYTES" ]; then
		echo "tracked file over $MAX_BYTES bytes outside testdata/: $path ($size bytes)"
		bad=1
	fi
done < <(git ls-files -s -z | tr '\0' '\n' | sed 's/^\([0-9]*\) [0-9a-f]* [0-9]*\t/\1 \t/' | tr '\n' '\0')

if [ "$bad" -ne 0 ]; then
	echo "check-repo: remove these from git (git rm --cached PATH) or move test inputs under testdata/"
	exit 1
fi
echo "check-repo: no tracked executables, no file over $MAX_BYTES bytes outside testdata/"
