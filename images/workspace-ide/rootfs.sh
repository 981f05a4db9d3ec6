#!/bin/sh
# Builds the root filesystem of the workspace IDE image (code-server on Debian trixie) without
# Docker, as ONE uncompressed, reproducible tar file: the image's only layer.
#
#   sh images/workspace-ide/rootfs.sh OUT.tar     as root on a Debian host; needs mmdebstrap,
#                                                 node (>= 18.17) with npm, GNU tar, unshare
#   ARCH=arm64 hack/emulate.sh arm64 sh images/workspace-ide/rootfs.sh OUT.tar
#
# ARCH is the Debian architecture of the image, the host's by default. For another one the
# native modules are cross-compiled (Debian's cross g++ and ARCH's Kerberos library, in a chroot
# of the host's architecture), and the image's packages are configured and its smoke test run
# under hack/emulate.sh's QEMU: the modules it loads are the cross-compiled ones.
#
# Two runs against the same mirror content give a byte-identical OUT.tar: SOURCE_DATE_EPOCH is
# fixed below, every mtime is clamped to it, entries are sorted and owners numeric.
# What it does, in order:
#   1. fetch      code-server and npm from the npm registry (host npm; cached under
#                 ${XDG_CACHE_HOME:-~/.cache}/cloudspace-operator/npm), checked against the
#                 integrity pinned below.
#   2. install    code-server's dependencies, exactly as its lock files say, with install
#                 scripts off (host node; the only step that downloads JavaScript).
#   3. compile    the native modules from source, in a throwaway trixie chroot with the build
#                 tools, with no network at all (a fresh network namespace).
#   4. rootfs     the image: trixie minbase + the runtime packages + the compiled tree, the
#                 launcher, the user coder.
#   5. tar        the reproducible tarball.
# Debian packages come from the mirror with apt's signature checks (the host's
# debian-archive-keyring holds trixie's keys); downloaded .debs are cached under
# ${XDG_CACHE_HOME:-~/.cache}/cloudspace-operator/debs (apt checks them against the signed
# indexes before it uses them). Nothing else is downloaded: code-server's own install scripts,
# which fetch ripgrep and prebuilt modules from elsewhere, never run; Debian's ripgrep stands in.
#
# The Dockerfile beside this file runs the same stages (--stage=install, --stage=compile,
# --stage=finish) and reads the same package lists (--list=...), so the two stay in step.
# The mounts mmdebstrap makes live in a private mount namespace (unshare -m); the host's mounts,
# network and sysctls are never changed.
set -eu

CODE_SERVER_VERSION=4.96.4
CODE_SERVER_INTEGRITY=sha512-w+ZpsKVKEFJ7ELe1fYejTn0gIT8kUtOppmXxUcBLPtKGokLY2Cfbi+JbmPK9CFoczP6jPKyh6iXdN/nt6WoSew==
# The npm that Node 20.19 ships (Debian splits npm out and packages an older one): it installs
# the dependencies and drives node-gyp, so the result does not depend on the host's npm.
NPM_VERSION=10.8.2
NPM_INTEGRITY=sha512-x/AIjFIKRllrhcb48dqUNAAZl0ig9+qMuN91RpZo3Cb2+zuibfh+KISl6+kVVyktDz230JKc208UkQwwMqyB+w==
# lib/vscode's lock file names @vscode/proxy-agent by a git URL (a GitHub fetch); the npm
# registry npm is configured with serves the very same tarball (same sha512, checked by npm
# against the lock's integrity).
PROXY_AGENT_PATH=@vscode/proxy-agent/-/proxy-agent-0.27.0.tgz

SUITE=trixie
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
SOURCE_DATE_EPOCH=1735689600 # 2025-01-01T00:00:00Z
export SOURCE_DATE_EPOCH

# What the image holds besides minbase. libgssapi-krb5-2: the kerberos module dlopen()s it.
RUNTIME_PACKAGES="nodejs git ca-certificates openssh-client ripgrep procps dumb-init
	libgssapi-krb5-2 libkrb5-3 less netbase"
