#!/bin/sh
# Debian's redis-server 7.0 (what users deploy is Redis 7: deploy/compose.yaml), extracted -- not
# installed: the tests and benches take `redis-server` from PATH, and an installed one would
# silently change what every run measures -- under build/redis7, with the shared libraries it
# needs. Prints the path to give as REDIS_SERVER_BIN (tests/support/redis_server.py), e.g.
#   REDIS_SERVER_BIN=$(sh bench/redis7.sh) .venv/bin/python -m bench.engine_scale 100000 0 --listening 0
#   REDIS_SERVER_BIN=$(sh bench/redis7.sh) .venv/bin/pytest -q tests/bridge/store
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/build/redis7"
run="$dir/run-redis-server.sh"
if [ ! -x "$run" ]; then
  mkdir -p "$dir/debs"
  (cd "$dir/debs" && apt-get download redis-server redis-tools libjemalloc2 liblzf1 >&2)
  for deb in "$dir"/debs/*.deb; do dpkg -x "$deb" "$dir"; done
  cat >"$run" <<'WRAP'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/usr/bin/redis-server" "$@"
WRAP
  chmod +x "$run"
fi
echo "$run"
