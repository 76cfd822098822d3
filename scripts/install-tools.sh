#!/usr/bin/env bash
# install-tools.sh installs the pinned external tools the test suites use into
# .cache/bin at the module root (ignored by git). It is idempotent: a tool whose
# binary is already present at the pinned version is skipped, so CI can call it
# on every run and only the first run pays for the build.
#
# Tools:
#   versitygw   v1.8.0  S3-compatible server (posix backend) for s3store tests
#   staticcheck v0.8.2  linter run by CI
#   etcd        (go.mod) etcd server process for multi-process cluster tests,
#                        built with `go build` from go.etcd.io/etcd/server/v3
#                        at the version go.mod pins
#
# Usage: scripts/install-tools.sh [tool...]   (default: all)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/.cache/bin"
mkdir -p "$bin"

VERSITYGW_VERSION=v1.8.0
STATICCHECK_VERSION=v0.8.2

# install NAME MODULE_PATH VERSION: go install into $bin unless the stamp file
# records that exact version already (binaries do not all print versions the
# same way, so the stamp is the source of truth).
install() {
	local name="$1" pkg="$2" version="$3"
	local stamp="$bin/.$name.version"
	if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
		echo "install-tools: $name $version already in $bin"
		return 0
	fi
	echo "install-tools: installing $name $version into $bin"
	# go install pkg@version builds the tool from its own go.mod, so the
	# repo's go.mod is untouched; GOWORK=off keeps a go.work out of it too.
	GOWORK=off GOBIN="$bin" go install "$pkg@$version"
	echo "$version" >"$stamp"
}

want=("$@")
if [[ ${#want[@]} -eq 0 ]]; then
	want=(versitygw staticcheck etcd)
fi
for t in "${want[@]}"; do
	case "$t" in
	versitygw) install versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION" ;;
	staticcheck) install staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION" ;;
	etcd)
		# The server module go.mod already pins (the tests embed the same
		# version), built from the module cache: no separate download.
		ver="$(cd "$root" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
		stamp="$bin/.etcd.version"
		if [[ -x "$bin/etcd" && -f "$stamp" && "$(cat "$stamp")" == "$ver" ]]; then
			echo "install-tools: etcd $ver already in $bin"
		else
			echo "install-tools: building etcd $ver into $bin"
			(cd "$root" && go build -o "$bin/etcd" go.etcd.io/etcd/server/v3)
			echo "$ver" >"$stamp"
		fi
		;;
	*)
		echo "install-tools: unknown tool $t" >&2
		exit 2
		;;
	esac
done