# The throwaway compile chroot: Debian's node 20 and its headers (/usr/include/node), the C++
# toolchain node-gyp drives, and the Kerberos headers.
BUILD_PACKAGES="nodejs libnode-dev g++ make python3 libkrb5-dev"
# The compile chroot for another architecture: the same, with the cross compiler for it
# (${CROSS}-g++) and its Kerberos library to link against.
cross_packages() {
	echo "nodejs libnode-dev g++-$CROSS make python3 libkrb5-dev:$1"
}
# No documentation, manual pages or translations; licences (copyright files) stay.
DPKG_EXCLUDES="path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
path-exclude=/usr/share/linda/*"

# The native modules compiled from source, relative to /usr/lib/code-server/lib/vscode.
VSCODE_NATIVE="@parcel/watcher @vscode/spdlog kerberos native-watchdog node-pty"

say() { printf '%s\n' "$*" >&2; }
commas() { printf '%s\n' "$*" | tr ' ' ,; }
die() { say "rootfs.sh: $*"; exit 1; }

# integrity FILE: npm's sha512-<base64> of FILE.
integrity() {
	node -e 'const c = require("crypto"), f = require("fs");
process.stdout.write("sha512-" + c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"));' "$1"
}

# check_integrity FILE WANT
check_integrity() {
	got=$(integrity "$1")
	[ "$got" = "$2" ] || die "$1: integrity $got, want $2"
}

# npm_pinned ARGS...: the pinned npm, ignoring the host's global config but keeping the user's
# (registry, proxy and CA settings live there).
npm_pinned() {
	node "$NPM_DIR/bin/npm-cli.js" "$@"
}

# --- Stage: install TGZ NPM_TGZ DEST — code-server and its dependencies, no install script run.
# Needs the network (the npm registry). DEST ends up as /usr/lib/code-server, minus the natives.
stage_install() {
	tgz=$1 npm_tgz=$2 dest=$3
	check_integrity "$tgz" "$CODE_SERVER_INTEGRITY"
	check_integrity "$npm_tgz" "$NPM_INTEGRITY"
	NPM_DIR=${NPM_DIR:-/opt/npm}
	mkdir -p "$NPM_DIR" "$dest"
	tar -xzf "$npm_tgz" -C "$NPM_DIR" --strip-components=1 --no-same-owner
	tar -xzf "$tgz" -C "$dest" --strip-components=1 --no-same-owner
	node -e '
const fs = require("fs"), [file, url] = process.argv.slice(1);
const lock = JSON.parse(fs.readFileSync(file, "utf8"));
const p = lock.packages["node_modules/@vscode/proxy-agent"];
if (!p || !/^git\+ssh:/.test(p.resolved) || !p.integrity) throw new Error("unexpected @vscode/proxy-agent entry: " + JSON.stringify(p));
p.resolved = url;
fs.writeFileSync(file, JSON.stringify(lock, null, 2) + "\n");' \
		"$dest/lib/vscode/npm-shrinkwrap.json" "$(npm_pinned config get registry 2>/dev/null | sed 's#/*$#/#')$PROXY_AGENT_PATH"
	# As upstream's postinstall.sh does (npm install --omit=dev in the same three places), but
	# with `npm ci` (exactly the lock files) and no scripts. lib/vscode's lock leaves out the
	# optional peer tslib, which npm >= 7 would otherwise add: --legacy-peer-deps keeps to it.
	set -- --omit=dev --ignore-scripts --install-strategy=hoisted --no-audit --no-fund \
		--update-notifier=false --loglevel=warn
	(cd "$dest" && npm_pinned ci "$@")
	(cd "$dest/lib/vscode" && npm_pinned ci --legacy-peer-deps "$@")
	(cd "$dest/lib/vscode/extensions" && npm_pinned ci "$@")
}

# --- Stage: compile DIR — the native modules from source, offline; then drops what a Linux x64
# image never loads. Runs where node 20, node's headers and the build tools are (the compile
# chroot, or the Dockerfile's build stage), with the pinned npm in $NPM_DIR (/opt/npm).
stage_compile() {
	dir=$1
	NPM_DIR=${NPM_DIR:-/opt/npm}
	scratch=$(mktemp -d)
	: >"$scratch/npmrc"
	: >"$scratch/npmrc-global"
	# No registry: headers come from nodedir (Debian's libnode-dev), node-pre-gyp builds instead
	# of downloading; offline makes any attempt to fetch fail instead of hang.
	npm_config_nodedir=/usr npm_config_build_from_source=true npm_config_offline=true \
		npm_config_cache=$scratch/cache npm_config_userconfig=$scratch/npmrc \
		npm_config_globalconfig=$scratch/npmrc-global npm_config_update_notifier=false \
		npm_config_jobs=2 PYTHONDONTWRITEBYTECODE=1
	export npm_config_nodedir npm_config_build_from_source npm_config_offline npm_config_cache \
		npm_config_userconfig npm_config_globalconfig npm_config_update_notifier npm_config_jobs \
		PYTHONDONTWRITEBYTECODE
	# Cross-compiling (CROSS is the target's GNU triplet, NPM_ARCH its name to node-gyp): the
	# target's compiler and linker, and node-gyp's target_arch.
	if [ -n "${CROSS:-}" ]; then
		CC=$CROSS-gcc CXX=$CROSS-g++ LINK=$CROSS-g++ AR=$CROSS-ar npm_config_arch=$NPM_ARCH \
			npm_config_target_arch=$NPM_ARCH
		export CC CXX LINK AR npm_config_arch npm_config_target_arch
	fi
	# argon2 (password hashing) is code-server's own; the rest are VS Code's.
	(cd "$dir" && npm_pinned rebuild --foreground-scripts argon2)
	# shellcheck disable=SC2086 # a list of package names
	(cd "$dir/lib/vscode" && npm_pinned rebuild --foreground-scripts $VSCODE_NATIVE)
	# What upstream's postinstall.sh does besides installing (the ripgrep and node links are
	# made by --stage=finish, where /usr/bin/rg and /usr/bin/node exist).
	(cd "$dir/lib/vscode/extensions" && node ./postinstall.mjs >/dev/null)
	ln -sfn node_modules "$dir/lib/vscode/node_modules.asar"
	ln -sfn code-linux.sh "$dir/lib/vscode/bin/remote-cli/code-server"
	ln -sfn browser-linux.sh "$dir/lib/vscode/bin/helpers/browser.sh"
	rm -rf "$scratch"

	# Keep each compiled module's build/Release/*.node, nothing else of the build.
	rm -rf "$dir"/node_modules/argon2/build-tmp-*
	keep=$(mktemp -d)
	for m in $VSCODE_NATIVE; do
		b=$dir/lib/vscode/node_modules/$m/build
		mv "$b"/Release/*.node "$keep/" || die "$m: no build/Release/*.node"
		rm -rf "$b" && mkdir -p "$b/Release" && mv "$keep"/*.node "$b/Release/"
	done
	rmdir "$keep"
	# Binaries for other systems shipped in registry packages (Windows, macOS, musl; @parcel's
	# Linux one is replaced by the build above), and source maps (150 MiB; only a debugger
	# reads them). npm's hidden lock files record the host's npm settings: npm rewrites them.
	rm -rf "$dir/lib/vscode/node_modules/@parcel/watcher/prebuilds" \
		"$dir/lib/vscode/node_modules/node-pty/third_party" \
		"$dir/lib/vscode/node_modules/@vscode/windows-process-tree/build"
	find "$dir" -type f \( -name '*.js.map' -o -name '*.mjs.map' -o -name '*.cjs.map' \
		-o -name '*.css.map' -o -name '*.ts.map' \) -delete
	find "$dir" -type f -path '*/node_modules/.package-lock.json' -delete
}

