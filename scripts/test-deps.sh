#!/usr/bin/env bash
# Installs (on Debian, when missing) and starts what the tests need:
# PostgreSQL, xmllint, kcat, tshark, Chromium, Prometheus (and promtool),
# iproute2 (a network namespace as an NF's host),
# net-snmp's snmptrapd and snmptranslate, libsmi's smilint and the IETF base
# MIB modules they read.
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
command -v snmptranslate >/dev/null 2>&1 || need+=(snmp)
command -v snmptrapd >/dev/null 2>&1 || need+=(snmptrapd)
command -v smilint >/dev/null 2>&1 || need+=(smitools)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v ip >/dev/null 2>&1 || need+=(iproute2)

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

# The IETF base MIB modules (SNMPv2-SMI, -TC, -CONF, -MIB) that every MIB
# imports: Debian keeps them out of main (snmp-mibs-downloader, non-free,
# fetches them from the IETF). They are taken from a pinned npm package that
# carries them (net-snmp for Node.js, MIT), fetched by npm from the registry
# it is configured with and checked by its sha256, into net-snmp's default
# MIB path, where snmp-mibs-downloader puts them.
mibdir=/usr/share/snmp/mibs/ietf
if [ ! -s "$mibdir/SNMPv2-SMI" ]; then
  echo "test-deps: installing the IETF base MIB modules in $mibdir" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent net-snmp@3.29.2 >/dev/null)
  echo "a89a7a7e29638b5353aa246563821172754ff1980bfc4b5dbd09dc1b217c6f04  $tmp/net-snmp-3.29.2.tgz" | sha256sum -c --quiet
  tar -xzf "$tmp/net-snmp-3.29.2.tgz" -C "$tmp"
  $SUDO mkdir -p "$mibdir"
  for m in SNMPv2-SMI SNMPv2-TC SNMPv2-CONF SNMPv2-MIB; do
    $SUDO cp "$tmp/package/lib/mibs/$m.mib" "$mibdir/$m"
  done
  rm -rf "$tmp"
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
