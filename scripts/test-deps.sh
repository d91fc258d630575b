#!/usr/bin/env bash
# Installs (on Debian, when missing) and starts what the tests need:
# PostgreSQL, xmllint, kcat, tshark, Chromium, Prometheus (and promtool).
# Idempotent; prints the
# PostgreSQL DSN the tests use on its last line.
set -euo pipefail

need=()
command -v pg_ctlcluster >/dev/null 2>&1 || need+=(postgresql)
command -v xmllint >/dev/null 2>&1 || need+=(libxml2-utils)
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)

SUDO=""
ASPG="sudo -u postgres"
if [ "$(id -u)" -eq 0 ]; then ASPG="runuser -u postgres --"; else SUDO="sudo"; fi

if [ ${#need[@]} -gt 0 ]; then
  echo "test-deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

# Start the first PostgreSQL cluster found, creating one if none exists.
ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h 2>/dev/null | grep -q .; then
  $SUDO pg_createcluster "$ver" main >&2
fi
read -r cver cname cport cstatus _ < <(pg_lsclusters -h | head -1)
if [ "$cstatus" != "online" ]; then
  $SUDO pg_ctlcluster "$cver" "$cname" start >&2
fi
for i in $(seq 1 30); do
  $ASPG psql -p "$cport" -qAtc 'select 1' >/dev/null 2>&1 && break
  sleep 0.5
done
$ASPG psql -p "$cport" -qAtc "select 1 from pg_roles where rolname='signalbox'" | grep -q 1 ||
  $ASPG psql -p "$cport" -qc "create role signalbox login password 'signalbox' createdb" >&2
$ASPG psql -p "$cport" -qAtc "select 1 from pg_database where datname='signalbox_test'" | grep -q 1 ||
  $ASPG psql -p "$cport" -qc "create database signalbox_test owner signalbox" >&2

echo "postgres://signalbox:signalbox@127.0.0.1:${cport}/signalbox_test?sslmode=disable"