# --- Stage: finish ROOT — what turns a Debian root with the runtime packages and
# /usr/lib/code-server into the image: the launcher, links, the user, a smoke test.
# ROOT is / in the Dockerfile and the chroot directory here.
stage_finish() {
	root=$1
	in_root() { if [ "$root" = / ]; then "$@"; else chroot "$root" "$@"; fi; }
	cs=$root/usr/lib/code-server
	[ -f "$cs/out/node/entry.js" ] || die "$cs: no code-server"
	# code-server's outer process gives its inner one 10 s to load and answer, then exits 1.
	# Measured on the real cluster: under the IDE's CPU limit on a node whose cores are all
	# busy, the inner process needed longer ("error timed out", exit 1, CrashLoopBackOff), and
	# a workspace failed to start. The Workspace's start timeout (5 minutes by default) judges a
	# slow start instead; test.sh starts one whose inner process takes 15 s.
	wrapper=$cs/out/node/wrapper.js
	grep -q '^const timeoutInterval = 10000;' "$wrapper" || die "$wrapper: no 10 s handshake timeout to lengthen"
	sed -i 's/^const timeoutInterval = 10000;/const timeoutInterval = 300000;/' "$wrapper"
	# Like upstream's standalone release: bin/code-server runs `node <root> "$@"`; VS Code's
	# `code` and browser helpers run $ROOT/lib/node. Debian's ripgrep stands in for the one
	# @vscode/ripgrep's install script would download.
	cat >"$root/usr/bin/code-server" <<'EOF'
#!/bin/sh
exec /usr/bin/node /usr/lib/code-server "$@"
EOF
	chmod 0755 "$root/usr/bin/code-server"
	ln -sfn /usr/bin/node "$cs/lib/node"
	mkdir -p "$cs/lib/vscode/node_modules/@vscode/ripgrep/bin"
	ln -sfn /usr/bin/rg "$cs/lib/vscode/node_modules/@vscode/ripgrep/bin/rg"

	# The pod's user: uid and gid 1000, home /home/coder (a volume in the pod).
	in_root groupadd --gid 1000 coder
	in_root useradd --uid 1000 --gid 1000 --home-dir /home/coder --create-home \
		--shell /bin/bash --no-log-init coder
	chmod 1777 "$root/tmp"

	# Smoke test: every native module loads (kerberos dlopen()s libgssapi_krb5 on first use,
	# so it is called), rg runs through VS Code's path, code-server starts far enough to answer.
	home=$(in_root mktemp -d) # code-server writes its default config even for --version
	in_root env -i HOME="$home" PATH=/usr/bin:/bin /usr/bin/node -e '
const base = "/usr/lib/code-server/lib/vscode/node_modules/";
require("/usr/lib/code-server/node_modules/argon2");
for (const m of ["@parcel/watcher", "@vscode/spdlog", "native-watchdog", "node-pty"]) require(base + m);
const k = require(base + "kerberos");
k.initializeClient("HTTP@localhost", {}, (err) => {
  if (err && /dlopen|\.so/.test(String(err))) { console.error("kerberos:", String(err)); process.exit(1); }
});
require("child_process").execFileSync(require(base + "@vscode/ripgrep").rgPath, ["--version"], { stdio: "ignore" });'
	v=$(in_root env -i HOME="$home" PATH=/usr/bin:/bin /usr/bin/code-server --version) \
		|| die "code-server --version failed"
	rm -rf "${root%/}$home"
	printf '%s\n' "$v" | grep -q "^$CODE_SERVER_VERSION " || die "code-server --version: $v"
}

# --- Host build (no --stage): stages 1–5 above.
build() {
	out=$1
	case $out in /*) ;; *) out=$(pwd)/$out ;; esac
	[ -d "$(dirname "$out")" ] || die "$(dirname "$out"): no such directory"
	[ "$(id -u)" = 0 ] || die "run as root (mmdebstrap in root mode, chroot, mknod)"
	for c in mmdebstrap node npm tar unshare chroot; do
		command -v "$c" >/dev/null || die "$c not found (apt-get install mmdebstrap nodejs npm)"
	done
	tar --version | grep -q 'GNU tar' || die "GNU tar needed"

	self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/cloudspace-operator
	start=$(date +%s)
	step() { say "[$(($(date +%s) - start))s] $*"; }

	work=$(mktemp -d "${TMPDIR:-/tmp}/workspace-ide.XXXXXX")
	# Mounts exist only in the unshare'd namespaces, gone with them: plain files remain here.
	trap 'rm -rf "$work"' EXIT
	trap 'exit 130' INT TERM HUP
	chmod 0755 "$work"
	mkdir -p "$cache/npm" "$cache/debs" "$work/npm-cache" "$work/debs" "$work/tmp" \
		"$work/src" "$work/built"
	npm_config_cache=$work/npm-cache
	npm_config_update_notifier=false
	export npm_config_cache npm_config_update_notifier

	step "fetch: code-server $CODE_SERVER_VERSION and npm $NPM_VERSION from the npm registry"
	fetch code-server "$CODE_SERVER_VERSION" "$CODE_SERVER_INTEGRITY"
	fetch npm "$NPM_VERSION" "$NPM_INTEGRITY"

	step "install: code-server's dependencies (npm ci, no install scripts)"
	NPM_DIR=$work/npm stage_install "$cache/npm/code-server-$CODE_SERVER_VERSION.tgz" \
		"$cache/npm/npm-$NPM_VERSION.tgz" "$work/src/code-server" >"$work/install.log" 2>&1 \
		|| { tail -n 40 "$work/install.log" >&2; die "install failed"; }

	# Both chroots: signed indexes from the mirror, the .deb cache synced in and out.
	# shellcheck disable=SC2016 # $1 is the chroot, for mmdebstrap's hook shell
	set -- --mode=root --variant=minbase --skip=essential/unlink \
		--setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
		--setup-hook="sync-in '$cache/debs' /var/cache/apt/archives" \
		--customize-hook="sync-out /var/cache/apt/archives '$work/debs'"
	mirrors() {
		printf '%s\n' "deb $DEBIAN_MIRROR $SUITE main" "deb $DEBIAN_MIRROR $SUITE-updates main" \
			"deb $DEBIAN_SECURITY_MIRROR $SUITE-security main"
	}
	mirrors >"$work/sources.list"

	# shellcheck disable=SC2086 # word lists
	build_include=$(commas $BUILD_PACKAGES) runtime_include=$(commas $RUNTIME_PACKAGES)
	host_arch=$(dpkg --print-architecture) arch=${ARCH:-$(dpkg --print-architecture)} cross_env=
	build_arches=$host_arch
	if [ "$arch" != "$host_arch" ]; then
		case $arch in
		arm64) CROSS=aarch64-linux-gnu NPM_ARCH=arm64 ;;
		*) die "ARCH=$arch: no cross compiler set up (arm64 is)" ;;
		esac
		# shellcheck disable=SC2046 # a word list
		build_include=$(commas $(cross_packages "$arch"))
		cross_env="CROSS=$CROSS NPM_ARCH=$NPM_ARCH" build_arches=$host_arch,$arch
	fi

	step "compile: native modules for $arch in a $SUITE chroot, without network"
	# shellcheck disable=SC2016 # $1 is the chroot, for mmdebstrap's hook shell
	TMPDIR=$work/tmp unshare --mount --propagation private mmdebstrap "$@" \
		--architectures="$build_arches" --include="$build_include" \
		--customize-hook='mkdir -p "$1/usr/lib/code-server" "$1/opt/npm" "$1/opt/build"' \
		--customize-hook="sync-in '$work/src/code-server' /usr/lib/code-server" \
		--customize-hook="sync-in '$work/npm' /opt/npm" \
		--customize-hook="copy-in '$self' /opt/build" \
		--customize-hook='unshare --net chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp '"$cross_env"' sh /opt/build/'"$(basename "$self")"' --stage=compile /usr/lib/code-server' \
		--customize-hook="sync-out /usr/lib/code-server '$work/built'" \
		"$SUITE" /dev/null "$work/sources.list" >"$work/compile.log" 2>&1 \
		|| { tail -n 60 "$work/compile.log" >&2; die "compile failed"; }

	step "rootfs: $SUITE minbase for $arch, runtime packages, code-server, user coder"
	set -f # the patterns are dpkg's, not the shell's
	for o in $DPKG_EXCLUDES; do set -- "$@" --dpkgopt="$o"; done
	set +f
	# shellcheck disable=SC2016 # $1 is the chroot, for mmdebstrap's hook shell
	TMPDIR=$work/tmp unshare --mount --propagation private mmdebstrap "$@" \
		--arch="$arch" --include="$runtime_include" \
		--customize-hook='mkdir -p "$1/usr/lib/code-server"' \
		--customize-hook="sync-in '$work/built' /usr/lib/code-server" \
		--customize-hook="sh '$self' --stage=finish \"\$1\"" \
		--customize-hook='rm -f "$1/etc/hostname" "$1/etc/resolv.conf"' \
		"$SUITE" "$work/rootfs" "$work/sources.list" >"$work/rootfs.log" 2>&1 \
		|| { tail -n 60 "$work/rootfs.log" >&2; die "rootfs failed"; }
	# What dpkg's path-exclude let through (essential packages, which mmdebstrap extracts first,
	# and symbolic links): keep copyright files and the links of one package's doc directory to
	# another's (libgcc-s1 -> gcc-14-base), which hold copyright files.
	find "$work/rootfs/usr/share/doc" -mindepth 2 ! -type d ! -name copyright -delete
	find "$work/rootfs/usr/share/doc" -mindepth 1 -maxdepth 1 -type f -delete
	find "$work/rootfs/usr/share/doc" -mindepth 1 -depth -type d -empty -delete
	for d in man info lintian linda; do
		[ ! -d "$work/rootfs/usr/share/$d" ] || find "$work/rootfs/usr/share/$d" -mindepth 1 -delete
	done
	find "$work/rootfs/usr/share/locale" -mindepth 1 ! -name locale.alias -delete 2>/dev/null || :
	# The runtime makes /dev, /proc, /sys; no device node ships in the layer. /run and /tmp are
	# empty already (mmdebstrap), the apt lists and cache too.
	find "$work/rootfs/dev" -mindepth 1 -delete
	rm -rf "$work/rootfs/var/lib/apt/lists"/* "$work/rootfs/var/cache/apt"/*

	step "tar: $out"
	find "$work/rootfs" -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort >"$work/top"
	tar --create --file="$out.tmp" --directory="$work/rootfs" --files-from="$work/top" \
		--format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		--sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --numeric-owner \
		--no-acls --no-xattrs --no-selinux --one-file-system
	mv -f "$out.tmp" "$out"

	# Keep the .debs this build used (and only those) for the next one.
	rm -rf "$cache/debs.old"
	mv "$cache/debs" "$cache/debs.old" && mkdir "$cache/debs" \
		&& find "$work/debs" -maxdepth 1 -name '*.deb' -exec mv -t "$cache/debs" {} + \
		&& rm -rf "$cache/debs.old"
	step "done: $(($(stat -c %s "$out") / 1048576)) MiB, sha256 $(sha256sum "$out" | cut -d' ' -f1)"
}

# fetch NAME VERSION INTEGRITY: NAME-VERSION.tgz from the npm registry into the cache, checked.
fetch() {
	f=$cache/npm/$1-$2.tgz
	if [ -f "$f" ] && [ "$(integrity "$f")" = "$3" ]; then return 0; fi
	mkdir -p "$work/dl"
	(cd "$work/dl" && npm pack --silent "$1@$2" >/dev/null) || die "npm pack $1@$2 failed"
	check_integrity "$work/dl/$1-$2.tgz" "$3"
	mv -f "$work/dl/$1-$2.tgz" "$f.tmp" && mv -f "$f.tmp" "$f"
}

# shellcheck disable=SC2086 # the package lists are words: printed on one line, one space apart
case ${1:-} in
--stage=install) shift && stage_install "$@" ;;
--stage=compile) shift && stage_compile "$@" ;;
--stage=finish) shift && stage_finish "$@" ;;
--list=runtime) echo $RUNTIME_PACKAGES ;;
--list=build) echo $BUILD_PACKAGES ;;
--list=dpkg-excludes) printf '%s\n' "$DPKG_EXCLUDES" ;;
-* | '') say "usage: sh $0 OUT.tar" && exit 2 ;;
*) [ $# -eq 1 ] || { say "usage: sh $0 OUT.tar" && exit 2; } && build "$1" ;;
esac
